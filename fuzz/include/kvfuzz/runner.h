/* Runs a kernel under test in a worker process, so that a kernel that faults (an illegal
 * address, a segfault) or hangs costs one case, not the campaign. The worker is a fork() of the
 * caller that creates the kernel once and then serves cases sent as tensors over a socket;
 * each launch has a deadline, after which the worker is killed. A dead worker is replaced by a
 * fresh one at the next submit. With several lanes (kvf_runner_opts.lanes) the worker runs that
 * many cases at once, each on its own kernel state, and still answers in order. In-process mode
 * runs the kernel directly (for debuggers).
 *
 * CUDA note: a process that has initialised CUDA cannot use it in a fork()ed child, so the
 * caller must not touch CUDA before the first submit; kvf_runner_probe_cuda() asks a short-lived
 * child instead.
 *
 * Ownership: kvf_runner_create allocates the runner; kvf_runner_destroy kills the worker and
 * frees it. Cases and output buffers belong to the caller; a submitted case is read until its
 * launch is collected. Errors: KVF_ENOMEM; KVF_EDEVICE (one sentence)
 * when the kernel's create() fails in the worker, e.g. no usable GPU; KVF_EIO when the worker
 * cannot be started at all. */
#ifndef KVFUZZ_RUNNER_H
#define KVFUZZ_RUNNER_H

#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/kernel.h"
#include "kvfuzz/outcome.h"

typedef struct kvf_runner kvf_runner;

typedef struct kvf_runner_opts {
    const kvf_kernel *kernel;
    kvf_limits limits;       /* the worker builds each case under these */
    double deadline_s;       /* per launch (receiving the case included); <= 0: 10 s */
    double start_deadline_s; /* for the kernel's create(), e.g. a CUDA context; <= 0: 120 s */
    int in_process;          /* run in this process: no crash or hang survival */
    /* Cases the worker runs at once, each on its own kernel state: at most this many, and at
     * most the kernel's concurrent_states (kvfuzz/kernel.h). Each lane has a thread, except
     * for a kernel whose runs overlap (kvf_kernel_overlaps: the CUDA buffer host), whose lanes
     * one thread drives in two phases. <= 0: KVF_RUNNER_AUTO_LANES for such a kernel, else 1.
     * In-process runs one at a time. */
    int lanes;
} kvf_runner_opts;

#define KVF_RUNNER_MAX_LANES 64
/* The default lanes of a kernel whose runs overlap: while the device runs one case, the host
 * loads the next and checks the one before (docs/fuzzing.md, "Lanes"). */
#define KVF_RUNNER_AUTO_LANES 2
/* Launches in flight with `lanes` lanes (kvf_runner_max_inflight): 16 with one. A window of 6
 * left the worker of a small-case CUDA campaign waiting for cases whenever the dispatcher
 * waited on its generators or oracle queue for a third of a millisecond (docs/performance.md,
 * "The judge stage"). A launch's deadline starts only once it can run, so a deeper window
 * cannot turn a queued case into a hang. */
#define KVF_RUNNER_WINDOW(lanes) (4 * (lanes) + 12)
/* Launches in flight at most, for any number of lanes. */
#define KVF_RUNNER_MAX_INFLIGHT KVF_RUNNER_WINDOW(KVF_RUNNER_MAX_LANES)
/* Bytes of case messages in flight (their pages included) past which kvf_runner_has_room says
 * no (two launches are always allowed): large cases are hundreds of MB each, and the worker
 * holds a copy of every one it has taken in. */
#define KVF_RUNNER_INFLIGHT_BYTES ((size_t)512 << 20)

#define KVF_RUN_PLAN_MAX 160

/* One launch's result. */
typedef struct kvf_run_result {
    kvf_run_status status;
    int signal;      /* crash: signal that ended the worker (0 if it exited) */
    int exit_code;   /* crash by exit: its status */
    double kernel_s; /* time in run(), measured in the worker */
    char message[KVF_ERROR_MSG_MAX];
    char plan[KVF_RUN_PLAN_MAX]; /* the kernel's plan facts for this case (describe()), or "" */
} kvf_run_result;

int kvf_runner_create(kvf_runner **out, const kvf_runner_opts *opts, kvf_error *err);
void kvf_runner_destroy(kvf_runner *r);

/* Pins the runner's workers to one GPU: CUDA_VISIBLE_DEVICES is set to `visible` in each
 * worker process before its kernel starts (kvfuzz/devices.h), from the next start on. NULL or
 * "" keeps the environment the worker inherits. Ignored in-process. */
