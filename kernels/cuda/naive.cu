// cuda-naive: one block per (sequence, q head), the whole sequence, no split, K/V re-read by
// every head of a group: the baseline the split kernel must beat (decode.cu registers it).
// FP8 caches are dequantized element by element in f32 (k_scale * k8, v_scale * v8), the way
// FlashInfer-Bench's reference does, where the split kernel folds the scales instead: the two
// are independent FP8 paths.
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>

#include "cuda_error.cuh"
#include "decode.cuh"
#include "plan.cuh"
#include "split_plan.h"

namespace kvf {

struct NaiveParams {
    const uint16_t *q, *k, *v;
    const int32_t *kv_indptr, *kv_indices, *kv_last_len;
    uint16_t *o;
    float *lse;
    int32_t num_qo_heads, num_kv_heads, page_size;
    int32_t len_cap; // tokens read at most per sequence (kvf_cuda_plan.naive_len_cap)
    float scale_log2;
    int32_t k_dtype, v_dtype, scale_gran; // plugin.h's numbers (0: bf16, no scales)
    const float *k_scale, *v_scale;
};

// Element `off` of a cache of element type dt (k and v point to bf16 bits or FP8 bytes).
__device__ __forceinline__ float naive_elem(const uint16_t *cache, int64_t off, int dt) {
    if (dt == kDtypeBf16) return __uint_as_float((uint32_t)cache[off] << 16);
    return fp8_to_float(reinterpret_cast<const uint8_t *>(cache)[off], dt == kDtypeE5m2);
}

// The index of the scale of (page, slot, kv head) at granularity gran (plugin.h).
__device__ __forceinline__ int64_t naive_scale_index(const NaiveParams &p, int64_t page, int slot,
                                                     int hk) {
    return p.scale_gran == 1   ? 0
           : p.scale_gran == 2 ? hk
                               : (page * p.page_size + slot) * p.num_kv_heads + hk;
}

constexpr int kNaiveThreads = 128;
constexpr int kNaiveTile = 32; // tokens per rescale, the smallest the strict rule models

template <int D>
__global__ void __launch_bounds__(kNaiveThreads) naive_kernel(const NaiveParams p) {
    constexpr int T = kNaiveTile, NW = kNaiveThreads / 32;
    constexpr int PER = (D + kNaiveThreads - 1) / kNaiveThreads; // output dims per thread
    __shared__ float s_q[D];
    __shared__ float s_p[T];
    __shared__ int64_t s_off[T];
    __shared__ float s_vs[T]; // each token's value scale (1 without scales)
    __shared__ float s_m, s_l, s_alpha;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int h = blockIdx.x, b = blockIdx.y;
    const int Hq = p.num_qo_heads, Hk = p.num_kv_heads, S = p.page_size;
    const int hk = h / (Hq / Hk);
    const int pbeg = p.kv_indptr[b], npages = p.kv_indptr[b + 1] - pbeg;
    const int len = min(npages == 0 ? 0 : (npages - 1) * S + p.kv_last_len[b], p.len_cap);

    for (int d = tid; d < D; d += kNaiveThreads)
        s_q[d] = __uint_as_float((uint32_t)p.q[((int64_t)b * Hq + h) * D + d] << 16);
    if (tid == 0) s_m = -INFINITY, s_l = 0.f;
    float acc[PER];
#pragma unroll
    for (int i = 0; i < PER; ++i)
        acc[i] = 0.f;
    __syncthreads();

    for (int t0 = 0; t0 < len; t0 += T) {
        const int n = min(T, len - t0);
        // Scores: one warp per token, lanes across D, fixed-order butterfly.
        for (int j = warp; j < n; j += NW) {
            const int t = t0 + j, pi = t / S, slot = t - pi * S;
            const int64_t page = p.kv_indices[pbeg + pi];
            const int64_t off = ((page * S + slot) * Hk + hk) * D;
            float ks = 1.f, vs = 1.f;
            if (p.scale_gran) {
                const int64_t si = naive_scale_index(p, page, slot, hk);
                ks = p.k_scale[si], vs = p.v_scale[si];
            }
            float dot = 0.f;
#pragma unroll
            for (int i = 0; i < D / 32; ++i) {
                float k = naive_elem(p.k, off + lane + 32 * i, p.k_dtype);
                if (p.scale_gran) k *= ks; // dequantized in f32
                dot = fmaf(s_q[lane + 32 * i], k, dot);
            }
            dot = warp_sum(dot);
            if (lane == 0) {
                s_p[j] = dot * p.scale_log2;
                s_off[j] = off;
                s_vs[j] = vs;
            }
        }
        __syncthreads();
        if (warp == 0) {
            const float x = lane < n ? s_p[lane] : -INFINITY; // mask by index
            const float m_old = s_m, m_new = fmaxf(m_old, warp_max(x));
            const float alpha = m_old == -INFINITY ? 0.f : exp2f(m_old - m_new);
            const float pk = x == -INFINITY ? 0.f : exp2f(x - m_new);
            s_p[lane] = pk;
            const float psum = warp_sum(pk);
            if (lane == 0) s_m = m_new, s_l = s_l * alpha + psum, s_alpha = alpha;
        }
        __syncthreads();
        const float alpha = s_alpha;
#pragma unroll
        for (int i = 0; i < PER; ++i) {
            const int d = tid + kNaiveThreads * i;
            if (d < D) {
                float a = acc[i] * alpha;
                for (int j = 0; j < n; ++j) { // only valid tokens: never 0 * NaN
                    float v = naive_elem(p.v, s_off[j] + d, p.v_dtype);
                    if (p.scale_gran) v *= s_vs[j]; // dequantized in f32
                    a = fmaf(s_p[j], v, a);
                }
                acc[i] = a;
            }
        }
        __syncthreads();
    }
    const float m = s_m, l = s_l;
    const int64_t row = (int64_t)b * Hq + h;
#pragma unroll
    for (int i = 0; i < PER; ++i) {
        const int d = tid + kNaiveThreads * i;
        if (d < D)
            p.o[row * D + d] =
                __bfloat16_as_ushort(__float2bfloat16_rn(l > 0.f ? acc[i] / l : 0.f));
    }
    if (tid == 0) p.lse[row] = l > 0.f ? m + log2f(l) : -INFINITY;
}
} // namespace kvf

