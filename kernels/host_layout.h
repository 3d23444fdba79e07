/* The layout of a case's buffers as both buffer hosts build them (kvfuzz/layout.h): sizes in
 * elements, the images of q and of the pages with poison in the padding, the outputs gathered
 * back from their strided buffers and the padding between them checked. Private to kernels/
 * (host_internal.h includes it); C, included by the CUDA host inside extern "C".
 *
 * Each buffer is one allocation of *_elems elements whose view starts `view` elements in: the
 * elements before the view and every padding element hold poison (KVF_HOST_POISON_INPUT in q
 * and the pools, KVF_HOST_POISON_O / _LSE in o and lse). The dense layout gives exactly the
 * buffers the hosts laid out before layouts existed. */
#ifndef KVFUZZ_KERNELS_HOST_LAYOUT_H
#define KVFUZZ_KERNELS_HOST_LAYOUT_H

#include <stdint.h>

#include "kvfuzz/case.h"
#include "kvfuzz/plugin.h"

typedef struct kvf__host_layout {
    kvf_strides s;
    int dense;
    int64_t view;                        /* elements before each view in its allocation */
    int64_t q_elems, o_elems, lse_elems; /* each buffer's elements, the view's offset included */
    int64_t page_elems;                  /* elements of one page in the pools: the page stride */
    int64_t pool_elems;                  /* of each pool: view + P x page_elems */
} kvf__host_layout;

void kvf__host_layout_of(const kvf_case *c, kvf__host_layout *L);

/* The args for this layout: struct size, shape, strides and sm_scale set; pointers NULL for the
 * host to fill (each at its buffer + L->view). */
void kvf__host_layout_args(const kvf__host_layout *L, const kvf_case *c,
                           const kvf_plugin_shape *shape, kvf_plugin_args *args);

/* q's buffer as the kernel must see it (L->q_elems elements). */
void kvf__host_q_image(const kvf_case *c, const kvf__host_layout *L, kvf_bf16 *dst);

/* Page p of cache (k or v) as the kernel must see it, L->page_elems elements: the case's data
 * in the first `used` slots, KVF_HOST_POISON_INPUT in the other slots and the padding. */
void kvf__host_page_image(const kvf_case *c, const kvf__host_layout *L, const kvf_bf16 *cache,
                          int64_t p, int32_t used, kvf_bf16 *dst);

/* The byte an FP8 cache of `dtype` holds for a bf16 image: the image's byte, or for the host's
 * poison (a bf16 NaN no byte names) the dtype's NaN (0x7F for both formats). Both hosts lay FP8
 * pages out from bf16 images this way (docs/plugins.md, "FP8 caches"). */
uint8_t kvf__host_fp8_byte(kvf_bf16 b, int dtype);
void kvf__host_fp8_pack(uint8_t *dst, const kvf_bf16 *src, int64_t n, int dtype);

/* Where element i of a page lies: 1 with its slot, KV head and d, or 0 for padding. */
int kvf__host_page_place(const kvf_case *c, const kvf__host_layout *L, int64_t i, int64_t *slot,
                         int64_t *head, int64_t *d);

/* The outputs out of their buffers (obuf: L->o_elems, lbuf: L->lse_elems) into dense o and
 * lse; then KVF_EOOBWRITE with one sentence when the kernel wrote into the padding or before
 * the view. */
void kvf__host_gather_outputs(const kvf_case *c, const kvf__host_layout *L, const kvf_bf16 *obuf,
                              const float *lbuf, kvf_bf16 *o, float *lse);
int kvf__host_check_output_padding(const kvf_case *c, const kvf__host_layout *L,
                                   const kvf_bf16 *obuf, const float *lbuf, kvf_error *err);

#endif
