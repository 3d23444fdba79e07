// The split-KV path of a CUDA plan for one bug policy: choosing the kernel instance and its
// occupancy, preparing the plan (the pure host plan of split_plan.h, then the schedule's
// staging) and launching the split and merge kernels. Included by the production decode.cu
// (KVF_MUT_ACTIVE = KVF__MUT_NONE) and, inside a namespace of its own, by each CUDA mutant
// (cuda/mutants/decode_mutant.cu), which runs this code with its bug compiled in through the
// policy Bug<KVF_MUT_ACTIVE> and the constant KVF_MUT tests. Requires a table kvf_split_d128
// (and, for production, kvf_split_d64 and kvf_split_d256) of the policy's instances.
#include <cuda_runtime.h>

#include <atomic>
#include <stdlib.h>

#include "../mutants.h"
#include "cuda_error.cuh"
#include "decode.cuh"
#include "merge.cuh"
#include "plan.cuh"
#include "split_plan_types.h" // the production TU declares the functions (split_plan.h)

#ifndef KVF_MUT_ACTIVE
#error "define KVF_MUT_ACTIVE (a kvf__mut_id) before including split_launch.cuh"
#endif

using SplitBug = kvf::Bug<KVF_MUT_ACTIVE>; // the bug policy of this translation unit

// A mutant is built for head_dim 128 only, and for bf16 caches unless it is an FP8 mutant
// (kvf__cuda_check_shape): kAllDims is false there, so that neither the other tables nor the
// other merge instances are referenced (templates, so that the discarded branch is not even
// instantiated).
template <bool kAllDims> static const kvf::SplitEntry *split_entry_of(int D, int G, bool fp8) {
    if constexpr (kAllDims) {
        const kvf::SplitEntry *t = D == 64    ? (fp8 ? kvf_split_fp8_d64 : kvf_split_d64)
                                   : D == 128 ? (fp8 ? kvf_split_fp8_d128 : kvf_split_d128)
                                              : (fp8 ? kvf_split_fp8_d256 : kvf_split_d256);
        return &t[G - 1];
    } else {
        return &(fp8 ? kvf_split_fp8_d128 : kvf_split_d128)[G - 1];
    }
}
static const kvf::SplitEntry *split_entry(int D, int G, bool fp8) {
    return split_entry_of<!KVF_MUT_ANY>(D, G, fp8);
}

// Per-instance one-time setup (dynamic shared memory above 48 KB) and occupancy, cached.
static std::atomic<int> g_split_occ[2][3][16];

static int split_occupancy(int D, int G, bool fp8, kvf_error *err) {
    const int di = D == 64 ? 0 : D == 128 ? 1 : 2;
    int occ = g_split_occ[fp8][di][G - 1].load();
    if (occ > 0) return occ;
    const kvf::SplitEntry *e = split_entry(D, G, fp8);
    KVF_CUDA_TRY(
        cudaFuncSetAttribute(e->fn, cudaFuncAttributeMaxDynamicSharedMemorySize, e->smem_bytes),
        "setting the split kernel's shared-memory size");
    KVF_CUDA_TRY(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, e->fn, kvf::kThreads, e->smem_bytes),
        "querying the split kernel's occupancy");
    if (occ < 1)
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "The split kernel for head_dim %d and group %d does not fit on this "
                             "device (%d bytes of shared memory).",
                             D, G, e->smem_bytes);
    g_split_occ[fp8][di][G - 1].store(occ);
    return occ;
}

// Prepares the split-KV plan of a problem kvf__cuda_check_problem() accepted.
static int split_prepare(kvf_cuda_plan *p, const kvf_cuda_problem *pr, kvf_error *err) {
    kvf__cuda_plan_set_problem(p, pr, kvf__cuda_scale_log2(pr->sm_scale));
    const int G = kvf__cuda_split_group(pr);
    const bool fp8 = pr->k_dtype != 0;
    p->entry = split_entry(p->D, G, fp8);
    const int occ = split_occupancy(p->D, G, fp8, err);
    if (occ < 0) return occ;
    kvf__cuda_split_device dev;
    dev.num_sms = p->num_sms, dev.ctas_per_sm = occ, dev.tile_tokens = p->entry->tile_tokens;
    // KVF_CUDA_CHUNK_TILES forces the chunk size (experiments, and tests that want many
    // split boundaries); not for production use.
    const char *force = getenv("KVF_CUDA_CHUNK_TILES");
    dev.force_chunk_tiles = force && atoi(force) > 0 ? atoi(force) : 0;
    kvf__cuda_split_plan sp;
    int rc = kvf__cuda_split_build(pr, &dev, &sp, err);
    if (rc) return rc;
    rc = kvf__cuda_sched_stage(&p->sched, sp.sched, sp.sched_len, err);
    kvf__cuda_split_free(&sp);
    if (rc) return rc;
    p->ws_acc_bytes = sp.ws_acc_bytes, p->ws_ml_at = sp.ws_ml_at, p->ws_bytes = sp.ws_bytes;
    p->n_items = sp.n_items;
    p->items_at = sp.items_at;
    p->form = sp.form;
    p->info = sp.info;
    p->ready = 1;
    return 0;
}

