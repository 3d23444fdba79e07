// CUDA GQA paged-KV decode attention: bf16 q/k/v, fp32 accumulation, bf16 o (round to nearest
// even), base-2 f32 lse, NHD pages [P][S][Hk][D]. Head dims 64/128/256, groups 1..16, page
// sizes 1..256, empty and mixed-length sequences, shared pages, page ids up to 2^31-1.
//
// Variants (registered kernels; judge any of them with `kvfuzz replay --kernel NAME CASES`,
// time them with `kvfuzz bench --kernel NAME`, test them with `ctest -L gpu`):
//   cuda        split-KV (flash-decoding): splitkv_kernel<D,G> (decode.cuh) writes fp32 partial
//               states (unnormalized o, running max m, sum l) for each chunk of a sequence;
//               merge_kernel<D> combines them. The chunk size comes from the SM count and the
//               workload so a single sequence still fills the GPU; a sequence that fits one
//               chunk is written directly and skips the merge.
//   cuda-naive  naive_kernel<D>: one block per (sequence, q head), whole sequence, no split,
//               K/V re-read by every head of a group. The baseline the split kernel must beat.
// Both keep one online-softmax rescale per tile of >= 32 tokens (the strict rule's model) and
// mask by token index, so NaN in unused slots or unreferenced pages never reaches the result.
//
// This file, top-down: kernels (naive, merge), launchers that check preconditions and
// cudaGetLastError, the plan (split heuristic, workspace size, schedule), and the plugin-ABI
// descriptors (plugin.h) the registered kernels are: the device buffers, their poison and the
// checks after each run belong to the CUDA buffer host (host_cuda.cu), not to this file.
//
// Mutants: kernels/cuda/mutants/decode_mutant.cu includes this file inside a namespace of its
// own (kvf_mut_<ID>) with KVF_CUDA_MUTANT_TU and one KVF_MUTANT_<ID> defined (one object per
// entry of kernels/mutants.def). Such a build keeps only the split-KV path for head_dim 128,
// turns the plan API into private functions and defines no registry entry (the mutant file
// defines its own descriptor from the desc_* functions here); `#if defined(KVF_MUTANT_<ID>)`
// blocks here and in decode.cuh compile the bug in. This production object is built with none
// of those macros.
#include <cuda_runtime.h>

#include "cuda_error.cuh"

#include <atomic>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.cuh"
#include "kvfuzz/cuda_kernels.h"

#ifdef KVF_CUDA_MUTANT_TU
#define KVF_CUDA_API // C++ functions in the mutant's namespace, not the C API
#else
#define KVF_CUDA_API extern "C"
#endif

