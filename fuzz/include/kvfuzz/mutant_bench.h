/* The bug-finding benchmark behind `kvfuzz mutants` (docs/mutants.md). For every mutant (a
 * deliberate bug modelled on a real bug class) it runs (a) kvfuzz's generated cases judged by
 * the default rules against the oracle, once per rule, with the time to the first finding;
 * the seed cases under each rule of the seed table (the default set, then fib); (b) a
 * FlashInfer-Bench-style check (captured-style workloads: contiguous page tables, the seed
 * shape, N(0,1) values, 3 trials, the fib rule against an fp32 reference) and (c) a
 * FlashInfer-test-style check (identity page table, equal lengths, allclose 1e-3/1e-3 against
 * cpu-ref). Production kernels run through (a) under the whole default set at once as controls
 * and must produce no finding. Every judgement goes through the trial (kvfuzz/trial.h).
 *
 * The generated cases of (a) are the same sequence for every kernel, so each case and its
 * oracle result are computed once (the case cache) and reused; the time reported for a
 * detection counts the generation and oracle time of every case consumed, as a standalone
 * campaign would spend.
 *
 * Ownership: the caller owns every struct passed in and the kernels they point to, which must
 * outlive the calls; the *_free functions release what the library allocated inside them
 * (cases, oracle results, seed names, results). Nothing here prints: skipped cases are told
 * through the caller's warn callback, progress through its progress callback.
 *
 * Errors: functions return 0 or a negative KVF_E* code with one sentence in err: KVF_ENOMEM,
 * and a kernel that cannot start (its create's or its worker's code, the reason in err; the
 * benchmark names the kernel in kvf_mutant_bench.start_kernel). A kernel that fails on a case
 * is no error but a detection. */
#ifndef KVFUZZ_MUTANT_BENCH_H
#define KVFUZZ_MUTANT_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/attribution.h"
#include "kvfuzz/json_io.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/spec.h"

/* The seed table's rules: the default set (strict, fa), then fib. */
#define KVF_MUTANT_RULES (KVF_DEFAULT_RULES + 1)

/* Told once per case or seed file that is left out, with why ("case 17 skipped: ..."). */
typedef void (*kvf_mutant_warn_fn)(void *ctx, const char *message);

/* ---- the case cache (mutant_cases.c) ------------------------------------------------------ */

typedef struct kvf_mutant_case {
    kvf_case c;
    kvf_oracle_result oracle;
    double prepare_seconds; /* generation + oracle */
    int ok;                 /* built and judged by the oracle; else skipped */
    int present; /* built and held; cases past KVF_MUTANT_CACHE_KEEP are released after use */
} kvf_mutant_case;

/* Mutants are caught within a few dozen cases, so the first cases are kept for all of them;
 * the long control campaigns stream past this point without holding their cases. */
#define KVF_MUTANT_CACHE_KEEP 4096

typedef struct kvf_mutant_cases {
    kvf_mutant_case *cases;
    size_t count, cap;
    uint64_t seed; /* case i is generated from seed + i */
    kvf_limits limits;
    kvf_random_opts ropts;
    kvf_oracle_opts oopts;
    kvf_mutant_warn_fn warn; /* may be NULL */
    void *warn_ctx;
} kvf_mutant_cases;

/* An empty cache of small generated cases (work <= 2^19) from `seed`, the oracle on `threads`
 * threads. */
void kvf_mutant_cases_init(kvf_mutant_cases *cache, uint64_t seed, const kvf_limits *lim,
                           int threads);
/* Case i, built on first use: NULL when out of memory. A case that cannot be built or judged
 * comes back with ok 0 (told through warn). */
const kvf_mutant_case *kvf_mutant_cases_get(kvf_mutant_cases *cache, size_t i);
/* Drops case i when it lies past the kept prefix; a later get builds it again. */
void kvf_mutant_cases_release(kvf_mutant_cases *cache, size_t i);
void kvf_mutant_cases_free(kvf_mutant_cases *cache);

/* ---- the seed cases (mutant_cases.c) ------------------------------------------------------ */

typedef struct kvf_mutant_seeds {
    size_t count;
    char **names; /* file names without the folder */
    kvf_case *cases;
    kvf_oracle_result *oracles;
    int *ok; /* loaded and judged by the oracle; else left out */
} kvf_mutant_seeds;

