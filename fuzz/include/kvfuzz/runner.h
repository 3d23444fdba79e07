/* Runs a kernel under test in a worker process, so that a kernel that faults (an illegal
 * address, a segfault) or hangs costs one case, not the campaign. The worker is a fork() of the
 * caller that creates the kernel once and then serves cases sent as tensors over a socket;
 * each launch has a deadline, after which the worker is killed. A dead worker is replaced by a
 * fresh one at the next submit. In-process mode runs the kernel directly (for debuggers).
 *
 * CUDA note: a process that has initialised CUDA cannot use it in a fork()ed child, so the
 * caller must not touch CUDA before the first submit; kvf_runner_probe_cuda() asks a short-lived
 * child instead.
 *
 * Ownership: kvf_runner_create allocates the runner; kvf_runner_destroy kills the worker and
 * frees it. Output buffers belong to the caller. Errors: KVF_ENOMEM; KVF_EDEVICE (one sentence)
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
} kvf_runner_opts;

/* One launch's result. */
typedef struct kvf_run_result {
    kvf_run_status status;
    int signal;      /* crash: signal that ended the worker (0 if it exited) */
    int exit_code;   /* crash by exit: its status */
    double kernel_s; /* time in run(), measured in the worker */
    char message[KVF_ERROR_MSG_MAX];
} kvf_run_result;

int kvf_runner_create(kvf_runner **out, const kvf_runner_opts *opts, kvf_error *err);
void kvf_runner_destroy(kvf_runner *r);

/* Starts one launch of the case (sent to the worker as tensors: the pages that hold data).
 * Only one launch is in flight at a time. The worker is (re)started here when needed. Returns
 * 0, or an error when no worker can be started. */
int kvf_runner_submit(kvf_runner *r, const kvf_case *c, kvf_error *err);

/* Waits for the launch in flight (up to its deadline) and copies its o and lse into the
 * caller's buffers when res->status is KVF_RUN_OK. A crash or hang leaves the worker dead;
 * so does a kernel error (a CUDA context after an error is not trusted). */
void kvf_runner_collect(kvf_runner *r, kvf_bf16 *o, float *lse, kvf_run_result *res);

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
