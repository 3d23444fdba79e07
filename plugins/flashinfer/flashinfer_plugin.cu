/* kvfuzz plugin for FlashInfer's CUDA-core paged decode (BatchDecodeWithPagedKVCache).
 *
 * Three kernels share one FlashInfer instantiation:
 *   flashinfer          FlashInfer's own scheduler: DecodePlan with its work estimation, which
 *                       splits long sequences into KV chunks when the batch alone would leave
 *                       the GPU idle, then merges the chunks' partial states;
 *   flashinfer-nosplit  the same plan with the split turned off, one CTA per (sequence, KV head);
 *   flashinfer-graph    the plan FlashInfer makes for CUDA graphs (enable_cuda_graph, as its
 *                       wrapper's use_cuda_graph=True does): a grid fixed by the batch size and
 *                       the device, the work items a launch skips marked in block_valid_mask.
 *                       It promises the graph-replay relation (docs/invariance.md).
 *
 * Nothing of FlashInfer lives in this repository: the headers come from the checkout named by
 * -DKVF_FLASHINFER_DIR. Element types are bf16 for q and o, bf16, e4m3 or e5m2 for K/V (one
 * DTypeKV for both caches), int32 indices, no positional encoding, no window, no soft cap: the
 * configurations FlashInfer's JIT builds for a plain decode. FP8 caches take one f32 scale
 * each (or none), applied as FlashInfer's Python wrapper applies them: k_scale folded into
 * sm_scale before the launch, o multiplied by v_scale in f32 and rounded to bf16 again after
 * it (docs/flashinfer.md, "FP8 caches"). */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

/* FlashInfer's group dispatch stops at 1, 2, 3, 4 and 8. Groups 5 and 6 (the seed workload is
 * Hq 20 / Hk 4) need nothing but another instantiation, so the macro is redefined here, after
 * utils.cuh has defined it and before decode.cuh expands it; FlashInfer's files stay as they
 * are. */
#include <flashinfer/utils.cuh>
#undef DISPATCH_GQA_GROUP_SIZE
#define KVF_FI_GROUP_CASE(N, GROUP_SIZE, ...)                                                      \
    if (kvf_fi_group == N) {                                                                       \
        constexpr size_t GROUP_SIZE = N;                                                           \
        __VA_ARGS__                                                                                \
    } else
#define DISPATCH_GQA_GROUP_SIZE(group_size, GROUP_SIZE, ...)                                       \
    {                                                                                              \
        const uint32_t kvf_fi_group = (group_size);                                                \
        KVF_FI_GROUP_CASE(1, GROUP_SIZE, __VA_ARGS__)                                              \
        KVF_FI_GROUP_CASE(2, GROUP_SIZE, __VA_ARGS__)                                              \
        KVF_FI_GROUP_CASE(3, GROUP_SIZE, __VA_ARGS__)                                              \
        KVF_FI_GROUP_CASE(4, GROUP_SIZE, __VA_ARGS__)                                              \
        KVF_FI_GROUP_CASE(5, GROUP_SIZE, __VA_ARGS__)                                              \
        KVF_FI_GROUP_CASE(6, GROUP_SIZE, __VA_ARGS__)                                              \
        KVF_FI_GROUP_CASE(8, GROUP_SIZE, __VA_ARGS__) {                                            \
            std::ostringstream err_msg;                                                            \
            err_msg << "Unsupported group_size: " << kvf_fi_group;                                 \
            FLASHINFER_ERROR(err_msg.str());                                                       \
        }                                                                                          \
    }

#include <flashinfer/attention/decode.cuh>
#include <flashinfer/attention/default_decode_params.cuh>
#include <flashinfer/attention/scheduler.cuh>
#include <flashinfer/attention/variants.cuh>

#include "kvfuzz/plugin.h"

namespace fi = flashinfer;

