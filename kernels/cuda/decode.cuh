// Shared device code of the CUDA decode kernels: parameters, bf16 helpers, cp.async wrappers and
// the split-KV main kernel template. split_launch.cuh launches it, split_plan.h plans it;
// decode_split_d{64,128,256}.cu instantiate the template, one head dim each, so the 48
// (head dim, group) instances compile in parallel.
//
// The split-KV kernel (flash-decoding). One CTA handles one work item (a chunk of one sequence's
// tokens) for one KV head and all G query heads of that head, so every K/V byte is read once per
// group. Per tile of T >= 32 tokens (the strict rule's model: one running-max rescale per tile,
// never per token):
//   1. cp.async brings K and V rows of tile i+2 into a 3-stage shared-memory ring (16-byte
//      copies; rows past the chunk's end are zero-stored, never loaded, so unused last-page
//      slots never reach shared memory);
//   2. scores on tensor cores: each warp computes q.k for 8 tokens and all G heads (the MMA's
//      16 rows, heads past G zero) with chained mma.sync m16n8k16 bf16 -> fp32 over its slice
//      of D (all of D for T = 64, half for D = 256); slices are summed in a fixed order. The
//      MMA's accumulation truncates (measured by tests/test_mma_model.c); docs/strict-rule.md
//      (K2) models it, and the bf16-qk mutant keeps the CUDA-core FMA dot product it corrupts;
//   3. softmax (one warp per head): the tile max, one rescale factor alpha = 2^(m_old - m_new),
//      and p = 2^(s - m_new) with masked tokens set to exactly 0 (by index, not by
//      multiplication); the denominator is kept per lane and summed once at the end;
//   4. P.V: each thread owns VEC output dims of every head for TPG consecutive tokens; the
//      accumulators are rescaled only when alpha != 1.
// At the end the token groups are summed in a fixed tree order (deterministic bits) and the
// result is either written out (one split) or stored unnormalized with (m, l) in fp32 for the
// merge kernel. Measured on an H200 in docs/performance.md.
//
// Mutants (kernels/mutants.def): the kernels take a bug policy, Bug<KVF__MUT_<ID>> (below), as
// a template parameter and test it with `if constexpr (KVF_BUG(B, <ID>))`, the way FlashInfer's
// AttentionVariant selects code at compile time. Every mutant branch compiles in every build;
// the production instances (decode_split_d*.cu, merge.cuh via decode.cu) take NoBug, which
// discards every one of them, so their code is that of a kernel that never had the hooks.
// kernels/cuda/mutants/decode_mutant.cu instantiates the same templates with one mutant's
// policy (distinct template arguments: no instance can stand in for a production one).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <type_traits>

#include "../mutants.h"

