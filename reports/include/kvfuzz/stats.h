/* Streaming error statistics: what a kernel's error looks like over millions of
 * elements, kept in bounded memory and written to a versioned JSON file (docs/reports.md).
 *
 * For every (kernel, rule) pair and each output (o, lse) a kvf_stats keeps: log-bucketed
 * histograms (4 buckets per octave) of abs error |a-r|, rel error |a-r|/(|r|+1e-8), ULP
 * distance and rule margin; a 2-D histogram of abs error against |exact| (1 bucket per
 * octave); per-coordinate-class tallies (q head, head-dim index, sequence-length bucket, and
 * (page size, slot of the row's last token)); verdict and finding counts; and the worst N
 * elements with the case that produced them. Elements of rows out of the input model
 * (kvf_element_error.out_of_model) are counted into statistics of their own, so they never mix
 * with a kernel's errors. Nothing per element is stored, so memory grows
 * with the number of distinct buckets, never with the number of elements.
 *
 * Typical use (replay and the fuzz campaign):
 *
 *     kvf_stats *st;  kvf_stats_opts so;  kvf_stats_opts_default(&so);
 *     so.findings_dir = dir;              // optional
 *     kvf_stats_create(&st, &so, &err);
 *     kvf_stats_write(st, path, &err);    // once at start: fails early on a bad path
 *     for each case, kernel:
 *         kvf_stats_count_run(st, kernel->name, outcome);        // ran / error / unsupported
 *         for each rule:                                         // replaces kvf_judge()
 *             kvf_stats_judge(st, kernel->name, &ref, &verdict, &rule, &c, &oracle, o, lse, &err);
 *         kvf_stats_tick(st, path, &err); // writes atomically when the interval has passed
 *     kvf_stats_write(st, path, &err);    // at exit
 *     kvf_stats_free(st);
 *
 * Threads: a kvf_stats is not thread-safe. Give each worker its own and combine them with
 * kvf_stats_merge() or kvf_stats_merge_shard() (exact: merging is associative and commutative
 * on the statistics), or serialise calls with a lock.
 *
 * Ownership: kvf_stats_create()/kvf_stats_read() allocate; kvf_stats_free() releases. Strings
 * and case bytes passed in are copied when kept. Errors: KVF_ENOMEM, KVF_EIO (unreadable or
 * unwritable path), KVF_EFORMAT (a stats file that is not valid v1), KVF_EINVAL (NULL or
 * out-of-range arguments), always with one sentence in err. An allocation failure while
 * counting an element cannot be returned from the observer callback; it marks the stats
 * "incomplete" (written into the file) and the next kvf_stats_tick()/kvf_stats_write() also
 * returns KVF_ENOMEM after writing. */
#ifndef KVFUZZ_STATS_H
#define KVFUZZ_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/case.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/verdict.h"

#define KVF_STATS_FORMAT "kvfuzz-stats"
#define KVF_STATS_VERSION 2
#define KVF_STATS_BUCKETS_PER_OCTAVE 4
#define KVF_STATS_WORST_DEFAULT 32
#define KVF_STATS_WORST_MAX 4096
/* Case files up to this size are embedded (hex) in worst-element records so that the report
 * can hand them back as .kvfz files even when the run kept no copy (campaign inputs that did
 * not become findings). Recipe-only cases are a few hundred bytes. */
#define KVF_STATS_EMBED_MAX 8192

typedef struct kvf_stats kvf_stats;

typedef struct kvf_stats_opts {
    int worst_n;              /* worst elements kept per (kernel, rule, output); default 32,
                                 at most KVF_STATS_WORST_MAX */
    double flush_interval_s;  /* kvf_stats_tick() writes at most this often; default 60 */
    const char *label;        /* a name for this run in reports; NULL: named by its kernels */
    const char *findings_dir; /* recorded so `kvfuzz report` finds the findings; NULL: none */
    const char *command;      /* the command line, for provenance; NULL: none */
    int require_overflow;     /* the run counts failures on rows out of the input model as
                                 kernel failures (--require-overflow); recorded in the file */
} kvf_stats_opts;

void kvf_stats_opts_default(kvf_stats_opts *opts);

/* One GPU's share of a campaign spread over several (`kvfuzz fuzz --devices`), recorded with
 * the run that made the file and kept per run when files merge. */
