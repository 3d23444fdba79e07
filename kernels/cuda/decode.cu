// CUDA GQA paged-KV decode attention: bf16 q, bf16 or FP8 (e4m3, e5m2) k/v with f32 scales per
// tensor, KV head or (slot, KV head), fp32 accumulation, bf16 o (round to nearest even), base-2
// f32 lse, NHD pages [P][S][Hk][D]. Head dims 64/128/256, groups 1..16, page
// sizes 1..256, empty and mixed-length sequences, shared pages, page ids up to 2^31-1.
//
// Variants (registered kernels; judge any of them with `kvfuzz replay --kernel NAME CASES`,
// time them with `kvfuzz bench --kernel NAME`, test them with `ctest -L gpu`):
//   cuda        split-KV (flash-decoding): splitkv_kernel<D,G,NoBug> (decode.cuh) writes fp32
//               partial states (unnormalized o, running max m, sum l) for each chunk of a
//               sequence; merge_kernel<D,NoBug> (merge.cuh) combines them. The chunk size comes
//               from the SM count and the workload so a single sequence still fills the GPU; a
//               sequence that fits one chunk is written directly and skips the merge.
//   cuda-naive  naive_kernel<D> (naive.cu): one block per (sequence, q head), whole sequence,
//               no split, K/V re-read by every head of a group. The baseline the split kernel
//               must beat.
// Both keep one online-softmax rescale per tile of >= 32 tokens (the strict rule's model) and
// mask by token index, so NaN in unused slots or unreferenced pages never reaches the result.
//
// The jobs, one file each:
//   split_plan.h / split_plan_algo.h / split_plan.c  the plan: split heuristic, schedule and
//                 workspace size, a pure host function in C (tests/test_split_plan.c);
//   plan.cuh / plan.cu, split_schedule.cu, device_buffer.cu  the plan object and its device
//                 state (the staged schedule; growing buffers shared with the buffer host);
//   split_launch.cuh, naive.cu  the launches;
//   decode_desc.cuh and this file  the plugin-ABI descriptors (plugin.h) and the registry
//                 entries, with the C API's prepare/launch that dispatch between the two.
// The device buffers the kernels run on, their poison and the checks after each run belong to
// the CUDA buffer host (host_cuda.cu), not to these files.
//
// Mutants (kernels/mutants.def) reuse split_plan_algo.h, split_launch.cuh and decode_desc.cuh
// with their own KVF_MUT_ACTIVE inside a namespace of their own (cuda/mutants/decode_mutant.cu);
// this production translation unit compiles them with KVF__MUT_NONE.
#define KVF_MUT_ACTIVE KVF__MUT_NONE

#include <cuda_runtime.h>

#include <stdio.h>
#include <string.h>

#include "cuda_error.cuh"
#include "kvfuzz/cuda_kernels.h"
#include "plan.cuh"
#include "split_plan.h" // before split_launch.cuh, which calls the plan
#include "split_launch.cuh"

// The C API's prepare and launch (cuda_kernels.h): the naive or the split-KV path.
static int plan_prepare(kvf_cuda_plan *p, const kvf_cuda_problem *pr, kvf_error *err) {
    p->ready = 0;
    const int rc = kvf__cuda_check_problem(pr, err);
    if (rc) return rc;
    return p->algo == KVF_CUDA_ALGO_NAIVE ? kvf__cuda_naive_prepare(p, pr)
                                          : split_prepare(p, pr, err);
}

static int plan_launch(kvf_cuda_plan *p, const kvf_cuda_tensors *t, void *stream, kvf_error *err) {
    const int rc = kvf__cuda_plan_check_launch(p, t, err);
    if (rc) return rc < 0 ? rc : 0;
    cudaStream_t st = (cudaStream_t)stream;
    return p->algo == KVF_CUDA_ALGO_NAIVE ? kvf__cuda_naive_launch(p, t, st, err)
                                          : split_launch(p, t, st, err);
}

extern "C" int kvf_cuda_plan_prepare(kvf_cuda_plan *p, const kvf_cuda_problem *pr, kvf_error *err) {
    return plan_prepare(p, pr, err);
}

extern "C" int kvf_cuda_plan_launch(kvf_cuda_plan *p, const kvf_cuda_tensors *t, void *stream,
                                    kvf_error *err) {
    return plan_launch(p, t, stream, err);
}

#include "decode_desc.cuh"

namespace {
int desc_create_naive(const kvf_plugin_kernel *self, void **state, char *msg, size_t msg_size) {
    (void)self;
    return desc_create_algo(KVF_CUDA_ALGO_NAIVE, state, msg, msg_size);
}
} // namespace