namespace kvf {

#ifndef KVF_CUDA_MUTANT_TU

// ---------------------------------------------------------------------------------------------
// Kernels

struct NaiveParams {
    const uint16_t *q, *k, *v;
    const int32_t *kv_indptr, *kv_indices, *kv_last_len;
    uint16_t *o;
    float *lse;
    int32_t num_qo_heads, num_kv_heads, page_size;
    float scale_log2;
};

constexpr int kNaiveThreads = 128;
constexpr int kNaiveTile = 32; // tokens per rescale, the smallest the strict rule models

template <int D>
__global__ void __launch_bounds__(kNaiveThreads) naive_kernel(const NaiveParams p) {
    constexpr int T = kNaiveTile, NW = kNaiveThreads / 32;
    constexpr int PER = (D + kNaiveThreads - 1) / kNaiveThreads; // output dims per thread
    __shared__ float s_q[D];
    __shared__ float s_p[T];
    __shared__ int64_t s_off[T];
    __shared__ float s_m, s_l, s_alpha;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int h = blockIdx.x, b = blockIdx.y;
    const int Hq = p.num_qo_heads, Hk = p.num_kv_heads, S = p.page_size;
    const int hk = h / (Hq / Hk);
    const int pbeg = p.kv_indptr[b], npages = p.kv_indptr[b + 1] - pbeg;
    const int len = npages == 0 ? 0 : (npages - 1) * S + p.kv_last_len[b];

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
            float dot = 0.f;
#pragma unroll
            for (int i = 0; i < D / 32; ++i)
                dot = fmaf(s_q[lane + 32 * i],
                           __uint_as_float((uint32_t)p.k[off + lane + 32 * i] << 16), dot);
            dot = warp_sum(dot);
            if (lane == 0) {
                s_p[j] = dot * p.scale_log2;
                s_off[j] = off;
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
                for (int j = 0; j < n; ++j) // only valid tokens: never 0 * NaN
                    a = fmaf(s_p[j], __uint_as_float((uint32_t)p.v[s_off[j] + d] << 16), a);
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
#endif // !KVF_CUDA_MUTANT_TU

struct MergeParams {
    const float *ws_acc;
    const float2 *ws_ml;
    const int32_t *seq_first;
    uint16_t *o;
    float *lse;
    int32_t num_qo_heads;
#ifdef KVF_MUTANT_STALE_SCRATCH
    int32_t max_splits; // every row merges this many splits, written for it or not
#endif
};

constexpr int kMergeThreads = 256;

// One block per (q head, sequence): o = sum_i 2^(m_i-M) acc_i / sum_i 2^(m_i-M) l_i with
// M = max_i m_i, so each partial is rescaled exactly once. Latency is what matters here (the
// partials sit in L2): every load of a round (up to 64 splits) is issued before M is known,
// warps take splits round-robin, and the warps' sums are added in a fixed order.
template <int D>
__global__ void __launch_bounds__(kMergeThreads) merge_kernel(const MergeParams p) {
    constexpr int NW = kMergeThreads / 32, PER = D / 32, K = 8; // K splits per warp per round
    __shared__ float s_o[NW][D];
    __shared__ float s_lw[NW];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int h = blockIdx.x, b = blockIdx.y, Hq = p.num_qo_heads;
#ifdef KVF_MUTANT_STALE_SCRATCH
    // B17: the merge reads max_splits partial states for every row: those of the following
    // sequences, or workspace rows no split of this launch wrote (the plan sizes the workspace
    // for them, so the reads stay in bounds and return what the buffer host left there).
    const int first = p.seq_first[b], n = p.max_splits;
#else
    const int first = p.seq_first[b], n = p.seq_first[b + 1] - first;
#endif
    if (n <= 1) return; // the split kernel wrote this sequence itself
    // Programmatic dependent launch: the partial states are complete and visible after this.
    asm volatile("griddepcontrol.wait;" ::: "memory");

    const float2 *ml = p.ws_ml + (int64_t)first * Hq + h;
    const float *acc = p.ws_acc + ((int64_t)first * Hq + h) * D + lane * PER;
    float o[PER], L = 0.f, M = -INFINITY;
#ifdef KVF_MUTANT_SPLIT_LSE
    float lse_big = -INFINITY; // B06: the largest split's own lse, m_i + log2(l_i)
#endif
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
#ifdef KVF_MUTANT_SPLIT_LSE
            for (int i = lane; i < n; i += 32) {
                const float2 mi = ml[(int64_t)i * Hq];
                lse_big = fmaxf(lse_big, mi.x + log2f(mi.y));
            }
            lse_big = warp_max(lse_big);
#endif
        }
#pragma unroll
        for (int k = 0; k < K; ++k) {
#ifdef KVF_MUTANT_MERGE_EMPTY_NAN
            const float w = ex2_approx(mlr[k].x - M); // B02: no guard for empty states
#else
            // An empty partial (m = -inf) weighs 0; never evaluate -inf - -inf (B02).
            const float w = mlr[k].x == -INFINITY ? 0.f : ex2_approx(mlr[k].x - M);
#endif
#ifdef KVF_MUTANT_MERGE_RACE
            // B07: the normaliser is read before the last split's weight lands in it (a
            // missing barrier); its numerator is in o all the same.
            if (round * NW * K + k * NW + warp != n - 1) L = fmaf(w, mlr[k].y, L);
#else
            L = fmaf(w, mlr[k].y, L);
#endif
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
#if defined(KVF_MUTANT_MERGE_EMPTY_NAN)
        p.o[orow * D + d] = __bfloat16_as_ushort(__float2bfloat16_rn(od / Lt));
#elif defined(KVF_MUTANT_TRUNC_STORE)
        p.o[orow * D + d] = (uint16_t)mut_bf16_trunc(Lt > 0.f ? od / Lt : 0.f);
#else
        p.o[orow * D + d] = __bfloat16_as_ushort(__float2bfloat16_rn(Lt > 0.f ? od / Lt : 0.f));
#endif
    }
#if defined(KVF_MUTANT_SPLIT_LSE)
    if (tid == 0) p.lse[orow] = Lt > 0.f ? lse_big : -INFINITY;
#elif defined(KVF_MUTANT_MERGE_EMPTY_NAN)
    if (tid == 0) p.lse[orow] = M + log2f(Lt);
#elif defined(KVF_MUTANT_ROW_LSE)
    if (tid == 0) p.lse[orow] = mut_row_lse(M, Lt);
#else
    if (tid == 0) p.lse[orow] = Lt > 0.f ? M + log2f(Lt) : -INFINITY;
#endif
}

} // namespace kvf

using namespace kvf;

// ---------------------------------------------------------------------------------------------
// Errors


// Grows a device buffer to at least `bytes` (contents not kept).
static int dev_grow(void **buf, size_t *cap, size_t bytes, const char *what, kvf_error *err) {
    if (bytes <= *cap) return 0;
    if (*buf) cudaFree(*buf);
    *buf = NULL;
    *cap = 0;
    KVF_CUDA_TRY(cudaMalloc(buf, bytes), what);
    *cap = bytes;
    return 0;
}

// ---------------------------------------------------------------------------------------------
// The plan

struct kvf_cuda_plan {
    kvf_cuda_algo algo;
    int device, num_sms;
    // The prepared problem.
    int ready;
    int32_t Hq, Hk, D, S, B;
    float scale_log2;
    const SplitEntry *entry;
    kvf_cuda_plan_info info;
    int32_t n_items;
    // Schedule: [B+1] seq_first, padded to 4 entries, then [n_items] int4 work items (see
    // SplitParams::items); on the host (pinned, for change detection and the upload) and on the
    // device. prepare() only marks a changed schedule dirty; the next launch enqueues its upload
    // on the launch's own stream, so a run pays no synchronous copy and no extra wait for it.
    int32_t *h_sched;
    size_t h_sched_len, h_sched_cap;
    void *d_sched;
    size_t d_sched_cap;
    int sched_dirty;            // h_sched is newer than d_sched
    cudaEvent_t sched_uploaded; // recorded after the last upload: h_sched is free to change
    int sched_upload_recorded;  // and d_sched is complete once it fires
    cudaStream_t sched_stream;  // where that upload was enqueued
    // The split-KV partial states live in the caller's workspace (kvf_cuda_tensors): the
    // buffer host poisons and guards it like every other buffer a kernel writes.
    size_t ws_acc_bytes; // [rows][D] floats at offset 0, then [rows] float2 at ws_ml_at
    size_t ws_ml_at, ws_bytes;
#ifdef KVF_MUTANT_INT32_OFFSET
    int64_t num_pages;
#endif
#ifdef KVF_MUTANT_EXTRA_PAGE
    int32_t n_entries;
#endif
};

#ifdef KVF_CUDA_MUTANT_TU
static const SplitEntry *split_entry(int D, int G) {
    (void)D; // check_shape admits head_dim 128 only
    return &kvf_split_d128[G - 1];
}
#else
static const SplitEntry *split_entry(int D, int G) {
    const SplitEntry *t = D == 64 ? kvf_split_d64 : D == 128 ? kvf_split_d128 : kvf_split_d256;
    return &t[G - 1];
}
#endif

// Per-instance one-time setup (dynamic shared memory above 48 KB) and occupancy, cached.
static std::atomic<int> g_split_occ[3][16];

static int split_occupancy(int D, int G, kvf_error *err) {
    const int di = D == 64 ? 0 : D == 128 ? 1 : 2;
    int occ = g_split_occ[di][G - 1].load();
    if (occ > 0) return occ;
    const SplitEntry *e = split_entry(D, G);
    KVF_CUDA_TRY(
        cudaFuncSetAttribute(e->fn, cudaFuncAttributeMaxDynamicSharedMemorySize, e->smem_bytes),
        "setting the split kernel's shared-memory size");
    KVF_CUDA_TRY(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, e->fn, kThreads, e->smem_bytes),
        "querying the split kernel's occupancy");
    if (occ < 1)
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "The split kernel for head_dim %d and group %d does not fit on this "
                             "device (%d bytes of shared memory).",
                             D, G, e->smem_bytes);
    g_split_occ[di][G - 1].store(occ);
    return occ;
}

