// Shared device code of the CUDA decode kernels: parameters, bf16 helpers, cp.async wrappers and
// the split-KV main kernel template. split_launch.cuh launches it, split_plan.h plans it;
// decode_split_d{64,128,256}.cu instantiate the template, one head dim each, so the 48
// (head dim, group) instances compile in parallel.
//
// The split-KV kernel (flash-decoding). One CTA handles one work item (a chunk of one sequence's
// tokens; loaded from the plan's schedule, or computed from the CTA's index when every sequence
// has the same length: split_item.h) for one KV head and all G query heads of that head, so
// every K/V byte is read once per group. Tiles of T tokens (64; 32 for D = 256; twice that for
// FP8 caches) go through a 3-stage shared-memory ring filled by cp.async (16-byte copies; rows
// past the chunk's end are zero-stored, never loaded, so unused last-page slots never reach
// shared memory). Each warp owns one block of every tile, 8 tokens (FP8: 16, two 8-token MMA
// blocks), and keeps an online-softmax state of its own (the strict rule's model: one
// running-max rescale per tile and head, never per token), so the only CTA barrier per tile is
// the ring's:
//   1. scores on tensor cores: q.k for each 8 tokens of the block and all G heads (the MMA's 16
//      rows, heads past G zero) with chained mma.sync m16n8k16 bf16 -> fp32 over D, q held in
//      registers as A fragments. The MMA's accumulation truncates (measured by
//      tests/test_mma_model.c); docs/strict-rule.md (K2) models it. The bf16-qk mutant computes
//      the same scores with CUDA-core FMAs instead, the dot product it corrupts;
//   2. softmax in registers: the block's max per head (two shuffles within the 4 lanes that
//      hold a head), one rescale factor alpha = 2^(m_old - m_new), p = 2^(s - m_new) with masked
//      tokens set to exactly 0 (by index, not by multiplication); the denominator is kept per
//      lane; p and alpha go through the warp's own shared-memory buffer to every lane;
//   3. P.V: each lane owns DPL output dims of every head (of its warp's slice of D, for
//      D = 256); the accumulators are rescaled only when alpha != 1.
// At the end the warps' states are merged in a fixed tree order (deterministic bits), two CTA
// barriers in all: each is weighed by 2^(m_warp - m), every thread sums 4 output dims of a head
// over the warps, and the result is either written out (one split) or stored unnormalized
// with (m, l) in fp32 for the merge kernel. Measured on an H200 in
// docs/performance.md.
//
// FP8 caches (the F8 instances, decode_split_fp8_d*.cu): the ring holds the cache's bytes, D a
// row, twice a bf16 tile's tokens in about its bytes; 16-byte chunks of odd rows are swizzled
// (f8_chunk) instead of padded. A warp's two 8-token blocks give it two independent MMA chains
// and halve the barriers and the softmax work per token: with 8-token blocks and tiles of a
// bf16 tile's tokens, the FP8 path took about as long per tile as bf16 for half the bytes
// (docs/performance.md, "FP8 caches"). Each lane widens 16 key bytes of its token per 64 dims to
// bf16 (exact: fp8.cuh) straight into the MMA's B fragments, q's A fragments taking the dims in the
// matching order (or to f16, below), and each V element to f32 where P.V reads it: by
// conversions, or, in a build
// with KVF_FP8_FAST_K/V, by bit placement and one bf16 FMA unless the warp's bytes of the tile
// hold a NaN (or e5m2 infinity). Scales as FlashInfer applies
// them: a per-tensor or per-head k_scale folded into the logit scale, v_scale multiplying o
// after the division (here, or in the merge); per-token scales multiply each dot and each
// weight (their copies ride in the ring, 4 bytes a row). docs/strict-rule.md ("Quantized
// caches") charges each of these roundings.
//
// The scores in f16 (e4m3 keys, D <= 128, G <= 8). e4m3 widens to f16 in one instruction a
// pair, where bf16 takes f16, then f32, then bf16 (three). So when every head of the CTA's q is,
// after a power of two 2^-s of its own, a vector of normal f16 values (its nonzero elements
// within 30 binades of each other) and s keeps every product and partial sum normal and finite
// in f32, the CTA computes 2^-s q . k with f16 MMAs and multiplies each score by 2^s. Every
// product and partial sum is then the bf16 path's times 2^-s exactly, and every operand is a
// normal number in both formats (e4m3's smallest subnormal, 2^-9, is a normal f16), so the MMA
// aligns the terms to the same exponent (docs/strict-rule.md, K2) and the scores are the same
// bits: the path changes no rounding (tests/test_gpu_determinism.c compares the two paths bit
// for bit). Any other q (wider ranges, subnormals, NaN or infinity) takes the bf16 path, and so
// do e5m2 keys: their subnormals are subnormal f16 values, whose alignment in the MMA is not
// characterized. KVF_CUDA_FP8_BF16_SCORES=1 forces the bf16 path (docs/cli.md).
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
#include "fp8.cuh"
#include "split_item.h"

// FP8 keys (K) and values (V) widened by bit placement where no byte of the warp's tile is a
// NaN or e5m2 infinity (fp8.cuh). Off unless the build asks (CMake KVF_CUDA_FP8_FAST_WIDEN):
// measured 4-5% slower than the conversions on an H100 (docs/performance.md, "FP8 caches").
#ifndef KVF_FP8_FAST_K
#define KVF_FP8_FAST_K 0
#endif
#ifndef KVF_FP8_FAST_V
#define KVF_FP8_FAST_V 0
#endif

