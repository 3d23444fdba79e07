/* Buffer layouts (kvfuzz/layout.h): strides, checks and a line of text. */
#include "kvfuzz/layout.h"

#include <stdio.h>

void kvf_layout_strides(const kvf_layout *l, int32_t num_qo_heads, int32_t num_kv_heads,
                        int32_t head_dim, int32_t page_size, kvf_strides *out) {
    const int64_t D = head_dim;
    out->q_head = D + l->q_head_pad;
    out->q_batch = num_qo_heads * out->q_head + l->q_batch_pad;
    out->o_head = D + l->o_head_pad;
    out->o_batch = num_qo_heads * out->o_head + l->o_batch_pad;
    out->lse_batch = (int64_t)num_qo_heads + l->lse_batch_pad;
    if (l->kv_order == KVF_LAYOUT_HND) {
        out->kv_slot = D + l->kv_row_pad;
        out->kv_head = page_size * out->kv_slot + l->kv_mid_pad;
        out->kv_page = num_kv_heads * out->kv_head + l->kv_page_pad;
    } else {
        out->kv_head = D + l->kv_row_pad;
        out->kv_slot = num_kv_heads * out->kv_head + l->kv_mid_pad;
        out->kv_page = page_size * out->kv_slot + l->kv_page_pad;
    }
}

int kvf_layout_is_dense(const kvf_layout *l) {
    return l->kv_order == KVF_LAYOUT_NHD && !l->q_head_pad && !l->q_batch_pad && !l->o_head_pad &&
           !l->o_batch_pad && !l->lse_batch_pad && !l->kv_row_pad && !l->kv_mid_pad &&
           !l->kv_page_pad && !l->view_offset;
}

int kvf_layout_check(const kvf_layout *l, kvf_error *err) {
    if (l->kv_order > KVF_LAYOUT_HND)
        return kvf_error_set(err, KVF_EINVAL,
                             "the layout's page order %u is neither NHD (0) nor "
                             "HND (1)",
                             (unsigned)l->kv_order);
    const struct {
        const char *name;
        uint32_t v, max;
    } f[] = {{"q head padding", l->q_head_pad, KVF_LAYOUT_MAX_PAD},
             {"q batch padding", l->q_batch_pad, KVF_LAYOUT_MAX_PAD},
             {"o head padding", l->o_head_pad, KVF_LAYOUT_MAX_PAD},
             {"o batch padding", l->o_batch_pad, KVF_LAYOUT_MAX_PAD},
             {"lse batch padding", l->lse_batch_pad, KVF_LAYOUT_MAX_PAD},
             {"K/V row padding", l->kv_row_pad, KVF_LAYOUT_MAX_PAD},
             {"K/V middle padding", l->kv_mid_pad, KVF_LAYOUT_MAX_PAD},
             {"page padding", l->kv_page_pad, KVF_LAYOUT_MAX_PAGE_PAD},
             {"view offset", l->view_offset, KVF_LAYOUT_MAX_PAD}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v > f[i].max)
            return kvf_error_set(err, KVF_EINVAL, "the layout's %s %u is above its maximum %u",
                                 f[i].name, f[i].v, f[i].max);
    return 0;
}

void kvf_layout_text(const kvf_layout *l, char *buf, size_t size) {
    if (kvf_layout_is_dense(l)) {
        snprintf(buf, size, "dense");
        return;
    }
    snprintf(buf, size, "%s q+%u/+%u o+%u/+%u lse+%u kv+%u/+%u/+%u view+%u",
             l->kv_order == KVF_LAYOUT_HND ? "HND" : "NHD", l->q_head_pad, l->q_batch_pad,
             l->o_head_pad, l->o_batch_pad, l->lse_batch_pad, l->kv_row_pad, l->kv_mid_pad,
             l->kv_page_pad, l->view_offset);
}
