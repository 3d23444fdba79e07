/* The overnight campaign (`kvfuzz fuzz`): generate cases (random recipes and structure-aware
 * mutations of a corpus), run the kernel in a worker process, compute the oracle, judge under
 * every rule, save findings, and keep going through crashes and hangs.
 *
 * Pipeline: generator threads build cases ahead; a dispatcher thread per worker process feeds
 * them to its worker (the next case goes out as soon as the last one comes back) and hands each
 * kernel output to a pool of `jobs` oracle threads (one case per thread, so small cases keep every
 * core busy); the main thread prints progress and watches the clock and signals. So neither the
 * device nor the cores wait on each other as long as the oracle pool has work.
 *
 * Lifecycle: kvf_campaign_init (reads the corpus, checks the findings folder, makes the
 * runners), kvf_campaign_start (threads), kvf_campaign_wait (until a limit, a signal or the
 * end of the cases), kvf_campaign_free; kvf_campaign_run does all four.
 *
 * Ownership: the campaign borrows opts (and what it points to) and *stats until
 * kvf_campaign_free, and fills *stats; free releases everything it made, even after a failed
 * init or without a wait (it then stops the threads first). Errors: KVF_EINVAL for inconsistent
 * options; KVF_EDEVICE when the kernel cannot start; KVF_EIO when the corpus or findings folder
 * cannot be used. A campaign that runs and finds bugs returns 0: findings are results, reported in
 * stats. */
#ifndef KVFUZZ_CAMPAIGN_H
#define KVFUZZ_CAMPAIGN_H

#include <stdint.h>
#include <stdio.h>

#include "kvfuzz/devices.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/mutate.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/outcome.h"

#define KVF_CAMPAIGN_MAX_JOBS 256 /* oracle threads */
/* The shape set of a kernel that compiles per shape: its first shapes, and the cases between
 * two later admissions (kvf_campaign_opts.shape_set). */
#define KVF_CAMPAIGN_SHAPE_SET 4
#define KVF_CAMPAIGN_SHAPE_GROWTH 1000

/* What the campaign observed for one judged case, for a statistics module (reports/) to
 * accumulate. Valid only during the callback. */
typedef struct kvf_campaign_event {
    uint64_t index; /* case number in generation order */
    int thread;     /* the oracle thread calling, 0 .. jobs - 1 (< KVF_CAMPAIGN_MAX_JOBS) */
    const kvf_spec *spec;
    const kvf_case *c;
    const kvf_oracle_result *oracle;
    const kvf_bf16 *o; /* the kernel's output */
    const float *lse;
    const kvf_outcome *outcome; /* verdict per rule, finding class */
    double kernel_s, oracle_s;
} kvf_campaign_event;

/* Called once per judged case from the oracle thread that judged it, outside the campaign's
 * locks: calls with the same ev->thread never overlap, calls from different threads run at the
 * same time. Per-thread state indexed by ev->thread needs no lock; anything shared does. */
typedef void (*kvf_campaign_observer)(void *ctx, const kvf_campaign_event *ev);