/* Loads the n case files (sorted, as the seed table lists them) with their oracle results: 0,
 * or KVF_ENOMEM. A file that cannot be loaded or judged is kept with ok 0 (told via warn). */
int kvf_mutant_seeds_load(kvf_mutant_seeds *s, char *const *paths, size_t n, const kvf_limits *lim,
                          const kvf_oracle_opts *oo, kvf_mutant_warn_fn warn, void *warn_ctx,
                          kvf_error *err);
void kvf_mutant_seeds_free(kvf_mutant_seeds *s);

/* ---- one kernel's checks (mutant_bench.c, mutant_style.c) --------------------------------- */

/* The first finding of a campaign (a), or the budget spent without one. */
typedef struct kvf_mutant_detection {
    int caught;
    double seconds;   /* generation, oracle and kernel time of the cases consumed */
    long cases;       /* cases consumed, unsupported and skipped ones included */
    char finding[32]; /* the finding class's name ("kernel-error" for a failed run); "" */
    kvf_attribution attribution; /* the catching verdict's, for a strict or fa one */
} kvf_mutant_detection;

/* Starts and stops k the way a campaign runs it (in process, or a worker for a kernel that
 * kvf_kernel_resolve allocated): 0, or why it cannot start. */
int kvf_mutant_can_start(const kvf_kernel *k, const kvf_limits *lim, kvf_error *err);

/* (a): cases 0, 1, ... of the cache until the first finding under any of the n rules (a
 * verdict that is no kernel failure does not count: kvf_verdict_status_of) or until `budget`
 * seconds are spent. 0, or the kernel cannot start. */
int kvf_mutant_campaign(kvf_mutant_detection *d, const kvf_kernel *k, kvf_mutant_cases *cache,
                        const kvf_rule *rules, int nrules, double budget, kvf_error *err);

/* Which seed cases kernel k fails under each rule: fails[r * s->count + i]. Only kernel
 * failures count (overflow not required); a kernel error counts for every rule. 0, or the
 * kernel cannot start. */
int kvf_mutant_seeds_judge(const kvf_kernel *k, const kvf_mutant_seeds *s, const kvf_rule *rules,
                           int nrules, int *fails, kvf_error *err);

/* (b) and (c): 1 caught, 0 missed, or a negative code when the kernel cannot start. */
int kvf_mutant_fib_bench_style(const kvf_kernel *k, const kvf_limits *lim, kvf_error *err);
int kvf_mutant_fi_tests_style(const kvf_kernel *k, const kvf_limits *lim, kvf_error *err);

/* ---- the whole benchmark (mutant_bench.c) ------------------------------------------------- */

/* A kernel to run, with the precision model strict and fa judge it under (the caller's
 * choice: declared, overridden or f32). */
typedef struct kvf_mutant_entry {
    const kvf_kernel *kernel;
    kvf_precision model;
} kvf_mutant_entry;

/* The kernels a benchmark of device dev runs: its mutants (registry order), then as controls
 * its production kernels (cuda-naive, a slow baseline, left out) and every kernel of extras,
 * each with model f32 for the caller to set. *mutants and *controls are malloc'd (the caller
 * frees them): 0, or KVF_ENOMEM (mutant_kernels.c). */
int kvf_mutant_bench_kernels(kvf_device dev, const kvf_kernel_list *extras,
                             kvf_mutant_entry **mutants, size_t *nmutants,
                             kvf_mutant_entry **controls, size_t *ncontrols, kvf_error *err);

/* A plugin's own benchmark (`kvfuzz mutants --kernel PATH.so`): its kernels of role mutant are
 * the mutants, its kernels of role reference and the extras the controls, the others left out.
 * KVF_EINVAL when it lists no mutant, KVF_ENOMEM (mutant_kernels.c). */
int kvf_mutant_plugin_kernels(const kvf_kernel_list *plugin, const kvf_kernel_list *extras,
                              kvf_mutant_entry **mutants, size_t *nmutants,
                              kvf_mutant_entry **controls, size_t *ncontrols, kvf_error *err);