using SplitArgs = kvf::ParamsFor<SplitBug, kvf::SplitParams, kvf::SplitParamsMut>;
using MergeArgs = kvf::ParamsFor<SplitBug, kvf::MergeParams, kvf::MergeParamsMut>;

// The fields only a mutant's kernels take (decode.cuh: SplitParamsMut, MergeParamsMut).
static inline void set_mutant_fields(kvf::SplitParams &, const kvf_cuda_plan *) {}
static inline void set_mutant_fields(kvf::SplitParamsMut &sp, const kvf_cuda_plan *p) {
    // B10's pool bound; 1 when no page is read, which keeps its modulo defined.
    sp.pool_elems = p->num_pages * sp.page_elems > 0 ? p->num_pages * sp.page_elems : 1;
    sp.n_entries = p->n_entries; // B15's table bound
}
static inline void set_mutant_fields(kvf::MergeParams &, const kvf_cuda_plan *) {}
static inline void set_mutant_fields(kvf::MergeParamsMut &mp, const kvf_cuda_plan *p) {
    mp.max_splits = p->info.max_splits; // B17
}

// A warp per (q head, sequence) when the splits are few and the rows many, else a block each
// (merge.cuh). Measured on an H200 (docs/performance.md, "A warp per row of few splits"): with
// 640 rows of 2 splits the warps took 2.6 us less; with 20 rows of 8 splits a block per row
// was 0.4 us faster, its loads spread over 20 SMs instead of 3; at 160 rows the two were even.
template <int D>
static cudaError_t launch_merge(const MergeArgs &mp, int max_splits, int num_sms, cudaStream_t st) {
    const int64_t rows = (int64_t)mp.num_qo_heads * mp.batch, per_block = kvf::kMergeThreads / 32;
    const bool warp_rows = max_splits <= kvf::kMergeWarpSplits && rows >= 2 * (int64_t)num_sms;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = warp_rows ? dim3((unsigned)((rows + per_block - 1) / per_block))
                            : dim3((unsigned)mp.num_qo_heads, (unsigned)mp.batch);
    cfg.blockDim = dim3(kvf::kMergeThreads);
    cfg.stream = st;
    // Programmatic dependent launch: the merge grid is scheduled while the split grid drains
    // and blocks in griddepcontrol.wait, hiding one launch latency (the seed workload is a
    // few microseconds in total).
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    return warp_rows ? cudaLaunchKernelEx(&cfg, kvf::merge_warp_kernel<D, SplitBug>, mp)
                     : cudaLaunchKernelEx(&cfg, kvf::merge_kernel<D, SplitBug>, mp);
}

template <bool kAllDims>
static cudaError_t launch_merge_for(int D, const MergeArgs &mp, int max_splits, int num_sms,
                                    cudaStream_t st) {
    if constexpr (kAllDims)
        return D == 64    ? launch_merge<64>(mp, max_splits, num_sms, st)
               : D == 128 ? launch_merge<128>(mp, max_splits, num_sms, st)
                          : launch_merge<256>(mp, max_splits, num_sms, st);
    else
        return launch_merge<128>(mp, max_splits, num_sms, st);
}