KVF_CUDA_API int kvf_cuda_plan_create(kvf_cuda_plan **out, kvf_cuda_algo algo, kvf_error *err) {
    *out = NULL;
    if (algo != KVF_CUDA_ALGO_SPLITKV && algo != KVF_CUDA_ALGO_NAIVE)
        return kvf_error_set(err, KVF_EINVAL, "Unknown CUDA algorithm %d.", (int)algo);
    kvf_cuda_plan *p = (kvf_cuda_plan *)calloc(1, sizeof *p);
    if (!p) return kvf_error_set(err, KVF_ENOMEM, "Out of host memory for a CUDA plan.");
    p->algo = algo;
    cudaError_t e = cudaGetDevice(&p->device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&p->num_sms, cudaDevAttrMultiProcessorCount, p->device);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&p->sched_uploaded, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        free(p);
        return kvf__cuda_fail(err, e, "Initializing CUDA");
    }
    *out = p;
    return 0;
}

// Waits until no enqueued upload still reads h_sched.
static int sched_host_free(kvf_cuda_plan *p, kvf_error *err) {
    if (!p->sched_upload_recorded) return 0;
    KVF_CUDA_TRY(cudaEventSynchronize(p->sched_uploaded), "Waiting for the schedule upload");
    return 0;
}

// Replaces h_sched (free of uploads: sched_host_free first) by a pinned buffer of at least
// `need` entries; the contents are not kept.
static int sched_host_grow(kvf_cuda_plan *p, size_t need, kvf_error *err) {
    if (p->h_sched) cudaFreeHost(p->h_sched);
    p->h_sched = NULL;
    p->h_sched_cap = 0;
    const size_t cap = need < 1024 ? 1024 : 2 * need;
    KVF_CUDA_TRY(cudaMallocHost((void **)&p->h_sched, cap * sizeof(int32_t)),
                 "Allocating the pinned split schedule");
    p->h_sched_cap = cap;
    return 0;
}

KVF_CUDA_API void kvf_cuda_plan_destroy(kvf_cuda_plan *p) {
    if (!p) return;
    if (p->sched_upload_recorded) (void)cudaEventSynchronize(p->sched_uploaded);
    if (p->h_sched) cudaFreeHost(p->h_sched);
    cudaEventDestroy(p->sched_uploaded);
    if (p->d_sched) cudaFree(p->d_sched);
    free(p);
}

static int check_shape(const kvf_cuda_problem *pr, kvf_error *err) {
    if (pr->num_qo_heads < 1 || pr->num_kv_heads < 1)
        return kvf_error_set(err, KVF_EINVAL,
                             "num_qo_heads (%d) and num_kv_heads (%d) must be at least 1.",
                             pr->num_qo_heads, pr->num_kv_heads);
    if (pr->num_qo_heads % pr->num_kv_heads != 0)
        return kvf_error_set(err, KVF_EINVAL,
                             "num_qo_heads (%d) is not a multiple of num_kv_heads (%d).",
                             pr->num_qo_heads, pr->num_kv_heads);
    const int G = pr->num_qo_heads / pr->num_kv_heads;
    if (G > KVF_CUDA_MAX_GROUP)
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "GQA group %d (num_qo_heads / num_kv_heads) is above the CUDA "
                             "kernels' maximum of %d.",
                             G, KVF_CUDA_MAX_GROUP);
    if (pr->num_kv_heads > 65535)
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "num_kv_heads %d is above the CUDA kernels' maximum of 65535.",
                             pr->num_kv_heads);
    if (pr->head_dim != 64 && pr->head_dim != 128 && pr->head_dim != 256)
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "head_dim %d is not supported by the CUDA kernels (64, 128 or 256).",
                             pr->head_dim);
#ifdef KVF_CUDA_MUTANT_TU
    // One instance set per mutant keeps the build short; the campaign meets D = 128 often.
    if (pr->head_dim != 128)
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "CUDA mutants are built for head_dim 128 only, not %d.",
                             pr->head_dim);
#endif
#if defined(KVF_MUTANT_GROUP_POW2) || defined(KVF_MUTANT_HEAD_MODULO)
    if (pr->num_qo_heads > 65535) // one CTA row per q head
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "num_qo_heads %d is above this mutant's maximum of 65535.",
                             pr->num_qo_heads);
#endif
    if (pr->page_size < 1)
        return kvf_error_set(err, KVF_EINVAL, "page_size %d must be at least 1.", pr->page_size);
    if (pr->page_size > KVF_CUDA_MAX_PAGE_SIZE)
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "page_size %d is above the CUDA kernels' maximum of %d.",
                             pr->page_size, KVF_CUDA_MAX_PAGE_SIZE);
    if (pr->batch_size < 0)
        return kvf_error_set(err, KVF_EINVAL, "batch_size %d is negative.", pr->batch_size);
    if (pr->batch_size > 65535)
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "batch_size %d is above the CUDA kernels' maximum of 65535.",
                             pr->batch_size);
    if (pr->num_pages < 0 || pr->num_pages > (int64_t)INT32_MAX + 1)
        return kvf_error_set(err, KVF_EINVAL,
                             "num_pages %lld is outside [0, 2^31] (page ids are int32).",
                             (long long)pr->num_pages);
    if (!isfinite(pr->sm_scale)) return kvf_error_set(err, KVF_EINVAL, "sm_scale is not finite.");
    return 0;
}

