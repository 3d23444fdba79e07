/* Replay (`kvfuzz replay`): case files judged one after another by several kernels. Each kernel
 * runs in a worker process of its own, started before the first case so that one that cannot
 * start is known at once; each case is read and its oracle computed once, then every kernel runs
 * on it and its output is judged under the kernel's own rules (the trial, kvfuzz/trial.h), a
 * failing strict or fa verdict with its precision attribution. The session counts what happened
 * (kvf_replay_tally); the verdict counts and statistics are the caller's, fed from the results
 * (reports/, through the judge hooks kvf_replay_judge takes). Nothing here prints.
 *
 * A session: kvf_replay_start; per case kvf_replay_case_open, then per kernel kvf_replay_run and,
 * when it ran, kvf_replay_judge; kvf_replay_case_close; at the end kvf_replay_stop.
 *
 * Ownership: the caller owns the kvf_replay, the options' kernels and rules (which must outlive
 * the session), each kvf_replay_case and each kvf_replay_result. kvf_replay_start allocates the
 * runners, kvf_replay_stop kills the workers and frees them. An opened case owns its case, oracle
 * result, output buffers and canonical bytes until kvf_replay_case_close.
 *
 * Errors: kvf_replay_start returns KVF_ENOMEM, KVF_ELIMIT (too few open files for the workers,
 * with the limit in the sentence), or a runner's error (kvfuzz/runner.h) with *failed the index
 * of the kernel that cannot start (nkernels for the errors that are no kernel's). A case that
 * cannot be read or judged is no error but its status (kvf_replay_case_status) with the reason in
 * err; a kernel that crashes, hangs or fails is its result. kvf_replay_judge returns the judge's
 * error (KVF_EINVAL, KVF_ENOMEM) with the sentence in the result. */
#ifndef KVFUZZ_REPLAY_H
#define KVFUZZ_REPLAY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/attribution.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/outcome.h"
#include "kvfuzz/runner.h"
#include "kvfuzz/trial.h"

typedef struct kvf_replay_opts {
    const kvf_kernel *const *kernels; /* the kernels, in order */
    size_t nkernels;
    /* Kernel k's rules: rules[k * KVF_MAX_RULES + j] for j in [0, nrules), each kernel's set
     * judged under its own precision model (docs/precision.md). */
    const kvf_rule *rules;
    int nrules; /* 1 to KVF_MAX_RULES */
    int require_overflow;
    double deadline_s;  /* per launch, after which the kernel counts as hung */
    kvf_limits limits;  /* cases are read and run under these */
    int oracle_threads; /* kvf_oracle_opts.threads */
    int oracle_path;    /* kvf_oracle_path */
    int keep_bytes;     /* keep each case's canonical bytes (statistics identify cases by them) */
} kvf_replay_opts;

/* What the session saw. Each kernel run adds to runs and to at most one of failed_runs and
 * unsupported, so the runs without a failure (kvf_replay_clean_runs) cannot go below 0; a case
 * whose oracle failed runs no kernel and counts in not_judged alone. */
typedef struct kvf_replay_tally {
    size_t cases_ok;    /* case files read */
    size_t bad_inputs;  /* case files that could not be read */
    size_t not_judged;  /* cases read whose oracle (or output buffers) failed */
    size_t runs;        /* kernel runs */
    size_t failed_runs; /* runs with a kernel failure (a run that gave no output included) or a
                           judgement that failed */
    size_t unsupported; /* runs the kernel declined */
    /* Relation pairs run (kvf_replay_relate), and those broken that the kernel promises. */
    size_t relation_pairs, relations_broken;
} kvf_replay_tally;

typedef struct kvf_replay {
    kvf_replay_opts o;
    kvf_runner **runners; /* one per kernel */
    kvf_oracle_opts oracle;
    kvf_replay_tally t;
} kvf_replay;

/* Copies the options and starts every kernel's worker. Call kvf_replay_stop afterwards whether
 * it succeeded or not. Before starting hundreds of workers the soft limit on open files is
 * raised toward the hard one (each worker holds a socket here); too low a hard limit is
 * KVF_ELIMIT. */
int kvf_replay_start(kvf_replay *r, const kvf_replay_opts *o, size_t *failed, kvf_error *err);
/* Ends the workers and frees the runners; the tally stays. */
void kvf_replay_stop(kvf_replay *r);

typedef enum kvf_replay_case_status {
    KVF_REPLAY_CASE_READY = 0,     /* read and judged by the oracle: run the kernels */
    KVF_REPLAY_CASE_BAD_INPUT,     /* the file is not a case kvfuzz can read (err says why) */
    KVF_REPLAY_CASE_ORACLE_FAILED, /* the oracle could not judge it (err says why) */
    KVF_REPLAY_CASE_NO_MEMORY,     /* no memory for the kernels' outputs */
} kvf_replay_case_status;

