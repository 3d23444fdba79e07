/* The timed part of `kvfuzz bench` (docs/performance.md, "Method"): CUDA kernels side by side on
 * one CUDA buffer host (kernel_bench.h) against a read roofline measured in the same run. For
 * each workload (kvfuzz/bench_workload.h) the session builds the case and loads it with K/V
 * pools generated on the device, runs every kernel once with the host's checks and compares its
 * outputs with cuda-naive's, then times round robin: in every iteration the roofline and each
 * kernel in turn, each after a write of KVF_BENCH_FLUSH_BYTES that flushes L2, each between two
 * CUDA events around the descriptor's run() alone. Exists only in builds with KVF_HAVE_CUDA
 * (kernels/bench/bench_session.c).
 *
 * Ownership: kvf_bench_session_create allocates the session, kvf_bench_session_destroy releases
 * it: the descriptors it loaded (plugin kernels' are loaded into this process: timings through a
 * worker would measure the pipe), the host, events and device buffers. The kernels passed in
 * must outlive it. The results kvf_bench_session_run gives belong to the session and hold until
 * its next run.
 * Errors: 0 or a negative KVF_E* code with one sentence in err: KVF_ENOMEM, a descriptor that
 * cannot be loaded (its loader's code and sentence), the host's errors (kernel_bench.h),
 * KVF_EDEVICE for a CUDA call that fails ("allocating the L2 flush buffer failed: <cudaError
 * name> (<its text>)."), KVF_EDEVICE for a kernel that fails on the device in its checked run,
 * which ends the run ("kernel <name> on workload <workload>: <the host's sentence>; the run
 * ends there"), KVF_ELIMIT for a workload of more than 2^31-1 pages. */
#ifndef KVFUZZ_BENCH_SESSION_H
#define KVFUZZ_BENCH_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/bench_workload.h"
#include "kvfuzz/kernel.h"

/* The bytes written before every timed launch: 256 MiB, past any L2 (the H200 has 60 MB). */
#define KVF_BENCH_FLUSH_BYTES ((size_t)256 << 20)

typedef struct kvf_bench_session kvf_bench_session;

typedef struct kvf_bench_settings {
    kvf_bench_shape shape;
    int iters, warmup; /* timed iterations (>= 1), untimed ones first */
    uint64_t seed;     /* of the inputs */
} kvf_bench_settings;

/* A session timing the n >= 1 CUDA kernels kernels[0..n), with cuda-naive as the reference (one
 * of them, or an untimed one of its own): their descriptors. *out is NULL on error. */
int kvf_bench_session_create(kvf_bench_session **out, const kvf_kernel *const *kernels, size_t n,
                             const kvf_bench_settings *settings, kvf_error *err);

/* Starts the kernels: the host (every descriptor's create()) and its stream; the host's errors
 * (kernel_bench.h). */
int kvf_bench_session_start(kvf_bench_session *s, kvf_error *err);

/* The timing's device buffers and events, and the current device's name, SM count and L2 size
 * into *dev. */
int kvf_bench_session_prepare(kvf_bench_session *s, kvf_bench_device *dev, kvf_error *err);

/* What one workload measured: a row per timed kernel, in the order given. */
typedef struct kvf_bench_measure {
    const kvf_bench_result *results; /* [count] */
    int count;
    double roof_us; /* the roofline's median */
    int64_t bytes;  /* kvf_bench_bytes of the workload's case */
    int64_t tokens; /* its KV tokens */
} kvf_bench_measure;

/* Builds workload w's case (`first`: it is the run's first workload, which seeds its page
 * table), loads it, runs every kernel checked, and times the ones whose check passed. 0 with
 * *m filled, or a negative code when the run cannot go on (a device or memory error, the
 * reference failing: "the reference cuda-naive fails on <workload>: <why>"). A kernel that
 * fails its check is no error but its row's status. */
int kvf_bench_session_run(kvf_bench_session *s, const kvf_bench_workload *w, int first,
                          kvf_bench_measure *m, kvf_error *err);

/* Waits for the device, frees everything. NULL is fine. */
void kvf_bench_session_destroy(kvf_bench_session *s);

#endif
