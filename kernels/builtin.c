/* Built-in CPU kernels as descriptors (builtin_kernel.h). */
#include "kvfuzz/builtin_kernel.h"

#include "kvfuzz/fp8.h"

#include <stdio.h>
#include <stdlib.h>
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

/* Dense scratch for a strided layout: q, the referenced pages (renumbered 0..n-1 in `ids`
 * order) and the outputs. */
typedef struct dense_copy {
    kvf_bf16 *q, *k, *v, *o;
    float *lse;
    int32_t *indices;
    float *k_scale, *v_scale; /* per-token scales of the renumbered pages */
} dense_copy;

static void dense_free(dense_copy *d) {
    free(d->q), free(d->k), free(d->v), free(d->o), free(d->lse), free(d->indices);
    free(d->k_scale), free(d->v_scale);
}

/* D elements of a cache row into bf16: copied, or an FP8 row's bytes turned into their images
 * (kvfuzz/fp8.h), which is what a kvf_case holds. */
static void row_copy(kvf_bf16 *dst, const uint16_t *cache, int64_t at, int64_t D, int dtype) {
    if (!kvf_kv_dtype_is_fp8(dtype)) {
        memcpy(dst, cache + at, (size_t)D * sizeof *dst);
        return;
    }
    const uint8_t *bytes = (const uint8_t *)(const void *)cache + at;
    for (int64_t d = 0; d < D; d++)
        dst[d] = kvf_fp8_to_bf16(bytes[d], dtype);
}

static int cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The unpadded page stride of the args' page order: what page-stride-ignored steps by. */
static int64_t unpadded_page(const kvf_plugin_args *a, const kvf_plugin_shape *s) {
    return a->kv_stride_head > a->kv_stride_slot ? s->num_kv_heads * a->kv_stride_head
                                                 : s->page_size * a->kv_stride_slot;
}

/* Copies the strided inputs into d and points view at them. */
static int dense_gather(const kvf__case_kernel *impl, const kvf_plugin_args *a, kvf_case *view,
                        dense_copy *d) {
    const kvf_plugin_shape *s = a->shape;
    const int64_t B = s->batch_size, hq = s->num_qo_heads, hk = s->num_kv_heads, D = s->head_dim;
    const int64_t S = s->page_size, entries = s->num_entries, pe = S * hk * D;
    memset(d, 0, sizeof *d);
    int32_t *ids = malloc((size_t)(entries ? entries : 1) * sizeof *ids);
    d->indices = malloc((size_t)(entries ? entries : 1) * sizeof *d->indices);
    const size_t rows = (size_t)(B * hq) + 1; /* + 1: never a malloc of 0 */
    d->q = malloc(rows * (size_t)D * sizeof *d->q);
    d->o = malloc(rows * (size_t)D * sizeof *d->o);
    d->lse = malloc(rows * sizeof *d->lse);
    if (!ids || !d->indices || !d->q || !d->o || !d->lse) {
        free(ids);
        return KVF_ENOMEM;
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < hq; h++)
            memcpy(d->q + (b * hq + h) * D, a->q + b * a->q_stride_batch + h * a->q_stride_head,
                   (size_t)D * sizeof *d->q);
    if (entries) memcpy(ids, a->kv_indices, (size_t)entries * sizeof *ids);
    qsort(ids, (size_t)entries, sizeof *ids, cmp_i32);
    int64_t n = 0;
    for (int64_t i = 0; i < entries; i++)
        if (n == 0 || ids[n - 1] != ids[i]) ids[n++] = ids[i];
    d->k = malloc(((size_t)(n * pe) + 1) * sizeof *d->k);
    d->v = malloc(((size_t)(n * pe) + 1) * sizeof *d->v);
    if (!d->k || !d->v) {
        free(ids);
        return KVF_ENOMEM;
    }
    const int64_t page = impl->ignores_page_stride ? unpadded_page(a, s) : a->kv_stride_page;
    for (int64_t j = 0; j < n; j++)
        for (int64_t t = 0; t < S; t++)
            for (int64_t g = 0; g < hk; g++) {
                const int64_t from = ids[j] * page + t * a->kv_stride_slot + g * a->kv_stride_head;
                row_copy(d->k + j * pe + (t * hk + g) * D, a->k_cache, from, D, s->k_dtype);
                row_copy(d->v + j * pe + (t * hk + g) * D, a->v_cache, from, D, s->v_dtype);
            }
    if (s->scale_granularity == KVF_SCALE_TOKEN) {
        /* Per-token scales follow their pages into the renumbered pool. */
        const int64_t ps = S * hk;
        d->k_scale = malloc(((size_t)(n * ps) + 1) * sizeof *d->k_scale);
        d->v_scale = malloc(((size_t)(n * ps) + 1) * sizeof *d->v_scale);
        if (!d->k_scale || !d->v_scale) {
            free(ids);
            return KVF_ENOMEM;
        }
        for (int64_t j = 0; j < n; j++) {
            memcpy(d->k_scale + j * ps, a->k_scale + ids[j] * ps, (size_t)ps * sizeof(float));
            memcpy(d->v_scale + j * ps, a->v_scale + ids[j] * ps, (size_t)ps * sizeof(float));
        }
        view->k_scale = d->k_scale;
        view->v_scale = d->v_scale;
    }
    for (int64_t i = 0; i < entries; i++) {
        const int32_t *at = bsearch(&a->kv_indices[i], ids, (size_t)n, sizeof *ids, cmp_i32);
        d->indices[i] = (int32_t)(at - ids);
    }
    free(ids);
    view->q = d->q;
    view->k_cache = d->k;
    view->v_cache = d->v;
    view->kv_indices = d->indices;
    view->num_pages = n;
    view->pool_bytes = (size_t)(n * pe) * sizeof(kvf_bf16);
    return 0;
}