// Validates the host page-table metadata and returns sequence lengths in len[].
static int check_lengths(const kvf_cuda_problem *pr, int64_t *len, kvf_error *err) {
    const int32_t *ip = pr->kv_indptr, *last = pr->kv_last_page_len;
    if (pr->batch_size > 0 && ip[0] != 0)
        return kvf_error_set(err, KVF_EINVAL, "kv_indptr[0] is %d, not 0.", ip[0]);
    for (int32_t b = 0; b < pr->batch_size; ++b) {
        if (ip[b + 1] < ip[b])
            return kvf_error_set(err, KVF_EINVAL, "kv_indptr decreases at index %d (%d < %d).",
                                 b + 1, ip[b + 1], ip[b]);
        const int64_t n = (int64_t)ip[b + 1] - ip[b];
        if (n > 0 && (last[b] < 1 || last[b] > pr->page_size))
            return kvf_error_set(err, KVF_EINVAL,
                                 "kv_last_page_len[%d] is %d, outside [1, page_size = %d].", b,
                                 last[b], pr->page_size);
        if (n == 0 && (last[b] < 0 || last[b] > pr->page_size))
            return kvf_error_set(err, KVF_EINVAL,
                                 "kv_last_page_len[%d] is %d for an empty sequence, outside "
                                 "[0, page_size = %d].",
                                 b, last[b], pr->page_size);
#if defined(KVF_MUTANT_TAIL_SLOTS_READ)
        len[b] = n * pr->page_size; // B03: bounds per page, not per token
#elif defined(KVF_MUTANT_LAST_LEN_MODULO)
        len[b] = n == 0 ? 0 : (n - 1) * pr->page_size + last[b] % pr->page_size; // B11
#elif defined(KVF_MUTANT_EXTRA_PAGE)
        len[b] = n == 0 ? 0 : n * pr->page_size + last[b]; // B15: one page too many
#else
        len[b] = n == 0 ? 0 : (n - 1) * pr->page_size + last[b];
#endif
        if (len[b] > KVF_CUDA_MAX_SEQ_LEN)
            return kvf_error_set(err, KVF_EUNSUPPORTED,
                                 "Sequence %d has %lld tokens, above the CUDA kernels' maximum "
                                 "of 2^30.",
                                 b, (long long)len[b]);
    }
    return 0;
}

#if defined(KVF_MUTANT_PLANNER_FIRST_SEQ) || defined(KVF_MUTANT_EMPTY_CHUNK_ZERO_LSE)
// The number of splits the mutant's plan gives sequence b (s: the right number).
static int64_t mutant_splits(const int64_t *len, int32_t b, int64_t chunk_tokens, int64_t s) {
#ifdef KVF_MUTANT_PLANNER_FIRST_SEQ
    (void)b, (void)s;
    return (len[0] + chunk_tokens - 1) / chunk_tokens; // B05: launch sized from request 0
#else
    return len[b] > 0 && len[b] % chunk_tokens == 0 ? s + 1 : s; // B16: a split past the end
#endif
}
#endif