namespace kvf {

// A bug policy: the id (kernels/mutants.h) of the deliberate bug compiled in, KVF__MUT_NONE for
// none. Each mutant is the one-line policy Bug<KVF__MUT_<ID>>.
template <int Id> struct Bug { static constexpr int id = Id; };
using NoBug = Bug<KVF__MUT_NONE>;
#define KVF_BUG(B, X) ((B::id) == (int)KVF__MUT_##X)

// The parameters of the kernels of policy B: P for production (NoBug), M for a mutant.
template <class B, class P, class M>
using ParamsFor = typename std::conditional<B::id == (int)KVF__MUT_NONE, P, M>::type;

constexpr int kThreads = 256; // 8 warps: enough loads in flight with 2 CTAs per SM
constexpr int kStages = 3;    // shared-memory ring depth: tiles i+1 and i+2 load during tile i

// Everything the split kernel reads; device pointers.
struct SplitParams {
    const uint16_t *q, *k, *v;
    const int32_t *kv_indptr, *kv_indices, *kv_last_len;
    // [n_items] work items precomputed by the plan: (sequence, kv_indptr[sequence], first
    // token, end token | 1 << 31 when the item is its sequence's only one). One 16-byte load
    // instead of a chain of dependent index loads before the first K/V request.
    const int4 *items;
    const int32_t *seq_first; // [B+1] first work item of each sequence (merge kernel)
    uint16_t *o;
    float *lse;
    float *ws_acc; // [n_items][Hq][D] unnormalized partial outputs
    float2 *ws_ml; // [n_items][Hq] (running max m, sum l), base 2
    int32_t num_qo_heads, num_kv_heads, page_size;
    int32_t page_shift;   // log2(page_size) when a power of two, else -1 (then divide)
    int32_t tile_in_page; // page_size % T == 0: a tile never crosses a page (one id per tile)
    int32_t row_elems;    // Hk * D: elements between consecutive slots of a page
    int64_t page_elems;   // S * Hk * D, 64-bit: page * page_elems passes 2^31 (B10)
    int32_t chunk_tokens;
    float scale_log2; // sm_scale * log2(e): logits in base-2 units
    int32_t use_pdl;  // the merge kernel was launched as a programmatic dependent
};
// A mutant's split kernel takes two fields more, which two mutants read. They live in a struct
// of their own so that the production kernels' parameter block is the one they always had.
struct SplitParamsMut : SplitParams {
    int64_t pool_elems; // P * S * Hk * D: B10's wrapped offset is folded back into the pool
    int32_t n_entries;  // kv_indptr[B]: B15's extra page's table entry is clamped to the table
};

// Compile-time geometry of one (D, G) instance.
template <int D, int G> struct SplitCfg {
    static constexpr int T = D == 256 ? 32 : 64; // tile tokens: equal bytes per tile for D=256
    static constexpr int ROW = D + 8;            // smem row stride (bf16): +16 B keeps the
                                                 // per-token LDS.128 of the scores conflict-free
    static constexpr int TB = T / 32;            // 32-token blocks per tile (scores phase)
    static constexpr int NW = kThreads / 32;
    static constexpr int DS = NW / TB;         // D slices in the FMA scores (one per warp group)
    static constexpr int DSL = D / DS;         // dims per slice
    static constexpr int NB = T / 8;           // 8-token column blocks of the MMA scores
    static constexpr int MS = NW / NB;         // D slices of the MMA scores (one warp each)
    static constexpr int MDSL = D / MS;        // dims per MMA slice
    static constexpr int KS = MDSL / 16;       // chained MMAs per slice (k = 16 each)
    static constexpr int MSR = T + 8;          // MMA score row stride: conflict-free float2 stores
    static constexpr int VEC = G <= 8 ? 8 : 4; // P.V dims per thread; 4 keeps G*VEC <= 64 regs
    static constexpr int NC = D / VEC;         // P.V dim chunks
    static constexpr int NG = kThreads / NC;   // P.V token groups
    static constexpr int TPG = T / NG;         // tokens per group per tile
    static constexpr int CPR = D / 8;          // 16-byte chunks per K/V row
    static constexpr int RSTEP = kThreads / CPR;
    static constexpr int LROWS = T / RSTEP; // rows each thread copies per tile (K and V)
    static constexpr int KV_TILE = T * ROW; // bf16 elements of one K (or V) tile
    // Shared memory, bytes: [kStages][K,V][T][ROW] bf16 | q [G][D] f32 | s [DS][G][T] f32 |
    // m, l, alpha [16] f32 each. p aliases slice 0 of s.
    static constexpr int OFF_Q = kStages * 2 * KV_TILE * 2;
    static constexpr int OFF_S = OFF_Q + G * D * 4;
    static constexpr int OFF_STAT = OFF_S + DS * G * T * 4;
    static constexpr int SMEM = OFF_STAT + 3 * 16 * 4;
    // Two CTAs per SM when their shared memory fits (228 KB per SM, 1 KB reserved per CTA);
    // the register cap of 128 that this implies costs a few spills only for G >= 6.
    static constexpr int MIN_BLOCKS = 2 * (SMEM + 1024) <= 233472 ? 2 : 1;
    static_assert(DSL % 8 == 0 && T % NG == 0 && T % RSTEP == 0, "geometry");
    static_assert(NW % NB == 0 && KS % 2 == 0 && G <= 16, "MMA scores geometry");
    static_assert(MS * MSR <= DS * T, "MMA scores fit the FMA scores' buffer");
    static_assert((kThreads / 2) * G * VEC * 4 <= OFF_Q, "epilogue buffer fits in the ring");
    static_assert(G <= 2 * NW, "softmax phase: at most two heads per warp");
};

// bf16 <-> f32. A bf16 is the top half of an f32, so widening is exact.
__device__ __forceinline__ float bf16lo(uint32_t w) {
    return __uint_as_float(w << 16);
}
__device__ __forceinline__ float bf16hi(uint32_t w) {
    return __uint_as_float(w & 0xffff0000u);
}
// Round to nearest even, both halves (cvt.rn.bf16x2.f32).
__device__ __forceinline__ uint32_t pack_bf16x2_rn(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}

// Mutants B12 / precision: a value kept in a bf16 register (round to nearest even).
__device__ __forceinline__ float mut_bf16_round(float x) {
    return __bfloat162float(__float2bfloat16_rn(x));
}
// Mutant "rounding": the bf16 store drops the low half instead of rounding (NaN stays NaN).
__device__ __forceinline__ uint32_t mut_bf16_trunc(float x) {
    const uint32_t u = __float_as_uint(x);
    return (u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : u >> 16;
}
// The lse a finished row reports from its maximum m and denominator l (both base 2): the
// split kernel's direct write and the merge kernel both use it. Three mutants get it wrong.
template <class B> __device__ __forceinline__ float row_lse(float m, float l) {
    if constexpr (KVF_BUG(B, FINITE_MASK_SENTINEL))
        return l > 0.f ? m + log2f(l) : -5e4f; // B01: an empty row reports the finite sentinel
    else if constexpr (KVF_BUG(B, EMPTY_SEQ_LSE_ZERO))
        return l > 0.f ? m + log2f(l) : 0.f; // B04: an empty request gets lse 0, not -inf
    else if constexpr (KVF_BUG(B, NATURAL_LOG_LSE))
        return l > 0.f ? (m + log2f(l)) * 0.69314718055994530942f : -INFINITY; // natural log
    else
        return l > 0.f ? m + log2f(l) : -INFINITY;
}
// Mutant B10: the element offset page * (S * Hk * D) + ... computed in int32 wraps past 2^31.
// The wrapped value is folded into [0, pool) the way the CPU mutant folds it, so the mutant
// reads some other page of the pool instead of faulting: a numerical finding that leaves the
// device healthy for the next kernel.
__device__ __forceinline__ int64_t mut_int32_offset(int64_t off, int64_t pool_elems) {
    const int64_t o32 = (int32_t)(uint32_t)(uint64_t)off;
    return (o32 % pool_elems + pool_elems) % pool_elems;
}

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8x8 bf16 matrices from shared memory, rows addressed by lanes 8i..8i+7 for matrix i;
// register i holds this lane's pair of matrix i (row lane / 4, columns 2 (lane % 4), +1).
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void *smem_row) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
// c += A (16 x 16, bf16, row-major fragments a[4]) * B (16 x 8, bf16, column fragments b0, b1),
// fp32 accumulation on the tensor cores (truncating: docs/strict-rule.md, K2).
__device__ __forceinline__ void mma_bf16_16816(float c[4], const uint32_t a[4], uint32_t b0,
                                               uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 2^x with one MUFU.EX2 (relative error about 2^-22, subnormal results flushed to zero): the
// strict rule's model of the weights' exponential (K1, K3 in docs/strict-rule.md). exp2f would
// add a few instructions per call to keep subnormal results.
__device__ __forceinline__ float ex2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}
// Butterfly sum; lanes may differ in the last bit, so lane 0's value is broadcast.
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, o);
    return __shfl_sync(0xffffffffu, x, 0);
}

