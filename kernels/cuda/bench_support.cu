// Device helpers for `kvfuzz bench`: deterministic input fill and the read roofline.
//
// The roofline is the bandwidth a plain streaming read of the same number of bytes reaches in
// the same run: 16-byte loads, four independent ones in flight per thread, a grid of several
// blocks per SM, and an XOR checksum per block written out so the loads cannot be dropped.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <stdint.h>

#include "kvfuzz/cuda_kernels.h"

namespace {

constexpr int kRoofThreads = 512;
constexpr int kRoofBlocksPerSm = 4;
constexpr int kRoofUnroll = 4;
constexpr int64_t kRoofMaxBlocks = 1024; // sink length; >= SMs * blocks per SM on an H200

__global__ void __launch_bounds__(kRoofThreads)
    roofline_kernel(const uint4 *src, int64_t n, uint32_t *sink) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    uint32_t x = 0;
    for (; i + (kRoofUnroll - 1) * stride < n; i += kRoofUnroll * stride) {
        uint4 w[kRoofUnroll];
#pragma unroll
        for (int u = 0; u < kRoofUnroll; ++u)
            w[u] = __ldcs(src + i + u * stride);
#pragma unroll
        for (int u = 0; u < kRoofUnroll; ++u)
            x ^= w[u].x ^ w[u].y ^ w[u].z ^ w[u].w;
    }
    for (; i < n; i += stride) {
        const uint4 w = __ldcs(src + i);
        x ^= w.x ^ w.y ^ w.z ^ w.w;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        x ^= __shfl_xor_sync(0xffffffffu, x, o);
    __shared__ uint32_t s[kRoofThreads / 32];
    if ((threadIdx.x & 31) == 0) s[threadIdx.x >> 5] = x;
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t y = 0;
        for (int w = 0; w < kRoofThreads / 32; ++w)
            y ^= s[w];
        sink[blockIdx.x] = y;
    }
}

// SplitMix64 finalizer: a good 64-bit mix, cheap, the same on every device.
__device__ __forceinline__ uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

__global__ void fill_bf16_kernel(uint16_t *dst, int64_t n, uint64_t seed, float scale) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const uint64_t h = mix64(seed ^ mix64((uint64_t)i));
        const float u = (float)(h >> 40) * (1.0f / 16777216.0f); // [0, 1), 24 bits
        const float x = (2.0f * u - 1.0f) * scale;
        dst[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x));
    }
}

int fail(kvf_error *err, cudaError_t e, const char *what) {
    return kvf_error_set(err, e == cudaErrorMemoryAllocation ? KVF_ENOMEM : KVF_EDEVICE,
                         "%s failed: %s.", what, cudaGetErrorString(e));
}

} // namespace

extern "C" int64_t kvf_cuda_roofline_sink_len(void) {
    return kRoofMaxBlocks;
}

extern "C" int kvf_cuda_roofline_launch(const void *dev, int64_t bytes, uint32_t *sink,
                                        void *stream, kvf_error *err) {
    if (!dev || !sink || bytes < 0)
        return kvf_error_set(err, KVF_EINVAL,
                             "The roofline needs a buffer, a sink and bytes >= 0.");
    int device = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (e != cudaSuccess) return fail(err, e, "Querying the device");
    const int64_t n = (bytes + 15) / 16;
    int64_t blocks = (int64_t)sms * kRoofBlocksPerSm;
    const int64_t need = (n + kRoofThreads - 1) / kRoofThreads;
    if (blocks > need) blocks = need > 0 ? need : 1;
    if (blocks > kRoofMaxBlocks) blocks = kRoofMaxBlocks;
    roofline_kernel<<<(unsigned)blocks, kRoofThreads, 0, (cudaStream_t)stream>>>((const uint4 *)dev,
                                                                                 n, sink);
    e = cudaGetLastError();
    return e == cudaSuccess ? 0 : fail(err, e, "Launching the roofline kernel");
}

extern "C" int kvf_cuda_fill_bf16(kvf_bf16 *dev, int64_t n, uint64_t seed, float scale,
                                  void *stream, kvf_error *err) {
    if (n <= 0) return 0;
    const int64_t blocks = (n + 255) / 256 < 65536 ? (n + 255) / 256 : 65536;
    fill_bf16_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(dev, n, seed, scale);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : fail(err, e, "Launching the fill kernel");
}
