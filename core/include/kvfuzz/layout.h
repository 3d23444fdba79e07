/* Buffer layouts (docs/case-format.md, "Layout section"; include/kvfuzz/plugin.h): how the
 * buffers a kernel is given lay out a case's tensors. The values do not depend on it, so the
 * oracle ignores it; the buffer hosts lay q, o, lse and the K/V pools out with it, fill the
 * padding with poison and check that no kernel wrote there.
 *
 * A layout adds padding to the dense strides and picks the order inside a page:
 *   q        [B][Hq][D]: head stride D + q_head_pad, batch stride Hq * that + q_batch_pad
 *   o        the same with o_head_pad, o_batch_pad;  lse [B][Hq]: batch stride Hq + lse_batch_pad
 *   pages    NHD ([S][Hk][D]): head stride D + kv_row_pad, slot stride Hk * that + kv_mid_pad;
 *            HND ([Hk][S][D]): slot stride D + kv_row_pad, head stride S * that + kv_mid_pad;
 *            page stride (the page's elements) + kv_page_pad
 *   view_offset: each buffer's first element lies this many elements into its allocation, the
 *            elements before it poison (a view inside a larger tensor).
 * All zero is the dense NHD layout every case had before layouts existed.
 *
 * Plain data, no ownership. Errors: kvf_layout_check gives KVF_EINVAL with one sentence naming
 * the field out of range. */
#ifndef KVFUZZ_LAYOUT_H
#define KVFUZZ_LAYOUT_H

#include <stdint.h>

#include "kvfuzz/error.h"

/* The largest padding of a stride and the largest view offset, in elements. A page may be
 * padded by up to KVF_LAYOUT_MAX_PAGE_PAD elements (a packed page record much larger than its
 * K or V, as serving systems keep them). */
#define KVF_LAYOUT_MAX_PAD 4096u
#define KVF_LAYOUT_MAX_PAGE_PAD (1u << 20)

enum { KVF_LAYOUT_NHD = 0, KVF_LAYOUT_HND = 1 };

typedef struct kvf_layout {
    uint8_t kv_order; /* KVF_LAYOUT_NHD or KVF_LAYOUT_HND */
    uint32_t q_head_pad, q_batch_pad;
    uint32_t o_head_pad, o_batch_pad;
    uint32_t lse_batch_pad;
    uint32_t kv_row_pad, kv_mid_pad, kv_page_pad;
    uint32_t view_offset;
} kvf_layout;

/* The strides a layout gives a shape, in elements, as plugin.h's kvf_plugin_args names them. */
typedef struct kvf_strides {
    int64_t q_batch, q_head;
    int64_t o_batch, o_head;
    int64_t lse_batch;
    int64_t kv_page, kv_slot, kv_head;
} kvf_strides;

void kvf_layout_strides(const kvf_layout *l, int32_t num_qo_heads, int32_t num_kv_heads,
                        int32_t head_dim, int32_t page_size, kvf_strides *out);
/* 1 for the dense NHD layout (all zero). */
int kvf_layout_is_dense(const kvf_layout *l);
/* The fields in their domains. */
int kvf_layout_check(const kvf_layout *l, kvf_error *err);
/* "dense", or "HND q+8/+0 o+0/+64 lse+3 kv+8/+0/+1024 view+16": for messages. */
void kvf_layout_text(const kvf_layout *l, char *buf, size_t size);

#endif