typedef struct kvf_campaign_opts {
    const kvf_kernel *kernel;
    kvf_rule rules[KVF_MAX_RULES];
    int nrules;           /* 0: strict */
    int require_overflow; /* count overflow-class violations as findings */
    double time_limit_s;  /* stop after this long; 0: no limit */
    int64_t max_runs;     /* stop after this many cases; 0: no limit */
    int jobs;             /* oracle threads; 0: kvf_campaign_default_jobs() */
    int generators;       /* case-generating threads; 0: one per four oracle threads */
    int workers;          /* kernel worker processes (per device with `devices`); 0: 1. More
                             than one per GPU was slower on an H200 (contexts time-slice) */
    /* NULL: workers inherit this process's GPUs. Else one group of `workers` workers per
     * device, each pinned to it (kvfuzz/devices.h). A device whose worker cannot start is
     * retired and the campaign goes on with the others; only when every device is retired
     * does the campaign fail (KVF_EDEVICE). */
    const kvf_device_set *devices;
    uint64_t seed;
    const char *corpus_dir;   /* read at start, extended with cases reaching new buckets */
    double reload_s;          /* re-read corpus_dir this often for other campaigns' files; 0:
                                 never (default 10 s) */
    int64_t max_findings;     /* stop (finishing what is in flight) once this many distinct
                                 signatures are found; 0: no limit */
    const char *findings_dir; /* NULL: findings are reported but not saved */
    double deadline_s;        /* per launch; 0: 10 s */
    int determinism_every;    /* re-run every Nth case after another; 0: never */
    /* Run every Nth case a second time transformed by an invariance relation, the relations in
     * turn (docs/invariance.md); 0: never. A broken relation the kernel promises is an
     * `invariance` finding; one it does not promise is reported as a property. */
    int relations_every;
    double progress_s; /* progress line period; 0: 5 s */
    int in_process;    /* run the kernel in this process (no crash survival) */
    /* Cases each worker runs at once, each on its own kernel state (kvfuzz/runner.h), at most
     * the kernel's concurrent_states; 0: the runner's default, KVF_RUNNER_AUTO_LANES for a
     * CUDA kernel and 1 for others (docs/fuzzing.md, "Lanes", says when more help). */
    int lanes;
    int oracle_only;          /* no kernel, no judging: measures the oracle-bound rate that a
                                 kernel campaign is compared with */
    kvf_mutate_limits mutate; /* size of generated (small) cases */
    /* Large cases (docs/fuzzing.md, "Reach"): a share of the oracle work, counted with
     * kvf_spec_work, goes to cases of long sequences (4,096 to 131,072 tokens) or wide batches
     * (64 to 256 sequences of mixed lengths), kept within large.max_work each. */
    kvf_mutate_limits large;
    double large_share; /* 0 .. 0.9; 0: small cases only */
    /* The shape set (docs/fuzzing.md, "Shape sets"): cases take their shape (Hq, Hk, D, S) from
     * a set that starts with this many shapes and admits one more every
     * KVF_CAMPAIGN_SHAPE_GROWTH cases, so that a kernel compiling per shape reuses its
     * compilations. 0: off; -1 (the default): KVF_CAMPAIGN_SHAPE_SET for a kernel that compiles
     * per shape (kvf_kernel_compiles_per_shape: Python kernels on a GPU), off for any
     * other. */
    int shape_set;
    kvf_limits case_limits;
    FILE *log;   /* progress, findings, summary; NULL: stderr */
    int verbose; /* print the full report of every new finding */
    kvf_campaign_observer observer;
    void *observer_ctx;
    /* Optional, with observer_ctx: a launch that gave no output, by the finding class it was
     * filed as (KVF_FINDING_CRASH, _HANG, _KERNEL_ERROR, ...), or -1 when the kernel declined
     * the case (unsupported). From the dispatcher thread that collected it; a crash is reported
     * once a re-run confirmed it. Calls from different dispatchers may overlap. */
    void (*run_observer)(void *ctx, int finding_class);
    /* Optional, with the observer's threading: the judge hooks of one case for oracle thread
     * `thread` (a statistics module fills *hooks so that the judge feeds it every element; the
     * case is judged once). Returns 0 to use them, nonzero to judge without hooks. */
    int (*judge_hooks)(void *ctx, int thread, const kvf_spec *spec, const kvf_case *c,
                       kvf_judge_hooks *hooks);
} kvf_campaign_opts;

void kvf_campaign_opts_default(kvf_campaign_opts *opts);

/* The lanes a campaign with these options asks of its workers (0: the runner's default). */
int kvf_campaign_lanes(const kvf_campaign_opts *opts);

