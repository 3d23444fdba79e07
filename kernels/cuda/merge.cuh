// The split-KV merge kernels: combine the fp32 partial states splitkv_kernel (decode.cuh) left
// in the workspace into o and lse for every sequence with more than one split. merge_kernel
// gives each (q head, sequence) a block, whose warps take the splits round-robin;
// merge_warp_kernel, for plans of at most kMergeWarpSplits splits a sequence and many rows
// (split_launch.cuh), gives each a warp, so that a wide batch of few splits does not leave most
// of every block idle. Both add the
// splits' weighted states in the same order, so they give the same bits. Take the bug policy B
// of decode.cuh; production instantiates NoBug.
#pragma once

#include "decode.cuh"

namespace kvf {

struct MergeParams {
    const float *ws_acc;
    const float2 *ws_ml;
    const int32_t *seq_first;
    uint16_t *o;
    float *lse;
    int32_t num_qo_heads;
    int32_t batch; // sequences (merge_warp_kernel's row count is num_qo_heads x batch)
    // FP8 caches with one value scale per CTA (SplitParams.scale_mode 1): o is multiplied by
    // v_scale[h / vs_group] (vs_group 0: v_scale[0]) after the division. NULL: no scale.
    const float *v_scale;
    int32_t vs_group;
};
// A mutant's merge kernel takes one field more (as SplitParamsMut, decode.cuh).
struct MergeParamsMut : MergeParams {
    int32_t max_splits; // B17: every row merges this many splits, written for it or not
};

constexpr int kMergeThreads = 256;
constexpr int kMergeWarpSplits = 8; // merge_warp_kernel's limit: one register slot per split

// The pieces both kernels share, with the mutants that live in them.
// The number of splits of sequence b, and its first merge row in *first.
template <class B, class P>
__device__ __forceinline__ int merge_count(const P &p, int b, int *first) {
    *first = p.seq_first[b];
    // B17: the merge reads max_splits partial states for every row: those of the following
    // sequences, or workspace rows no split of this launch wrote (the plan sizes the workspace
    // for them, so the reads stay in bounds and return what the buffer host left there).
    if constexpr (KVF_BUG(B, STALE_SCRATCH))
        return p.max_splits;
    else
        return p.seq_first[b + 1] - *first;
}
// The weight 2^(m_i - M) of a partial state. An empty partial (m = -inf) weighs 0; never
// evaluate -inf - -inf (B02: no guard).
template <class B> __device__ __forceinline__ float merge_weight(float m, float M) {
    if constexpr (KVF_BUG(B, MERGE_EMPTY_NAN))
        return ex2_approx(m - M);
    else
        return m == -INFINITY ? 0.f : ex2_approx(m - M);
}
// The value scale of q head h's row (MergeParams.v_scale), 1 without one. scale-q-head reads a
// per-head scale at h mod Hk instead.
template <class B, class P> __device__ __forceinline__ float merge_vscale(const P &p, int h) {
    if (!p.v_scale) return 1.f;
    int i = p.vs_group ? h / p.vs_group : 0;
    if constexpr (KVF_BUG(B, SCALE_Q_HEAD))
        if (p.vs_group) i = h % (p.num_qo_heads / p.vs_group);
    return __ldg(p.v_scale + i);
}
// One element of o from the merged numerator and denominator, as bf16 bits; vs multiplies the
// quotient when the row has a value scale (has_vs), a rounding of its own.
template <class B>
__device__ __forceinline__ uint16_t merge_out(float od, float Lt, bool has_vs, float vs) {
    if constexpr (KVF_BUG(B, MERGE_EMPTY_NAN)) {
        return __bfloat16_as_ushort(__float2bfloat16_rn(od / Lt));
    } else if constexpr (KVF_BUG_TRUNC_STORE(B)) {
        return (uint16_t)mut_bf16_trunc(Lt > 0.f ? od / Lt : 0.f);
    } else {
        float x = Lt > 0.f ? od / Lt : 0.f;
        if (has_vs) x *= vs;
        return __bfloat16_as_ushort(__float2bfloat16_rn(x));
    }
}
// The row's lse from M and the merged denominator (split_lse_big: B06's largest split lse).
template <class B>
__device__ __forceinline__ float merge_lse(float M, float Lt, float split_lse_big) {
    if constexpr (KVF_BUG(B, SPLIT_LSE)) // B06: the largest split's lse, not the merged one
        return Lt > 0.f ? split_lse_big : -INFINITY;
    else if constexpr (KVF_BUG(B, MERGE_EMPTY_NAN))
        return M + log2f(Lt);
    else
        return row_lse<B>(M, Lt);
}
// Adds w * l to the denominator, except (B07) the last split's: read before its weight lands
// in it (a missing barrier); its numerator is in o all the same.
template <class B>
__device__ __forceinline__ float merge_add_l(float L, float w, float l, int i, int n) {
    if constexpr (KVF_BUG(B, MERGE_RACE))
        return i != n - 1 ? fmaf(w, l, L) : L;
    else
        return fmaf(w, l, L);
}

// One block per (q head, sequence): o = sum_i 2^(m_i-M) acc_i / sum_i 2^(m_i-M) l_i with
// M = max_i m_i, so each partial is rescaled exactly once. Latency is what matters here (the
// partials sit in L2): every load of a round (up to 64 splits) is issued before M is known,
// warps take splits round-robin, and the warps' sums are added in a fixed order.
template <int D, class B>
__global__ void __launch_bounds__(kMergeThreads)
    merge_kernel(const ParamsFor<B, MergeParams, MergeParamsMut> p) {
    constexpr int NW = kMergeThreads / 32, PER = D / 32, K = 8; // K splits per warp per round
    __shared__ float s_o[NW][D];
    __shared__ float s_lw[NW];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int h = blockIdx.x, b = blockIdx.y, Hq = p.num_qo_heads;
    int first;
    const int n = merge_count<B>(p, b, &first);
    if (n <= 1) return; // the split kernel wrote this sequence itself
    // Programmatic dependent launch: the partial states are complete and visible after this.
    asm volatile("griddepcontrol.wait;" ::: "memory");

    const float2 *ml = p.ws_ml + (int64_t)first * Hq + h;
    const float *acc = p.ws_acc + ((int64_t)first * Hq + h) * D + lane * PER;
    float o[PER], L = 0.f, M = -INFINITY;
#pragma unroll
    for (int k = 0; k < PER; ++k)
        o[k] = 0.f;
    for (int round = 0; round * NW * K < n; ++round) {
        float2 mlr[K];
        float a[K][PER];
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int i = round * NW * K + k * NW + warp;
            mlr[k] = make_float2(-INFINITY, 0.f);
            if (i < n) {
                mlr[k] = ml[(int64_t)i * Hq];
#pragma unroll
                for (int e = 0; e < PER; e += 2) {
                    const float2 v =
                        *reinterpret_cast<const float2 *>(acc + (int64_t)i * Hq * D + e);
                    a[k][e] = v.x, a[k][e + 1] = v.y;
                }
            } else {
#pragma unroll
                for (int e = 0; e < PER; ++e)
                    a[k][e] = 0.f;
            }
        }
        if (round == 0) {
            // Every warp derives the same M from lane-strided loads (no block barrier).
            for (int i = lane; i < n; i += 32)
                M = fmaxf(M, ml[(int64_t)i * Hq].x);
            M = warp_max(M);
        }
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const float w = merge_weight<B>(mlr[k].x, M);
            L = merge_add_l<B>(L, w, mlr[k].y, round * NW * K + k * NW + warp, n);
#pragma unroll
            for (int e = 0; e < PER; ++e)
                o[e] = fmaf(w, a[k][e], o[e]);
        }
    }
