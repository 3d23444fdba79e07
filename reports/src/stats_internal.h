/* The inside of a kvf_stats, shared by the stats collector and the report writers (private to
 * reports/). Every statistic is an integer count, an integer sum or a maximum, so merging is
 * exact and associative; no floating-point sum appears anywhere. */
#ifndef KVFUZZ_REPORTS_STATS_INTERNAL_H
#define KVFUZZ_REPORTS_STATS_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kvfuzz/file.h" /* kvf_write_atomic */
#include "kvfuzz/stats.h"

/* ---- an int64-keyed hash map with fixed-size values ---------------------------------------- */

typedef struct kvf__map {
    size_t vsize;
    size_t count, cap; /* cap is 0 or a power of two */
    int64_t *keys;
    unsigned char *used;
    unsigned char *vals; /* cap * vsize bytes, zeroed on insert */
    /* The slot of the last key looked up: consecutive elements of a row share their head,
     * sequence and slot classes, so most lookups end here. Entries never move except when
     * the table grows, which clears it. */
    int has_last;
    int64_t last_key;
    size_t last_slot;
} kvf__map;

void kvf__map_init(kvf__map *m, size_t vsize);
void kvf__map_free(kvf__map *m);
/* The value for key, or NULL. With create, inserts a zeroed value (NULL only on OOM). */
void *kvf__map_get(kvf__map *m, int64_t key, int create);
const void *kvf__map_find(const kvf__map *m, int64_t key);
/* The keys in ascending order (malloc'd; the caller frees). NULL with *n = 0 when empty. */
int64_t *kvf__map_sorted_keys(const kvf__map *m, size_t *n);

/* Visits every entry once, in no particular order; nothing may be inserted meanwhile:
 *     kvf__map_iter it = {0}; int64_t k; const void *v;
 *     while (kvf__map_next(m, &it, &k, &v)) ...
 * Returns 1 with the entry, 0 at the end. value may be NULL. */
typedef struct kvf__map_iter {
    size_t slot;
} kvf__map_iter;
int kvf__map_next(const kvf__map *m, kvf__map_iter *it, int64_t *key, const void **value);

/* ---- histograms ---------------------------------------------------------------------------- */

/* 1-D log histogram of a non-negative quantity: zero, +inf and NaN apart, positive finite
 * values in quarter-octave buckets (kvf_stats_bucket). */
typedef struct kvf__hist {
    int64_t total, zero, inf, nan;
    kvf__map buckets; /* int32 bucket -> int64 count */
} kvf__hist;

/* 2-D key of the abs-vs-|exact| density: whole octaves floor(log2 v), with two sentinels. */
#define KVF_OCT_ZERO (-5000)
#define KVF_OCT_INF 5000

/* The biased exponent of a positive normal double, or 0 when v is anything else (zero,
 * subnormal, infinite, NaN, negative): those take frexp's path. Inline, like the octave below:
 * the statistics take them for every element. */
static inline int kvf__normal_exponent(double v, uint64_t *bits) {
    memcpy(bits, &v, sizeof *bits);
    const int ex = (int)(*bits >> 52); /* the sign bit makes a negative v >= 0x800 */
    return ex > 0 && ex < 0x7ff ? ex : 0;
}

/* floor(log2 v) for v >= 0 or inf; KVF_OCT_ZERO for 0, KVF_OCT_INF for inf. */
static inline int32_t kvf__stats_octave(double v) {
    uint64_t bits;
    const int ex = kvf__normal_exponent(v, &bits);
    if (ex) return ex - 1023;
    if (v == 0) return KVF_OCT_ZERO;
    if (isinf(v)) return KVF_OCT_INF;
    int e;
    frexp(v, &e);
    return e - 1;
}
#define KVF_DENS_KEY(abs_oct, exact_oct)                                                           \
    (((int64_t)(abs_oct) + 8192) * 16384 + ((exact_oct) + 8192))
#define KVF_DENS_ABS(key) ((int32_t)((key) / 16384) - 8192)
#define KVF_DENS_EXACT(key) ((int32_t)((key) % 16384) - 8192)

/* ---- coordinate classes -------------------------------------------------------------------- */

typedef enum kvf__class_kind {
    KVF_CLASS_HEAD = 0, /* q head h */
    KVF_CLASS_DIM,      /* head-dim index d (o only) */
    KVF_CLASS_SEQLEN,   /* 0 for an empty sequence, else 1 + floor(log2 L): [2^(k-1), 2^k) */
    KVF_CLASS_SLOT,     /* (page size S, slot (L-1) mod S of the row's last token), non-empty
                           rows only; key = S * 65536 + slot */
    KVF_CLASS_COUNT
} kvf__class_kind;

#define KVF_SLOT_KEY(S, slot) ((int64_t)(S)*65536 + (slot))
#define KVF_BITS_SCALE 1024 /* bits of error are summed as integers in units of 1/1024 bit */