// Enqueues the split kernel and, when a sequence has more than one split, the merge kernel.
// Preconditions were checked by prepare() and kvf__cuda_plan_check_launch(): here only launch
// errors.
static int split_launch(kvf_cuda_plan *p, const kvf_cuda_tensors *t, cudaStream_t st,
                        kvf_error *err) {
    const int rc = kvf__cuda_sched_ready_on(&p->sched, st, err);
    if (rc) return rc;
    SplitArgs sp;
    sp.q = t->q, sp.k = t->k_cache, sp.v = t->v_cache;
    sp.kv_indptr = t->kv_indptr, sp.kv_indices = t->kv_indices;
    sp.kv_last_len = t->kv_last_page_len;
    sp.seq_first = (const int32_t *)p->sched.dev;
    sp.items = (const int4 *)(sp.seq_first + p->items_at);
    sp.o = t->o, sp.lse = t->lse;
    sp.ws_acc = (float *)t->workspace;
    sp.ws_ml = p->ws_bytes ? (float2 *)((char *)t->workspace + p->ws_ml_at) : NULL;
    sp.num_qo_heads = p->Hq, sp.num_kv_heads = p->Hk, sp.page_size = p->S;
    sp.page_shift = (p->S & (p->S - 1)) == 0 ? __builtin_ctz((unsigned)p->S) : -1;
    // B09's chunks start mid-tile, so one page id per tile would read across page ends: the
    // per-row page lookup keeps that mutant's only bug the chunk/tile mismatch.
    sp.tile_in_page = !KVF_MUT(CHUNK_NOT_TILE_MULTIPLE) && p->S % p->entry->tile_tokens == 0;
    sp.row_elems = p->Hk * p->D;
    sp.page_elems = (int64_t)p->S * p->Hk * p->D;
    sp.chunk_tokens = p->info.chunk_tokens;
    sp.form_splits = p->form.splits, sp.form_pages = p->form.pages, sp.form_len = p->form.len;
    sp.form_single = p->form.single;
    sp.scale_log2 = p->scale_log2;
    sp.use_pdl = p->info.merge;
    // FP8 caches (decode.cuh, SplitParams): the scales' mode and the formats.
    sp.k_scale = t->k_scale, sp.v_scale = t->v_scale;
    sp.scale_mode = p->scale_gran == 0 ? 0 : p->scale_gran == 3 ? 2 : 1;
    sp.scale_head_stride = p->scale_gran == 2 ? 1 : 0;
    sp.k_e5m2 = p->k_dtype == 2, sp.v_e5m2 = p->v_dtype == 2;
    // The FP8 scores in f16 where q allows (decode.cuh, "The scores in f16"): the same bits as
    // in bf16, which KVF_CUDA_FP8_BF16_SCORES=1 forces (docs/cli.md) to show it.
    const char *bf16_scores = getenv("KVF_CUDA_FP8_BF16_SCORES");
    sp.f16_scores = !(bf16_scores && *bf16_scores && strcmp(bf16_scores, "0") != 0);
    set_mutant_fields(sp, p);
    void *args[] = {&sp};
    // One CTA per item and kv head, or per q head for the mutants that map heads their own way,
    // item-major (decode.cuh); the plan keeps the product below 2^31.
    const unsigned heads = kvf::head_per_cta<SplitBug>() ? (unsigned)p->Hq : (unsigned)p->Hk;
    KVF_CUDA_TRY(cudaLaunchKernel(p->entry->fn, dim3((unsigned)p->n_items * heads),
                                  dim3(kvf::kThreads), args, (size_t)p->entry->smem_bytes, st),
                 "Launching the split-KV kernel");
    KVF_CUDA_TRY(cudaGetLastError(), "Launching the split-KV kernel");
    if (!p->info.merge) return 0;
    MergeArgs mp;
    mp.ws_acc = sp.ws_acc, mp.ws_ml = sp.ws_ml, mp.seq_first = sp.seq_first;
    mp.o = t->o, mp.lse = t->lse, mp.num_qo_heads = p->Hq, mp.batch = p->B;
    // A CTA-wide value scale multiplies the merged o (per-token ones are in the partials).
    mp.v_scale = sp.scale_mode == 1 && !KVF_MUT(V_SCALE_IGNORED) && !KVF_MUT(V_SCALE_FP16_WEIGHTS)
                     ? t->v_scale
                     : NULL;
    mp.vs_group = p->scale_gran == 2 ? p->Hq / p->Hk : 0;
    set_mutant_fields(mp, p);
    const cudaError_t e =
        launch_merge_for<!KVF_MUT_ANY>(p->D, mp, p->info.max_splits, p->num_sms, st);
    if (e != cudaSuccess) return kvf__cuda_fail(err, e, "Launching the split-KV merge kernel");
    KVF_CUDA_TRY(cudaGetLastError(), "Launching the split-KV merge kernel");
    return 0;
}