namespace kvf {

// A bug policy: the id (kernels/mutants.h) of the deliberate bug compiled in, KVF__MUT_NONE for
// none. Each mutant is the one-line policy Bug<KVF__MUT_<ID>>.
template <int Id> struct Bug { static constexpr int id = Id; };
using NoBug = Bug<KVF__MUT_NONE>;
#define KVF_BUG(B, X) ((B::id) == (int)KVF__MUT_##X)
// Bugs that several mutants share (kernels/mutants.h, KVF_MUT_ROUNDS_P and its neighbours).
#define KVF_BUG_ROUNDS_P(B)                                                                        \
    (KVF_BUG(B, BF16_PROBS) || KVF_BUG(B, BF16P_ACC) || KVF_BUG(B, BF16P_TRUNC_STORE))
#define KVF_BUG_BF16_ACC(B) (KVF_BUG(B, BF16_ACC) || KVF_BUG(B, BF16P_ACC))
#define KVF_BUG_TRUNC_STORE(B) (KVF_BUG(B, TRUNC_STORE) || KVF_BUG(B, BF16P_TRUNC_STORE))

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
    const int32_t *seq_first; // [B+1] each sequence's first merge row (split_plan.h)
    // The schedule's arithmetic form (split_item.h): with form_splits > 0 a CTA computes its
    // item (chunk_tokens is the form's) and never reads `items`.
    int32_t form_splits, form_pages, form_len, form_single;
    uint16_t *o;
    float *lse;
    float *ws_acc; // [n_items][Hq][D] unnormalized partial outputs, by merge row
    float2 *ws_ml; // [n_items][Hq] (running max m, sum l), base 2
    int32_t num_qo_heads, num_kv_heads, page_size;
    int32_t page_shift;   // log2(page_size) when a power of two, else -1 (then divide)
    int32_t tile_in_page; // page_size % T == 0: a tile never crosses a page (one id per tile)
    int32_t row_elems;    // Hk * D: elements between consecutive slots of a page
    int64_t page_elems;   // S * Hk * D, 64-bit: page * page_elems passes 2^31 (B10)
    int32_t chunk_tokens;
    float scale_log2; // sm_scale * log2(e): logits in base-2 units
    int32_t use_pdl;  // the merge kernel was launched as a programmatic dependent
    // FP8 caches (the F8 instances; plugin.h, "Quantized caches"): k and v point to bytes.
    // scale_mode 0: no scales; 1: one k and v scale per CTA, k_scale[hk * scale_head_stride]
    // folded into scale_log2 and v_scale applied to o after the division (here, or in the
    // merge); 2: per (slot, kv head), each logit times its key's scale and each weight times
    // its value's scale.
    const float *k_scale, *v_scale;
    int32_t scale_mode, scale_head_stride;
    int32_t k_e5m2, v_e5m2; // the caches' FP8 formats: 1 e5m2, 0 e4m3
    int32_t f16_scores;     // FP8: the scores may run in f16 (the header comment)
};
// A mutant's split kernel takes two fields more, which two mutants read. They live in a struct
// of their own so that the production kernels' parameter block is the one they always had.
struct SplitParamsMut : SplitParams {
    int64_t pool_elems; // P * S * Hk * D: B10's wrapped offset is folded back into the pool
    int32_t n_entries;  // kv_indptr[B]: B15's extra page's table entry is clamped to the table
};

// Compile-time geometry of one (D, G) instance, for bf16 caches or (F8) FP8 ones.
template <int D, int G, bool F8 = false> struct SplitCfg {
    // A warp's tokens of a tile: one 8-token MMA block (bf16), or two (FP8), whose score
    // chains are independent and whose softmax, weights and P.V share one pass: an FP8 tile
    // holds the bytes of a bf16 one, and the warp's work between two CTA barriers doubles.
    static constexpr int SUB = F8 ? 2 : 1; // 8-token MMA blocks per warp and tile
    static constexpr int BT = 8 * SUB;     // a warp's tokens of a tile
    // Tile tokens: equal bytes per tile for D = 256, and for FP8.
    static constexpr int T = (D == 256 ? 32 : 64) * SUB;
    static constexpr int EB = F8 ? 1 : 2; // bytes per cache element
    // Shared-memory row stride in bytes. bf16: D + 8 elements, the +16 B keeping the ldmatrix
    // rows and V row reads conflict-free. FP8: D bytes, its 16-byte chunks swizzled instead
    // (f8_chunk): the score reads take 16 bytes of 8 rows at once.
    static constexpr int ROWB = F8 ? D : (D + 8) * 2;
    static constexpr int ROW = ROWB / 2; // bf16 elements per row (bf16 caches)
    // Ring depth: tiles i+1 .. i+STAGES-1 load during tile i.
    static constexpr int STAGES = kStages;
    static constexpr int NW = kThreads / 32;
    static constexpr int NB = T / BT;       // warp blocks of a tile, one warp each (per slice)
    static constexpr int MS = NW / NB;      // warps sharing a block: P.V slices of D (1, or 2 for
                                            // D = 256; both compute the block's scores)
    static constexpr int DSL = D / MS;      // P.V dims per warp
    static constexpr int DPL = DSL / 32;    // P.V dims per lane
    static constexpr int KS = D / 16;       // chained MMAs per score (k = 16 each)
    static constexpr int PW = BT + 4;       // floats per head in a warp's weight buffer: the BT
                                            // weights, the rescale factor, padding to 16 bytes
    static constexpr int CPR = D * EB / 16; // 16-byte chunks per K/V row
    static constexpr int RSTEP = kThreads / CPR;
    static constexpr int LROWS = T / RSTEP;    // rows each thread copies per tile (K and V)
    static constexpr int KV_TILE_B = T * ROWB; // bytes of one K (or V) tile
    static constexpr int KV_TILE = KV_TILE_B / 2;
    // Shared memory, bytes: [STAGES][K,V][T][ROWB] (at least the epilogue's [NB][G][D] f32) |
    // q [G][D] f32 (bf16-qk mutant) | weights [NW][G][PW] f32 | per-warp (m, l) [NW][16] f32
    // each | merge factors [NW][16] | the CTA's (m, l) [16] each | FP8: per-token scales
    // [STAGES][K,V][T] f32.
    static constexpr int RING = STAGES * 2 * KV_TILE_B;
    static constexpr int OFF_Q = RING > NB *G *D * 4 ? RING : NB *G *D * 4;
    static constexpr int OFF_P = OFF_Q + G * D * 4;
    static constexpr int OFF_STAT = OFF_P + NW * G * PW * 4;
    static constexpr int OFF_SC = OFF_STAT + (3 * NW + 2) * 16 * 4;
    static constexpr int SMEM = OFF_SC + (F8 ? STAGES * 2 * T * 4 : 0);
    // Two CTAs per SM when their shared memory fits (228 KB per SM, 1 KB reserved per CTA);
    // the register cap of 128 that this implies costs a few spills only for the largest G.
    static constexpr int MIN_BLOCKS = 2 * (SMEM + 1024) <= 233472 ? 2 : 1;
    static_assert(T % RSTEP == 0 && NW % NB == 0 && KS % 2 == 0 && DPL % 2 == 0, "geometry");
    static_assert(G <= 16, "one MMA's 16 rows hold every head of the group");
    static_assert(!F8 || D % 64 == 0, "FP8 scores take 64 dims of a row per 16-byte read");
};

// With Split, calls f(std::true_type) for e5m2 and f(std::false_type) for e4m3: the widening
// inside f sees its format as a constant, a warp-uniform branch per tile instead of both
// formats' instructions, predicated, for every word. Without, f(e5m2): the code is not
// duplicated, for instances whose registers are already short (ptxas: the FP8 d128 instances
// with G = 9-11 spill 140-288 bytes split, 0-132 not).
template <bool Split, class F> __device__ __forceinline__ void fp8_format(bool e5m2, F &&f) {
    if constexpr (Split) {
        if (e5m2)
            f(std::true_type{});
        else
            f(std::false_type{});
    } else {
        f(e5m2);
    }
}

