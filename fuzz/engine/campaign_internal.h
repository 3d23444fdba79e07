/* What the campaign's parts share (campaign.h describes the pipeline): the campaign itself,
 * the job that carries one case through it, and each part's thread entry.
 *
 *   generate.c   generator threads: cases from the corpus and from random recipes
 *   dispatch.c   a dispatcher thread per kernel worker: launches, re-runs, crash checks
 *   judge_pool.c oracle threads: the oracle, the verdicts, corpus growth, findings
 *   campaign.c   init / start / wait / free, progress, signals, the summary
 *
 * Locks: mu guards stats, the feature map and the finding sets, in short sections only (the
 * dispatcher takes it for every case); the corpus and each queue have their own. Taken in
 * the order mu, then corpus. */
#ifndef KVF_FUZZ_CAMPAIGN_INTERNAL_H
#define KVF_FUZZ_CAMPAIGN_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "corpus.h"
#include "kvfuzz/campaign.h"
#include "kvfuzz/runner.h"
#include "queue.h"
#include "shape_set.h"

#define KVF__MAX_GENERATORS 64
#define KVF__MAX_WORKERS 64

/* One case on its way through the pipeline. */
typedef struct kvf__job {
    uint64_t index;
    int from_corpus; /* an initial corpus entry run as it is */
    int large;       /* made as a large case (large_share) */
    kvf_spec spec;
    uint8_t *bytes;
    size_t size;
    kvf_case c;
    kvf_bf16 *o;
    float *lse;
    kvf_bf16 *o2; /* a determinism re-run's output, or the relation's derived case's */
    float *lse2;
    kvf_relation_pair *pair; /* the relation this case is run under again, or NULL */
    double kernel_s;
    kvf_run_result first_crash;  /* the run whose crash is being confirmed */
    char plan[KVF_RUN_PLAN_MAX]; /* the kernel's plan facts for this case */
} kvf__job;

/* How far stopping has gone: run; finish what is in flight; drop it (a signal, or a fatal
 * error). */
enum { KVF__RUN = 0, KVF__FINISH = 1, KVF__DROP = 2 };

typedef struct kvf__generator {
    struct kvf_campaign *cp;
    kvf_prng rng; /* each generator draws from its own stream of the campaign seed */
    double work_small, work_large; /* kvf_spec_work of the cases made, for large_share */
} kvf__generator;

typedef struct kvf__dispatcher {
    struct kvf_campaign *cp;
    int id;
    kvf_runner *runner;
    int device;  /* index into stats->device, or -1 without opts->devices */
    int retired; /* its worker cannot start: it takes no more cases */
} kvf__dispatcher;

typedef struct kvf__oracle_thread {
    struct kvf_campaign *cp;
    int index; /* kvf_campaign_event.thread */
} kvf__oracle_thread;

struct kvf_campaign {
    const kvf_campaign_opts *opts;
    kvf_campaign_stats *stats;
    kvf_rule rules[KVF_MAX_RULES];
    int nrules;
    int jobs;
    double start;

    pthread_mutex_t mu;
    kvf__corpus corpus;
    uint8_t *seen;
    int nfeatures;
    uint64_t *signatures; /* saved (or already in the findings folder) */
    size_t nsignatures;
    /* Per saved signature: its class and the cases that hit it in this campaign, written to the
     * findings folder's hits file at the end (kvf__write_hits). */
    kvf_finding_class *sig_class;
    int64_t *sig_hits;
    uint64_t *lost; /* failed to save at least once and not saved since */
    size_t nlost;

    kvf__queue ready;  /* generated cases waiting for the kernel (generators -> dispatchers) */
    kvf__queue judged; /* kernel outputs waiting for the oracle (dispatchers -> oracle pool) */
    atomic_uint_fast64_t next_index;
    atomic_int live_generators;