#pragma unroll
    for (int k = 0; k < PER; ++k)
        s_o[warp][lane * PER + k] = o[k];
    if (lane == 0) s_lw[warp] = L;
    __syncthreads();
    float Lt = 0.f;
#pragma unroll
    for (int w = 0; w < NW; ++w)
        Lt += s_lw[w];
    const int64_t orow = (int64_t)b * Hq + h;
    const float vs = merge_vscale<B>(p, h);
    for (int d = tid; d < D; d += kMergeThreads) {
        float od = 0.f;
#pragma unroll
        for (int w = 0; w < NW; ++w)
            od += s_o[w][d];
        p.o[orow * D + d] = merge_out<B>(od, Lt, p.v_scale != nullptr, vs);
    }
    float lse_big = -INFINITY; // B06's largest split lse
    if constexpr (KVF_BUG(B, SPLIT_LSE)) {
        if (warp == 0) {
            for (int i = lane; i < n; i += 32) {
                const float2 mi = ml[(int64_t)i * Hq];
                lse_big = fmaxf(lse_big, mi.x + log2f(mi.y));
            }
            lse_big = warp_max(lse_big);
        }
    }
    if (tid == 0) p.lse[orow] = merge_lse<B>(M, Lt, lse_big);
}

// One warp per (q head, sequence), kMergeThreads / 32 rows a block, for plans whose sequences
// have at most kMergeWarpSplits splits. Each lane loads its D / 32 dims of every split before M
// is known, weighs each split's state like merge_kernel's warp that holds it (split i goes to
// warp i there: one split each), and adds the products in split order, as merge_kernel adds
// its warps' sums: the same bits.
template <int D, class B>
__global__ void __launch_bounds__(kMergeThreads)
    merge_warp_kernel(const ParamsFor<B, MergeParams, MergeParamsMut> p) {
    constexpr int PER = D / 32, K = kMergeWarpSplits;
    const int lane = threadIdx.x & 31, Hq = p.num_qo_heads;
    const int64_t row = (int64_t)blockIdx.x * (kMergeThreads / 32) + (threadIdx.x >> 5);
    if (row >= (int64_t)Hq * p.batch) return;
    const int b = (int)(row / Hq), h = (int)(row - (int64_t)b * Hq);
    int first;
    const int n = merge_count<B>(p, b, &first);
    if (n <= 1) return;
    asm volatile("griddepcontrol.wait;" ::: "memory");

    const float2 *ml = p.ws_ml + (int64_t)first * Hq + h;
    const float *acc = p.ws_acc + ((int64_t)first * Hq + h) * D + lane * PER;
    float2 mlr[K];
    float a[K][PER];
    float M = -INFINITY;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        mlr[k] = make_float2(-INFINITY, 0.f);
        if (k < n) {
            mlr[k] = ml[(int64_t)k * Hq];
#pragma unroll
            for (int e = 0; e < PER; e += 2) {
                const float2 v = *reinterpret_cast<const float2 *>(acc + (int64_t)k * Hq * D + e);
                a[k][e] = v.x, a[k][e + 1] = v.y;
            }
            M = fmaxf(M, mlr[k].x);
        }
    }
    // merge_kernel: warp k holds fma(w_k, a_k, 0) and fma(w_k, l_k, 0), then its warps are added
    // from 0.
    float o[PER], L = 0.f;
#pragma unroll
    for (int e = 0; e < PER; ++e)
        o[e] = 0.f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        if (k < n) {
            const float w = merge_weight<B>(mlr[k].x, M);
            L += merge_add_l<B>(0.f, w, mlr[k].y, k, n);
#pragma unroll
            for (int e = 0; e < PER; ++e)
                o[e] += fmaf(w, a[k][e], 0.f);
        }
    }
    const int64_t orow = (int64_t)b * Hq + h;
    const float vs = merge_vscale<B>(p, h);
#pragma unroll
    for (int e = 0; e < PER; ++e)
        p.o[orow * D + lane * PER + e] = merge_out<B>(o[e], L, p.v_scale != nullptr, vs);
    float lse_big = -INFINITY; // B06's largest split lse
    if constexpr (KVF_BUG(B, SPLIT_LSE)) {
#pragma unroll
        for (int k = 0; k < K; ++k)
            if (k < n) lse_big = fmaxf(lse_big, mlr[k].x + log2f(mlr[k].y));
    }
    if (lane == 0) p.lse[orow] = merge_lse<B>(M, L, lse_big);
}

} // namespace kvf
