/* The layout of a case's buffers as the buffer hosts build them (host_layout.h). */
#include "host_layout.h"

#include <inttypes.h>
#include <string.h>

#include "kvfuzz/bf16.h"
#include "kvfuzz/fp8.h"
#include "kvfuzz/kernel_host.h"

void kvf__host_layout_of(const kvf_case *c, kvf__host_layout *L) {
    memset(L, 0, sizeof *L);
    kvf_layout_strides(&c->layout, c->num_qo_heads, c->num_kv_heads, c->head_dim, c->page_size,
                       &L->s);
    L->dense = kvf_layout_is_dense(&c->layout);
    L->view = c->layout.view_offset;
    const int64_t B = c->batch_size;
    L->q_elems = B ? L->view + B * L->s.q_batch : 0;
    L->o_elems = B ? L->view + B * L->s.o_batch : 0;
    L->lse_elems = B ? L->view + B * L->s.lse_batch : 0;
    L->page_elems = L->s.kv_page;
    L->pool_elems = c->num_pages ? L->view + c->num_pages * L->page_elems : 0;
}

void kvf__host_layout_args(const kvf__host_layout *L, const kvf_case *c,
                           const kvf_plugin_shape *shape, kvf_plugin_args *a) {
    memset(a, 0, sizeof *a);
    a->struct_size = sizeof *a;
    a->shape = shape;
    a->q_stride_batch = L->s.q_batch, a->q_stride_head = L->s.q_head;
    a->kv_stride_page = L->s.kv_page, a->kv_stride_slot = L->s.kv_slot;
    a->kv_stride_head = L->s.kv_head;
    a->o_stride_batch = L->s.o_batch, a->o_stride_head = L->s.o_head;
    a->lse_stride_batch = L->s.lse_batch;
    a->sm_scale = c->sm_scale;
}

/* n elements of v, four at a time where aligned: most of a small case's page is poison. */
static void fill16(kvf_bf16 *dst, int64_t n, kvf_bf16 v) {
    const uint64_t four = 0x0001000100010001ull * v;
    int64_t i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 7); i++)
        dst[i] = v;
    for (; i + 4 <= n; i += 4)
        memcpy(dst + i, &four, sizeof four);
    for (; i < n; i++)
        dst[i] = v;
}

void kvf__host_q_image(const kvf_case *c, const kvf__host_layout *L, kvf_bf16 *dst) {
    const int64_t hq = c->num_qo_heads, d = c->head_dim;
    if (L->dense) {
        if (L->q_elems) memcpy(dst, c->q, (size_t)L->q_elems * sizeof *dst);
        return;
    }
    fill16(dst, L->q_elems, (kvf_bf16)KVF_HOST_POISON_INPUT);
    for (int64_t b = 0; b < c->batch_size; b++)
        for (int64_t h = 0; h < hq; h++)
            memcpy(dst + L->view + b * L->s.q_batch + h * L->s.q_head, c->q + (b * hq + h) * d,
                   (size_t)d * sizeof *dst);
}

void kvf__host_page_image(const kvf_case *c, const kvf__host_layout *L, const kvf_bf16 *cache,
                          int64_t p, int32_t used, kvf_bf16 *dst) {
    const int64_t hk = c->num_kv_heads, d = c->head_dim;
    const int64_t dense_page = kvf_case_page_elems(c);
    const kvf_bf16 *src = cache + p * dense_page;
    if (L->dense) {
        const int64_t keep = (int64_t)used * hk * d;
        memcpy(dst, src, (size_t)keep * sizeof *dst);
        fill16(dst + keep, dense_page - keep, (kvf_bf16)KVF_HOST_POISON_INPUT);
        return;
    }
    fill16(dst, L->page_elems, (kvf_bf16)KVF_HOST_POISON_INPUT);
    for (int64_t t = 0; t < used; t++)
        for (int64_t g = 0; g < hk; g++)
            memcpy(dst + t * L->s.kv_slot + g * L->s.kv_head, src + (t * hk + g) * d,
                   (size_t)d * sizeof *dst);
}