// Token t of a sequence -> (page index in the sequence's table, slot).
template <class B>
__device__ __forceinline__ void token_page(int t, int page_size, int page_shift, int *pi,
                                           int *slot) {
    if (page_shift >= 0) {
        *pi = t >> page_shift;
        *slot = t & (page_size - 1);
    } else {
        *pi = t / page_size;
        *slot = t - *pi * page_size;
    }
    if constexpr (KVF_BUG(B, PAGE_SIZE_128))
        if (page_size > 128) *slot = t % 128; // B18: slot arithmetic sized for S <= 128
}

// B15: the page table entry of page `pi` of a sequence, read one page too far; past the end of
// the whole table it reads entry 0 (whatever a real kernel would find there, but in bounds).
__device__ __forceinline__ int mut_page_entry(int entry, int n_entries) {
    return entry < n_entries ? entry : 0;
}

// The mutants that map q heads to kv heads their own way run the G = 1 instance with one CTA
// per q head, so that every head can read a different kv head, as the CPU mutant does.
template <class B> constexpr bool head_per_cta() {
    return KVF_BUG(B, GROUP_POW2) || KVF_BUG(B, HEAD_MODULO);
}
// The kv head that q head h reads under such a mutant's mapping.
template <class B> __device__ __forceinline__ int mut_kv_head(int h, int Hq, int Hk) {
    if constexpr (KVF_BUG(B, HEAD_MODULO)) {
        return h % Hk; // h % Hk instead of h / G
    } else {
        const int group = Hq / Hk;
        int p2 = 1;
        while (p2 < group)
            p2 *= 2; // B08: a head tile sized for power-of-two groups
        return min(h / p2, Hk - 1);
    }
}

