// The FP8 widenings of kernels/cuda/fp8.cuh on the device, for test_fp8_widen.c
// (tests/fp8_widen_probe.h says what is written where).
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda/fp8.cuh"
#include "fp8_widen_probe.h"

__global__ void kvf__fp8_widen_kernel(const uint32_t *w, int n, bool e5m2, uint32_t *out,
                                      uint32_t *special) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const uint32_t x = w[i];
    const uint2 conv = kvf::fp8x4_to_bf16x4(x, e5m2), fast = kvf::fp8x4_to_bf16x4_fast(x, e5m2);
    const float4 fc = kvf::fp8x4_to_float4(x, e5m2), ff = kvf::fp8x4_to_float4_fast(x, e5m2);
    uint32_t *o = out + (size_t)i * 12;
    o[0] = conv.x, o[1] = conv.y, o[2] = fast.x, o[3] = fast.y;
    o[4] = __float_as_uint(fc.x), o[5] = __float_as_uint(fc.y), o[6] = __float_as_uint(fc.z);
    o[7] = __float_as_uint(fc.w), o[8] = __float_as_uint(ff.x), o[9] = __float_as_uint(ff.y);
    o[10] = __float_as_uint(ff.z), o[11] = __float_as_uint(ff.w);
    special[i] = kvf::fp8x4_special(x, e5m2);
}

extern "C" int kvf_test_fp8_widen(const uint32_t *w, int n, int e5m2, uint32_t *out,
                                  uint32_t *special, char *why, size_t why_len) {
    uint32_t *dw = nullptr, *dout = nullptr, *dsp = nullptr;
    cudaError_t e = cudaMalloc(&dw, (size_t)n * 4);
    if (e == cudaSuccess) e = cudaMalloc(&dout, (size_t)n * 48);
    if (e == cudaSuccess) e = cudaMalloc(&dsp, (size_t)n * 4);
    if (e == cudaSuccess) e = cudaMemcpy(dw, w, (size_t)n * 4, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) {
        kvf__fp8_widen_kernel<<<(n + 255) / 256, 256>>>(dw, n, e5m2 != 0, dout, dsp);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpy(out, dout, (size_t)n * 48, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess) e = cudaMemcpy(special, dsp, (size_t)n * 4, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) snprintf(why, why_len, "CUDA: %s", cudaGetErrorString(e));
    cudaFree(dw), cudaFree(dout), cudaFree(dsp);
    return e == cudaSuccess ? 0 : -1;
}
