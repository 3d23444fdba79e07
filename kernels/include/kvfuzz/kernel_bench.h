/* The CUDA buffer host as `kvfuzz bench` uses it: several CUDA kernel descriptors (plugin.h) on
 * one set of device buffers (every kernel reads the same pools and writes the same guarded
 * outputs and workspace), K/V pools generated on the device instead of uploaded, one checked run
 * per kernel, then bare launches to time. Everything here exists only in builds with
 * KVF_HAVE_CUDA (kernels/cuda/bench_support.cu).
 *
 * Ownership: a kvf_bench_host is created by kvf_bench_host_create and released by
 * kvf_bench_host_destroy; it owns every descriptor's state, its CUDA stream and every device and
 * pinned buffer, kept from one load to the next. The descriptors must outlive it. A loaded case
 * belongs to the caller and must stay alive and unchanged until the next load or the destroy;
 * o and lse passed to kvf_bench_host_check belong to the caller.
 * Errors: 0 or a negative KVF_E* code with one sentence in err (kvfuzz/error.h), as
 * kvf_host_run gives them (kernel_host.h, CUDA descriptors): KVF_EINVAL for a malformed case or
 * argument, KVF_EUNSUPPORTED when a kernel declines the case, KVF_EKERNEL for a kernel that
 * fails or claims support it lacks, KVF_ENOMEM, KVF_EDEVICE for a CUDA error (the cudaError
 * name in the sentence), and the check findings (KVF_EUNWRITTEN, KVF_EOOBWRITE,
 * KVF_EINPUTMOD). */
#ifndef KVFUZZ_KERNEL_BENCH_H
#define KVFUZZ_KERNEL_BENCH_H

#include <stddef.h>
#include <stdint.h>

/* The core headers carry no extern "C" of their own; the system headers they use are included
 * above so that only kvfuzz declarations land inside the block. */
#ifdef __cplusplus
extern "C" {
#endif

#include "kvfuzz/case.h"
#include "kvfuzz/error.h"
#include "kvfuzz/plugin.h"

typedef struct kvf_bench_host kvf_bench_host;

/* A host for the n (>= 1) CUDA descriptors descs[0..n), kernel k being descs[k]: its stream,
 * the check kernels' capacity on the current device and every descriptor's create(). Reads the
 * environment of the CUDA host (kernel_host.h). Errors: KVF_EINVAL for n < 1 or a malformed
 * KVF_CUDA_STAGE_BYTES, KVF_EDEVICE when no usable device is present or CUDA fails, KVF_ENOMEM,
 * KVF_EKERNEL (or KVF_ENOMEM) when a create() fails, with its message. *out is NULL on error. */
int kvf_bench_host_create(const kvf_plugin_kernel *const *descs, int n, kvf_bench_host **out,
                          kvf_error *err);

/* Waits for the host's stream, destroys every descriptor's state, frees everything. NULL is
 * fine. */
void kvf_bench_host_destroy(kvf_bench_host *h);

/* Loads a case whose K/V pools are generated on the device instead of uploaded (c->k_cache and
 * c->v_cache are not read): bf16 uniform in [-1, 1] from a hash of (seed, element), every slot
 * no sequence reads set to KVF_HOST_POISON_INPUT. q and the index arrays come from c. Then
 * asks supports() and plan() of every kernel and sizes the workspace for the largest. Returns
 * 0 once the inputs are on the device (a kernel that refused the case says so in _check and
 * _launch), else KVF_EINVAL for a malformed case, KVF_EUNSUPPORTED for a pool past 2^62 bytes
 * or a page that is not a multiple of 16 bytes, KVF_ELIMIT for a pool past 2^31 pages,
 * KVF_EDEVICE, KVF_ENOMEM. */
int kvf_bench_host_load_generated(kvf_bench_host *h, const kvf_case *c, uint64_t seed,
                                  kvf_error *err);

/* One run of kernel k on the loaded inputs with fresh poison and every check of a host run
 * (errors as kvf_host_run); o and lse (kvf_case_o_elems and kvf_case_lse_elems of the loaded
 * case) receive the outputs, also when a check fails. KVF_EINVAL when nothing is loaded or
 * there is no kernel k; the reason a kernel refused the loaded case (KVF_EUNSUPPORTED, ...). */
int kvf_bench_host_check(kvf_bench_host *h, int k, kvf_bf16 *o, float *lse, kvf_error *err);

/* Enqueues kernel k's run() on the loaded inputs and the host's stream, and returns: no poison,
 * no synchronization, no checks (the timed part of `kvfuzz bench`, after a _check). Errors:
 * KVF_EINVAL as _check, the reason a kernel refused the case, the kernel's own status
 * (KVF_EKERNEL, KVF_ENOMEM, ...), KVF_EDEVICE for a launch error. */
int kvf_bench_host_launch(kvf_bench_host *h, int k, kvf_error *err);

/* The host's stream (a cudaStream_t), for timing events and L2 flushes around _launch. It
 * belongs to the host. */
void *kvf_bench_host_stream(kvf_bench_host *h);

/* describe() of kernel k for the loaded case into buf ("" when it has none, refused the case,
 * or there is no kernel k). */
void kvf_bench_host_describe(kvf_bench_host *h, int k, char *buf, size_t buf_size);

#ifdef __cplusplus
}
#endif

#endif