static int is_dense(const kvf_plugin_args *a) {
    const kvf_plugin_shape *s = a->shape;
    return a->q_stride_head == s->head_dim && a->o_stride_head == s->head_dim &&
           a->q_stride_batch == (int64_t)s->num_qo_heads * s->head_dim &&
           a->o_stride_batch == a->q_stride_batch && a->kv_stride_head == s->head_dim &&
           a->kv_stride_slot == (int64_t)s->num_kv_heads * s->head_dim &&
           a->kv_stride_page == (int64_t)s->page_size * a->kv_stride_slot &&
           a->lse_stride_batch == s->num_qo_heads;
}

int kvf__builtin_run(void *state, const kvf_plugin_args *a, char *msg, size_t msg_size) {
    const kvf__case_kernel *impl = state;
    const kvf_plugin_shape *s = a->shape;
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
    /* Quantized caches (docs/plugins.md, "FP8 caches"): the dtypes and scales as the args give
     * them; FP8 bytes always go through the dense copies, which turn them into images. */
    view.quant =
        (kvf_kv_quant){(uint8_t)s->k_dtype, (uint8_t)s->v_dtype, (uint8_t)s->scale_granularity};
    view.k_scale = (float *)a->k_scale;
    view.v_scale = (float *)a->v_scale;
    const int fp8 = kvf_kv_dtype_is_fp8(s->k_dtype) || kvf_kv_dtype_is_fp8(s->v_dtype);
    const int dense = is_dense(a) && !fp8;
    dense_copy d;
    memset(&d, 0, sizeof d);
    kvf_error err = {0};
    int rc = dense ? 0 : dense_gather(impl, a, &view, &d);
    if (rc) {
        dense_free(&d);
        snprintf(msg, msg_size, "out of memory for the dense copies of a strided layout");
        return KVF_PLUGIN_NOMEM;
    }
    rc = impl->run(NULL, &view, dense ? a->o : d.o, dense ? a->lse : d.lse, &err);
    if (rc == 0 && !dense) {
        const int64_t hq = s->num_qo_heads, D = s->head_dim;
        for (int64_t b = 0; b < s->batch_size; b++)
            for (int64_t h = 0; h < hq; h++) {
                memcpy(a->o + b * a->o_stride_batch + h * a->o_stride_head, d.o + (b * hq + h) * D,
                       (size_t)D * sizeof *d.o);
                a->lse[b * a->lse_stride_batch + h] = d.lse[b * hq + h];
            }
    }
    dense_free(&d);
    if (rc == 0) return KVF_PLUGIN_OK;
    snprintf(msg, msg_size, "%s", err.msg);
    return rc == KVF_EUNSUPPORTED ? KVF_PLUGIN_UNSUPPORTED
           : rc == KVF_ENOMEM     ? KVF_PLUGIN_NOMEM
                                  : KVF_PLUGIN_ERROR;
}