// The byte offset of 16-byte chunk `c` of an FP8 ring row `row`: odd rows swap the halves of
// each 128 bytes, so that the score reads (chunks 4j + lane % 4 of rows r and r + 1 in one
// quarter-warp) and the V reads (a whole row per warp) both hit 32 distinct banks.
template <int D> __device__ __forceinline__ int f8_chunk(int row, int c) {
    return (D >= 128 ? c ^ ((row & 1) << 2) : c) * 16;
}

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
// The K/V rows of the tiles: each byte is read once, so a build may ask L2 to evict those lines
// first (KVF_CUDA_KV_L2_HINT, kernels/CMakeLists.txt) and keep other lines, dirty ones among
// them, out of the way of the stream. The policy is the 64-bit evict-first descriptor as a
// constant: a `createpolicy` whose result feeds only these copies is dropped by some ptxas
// 13.x versions, leaving the copies reading an uninitialised descriptor (docs/performance.md).
__device__ __forceinline__ void cp_async16_stream(void *smem, const void *gmem) {
#if defined(KVF_KV_L2_EVICT_FIRST)
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    const uint64_t evict_first = 0x12F0000000000000ull;
#if defined(KVF_KV_L2_PREFETCH_256B)
    asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2;\n" ::"r"(s),
                 "l"(gmem), "l"(evict_first)
                 : "memory");
#else
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(s),
                 "l"(gmem), "l"(evict_first)
                 : "memory");
#endif
#else
    cp_async16(smem, gmem);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// A 4-byte copy (per-token scales), through L1: neighbouring slots share lines.
__device__ __forceinline__ void cp_async4(void *smem, const void *gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(gmem) : "memory");
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