KVF_CUDA_API int kvf_cuda_plan_prepare(kvf_cuda_plan *p, const kvf_cuda_problem *pr,
                                       kvf_error *err) {
    p->ready = 0;
    int rc = check_shape(pr, err);
    if (rc) return rc;
    if (pr->batch_size > 0 && (!pr->kv_indptr || !pr->kv_last_page_len))
        return kvf_error_set(err, KVF_EINVAL, "kv_indptr and kv_last_page_len must be given.");
    const int32_t B = pr->batch_size;
    int64_t *len = (int64_t *)malloc(sizeof(int64_t) * (size_t)(B > 0 ? B : 1));
    if (!len) return kvf_error_set(err, KVF_ENOMEM, "Out of host memory for sequence lengths.");
    rc = check_lengths(pr, len, err);
    if (rc) {
        free(len);
        return rc;
    }
    p->Hq = pr->num_qo_heads, p->Hk = pr->num_kv_heads, p->D = pr->head_dim;
    p->S = pr->page_size, p->B = B;
    // The folded constant is rounded once (in double first), then one rounding per logit:
    // s2 = (q.k) * c, c = fl(sm_scale * log2 e).
#ifdef KVF_MUTANT_SCALE_TWICE
    p->scale_log2 = (float)((double)pr->sm_scale * pr->sm_scale * 1.4426950408889634);
#else
    p->scale_log2 = (float)((double)pr->sm_scale * 1.4426950408889634);
#endif
    memset(&p->info, 0, sizeof p->info);
    p->info.num_sms = p->num_sms;
#if defined(KVF_MUTANT_GROUP_POW2) || defined(KVF_MUTANT_HEAD_MODULO)
    const int G = 1; // one CTA per q head, each mapped to a kv head by the mutant (decode.cuh)
#else
    const int G = p->Hq / p->Hk;
#endif
#ifdef KVF_MUTANT_INT32_OFFSET
    p->num_pages = pr->num_pages;
#endif
#ifdef KVF_MUTANT_EXTRA_PAGE
    p->n_entries = B > 0 ? pr->kv_indptr[B] : 0;
#endif

#ifndef KVF_CUDA_MUTANT_TU
    if (p->algo == KVF_CUDA_ALGO_NAIVE) {
        free(len);
        p->info.tile_tokens = kNaiveTile;
        p->info.max_splits = 1;
        p->info.ctas = (int64_t)B * p->Hq;
        p->ready = 1;
        return 0;
    }
#endif

    p->entry = split_entry(p->D, G);
    const int occ = split_occupancy(p->D, G, err);
    if (occ < 0) {
        free(len);
        return occ;
    }
    const int T = p->entry->tile_tokens;
    // Split heuristic: aim for one full wave of CTAs (num_sms * ctas_per_sm). With at least
    // that many (sequence, kv head) pairs, no split; otherwise chunks of equal tile count so
    // that mixed lengths give CTAs of similar work (B16) and batch 1 fills the GPU. Chunks are
    // whole tiles, so a chunk boundary never cuts a tile (B09).
    int64_t total_tiles = 0, max_tiles = 0;
    for (int32_t b = 0; b < B; ++b) {
        const int64_t t = (len[b] + T - 1) / T;
        total_tiles += t;
        if (t > max_tiles) max_tiles = t;
    }
#ifdef KVF_MUTANT_PLANNER_FIRST_SEQ
    total_tiles = max_tiles = B > 0 ? (len[0] + T - 1) / T : 0; // B05: planner sees request 0
#endif
    const int64_t slots = (int64_t)p->num_sms * occ;
    int64_t chunk_tiles;
    if ((int64_t)B * p->Hk >= slots || max_tiles == 0)
        chunk_tiles = max_tiles > 0 ? max_tiles : 1;
    else
        chunk_tiles = (total_tiles * p->Hk + slots - 1) / slots;
    // KVF_CUDA_CHUNK_TILES forces the chunk size (experiments, and tests that want many
    // split boundaries); not for production use.
    const char *force = getenv("KVF_CUDA_CHUNK_TILES");
    if (force && atoi(force) > 0) chunk_tiles = atoi(force);
    if (chunk_tiles < 1) chunk_tiles = 1;
    if (chunk_tiles > max_tiles && max_tiles > 0) chunk_tiles = max_tiles;
#ifdef KVF_MUTANT_CHUNK_NOT_TILE_MULTIPLE
    // B09: the same heuristic counted in tokens, so a chunk is not a multiple of the tile.
    int64_t total_tok = 0, max_tok = 0;
    for (int32_t b = 0; b < B; ++b) {
        total_tok += len[b];
        if (len[b] > max_tok) max_tok = len[b];
    }
    int64_t chunk_tokens = (int64_t)B * p->Hk >= slots || max_tok == 0
                               ? max_tok
                               : (total_tok * p->Hk + slots - 1) / slots;
    if (chunk_tokens < 1) chunk_tokens = 1;
    (void)chunk_tiles;
#else
    const int64_t chunk_tokens = chunk_tiles * T; // <= 2^30 + T: fits int32
#endif

    // Schedule: every sequence gets at least one item, so empty ones are written too (B04,
    // B05: the planner and the launch agree by construction, both read this table).
    int64_t n_items = 0;
    int32_t max_splits = 1;
    for (int32_t b = 0; b < B; ++b) {
        int64_t s = (len[b] + chunk_tokens - 1) / chunk_tokens;
#if defined(KVF_MUTANT_PLANNER_FIRST_SEQ) || defined(KVF_MUTANT_EMPTY_CHUNK_ZERO_LSE)
        s = mutant_splits(len, b, chunk_tokens, s);
#endif
        if (s < 1) s = 1;
        if (s > max_splits) max_splits = (int32_t)s;
        n_items += s;
    }
    if (n_items > INT32_MAX) {
        free(len);
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "The split plan needs %lld blocks, above 2^31-1.", (long long)n_items);
    }
    const size_t items_at = ((size_t)B + 1 + 3) & ~(size_t)3;
    const size_t sched_len = items_at + 4 * (size_t)n_items;
    // Build into a scratch copy first to detect "unchanged" and skip the upload.
    int32_t *sched = (int32_t *)malloc(sched_len * sizeof(int32_t));
    if (!sched) {
        free(len);
        return kvf_error_set(err, KVF_ENOMEM, "Out of host memory for the split schedule.");
    }
    memset(sched, 0, sched_len * sizeof(int32_t));
    int32_t *seq_first = sched, *items = sched + items_at;
    int64_t it = 0;
    for (int32_t b = 0; b < B; ++b) {
        int64_t s = (len[b] + chunk_tokens - 1) / chunk_tokens;
#if defined(KVF_MUTANT_PLANNER_FIRST_SEQ) || defined(KVF_MUTANT_EMPTY_CHUNK_ZERO_LSE)
        s = mutant_splits(len, b, chunk_tokens, s);
#endif
        if (s < 1) s = 1;
        seq_first[b] = (int32_t)it;
        for (int64_t k = 0; k < s; ++k, ++it) {
            const int64_t beg = k * chunk_tokens;
            const int64_t end = beg + chunk_tokens < len[b] ? beg + chunk_tokens : len[b];
            items[4 * it] = b;
            items[4 * it + 1] = pr->kv_indptr[b];
            items[4 * it + 2] = (int32_t)beg;
            // end <= 2^30 (checked), so bit 31 is free for "only item of its sequence".
#ifdef KVF_MUTANT_STALE_SCRATCH
            // B17: when anything is merged, every sequence goes through the merge.
            const bool single = s == 1 && max_splits == 1;
#else
            const bool single = s == 1;
#endif
            items[4 * it + 3] =
                (int32_t)((uint32_t)(end > beg ? end : beg) | (single ? 1u << 31 : 0u));
        }
    }
    seq_first[B] = (int32_t)it;
    free(len);
    // h_sched_len <= h_sched_cap, so a longer schedule never reaches the memcmp.
    const int changed =
        sched_len != p->h_sched_len || memcmp(sched, p->h_sched, sched_len * sizeof(int32_t)) != 0;
    if (changed) {
        p->h_sched_len = 0; // until the new schedule is in place: a failure here re-uploads
        rc = sched_host_free(p, err);
        if (!rc && sched_len > p->h_sched_cap) rc = sched_host_grow(p, sched_len, err);
        if (!rc)
            rc = dev_grow(&p->d_sched, &p->d_sched_cap, sched_len * sizeof(int32_t),
                          "Allocating the split schedule", err);
        if (rc) {
            free(sched);
            return rc;
        }
        memcpy(p->h_sched, sched, sched_len * sizeof(int32_t));
        p->h_sched_len = sched_len;
        p->sched_dirty = 1;
    }
    free(sched);
    if (max_splits > 1) {
#ifdef KVF_MUTANT_STALE_SCRATCH
        // B17: room for the rows the last sequence's merge reads past the schedule's end.
        const size_t rows = ((size_t)n_items + (size_t)max_splits) * (size_t)p->Hq;
#else
        const size_t rows = (size_t)n_items * (size_t)p->Hq;
#endif
        p->ws_acc_bytes = rows * p->D * sizeof(float);
        p->ws_ml_at = (p->ws_acc_bytes + 255) & ~(size_t)255;
        p->ws_bytes = p->ws_ml_at + rows * sizeof(float2);
    } else {
        p->ws_acc_bytes = p->ws_ml_at = p->ws_bytes = 0;
    }
    p->n_items = (int32_t)n_items;
    p->info.tile_tokens = T;
    p->info.chunk_tokens = (int32_t)chunk_tokens;
    p->info.max_splits = max_splits;
    p->info.ctas = n_items * p->Hk;
    p->info.merge = max_splits > 1;
    p->info.ctas_per_sm = occ;
    p->ready = 1;
    return 0;
}