/* Oracle threads used when opts->jobs is 0, on a machine with `cores` cores: all of them for
 * --oracle-only; otherwise all but a quarter, at most 4, kept for the threads that set the pace
 * (generators, the dispatcher, the worker's kernel and reader threads). Those block and wake
 * once per case, and with an oracle thread on every core each wake-up waited for a core: on a
 * 16-core H200 host, 12 oracle threads with the pipeline's other fixes took a campaign from
 * 2,909 to 4,148 cases/s (docs/performance.md, appendix, "The CUDA campaign with the pipeline
 * fixed"). At least 1. */
int kvf_campaign_default_jobs(const kvf_campaign_opts *opts, long cores);

/* One device's share of a campaign with opts->devices. */
typedef struct kvf_campaign_device {
    int ordinal;   /* as listed in --devices */
    int64_t cases; /* launches collected from its workers, re-runs excluded */
    /* Its launches that gave no output, by the class they were filed as (crashes once
     * confirmed); crashes, hangs and kernel_errors are three of them by name, for the summary
     * and the statistics file. */
    int64_t run_findings[KVF_FINDING_CLASS_COUNT];
    int64_t crashes, hangs, kernel_errors, worker_starts;
    double kernel_s;             /* summed time in the kernel's run() */
    double active_s;             /* from the start until its last worker retired, or the end */
    int retired;                 /* every worker of the device stopped for good */
    char why[KVF_ERROR_MSG_MAX]; /* the retiring worker's error */
} kvf_campaign_device;

#define KVF_CAMPAIGN_REASONS 8
#define KVF_CAMPAIGN_REASON_MAX 160