// The same with f16 operands (the FP8 scores in f16: the header comment).
__device__ __forceinline__ void mma_f16_16816(float c[4], const uint32_t a[4], uint32_t b0,
                                              uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The FP8 scores in f16 (the header comment): q's head rows r as A fragments of 2^-s q, in
// place, where that is exact for every head of the CTA. a[kk][0], a[kk][2] hold this lane's
// words of row r (the 4 lanes of a row hold all of it; rows r + 8 are zero for G <= 8). Returns
// whether the CTA converted (the same answer in every warp: each holds all of q), with
// *scale = 2^s for row r (1 when it did not).
template <int KS> __device__ __forceinline__ bool q_to_f16(uint32_t (&a)[KS][4], float *scale) {
    // Biased exponents of the row's nonzero elements: 0 for a subnormal, 255 for NaN or
    // infinity, both outside every window accepted below.
    int emin = 255, emax = 0;
#pragma unroll
    for (int kk = 0; kk < KS; ++kk)
#pragma unroll
        for (int w = 0; w < 4; w += 2)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const uint32_t mag = (a[kk][w] >> (16 * h)) & 0x7fffu;
                if (mag) emin = min(emin, (int)(mag >> 7)), emax = max(emax, (int)(mag >> 7));
            }
#pragma unroll
    for (int o = 1; o <= 2; o <<= 1) {
        emin = min(emin, __shfl_xor_sync(0xffffffffu, emin, o));
        emax = max(emax, __shfl_xor_sync(0xffffffffu, emax, o));
    }
    // The largest element times 2^-s lies in [2^15, 2^16) (at most 65280, an f16), the smallest
    // nonzero one at least 2^-14 (a normal f16: its 8 significant bits fit). With -86 <= s <= 88
    // every product of 2^-s q and an FP8 value (at most 2^16, its last bit at least 2^-16) is a
    // multiple of 2^-40 and every partial sum of 128 is below 2^39, so times 2^s all of them are
    // normal or zero and finite in f32: both paths compute the same values, scaled.
    const int s = emax >= emin ? emax - 127 - 15 : 0; // a zero row: any s
    const bool ok = emax < emin || (emin >= emax - 29 && s >= -86 && s <= 88);
    *scale = 1.f;
    if (!__all_sync(0xffffffffu, ok)) return false;
    const float down = __int_as_float((127 - s) << 23); // 2^-s, a normal f32
#pragma unroll
    for (int kk = 0; kk < KS; ++kk)
#pragma unroll
        for (int w = 0; w < 4; w += 2) {
            const __half2 h = __floats2half2_rn(bf16lo(a[kk][w]) * down, bf16hi(a[kk][w]) * down);
            a[kk][w] = *reinterpret_cast<const uint32_t *>(&h);
        }
    *scale = __int_as_float((127 + s) << 23);
    return true;
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

// FP8 mutants. fp8-subnormal-flush: a widened FP8 value below the format's smallest normal
// (2^-6 e4m3, 2^-14 e5m2) read as zero.
__device__ __forceinline__ float mut_fp8_flush1(float x, bool e5m2) {
    return fabsf(x) < (e5m2 ? 0x1p-14f : 0x1p-6f) ? copysignf(0.f, x) : x;
}
__device__ __forceinline__ float4 mut_fp8_flush(float4 f, bool e5m2) {
    return make_float4(mut_fp8_flush1(f.x, e5m2), mut_fp8_flush1(f.y, e5m2),
                       mut_fp8_flush1(f.z, e5m2), mut_fp8_flush1(f.w, e5m2));
}
// scale-q-head: the logit multiplier and the value scale of q head hq, with a per-head scale
// indexed by hq mod Hk instead of its KV head (the CTA's xscale and vs otherwise).
template <class B, class P>
__device__ __forceinline__ float mut_row_xscale(const P &p, float xscale, int hq) {
    if constexpr (KVF_BUG(B, SCALE_Q_HEAD))
        if (p.scale_mode == 1)
            return p.scale_log2 * __ldg(p.k_scale + (hq % p.num_kv_heads) * p.scale_head_stride);
    return xscale;
}
template <class B, class P>
__device__ __forceinline__ float mut_row_vscale(const P &p, float vs, int hq) {
    if constexpr (KVF_BUG(B, SCALE_Q_HEAD))
        if (p.scale_mode == 1)
            return __ldg(p.v_scale + (hq % p.num_kv_heads) * p.scale_head_stride);
    return vs;
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

template <int D, int G, class B, bool F8 = false>
__global__ void __launch_bounds__(kThreads, SplitCfg<D, G, F8>::MIN_BLOCKS)
    splitkv_kernel(const ParamsFor<B, SplitParams, SplitParamsMut> p) {
    using C = SplitCfg<D, G, F8>;
    constexpr int T = C::T, NST = C::STAGES, SUB = C::SUB, BT = C::BT;
    extern __shared__ __align__(16) unsigned char smem[];
    uint16_t *s_kv = reinterpret_cast<uint16_t *>(smem);
    unsigned char *s_kv8 = smem;                               // FP8: the ring, as bytes
    float *s_sc = reinterpret_cast<float *>(smem + C::OFF_SC); // FP8: [NST][K,V][T]
    float *s_q = reinterpret_cast<float *>(smem + C::OFF_Q);
    float *s_pw = reinterpret_cast<float *>(smem + C::OFF_P);    // [NW][G][PW]
    float *s_mw = reinterpret_cast<float *>(smem + C::OFF_STAT); // [NW][16]
    float *s_lw = s_mw + C::NW * 16;                             // [NW][16]
    float *s_fw = s_lw + C::NW * 16;                             // [NW][16]
    float *s_m = s_fw + C::NW * 16, *s_l = s_m + 16;             // [16] each

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    // blockIdx.x = item * H + y, y the kv head or (head_per_cta, G = 1) the q head: an item's
    // CTAs are adjacent, so the grid dispatches in the schedule's order (split_plan.h).
    const int H = head_per_cta<B>() ? p.num_qo_heads : p.num_kv_heads;
    const int item = (int)(blockIdx.x / (unsigned)H), hy = (int)blockIdx.x - item * H;
    const int hk = head_per_cta<B>() ? mut_kv_head<B>(hy, p.num_qo_heads, p.num_kv_heads) : hy;
    const int Hq = p.num_qo_heads, S = p.page_size;
    int4 it;
    if (p.form_splits > 0) {
        int32_t f[4];
        kvf__split_form_item(p.form_splits, p.form_pages, p.form_len, p.chunk_tokens, p.form_single,
                             item, f);
        it = make_int4(f[0], f[1], f[2], f[3]);
    } else {
        it = p.items[item];
    }
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
    const int hq0 = head_per_cta<B>() ? hy : hk * G;
    // The merge reads sequence b's partial states as rows seq_first[b] + k, k = tok_beg /
    // chunk_tokens (token order), wherever its items sit in the schedule. Issued now, needed at
    // the end.
    int ws_row = 0;
    if (!single)
        ws_row = (p.form_splits > 0 ? b * p.form_splits : __ldg(p.seq_first + b)) +
                 tok_beg / p.chunk_tokens;

    // The merge kernel may be scheduled now; it waits for this grid's completion before
    // reading the workspace (griddepcontrol.wait), so triggering early only hides its launch.
    if (p.use_pdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");

    // q of the G heads, loaded before the first page indices so that both wait on memory at
    // once. The MMA scores hold it as A fragments in registers for the whole CTA: for MMA kk,
    // rows (heads) lane / 4 and lane / 4 + 8, dims 16 kk + 2 (lane % 4), +1 and +8, +9 (rows
    // past G are zero; for G <= 8 the second half of the rows is). The bf16-qk mutant's FMA
    // scores read it from shared memory as f32, stored once the first tiles' copies are issued.
    constexpr bool kMma = !KVF_BUG(B, BF16_QK); // the mutant corrupts the FMA dot product
    constexpr int QV = kMma ? 1 : (G * D / 8 + kThreads - 1) / kThreads; // 16-byte q vectors
    uint4 qw[QV];
    uint32_t qf[C::KS][4];
    {
        // B14: every request reads request 0's q.
        const int64_t qrow = KVF_BUG(B, BATCH_INDEX) ? (int64_t)hq0 : (int64_t)b * Hq + hq0;
        if constexpr (kMma) {
            const int r = lane >> 2, c2 = 2 * (lane & 3);
            const uint32_t *q0 = reinterpret_cast<const uint32_t *>(p.q + (qrow + r) * D);
            const uint32_t *q8 = reinterpret_cast<const uint32_t *>(p.q + (qrow + r + 8) * D);
#pragma unroll
            for (int kk = 0; kk < C::KS; ++kk) {
                // FP8 keys are read 16 bytes a lane (the scores below), so the MMAs take the
                // dims in another order: MMA kk = 4j + i, k-index 2 tq + e (+ 8) is dim
                // 64 j + 16 tq + 4 i + e (+ 2). The same products, summed the same way.
                const int k0 = F8 ? (kk >> 2) * 64 + 16 * (lane & 3) + 4 * (kk & 3) : kk * 16 + c2;
                const int k8 = F8 ? k0 + 2 : k0 + 8;
                qf[kk][0] = r < G ? __ldg(q0 + k0 / 2) : 0u;
                qf[kk][2] = r < G ? __ldg(q0 + k8 / 2) : 0u;
                qf[kk][1] = G > 8 && r + 8 < G ? __ldg(q8 + k0 / 2) : 0u;
                qf[kk][3] = G > 8 && r + 8 < G ? __ldg(q8 + k8 / 2) : 0u;
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
    // FP8: the scores in f16 where q allows (the header comment); qs = 2^s of head row r.
    // Not for D = 256, whose instances already spill under the two-CTA register cap (ptxas:
    // 160-284 bytes at G <= 8), which the f16 path's second copy of the scores would raise to
    // 168-428.
    constexpr bool kQ16 = F8 && kMma && G <= 8 && D <= 128 && !KVF_BUG(B, FP8_SUBNORMAL_FLUSH) &&
                          !KVF_BUG(B, E4M3_AS_E5M2);
    bool q16 = false;
    float qs = 1.f;
    if constexpr (kQ16)
        if (p.f16_scores && !p.k_e5m2) q16 = q_to_f16<C::KS>(qf, &qs);
    (void)q16, (void)qs;

    // Copy assignment: thread copies 16-byte chunk `cc` of rows row0 + RSTEP*j.
    const int cc = tid % C::CPR, row0 = tid / C::CPR;
    const int head_off = hk * D + cc * (16 / C::EB);
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
    // Copies row row0 + RSTEP j of a tile into ring stage `stage` from element offset `off` of
    // the caches (when `valid`; else zeros), with its per-token scales from slot `slot` of page
    // `page` (FP8 scale_mode 2).
    auto copy_row = [&](int stage, int j, bool valid, int64_t off, int64_t page, int slot) {
        const int row = row0 + C::RSTEP * j;
        uint16_t *dk = s_kv + stage * 2 * C::KV_TILE + row * C::ROW + cc * 8;
        uint16_t *dv = dk + C::KV_TILE;
        if constexpr (F8) {
            unsigned char *dk8 =
                s_kv8 + stage * 2 * C::KV_TILE_B + row * C::ROWB + f8_chunk<D>(row, cc);
            dk = reinterpret_cast<uint16_t *>(dk8);
            dv = reinterpret_cast<uint16_t *>(dk8 + C::KV_TILE_B);
        }
        if (valid) {
            if constexpr (KVF_BUG(B, INT32_OFFSET)) off = mut_int32_offset(off, p.pool_elems);
            if constexpr (F8) {
                cp_async16_stream(dk, reinterpret_cast<const unsigned char *>(p.k) + off);
                cp_async16_stream(dv, reinterpret_cast<const unsigned char *>(p.v) + off);
                if (p.scale_mode == 2 && cc == 0) {
                    // Per-token scales: the row's pair, one 4-byte copy each.
                    if constexpr (KVF_BUG(B, TOKEN_SCALE_SLOT)) slot = 0; // the page's first
                    const int64_t si = (page * S + slot) * p.num_kv_heads + hk;
                    float *ds = s_sc + stage * 2 * T + row;
                    cp_async4(ds, p.k_scale + si);
                    cp_async4(ds + T, p.v_scale + si);
                }
            } else {
                cp_async16_stream(dk, p.k + off);
                cp_async16_stream(dv, p.v + off);
            }
        } else {
            // Past the chunk's end: zeros, and no global read at all (B03).
            *reinterpret_cast<uint4 *>(dk) = make_uint4(0, 0, 0, 0);
            *reinterpret_cast<uint4 *>(dv) = make_uint4(0, 0, 0, 0);
            if (F8 && p.scale_mode == 2 && cc == 0)
                s_sc[stage * 2 * T + row] = 0.f, s_sc[stage * 2 * T + T + row] = 0.f;
        }
    };
    auto issue = [&](int tile, int stage) {
        if (tile < ntiles) {
            const int t0 = tok_beg + tile * T;
            // 64-bit on purpose: page * page_elems passes 2^31 past page 65535 at the seed
            // shape (bug class B10); slot * Hk * D can too for wide pages.
            if (p.tile_in_page) {
                // One page holds the tile: its rows are row_elems apart, one offset stepped
                // per row instead of each row's own page arithmetic.
                const int64_t base = (int64_t)pg[0] * p.page_elems +
                                     (int64_t)(sl[0] + row0) * p.row_elems + head_off;
                const int64_t step = (int64_t)C::RSTEP * p.row_elems;
#pragma unroll
                for (int j = 0; j < C::LROWS; ++j) {
                    const int row = row0 + C::RSTEP * j;
                    copy_row(stage, j, t0 + row < tok_end, base + j * step, pg[0], sl[0] + row);
                }
            } else {
#pragma unroll
                for (int j = 0; j < C::LROWS; ++j)
                    copy_row(stage, j, pg[j] >= 0,
                             (int64_t)pg[j] * p.page_elems + (int64_t)sl[j] * p.row_elems +
                                 head_off,
                             pg[j], sl[j]);
            }
        }
        cp_async_commit(); // empty groups keep the wait_group arithmetic uniform
    };

#pragma unroll
    for (int s = 0; s < NST - 1; ++s) {
        fetch_pages(s);
        issue(s, s);
    }
    fetch_pages(NST - 1);
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

    // This lane's place: token block nb of every tile, P.V dims [ms*DSL + lane*DPL, +DPL);
    // in the scores and softmax, head rows r and r + 8 and the block's tokens 2 tq, 2 tq + 1.
    const int nb = warp % C::NB, ms = warp / C::NB, r = lane >> 2, tq = lane & 3;
    // The logit multiplier: sm_scale * log2(e), FP8 scale_mode 1 times the CTA's key scale
    // (FlashInfer's fold; one rounding, Q1). vs_cta multiplies o after the division (Q3).
    float xscale = p.scale_log2, vs_cta = 1.f;
    bool tok_scales = false, k_e5m2 = false, v_e5m2 = false;
    int voff0 = 0, voff1 = 0; // FP8: this lane's V bytes in even and odd ring rows
    if constexpr (F8) {
        if (p.scale_mode == 1) {
            const int si = hk * p.scale_head_stride;
            const float ks = __ldg(p.k_scale + si);
            xscale = p.scale_log2 * ks;
            if constexpr (KVF_BUG(B, K_SCALE_TWICE)) xscale *= ks;
            vs_cta = __ldg(p.v_scale + si);
        }
        tok_scales = p.scale_mode == 2;
        k_e5m2 = p.k_e5m2 != 0 || KVF_BUG(B, E4M3_AS_E5M2);
        v_e5m2 = p.v_e5m2 != 0 || KVF_BUG(B, E4M3_AS_E5M2);
        const int d = ms * C::DSL + lane * C::DPL;
        voff0 = f8_chunk<D>(0, d >> 4) + (d & 15), voff1 = f8_chunk<D>(1, d >> 4) + (d & 15);
    }
    (void)vs_cta, (void)k_e5m2, (void)v_e5m2, (void)voff0, (void)voff1;
    constexpr int HR = G > 8 ? 2 : 1; // head rows per lane
    float acc[G][C::DPL];
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
        for (int v = 0; v < C::DPL; ++v)
            acc[g][v] = 0.f;
    // Running max (equal in the 4 lanes of a head) and this lane's share of the denominator,
    // summed across those lanes once at the end, off the per-tile path.
    float run_m[HR], run_l[HR];
#pragma unroll
    for (int h = 0; h < HR; ++h) // B01: a finite "-inf"
        run_m[h] = KVF_BUG(B, FINITE_MASK_SENTINEL) ? -5e4f : -INFINITY, run_l[h] = 0.f;
    float *pw = s_pw + warp * G * C::PW;

    int stage = 0; // tile % NST, kept incrementally
    for (int tile = 0; tile < ntiles; ++tile) {
        cp_async_wait<NST - 2>();
        __syncthreads(); // tile's rows visible; the stage refilled below is no longer read
        issue(tile + NST - 1, stage == 0 ? NST - 1 : stage - 1);
        fetch_pages(tile + NST);

        const uint16_t *sk = s_kv + stage * 2 * C::KV_TILE;
        const unsigned char *sk8 = s_kv8 + stage * 2 * C::KV_TILE_B;
        const float *ssc = s_sc + stage * 2 * T; // FP8 per-token scales: K [T], then V [T]
        stage = stage == NST - 1 ? 0 : stage + 1;
        const uint16_t *sv = sk + C::KV_TILE;
        const unsigned char *sv8 = sk8 + C::KV_TILE_B;
        const int blk = tok_beg + tile * T + nb * BT; // the warp block's first token

        // Scores of heads r, r + 8 for tokens 8 s + 2 tq, +1 of the warp's block (the MMA's C
        // layout, one independent chain per 8-token block s).
        float sc[SUB][4];
#pragma unroll
        for (int s = 0; s < SUB; ++s)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                sc[s][e] = 0.f;
        if constexpr (F8) {
            // Lane (r, tq) widens 16 key bytes of token 8 s + r per 64 dims, four MMAs' B
            // fragments (the dims order of qf above). Without a NaN (or e5m2 infinity) byte among
            // the warp's keys of this tile, by bit placement (fp8.cuh); else by conversions. The
            // choice is the warp's, as the MMAs need all its lanes.
            uint32_t kw[SUB][D / 16];
            uint32_t special = 0;
#pragma unroll
            for (int s = 0; s < SUB; ++s) {
                const int row = nb * BT + 8 * s + r;
                const unsigned char *kb = sk8 + row * C::ROWB;
#pragma unroll
                for (int j = 0; j < D / 64; ++j) {
                    const uint4 w =
                        *reinterpret_cast<const uint4 *>(kb + f8_chunk<D>(row, 4 * j + tq));
                    kw[s][4 * j] = w.x, kw[s][4 * j + 1] = w.y;
                    kw[s][4 * j + 2] = w.z, kw[s][4 * j + 3] = w.w;
                }
#pragma unroll
                for (int i = 0; i < D / 16; ++i)
                    special |= fp8_special_sum(kw[s][i], k_e5m2);
            }
            auto scores8 = [&](auto widen, auto f16) {
#pragma unroll
                for (int i = 0; i < D / 16; ++i)
#pragma unroll
                    for (int s = 0; s < SUB; ++s) {
                        const uint2 b = widen(kw[s][i]);
                        if constexpr (decltype(f16)::value)
                            mma_f16_16816(sc[s], qf[i], b.x, b.y);
                        else
                            mma_bf16_16816(sc[s], qf[i], b.x, b.y);
                    }
            };
            constexpr std::false_type in_bf16{};
            if (q16) { // always false unless kQ16; e4m3 keys
                scores8([&](uint32_t w) { return fp8x4_to_f16x4(w, false); }, std::true_type{});
            } else if (KVF_FP8_FAST_K && !KVF_BUG(B, FP8_SUBNORMAL_FLUSH) &&
                       !__any_sync(0xffffffffu, special & 0x80808080u)) {
                scores8([&](uint32_t w) { return fp8x4_to_bf16x4_fast(w, k_e5m2); }, in_bf16);
            } else {
                fp8_format<(G <= 8)>(k_e5m2, [&](auto e5) {
                    const bool E5 = e5;
                    scores8(
                        [&](uint32_t w) {
                            if constexpr (KVF_BUG(B, FP8_SUBNORMAL_FLUSH)) {
                                const float4 f = mut_fp8_flush(fp8x4_to_float4(w, E5), E5);
                                return make_uint2(pack_bf16x2_rn(f.x, f.y),
                                                  pack_bf16x2_rn(f.z, f.w));
                            }
                            return fp8x4_to_bf16x4(w, E5);
                        },
                        in_bf16);
                });
            }
        } else if constexpr (kMma) {
            const uint16_t *kb = sk + (nb * BT + (lane & 7)) * C::ROW + (lane >> 3) * 8;
#pragma unroll
            for (int kk = 0; kk < C::KS; kk += 2) {
                uint32_t kf[4];
                ldmatrix_x4(kf, kb + kk * 16);
                mma_bf16_16816(sc[0], qf[kk], kf[0], kf[1]);
                mma_bf16_16816(sc[0], qf[kk + 1], kf[2], kf[3]);
            }
        } else {
            // bf16-qk: q.k accumulated in bf16, the accumulator rounded after every term.
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int g = r + 8 * (e >> 1);
                if (g >= G) continue;
                const uint16_t *krow = sk + (nb * BT + 2 * tq + (e & 1)) * C::ROW;
                float a = 0.f;
                for (int d = 0; d < D; d += 2) {
                    const uint32_t w = *reinterpret_cast<const uint32_t *>(krow + d);
                    a = mut_bf16_round(fmaf(s_q[g * D + d], bf16lo(w), a));
                    a = mut_bf16_round(fmaf(s_q[g * D + d + 1], bf16hi(w), a));
                }
                sc[0][e] = a;
            }
        }

        // Per-token scales of this lane's tokens (FP8, scale_mode 2).
        float2 tks[SUB], tvs[SUB];
#pragma unroll
        for (int s = 0; s < SUB; ++s) {
            tks[s] = make_float2(1.f, 1.f), tvs[s] = make_float2(1.f, 1.f);
            if (tok_scales) {
                const int t = nb * BT + 8 * s + 2 * tq;
                tks[s] = *reinterpret_cast<const float2 *>(ssc + t);
                tvs[s] = *reinterpret_cast<const float2 *>(ssc + T + t);
                if constexpr (KVF_BUG(B, K_SCALE_TWICE)) tks[s].x *= tks[s].x, tks[s].y *= tks[s].y;
                if constexpr (KVF_BUG(B, V_SCALE_IGNORED)) tvs[s] = make_float2(1.f, 1.f);
            }
        }

        // Online softmax of this warp's block, per head row, in registers: one maximum and one
        // rescale factor per head over all the block's tokens.
#pragma unroll
        for (int h = 0; h < HR; ++h) {
            const int g = r + 8 * h;
            float x[SUB][2];
            float tmax = -INFINITY;
#pragma unroll
            for (int s = 0; s < SUB; ++s)
#pragma unroll
                for (int k = 0; k < 2; ++k) {
                    // Mask by token index: tokens past the chunk never count (B13).
                    // FP8: a per-token key scale times the dot, then the logit scale; a CTA's
                    // key scale is folded into xscale (docs/strict-rule.md, Q1).
                    // f16 scores: times 2^s, exact (q_to_f16); 1 otherwise.
                    const float sk = kQ16 ? sc[s][2 * h + k] * qs : sc[s][2 * h + k];
                    const float dot = tok_scales ? sk * (k ? tks[s].y : tks[s].x) : sk;
                    x[s][k] = blk + 8 * s + 2 * tq + k < tok_end
                                  ? dot * mut_row_xscale<B>(p, xscale, hq0 + g)
                                  : -INFINITY;
                    tmax = fmaxf(tmax, x[s][k]);
                }
            tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
            tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
            const float m_old = run_m[h];
            // no-max-subtraction: softmax without subtracting the running max.
            const float m_new = KVF_BUG(B, NO_MAX_SUBTRACTION) ? 0.f : fmaxf(m_old, tmax);
            // -inf - -inf would be NaN (B02): an empty running state scales by 0.
            const float alpha = m_old == -INFINITY ? 0.f : ex2_approx(m_old - m_new);
            float l = run_l[h] * alpha; // the same factor as the numerators (exact when 1)
            float pk[SUB][2];
#pragma unroll
            for (int s = 0; s < SUB; ++s)
#pragma unroll
                for (int k = 0; k < 2; ++k) {
                    if constexpr (KVF_BUG_ROUNDS_P(B)) // B12: weights rounded to bf16 (and sum)
                        pk[s][k] = x[s][k] == -INFINITY
                                       ? 0.f
                                       : mut_bf16_round(ex2_approx(x[s][k] - m_new));
                    else
                        pk[s][k] = x[s][k] == -INFINITY ? 0.f : ex2_approx(x[s][k] - m_new);
                    l += pk[s][k];
                    if constexpr (KVF_BUG(B, TAIL_IN_DENOMINATOR)) {
                        // B13: a zero-padded slot past the end (its K row is zeros: score 0)
                        // enters the denominator; it still gets weight 0 in P.V.
                        if (blk + 8 * s + 2 * tq + k >= tok_end) l += ex2_approx(0.f - m_new);
                    }
                }
            run_l[h] = l;
            run_m[h] = m_new;
            if (g < G) {
#pragma unroll
                for (int s = 0; s < SUB; ++s) {
                    // FP8 per-token value scales join the weights, not the denominator (Q2).
                    float2 wv = tok_scales ? make_float2(pk[s][0] * tvs[s].x, pk[s][1] * tvs[s].y)
                                           : make_float2(pk[s][0], pk[s][1]);
                    if constexpr (KVF_BUG(B, V_SCALE_FP16_WEIGHTS)) {
                        // v_scale folded into the weights, held in fp16.
                        const float vsc = tok_scales ? 1.f : p.scale_mode == 1 ? vs_cta : 1.f;
                        wv = make_float2(__half2float(__float2half_rn(wv.x * vsc)),
                                         __half2float(__float2half_rn(wv.y * vsc)));
                    }
                    *reinterpret_cast<float2 *>(pw + g * C::PW + 8 * s + 2 * tq) = wv;
                }
                if (tq == 0) pw[g * C::PW + BT] = alpha;
            }
        }
        __syncwarp();

        // P.V with at most one rescale of the accumulators per tile; skipped when the maximum
        // did not move (alpha = 1 exactly: the product would change no bit). Warp-uniform.
#pragma unroll
        for (int g = 0; g < G; ++g) {
            const float a = pw[g * C::PW + BT];
            if (a != 1.f) {
#pragma unroll
                for (int v = 0; v < C::DPL; ++v)
                    acc[g][v] *= a;
            }
        }
        const uint16_t *vb = sv + nb * BT * C::ROW + ms * C::DSL + lane * C::DPL;
        // P.V over the block's BT rows; value_row(j, vf) gives this lane's DPL values of row j.
        auto pv = [&](auto value_row) {
#pragma unroll
            for (int jh = 0; jh < BT; jh += 4) {
                float4 w4[G];
#pragma unroll
                for (int g = 0; g < G; ++g)
                    w4[g] = *reinterpret_cast<const float4 *>(pw + g * C::PW + jh);
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    float vf[C::DPL];
                    value_row(jh + j, vf);
#pragma unroll
                    for (int g = 0; g < G; ++g) {
                        const float pj = j == 0   ? w4[g].x
                                         : j == 1 ? w4[g].y
                                         : j == 2 ? w4[g].z
                                                  : w4[g].w;
#pragma unroll
                        for (int v = 0; v < C::DPL; ++v) {
                            if constexpr (KVF_BUG_BF16_ACC(B)) // P.V accumulated in bf16
                                acc[g][v] = mut_bf16_round(fmaf(pj, vf[v], acc[g][v]));
                            else
                                acc[g][v] = fmaf(pj, vf[v], acc[g][v]);
                        }
                    }
                }
            }
        };
        if constexpr (F8) {
            // This lane's DPL value bytes of each row (rows alternate parity: two offsets), read
            // first so that one test finds a NaN (or e5m2 infinity) byte among them: without
            // one anywhere in the warp, widened by bit placement; else by conversions (fp8.cuh).
            const unsigned char *vb8 = sv8 + nb * BT * C::ROWB;
            uint32_t vw[BT];
            uint32_t special = 0;
#pragma unroll
            for (int j = 0; j < BT; ++j) {
                const unsigned char *vr = vb8 + j * C::ROWB + ((j & 1) ? voff1 : voff0);
                vw[j] = C::DPL == 4 ? *reinterpret_cast<const uint32_t *>(vr)
                                    : *reinterpret_cast<const uint16_t *>(vr);
                special |= fp8_special_sum(vw[j], v_e5m2);
            }
            auto fp8_rows = [&](auto widen4) {
                return [&, widen4](int j, float *vf) {
                    const float4 f = widen4(vw[j]);
                    vf[0] = f.x, vf[1] = f.y;
                    if constexpr (C::DPL == 4) vf[2] = f.z, vf[3] = f.w;
                    if constexpr (KVF_BUG(B, FP8_SUBNORMAL_FLUSH)) {
#pragma unroll
                        for (int v = 0; v < C::DPL; ++v)
                            vf[v] = mut_fp8_flush1(vf[v], v_e5m2);
                    }
                };
            };
            if (KVF_FP8_FAST_V && !__any_sync(0xffffffffu, special & 0x80808080u))
                pv(fp8_rows([&](uint32_t w) { return fp8x4_to_float4_fast(w, v_e5m2); }));
            else
                fp8_format<(G <= 8)>(v_e5m2, [&](auto e5) {
                    const bool E5 = e5;
                    pv(fp8_rows([&](uint32_t w) { return fp8x4_to_float4(w, E5); }));
                });
        } else {
            pv([&](int j, float *vf) {
                const uint16_t *vrow = vb + j * C::ROW;
                if constexpr (C::DPL == 4) {
                    const uint2 w = *reinterpret_cast<const uint2 *>(vrow);
                    vf[0] = bf16lo(w.x), vf[1] = bf16hi(w.x), vf[2] = bf16lo(w.y);
                    vf[3] = bf16hi(w.y);
                } else {
                    const uint32_t w = *reinterpret_cast<const uint32_t *>(vrow);
                    vf[0] = bf16lo(w), vf[1] = bf16hi(w);
                }
            });
        }
    }

    // Epilogue, two barriers. Each warp publishes its (m, l) per head (l summed over the head's
    // 4 lanes in a fixed order) and, once the ring is idle, its raw accumulators into the ring
    // as [NB][G][D] (its token block's plane, its slice of D). One thread per (head, slice)
    // derives the CTA's maximum m, the factors 2^(m_warp - m) and l in block order; then every
    // thread finishes 4 output dims of a head: each block's value times its factor, summed over
    // the blocks in a fixed tree order (deterministic bits), normalized or kept as a partial.
#pragma unroll
    for (int h = 0; h < HR; ++h) {
        const int g = r + 8 * h;
        float l = run_l[h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        if (g < G && tq == 0) s_mw[warp * 16 + g] = run_m[h], s_lw[warp * 16 + g] = l;
    }
    cp_async_wait<0>();
    __syncthreads();
    float *red = reinterpret_cast<float *>(smem); // [NB][G][D] over the idle ring
    {
        float *dst = red + nb * G * D + ms * C::DSL + lane * C::DPL;
#pragma unroll
        for (int g = 0; g < G; ++g) {
            if constexpr (C::DPL == 4)
                *reinterpret_cast<float4 *>(dst + g * D) =
                    make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
            else
                *reinterpret_cast<float2 *>(dst + g * D) = make_float2(acc[g][0], acc[g][1]);
        }
    }
    if (tid < G * C::MS) {
        const int g = tid % G, sl = tid / G; // one thread per (head, slice)
        float m = s_mw[sl * C::NB * 16 + g];
#pragma unroll
        for (int w = 1; w < C::NB; ++w)
            m = fmaxf(m, s_mw[(sl * C::NB + w) * 16 + g]);
        float l = 0.f;
#pragma unroll
        for (int w = 0; w < C::NB; ++w) {
            const int wi = (sl * C::NB + w) * 16 + g;
            const float mw = s_mw[wi];
            // A state with nothing in it weighs 0 (its m may be -inf, as m itself may be).
            const float f = mw == m ? 1.f : mw == -INFINITY ? 0.f : ex2_approx(mw - m);
            s_fw[wi] = f;
            l += s_lw[wi] * f;
        }
        if (sl == 0) s_m[g] = m, s_l[g] = l;
    }
    __syncthreads();

#pragma unroll 1
    for (int c = tid; c < G * D / 4; c += kThreads) {
        const int g = c / (D / 4), d0 = (c % (D / 4)) * 4, sl = d0 / C::DSL;
        float t[C::NB][4];
#pragma unroll
        for (int w = 0; w < C::NB; ++w) {
            const float4 x = *reinterpret_cast<const float4 *>(red + (w * G + g) * D + d0);
            const float f = s_fw[(sl * C::NB + w) * 16 + g];
            t[w][0] = x.x, t[w][1] = x.y, t[w][2] = x.z, t[w][3] = x.w;
            if (f != 1.f) {
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    t[w][e] *= f;
            }
        }
#pragma unroll
        for (int active = C::NB; active > 1; active >>= 1) {
#pragma unroll
            for (int w = 0; w < active / 2; ++w)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    if constexpr (KVF_BUG_BF16_ACC(B))
                        t[w][e] = mut_bf16_round(t[w][e] + t[w + active / 2][e]);
                    else
                        t[w][e] += t[w + active / 2][e];
                }
        }
        const float m = s_m[g], l = s_l[g];
        if (single) {
            // Whole sequence in this CTA: normalize and store. Empty: o = +0, lse = -inf (B04).
            const int64_t row = (int64_t)b * Hq + hq0 + g;
            // B02: the single state is weighed like a merge input, 2^(m - M) with M = m, and
            // nothing guards the empty state: -inf - -inf = NaN. (2^0 = 1 exactly otherwise.)
            const float w = KVF_BUG(B, MERGE_EMPTY_NAN) ? exp2f(m - m) : 1.f, lw = l * w;
            uint32_t packed[2];
#pragma unroll
            for (int e = 0; e < 4; e += 2) {
                float o0, o1;
                if constexpr (KVF_BUG(B, MERGE_EMPTY_NAN)) {
                    o0 = t[0][e] * w / lw, o1 = t[0][e + 1] * w / lw;
                } else {
                    o0 = l > 0.f ? t[0][e] / l : 0.f;
                    o1 = l > 0.f ? t[0][e + 1] / l : 0.f;
                }
                if (F8 && p.scale_mode == 1 && !KVF_BUG(B, V_SCALE_IGNORED) &&
                    !KVF_BUG(B, V_SCALE_FP16_WEIGHTS)) { // after the division
                    const float vs = mut_row_vscale<B>(p, vs_cta, hq0 + g);
                    o0 *= vs, o1 *= vs;
                }
                if constexpr (KVF_BUG_TRUNC_STORE(B))
                    packed[e / 2] = mut_bf16_trunc(o0) | mut_bf16_trunc(o1) << 16;
                else
                    packed[e / 2] = pack_bf16x2_rn(o0, o1);
            }
            *reinterpret_cast<uint2 *>(p.o + row * D + d0) = make_uint2(packed[0], packed[1]);
            if (d0 == 0)
                p.lse[row] = KVF_BUG(B, MERGE_EMPTY_NAN) ? m + log2f(lw) : row_lse<B>(m, l);
        } else {
            // Partial state, unnormalized, in fp32 (B12: never bf16 before the merge).
            const int64_t row = (int64_t)ws_row * Hq + hq0 + g;
            float st[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) // B12: stored as bf16 before the merge
                st[e] = KVF_BUG(B, BF16_PARTIALS) ? mut_bf16_round(t[0][e]) : t[0][e];
            *reinterpret_cast<float4 *>(p.ws_acc + row * D + d0) =
                make_float4(st[0], st[1], st[2], st[3]);
            if constexpr (KVF_BUG(B, EMPTY_CHUNK_ZERO_LSE)) {
                // B16: an empty split reports lse 0 (m = 0, l = 1, o = 0) instead of -inf, so
                // the merge gives it weight 2^(0 - M).
                if (d0 == 0) p.ws_ml[row] = l > 0.f ? make_float2(m, l) : make_float2(0.f, 1.f);
            } else {
                if (d0 == 0) p.ws_ml[row] = make_float2(m, l);
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
// decode_split_d*.cu (bf16 caches) and decode_split_fp8_d*.cu (FP8 caches). A mutant object
// defines a d128 bf16 table of its own policy in its own namespace
// (kernels/cuda/mutants/decode_mutant.cu).
extern const kvf::SplitEntry kvf_split_d64[16];
extern const kvf::SplitEntry kvf_split_d128[16];
extern const kvf::SplitEntry kvf_split_d256[16];
extern const kvf::SplitEntry kvf_split_fp8_d64[16];
extern const kvf::SplitEntry kvf_split_fp8_d128[16];
extern const kvf::SplitEntry kvf_split_fp8_d256[16];

// Defines the table NAME of the instances <D, 1..16, BUG, F8>.
#define KVF_SPLIT_TABLE_OF(NAME, D, BUG, F8)                                                       \
    const kvf::SplitEntry NAME[16] = {                                                             \
        KVF_SPLIT_ENTRY(D, 1, BUG, F8),  KVF_SPLIT_ENTRY(D, 2, BUG, F8),                           \
        KVF_SPLIT_ENTRY(D, 3, BUG, F8),  KVF_SPLIT_ENTRY(D, 4, BUG, F8),                           \
        KVF_SPLIT_ENTRY(D, 5, BUG, F8),  KVF_SPLIT_ENTRY(D, 6, BUG, F8),                           \
        KVF_SPLIT_ENTRY(D, 7, BUG, F8),  KVF_SPLIT_ENTRY(D, 8, BUG, F8),                           \
        KVF_SPLIT_ENTRY(D, 9, BUG, F8),  KVF_SPLIT_ENTRY(D, 10, BUG, F8),                          \
        KVF_SPLIT_ENTRY(D, 11, BUG, F8), KVF_SPLIT_ENTRY(D, 12, BUG, F8),                          \
        KVF_SPLIT_ENTRY(D, 13, BUG, F8), KVF_SPLIT_ENTRY(D, 14, BUG, F8),                          \
        KVF_SPLIT_ENTRY(D, 15, BUG, F8), KVF_SPLIT_ENTRY(D, 16, BUG, F8)}
// The bf16 table kvf_split_d<D> of policy BUG, and the FP8 table kvf_split_fp8_d<D>.
#define KVF_SPLIT_TABLE(D, BUG) KVF_SPLIT_TABLE_OF(kvf_split_d##D, D, BUG, false)
#define KVF_SPLIT_TABLE_FP8(D) KVF_SPLIT_TABLE_OF(kvf_split_fp8_d##D, D, kvf::NoBug, true)
#define KVF_SPLIT_ENTRY(D, G, BUG, F8)                                                             \
    {                                                                                              \
        (const void *)&kvf::splitkv_kernel<D, G, BUG, F8>, kvf::SplitCfg<D, G, F8>::SMEM,          \
            kvf::SplitCfg<D, G, F8>::T                                                             \
    }
