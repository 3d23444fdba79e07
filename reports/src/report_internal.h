/* The report's model: series, rules, verdicts and findings gathered from the inputs, shared by
 * the summary / CSV / terminal writers (report.c) and the HTML page (page.c and its parts).
 * Private to reports/. */
#ifndef KVFUZZ_REPORTS_REPORT_INTERNAL_H
#define KVFUZZ_REPORTS_REPORT_INTERNAL_H

#include <jansson.h>
#include <stdio.h>

#include "kvfuzz/groups.h"
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

/* A finding's precision attribution as its .json states it (fuzz/trial/finding_json.c; the
 * ladder of models in kvfuzz/attribution.h). Only KVF__ATTR_PRECISION takes a finding out of
 * the defects: everything else fails as it did before attribution existed. */
typedef enum kvf__attr_kind {
    KVF__ATTR_ABSENT = 0, /* no member, or null: a finding written before attribution, or of a
                             class that is not attributed (crash, kernel-error, ...) */
    KVF__ATTR_PRECISION,  /* a looser precision model than declared accepts it */
    KVF__ATTR_DEFECT,     /* no precision model of the ladder accepts it */
    KVF__ATTR_MALFORMED,  /* the member is there but cannot be read; error says why */
} kvf__attr_kind;

typedef struct kvf__rattribution {
    kvf__attr_kind kind;
    char *declared; /* canonical model name (kvf_precision_name) the finding failed */
    char *within;   /* KVF__ATTR_PRECISION: the tightest model that accepts it, canonical */
    double margin;  /* KVF__ATTR_PRECISION: its largest element margin under that model */
    char *text;     /* the fuzzer's sentence, or NULL */
    char *error;    /* KVF__ATTR_MALFORMED: one sentence naming the file and the problem */
} kvf__rattribution;

typedef struct kvf__rfinding {
    char *stem;                   /* "<class>-<hash>" */
    char *cls;                    /* the part before the last '-' */
    char *hash;                   /* the part after it */
    char *kvfz;                   /* link relative to the output directory, or NULL when absent */
    char *json;                   /* likewise */
    char *kernel, *rule, *detail; /* from the .json when it has such string members */
    char *dir;                    /* the findings directory it came from */
    kvf__rattribution attr;       /* from the .json's "attribution" member */
} kvf__rfinding;

/* Finding signatures of one (series, rule), or of the whole report, split by attribution.
 * precision + defect + unattributed = signatures when signatures >= 0. */
#define KVF__MAX_WITHIN 32 /* distinct precision models named; the ladder has fewer */
typedef struct kvf__rattrib_counts {
    long signatures;      /* finding files counted (-1: the run recorded no findings directory) */
    long precision;       /* KVF__ATTR_PRECISION */
    long defect;          /* KVF__ATTR_DEFECT */
    long unattributed;    /* absent or malformed: defects, as before attribution */
    const char *declared; /* the model they were judged under (the first one seen), or NULL */
    size_t nwithin;
    struct {
        const char *model;
        long n;
    } within[KVF__MAX_WITHIN]; /* the precision signatures by model, most frequent first */
} kvf__rattrib_counts;

/* How a failing report fails, for the verdict line (kvf__report_overall). */
typedef enum kvf__failure {
    KVF__FAILURE_NONE = 0,  /* it passes */
    KVF__FAILURE_DEFECT,    /* some failure no precision model explains (or not attributed) */
    KVF__FAILURE_PRECISION, /* every failure lies within a looser precision model than declared */
} kvf__failure;

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
    char *out_abs;     /* absolute output directory, for relative links */
    kvf_groups groups; /* the findings of every readable findings directory, as defects */
} kvf__rmodel;

/* The group of a series for one rule, or NULL. */
const kvf__group *kvf__rseries_group(const kvf__rseries *s, const char *rule);

/* The verdict of a series under one rule (g one of its groups), with the number of finding
 * signatures listed for its kernel and rule (-1 when the report has no findings directory). */
void kvf__report_verdict(const kvf__rmodel *m, const kvf__rseries *s, const kvf__group *g,
                         kvf_verdict_counts *out);
/* The finding signatures of a series under one rule split by attribution (the same files
 * kvf__report_verdict counts). */
void kvf__report_attrib(const kvf__rmodel *m, const kvf__rseries *s, const kvf__group *g,
                        kvf__rattrib_counts *out);
/* The verdict sentence of a series under one rule: kvf_verdict_counts_sentence, then how its
 * signatures split between defects and precision when any finding carries an attribution
 * ("FAILS: 9 findings in 3 signatures: 1 defect (no precision model explains it); 2
 * signatures within a looser precision model than declared (bf16-partials: 2)"). */
void kvf__report_sentence(const kvf__rmodel *m, const kvf__rseries *s, const kvf__group *g,
                          char *buf, size_t size);
/* How the whole report fails, with a sentence for the verdict line ("" when it passes or no
 * finding carries an attribution, where "FAIL" alone says it as before). */
kvf__failure kvf__report_overall(const kvf__rmodel *m, char *buf, size_t size);
/* The precision model(s) the series' strict and fa rules judged under, from their names
 * ("strict" is f32, "strict:bf16-p" is bf16-p): "f32", "bf16-p, f32" when runs differ, or ""
 * when the series has neither rule. */
void kvf__rseries_precision(const kvf__rseries *s, char *buf, size_t size);
/* The model every series was judged under, for the report's header: 1 with it in buf when the
 * series share one, 2 when they differ (buf ""), 0 when no series has strict or fa. */
int kvf__report_precision_shared(const kvf__rmodel *m, char *buf, size_t size);
/* 1 when a rule name is `base` under some precision model ("strict", "strict:bf16-p"). */
int kvf__rule_is(const char *rule, const char *base);
/* The attribution cell of a finding for people: "precision: within bf16-partials (margin
 * 0.475)", "defect", "defect (not attributed)" or "defect (attribution unreadable)". */
void kvf__attr_cell(const kvf__rattribution *a, char *buf, size_t size);

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

/* The finding groups (groups_out.c): summary.json's "groups" array (NULL when memory ran out),
 * the page's first table, and the terminal's list of groups. */
json_t *kvf__groups_json(const kvf__rmodel *m);
void kvf__groups_table(FILE *f, const kvf__rmodel *m);
void kvf__groups_print(FILE *t, const kvf__rmodel *m);

/* The page (page.c), which reads the model and nothing else. -1 (errno set) on failure. */
int kvf__report_write_html(FILE *f, const kvf__rmodel *m);

#endif
