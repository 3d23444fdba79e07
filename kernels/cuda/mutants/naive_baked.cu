// The mutant cuda-naive/mut=baked-max-seq-len (docs/bug-classes.md, B25): cuda-naive whose
// launch takes the longest sequence from the host's shape at run() time and reads no more
// tokens of any sequence. Eager runs are always right, since the shape is the case's own. A
// run captured in a CUDA graph keeps the capture's value, and a replay on longer sequences
// drops their last tokens: only the graph-replay relation finds it (docs/invariance.md). It
// promises graph replay, as cuda-naive does.
#include <cuda_runtime.h>

#include <stdint.h>

#include "../cuda_error.cuh"
#include "kvfuzz/cuda_kernels.h"
#include "../plan.cuh"
#include "../split_plan.h"

static int plan_prepare(kvf_cuda_plan *p, const kvf_cuda_problem *pr, kvf_error *err) {
    p->ready = 0;
    const int rc = kvf__cuda_check_problem(pr, err);
    return rc ? rc : kvf__cuda_naive_prepare(p, pr);
}

static int plan_launch(kvf_cuda_plan *p, const kvf_cuda_tensors *t, void *stream, kvf_error *err) {
    const int rc = kvf__cuda_plan_check_launch(p, t, err);
    if (rc) return rc < 0 ? rc : 0;
    return kvf__cuda_naive_launch(p, t, (cudaStream_t)stream, err);
}

#include "../decode_desc.cuh"

namespace {
int baked_create(const kvf_plugin_kernel *self, void **state, char *msg, size_t msg_size) {
    (void)self;
    return desc_create_algo(KVF_CUDA_ALGO_NAIVE, state, msg, msg_size);
}

// The bug: a host value of this call's shape becomes an argument of the launch.
int baked_run(void *state, const kvf_plugin_args *a, char *msg, size_t msg_size) {
    ((kvf_cuda_plan *)state)->naive_len_cap = a->shape->max_seq_len > 0 ? a->shape->max_seq_len : 1;
    return desc_run(state, a, msg, msg_size);
}
} // namespace

#define KVF_BAKED_NAME "cuda-naive/mut=baked-max-seq-len"
#define KVF_BAKED_TEXT                                                                             \
    "cuda-naive whose launch reads at most the host shape's max_seq_len tokens per sequence"
#define KVF_BAKED_CLASS "B25"
#define KVF_BAKED_PROMISES "graph-replay"

static const kvf_plugin_kernel kDescBaked = {sizeof(kvf_plugin_kernel),
                                             KVF_BAKED_NAME,
                                             KVF_BAKED_TEXT,
                                             KVF_PLUGIN_DEVICE_CUDA,
                                             KVF_PLUGIN_ROLE_MUTANT,
                                             NULL,
                                             desc_supports,
                                             baked_create,
                                             desc_destroy,
                                             desc_plan,
                                             desc_workspace_bytes,
                                             baked_run,
                                             desc_describe,
                                             KVF_CUDA_CONCURRENT_STATES,
                                             NULL,
                                             KVF_BAKED_PROMISES,
                                             KVF_BAKED_CLASS};

// Fields as kvf_kernel_cuda_naive's (decode.cu).
// clang-format off
extern "C" const kvf_kernel kvf_kernel_cuda_naive_mut_baked_max_seq_len = {
    KVF_BAKED_NAME, KVF_BAKED_TEXT, KVF_DEVICE_CUDA, KVF_BAKED_CLASS, NULL, NULL, NULL, &kDescBaked,
    KVF_PLUGIN_ROLE_MUTANT, NULL, NULL, NULL, NULL, 0, NULL, KVF_BAKED_PROMISES,
};
// clang-format on