int kvf__host_page_place(const kvf_case *c, const kvf__host_layout *L, int64_t i, int64_t *slot,
                         int64_t *head, int64_t *d) {
    const int64_t S = c->page_size, hk = c->num_kv_heads, D = c->head_dim;
    /* The outer index of the page order first: slots of NHD, heads of HND. */
    const int hnd = c->layout.kv_order == KVF_LAYOUT_HND;
    const int64_t outer_stride = hnd ? L->s.kv_head : L->s.kv_slot;
    const int64_t inner_stride = hnd ? L->s.kv_slot : L->s.kv_head;
    const int64_t outer = i / outer_stride, rest = i % outer_stride;
    const int64_t inner = rest / inner_stride, dd = rest % inner_stride;
    if (outer >= (hnd ? hk : S) || inner >= (hnd ? S : hk) || dd >= D) return 0;
    *slot = hnd ? inner : outer;
    *head = hnd ? outer : inner;
    *d = dd;
    return 1;
}

void kvf__host_gather_outputs(const kvf_case *c, const kvf__host_layout *L, const kvf_bf16 *obuf,
                              const float *lbuf, kvf_bf16 *o, float *lse) {
    const int64_t hq = c->num_qo_heads, d = c->head_dim;
    for (int64_t b = 0; b < c->batch_size; b++)
        for (int64_t h = 0; h < hq; h++) {
            memcpy(o + (b * hq + h) * d, obuf + L->view + b * L->s.o_batch + h * L->s.o_head,
                   (size_t)d * sizeof *o);
            lse[b * hq + h] = lbuf[L->view + b * L->s.lse_batch + h];
        }
}

/* The first element of a buffer of n elements (after `view`, B batches of hq rows of `run`
 * elements at the given strides) that lies outside every row and no longer holds the poison
 * value it was given; -1 when there is none. */
static int64_t first_padding_write(int64_t n, int64_t view, int64_t B, int64_t hq, int64_t run,
                                   int64_t batch, int64_t head, const void *buf, size_t elem,
                                   const void *poison) {
    const uint8_t *p = buf;
    for (int64_t i = 0; i < n; i++) {
        const int64_t at = i - view;
        int in_row = 0;
        if (at >= 0 && at / batch < B) {
            const int64_t r = at % batch;
            in_row = r / head < hq && r % head < run;
        }
        if (!in_row && memcmp(p + (size_t)i * elem, poison, elem) != 0) return i;
    }
    return -1;
}

static uint32_t lse_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

int kvf__host_check_output_padding(const kvf_case *c, const kvf__host_layout *L,
                                   const kvf_bf16 *obuf, const float *lbuf, kvf_error *err) {
    if (L->dense) return 0;
    const int64_t B = c->batch_size, hq = c->num_qo_heads;
    const kvf_bf16 po = (kvf_bf16)KVF_HOST_POISON_O;
    const uint32_t pl = KVF_HOST_POISON_LSE;
    int64_t i = first_padding_write(L->o_elems, L->view, B, hq, c->head_dim, L->s.o_batch,
                                    L->s.o_head, obuf, sizeof *obuf, &po);
    if (i >= 0)
        return kvf_error_set(err, KVF_EOOBWRITE,
                             "the kernel wrote into o's padding at element %" PRId64
                             " of its buffer (the view starts at %" PRId64 ", batch stride %" PRId64
                             ", head stride %" PRId64 "; poison 0x%04x became 0x%04x)",
                             i, L->view, L->s.o_batch, L->s.o_head, po, obuf[i]);
    i = first_padding_write(L->lse_elems, L->view, B, 1, hq, L->s.lse_batch, L->s.lse_batch, lbuf,
                            sizeof *lbuf, &pl);
    if (i >= 0)
        return kvf_error_set(err, KVF_EOOBWRITE,
                             "the kernel wrote into lse's padding at element %" PRId64
                             " of its buffer (the view starts at %" PRId64 ", batch stride %" PRId64
                             "; poison 0x%08x became 0x%08x)",
                             i, L->view, L->s.lse_batch, pl, lse_bits(lbuf[i]));
    return 0;
}

uint8_t kvf__host_fp8_byte(kvf_bf16 b, int dtype) {
    uint8_t x;
    if (kvf_fp8_from_bf16_exact(b, dtype, &x)) return x;
    return kvf_fp8_from_f32(kvf_bf16_to_f32(b), dtype);
}

void kvf__host_fp8_pack(uint8_t *dst, const kvf_bf16 *src, int64_t n, int dtype) {
    for (int64_t i = 0; i < n; i++)
        dst[i] = kvf__host_fp8_byte(src[i], dtype);
}