template <int D, int G, class B>
__global__ void __launch_bounds__(kThreads, SplitCfg<D, G>::MIN_BLOCKS)
    splitkv_kernel(const ParamsFor<B, SplitParams, SplitParamsMut> p) {
    using C = SplitCfg<D, G>;
    constexpr int T = C::T;
    extern __shared__ __align__(16) unsigned char smem[];
    uint16_t *s_kv = reinterpret_cast<uint16_t *>(smem);
    float *s_q = reinterpret_cast<float *>(smem + C::OFF_Q);
    float *s_s = reinterpret_cast<float *>(smem + C::OFF_S);
    float *s_p = s_s; // p[g][t] overwrites slice 0 of the scores, thread by thread
    float *s_m = reinterpret_cast<float *>(smem + C::OFF_STAT);
    float *s_l = s_m + 16;
    float *s_alpha = s_l + 16;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    // blockIdx.y: the kv head, or (head_per_cta, G = 1) the q head.
    const int item = blockIdx.x,
              hk = head_per_cta<B>() ? mut_kv_head<B>(blockIdx.y, p.num_qo_heads, p.num_kv_heads)
                                     : blockIdx.y;
    const int Hq = p.num_qo_heads, S = p.page_size;
    const int4 it = p.items[item];
    // Token indices fit in int: the host rejects sequences longer than KVF_CUDA_MAX_SEQ_LEN.
    const int b = it.x, pbeg = it.y, tok_beg = it.z, chunk_end = it.w & 0x7fffffff;
    const bool single = it.w < 0;
    const int ntiles = chunk_end > tok_beg ? (chunk_end - tok_beg + T - 1) / T : 0;
    int tok_end = chunk_end;
    if constexpr (KVF_BUG(B, CHUNK_NOT_TILE_MULTIPLE)) {
        // B09: the tiles cover the chunk [tok_beg, chunk_end), but tokens are masked against
        // the sequence's end, so the last tile of a chunk runs on into the next chunk's tokens.
        const int npages_b = p.kv_indptr[b + 1] - pbeg;
        tok_end = npages_b == 0 ? 0 : (npages_b - 1) * S + p.kv_last_len[b];
    }
    const int hq0 = head_per_cta<B>() ? (int)blockIdx.y : hk * G;

    // The merge kernel may be scheduled now; it waits for this grid's completion before
    // reading the workspace (griddepcontrol.wait), so triggering early only hides its launch.
    if (p.use_pdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");

    // q of the G heads, loaded into registers now and stored to shared memory as f32 (read as
    // warp-wide broadcasts) once the first tiles' copies are issued: the page-index loads and
    // the copies they gate then wait on memory at the same time as q, not after it.
    // The MMA scores take q as A fragments held in registers for the whole CTA instead: for
    // MMA kk of this warp's slice, rows (heads) lane / 4 and lane / 4 + 8, dims k0 + 2 (lane %
    // 4), +1 and +8, +9 (rows past G are zero; for G <= 8 the second half of the rows is).
    constexpr bool kMma = !KVF_BUG(B, BF16_QK); // the mutant corrupts the FMA dot product
    constexpr int QV = kMma ? 1 : (G * D / 8 + kThreads - 1) / kThreads; // 16-byte q vectors
    uint4 qw[QV];
    uint32_t qf[C::KS][4];
    {
        // B14: every request reads request 0's q.
        const int64_t qrow = KVF_BUG(B, BATCH_INDEX) ? (int64_t)hq0 : (int64_t)b * Hq + hq0;
        if constexpr (kMma) {
            const int r = lane >> 2, c2 = 2 * (lane & 3), ms = warp / C::NB;
            const uint32_t *q0 = reinterpret_cast<const uint32_t *>(p.q + (qrow + r) * D);
            const uint32_t *q8 = reinterpret_cast<const uint32_t *>(p.q + (qrow + r + 8) * D);
#pragma unroll
            for (int kk = 0; kk < C::KS; ++kk) {
                const int k0 = ms * C::MDSL + kk * 16 + c2;
                qf[kk][0] = r < G ? __ldg(q0 + k0 / 2) : 0u;
                qf[kk][2] = r < G ? __ldg(q0 + (k0 + 8) / 2) : 0u;
                qf[kk][1] = G > 8 && r + 8 < G ? __ldg(q8 + k0 / 2) : 0u;
                qf[kk][3] = G > 8 && r + 8 < G ? __ldg(q8 + (k0 + 8) / 2) : 0u;
            }
        } else {
            const uint4 *qg = reinterpret_cast<const uint4 *>(p.q + qrow * D);
#pragma unroll
            for (int k = 0; k < QV; ++k) {
                const int i = tid + k * kThreads;
                if (i < G * D / 8) qw[k] = qg[i];
            }
        }
    }
    (void)qw, (void)qf;
    // Score rows: [slice][head][SR] floats; NSL slices to sum.
    constexpr int SR = kMma ? C::MSR : T, NSL = kMma ? C::MS : C::DS;

    // Copy assignment: thread copies 16-byte chunk `cc` of rows row0 + RSTEP*j.
    const int cc = tid % C::CPR, row0 = tid / C::CPR;
    const int head_off = hk * D + cc * 8;
    // Page ids of the next tile to issue, fetched one iteration early so the dependent
    // index load never stalls the copy issue. When pages hold whole tiles (S % T == 0, and
    // chunks start on tile boundaries) one id serves every row: pg[0], sl[0] = the first slot.
    int pg[C::LROWS], sl[C::LROWS];
    auto fetch_pages = [&](int tile) {
        const int t0 = tok_beg + tile * T;
        if (p.tile_in_page) {
            pg[0] = -1;
            if (tile < ntiles) {
                int pi;
                token_page<B>(t0, S, p.page_shift, &pi, &sl[0]);
                const int32_t *ent = p.kv_indices + pbeg + pi;
                if constexpr (KVF_BUG(B, EXTRA_PAGE))
                    ent = p.kv_indices + mut_page_entry(pbeg + pi, p.n_entries);
                pg[0] = __ldg(ent);
            }
            return;
        }
#pragma unroll
        for (int j = 0; j < C::LROWS; ++j) {
            const int t = t0 + row0 + C::RSTEP * j;
            pg[j] = -1;
            if (tile < ntiles && t < tok_end) {
                int pi;
                token_page<B>(t, S, p.page_shift, &pi, &sl[j]);
                const int32_t *ent = p.kv_indices + pbeg + pi;
                if constexpr (KVF_BUG(B, EXTRA_PAGE))
                    ent = p.kv_indices + mut_page_entry(pbeg + pi, p.n_entries);
                pg[j] = __ldg(ent);
            }
        }
    };
    auto issue = [&](int tile, int stage) {
        if (tile < ntiles) {
            const int t0 = tok_beg + tile * T;
            uint16_t *kdst = s_kv + stage * 2 * C::KV_TILE + row0 * C::ROW + cc * 8;
            // 64-bit on purpose: page * page_elems passes 2^31 past page 65535 at the seed
            // shape (bug class B10); slot * Hk * D can too for wide pages.
            int64_t base = 0;
            if (p.tile_in_page)
                base = (int64_t)pg[0] * p.page_elems + (int64_t)(sl[0] + row0) * p.row_elems +
                       head_off;
#pragma unroll
            for (int j = 0; j < C::LROWS; ++j) {
                uint16_t *dk = kdst + C::RSTEP * j * C::ROW;
                uint16_t *dv = dk + C::KV_TILE;
                const bool valid = p.tile_in_page ? t0 + row0 + C::RSTEP * j < tok_end : pg[j] >= 0;
                if (valid) {
                    int64_t off = p.tile_in_page ? base + (int64_t)(C::RSTEP * j) * p.row_elems
                                                 : (int64_t)pg[j] * p.page_elems +
                                                       (int64_t)sl[j] * p.row_elems + head_off;
                    if constexpr (KVF_BUG(B, INT32_OFFSET))
                        off = mut_int32_offset(off, p.pool_elems);
                    cp_async16(dk, p.k + off);
                    cp_async16(dv, p.v + off);
                } else {
                    // Past the chunk's end: zeros, and no global read at all (B03).
                    *reinterpret_cast<uint4 *>(dk) = make_uint4(0, 0, 0, 0);
                    *reinterpret_cast<uint4 *>(dv) = make_uint4(0, 0, 0, 0);
                }
            }
        }
        cp_async_commit(); // empty groups keep the wait_group arithmetic uniform
    };

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        fetch_pages(s);
        issue(s, s);
    }
    fetch_pages(kStages - 1);
    // The first tile's barrier makes these stores visible before any score reads them.
#pragma unroll
    for (int k = 0; k < QV; ++k) {
        const int i = tid + k * kThreads;
        if (!kMma && i < G * D / 8) {
            const uint4 w = qw[k];
            float *dst = s_q + i * 8;
            dst[0] = bf16lo(w.x), dst[1] = bf16hi(w.x), dst[2] = bf16lo(w.y);
            dst[3] = bf16hi(w.y), dst[4] = bf16lo(w.z), dst[5] = bf16hi(w.z);
            dst[6] = bf16lo(w.w), dst[7] = bf16hi(w.w);
        }
    }

    // P.V ownership: dims [cpv*VEC, +VEC) of every head, tokens [grp*TPG, +TPG) (contiguous,
    // so each head's weights come in one vector load).
    const int cpv = tid % C::NC, grp = tid / C::NC;
    float acc[G][C::VEC];
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
        for (int v = 0; v < C::VEC; ++v)
            acc[g][v] = 0.f;

    // Running max and denominator of the heads this warp owns in the softmax phase (heads warp,
    // warp + NW): the max is the same in every lane, the denominator is kept per lane (its
    // tokens) and summed across lanes once at the end, off the per-tile critical path.
    constexpr int HPW = (G + C::NW - 1) / C::NW;
    float run_m[HPW], run_l[HPW];
#pragma unroll
    for (int k2 = 0; k2 < HPW; ++k2) // B01: a finite "-inf"
        run_m[k2] = KVF_BUG(B, FINITE_MASK_SENTINEL) ? -5e4f : -INFINITY, run_l[k2] = 0.f;

    int stage = 0; // tile % kStages, kept incrementally
    for (int tile = 0; tile < ntiles; ++tile) {
        cp_async_wait<kStages - 2>();
        __syncthreads(); // tile's rows visible; the stage refilled below is no longer read
        issue(tile + kStages - 1, stage == 0 ? kStages - 1 : stage - 1);
        fetch_pages(tile + kStages);

        const uint16_t *sk = s_kv + stage * 2 * C::KV_TILE;
        stage = stage == kStages - 1 ? 0 : stage + 1;
        const uint16_t *sv = sk + C::KV_TILE;
        const int tile_beg = tok_beg + tile * T;

        // Scores, MMA: tokens [nb*8, +8), dims [ms*MDSL, +MDSL), all heads; the MMAs of a slice
        // chain through the fp32 accumulator in dim order.
        if constexpr (kMma) {
            const int nb = warp % C::NB, ms = warp / C::NB;
            float acc_s[4] = {0.f, 0.f, 0.f, 0.f};
            const uint16_t *kb =
                sk + (nb * 8 + (lane & 7)) * C::ROW + ms * C::MDSL + (lane >> 3) * 8;
#pragma unroll
            for (int kk = 0; kk < C::KS; kk += 2) {
                uint32_t kf[4];
                ldmatrix_x4(kf, kb + kk * 16);
                mma_bf16_16816(acc_s, qf[kk], kf[0], kf[1]);
                mma_bf16_16816(acc_s, qf[kk + 1], kf[2], kf[3]);
            }
            const int r = lane >> 2, t = nb * 8 + 2 * (lane & 3);
            if (r < G)
                *reinterpret_cast<float2 *>(s_s + (ms * G + r) * SR + t) =
                    make_float2(acc_s[0], acc_s[1]);
            if (G > 8 && r + 8 < G)
                *reinterpret_cast<float2 *>(s_s + (ms * G + r + 8) * SR + t) =
                    make_float2(acc_s[2], acc_s[3]);
        } else {
            // Scores, FMA: token tb*32+lane, dims [ds*DSL, +DSL), all heads.
            const int tb = warp % C::TB, ds = warp / C::TB;
            const int t = tb * 32 + lane;
            const uint16_t *krow = sk + t * C::ROW + ds * C::DSL;
            const float *qs = s_q + ds * C::DSL;
            float dot[G];
#pragma unroll
            for (int g = 0; g < G; ++g)
                dot[g] = 0.f;
#pragma unroll
            for (int d8 = 0; d8 < C::DSL; d8 += 8) {
                const uint4 w = *reinterpret_cast<const uint4 *>(krow + d8);
                const float kf[8] = {bf16lo(w.x), bf16hi(w.x), bf16lo(w.y), bf16hi(w.y),
                                     bf16lo(w.z), bf16hi(w.z), bf16lo(w.w), bf16hi(w.w)};
#pragma unroll
                for (int g = 0; g < G; ++g) {
                    const float4 q0 = *reinterpret_cast<const float4 *>(qs + g * D + d8);
                    const float4 q1 = *reinterpret_cast<const float4 *>(qs + g * D + d8 + 4);
                    float a = dot[g];
                    if constexpr (KVF_BUG(B, BF16_QK)) {
                        // q.k accumulated in bf16: the accumulator is rounded after every term.
                        const float qv[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
                        for (int e = 0; e < 8; ++e)
                            a = mut_bf16_round(fmaf(qv[e], kf[e], a));
                    } else {
                        a = fmaf(q0.x, kf[0], a), a = fmaf(q0.y, kf[1], a);
                        a = fmaf(q0.z, kf[2], a), a = fmaf(q0.w, kf[3], a);
                        a = fmaf(q1.x, kf[4], a), a = fmaf(q1.y, kf[5], a);
                        a = fmaf(q1.z, kf[6], a), a = fmaf(q1.w, kf[7], a);
                    }
                    dot[g] = a;
                }
            }
#pragma unroll
            for (int g = 0; g < G; ++g)
                s_s[(ds * G + g) * SR + t] = dot[g];
        }
        __syncthreads();

        // Online softmax, once per tile and head.
#pragma unroll
        for (int k2 = 0; k2 < HPW; ++k2) {
            const int g = warp + k2 * C::NW;
            if (g >= G) break;
            float s[C::TB];
            float tmax = -INFINITY;
#pragma unroll
            for (int k = 0; k < C::TB; ++k) {
                const int t = lane + 32 * k;
                float x = s_s[g * SR + t];
#pragma unroll
                for (int ds = 1; ds < NSL; ++ds) {
                    if constexpr (KVF_BUG(B, BF16_QK))
                        x = mut_bf16_round(x + s_s[(ds * G + g) * SR + t]);
                    else
                        x += s_s[(ds * G + g) * SR + t];
                }
                x *= p.scale_log2;
                // Mask by token index: tokens past the chunk never count (B13).
                s[k] = tile_beg + t < tok_end ? x : -INFINITY;
                tmax = fmaxf(tmax, s[k]);
            }
            tmax = warp_max(tmax);
            const float m_old = run_m[k2];
            // no-max-subtraction: softmax without subtracting the running max.
            const float m_new = KVF_BUG(B, NO_MAX_SUBTRACTION) ? 0.f : fmaxf(m_old, tmax);
            // -inf - -inf would be NaN (B02): an empty running state scales by 0.
            const float alpha = m_old == -INFINITY ? 0.f : ex2_approx(m_old - m_new);
            float l = run_l[k2] * alpha; // the same factor as the numerators (exact when 1)
#pragma unroll
            for (int k = 0; k < C::TB; ++k) {
                float pk;
                if constexpr (KVF_BUG(B, BF16_PROBS)) // B12: weights rounded to bf16 (and sum)
                    pk = s[k] == -INFINITY ? 0.f : mut_bf16_round(ex2_approx(s[k] - m_new));
                else
                    pk = s[k] == -INFINITY ? 0.f : ex2_approx(s[k] - m_new);
                s_p[g * SR + lane + 32 * k] = pk;
                l += pk;
                if constexpr (KVF_BUG(B, TAIL_IN_DENOMINATOR)) {
                    // B13: a zero-padded lane past the end (its K row is zeros: score 0) enters
                    // the denominator; it still gets weight 0 in P.V.
                    if (tile_beg + lane + 32 * k >= tok_end) l += ex2_approx(0.f - m_new);
                }
            }
            run_l[k2] = l;
            run_m[k2] = m_new;
            if (lane == 0) s_alpha[g] = alpha;
        }
        __syncthreads();

        // P.V with at most one rescale of the accumulators per tile; skipped when the maximum
        // did not move (alpha = 1 exactly: the product would change no bit). Uniform branch.
#pragma unroll
        for (int g = 0; g < G; ++g) {
            const float a = s_alpha[g];
            if (a != 1.f) {
#pragma unroll
                for (int v = 0; v < C::VEC; ++v)
                    acc[g][v] *= a;
            }
        }
        float pw[G][C::TPG];
#pragma unroll
        for (int g = 0; g < G; ++g) {
            const float *src = s_p + g * SR + grp * C::TPG;
#pragma unroll
            for (int j = 0; j < C::TPG; j += 2) {
                if constexpr (C::TPG % 4 == 0) {
                    if (j % 4 == 0) {
                        const float4 w4 = *reinterpret_cast<const float4 *>(src + j);
                        pw[g][j] = w4.x, pw[g][j + 1] = w4.y, pw[g][j + 2] = w4.z;
                        pw[g][j + 3] = w4.w;
                    }
                } else {
                    const float2 w2 = *reinterpret_cast<const float2 *>(src + j);
                    pw[g][j] = w2.x, pw[g][j + 1] = w2.y;
                }
            }
        }
#pragma unroll
        for (int j = 0; j < C::TPG; ++j) {
            const int t = grp * C::TPG + j;
            float vf[C::VEC];
            if constexpr (C::VEC == 8) {
                const uint4 w = *reinterpret_cast<const uint4 *>(sv + t * C::ROW + cpv * 8);
                vf[0] = bf16lo(w.x), vf[1] = bf16hi(w.x), vf[2] = bf16lo(w.y);
                vf[3] = bf16hi(w.y), vf[4] = bf16lo(w.z), vf[5] = bf16hi(w.z);
                vf[6] = bf16lo(w.w), vf[7] = bf16hi(w.w);
            } else {
                const uint2 w = *reinterpret_cast<const uint2 *>(sv + t * C::ROW + cpv * 4);
                vf[0] = bf16lo(w.x), vf[1] = bf16hi(w.x), vf[2] = bf16lo(w.y);
                vf[3] = bf16hi(w.y);
            }
#pragma unroll
            for (int g = 0; g < G; ++g)
#pragma unroll
                for (int v = 0; v < C::VEC; ++v) {
                    if constexpr (KVF_BUG(B, BF16_ACC)) // P.V accumulated in bf16
                        acc[g][v] = mut_bf16_round(fmaf(pw[g][j], vf[v], acc[g][v]));
                    else
                        acc[g][v] = fmaf(pw[g][j], vf[v], acc[g][v]);
                }
        }
    }

    // Epilogue: publish (m, l) per head, then sum the NG token groups in a fixed tree order
    // through the (now idle) ring.
#pragma unroll
    for (int k2 = 0; k2 < HPW; ++k2) {
        const int g = warp + k2 * C::NW;
        if (g >= G) break;
        const float l = warp_sum(run_l[k2]);
        if (lane == 0) s_m[g] = run_m[k2], s_l[g] = l;
    }
    cp_async_wait<0>();
    __syncthreads();
    float *red = reinterpret_cast<float *>(smem);
    constexpr int GV = G * C::VEC;
#pragma unroll 1
    for (int active = C::NG; active > 1; active >>= 1) {
        const int half = active >> 1;
        if (grp >= half && grp < active) {
            const int slot = (grp - half) * C::NC + cpv;
#pragma unroll
            for (int g = 0; g < G; ++g)
#pragma unroll
                for (int v = 0; v < C::VEC; ++v)
                    red[(g * C::VEC + v) * (kThreads / 2) + slot] = acc[g][v];
        }
        __syncthreads();
        if (grp < half) {
            const int slot = grp * C::NC + cpv;
#pragma unroll
            for (int g = 0; g < G; ++g)
#pragma unroll
                for (int v = 0; v < C::VEC; ++v) {
                    if constexpr (KVF_BUG(B, BF16_ACC))
                        acc[g][v] = mut_bf16_round(acc[g][v] +
                                                   red[(g * C::VEC + v) * (kThreads / 2) + slot]);
                    else
                        acc[g][v] += red[(g * C::VEC + v) * (kThreads / 2) + slot];
                }
        }
        __syncthreads();
    }
    (void)GV;
    if (grp != 0) return;

    if (single) {
        // Whole sequence in this CTA: normalize and store. Empty: o = +0, lse = -inf (B04).
#pragma unroll
        for (int g = 0; g < G; ++g) {
            const float m = s_m[g], l = s_l[g];
            const int64_t row = (int64_t)b * Hq + hq0 + g;
            // B02: the single state is weighed like a merge input, 2^(m - M) with M = m, and
            // nothing guards the empty state: -inf - -inf = NaN. (2^0 = 1 exactly otherwise.)
            const float w = KVF_BUG(B, MERGE_EMPTY_NAN) ? exp2f(m - m) : 1.f, lw = l * w;
            uint32_t packed[C::VEC / 2];
#pragma unroll
            for (int v = 0; v < C::VEC; v += 2) {
                float o0, o1;
                if constexpr (KVF_BUG(B, MERGE_EMPTY_NAN)) {
                    o0 = acc[g][v] * w / lw, o1 = acc[g][v + 1] * w / lw;
                } else {
                    o0 = l > 0.f ? acc[g][v] / l : 0.f;
                    o1 = l > 0.f ? acc[g][v + 1] / l : 0.f;
                }
                if constexpr (KVF_BUG(B, TRUNC_STORE))
                    packed[v / 2] = mut_bf16_trunc(o0) | mut_bf16_trunc(o1) << 16;
                else
                    packed[v / 2] = pack_bf16x2_rn(o0, o1);
            }
            uint16_t *dst = p.o + row * D + cpv * C::VEC;
            if constexpr (C::VEC == 8)
                *reinterpret_cast<uint4 *>(dst) =
                    make_uint4(packed[0], packed[1], packed[2], packed[3]);
            else
                *reinterpret_cast<uint2 *>(dst) = make_uint2(packed[0], packed[1]);
            if (cpv == 0)
                p.lse[row] = KVF_BUG(B, MERGE_EMPTY_NAN) ? m + log2f(lw) : row_lse<B>(m, l);
        }
    } else {
        // Partial state, unnormalized, in fp32 (B12: never bf16 before the merge).
#pragma unroll
        for (int g = 0; g < G; ++g) {
            const int64_t row = (int64_t)item * Hq + hq0 + g;
            float4 *dst = reinterpret_cast<float4 *>(p.ws_acc + row * D + cpv * C::VEC);
#pragma unroll
            for (int v = 0; v < C::VEC; v += 4) {
                if constexpr (KVF_BUG(B, BF16_PARTIALS)) // B12: stored as bf16 before the merge
                    dst[v / 4] =
                        make_float4(mut_bf16_round(acc[g][v]), mut_bf16_round(acc[g][v + 1]),
                                    mut_bf16_round(acc[g][v + 2]), mut_bf16_round(acc[g][v + 3]));
                else
                    dst[v / 4] =
                        make_float4(acc[g][v], acc[g][v + 1], acc[g][v + 2], acc[g][v + 3]);
            }
            if constexpr (KVF_BUG(B, EMPTY_CHUNK_ZERO_LSE)) {
                // B16: an empty split reports lse 0 (m = 0, l = 1, o = 0) instead of -inf, so
                // the merge gives it weight 2^(0 - M).
                if (cpv == 0)
                    p.ws_ml[row] =
                        s_l[g] > 0.f ? make_float2(s_m[g], s_l[g]) : make_float2(0.f, 1.f);
            } else {
                if (cpv == 0) p.ws_ml[row] = make_float2(s_m[g], s_l[g]);
            }
        }
    }
}

// One instance of the split kernel, as the launch (split_launch.cuh) sees it.
struct SplitEntry {
    const void *fn; // the __global__ function
    int smem_bytes;
    int tile_tokens;
};

} // namespace kvf

