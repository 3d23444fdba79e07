// The split-KV merge kernel: combines the fp32 partial states splitkv_kernel (decode.cuh)
// left in the workspace into o and lse, one block per (q head, sequence) of a sequence with
// more than one split. Takes the bug policy B of decode.cuh; production instantiates NoBug.
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
};
// A mutant's merge kernel takes one field more (as SplitParamsMut, decode.cuh).
struct MergeParamsMut : MergeParams {
    int32_t max_splits; // B17: every row merges this many splits, written for it or not
};

constexpr int kMergeThreads = 256;

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
    // B17: the merge reads max_splits partial states for every row: those of the following
    // sequences, or workspace rows no split of this launch wrote (the plan sizes the workspace
    // for them, so the reads stay in bounds and return what the buffer host left there).
    const int first = p.seq_first[b], n = [&]() -> int {
        if constexpr (KVF_BUG(B, STALE_SCRATCH))
            return p.max_splits;
        else
            return p.seq_first[b + 1] - first;
    }();
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
            // An empty partial (m = -inf) weighs 0; never evaluate -inf - -inf (B02: no guard).
            float w;
            if constexpr (KVF_BUG(B, MERGE_EMPTY_NAN))
                w = ex2_approx(mlr[k].x - M);
            else
                w = mlr[k].x == -INFINITY ? 0.f : ex2_approx(mlr[k].x - M);
            if constexpr (KVF_BUG(B, MERGE_RACE)) {
                // B07: the normaliser is read before the last split's weight lands in it (a
                // missing barrier); its numerator is in o all the same.
                if (round * NW * K + k * NW + warp != n - 1) L = fmaf(w, mlr[k].y, L);
            } else {
                L = fmaf(w, mlr[k].y, L);
            }
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
    for (int d = tid; d < D; d += kMergeThreads) {
        float od = 0.f;
#pragma unroll
        for (int w = 0; w < NW; ++w)
            od += s_o[w][d];
        if constexpr (KVF_BUG(B, MERGE_EMPTY_NAN))
            p.o[orow * D + d] = __bfloat16_as_ushort(__float2bfloat16_rn(od / Lt));
        else if constexpr (KVF_BUG(B, TRUNC_STORE))
            p.o[orow * D + d] = (uint16_t)mut_bf16_trunc(Lt > 0.f ? od / Lt : 0.f);
        else
            p.o[orow * D + d] = __bfloat16_as_ushort(__float2bfloat16_rn(Lt > 0.f ? od / Lt : 0.f));
    }
    if constexpr (KVF_BUG(B, SPLIT_LSE)) {
        // B06: the lse of the largest split, m_i + log2(l_i), instead of the merged one.
        if (warp == 0) {
            float lse_big = -INFINITY;
            for (int i = lane; i < n; i += 32) {
                const float2 mi = ml[(int64_t)i * Hq];
                lse_big = fmaxf(lse_big, mi.x + log2f(mi.y));
            }
            lse_big = warp_max(lse_big);
            if (lane == 0) p.lse[orow] = Lt > 0.f ? lse_big : -INFINITY;
        }
    } else if (tid == 0) {
        if constexpr (KVF_BUG(B, MERGE_EMPTY_NAN))
            p.lse[orow] = M + log2f(Lt);
        else
            p.lse[orow] = row_lse<B>(M, Lt);
    }
}

} // namespace kvf