/* The controls one kernel name adds to extras (the kernels from index `before` on): of a whole
 * plugin (more than one kernel) only those of role reference, the others freed; a kernel named
 * alone as it is. Returns how many it kept (mutant_kernels.c). */
size_t kvf_mutant_keep_controls(kvf_kernel_list *extras, size_t before);

typedef struct kvf_mutant_result {
    size_t index; /* its place among kvf_mutant_opts' mutants, or its controls */
    const kvf_kernel *kernel;
    kvf_precision model;
    /* The rules it was judged by: the default set under its model, then (mutants) fib. */
    kvf_rule rules[KVF_MUTANT_RULES];
    int nrules;
    kvf_mutant_detection kvfuzz; /* mutants: the earliest of per_rule's; controls: all at once */
    kvf_mutant_detection per_rule[KVF_DEFAULT_RULES]; /* mutants only */
    const int *seed_fails;   /* mutants: [r * seeds.count + i] per rule of `rules`; else NULL */
    int fib_bench, fi_tests; /* mutants: (b) and (c) caught it */
} kvf_mutant_result;

typedef enum kvf_mutant_event {
    KVF_MUTANT_MUTANT_DONE,    /* a mutant's result is complete */
    KVF_MUTANT_CONTROLS_BEGIN, /* every mutant ran; the controls follow (result NULL) */
    KVF_MUTANT_CONTROL_DONE,   /* a control's result is complete */
} kvf_mutant_event;

typedef void (*kvf_mutant_progress_fn)(void *ctx, kvf_mutant_event ev, const kvf_mutant_result *r);

typedef struct kvf_mutant_opts {
    const kvf_mutant_entry *mutants;
    size_t nmutants;
    const kvf_mutant_entry *controls;
    size_t ncontrols;
    double budget, controls_budget; /* seconds of (a) per mutant, per control */
    uint64_t seed;                  /* the first generated case */
    int threads;                    /* oracle threads */
    kvf_limits limits;
    char *const *seed_paths; /* the seed table's case files; none: no seed table */
    size_t nseed_paths;
    kvf_mutant_warn_fn warn;         /* may be NULL */
    kvf_mutant_progress_fn progress; /* may be NULL */
    void *ctx;                       /* for warn and progress */
} kvf_mutant_opts;

typedef struct kvf_mutant_bench {
    /* The seed table's rules by their plain names (strict, fa, fib), whatever a kernel's model;
     * the first ncampaign are the default set the campaigns use. */
    kvf_rule rules[KVF_MUTANT_RULES];
    int nrules, ncampaign;
    kvf_mutant_seeds seeds;
    kvf_mutant_result *mutants, *controls; /* the ones that ran, in the order given */
    size_t nmutants, ncontrols;
    int *seed_fails; /* the mutants' seed_fails, one block */
    int survivors, noisy_controls, missed_fib_bench, missed_fi_tests;
    int rule_kills[KVF_DEFAULT_RULES]; /* per campaign rule: mutants its campaign caught */
    int seed_any[KVF_MUTANT_RULES];    /* per rule: mutants failing some seed case */
    int seed_first[KVF_MUTANT_RULES];  /* ... failing the first seed case */
    const char *start_kernel;          /* the kernel that could not start and ended the run; NULL */
} kvf_mutant_bench;

/* Runs the benchmark: every mutant, then every control, telling progress after each. 0 when
 * all ran; else a negative code with one sentence in err: KVF_ENOMEM, or a kernel that cannot
 * start (start_kernel names it; the results before it are kept). b is filled either way and
 * released by kvf_mutant_bench_free. */
int kvf_mutant_bench_run(kvf_mutant_bench *b, const kvf_mutant_opts *o, kvf_error *err);
void kvf_mutant_bench_free(kvf_mutant_bench *b);

/* "00,03,15": the two-character prefixes of the seed files a mutant fails under rule r, or
 * "-" (mutant_json.c). */
void kvf_mutant_seed_list(const kvf_mutant_bench *b, const kvf_mutant_result *m, int r, char *buf,
                          size_t size);

/* The benchmark as one JSON object (what `kvfuzz mutants --json` writes): NULL when out of
 * memory; the caller json_decref()s it. `device` and `budget` are echoed as given. */
json_t *kvf_mutant_bench_json(const kvf_mutant_bench *b, const char *device, double budget);

#endif
