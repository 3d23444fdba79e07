// One bf16 tensor-core MMA per problem, for test_mma_model.c: D = A·B + C with A [16][16]
// (m × k), B [16][8] (k × n), C and D [16][8], row-major, one warp per problem, through the
// split kernel's own wrapper (kvf::mma_bf16_16816, kernels/cuda/decode.cuh), so the test
// measures the instruction the kernel issues. The fragment layout is the PTX ISA's.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda/decode.cuh"
#include "mma_probe.h"

__global__ void kvf__mma_probe_kernel(const uint16_t *A, const uint16_t *B, const float *C,
                                      float *D, int n) {
    const int prob = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (prob >= n) return;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const uint16_t *a = A + (size_t)prob * 256;
    const uint16_t *b = B + (size_t)prob * 128;
    const float *c = C + (size_t)prob * 128;
    float *d = D + (size_t)prob * 128;
    auto pack = [](uint16_t lo, uint16_t hi) { return (uint32_t)lo | (uint32_t)hi << 16; };
    const uint32_t a0 = pack(a[g * 16 + 2 * t], a[g * 16 + 2 * t + 1]);
    const uint32_t a1 = pack(a[(g + 8) * 16 + 2 * t], a[(g + 8) * 16 + 2 * t + 1]);
    const uint32_t a2 = pack(a[g * 16 + 2 * t + 8], a[g * 16 + 2 * t + 9]);
    const uint32_t a3 = pack(a[(g + 8) * 16 + 2 * t + 8], a[(g + 8) * 16 + 2 * t + 9]);
    const uint32_t b0 = pack(b[(2 * t) * 8 + g], b[(2 * t + 1) * 8 + g]);
    const uint32_t b1 = pack(b[(2 * t + 8) * 8 + g], b[(2 * t + 9) * 8 + g]);
    const uint32_t af[4] = {a0, a1, a2, a3};
    float acc[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t],
                    c[(g + 8) * 8 + 2 * t + 1]};
    kvf::mma_bf16_16816(acc, af, b0, b1);
    d[g * 8 + 2 * t] = acc[0];
    d[g * 8 + 2 * t + 1] = acc[1];
    d[(g + 8) * 8 + 2 * t] = acc[2];
    d[(g + 8) * 8 + 2 * t + 1] = acc[3];
}

extern "C" int kvf_test_mma_bf16(const uint16_t *A, const uint16_t *B, const float *C, float *D,
                                 int n, char *why, size_t why_len) {
    uint16_t *dA = nullptr, *dB = nullptr;
    float *dC = nullptr, *dD = nullptr;
    cudaError_t e = cudaMalloc(&dA, (size_t)n * 256 * 2);
    if (e == cudaSuccess) e = cudaMalloc(&dB, (size_t)n * 128 * 2);
    if (e == cudaSuccess) e = cudaMalloc(&dC, (size_t)n * 128 * 4);
    if (e == cudaSuccess) e = cudaMalloc(&dD, (size_t)n * 128 * 4);
    if (e == cudaSuccess) e = cudaMemcpy(dA, A, (size_t)n * 256 * 2, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaMemcpy(dB, B, (size_t)n * 128 * 2, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaMemcpy(dC, C, (size_t)n * 128 * 4, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) {
        kvf__mma_probe_kernel<<<(n + 7) / 8, 256>>>(dA, dB, dC, dD, n);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpy(D, dD, (size_t)n * 128 * 4, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) snprintf(why, why_len, "CUDA: %s", cudaGetErrorString(e));
    cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(dD);
    return e == cudaSuccess ? 0 : -1;
}