typedef struct kvf_replay_case {
    const char *path; /* borrowed from the caller */
    const char *name; /* the path without its folders */
    kvf_case c;
    kvf_oracle_result oracle;
    kvf_trial_buffers b;
    uint8_t *kvfz; /* the canonical bytes, with keep_bytes (NULL when they could not be made) */
    size_t kvfz_size;
    int have_case, have_oracle;
} kvf_replay_case;

/* Reads the case at path and computes its oracle: a kvf_replay_case_status, counted in the
 * tally. The case is to be closed whatever the status. */
kvf_replay_case_status kvf_replay_case_open(kvf_replay *r, kvf_replay_case *rc, const char *path,
                                            kvf_error *err);
void kvf_replay_case_close(kvf_replay_case *rc);

typedef enum kvf_replay_run_kind {
    KVF_REPLAY_RAN = 0,     /* the kernel gave output: judge it */
    KVF_REPLAY_UNSUPPORTED, /* the kernel declined the case (run.message says why) */
    KVF_REPLAY_RUN_FAILED,  /* a crash, hang or kernel error: run_class and run.message */
} kvf_replay_run_kind;

/* One kernel's run on one case and its judgement. */
typedef struct kvf_replay_result {
    kvf_replay_run_kind kind;
    kvf_run_result run;          /* the launch: status, message, plan facts */
    kvf_finding_class run_class; /* RUN_FAILED: kernel-error, crash or hang */
    /* After kvf_replay_judge: */
    kvf_outcome out;                          /* the verdict under each rule */
    kvf_verdict_status status[KVF_MAX_RULES]; /* each verdict's status (kvf_verdict_status_of) */
    /* A failing verdict's precision attribution (kind NONE for the others), or why it could not
     * be attributed ("" when it was). */
    kvf_attribution attr[KVF_MAX_RULES];
    char attr_error[KVF_MAX_RULES][KVF_ERROR_MSG_MAX];
    /* The rule judges as an earlier rule of the kernel's set does (the same name under the
     * kernel's model, "strict" under bf16-p beside "strict:bf16-p"): said once. */
    int repeats[KVF_MAX_RULES];
    int failed;                    /* some verdict is a kernel failure */
    char error[KVF_ERROR_MSG_MAX]; /* why the judgement failed, when kvf_replay_judge did */
} kvf_replay_result;

/* Runs kernel k on an opened (READY) case into the case's buffers and counts the run: the kind
 * of its result. A launch the runner could not make is a kernel error with its sentence. */
kvf_replay_run_kind kvf_replay_run(kvf_replay *r, const kvf_replay_case *rc, size_t k,
                                   kvf_replay_result *res);
/* Judges kernel k's output of the last kvf_replay_run under its rules, observing the judged
 * elements through hooks (NULL: none), and attributes each failing verdict. Counts a failing
 * judgement or failed verdict in failed_runs. 0, or the judge's error (res->error). */
int kvf_replay_judge(kvf_replay *r, const kvf_replay_case *rc, size_t k,
                     const kvf_judge_hooks *hooks, kvf_replay_result *res);

/* Runs without a kernel failure: runs - failed_runs - unsupported. */
size_t kvf_replay_clean_runs(const kvf_replay_tally *t);

/* ---- before a replay (replay_inputs.c) ----------------------------------------------------- */

/* Whether writing statistics to stats_path would replace one of the cases paths[0..n) or the
 * report beside one (<name>.json for <name>.kvfz): the index of the first such case, with
 * *report 1 when it is that case's report, 0 when the case itself; -1 when none does (or
 * stats_path does not exist yet). */
long kvf_replay_stats_clash(const char *stats_path, char *const *paths, size_t n, int *report);

/* Reads the finding report beside a case: 0 with *report NULL when there is none, 0 with the
 * object (the caller's), or a KVF_E* code for one that cannot be read. */
typedef int (*kvf_report_reader)(const char *case_path, json_t **report, kvf_error *err);

/* Findings replay the way they were found: whether every case of paths[0..n) has a finding
 * report and all name the same kernel. 1 with that kernel written into kernel (and the failing
 * rule of the first report that names one into rule, "" when none does), else 0 (and for n 0):
 * a report that cannot be read, or a name that does not fit its buffer, is no record. */
int kvf_replay_recorded(char *const *paths, size_t n, kvf_report_reader read, char *kernel,
                        size_t ksize, char *rule, size_t rsize);

/* After kvf_replay_run gave output on rc: runs kernel k on the case relation `rel` derives with
 * `seed` and compares the two runs bit for bit (kvfuzz/relation.h), the kernel's promises
 * deciding whether a difference is an invariance finding or a property (out->relation_broken,
 * out->relation_promised, out->difference). Returns the differing elements (0: held), or -1
 * when the relation does not apply to the case or the derived run gave no output, with why. */
int64_t kvf_replay_relate(kvf_replay *r, const kvf_replay_case *rc, size_t k, kvf_relation rel,
                          uint64_t seed, kvf_outcome *out, char *why, size_t why_size);

#endif
