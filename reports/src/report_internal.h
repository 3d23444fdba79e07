/* The report's model: series, rules, verdicts and findings gathered from the inputs, shared by
 * the summary / CSV / terminal writers (report.c) and the HTML page (html.c). Private to
 * reports/. */
#ifndef KVFUZZ_REPORTS_REPORT_INTERNAL_H
#define KVFUZZ_REPORTS_REPORT_INTERNAL_H

#include <stdio.h>

#include "kvfuzz/report.h"
#include "kvfuzz/verdict.h"
#include "stats_internal.h"

typedef struct rseries {
    char name[192];
    size_t input;
    const kvf_stats *st;
    const char *kernel;
    const kvf_group **groups; /* this kernel's groups in the input, sorted by rule */
    size_t ngroups;
    const kvf_group *primary;    /* rule-independent charts come from this group (see report.c) */
    const kvf_kernel_runs *runs; /* may be NULL */
    const char *color;
} rseries;

typedef struct rfinding {
    char *stem;                   /* "<class>-<hash>" */
    char *cls;                    /* the part before the last '-' */
    char *hash;                   /* the part after it */
    char *kvfz;                   /* link relative to the output directory, or NULL when absent */
    char *json;                   /* likewise */
    char *kernel, *rule, *detail; /* from the .json when it has such string members */
    char *dir;                    /* the findings directory it came from */
} rfinding;

typedef struct rmodel {
    const kvf_report_input *inputs;
    size_t ninputs;
    char **labels; /* [ninputs] */
    rseries *series;
    size_t nseries;
    const char **rules; /* union over the series, "strict" first, then by name */
    size_t nrules;
    rfinding *findings;
    size_t nfindings;
    char **finding_dirs;      /* directories looked at */
    char **finding_dir_notes; /* [nfinding_dirs] NULL, or why it could not be read */
    size_t nfinding_dirs;
    const char *title;
    char generated[32];
    const char *out_dir;
    char *out_abs; /* absolute output directory, for relative links */
} rmodel;

/* The group of a series for one rule, or NULL. */
const kvf_group *rseries_group(const rseries *s, const char *rule);

/* The verdict of a series under one rule (g one of its groups), with the number of finding
 * signatures listed for its kernel and rule (-1 when the report has no findings directory). */
void report_verdict(const rmodel *m, const rseries *s, const kvf_group *g, kvf_verdict_counts *out);
/* Kernel errors, crashes, hangs and nondeterminism of a series. */
int64_t rseries_run_errors(const rseries *s);
/* 1 when the series fails a rule (a kernel failure) or had a run error. */
int report_series_fails(const rmodel *m, const rseries *s);

/* Link from the output directory to a file (relative when both resolve, else absolute);
 * malloc'd, NULL when the file does not exist. */
char *report_link(const rmodel *m, const char *file);

/* Link for a worst element's case: "cases/<hash>.kvfz" when the bytes were embedded, else a
 * link to its path if that file exists, else NULL (malloc'd). */
char *report_case_link(const rmodel *m, const kvf_case_info *ci);

/* Builds the model from the inputs (model.c): labels, series, rules, findings. On failure the
 * model is still safe to free. Errors: KVF_EIO (output or named findings directory), KVF_ENOMEM. */
int report_model_build(rmodel *m, const kvf_report_input *inputs, size_t n,
                       const kvf_report_opts *opts, kvf_error *err);
void report_model_free(rmodel *m);

/* Short numbers for tables: 3 significant digits, or "inf" / "NaN". */
void fmt_num(char *buf, size_t size, double x);

/* The page (html.c), which reads the model and nothing else. -1 (errno set) on failure. */
int report_write_html(FILE *f, const rmodel *m);

#endif