extern "C" int kvf_cuda_runtime_available(char *why, size_t why_size) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        // The runtime answers cudaErrorInsufficientDriver ("driver version is insufficient")
        // both when the driver is too old and when there is none; the driver's version (0 when
        // no driver is installed) tells them apart.
        int drv = 0, rt = 0;
        cudaDriverGetVersion(&drv);
        cudaRuntimeGetVersion(&rt);
        if (why && why_size && e != cudaSuccess && drv == 0)
            snprintf(why, why_size, "No usable CUDA device: no CUDA driver is installed.");
        else if (why && why_size && e == cudaErrorInsufficientDriver)
            snprintf(why, why_size,
                     "No usable CUDA device: the CUDA driver supports CUDA %d.%d, older than "
                     "this build's runtime (%d.%d).",
                     drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
        else if (why && why_size)
            snprintf(why, why_size, "No usable CUDA device: %s.",
                     e != cudaSuccess ? cudaGetErrorString(e) : "no device found");
        return 0;
    }
    int dev = 0, major = 0, minor = 0;
    e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    if (e != cudaSuccess) {
        if (why && why_size)
            snprintf(why, why_size, "CUDA device query failed: %s.", cudaGetErrorString(e));
        return 0;
    }
    if (major < 9) {
        if (why && why_size)
            snprintf(why, why_size,
                     "CUDA device %d has compute capability %d.%d; the kernels are built for "
                     "9.0 (Hopper) and newer.",
                     dev, major, minor);
        return 0;
    }
    return 1;
}

#define KVF_CUDA_NAME "cuda"
#define KVF_CUDA_TEXT                                                                              \
    "CUDA split-KV (flash-decoding) decode: fp32 partial states + merge kernel, any group 1-16"
#define KVF_CUDA_NAIVE_NAME "cuda-naive"
#define KVF_CUDA_NAIVE_PROMISES "graph-replay"
#define KVF_CUDA_NAIVE_TEXT                                                                        \
    "CUDA naive decode: one block per (sequence, q head), whole sequence, no split"

static const kvf_plugin_kernel kDescCuda = KVF_CUDA_SPLIT_DESC(
    KVF_CUDA_NAME, KVF_CUDA_TEXT, KVF_PLUGIN_ROLE_REFERENCE, KVF_CUDA_KV_DTYPES, KVF_CUDA_SCALES);

// cuda-naive's launch depends on nothing but the shape (one block per sequence and q head, the
// lengths read on the device), so it promises graph replay (docs/invariance.md).
static const kvf_plugin_kernel kDescCudaNaive = {sizeof(kvf_plugin_kernel),
                                                 KVF_CUDA_NAIVE_NAME,
                                                 KVF_CUDA_NAIVE_TEXT,
                                                 KVF_PLUGIN_DEVICE_CUDA,
                                                 KVF_PLUGIN_ROLE_REFERENCE,
                                                 NULL,
                                                 desc_supports,
                                                 desc_create_naive,
                                                 desc_destroy,
                                                 desc_plan,
                                                 desc_workspace_bytes,
                                                 desc_run,
                                                 desc_describe,
                                                 KVF_CUDA_CONCURRENT_STATES,
                                                 NULL,
                                                 KVF_CUDA_NAIVE_PROMISES,
                                                 NULL,
                                                 KVF_CUDA_KV_DTYPES,
                                                 KVF_CUDA_SCALES};

// The registry's entries: no case-level vtable, so they run through the buffer host like a
// plugin does (kernel.h).
// Fields: name, description, device, models, create, destroy, run, desc, role, plugin, release,
// submit, collect, concurrent_states, precision, promises.
// clang-format off
extern "C" const kvf_kernel kvf_kernel_cuda = {
    KVF_CUDA_NAME, KVF_CUDA_TEXT, KVF_DEVICE_CUDA, NULL, NULL, NULL, NULL, &kDescCuda,
    KVF_PLUGIN_ROLE_REFERENCE, NULL,
};

extern "C" const kvf_kernel kvf_kernel_cuda_naive = {
    KVF_CUDA_NAIVE_NAME, KVF_CUDA_NAIVE_TEXT, KVF_DEVICE_CUDA, NULL, NULL, NULL, NULL,
    &kDescCudaNaive, KVF_PLUGIN_ROLE_REFERENCE, NULL, NULL, NULL, NULL, 0, NULL,
    KVF_CUDA_NAIVE_PROMISES,
};
// clang-format on