#ifndef KVF_CUDA_MUTANT_TU
extern "C" int kvf_cuda_plan_get_info(const kvf_cuda_plan *p, kvf_cuda_plan_info *info) {
    if (!p || !p->ready) return KVF_EINVAL;
    *info = p->info;
    return 0;
}
#endif

KVF_CUDA_API size_t kvf_cuda_plan_workspace_bytes(const kvf_cuda_plan *p) {
    return p && p->ready ? p->ws_bytes : 0;
}

// Launchers: preconditions were checked by prepare(); here only pointers and launch errors.
#ifndef KVF_CUDA_MUTANT_TU
static int launch_naive(kvf_cuda_plan *p, const kvf_cuda_tensors *t, cudaStream_t st,
                        kvf_error *err) {
    NaiveParams np;
    np.q = t->q, np.k = t->k_cache, np.v = t->v_cache;
    np.kv_indptr = t->kv_indptr, np.kv_indices = t->kv_indices;
    np.kv_last_len = t->kv_last_page_len;
    np.o = t->o, np.lse = t->lse;
    np.num_qo_heads = p->Hq, np.num_kv_heads = p->Hk, np.page_size = p->S;
    np.scale_log2 = p->scale_log2;
    const dim3 grid((unsigned)p->Hq, (unsigned)p->B);
    if (p->D == 64)
        naive_kernel<64><<<grid, kNaiveThreads, 0, st>>>(np);
    else if (p->D == 128)
        naive_kernel<128><<<grid, kNaiveThreads, 0, st>>>(np);
    else
        naive_kernel<256><<<grid, kNaiveThreads, 0, st>>>(np);
    KVF_CUDA_TRY(cudaGetLastError(), "Launching the naive decode kernel");
    return 0;
}
#endif

template <int D>
static cudaError_t launch_merge(const MergeParams &mp, dim3 grid, cudaStream_t st) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(kMergeThreads);
    cfg.stream = st;
    // Programmatic dependent launch: the merge grid is scheduled while the split grid drains
    // and blocks in griddepcontrol.wait, hiding one launch latency (the seed workload is a
    // few microseconds in total).
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, merge_kernel<D>, mp);
}

// Makes d_sched current for work enqueued next on st: uploads a changed schedule there, or
// orders st after the last upload when that went to another stream.
static int sched_ready_on(kvf_cuda_plan *p, cudaStream_t st, kvf_error *err) {
    if (p->sched_dirty) {
        KVF_CUDA_TRY(cudaMemcpyAsync(p->d_sched, p->h_sched, p->h_sched_len * sizeof(int32_t),
                                     cudaMemcpyHostToDevice, st),
                     "Uploading the split schedule");
        KVF_CUDA_TRY(cudaEventRecord(p->sched_uploaded, st), "Uploading the split schedule");
        p->sched_dirty = 0;
        p->sched_upload_recorded = 1;
        p->sched_stream = st;
    } else if (p->sched_upload_recorded && st != p->sched_stream) {
        KVF_CUDA_TRY(cudaStreamWaitEvent(st, p->sched_uploaded, 0),
                     "Ordering the launch after the schedule upload");
    }
    return 0;
}