    atomic_int stop; /* KVF__RUN, KVF__FINISH, KVF__DROP */
    atomic_int dispatcher_done;
    atomic_int live_dispatchers;
    atomic_int live_oracles;
    /* Relations no longer tried (a kvf_relation mask): a replay relation the kernel does not
     * promise whose run failed (relations.c). */
    atomic_uint relations_off;
    kvf_campaign_opts own_opts; /* the caller's, with what the kernel cannot take turned off */
    kvf__shape_set shapes;      /* the shape set (shape_set.h); initial 0: off */
    int fatal;
    kvf_error fatal_err;

    int nworkers;
    int worker_device[KVF__MAX_WORKERS]; /* index into stats->device, or -1 */
    atomic_int serving; /* dispatchers not retired: the last one's start failure is fatal */
    kvf_runner *runners[KVF__MAX_WORKERS];
    int64_t worker_starts[KVF__MAX_WORKERS];
    int64_t worker_reruns[KVF__MAX_WORKERS], worker_unrepeated[KVF__MAX_WORKERS];

    /* Threads, as started. */
    int ngen;
    pthread_t oracle_tid[KVF_CAMPAIGN_MAX_JOBS], disp_tid[KVF__MAX_WORKERS],
        gen_tid[KVF__MAX_GENERATORS];
    kvf__oracle_thread oracles[KVF_CAMPAIGN_MAX_JOBS];
    kvf__dispatcher disps[KVF__MAX_WORKERS];
    kvf__generator gens[KVF__MAX_GENERATORS];
    int oracles_started, gens_started, disps_started;
    int own_signals; /* the campaign installed its signal handlers (and restores them) */
    int waited;
};

double kvf__now_s(void);
FILE *kvf__log(const struct kvf_campaign *cp);
void kvf__job_free(kvf__job *j);
void kvf__job_free_any(void *j); /* for kvf__queue_free */
/* What a job holds in memory (its case's tensors and outputs), as queues declare it. */
size_t kvf__job_bytes(const kvf__job *j);

/* The byte bounds of the campaign's queues (queue.h): generated cases waiting for a
 * dispatcher, and run cases waiting for an oracle thread. */
#define KVF__READY_QUEUE_BYTES ((size_t)256 << 20)
#define KVF__JUDGED_QUEUE_BYTES ((size_t)512 << 20)

/* Stops the campaign at level `how` (KVF__FINISH or KVF__DROP), waking every waiter. */
void kvf__campaign_stop(struct kvf_campaign *cp, int how);

/* generate.c */
void *kvf__generator_main(void *arg);

/* dispatch.c */
void *kvf__dispatcher_main(void *arg);

/* judge_pool.c */
void *kvf__oracle_main(void *arg);
/* Counts a finding and saves it if its signature is new. Caller holds cp->mu. */
/* Writes DIR/hits-<pid>-<time>.counts (JSON, under its own extension so that nothing reads it
 * as a finding's report or a statistics file): how many cases hit each finding this campaign saved
 * ({"kvfuzz_hits": 1, "hits": {"<class>-<12 hex>": n}}), atomically; `kvfuzz report` adds them
 * up per group. Said on the log when it cannot be written. */
void kvf__write_hits(struct kvf_campaign *cp);
/* Invariance relations in a campaign (relations.c): the relation pair of a case chosen for one
 * (made by the generator), and the second run's judgement (by the dispatcher). */
void kvf__job_relate(struct kvf_campaign *cp, kvf__job *j);
void kvf__relation_done(struct kvf_campaign *cp, kvf__job *j, const kvf_run_result *res);
void kvf__relations_print(FILE *f, const kvf_campaign_stats *st);

void kvf__record_finding(struct kvf_campaign *cp, const kvf_outcome *out, const kvf__job *j);
/* A run that produced no output (crash, hang, kernel error): its finding, if any. */
void kvf__record_run_finding(struct kvf_campaign *cp, const kvf_run_result *res, const kvf__job *j);

#endif