typedef struct kvf_campaign_stats {
    int64_t cases;       /* cases the kernel ran on */
    int64_t judged;      /* cases the oracle judged */
    int64_t unsupported; /* cases the kernel ran on and refused (KVF_EUNSUPPORTED) */
    int64_t rejected;    /* generated cases that did not build (skipped) */
    /* Generated cases replaced before they ran because the kernel's supports() refused their
     * shape, and the reasons it gave. */
    int64_t skipped_unsupported;
    /* The shape set (kvf_campaign_opts.shape_set): its size at the end (0: off) and the cases
     * whose shape it replaced. */
    int shape_set_size;
    int64_t shape_set_replaced;
    char skip_reasons[KVF_CAMPAIGN_REASONS][KVF_CAMPAIGN_REASON_MAX];
    int64_t skip_counts[KVF_CAMPAIGN_REASONS];
    int64_t tokens;       /* total tokens of judged cases */
    int64_t judged_quant; /* judged cases with FP8 caches (docs/fuzzing.md, "FP8 caches") */
    /* Reach, over judged cases: how many were large (large_share), the oracle work
     * (kvf_spec_work) of large and of small ones, the longest sequence and the largest batch. */
    int64_t large_cases;
    double work_large, work_small;
    int64_t longest_seq, largest_batch;
    int64_t finding_hits;  /* cases with a counted finding, duplicates included */
    int64_t findings_new;  /* distinct signatures saved by this run */
    int64_t findings_lost; /* distinct signatures whose save failed and never succeeded */
    /* New tolerance signatures by precision attribution (docs/precision.md): outside every
     * model (a defect), or within a model looser than the one judged. */
    int64_t signatures_defect, signatures_precision;
    int64_t by_class[KVF_FINDING_CLASS_COUNT];
    int64_t determinism_checks;
    /* Invariance relations (docs/invariance.md): the kernel's promises (a kvf_relation mask),
     * pairs checked and broken per relation, and the first broken pair of each in words. */
    unsigned relations_promised;
    int64_t relation_checked[KVF_RELATION_COUNT], relation_broken[KVF_RELATION_COUNT];
    char relation_example[KVF_RELATION_COUNT][512]; /* room for the kernel's whole sentence */
    int64_t crashes_unconfirmed; /* crashes that did not happen again on a re-run: not filed */
    /* Launches filed so (crashes once confirmed): by_class's counts of these classes by name,
     * for the summary and the progress line. */
    int64_t crashes, hangs, kernel_errors;
    int64_t worker_starts;
    int workers;
    int lanes; /* cases a worker ran at once (the most of any worker) */
    /* Failures seen while a worker ran several cases at once, after which those cases ran
     * again one at a time; and how many of those failures did not happen again that way (a
     * kernel whose concurrent states interfere). */
    int64_t reruns_alone, unrepeated_alone;
    int ndevices; /* opts->devices->n, or 0 */
    kvf_campaign_device device[KVF_MAX_DEVICES];
    int64_t corpus_size, corpus_added;
    int64_t corpus_reloaded; /* entries other campaigns wrote to corpus_dir, taken in */
    int64_t corpus_unsaved;  /* new corpus entries that could not be written to corpus_dir */
    /* Largest excess margin per rule: the headroom used beyond the final rounding, which a
     * correct kernel keeps well below 1 even where its margin is near 1 at a bf16 tie. */
    double worst_excess[KVF_MAX_RULES];
    double worst_margin[KVF_MAX_RULES]; /* largest margin seen per rule (overflow rows only
                                           when require_overflow) */
    double elapsed_s;
    double oracle_s, kernel_s; /* summed busy time */
    /* The oracle threads' whole busy time, >= oracle_s: the oracle, the rules, the statistics
     * hooks and freeing the case. judge_s / (jobs x elapsed_s) is how busy the threads were;
     * near 1 (with the dispatchers waiting for room in their queue) the judging sets the pace. */
    double judge_s;
    /* Rows the oracle computed, and how many of them its fast path could not certify and MPFR
     * computed (oracle.h, fallback_rows); the MPFR rows cost about ten times a fast one. */
    int64_t oracle_rows, oracle_mpfr_rows;
    /* Summed over dispatchers: time blocked waiting for the generators, for kernel results and
     * for room in the oracle queue. The largest names the stage that limits the rate.
     * wait_worker_idle_s is the part of wait_kernel_s spent blocked on the worker itself; the
     * rest is the dispatcher moving cases and results through the socket. */
    double wait_cases_s, wait_kernel_s, wait_oracle_s, wait_worker_idle_s;
    int jobs;        /* oracle threads used; judge_s / (jobs x elapsed_s) is how busy
                        they were, i.e. this run's rate over the judge-bound rate */
    int interrupted; /* stopped by SIGINT/SIGTERM */
    int stop_signal;
} kvf_campaign_stats;

typedef struct kvf_campaign kvf_campaign;

/* Errors: those listed at the top; *out is set (to be freed) whenever it is not NULL. */
int kvf_campaign_init(kvf_campaign **out, const kvf_campaign_opts *opts, kvf_campaign_stats *stats,
                      kvf_error *err);
int kvf_campaign_start(kvf_campaign *cp, kvf_error *err);
/* Waits for the end; returns the first fatal error of the run (a kernel that cannot start). */
int kvf_campaign_wait(kvf_campaign *cp, kvf_error *err);
void kvf_campaign_free(kvf_campaign *cp); /* NULL is fine */

int kvf_campaign_run(const kvf_campaign_opts *opts, kvf_campaign_stats *stats, kvf_error *err);

/* Installs the SIGINT/SIGTERM handlers now (kvf_campaign_start does when nobody did), so that
 * a signal that comes before the campaign starts, while its files are being made, still ends
 * in an orderly stop with a summary. The first signal is remembered and the handler reset (a
 * second one kills). kvf_campaign_release_signals restores the earlier handlers. */
void kvf_campaign_catch_signals(void);
void kvf_campaign_release_signals(void);
/* The signal caught, or 0. */
int kvf_campaign_stop_signal(void);

/* Prints the summary kvfuzz fuzz ends with. */
void kvf_campaign_print_summary(FILE *f, const kvf_campaign_opts *opts,
                                const kvf_campaign_stats *stats);

#endif