static int launch_split(kvf_cuda_plan *p, const kvf_cuda_tensors *t, cudaStream_t st,
                        kvf_error *err) {
    const int rc = sched_ready_on(p, st, err);
    if (rc) return rc;
    SplitParams sp;
    sp.q = t->q, sp.k = t->k_cache, sp.v = t->v_cache;
    sp.kv_indptr = t->kv_indptr, sp.kv_indices = t->kv_indices;
    sp.kv_last_len = t->kv_last_page_len;
    sp.seq_first = (const int32_t *)p->d_sched;
    sp.items = (const int4 *)(sp.seq_first + ((p->B + 1 + 3) & ~3));
    sp.o = t->o, sp.lse = t->lse;
    sp.ws_acc = (float *)t->workspace;
    sp.ws_ml = p->ws_bytes ? (float2 *)((char *)t->workspace + p->ws_ml_at) : NULL;
    sp.num_qo_heads = p->Hq, sp.num_kv_heads = p->Hk, sp.page_size = p->S;
    sp.page_shift = (p->S & (p->S - 1)) == 0 ? __builtin_ctz((unsigned)p->S) : -1;
#ifdef KVF_MUTANT_CHUNK_NOT_TILE_MULTIPLE
    // Chunks start mid-tile, so one page id per tile would read across page ends: the
    // per-row page lookup keeps the mutant's only bug the chunk/tile mismatch.
    sp.tile_in_page = 0;
#else
    sp.tile_in_page = p->S % p->entry->tile_tokens == 0;
#endif
    sp.row_elems = p->Hk * p->D;
    sp.page_elems = (int64_t)p->S * p->Hk * p->D;
    sp.chunk_tokens = p->info.chunk_tokens;
    sp.scale_log2 = p->scale_log2;
    sp.use_pdl = p->info.merge;
#ifdef KVF_MUTANT_INT32_OFFSET
    sp.pool_elems = p->num_pages * sp.page_elems;
    if (sp.pool_elems == 0) sp.pool_elems = 1; // no page is read then; keeps the modulo defined
#endif
#ifdef KVF_MUTANT_EXTRA_PAGE
    sp.n_entries = p->n_entries;
#endif
    void *args[] = {&sp};
#if defined(KVF_MUTANT_GROUP_POW2) || defined(KVF_MUTANT_HEAD_MODULO)
    const unsigned grid_y = (unsigned)p->Hq; // one CTA per q head
#else
    const unsigned grid_y = (unsigned)p->Hk;
#endif
    KVF_CUDA_TRY(cudaLaunchKernel(p->entry->fn, dim3((unsigned)p->n_items, grid_y),
                                  dim3(kThreads), args, (size_t)p->entry->smem_bytes, st),
                 "Launching the split-KV kernel");
    KVF_CUDA_TRY(cudaGetLastError(), "Launching the split-KV kernel");
    if (!p->info.merge) return 0;
    MergeParams mp;
    mp.ws_acc = sp.ws_acc, mp.ws_ml = sp.ws_ml, mp.seq_first = sp.seq_first;
    mp.o = t->o, mp.lse = t->lse, mp.num_qo_heads = p->Hq;
#ifdef KVF_MUTANT_STALE_SCRATCH
    mp.max_splits = p->info.max_splits;
#endif
    const dim3 grid((unsigned)p->Hq, (unsigned)p->B);
#ifdef KVF_CUDA_MUTANT_TU
    cudaError_t e = launch_merge<128>(mp, grid, st); // head_dim 128 only (check_shape)
#else
    cudaError_t e = p->D == 64    ? launch_merge<64>(mp, grid, st)
                    : p->D == 128 ? launch_merge<128>(mp, grid, st)
                                  : launch_merge<256>(mp, grid, st);
#endif
    if (e != cudaSuccess) return kvf__cuda_fail(err, e, "Launching the split-KV merge kernel");
    KVF_CUDA_TRY(cudaGetLastError(), "Launching the split-KV merge kernel");
    return 0;
}

KVF_CUDA_API int kvf_cuda_plan_launch(kvf_cuda_plan *p, const kvf_cuda_tensors *t, void *stream,
                                    kvf_error *err) {
    if (!p || !p->ready) return kvf_error_set(err, KVF_EINVAL, "The CUDA plan was not prepared.");
    if (p->B == 0) return 0;
    if (!t->q || !t->kv_indptr || !t->kv_last_page_len || !t->o || !t->lse)
        return kvf_error_set(err, KVF_EINVAL, "A device tensor pointer is NULL.");
    if (p->ws_bytes &&
        (!t->workspace || t->workspace_bytes < p->ws_bytes || ((uintptr_t)t->workspace & 255) != 0))
        return kvf_error_set(err, KVF_EINVAL,
                             "The plan needs a 256-byte aligned workspace of %zu bytes (%zu "
                             "given).",
                             p->ws_bytes, t->workspace ? t->workspace_bytes : (size_t)0);
    cudaStream_t st = (cudaStream_t)stream;
#ifdef KVF_CUDA_MUTANT_TU
    return launch_split(p, t, st, err); // mutants are variants of the split-KV kernel only
#else
    return p->algo == KVF_CUDA_ALGO_NAIVE ? launch_naive(p, t, st, err)
                                          : launch_split(p, t, st, err);
#endif
}

// ---------------------------------------------------------------------------------------------
// The plugin-ABI descriptor (include/kvfuzz/plugin.h) every variant registers with: kvfuzz's
// CUDA buffer host (host_cuda.cu) owns, poisons and checks the buffers, and these functions
// only plan and launch on what it hands over.

