// Test-only CUDA kernel descriptors (plugin.h) that break one rule of the buffer host each, for
// tests/test_cuda_host.c: the host must turn each into its own error code. Not in the registry:
// no campaign should ever run them.
//   test-unwritten  writes every output but the last q head's o row
//   test-oob-o      writes every output and one bf16 past the end of o
//   test-modify-k   writes every output and flips a bit of the first page a sequence reads
//   test-pdl        writes every output from a kernel launched as a programmatic dependent of
//                   another (as FlashInfer does on Hopper): correct, so the host must pass it
//   test-sync       writes every output, then synchronizes its stream inside run(): correct
//                   eagerly, but run() cannot be captured in a CUDA graph
//   test-trap       traps on the device: the context is lost, so a test runs it last
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda_test_kernels.h"

namespace {

enum Mode { kUnwritten, kOobO, kModifyK, kPdl, kSync, kTrap };

// Zero o (n_o elements, `extra` past the end too) and lse; optionally flip k[page * stride].
__global__ void write_kernel(uint16_t *o, int64_t n_o, int64_t extra, float *lse, int64_t n_lse,
                             uint16_t *k, const int32_t *indices, int64_t page_stride, int pdl) {
    if (pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_o + extra; i += stride)
        o[i] = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_lse; i += stride)
        lse[i] = 0.f;
    if (k && blockIdx.x == 0 && threadIdx.x == 0) k[(int64_t)indices[0] * page_stride] ^= 1;
}

__global__ void busy_kernel(int *sink) {
    if (threadIdx.x == 0 && sink) *sink = 1;
}

__global__ void trap_kernel() {
    __trap();
}

int supports(const kvf_plugin_kernel *self, const kvf_plugin_shape *shape, char *why,
             size_t why_size) {
    (void)self;
    if (shape->batch_size > 0) return 1;
    if (why && why_size) snprintf(why, why_size, "the test kernels need a non-empty batch");
    return 0;
}

template <Mode M> int run_mode(void *state, const kvf_plugin_args *a, char *msg, size_t msg_size) {
    (void)state;
    const kvf_plugin_shape *s = a->shape;
    const int64_t rows = (int64_t)s->batch_size * s->num_qo_heads;
    int64_t n_o = rows * s->head_dim, extra = 0;
    if (M == kUnwritten) n_o -= s->head_dim;
    if (M == kOobO) extra = 1;
    cudaStream_t st = (cudaStream_t)a->stream;
    uint16_t *k = M == kModifyK && s->num_entries > 0 ? (uint16_t *)a->k_cache : NULL;
    cudaError_t e;
    if (M == kTrap) {
        trap_kernel<<<1, 32, 0, st>>>();
        e = cudaGetLastError();
    } else if (M == kPdl) {
        busy_kernel<<<1, 32, 0, st>>>(NULL);
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(64);
        cfg.blockDim = dim3(256);
        cfg.stream = st;
        cudaLaunchAttribute attr;
        attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr.val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        e = cudaLaunchKernelEx(&cfg, write_kernel, a->o, n_o, extra, a->lse, rows, k, a->kv_indices,
                               a->kv_stride_page, 1);
    } else {
        write_kernel<<<64, 256, 0, st>>>(a->o, n_o, extra, a->lse, rows, k, a->kv_indices,
                                         a->kv_stride_page, 0);
        e = cudaGetLastError();
        if (e == cudaSuccess && M == kSync) e = cudaStreamSynchronize(st);
    }
    if (e != cudaSuccess) {
        snprintf(msg, msg_size, "launch failed: %s", cudaGetErrorName(e));
        return KVF_PLUGIN_ERROR;
    }
    return KVF_PLUGIN_OK;
}

// 2^64 - 100 bytes: past any memory, and a size that would wrap an allocation's arithmetic.
size_t huge_workspace(void *, const kvf_plugin_shape *) {
    return (size_t)-100;
}

// clang-format off
#define TEST_DESC(NAME, TEXT, MODE)                                                                \
    {sizeof(kvf_plugin_kernel),                                                                    \
     NAME,                                                                                         \
     TEXT,                                                                                         \
     KVF_PLUGIN_DEVICE_CUDA,                                                                       \
     KVF_PLUGIN_ROLE_UNDER_TEST,                                                                   \
     NULL,                                                                                         \
     supports,                                                                                     \
     NULL,                                                                                         \
     NULL,                                                                                         \
     NULL,                                                                                         \
     NULL,                                                                                         \
     run_mode<MODE>,                                                                               \
     NULL}
#define TEST_DESC_WS(NAME, TEXT, MODE, WS)                                                         \
    {sizeof(kvf_plugin_kernel), NAME, TEXT, KVF_PLUGIN_DEVICE_CUDA, KVF_PLUGIN_ROLE_UNDER_TEST,    \
     NULL, supports, NULL, NULL, NULL, WS, run_mode<MODE>, NULL}
// clang-format on

} // namespace

extern "C" const kvf_plugin_kernel kvf_test_cuda_unwritten =
    TEST_DESC("test-unwritten", "leaves the last o row unwritten", kUnwritten);
extern "C" const kvf_plugin_kernel kvf_test_cuda_oob_o =
    TEST_DESC("test-oob-o", "writes one element past o", kOobO);
extern "C" const kvf_plugin_kernel kvf_test_cuda_modify_k =
    TEST_DESC("test-modify-k", "flips a bit of k_cache", kModifyK);
extern "C" const kvf_plugin_kernel kvf_test_cuda_pdl =
    TEST_DESC("test-pdl", "writes every output from a programmatic dependent launch", kPdl);
extern "C" const kvf_plugin_kernel kvf_test_cuda_sync =
    TEST_DESC("test-sync", "synchronizes its stream inside run()", kSync);
extern "C" const kvf_plugin_kernel kvf_test_cuda_trap =
    TEST_DESC("test-trap", "traps on the device", kTrap);
extern "C" const kvf_plugin_kernel kvf_test_cuda_huge_workspace = TEST_DESC_WS(
    "test-huge-workspace", "asks for 2^64 - 100 bytes of workspace", kPdl, huge_workspace);
