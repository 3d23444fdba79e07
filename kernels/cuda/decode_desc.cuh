// The plugin-ABI descriptor functions (include/kvfuzz/plugin.h) the CUDA kernels register
// with: kvfuzz's CUDA buffer host (host_cuda.cu) owns, poisons and checks the buffers, and these
// functions only plan and launch on what it hands over. Included by decode.cu (the production
// `cuda` and `cuda-naive`) and, inside a mutant's namespace, by cuda/mutants/decode_mutant.cu:
// kvf__cuda_check_shape, plan_prepare() and plan_launch() are the including translation unit's
// (plan_prepare and plan_launch: the C API's prepare and launch, or a mutant's own).
#include <stdio.h>
#include <string.h>

#include "kvfuzz/cuda_kernels.h" // and kvfuzz/plugin.h
#include "split_plan_types.h"

namespace {

// Maps a kvfuzz error from the plan API onto the ABI's status, with the sentence as message.
int plugin_status(int rc, const kvf_error *e, char *msg, size_t msg_size) {
    if (rc == 0) return KVF_PLUGIN_OK;
    if (msg && msg_size) snprintf(msg, msg_size, "%s", e->msg);
    return rc == KVF_EUNSUPPORTED ? KVF_PLUGIN_UNSUPPORTED
           : rc == KVF_ENOMEM     ? KVF_PLUGIN_NOMEM
                                  : KVF_PLUGIN_ERROR;
}

// The caches' element types and the scales' granularity of a shape (0 for a shape built before
// they existed: bf16 without scales).
void set_problem_dtypes(kvf_cuda_problem *pr, const kvf_plugin_shape *shape) {
    const int has = shape->struct_size >=
                    offsetof(kvf_plugin_shape, scale_granularity) + sizeof shape->scale_granularity;
    pr->k_dtype = has ? shape->k_dtype : 0, pr->v_dtype = has ? shape->v_dtype : 0;
    pr->scale_granularity = has ? shape->scale_granularity : 0;
}

// A pure function of the shape (plugin.h): the limits kvf__cuda_check_shape() enforces, plus the
// sequence length, which prepare() would refuse.
int desc_supports(const kvf_plugin_kernel *self, const kvf_plugin_shape *shape, char *why,
                  size_t why_size) {
    (void)self;
    kvf_cuda_problem pr;
    memset(&pr, 0, sizeof pr);
    pr.num_qo_heads = shape->num_qo_heads, pr.num_kv_heads = shape->num_kv_heads;
    pr.head_dim = shape->head_dim, pr.page_size = shape->page_size;
    pr.batch_size = shape->batch_size, pr.num_pages = shape->num_pages;
    pr.sm_scale = shape->sm_scale;
    set_problem_dtypes(&pr, shape);
    kvf_error e = {0, {0}};
    int rc = kvf__cuda_check_shape(&pr, &e);
    // The kernels index dense NHD tensors. A shape from before layouts, or built by hand
    // without strides, has none (all 0): dense (plugin.h).
    const int64_t D = shape->head_dim, Hq = shape->num_qo_heads, Hk = shape->num_kv_heads;
    const int has_strides = shape->struct_size >= sizeof *shape && shape->q_stride_head != 0;
    if (!rc && has_strides &&
        (shape->q_stride_head != D || shape->q_stride_batch != Hq * D ||
         shape->o_stride_head != D || shape->o_stride_batch != Hq * D ||
         shape->lse_stride_batch != Hq || shape->kv_stride_head != D ||
         shape->kv_stride_slot != Hk * D || shape->kv_stride_page != shape->page_size * Hk * D))
        rc = kvf_error_set(&e, KVF_EUNSUPPORTED,
                           "The CUDA kernels take dense NHD tensors only, not padded strides or "
                           "HND pages.");
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
    set_problem_dtypes(&pr, shape);
    kvf_error e = {0, {0}};
    return plugin_status(plan_prepare((kvf_cuda_plan *)state, &pr, &e), &e, msg, msg_size);
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
    // Scales exist in args that carry a granularity (plugin.h); older args end before them.
    const int has_scales = s->struct_size >= sizeof *s && s->scale_granularity != 0 &&
                           a->struct_size >= offsetof(kvf_plugin_args, v_scale) + sizeof a->v_scale;
    t.k_scale = has_scales ? a->k_scale : NULL, t.v_scale = has_scales ? a->v_scale : NULL;
    kvf_error e = {0, {0}};
    return plugin_status(plan_launch((kvf_cuda_plan *)state, &t, a->stream, &e), &e, msg, msg_size);
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

} // namespace

// The FP8 caches and scales the production kernels take (plugin.h masks; cuda_kernels.h).
#define KVF_CUDA_KV_DTYPES (KVF_PLUGIN_KV_E4M3 | KVF_PLUGIN_KV_E5M2)
#define KVF_CUDA_SCALES (KVF_PLUGIN_SCALE_TENSOR | KVF_PLUGIN_SCALE_HEAD | KVF_PLUGIN_SCALE_TOKEN)

// The descriptor of a split-KV variant (the production kernel, or a mutant's build of it, with
// masks 0: bf16 only), with the precision, promises and models it leaves NULL.
// clang-format off
#define KVF_CUDA_SPLIT_DESC(NAME, DESCRIPTION, ROLE, KV_DTYPES, SCALES)                            \
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
     desc_describe,                                                                                \
     KVF_CUDA_CONCURRENT_STATES,                                                                   \
     NULL,                                                                                         \
     NULL,                                                                                         \
     NULL,                                                                                         \
     KV_DTYPES,                                                                                    \
     SCALES}
// clang-format on