int kvf__cuda_naive_prepare(kvf_cuda_plan *p, const kvf_cuda_problem *pr) {
    kvf__cuda_plan_set_problem(p, pr, kvf__cuda_scale_log2(pr->sm_scale));
    p->info.tile_tokens = kvf::kNaiveTile;
    p->info.max_splits = 1;
    p->info.ctas = (int64_t)p->B * p->Hq;
    p->ready = 1;
    return 0;
}

int kvf__cuda_naive_launch(kvf_cuda_plan *p, const kvf_cuda_tensors *t, cudaStream_t st,
                           kvf_error *err) {
    kvf::NaiveParams np;
    np.q = t->q, np.k = t->k_cache, np.v = t->v_cache;
    np.kv_indptr = t->kv_indptr, np.kv_indices = t->kv_indices;
    np.kv_last_len = t->kv_last_page_len;
    np.o = t->o, np.lse = t->lse;
    np.num_qo_heads = p->Hq, np.num_kv_heads = p->Hk, np.page_size = p->S;
    np.len_cap = p->naive_len_cap > 0 && p->naive_len_cap < INT32_MAX ? (int32_t)p->naive_len_cap
                                                                      : INT32_MAX;
    np.scale_log2 = p->scale_log2;
    np.k_dtype = p->k_dtype, np.v_dtype = p->v_dtype, np.scale_gran = p->scale_gran;
    np.k_scale = t->k_scale, np.v_scale = t->v_scale;
    const dim3 grid((unsigned)p->Hq, (unsigned)p->B);
    if (p->D == 64)
        kvf::naive_kernel<64><<<grid, kvf::kNaiveThreads, 0, st>>>(np);
    else if (p->D == 128)
        kvf::naive_kernel<128><<<grid, kvf::kNaiveThreads, 0, st>>>(np);
    else
        kvf::naive_kernel<256><<<grid, kvf::kNaiveThreads, 0, st>>>(np);
    KVF_CUDA_TRY(cudaGetLastError(), "Launching the naive decode kernel");
    return 0;
}
