/* The report's model: series, rules, verdicts and findings gathered from the inputs, shared by
 * the summary / CSV / terminal writers (report.c) and the HTML page (html.c). Private to
 * reports/. */
#ifndef KVFUZZ_REPORTS_REPORT_INTERNAL_H
#define KVFUZZ_REPORTS_REPORT_INTERNAL_H

#include <stdio.h>

#include "kvfuzz/report.h"
#include "kvfuzz/verdict.h"
#include "stats_internal.h"

typedef struct kvf__rseries {
    char name[192];
    size_t input;
    const kvf_stats *st;
    const char *kernel;
    const kvf__group **groups; /* this kernel's groups in the input, sorted by rule */
    size_t ngroups;
    const kvf__group *primary;    /* rule-independent charts come from this group (see report.c) */
    const kvf__kernel_runs *runs; /* may be NULL */
    const char *color;
} kvf__rseries;

typedef struct kvf__rfinding {
    char *stem;                   /* "<class>-<hash>" */
    char *cls;                    /* the part before the last '-' */
    char *hash;                   /* the part after it */
    char *kvfz;                   /* link relative to the output directory, or NULL when absent */
    char *json;                   /* likewise */
    char *kernel, *rule, *detail; /* from the .json when it has such string members */
    char *dir;                    /* the findings directory it came from */
} kvf__rfinding;

typedef struct kvf__rmodel {
    const kvf_report_input *inputs;
    size_t ninputs;
    char **labels; /* [ninputs] */
    kvf__rseries *series;
    size_t nseries;
    const char **rules; /* union over the series, "strict" first, then by name */
    size_t nrules;
    kvf__rfinding *findings;
    size_t nfindings;
    char **finding_dirs;      /* directories looked at */
    char **finding_dir_notes; /* [nfinding_dirs] NULL, or why it could not be read */
    size_t nfinding_dirs;
    const char *title;
    char generated[32];
    const char *out_dir;
    char *out_abs; /* absolute output directory, for relative links */
} kvf__rmodel;

/* The group of a series for one rule, or NULL. */
const kvf__group *kvf__rseries_group(const kvf__rseries *s, const char *rule);

/* The verdict of a series under one rule (g one of its groups), with the number of finding
 * signatures listed for its kernel and rule (-1 when the report has no findings directory). */
void kvf__report_verdict(const kvf__rmodel *m, const kvf__rseries *s, const kvf__group *g,
                         kvf_verdict_counts *out);
/* Kernel errors, crashes, hangs and nondeterminism of a series. */
int64_t kvf__rseries_run_errors(const kvf__rseries *s);
/* 1 when the series fails a rule (a kernel failure) or had a run error. */
int kvf__report_series_fails(const kvf__rmodel *m, const kvf__rseries *s);

/* Link from the output directory to a file (relative when both resolve, else absolute);
 * malloc'd, NULL when the file does not exist. */
char *kvf__report_link(const kvf__rmodel *m, const char *file);

/* Link for a worst element's case: "cases/<hash>.kvfz" when the bytes were embedded, else a
 * link to its path if that file exists, else NULL (malloc'd). */
char *kvf__report_case_link(const kvf__rmodel *m, const kvf__case_info *ci);

/* Builds the model from the inputs (model.c): labels, series, rules, findings. On failure the
 * model is still safe to free. Errors: KVF_EIO (output or named findings directory), KVF_ENOMEM. */
int kvf__report_model_build(kvf__rmodel *m, const kvf_report_input *inputs, size_t n,
                            const kvf_report_opts *opts, kvf_error *err);
void kvf__report_model_free(kvf__rmodel *m);

/* Short numbers for tables: 3 significant digits, or "inf" / "NaN". */
void kvf__fmt_num(char *buf, size_t size, double x);

/* The page (html.c), which reads the model and nothing else. -1 (errno set) on failure. */
int kvf__report_write_html(FILE *f, const kvf__rmodel *m);

#endif