#define KVF_STATS_DEVICE_WHY_MAX 256
typedef struct kvf_stats_device {
    int ordinal;    /* as listed in --devices */
    int64_t cases;  /* launches collected from its workers */
    double seconds; /* from the start until it retired, or the end */
    int64_t crashes, hangs, kernel_errors;
    int retired;                        /* its workers stopped for good */
    char why[KVF_STATS_DEVICE_WHY_MAX]; /* why it retired, or "" */
} kvf_stats_device;

/* Replaces the per-device figures of this run (the file's own source; copied). Errors:
 * KVF_ENOMEM; KVF_EINVAL when s holds no source of its own (a merged object). */
int kvf_stats_set_devices(kvf_stats *s, const kvf_stats_device *d, size_t n, kvf_error *err);

/* An empty stats object. The findings directory is stored as an absolute path when it exists. */
int kvf_stats_create(kvf_stats **out, const kvf_stats_opts *opts, kvf_error *err);

/* NULL is fine. */
void kvf_stats_free(kvf_stats *s);

/* Which case produced the elements, for the worst-element records. All fields may be NULL/0.
 * Only read during the call that takes it. */
typedef struct kvf_stats_case {
    const char *path;    /* where the case file is (replay: the file; campaign: the finding
                            path when it was saved) */
    const uint8_t *kvfz; /* the encoded case (.kvfz bytes): hashed with kvf_hash64 to
                            identify it, and embedded when at most KVF_STATS_EMBED_MAX bytes */
    size_t kvfz_size;
} kvf_stats_case;

/* Judges like kvf_judge() and counts every element and the verdict into s under (kernel,
 * rule->name). With s == NULL it is exactly kvf_judge(). Errors: those of kvf_judge(), or
 * KVF_ENOMEM (the verdict is then still valid; the statistics miss this call). */
int kvf_stats_judge(kvf_stats *s, const char *kernel, const kvf_stats_case *ref, kvf_verdict *out,
                    const kvf_rule *rule, const kvf_case *c, const kvf_oracle_result *oracle,
                    const kvf_bf16 *o, const float *lse, kvf_error *err);

/* The same in three steps, for callers that run the judge themselves:
 *     kvf_stats_scope sc;
 *     kvf_stats_begin(&sc, s, kernel, rule, c, ref, &err);
 *     kvf_judge_observe_runs(&v, rule, c, oracle, o, lse, kvf_stats_observe_element,
 *                            kvf_stats_observe_exact_run, &sc, &err);
 *     kvf_stats_observe_verdict(&sc, &v);
 * The scope borrows c and ref until kvf_stats_observe_verdict() (or kvf_stats_end() when the
 * judge failed), one of which must end it: the element counts reach the statistics there
 * (they are gathered per scope first, which makes counting several times cheaper). */
typedef struct kvf_stats_scope {
    kvf_stats *stats;
    void *group; /* private */
    const kvf_case *c;
    kvf_stats_case ref;
    int has_hash; /* private: ref.kvfz given; hash = kvf_hash64 of it */
    uint64_t hash;
    void *case_info; /* private: interned on first use */
    void *pending;   /* private: bucket and class counts not yet in the statistics */
} kvf_stats_scope;

int kvf_stats_begin(kvf_stats_scope *scope, kvf_stats *s, const char *kernel, const kvf_rule *rule,
                    const kvf_case *c, const kvf_stats_case *ref, kvf_error *err);
/* A kvf_element_observer; ctx is the kvf_stats_scope. */
void kvf_stats_observe_element(void *ctx, const kvf_element_error *e);
/* A kvf_exact_run_observer for the same scope: counts the run as kvf_stats_observe_element
 * would count its elements, and returns 1; 0 (nothing counted) when one of them could enter
 * the worst-element list, which needs each element whole, or when its tables cannot be had.
 * Judging with both gives statistics equal to judging with the element observer alone. */
int kvf_stats_observe_exact_run(void *ctx, const kvf_exact_run *r);
/* Counts the case's verdict by kvf_verdict_status_of() (passed, out of the model, rejected by
 * the rule although correctly rounded, or a kernel failure by class) and ends the scope. */