namespace {

using DType = nv_bfloat16;
using IdType = int32_t;
/* DTypeKV is nv_bfloat16, __nv_fp8_e4m3 or __nv_fp8_e5m2; q and o stay bf16. The kernel's
 * configuration (vector width, tile, shared memory) and so the work estimation's occupancy
 * grid depend on sizeof(DTypeKV). */
template <typename DTypeKV> using Params = fi::BatchDecodeParams<DType, DTypeKV, DType, IdType>;
using Variant = fi::DefaultAttention</*custom_mask=*/false, /*sliding_window=*/false,
                                     /*soft_cap=*/false, /*alibi=*/false>;
constexpr fi::PosEncodingMode kPos = fi::PosEncodingMode::kNone;

/* The plan's int workspace holds request indices, tile indices, o_indptr (padded batch + 1
 * each), the chunk size and a byte mask, each 16-byte aligned; the padded batch never exceeds
 * one entry per page plus one per empty sequence, or, planned for CUDA graphs, the grid
 * (resident blocks per SM, at most 32, times the SMs: graph_grid). */
size_t int_workspace_bound(const kvf_plugin_shape *s, size_t graph_grid) {
    size_t n = (size_t)s->num_entries + (size_t)s->batch_size + 1;
    if (graph_grid > n) n = graph_grid;
    return 3 * (n + 1) * sizeof(IdType) + n + 8 * 16;
}

size_t align_up(size_t x, size_t a) {
    return (x + a - 1) / a * a;
}

/* Which kernel a state runs: kvf_plugin_kernel.user points at one of these. */
int nosplit_tag, graph_tag;

/* The shape's cache dtypes and scale granularity (kvf_plugin_shape codes: 0 bf16, 1 e4m3, 2
 * e5m2; 0 none, 1 tensor), read only where the shape's struct_size covers them: a shape
 * built without them has bf16 caches and no scales. */
struct KvTypes {
    int k, v, granularity;
};

KvTypes kv_types(const kvf_plugin_shape *s) {
    if (s->struct_size < offsetof(kvf_plugin_shape, scale_granularity) + sizeof(int32_t))
        return {0, 0, 0};
    return {s->k_dtype, s->v_dtype, s->scale_granularity};
}

const char *kv_name(int dtype) {
    return dtype == 0 ? "bf16" : dtype == 1 ? "e4m3" : dtype == 2 ? "e5m2" : "unknown";
}

struct State {
    bool nosplit;
    bool graph; /* planned with enable_cuda_graph */
    int cc_major;
    int num_sms;
    cudaStream_t plan_stream;
    /* Pinned: run() reads the case's k_scale into it (FP8 caches with a tensor scale). */
    float *k_scale_host;
    /* Pinned staging that DecodePlan fills; run() copies it into kvfuzz's workspace. */
    void *staging;
    size_t staging_bytes;
    /* DecodePlan ends with its own copy into the device int buffer it is given. kvfuzz's
     * workspace does not exist at plan time (and is re-poisoned before run), so that copy
     * lands in this private scratch, which nothing reads. */
    void *plan_dev;
    size_t plan_dev_bytes;
    /* The staging must not be refilled while run()'s copy out of it may still be pending. */
    cudaEvent_t staged;
    bool staged_pending;

