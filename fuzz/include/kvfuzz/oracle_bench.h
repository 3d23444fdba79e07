/* The oracle benchmark behind `kvfuzz bench --oracle` (docs/performance.md): the oracle's fast
 * and MPFR paths, measured in the same run on the same cases on one thread, and the judge stage
 * of a campaign on those cases.
 *
 * Method: the cases are built before any timing: the campaign's fresh cases (random specs under
 * the campaign's default size limits, fitted and repaired as the campaign does), or case files.
 * Each repetition runs the whole set through the MPFR path and through the fast path,
 * alternating which goes first, with threads = 1, and checks that the two paths' rounded
 * outputs are bit-identical; the time is the calling thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID), so other load on the machine inflates it less than wall time
 * would, and the best repetition of each path counts. tokens = the KV tokens of every sequence,
 * summed over the cases; rows = (sequence, q head) pairs. The judge stage: each case's kernel
 * output comes from cpu-splitkv and its oracle from the fast path (both once, untimed), then the
 * default rules judge every case, without hooks and with the caller's (the campaign's streaming
 * statistics, in `kvfuzz bench`).
 *
 * Ownership: the set owns its cases and recipes, the inputs their outputs and oracle results;
 * the *_free functions release them (an empty struct is fine). Nothing here prints.
 * Errors: 0 or a negative KVF_E* code with one sentence in err: KVF_ENOMEM, KVF_EINVAL (fewer
 * generated cases than asked for), a case file's loading errors (kvf_case_load), the oracle's
 * ("the mpfr oracle failed on case 3: ..."), the judge's ("judging case 3 failed: ..."). */
#ifndef KVFUZZ_ORACLE_BENCH_H
#define KVFUZZ_ORACLE_BENCH_H

#include <stdint.h>

#include "kvfuzz/case.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/outcome.h"
#include "kvfuzz/spec.h"

typedef struct kvf_oracle_bench_set {
    kvf_case *cases;
    kvf_spec *specs; /* generated cases' recipes (the statistics' case identity); NULL: files */
    int64_t n, cap;
    int64_t tokens, rows;
    int64_t bytes; /* the cases' tensors as written (resident pages, q, table, scales) */
} kvf_oracle_bench_set;

/* The calling thread's CPU time in seconds (what every time here measures). */
double kvf_oracle_bench_cpu_s(void);

/* Adds ncases generated cases from `seed` (up to 100 tries a case) to an empty set, *build_s
 * the thread CPU time it took. The set is held in memory whole: past the memory budget
 * (kvf_limits_budgets) it stops with KVF_ELIMIT and one sentence. */
int kvf_oracle_bench_generate(kvf_oracle_bench_set *s, int64_t ncases, uint64_t seed,
                              double *build_s, kvf_error *err);

/* Loads the n case files under lim into the set, their loading's thread CPU time added to
 * *build_s. On an error the set keeps the cases before it, and *failed is the index of the file
 * that could not be loaded (its error in err; KVF_ELIMIT when it would take the set past lim's
 * memory budget), or -1 when memory ran out adding it. */
int kvf_oracle_bench_load(kvf_oracle_bench_set *s, char *const *paths, int n, const kvf_limits *lim,
                          double *build_s, int *failed, kvf_error *err);

void kvf_oracle_bench_set_free(kvf_oracle_bench_set *s);

/* One path's measurement. */
typedef struct kvf_oracle_bench_path {
    double best_s;                 /* the best repetition's thread CPU seconds; -1 before any */
    long fast_rows, fallback_rows; /* of the last repetition: rows the fast path answered, and
                                      rows it handed to MPFR */
} kvf_oracle_bench_path;

/* The paths' order in kvf_oracle_bench_paths: KVF_ORACLE_MPFR, then KVF_ORACLE_FAST. */
extern const int kvf_oracle_bench_path_ids[2];

/* Both paths over the set `repeat` times: each path's best time and rows into pr (initialised
 * by the caller: best_s -1), and the number of case runs whose rounded outputs (o, lse and the
 * rows' records) differ between the paths added to *mismatched. */
int kvf_oracle_bench_paths(const kvf_oracle_bench_set *s, int64_t repeat,
                           kvf_oracle_bench_path pr[2], int64_t *mismatched, kvf_error *err);

/* What the judge stage judges: every case's cpu-splitkv output and fast oracle result, and the
 * default rules. */
typedef struct kvf_oracle_bench_inputs {
    kvf_oracle_result *oracle;
    kvf_bf16 **o;
    float **lse;
    int64_t n;
    const char *kernel; /* "cpu-splitkv" */
    kvf_rule rules[KVF_MAX_RULES];
    int nrules;
} kvf_oracle_bench_inputs;

/* Computes the inputs (untimed); KVF_ENOMEM, or the kernel's or oracle's error, all with the
 * sentence "could not compute the judge's inputs". */
int kvf_oracle_bench_inputs_make(const kvf_oracle_bench_set *s, kvf_oracle_bench_inputs *in,
                                 kvf_error *err);
void kvf_oracle_bench_inputs_free(kvf_oracle_bench_inputs *in);

/* The caller's judge hooks for one case (spec NULL for a case file), as a campaign's
 * (kvf_campaign_opts.judge_hooks; thread is 0): 0 with *hooks filled, or nonzero to judge the
 * case without hooks. */
typedef int (*kvf_oracle_bench_hooks_fn)(void *ctx, int thread, const kvf_spec *spec,
                                         const kvf_case *c, kvf_judge_hooks *hooks);

/* The judge stage's best thread CPU seconds over `repeat` runs of the whole set under the
 * inputs' rules: best[0] without hooks, best[1] with hooks(ctx, ...) (NULL: none). */
int kvf_oracle_bench_judge(const kvf_oracle_bench_set *s, const kvf_oracle_bench_inputs *in,
                           int64_t repeat, kvf_oracle_bench_hooks_fn hooks, void *ctx,
                           double best[2], kvf_error *err);

#endif