// The production instance tables (NoBug), 16 entries (G = 1..16) each, defined in
// decode_split_d*.cu. A mutant object defines a d128 table of its own policy in its own
// namespace (kernels/cuda/mutants/decode_mutant.cu).
extern const kvf::SplitEntry kvf_split_d64[16];
extern const kvf::SplitEntry kvf_split_d128[16];
extern const kvf::SplitEntry kvf_split_d256[16];

// Defines the table kvf_split_d<D> of the instances <D, 1..16, BUG>.
#define KVF_SPLIT_TABLE(D, BUG)                                                                    \
    const kvf::SplitEntry kvf_split_d##D[16] = {                                                   \
        KVF_SPLIT_ENTRY(D, 1, BUG),  KVF_SPLIT_ENTRY(D, 2, BUG),  KVF_SPLIT_ENTRY(D, 3, BUG),      \
        KVF_SPLIT_ENTRY(D, 4, BUG),  KVF_SPLIT_ENTRY(D, 5, BUG),  KVF_SPLIT_ENTRY(D, 6, BUG),      \
        KVF_SPLIT_ENTRY(D, 7, BUG),  KVF_SPLIT_ENTRY(D, 8, BUG),  KVF_SPLIT_ENTRY(D, 9, BUG),      \
        KVF_SPLIT_ENTRY(D, 10, BUG), KVF_SPLIT_ENTRY(D, 11, BUG), KVF_SPLIT_ENTRY(D, 12, BUG),     \
        KVF_SPLIT_ENTRY(D, 13, BUG), KVF_SPLIT_ENTRY(D, 14, BUG), KVF_SPLIT_ENTRY(D, 15, BUG),     \
        KVF_SPLIT_ENTRY(D, 16, BUG)}
#define KVF_SPLIT_ENTRY(D, G, BUG)                                                                 \
    {                                                                                              \
        (const void *)&kvf::splitkv_kernel<D, G, BUG>, kvf::SplitCfg<D, G>::SMEM,                  \
            kvf::SplitCfg<D, G>::T                                                                 \
    }
