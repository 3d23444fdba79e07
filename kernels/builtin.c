/* Built-in CPU kernels as descriptors (builtin_kernel.h). */
#include "kvfuzz/builtin_kernel.h"

#include <stdio.h>
#include <string.h>

int kvf__builtin_create(const kvf_plugin_kernel *self, void **state, char *msg, size_t msg_size) {
    (void)msg, (void)msg_size;
    *state = self->user;
    return KVF_PLUGIN_OK;
}

int kvf__builtin_supports_all(const kvf_plugin_kernel *self, const kvf_plugin_shape *shape,
                              char *why, size_t why_size) {
    (void)self, (void)shape, (void)why, (void)why_size;
    return 1;
}

int kvf__builtin_run(void *state, const kvf_plugin_args *a, char *msg, size_t msg_size) {
    const kvf__case_kernel *impl = state;
    const kvf_plugin_shape *s = a->shape;
    /* The case functions index contiguous arrays; the hosts always lay them out so. */
    if (a->q_stride_head != s->head_dim || a->o_stride_head != s->head_dim ||
        a->q_stride_batch != (int64_t)s->num_qo_heads * s->head_dim ||
        a->o_stride_batch != a->q_stride_batch || a->kv_stride_head != s->head_dim ||
        a->kv_stride_slot != (int64_t)s->num_kv_heads * s->head_dim ||
        a->kv_stride_page != (int64_t)s->page_size * a->kv_stride_slot ||
        a->lse_stride_batch != s->num_qo_heads) {
        snprintf(msg, msg_size, "a built-in kernel needs contiguous buffers");
        return KVF_PLUGIN_ERROR;
    }
    kvf_case view;
    memset(&view, 0, sizeof view);
    view.num_qo_heads = s->num_qo_heads;
    view.num_kv_heads = s->num_kv_heads;
    view.head_dim = s->head_dim;
    view.page_size = s->page_size;
    view.batch_size = s->batch_size;
    view.num_pages = s->num_pages;
    view.sm_scale = a->sm_scale;
    view.kv_indptr = (int32_t *)a->kv_indptr;
    view.kv_indices = (int32_t *)a->kv_indices;
    view.kv_last_page_len = (int32_t *)a->kv_last_page_len;
    view.q = (kvf_bf16 *)a->q;
    view.k_cache = (kvf_bf16 *)a->k_cache;
    view.v_cache = (kvf_bf16 *)a->v_cache;
    view.pool_bytes = (size_t)s->num_pages * (size_t)a->kv_stride_page * sizeof(kvf_bf16);
    kvf_error err = {0};
    int rc = impl->run(NULL, &view, a->o, a->lse, &err);
    if (rc == 0) return KVF_PLUGIN_OK;
    snprintf(msg, msg_size, "%s", err.msg);
    return rc == KVF_EUNSUPPORTED ? KVF_PLUGIN_UNSUPPORTED
           : rc == KVF_ENOMEM     ? KVF_PLUGIN_NOMEM
                                  : KVF_PLUGIN_ERROR;
}
