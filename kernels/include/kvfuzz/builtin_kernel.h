/* Built-in CPU kernels as plugin descriptors (plugin.h) over a function of a kvf_case, so that
 * they run through the buffer host like any plugin. Internal to kernels/ and kvfuzz's own test
 * kernels. */
#ifndef KVFUZZ_BUILTIN_KERNEL_H
#define KVFUZZ_BUILTIN_KERNEL_H

#include "kvfuzz/kernel.h"

typedef int (*kvf__case_fn)(void *state, const kvf_case *c, kvf_bf16 *o, float *lse,
                            kvf_error *err);

typedef struct kvf__case_kernel {
    kvf__case_fn run;
    /* A mutant's (page-stride-ignored): the copy out of a strided pool steps pages by their
     * unpadded size instead of kv_stride_page. 0 for every production kernel. */
    int ignores_page_stride;
} kvf__case_kernel;

/* create(): the state is the kvf__case_kernel in self->user. */
int kvf__builtin_create(const kvf_plugin_kernel *self, void **state, char *msg, size_t msg_size);
/* run(): views the host's buffers as a kvf_case and calls the function: dense buffers in place,
 * any other layout through dense copies (q, the pages the table references, renumbered, and
 * the outputs written back at their strides). */
int kvf__builtin_run(void *state, const kvf_plugin_args *args, char *msg, size_t msg_size);
/* supports(): every valid shape. */
int kvf__builtin_supports_all(const kvf_plugin_kernel *self, const kvf_plugin_shape *shape,
                              char *why, size_t why_size);

/* cpu-ref's computation on a case, without a host around it (for kernels built on it). */
int kvf__cpu_ref_compute(const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err);

/* Concurrent states of a built-in kernel: each state is its own buffer host (and, for CUDA,
 * its own stream) and the kernels keep nothing outside it. */
#define KVF_BUILTIN_CONCURRENT_STATES 8

/* The fields every built-in CPU descriptor has. */
#define KVF__BUILTIN_CPU_FIELDS(NAME, DESCRIPTION, IMPL, CREATE)                                   \
    .struct_size = sizeof(kvf_plugin_kernel), .name = (NAME), .description = (DESCRIPTION),        \
    .device = KVF_PLUGIN_DEVICE_CPU, .role = KVF_PLUGIN_ROLE_UNDER_TEST, .user = (void *)&(IMPL),  \
    .supports = kvf__builtin_supports_all, .create = (CREATE), .run = kvf__builtin_run,            \
    .concurrent_states = KVF_BUILTIN_CONCURRENT_STATES

/* A descriptor for a CPU case function; `impl` names a static kvf__case_kernel. */
#define KVF_BUILTIN_CPU_DESC(NAME, DESCRIPTION, IMPL)                                              \
    KVF_BUILTIN_CPU_DESC_CREATE(NAME, DESCRIPTION, IMPL, kvf__builtin_create)
/* A descriptor for a CPU case function that reads quantized cases (FP8 caches of both dtypes,
 * scales of every granularity: kvfuzz/kv_quant.h) as the case gives them. */
#define KVF_BUILTIN_CPU_DESC_QUANT(NAME, DESCRIPTION, IMPL)                                        \
    {                                                                                              \
        KVF__BUILTIN_CPU_FIELDS(NAME, DESCRIPTION, IMPL, kvf__builtin_create),                     \
            .kv_dtypes = KVF_PLUGIN_KV_E4M3 | KVF_PLUGIN_KV_E5M2,                                  \
            .scale_granularities =                                                                 \
                KVF_PLUGIN_SCALE_TENSOR | KVF_PLUGIN_SCALE_HEAD | KVF_PLUGIN_SCALE_TOKEN,          \
    }
/* The same with its own create() (which ends in kvf__builtin_create when it starts). */
#define KVF_BUILTIN_CPU_DESC_CREATE(NAME, DESCRIPTION, IMPL, CREATE)                               \
    { KVF__BUILTIN_CPU_FIELDS(NAME, DESCRIPTION, IMPL, CREATE) }

#endif