typedef struct kvf__cell {
    int64_t n, fails, nonfinite; /* nonfinite: a or r is NaN/inf and they differ */
    int64_t bits_n, bits_sum;    /* elements with an ordered ULP distance, and the sum of
                                    round(1024 log2(ulps + 1)) over them */
    int64_t max_ulps;            /* 0 while no element had a distance (bits_n says) */
    double max_abs;              /* over pairs with a and r finite */
    double max_margin;
} kvf__cell;

/* ---- worst elements ------------------------------------------------------------------------ */

/* A case referenced by worst-element records; shared and reference counted. */
typedef struct kvf__case_info {
    int refs;
    int has_hash;
    uint64_t hash; /* kvf_hash64 of the .kvfz bytes */
    char *path;    /* may be NULL */
    char *hex;     /* embedded .kvfz bytes in hex, may be NULL */
} kvf__case_info;

typedef struct kvf__worst {
    kvf_element_error e;
    int64_t seq_len;
    int32_t page_size;
    kvf__case_info *ci; /* one reference held; may be NULL */
} kvf__worst;

/* ---- groups -------------------------------------------------------------------------------- */

typedef struct kvf__outstats {
    int64_t elements, violations, nonfinite;
    double max_abs, max_rel; /* over pairs with a and r finite */
    int64_t max_ulps;        /* over pairs with a distance; 0 while none */
    double max_margin;
    double max_excess; /* largest margin beyond the final rounding (judge.h excess_margin) */
    kvf__hist abs, rel, ulp, margin; /* ulp: a one-sided NaN (distance -1) counts as nan */
    kvf__map dens;                   /* KVF_DENS_KEY -> int64 count */
    kvf__map by[KVF_CLASS_COUNT];    /* key -> kvf__cell */
    int worst_count;
    kvf__worst *worst; /* [worst_n], best-ranked (largest margin) first */
} kvf__outstats;

/* Verdicts are counted by kvf_verdict_status: cases = passed + out_of_model +
 * rejects_rounded + the sum of findings, so "failed" always means a kernel failure. */
typedef struct kvf__group {
    char *kernel;
    char *rule;
    int64_t cases, passed;
    int64_t out_of_model;    /* failing only on rows out of the input model (not required) */
    int64_t rejects_rounded; /* failing only where the kernel returned the rounded value */
    int64_t findings[KVF_FINDING_CLASS_COUNT]; /* kernel failures by class */
    kvf__outstats out[2]; /* KVF_OUTPUT_O, KVF_OUTPUT_LSE: elements of in-model rows */
    kvf__outstats oom[2]; /* the same for elements of rows out of the input model */
} kvf__group;

typedef struct kvf__kernel_runs {
    char *kernel;
    int64_t ran, unsupported;
    int64_t errors[KVF_FINDING_CLASS_COUNT]; /* by class: the run errors' */
} kvf__kernel_runs;

typedef struct kvf__source {
    char *command, *host, *started, *written; /* UTC ISO 8601 times */
    int64_t pid;
    kvf_stats_device *devices; /* the run's GPUs (--devices), or NULL */
    size_t ndevices;
} kvf__source;

typedef struct kvf__pending kvf__pending; /* stats_pending.c */

struct kvf_stats {
    int worst_n;
    int require_overflow; /* out-of-model failures counted as kernel failures */
    double flush_interval_s;
    char *label, *findings_dir;
    int incomplete;
    kvf__group **groups;
    size_t ngroups, cap_groups;
    kvf__kernel_runs *kernels;
    size_t nkernels;
    kvf__source *sources;
    size_t nsources;
    long own_source; /* index of this process's entry in sources, -1 for a file read back */
    struct timespec last_write;
    kvf__pending *spare_pending; /* a finished scope's cleared tables, for the next scope */
};

/* ---- the model's operations, shared by the collector, writer, reader and merger --------- */

extern const char *const kvf__output_name[2];              /* "o", "lse" */
extern const char *const kvf__class_name[KVF_CLASS_COUNT]; /* "by_head", ... */
/* The run errors, findings of a run rather than of a verdict: the classes the worker (RUN) or
 * the buffer checks (HOST) produce, in the order of kvfuzz/finding_classes.def, which is the
 * order the statistics file and the reports list them in. */
#define KVF__IS_RUN_ERROR_JUDGE 0
#define KVF__IS_RUN_ERROR_RUN 1
#define KVF__IS_RUN_ERROR_HOST 1
enum {
    KVF__N_RUN_ERRORS = 0
#define KVF_FINDING_CLASS(id, name, producer, fails, doc) +KVF__IS_RUN_ERROR_##producer
#include "kvfuzz/finding_classes.def"
#undef KVF_FINDING_CLASS
};
extern const int kvf__run_error_classes[KVF__N_RUN_ERRORS];

/* *a += b for two counts: -1 when the sum is past INT64_MAX. Counts read from a file are
 * anything the file says, so adding them (a merge, a stated total) is checked, never UB. */