void kvf_runner_set_device(kvf_runner *r, const char *visible);

/* Starts the worker now, when none is running (the first submit would otherwise), so that a
 * kernel that cannot start is known before any case: its error as kvf_runner_submit gives it.
 * In-process: creates the kernel. */
int kvf_runner_start(kvf_runner *r, kvf_error *err);

/* Launches in flight at most: KVF_RUNNER_WINDOW, 4L + 12 for L lanes (16 with one). Answers go back
 * in order, so while one slow case runs the lanes go on with the cases behind it, up to this
 * window; and a dispatcher held up for a moment by its other neighbours (generators, oracle queue)
 * leaves the worker that many cases to go on with. Before the worker has started, from the lanes
 * asked for; after, from the lanes it runs. */
int kvf_runner_max_inflight(const kvf_runner *r);

/* Whether another launch may be submitted now: fewer than kvf_runner_max_inflight in flight,
 * and fewer than two or under KVF_RUNNER_INFLIGHT_BYTES of case messages. */
int kvf_runner_has_room(const kvf_runner *r);

/* Seconds this runner spent blocked on its worker (in poll(): for a result, or for room in the
 * socket), as opposed to the time submit and collect spend moving bytes. */
double kvf_runner_idle_s(const kvf_runner *r);

/* The lanes the worker runs (1 before it has started and in-process). */
int kvf_runner_lanes(const kvf_runner *r);

/* Starts one launch of the case (sent to the worker as tensors: the pages that hold data).
 * The pages are sent from the case itself, so the case must stay alive and unchanged until
 * this launch is collected (or the runner aborted or destroyed): they may be sent again to a
 * fresh worker.
 * Up to kvf_runner_max_inflight launches may be in flight; the worker runs up to `lanes` of
 * them at once, and they are collected in the order they were submitted. The worker is
 * (re)started here when needed. Returns 0, or an error when no worker can be started or
 * (KVF_EINVAL) when the limit is reached. */
int kvf_runner_submit(kvf_runner *r, const kvf_case *c, kvf_error *err);

/* The second run of relation pair p of case c: its derived case, or, for a replay relation
 * (kvf_relation_is_replay: graph-replay), c itself replayed through a CUDA graph captured on
 * the derived case, which the worker derives again from c and p->seed. Its outputs have the
 * derived case's sizes (a replay: c's). The case that travels (p->derived, or c) must stay
 * alive as kvf_runner_submit says. A replay runs alone in the worker. */
int kvf_runner_submit_relation(kvf_runner *r, const kvf_case *c, const kvf_relation_pair *p,
                               kvf_error *err);
int kvf_runner_run_relation(kvf_runner *r, const kvf_case *c, const kvf_relation_pair *p,
                            kvf_bf16 *o, float *lse, kvf_run_result *res, kvf_error *err);

/* Waits for the oldest launch in flight (up to its deadline, counted from when the worker
 * started it) and copies its o and lse into the caller's buffers when res->status is
 * KVF_RUN_OK. A crash or hang leaves the worker dead, and so does a kernel error (a CUDA context
 * after an error is not trusted); the launches behind it go to a fresh worker. With several
 * lanes a failure cannot be told apart from one of the launches that ran beside it, so the
 * failed launch and every one behind it are first run again alone (one at a time) on a fresh
 * worker, and only a failure of the launch alone is returned: a launch that fails only beside
 * others comes back as its clean run, counted by kvf_runner_reruns. */
void kvf_runner_collect(kvf_runner *r, kvf_bf16 *o, float *lse, kvf_run_result *res);

/* Failures seen while several launches ran together, after which the launches were run again
 * alone; and how many of those failures the launch alone did not repeat. */
int64_t kvf_runner_reruns(const kvf_runner *r);
int64_t kvf_runner_unrepeated(const kvf_runner *r);

/* submit + collect. */
int kvf_runner_run(kvf_runner *r, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_run_result *res,
                   kvf_error *err);

/* Kills the worker now (used on SIGINT so shutdown does not wait for a slow launch). */
void kvf_runner_abort(kvf_runner *r);

/* Kills the worker from another thread (a signal handler's thread); the launch in flight then
 * collects as a crash, which the caller knows to discard. No effect in-process. */
void kvf_runner_interrupt(kvf_runner *r);

/* Workers started so far (the first one included). */
int64_t kvf_runner_starts(const kvf_runner *r);

/* Whether CUDA is usable, asked in a short-lived child process so this one stays fork-safe.
 * Writes the reason into why when not. */
int kvf_runner_probe_cuda(char *why, size_t why_size);

#endif