    bool planned;
    kvf_plugin_shape shape;
    int kv_dtype;   /* of both caches: 0 bf16, 1 e4m3, 2 e5m2 */
    bool kv_scaled; /* FP8 with tensor scales */
    fi::DecodePlanInfo info;
    size_t float_bytes; /* tmp_v and tmp_s, at the start of the workspace */
    size_t int_offset;  /* where the int section starts in the workspace */
    size_t int_bytes;   /* what DecodePlan staged */
    uint32_t chunk_tokens;
    uint32_t max_grid;
};

void say(char *msg, size_t size, const char *fmt, ...) {
    if (!msg || size == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, size, fmt, ap);
    va_end(ap);
}

int cuda_fail(char *msg, size_t size, const char *what, cudaError_t e) {
    say(msg, size, "%s: %s", what, cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? KVF_PLUGIN_NOMEM : KVF_PLUGIN_ERROR;
}

bool head_dim_ok(int d) {
    return d == 64 || d == 128 || d == 256;
}

bool group_ok(int g) {
    return (g >= 1 && g <= 6) || g == 8;
}

/* The layouts FlashInfer's decode takes (a shape with every stride 0 is dense): o and lse
 * written densely by the kernel and its merge, q and page strides within the 32-bit fields
 * its params keep them in. run() refuses the same layouts, for a caller that skips this. */
static int layout_ok(const kvf_plugin_shape *s, char *why, size_t why_size) {
    const int64_t hq = s->num_qo_heads, d = s->head_dim;
    const bool dense = !s->q_stride_batch && !s->q_stride_head && !s->kv_stride_page &&
                       !s->kv_stride_slot && !s->kv_stride_head && !s->o_stride_batch &&
                       !s->o_stride_head && !s->lse_stride_batch;
    if (dense) return 1;
    if (s->o_stride_head != d || s->o_stride_batch != hq * d || s->lse_stride_batch != hq) {
        say(why, why_size,
            "FlashInfer writes o and lse densely; this layout pads them (o %lld/%lld, lse %lld)",
            (long long)s->o_stride_batch, (long long)s->o_stride_head,
            (long long)s->lse_stride_batch);
        return 0;
    }
    if (s->q_stride_batch > INT32_MAX || s->q_stride_head > INT32_MAX ||
        s->kv_stride_page > UINT32_MAX || s->kv_stride_slot > UINT32_MAX ||
        s->kv_stride_head > UINT32_MAX) {
        say(why, why_size, "a stride of this layout exceeds FlashInfer's 32-bit stride fields");
        return 0;
    }
    return 1;
}

/* The cache dtypes and scales FlashInfer's decode takes: one DTypeKV for both caches (bf16,
 * e4m3 or e5m2) and, for FP8, one scale per cache or none. The graph kernel reads bf16 only:
 * applying a tensor scale needs a synchronous read of k_scale, which a capture cannot hold. */
int kv_ok(bool graph, const kvf_plugin_shape *s, char *why, size_t why_size) {
    const KvTypes t = kv_types(s);
    if (t.k < 0 || t.k > 2 || t.v < 0 || t.v > 2) {
        say(why, why_size, "cache dtype %d/%d is not one of bf16, e4m3 and e5m2", t.k, t.v);
        return 0;
    }
    if ((t.k == 0) != (t.v == 0)) {
        say(why, why_size,
            "K in %s beside V in %s: FlashInfer's decode reads both caches as one DTypeKV",
            kv_name(t.k), kv_name(t.v));
        return 0;
    }
    if (t.k != t.v) {
        say(why, why_size,
            "K in %s and V in %s: FlashInfer's decode reads both caches as one DTypeKV",
            kv_name(t.k), kv_name(t.v));
        return 0;
    }
    if (t.k == 0 && t.granularity != 0) {
        say(why, why_size, "scales on bf16 caches are not a case FlashInfer's decode takes");
        return 0;
    }
    if (t.granularity != 0 && t.granularity != 1) {
        say(why, why_size,
            "scale granularity %d: FlashInfer's decode takes one float scale per cache or none",
            t.granularity);
        return 0;
    }
    if (graph && t.k != 0) {
        say(why, why_size,
            "flashinfer-graph reads bf16 caches only (a synchronous read of k_scale cannot be "
            "captured in a graph)");
        return 0;
    }
    return 1;
}

int supports_shape(bool graph, const kvf_plugin_shape *s, char *why, size_t why_size) {
    if (!head_dim_ok(s->head_dim)) {
        say(why, why_size, "head dim %d is not instantiated (64, 128 and 256 are)", s->head_dim);
        return 0;
    }
    if (s->num_kv_heads <= 0 || s->num_qo_heads % s->num_kv_heads != 0) {
        say(why, why_size, "Hq %d is not a multiple of Hk %d", s->num_qo_heads, s->num_kv_heads);
        return 0;
    }
    const int group = s->num_qo_heads / s->num_kv_heads;
    if (!group_ok(group)) {
        say(why, why_size, "group size %d is not dispatched (1, 2, 3, 4, 5, 6 and 8 are)", group);
        return 0;
    }
    if (s->num_kv_heads > 65535) {
        say(why, why_size, "Hk %d exceeds the grid's y limit", s->num_kv_heads);
        return 0;
    }
    if (s->page_size < 1) {
        say(why, why_size, "page size %d is not positive", s->page_size);
        return 0;
    }
    /* FlashInfer keeps page strides in uint32 and flat token positions
     * (kv_indptr[b] * page_size + offset) in uint32, and q strides in the int32 index type. */
    const int64_t page_elems = (int64_t)s->page_size * s->num_kv_heads * s->head_dim;
    if (page_elems > INT32_MAX) {
        say(why, why_size, "a page of %lld elements overflows FlashInfer's 32-bit page stride",
            (long long)page_elems);
        return 0;
    }
    if ((s->num_entries + 1) * (int64_t)s->page_size > INT32_MAX) {
        say(why, why_size,
            "%lld page-table entries of %d slots overflow FlashInfer's 32-bit token positions",
            (long long)s->num_entries, s->page_size);
        return 0;
    }
    if ((int64_t)s->batch_size * s->num_qo_heads * s->head_dim > INT32_MAX) {
        say(why, why_size, "q of batch %d overflows FlashInfer's 32-bit q strides", s->batch_size);
        return 0;
    }
    if (!kv_ok(graph, s, why, why_size)) return 0;
    return layout_ok(s, why, why_size);
}

int fi_supports(const kvf_plugin_kernel *self, const kvf_plugin_shape *s, char *why,
                size_t why_size) {
    return supports_shape(self && self->user == &graph_tag, s, why, why_size);
}

int fi_create(const kvf_plugin_kernel *self, void **out, char *msg, size_t msg_size) {
    State *st = new (std::nothrow) State();
    if (!st) {
        say(msg, msg_size, "out of host memory for the plugin state");
        return KVF_PLUGIN_NOMEM;
    }
    st->nosplit = self->user == &nosplit_tag;
    st->graph = self->user == &graph_tag;
    int dev = 0, major = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&st->num_sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&st->plan_stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&st->staged, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaHostAlloc(reinterpret_cast<void **>(&st->k_scale_host), sizeof(float),
                          cudaHostAllocDefault);
    if (e != cudaSuccess) {
        delete st;
        return cuda_fail(msg, msg_size, "flashinfer plugin: CUDA setup failed", e);
    }
    st->cc_major = major;
    *out = st;
    return KVF_PLUGIN_OK;
}

void fi_destroy(void *p) {
    State *st = static_cast<State *>(p);
    if (!st) return;
    if (st->staged_pending) cudaEventSynchronize(st->staged);
    cudaFreeHost(st->staging);
    cudaFree(st->plan_dev);
    cudaFreeHost(st->k_scale_host);
    cudaEventDestroy(st->staged);
    cudaStreamDestroy(st->plan_stream);
    delete st;
}

template <typename DTypeKV, uint32_t GROUP, uint32_t HEAD_DIM>
cudaError_t plan_one(State *st, IdType *indptr, size_t int_ws) {
    const kvf_plugin_shape &s = st->shape;
    auto estimate = [st](bool &split_kv, uint32_t &max_grid_size, uint32_t &pages_per_chunk,
                         uint32_t &new_batch_size, uint32_t &gdy, uint32_t batch_size,
                         IdType *kv_indptr_h, uint32_t num_qo_heads, uint32_t page_size,
                         bool enable_cuda_graph, cudaStream_t stream) {
        cudaError_t e =
            fi::BatchDecodeWithPagedKVCacheWorkEstimationDispatched<GROUP, HEAD_DIM, kPos, Variant,
                                                                    Params<DTypeKV>>(
                split_kv, max_grid_size, pages_per_chunk, new_batch_size, gdy, batch_size,
                kv_indptr_h, num_qo_heads, page_size, enable_cuda_graph, stream);
        if (e == cudaSuccess && st->nosplit && split_kv) {
            /* What FlashInfer's estimation itself answers when the batch fills the GPU: one
             * chunk as long as the longest sequence, no partials to merge. */
            split_kv = false;
            pages_per_chunk = 1;
            for (uint32_t b = 0; b < batch_size; ++b)
                pages_per_chunk =
                    std::max<uint32_t>(pages_per_chunk, kv_indptr_h[b + 1] - kv_indptr_h[b]);
            new_batch_size = batch_size;
        }
        if (e == cudaSuccess) st->max_grid = max_grid_size;
        return e;
    };
    /* Only offsets come out of the float allocator, so it gets a stand-in base (page aligned,
     * non-null: the allocator treats a null result as overflow) and unbounded room; nothing
     * dereferences it. */
    void *const float_base = reinterpret_cast<void *>(uintptr_t{1} << 20);
    return fi::DecodePlan<HEAD_DIM, kPos, Variant, Params<DTypeKV>>(
        float_base, SIZE_MAX / 4, st->plan_dev, st->staging, int_ws, st->info, indptr,
        (uint32_t)s.batch_size, (uint32_t)s.num_qo_heads, (uint32_t)s.page_size,
        /*enable_cuda_graph=*/st->graph, st->plan_stream, estimate);
}

template <typename DTypeKV, uint32_t HEAD_DIM>
cudaError_t plan_dim(State *st, IdType *indptr, size_t int_ws) {
    cudaError_t e = cudaErrorInvalidValue;
    DISPATCH_GQA_GROUP_SIZE(st->shape.num_qo_heads / st->shape.num_kv_heads, GROUP,
                            { e = plan_one<DTypeKV, GROUP, HEAD_DIM>(st, indptr, int_ws); });
    return e;
}

template <typename DTypeKV> cudaError_t plan_kv(State *st, IdType *indptr, size_t int_ws) {
    switch (st->shape.head_dim) {
    case 64:
        return plan_dim<DTypeKV, 64>(st, indptr, int_ws);
    case 128:
        return plan_dim<DTypeKV, 128>(st, indptr, int_ws);
    case 256:
        return plan_dim<DTypeKV, 256>(st, indptr, int_ws);
    }
    return cudaErrorInvalidValue;
}

int grow(void **buf, size_t *have, size_t need, bool pinned) {
    if (*have >= need) return 0;
    if (pinned)
        cudaFreeHost(*buf);
    else
        cudaFree(*buf);
    *buf = nullptr;
    *have = 0;
    need = align_up(need * 2, 4096);
    cudaError_t e = pinned ? cudaHostAlloc(buf, need, cudaHostAllocDefault) : cudaMalloc(buf, need);
    if (e != cudaSuccess) {
        *buf = nullptr;
        return -1;
    }
    *have = need;
    return 0;
}

int fi_plan(void *p, const kvf_plugin_shape *s, const kvf_plugin_index *index, char *msg,
            size_t msg_size) {
    State *st = static_cast<State *>(p);
    st->planned = false;
    if (!supports_shape(st->graph, s, msg, msg_size)) return KVF_PLUGIN_UNSUPPORTED;
    st->shape = *s;
    st->shape.struct_size = sizeof(kvf_plugin_shape);
    const KvTypes kv = kv_types(s);
    st->shape.k_dtype = kv.k;
    st->shape.v_dtype = kv.v;
    st->shape.scale_granularity = kv.granularity;
    st->kv_dtype = kv.k; /* supports_shape: the same for V */
    st->kv_scaled = kv.granularity == 1;
    st->info = fi::DecodePlanInfo();
    st->float_bytes = st->int_offset = st->int_bytes = 0;
    st->chunk_tokens = 0;
    if (s->batch_size == 0) {
        st->planned = true; /* nothing to launch */
        return KVF_PLUGIN_OK;
    }
    if (st->staged_pending) {
        cudaError_t e = cudaEventSynchronize(st->staged);
        st->staged_pending = false;
        if (e != cudaSuccess)
            return cuda_fail(msg, msg_size, "flashinfer plan: waiting for the last staging", e);
    }
    const size_t int_ws = int_workspace_bound(s, st->graph ? (size_t)st->num_sms * 32 : 0);
    if (grow(&st->staging, &st->staging_bytes, int_ws, true) ||
        grow(&st->plan_dev, &st->plan_dev_bytes, int_ws, false)) {
        say(msg, msg_size, "flashinfer plan: no memory for %zu bytes of plan staging", int_ws);
        return KVF_PLUGIN_NOMEM;
    }
    /* DecodePlan takes a mutable indptr but only reads it. */
    IdType *indptr = const_cast<IdType *>(index->kv_indptr);
    cudaError_t e = cudaErrorInvalidValue;
    try {
        switch (st->kv_dtype) {
        case 0:
            e = plan_kv<nv_bfloat16>(st, indptr, int_ws);
            break;
        case 1:
            e = plan_kv<__nv_fp8_e4m3>(st, indptr, int_ws);
            break;
        case 2:
            e = plan_kv<__nv_fp8_e5m2>(st, indptr, int_ws);
            break;
        }
        if (e == cudaSuccess) e = cudaStreamSynchronize(st->plan_stream);
    } catch (const std::exception &ex) {
        say(msg, msg_size, "flashinfer plan: %s", ex.what());
        return KVF_PLUGIN_ERROR;
    }
    if (e != cudaSuccess) return cuda_fail(msg, msg_size, "flashinfer plan: DecodePlan failed", e);

    const fi::DecodePlanInfo &in = st->info;
    const size_t pbs = (size_t)in.padded_batch_size;
    if (in.split_kv) {
        /* tmp_s is the float allocator's last block, the valid-block mask the int one's. */
        st->float_bytes = (size_t)in.s_offset + (size_t)s->num_qo_heads * pbs * sizeof(float);
        st->int_bytes = (size_t)in.block_valid_mask_offset + pbs * sizeof(bool);
    } else {
        st->int_bytes = (size_t)in.kv_chunk_size_ptr_offset + sizeof(IdType);
    }
    st->int_offset = align_up(st->float_bytes, 256);
    memcpy(&st->chunk_tokens, static_cast<char *>(st->staging) + in.kv_chunk_size_ptr_offset,
           sizeof(uint32_t));
    st->planned = true;
    return KVF_PLUGIN_OK;
}

size_t fi_workspace_bytes(void *p, const kvf_plugin_shape *) {
    State *st = static_cast<State *>(p);
    return st->planned ? st->int_offset + st->int_bytes : 0;
}

/* o[i] = bf16_rn(f32(o[i]) * v_scale): what FlashInfer's Python wrapper does after the kernel
 * for a bf16 output (`out *= v_scale`, a torch multiply by a Python float, computed in f32 and
 * rounded back to bf16), and nothing when v_scale is 1 (the wrapper skips a scale of 1.0). The
 * multiply is written out as mul.rn.f32 so that -use_fast_math neither flushes it nor fuses
 * it: torch's kernel is IEEE. */
__global__ void scale_o_kernel(nv_bfloat16 *__restrict__ o, size_t n,
                               const float *__restrict__ v_scale) {
    const float vs = *v_scale;
    if (vs == 1.0f) return;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float x = __bfloat162float(o[i]);
        float y;
        asm("mul.rn.f32 %0, %1, %2;" : "=f"(y) : "f"(x), "f"(vs));
        o[i] = __float2bfloat16_rn(y);
    }
}

cudaError_t scale_o(nv_bfloat16 *o, size_t n, const float *v_scale, cudaStream_t stream) {
    const unsigned threads = 256;
    const size_t blocks = std::min<size_t>((n + threads - 1) / threads, 4096);
    scale_o_kernel<<<(unsigned)blocks, threads, 0, stream>>>(o, n, v_scale);
    return cudaGetLastError();
}

/* FlashInfer's decode for one DTypeKV on kvfuzz's buffers, with the plan's indices at int_buf. */
template <typename DTypeKV>
cudaError_t launch(const State *st, const kvf_plugin_args *a, char *ws, char *int_buf,
                   float sm_scale, cudaStream_t stream) {
    const kvf_plugin_shape &s = st->shape;
    const int64_t kv_strides[3] = {a->kv_stride_page, a->kv_stride_slot, a->kv_stride_head};
    /* An FP8 cache's bytes come at the bf16 caches' pointer fields, one byte per element at the
     * same element strides. */
    fi::paged_kv_t<DTypeKV, IdType> paged_kv(
        (uint32_t)s.num_kv_heads, (uint32_t)s.page_size, (uint32_t)s.head_dim,
        (uint32_t)s.batch_size, fi::QKVLayout::kNHD,
        reinterpret_cast<DTypeKV *>(const_cast<uint16_t *>(a->k_cache)),
        reinterpret_cast<DTypeKV *>(const_cast<uint16_t *>(a->v_cache)), kv_strides,
        const_cast<IdType *>(a->kv_indices), const_cast<IdType *>(a->kv_indptr),
        const_cast<IdType *>(a->kv_last_page_len));

    const fi::DecodePlanInfo &in = st->info;
    Params<DTypeKV> params;
    params.q = reinterpret_cast<DType *>(const_cast<uint16_t *>(a->q));
    params.paged_kv = paged_kv;
    params.o = reinterpret_cast<DType *>(a->o);
    params.lse = a->lse;
    params.num_qo_heads = (uint32_t)s.num_qo_heads;
    params.q_stride_n = (IdType)a->q_stride_batch;
    params.q_stride_h = (IdType)a->q_stride_head;
    params.window_left = -1;
    params.logits_soft_cap = 0.0f;
    params.sm_scale = sm_scale;
    params.rope_rcp_scale = 1.0f;
    params.rope_rcp_theta = 1.0f / 1e4f;
    params.request_indices = fi::GetPtrFromBaseOffset<IdType>(int_buf, in.request_indices_offset);
    params.kv_tile_indices = fi::GetPtrFromBaseOffset<IdType>(int_buf, in.kv_tile_indices_offset);
    params.o_indptr = fi::GetPtrFromBaseOffset<IdType>(int_buf, in.o_indptr_offset);
    params.kv_chunk_size_ptr =
        fi::GetPtrFromBaseOffset<IdType>(int_buf, in.kv_chunk_size_ptr_offset);
    /* Only a plan for CUDA graphs pads the batch with work items to skip. */
    params.block_valid_mask =
        in.enable_cuda_graph && in.split_kv
            ? fi::GetPtrFromBaseOffset<bool>(int_buf, in.block_valid_mask_offset)
            : nullptr;
    params.padded_batch_size = (uint32_t)in.padded_batch_size;
    DType *tmp_v = nullptr;
    float *tmp_s = nullptr;
    if (in.split_kv) {
        /* FlashInfer keeps the partial outputs in DTypeO, here bf16, before the merge. */
        tmp_v = fi::GetPtrFromBaseOffset<DType>(ws, in.v_offset);
        tmp_s = fi::GetPtrFromBaseOffset<float>(ws, in.s_offset);
    }
    const bool pdl = st->cc_major >= 9; /* FlashInfer's default where the device supports it */
    switch (s.head_dim) {
    case 64:
        return fi::BatchDecodeWithPagedKVCacheDispatched<64, kPos, Variant>(params, tmp_v, tmp_s,
                                                                            pdl, stream);
    case 128:
        return fi::BatchDecodeWithPagedKVCacheDispatched<128, kPos, Variant>(params, tmp_v, tmp_s,
                                                                             pdl, stream);
    case 256:
        return fi::BatchDecodeWithPagedKVCacheDispatched<256, kPos, Variant>(params, tmp_v, tmp_s,
                                                                             pdl, stream);
    }
    return cudaErrorInvalidValue;
}

int fi_run(void *p, const kvf_plugin_args *a, char *msg, size_t msg_size) {
    State *st = static_cast<State *>(p);
    const kvf_plugin_shape &s = st->shape;
    if (!st->planned) {
        say(msg, msg_size, "flashinfer run: no plan (plan() failed or was not called)");
        return KVF_PLUGIN_ERROR;
    }
    if (s.batch_size == 0) return KVF_PLUGIN_OK;
    const int64_t hq = s.num_qo_heads, d = s.head_dim;
    /* BatchDecodeWithPagedKVCacheDispatched and its merge write o and lse densely. */
    if (a->o_stride_head != d || a->o_stride_batch != hq * d || a->lse_stride_batch != hq) {
        say(msg, msg_size,
            "flashinfer run: FlashInfer writes o as dense [B][%lld][%lld] and lse as [B][%lld], "
            "got strides o %lld/%lld, lse %lld",
            (long long)hq, (long long)d, (long long)hq, (long long)a->o_stride_batch,
            (long long)a->o_stride_head, (long long)a->lse_stride_batch);
        return KVF_PLUGIN_ERROR;
    }
    if (a->q_stride_batch > INT32_MAX || a->q_stride_head > INT32_MAX ||
        a->kv_stride_page > UINT32_MAX || a->kv_stride_slot > UINT32_MAX ||
        a->kv_stride_head > UINT32_MAX) {
        say(msg, msg_size, "flashinfer run: strides exceed FlashInfer's 32-bit stride fields");
        return KVF_PLUGIN_ERROR;
    }
    const size_t need = st->int_offset + st->int_bytes;
    if (!a->workspace || a->workspace_bytes < need) {
        say(msg, msg_size, "flashinfer run: workspace of %zu bytes, the plan needs %zu",
            a->workspace_bytes, need);
        return KVF_PLUGIN_ERROR;
    }
    if (st->kv_scaled &&
        (a->struct_size < offsetof(kvf_plugin_args, v_scale) + sizeof(a->v_scale) || !a->k_scale ||
         !a->v_scale)) {
        say(msg, msg_size, "flashinfer run: FP8 caches with tensor scales but no scale pointers");
        return KVF_PLUGIN_ERROR;
    }
    cudaStream_t stream = static_cast<cudaStream_t>(a->stream);
    char *ws = static_cast<char *>(a->workspace);
    char *int_buf = ws + st->int_offset;

    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(stream, &capturing);
    if (e != cudaSuccess) return cuda_fail(msg, msg_size, "flashinfer run: stream query", e);

    /* FlashInfer's wrapper folds k_scale, a Python float, into sm_scale on the host (a double
     * product, passed to the kernel as float). The scale lives in device memory here, written
     * there on this stream, so it is read back first: a synchronous read that a graph capture
     * cannot hold, which is why flashinfer-graph takes bf16 caches only. */
    float sm_scale = a->sm_scale;
    if (st->kv_scaled) {
        if (capturing != cudaStreamCaptureStatusNone) {
            say(msg, msg_size,
                "flashinfer run: FP8 with scales reads k_scale synchronously, which a graph "
                "capture cannot hold");
            return KVF_PLUGIN_ERROR;
        }
        e = cudaMemcpyAsync(st->k_scale_host, a->k_scale, sizeof(float), cudaMemcpyDeviceToHost,
                            stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
        if (e != cudaSuccess) return cuda_fail(msg, msg_size, "flashinfer run: reading k_scale", e);
        sm_scale = (float)((double)a->sm_scale * (double)*st->k_scale_host);
    }

    /* The plan's indices enter the workspace here, on the caller's stream, after kvfuzz has
     * poisoned it: FlashInfer's kernel reads them (and kv_indptr) before its PDL wait, so they
     * must be in place before the launch, which a copy ahead of it on the stream guarantees. */
    /* Under a graph capture the copy becomes a node that reads the staging at each replay, which
     * the next plan() refills (kvfuzz synchronizes the stream before it): no event then. */
    e = cudaMemcpyAsync(int_buf, st->staging, st->int_bytes, cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess && capturing == cudaStreamCaptureStatusNone)
        e = cudaEventRecord(st->staged, stream);
    if (e != cudaSuccess) return cuda_fail(msg, msg_size, "flashinfer run: staging the plan", e);
    st->staged_pending = capturing == cudaStreamCaptureStatusNone;

    try {
        switch (st->kv_dtype) {
        case 0:
            e = launch<nv_bfloat16>(st, a, ws, int_buf, sm_scale, stream);
            break;
        case 1:
            e = launch<__nv_fp8_e4m3>(st, a, ws, int_buf, sm_scale, stream);
            break;
        case 2:
            e = launch<__nv_fp8_e5m2>(st, a, ws, int_buf, sm_scale, stream);
            break;
        default:
            e = cudaErrorInvalidValue;
        }
    } catch (const std::exception &ex) {
        say(msg, msg_size, "flashinfer run: %s", ex.what());
        return KVF_PLUGIN_ERROR;
    }
    if (e != cudaSuccess) return cuda_fail(msg, msg_size, "flashinfer run: launch failed", e);
    if (st->kv_scaled) {
        /* The wrapper's `out *= v_scale`, after the kernel (and its merge) on the same stream. */
        e = scale_o(reinterpret_cast<nv_bfloat16 *>(a->o), (size_t)s.batch_size * hq * d,
                    a->v_scale, stream);
        if (e != cudaSuccess)
            return cuda_fail(msg, msg_size, "flashinfer run: launching the v_scale multiply", e);
    }
    return KVF_PLUGIN_OK;
}

void fi_describe(void *p, char *buf, size_t size) {
    State *st = static_cast<State *>(p);
    if (!st->planned) {
        say(buf, size, "unplanned");
        return;
    }
    const fi::DecodePlanInfo &in = st->info;
    if (st->shape.batch_size == 0) {
        say(buf, size, "split=no batch=0 ctas=0");
        return;
    }
    /* The cache type only for FP8, so bf16 plans read as they always have. */
    char kv[32] = "";
    if (st->kv_dtype != 0)
        say(kv, sizeof kv, " kv=%s%s", kv_name(st->kv_dtype), st->kv_scaled ? "/tensor" : "");
    say(buf, size, "split=%s chunk=%u padded_batch=%lld ctas=%lld max_grid=%u pdl=%s%s",
        in.split_kv ? "yes" : "no", st->chunk_tokens, (long long)in.padded_batch_size,
        (long long)in.padded_batch_size * st->shape.num_kv_heads, st->max_grid,
        st->cc_major >= 9 ? "yes" : "no", kv);
}

/* FP8 caches: e4m3 and e5m2 (both caches of one type, supports() says), with one tensor scale
 * per cache or none, for flashinfer and flashinfer-nosplit. flashinfer-graph keeps bf16 only
 * (0, 0): folding k_scale into sm_scale as FlashInfer's wrapper does needs a synchronous read of
 * the scale from device memory in run(), which cannot be captured in a graph. */
constexpr uint32_t kFp8 = KVF_PLUGIN_KV_E4M3 | KVF_PLUGIN_KV_E5M2;
const kvf_plugin_kernel kernels[] = {
    {sizeof(kvf_plugin_kernel), "flashinfer",
     "FlashInfer BatchDecodeWithPagedKVCache (CUDA cores), its own split-KV plan",
     KVF_PLUGIN_DEVICE_CUDA, KVF_PLUGIN_ROLE_UNDER_TEST, nullptr, fi_supports, fi_create,
     fi_destroy, fi_plan, fi_workspace_bytes, fi_run, fi_describe, /*concurrent_states=*/0,
     // Its split-KV partial outputs go through a bf16 temporary (tmp_v has the output's type),
     // and it is built with -use_fast_math (flush-to-zero).
     /*precision=*/"bf16-partials+ftz",
     // The defaults (placement, head permutation, v-scaling); its planner sizes the splits
     // from the batch, so batch invariance is not promised (docs/invariance.md).
     /*promises=*/nullptr, /*models=*/nullptr,
     /*kv_dtypes=*/kFp8, /*scale_granularities=*/KVF_PLUGIN_SCALE_TENSOR},
    {sizeof(kvf_plugin_kernel), "flashinfer-nosplit",
     "FlashInfer BatchDecodeWithPagedKVCache (CUDA cores), split-KV disabled in the plan",
     KVF_PLUGIN_DEVICE_CUDA, KVF_PLUGIN_ROLE_UNDER_TEST, &nosplit_tag, fi_supports, fi_create,
     fi_destroy, fi_plan, fi_workspace_bytes, fi_run, fi_describe, /*concurrent_states=*/0,
     // No partials without a split; -use_fast_math still flushes.
     /*precision=*/"ftz", /*promises=*/nullptr, /*models=*/nullptr,
     /*kv_dtypes=*/kFp8, /*scale_granularities=*/KVF_PLUGIN_SCALE_TENSOR},
    {sizeof(kvf_plugin_kernel), "flashinfer-graph",
     "FlashInfer BatchDecodeWithPagedKVCache (CUDA cores), planned for CUDA graphs",
     KVF_PLUGIN_DEVICE_CUDA, KVF_PLUGIN_ROLE_UNDER_TEST, &graph_tag, fi_supports, fi_create,
     fi_destroy, fi_plan, fi_workspace_bytes, fi_run, fi_describe, /*concurrent_states=*/0,
     // Always split (the partials in bf16) when the batch leaves the GPU idle.
     /*precision=*/"bf16-partials+ftz", /*promises=*/"graph-replay", /*models=*/nullptr,
     /*kv_dtypes=*/0, /*scale_granularities=*/0},
};

const kvf_plugin plugin = {KVF_PLUGIN_ABI_VERSION,
                           sizeof(kvf_plugin),
                           "flashinfer",
                           sizeof(kvf_plugin_kernel),
                           sizeof(kernels) / sizeof(kernels[0]),
                           kernels};

} // namespace

extern "C" __attribute__((visibility("default"))) const kvf_plugin *kvf_plugin_v1(void) {
    return &plugin;
}
