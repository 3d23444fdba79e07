/* The buffer hosts' internals, private to kernels/ (kvfuzz/kernel_host.h is the public
 * contract): the layout and checks both hosts share (host_check.c), the CPU host (host_cpu.c)
 * and the CUDA host's entry points (cuda/host_cuda.cu), which the dispatcher (host.c) forwards
 * kvf_host_* to. Nothing outside kernels/ includes this header.
 *
 * A C header: C++ (the CUDA host) includes it inside extern "C". */
#ifndef KVFUZZ_KERNELS_HOST_INTERNAL_H
#define KVFUZZ_KERNELS_HOST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "host_layout.h" /* the buffers' layout: page and q images, outputs, padding */
#include "kvfuzz/kernel_host.h"

/* ---- shared by the CPU and CUDA hosts (host_check.c) ---------------------------------------- */

/* kvf__host_used_slots, the pages' used slots, is declared in kernel_host.h. */

/* Checks what the kernels do not: pointers, the page table against the pool, lengths. A
 * malformed case is KVF_EINVAL with one sentence before any kernel sees it; a pool past 2^62
 * bytes KVF_EUNSUPPORTED. Both hosts call it before anything else of a run. */
int kvf__host_check_case(const kvf_case *c, kvf_error *err);

/* Fills n bytes of guard / n elements of poison. */
void kvf__host_fill_guard(void *p, size_t n);
void kvf__host_poison_o(kvf_bf16 *o, int64_t n);
void kvf__host_poison_lse(float *lse, int64_t n);

/* The post-run checks on host images of the buffers. Each returns 0 or the error with one
 * sentence naming the first offending place. `name` names the buffer in the sentence. */
int kvf__host_check_guard(const void *guard, size_t n, const char *name, const char *side,
                          kvf_error *err);
int kvf__host_check_outputs(const kvf_case *c, const kvf_bf16 *o, const float *lse, kvf_error *err);

/* Calls desc->supports and turns "no" into KVF_EUNSUPPORTED with the reason. */
int kvf__host_supports(const kvf_plugin_kernel *desc, const kvf_plugin_shape *shape,
                       kvf_error *err);

/* Turns a plugin status and its message into a kvfuzz error: UNSUPPORTED -> KVF_EUNSUPPORTED
 * (or KVF_EKERNEL when supports() had accepted the shape), NOMEM -> KVF_ENOMEM, anything else
 * KVF_EKERNEL. `what` names the call ("plan", "run"). */
int kvf__host_status(const kvf_plugin_kernel *desc, int status, const char *msg, const char *what,
                     kvf_error *err);

/* Turns a create() that returned `status` (not KVF_PLUGIN_OK) with `msg` into KVF_ENOMEM or
 * KVF_EKERNEL, the message on one line. */
int kvf__host_create_failed(const kvf_plugin_kernel *desc, int status, const char *msg,
                            kvf_error *err);

/* Calls desc->workspace_bytes (0 when it has none) into *bytes; a request past
 * KVF_PLUGIN_MAX_WORKSPACE_BYTES is KVF_EKERNEL with one sentence, before anything is allocated. */
int kvf__host_workspace_bytes(const kvf_plugin_kernel *desc, void *state,
                              const kvf_plugin_shape *shape, size_t *bytes, kvf_error *err);

/* ---- the CPU host (host_cpu.c) ----------------------------------------------------------------
 */

/* kvf_host_create/run/describe/destroy for KVF_PLUGIN_DEVICE_CPU descriptors, same contract;
 * the host is opaque to the dispatcher. A CPU run has no phases: the dispatcher runs a
 * submitted case in its collect. destroy: NULL is fine. */
int kvf__cpu_host_create(const kvf_plugin_kernel *desc, void **out, kvf_error *err);
int kvf__cpu_host_run(void *h, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err);
void kvf__cpu_host_describe(void *h, char *buf, size_t buf_size);
void kvf__cpu_host_destroy(void *h);

/* ---- the CUDA host (cuda/host_cuda.cu; host.c stands in for it in builds without CUDA) ---- */

/* kvf_host_create/run/describe/destroy for KVF_PLUGIN_DEVICE_CUDA descriptors: the contract of
 * kernel_host.h, its CUDA paragraph included. Without CUDA, create is KVF_EDEVICE. */
int kvf__cuda_host_create(const kvf_plugin_kernel *desc, void **out, kvf_error *err);
int kvf__cuda_host_run(void *h, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err);
/* kvf__cuda_host_run in the two phases of kvf_host_submit / kvf_host_collect. A failed submit
 * has ended its run: no collect follows it. */
int kvf__cuda_host_submit(void *h, const kvf_case *c, kvf_error *err);
int kvf__cuda_host_collect(void *h, kvf_bf16 *o, float *lse, kvf_error *err);
void kvf__cuda_host_describe(void *h, char *buf, size_t buf_size);
void kvf__cuda_host_destroy(void *h); /* NULL is fine */
/* kvf_host_graph_replay for CUDA descriptors (cuda/host_graph.cu). */
int kvf__cuda_host_graph_replay(void *h, const kvf_case *capture, const kvf_case *c, kvf_bf16 *o,
                                float *lse, kvf_error *err);

#endif