static inline int kvf__count_add(int64_t *a, int64_t b) {
    return __builtin_add_overflow(*a, b, a) ? -1 : 0;
}
#define KVF__OVERFLOW (-2) /* a merge's count past INT64_MAX */

/* Counting: -1 on allocation failure (the caller marks the statistics incomplete). Merges:
 * also KVF__OVERFLOW. */
int kvf__counts_merge(kvf__map *dst, const kvf__map *src);
int kvf__hist_merge(kvf__hist *dst, const kvf__hist *src);
/* bits: round(1024 log2(ulps + 1)), computed once per element by the caller. */
void kvf__cell_add(kvf__cell *c, const kvf_element_error *e, int finite_pair, int mismatch,
                   int64_t bits);
int kvf__cell_merge(kvf__cell *dst, const kvf__cell *src); /* 0 or KVF__OVERFLOW */
kvf__cell *kvf__cell_get(kvf__map *m, int64_t key);        /* found or added; NULL on OOM */

/* The bucket and class counts of one scope (stats_pending.c), gathered in small tables and
 * added to the maps when the scope ends; the statistics are complete only then.
 *   new: tables for a scope of s on case c (s's spare ones when it has them); NULL on OOM.
 *   add: counts element e into o's histograms, density and classes.
 *   finish: adds every pending count to the maps and hands the cleared tables to s as its
 *     spare (or frees them); NULL p is fine. -1 when a count was lost to OOM (the caller marks
 *     the statistics incomplete).
 *   free: releases tables (kvf_stats_free, for its spare). */
kvf__pending *kvf__pending_new(kvf_stats *s, const kvf_case *c);
void kvf__pending_add(kvf__pending *p, kvf__outstats *o, const kvf_element_error *e,
                      int finite_pair, int mismatch);
/*   add_exact: counts a run of correctly rounded elements (judge.h, kvf_exact_run) into o's
 *     histograms, density and classes, as add does each of them. */
void kvf__pending_add_exact(kvf__pending *p, kvf__outstats *o, const kvf_exact_run *r);
int kvf__pending_finish(kvf_stats *s, kvf__pending *p);
void kvf__pending_free(kvf__pending *p);

/* The bytes of an even run of lowercase hex digits (a case_info's hex), hex's length / 2 of
 * them into out. */
void kvf__hex_bytes(const char *hex, uint8_t *out);

/* Case records: created with one reference; hex, when given, is copied as is, else bytes up to
 * KVF_STATS_EMBED_MAX are embedded. NULL on OOM. */
kvf__case_info *kvf__case_info_new(int has_hash, uint64_t hash, const char *path,
                                   const uint8_t *bytes, size_t size, const char *hex);
void kvf__case_info_unref(kvf__case_info *ci); /* NULL is fine */
int kvf__case_info_cmp(const kvf__case_info *a, const kvf__case_info *b);

/* Ranking of worst elements: negative when x ranks before (is worse than) y. A total order on
 * everything a record holds, so the kept top N does not depend on arrival order. */
int kvf__worst_cmp(const kvf__worst *x, const kvf__worst *y);
/* Would cand enter o's list? */
int kvf__worst_wants(const kvf__outstats *o, int worst_n, const kvf__worst *cand);
/* Whether no element with zero error, margin and excess margin (a correctly rounded one) can
 * enter o's list, whatever its case and position. */
int kvf__worst_shuts_out_zero(const kvf__outstats *o, int worst_n);
/* Inserts cand, whose case reference is handed over, keeping at most worst_n. */
void kvf__worst_insert(kvf__outstats *o, int worst_n, kvf__worst cand);

/* Finds or adds a group or a kernel's run counts; NULL on OOM. */
kvf__group *kvf__group_get(kvf_stats *s, const char *kernel, const char *rule);
kvf__kernel_runs *kvf__kernel_runs_get(kvf_stats *s, const char *kernel);
int kvf__group_ptr_cmp(const void *a, const void *b); /* qsort of kvf__group *: kernel, rule */
kvf_stats *kvf__stats_alloc(int worst_n);             /* empty, no provenance; NULL on OOM */
void kvf__utc_now(char *buf, size_t size);            /* ISO 8601 UTC */

/* Serialises s as a stats file (stats_write.c). With provenance 0, label, findings directory
 * and sources are left out: two objects with equal statistics then print identically. -1 with
 * errno set on failure. */
int kvf__stats_serialize(const kvf_stats *s, FILE *f, int provenance);

/* Summary figures derived from one output's statistics (reports and terminal). */
double kvf__outstats_mean_bits(const kvf__outstats *o); /* NaN when no distance counted */
/* Upper bound of the q-quantile of the ULP distance (the largest integer in the bucket that
 * holds it); -1 when the quantile falls among one-sided NaNs or nothing was counted. */
int64_t kvf__outstats_ulp_quantile(const kvf__outstats *o, double q);

#endif