namespace {

// Maps a kvfuzz error from the plan API onto the ABI's status, with the sentence as message.
int plugin_status(int rc, const kvf_error *e, char *msg, size_t msg_size) {
    if (rc == 0) return KVF_PLUGIN_OK;
    if (msg && msg_size) snprintf(msg, msg_size, "%s", e->msg);
    return rc == KVF_EUNSUPPORTED ? KVF_PLUGIN_UNSUPPORTED
           : rc == KVF_ENOMEM     ? KVF_PLUGIN_NOMEM
                                  : KVF_PLUGIN_ERROR;
}

// A pure function of the shape (plugin.h): the limits check_shape() enforces, plus the sequence
// length, which prepare() would refuse.
int desc_supports(const kvf_plugin_kernel *self, const kvf_plugin_shape *shape, char *why,
                  size_t why_size) {
    (void)self;
    kvf_cuda_problem pr;
    memset(&pr, 0, sizeof pr);
    pr.num_qo_heads = shape->num_qo_heads, pr.num_kv_heads = shape->num_kv_heads;
    pr.head_dim = shape->head_dim, pr.page_size = shape->page_size;
    pr.batch_size = shape->batch_size, pr.num_pages = shape->num_pages;
    pr.sm_scale = shape->sm_scale;
    kvf_error e = {0, {0}};
    int rc = check_shape(&pr, &e);
    if (!rc && shape->max_seq_len > KVF_CUDA_MAX_SEQ_LEN)
        rc = kvf_error_set(&e, KVF_EUNSUPPORTED,
                           "A sequence of %lld tokens is above the CUDA kernels' maximum of 2^30.",
                           (long long)shape->max_seq_len);
    if (rc && why && why_size) snprintf(why, why_size, "%s", e.msg);
    return rc == 0;
}

int desc_create_algo(kvf_cuda_algo algo, void **state, char *msg, size_t msg_size) {
    *state = NULL;
    kvf_error e = {0, {0}};
    kvf_cuda_plan *p = NULL;
    const int rc = kvf_cuda_plan_create(&p, algo, &e);
    if (rc) return plugin_status(rc, &e, msg, msg_size);
    *state = p;
    return KVF_PLUGIN_OK;
}

int desc_create_split(const kvf_plugin_kernel *self, void **state, char *msg, size_t msg_size) {
    (void)self;
    return desc_create_algo(KVF_CUDA_ALGO_SPLITKV, state, msg, msg_size);
}

void desc_destroy(void *state) {
    kvf_cuda_plan_destroy((kvf_cuda_plan *)state);
}

int desc_plan(void *state, const kvf_plugin_shape *shape, const kvf_plugin_index *index, char *msg,
              size_t msg_size) {
    kvf_cuda_problem pr;
    pr.num_qo_heads = shape->num_qo_heads, pr.num_kv_heads = shape->num_kv_heads;
    pr.head_dim = shape->head_dim, pr.page_size = shape->page_size;
    pr.batch_size = shape->batch_size, pr.num_pages = shape->num_pages;
    pr.sm_scale = shape->sm_scale;
    pr.kv_indptr = index->kv_indptr, pr.kv_last_page_len = index->kv_last_page_len;
    kvf_error e = {0, {0}};
    return plugin_status(kvf_cuda_plan_prepare((kvf_cuda_plan *)state, &pr, &e), &e, msg, msg_size);
}

size_t desc_workspace_bytes(void *state, const kvf_plugin_shape *shape) {
    (void)shape;
    return kvf_cuda_plan_workspace_bytes((const kvf_cuda_plan *)state);
}

int desc_run(void *state, const kvf_plugin_args *a, char *msg, size_t msg_size) {
    const kvf_plugin_shape *s = a->shape;
    const int64_t D = s->head_dim, Hq = s->num_qo_heads, Hk = s->num_kv_heads;
    // The kernels index dense NHD tensors; any other layout is a shape they do not take.
    if (a->q_stride_head != D || a->q_stride_batch != Hq * D || a->o_stride_head != D ||
        a->o_stride_batch != Hq * D || a->lse_stride_batch != Hq || a->kv_stride_head != D ||
        a->kv_stride_slot != Hk * D || a->kv_stride_page != (int64_t)s->page_size * Hk * D) {
        if (msg && msg_size)
            snprintf(msg, msg_size, "The CUDA kernels take contiguous NHD tensors only.");
        return KVF_PLUGIN_UNSUPPORTED;
    }
    kvf_cuda_tensors t;
    t.q = a->q, t.k_cache = a->k_cache, t.v_cache = a->v_cache;
    t.kv_indptr = a->kv_indptr, t.kv_indices = a->kv_indices;
    t.kv_last_page_len = a->kv_last_page_len;
    t.o = a->o, t.lse = a->lse;
    t.workspace = a->workspace, t.workspace_bytes = a->workspace_bytes;
    kvf_error e = {0, {0}};
    return plugin_status(kvf_cuda_plan_launch((kvf_cuda_plan *)state, &t, a->stream, &e), &e, msg,
                         msg_size);
}

// "split=yes chunk=64 splits=51 ctas=204": what decides the kernel's work split.
void desc_describe(void *state, char *buf, size_t buf_size) {
    const kvf_cuda_plan *p = (const kvf_cuda_plan *)state;
    if (!buf || !buf_size) return;
    buf[0] = 0;
    if (!p || !p->ready) return;
    const kvf_cuda_plan_info *i = &p->info;
    if (i->chunk_tokens == 0)
        snprintf(buf, buf_size, "split=no ctas=%lld", (long long)i->ctas);
    else
        snprintf(buf, buf_size, "split=%s chunk=%d splits=%d ctas=%lld",
                 i->max_splits > 1 ? "yes" : "no", i->chunk_tokens, i->max_splits,
                 (long long)i->ctas);
}

#ifndef KVF_CUDA_MUTANT_TU
int desc_create_naive(const kvf_plugin_kernel *self, void **state, char *msg, size_t msg_size) {
    (void)self;
    return desc_create_algo(KVF_CUDA_ALGO_NAIVE, state, msg, msg_size);
}
#endif

} // namespace

// The descriptor of a split-KV variant (the production kernel, or a mutant's build of it).
// clang-format off
#define KVF_CUDA_SPLIT_DESC(NAME, DESCRIPTION, ROLE)                                               \
    {sizeof(kvf_plugin_kernel),                                                                    \
     NAME,                                                                                         \
     DESCRIPTION,                                                                                  \
     KVF_PLUGIN_DEVICE_CUDA,                                                                       \
     ROLE,                                                                                         \
     NULL,                                                                                         \
     desc_supports,                                                                                \
     desc_create_split,                                                                            \
     desc_destroy,                                                                                 \
     desc_plan,                                                                                    \
     desc_workspace_bytes,                                                                         \
     desc_run,                                                                                     \
     desc_describe}
// clang-format on
#ifndef KVF_CUDA_MUTANT_TU
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
#define KVF_CUDA_NAIVE_TEXT                                                                        \
    "CUDA naive decode: one block per (sequence, q head), whole sequence, no split"

static const kvf_plugin_kernel kDescCuda =
    KVF_CUDA_SPLIT_DESC(KVF_CUDA_NAME, KVF_CUDA_TEXT, KVF_PLUGIN_ROLE_REFERENCE);

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
                                                 desc_describe};

// The registry's entries: no case-level vtable, so they run through the buffer host like a
// plugin does (kernel.h).
// Fields: name, description, device, models, create, destroy, run, desc, role, plugin.
// clang-format off
extern "C" const kvf_kernel kvf_kernel_cuda = {
    KVF_CUDA_NAME, KVF_CUDA_TEXT, KVF_DEVICE_CUDA, NULL, NULL, NULL, NULL, &kDescCuda,
    KVF_PLUGIN_ROLE_REFERENCE, NULL,
};

extern "C" const kvf_kernel kvf_kernel_cuda_naive = {
    KVF_CUDA_NAIVE_NAME, KVF_CUDA_NAIVE_TEXT, KVF_DEVICE_CUDA, NULL, NULL, NULL, NULL,
    &kDescCudaNaive, KVF_PLUGIN_ROLE_REFERENCE, NULL,
};
// clang-format on
#endif // !KVF_CUDA_MUTANT_TU