void kvf_stats_observe_verdict(kvf_stats_scope *scope, const kvf_verdict *v);
/* Ends a scope without a verdict. */
void kvf_stats_end(kvf_stats_scope *scope);

/* Counts one kernel run by outcome: KVF_STATS_RAN (the kernel produced output),
 * KVF_STATS_UNSUPPORTED (it declined the shape), or a run-level finding class
 * (KVF_FINDING_KERNEL_ERROR, _CRASH, _HANG, _NONDETERMINISM, _UNWRITTEN_OUTPUT, _OOB_WRITE,
 * _INPUT_MODIFIED; nondeterminism is a property of two runs, so count it in addition to them).
 * KVF_EINVAL for any other value. */
#define KVF_STATS_RAN 0
#define KVF_STATS_UNSUPPORTED (-1)
int kvf_stats_count_run(kvf_stats *s, const char *kernel, int outcome, kvf_error *err);

/* Writes the stats to path atomically: a temporary file in the same directory, fsync, rename,
 * fsync of the directory. Readers see the old file or the new one, never a mix. KVF_EIO with
 * the reason when the path cannot be written (the old file is then left as it was). */
int kvf_stats_write(kvf_stats *s, const char *path, kvf_error *err);

/* Writes (as kvf_stats_write) when flush_interval_s has passed since the last write or since
 * creation; otherwise does nothing and returns 0. */
int kvf_stats_tick(kvf_stats *s, const char *path, kvf_error *err);

/* The largest stats file kvf_stats_read accepts (KVF_ELIMIT past it). */
#define KVF_STATS_MAX_BYTES ((size_t)16 << 20)

/* Reads a stats file. KVF_EIO if it cannot be read, KVF_EFORMAT if it is not a v1 stats file
 * (the sentence names the path and the first problem), KVF_ELIMIT past KVF_STATS_MAX_BYTES. A
 * folder (a campaign's findings folder) reads as the merge (kvf_stats_merge) of every stats*.json
 * in it, in name order: each campaign writes its own file there; KVF_ENOTFOUND when it holds none.
 */
int kvf_stats_read(kvf_stats **out, const char *path, kvf_error *err);

/* The folder case of kvf_stats_read. */
int kvf_stats_read_dir(kvf_stats **out, const char *dir, kvf_error *err);

/* Adds src's statistics into dst (src unchanged). merge(a, b) holds exactly what one stats
 * object that had seen both runs' elements would hold, when both keep the same worst_n (with
 * different worst_n the larger is kept, filled from what each side kept). Provenance (the
 * runs' command lines and times) is concatenated; the label and findings directory of dst
 * win when set. */
int kvf_stats_merge(kvf_stats *dst, const kvf_stats *src, kvf_error *err);

/* The same without src's provenance: for per-thread shards of one run, which dst already
 * describes. */
int kvf_stats_merge_shard(kvf_stats *dst, const kvf_stats *src, kvf_error *err);

/* Records that counts were lost (a caller's own allocation failed): the file says
 * "incomplete", as after an allocation failure inside this module. NULL is fine. */
void kvf_stats_mark_incomplete(kvf_stats *s);

/* 1 when a and b hold the same statistics (provenance and label aside), else 0. */
int kvf_stats_equal(const kvf_stats *a, const kvf_stats *b);

/* The verdict counts of every (kernel, rule) group, sorted by kernel then rule, into out[0 ..
 * max); returns the number of groups (which may exceed max). The kernel and rule strings
 * belong to s and live as long as it does; signatures is -1 (the stats do not know them). */
size_t kvf_stats_verdicts(const kvf_stats *s, kvf_verdict_counts *out, size_t max);

/* Total elements counted (all kernels, rules and outputs), for progress lines. */
int64_t kvf_stats_elements(const kvf_stats *s);

/* Bucket index of a positive finite value: floor(4 log2 v), computed exactly from the binary
 * exponent and three mantissa thresholds (the doubles nearest 2^(1/4), 2^(1/2), 2^(3/4)), so
 * every machine buckets every value the same way. Bucket i holds [2^(i/4), 2^((i+1)/4)). */
int32_t kvf_stats_bucket(double v);
/* The lower edge of bucket i as a double (exact when i is a multiple of 4). */
double kvf_stats_bucket_lo(int32_t i);

#endif
