/* Quantized KV caches (docs/design.md §1, "KV dtypes and scales"): which element type each cache
 * holds and how its f32 scales are laid out. The dequantized values are exact:
 *     k_t,g,d = k_scale[i] * kfp8_t,g,d     v_t,g,d = v_scale[i] * vfp8_t,g,d
 * with i the scale index of (token t, KV head g) under the granularity, and then the operation
 * is the bf16 one. Scales come with FP8 caches only: a case with scales has both caches in e4m3
 * or e5m2 (they may differ); one without may mix bf16 and FP8 caches.
 *
 * Plain data, no ownership. Errors: kvf_kv_quant_check gives KVF_EINVAL with one sentence
 * naming the field out of range. */
#ifndef KVFUZZ_KV_QUANT_H
#define KVFUZZ_KV_QUANT_H

#include <stdint.h>

#include "kvfuzz/error.h"
#include "kvfuzz/fp8.h"

/* Where the scales live. Codes as .kvfz files and the plugin ABI store them. */
typedef enum kvf_scale_granularity {
    KVF_SCALE_NONE = 0,   /* no scales: every scale is 1 */
    KVF_SCALE_TENSOR = 1, /* one k_scale, one v_scale */
    KVF_SCALE_HEAD = 2,   /* [Hk] each */
    KVF_SCALE_TOKEN = 3,  /* [P][S][Hk] each: per page slot and KV head, beside the cache */
    KVF_SCALE_GRANULARITY_COUNT
} kvf_scale_granularity;

typedef struct kvf_kv_quant {
    uint8_t k_dtype;     /* kvf_kv_dtype */
    uint8_t v_dtype;     /* kvf_kv_dtype */
    uint8_t granularity; /* kvf_scale_granularity */
} kvf_kv_quant;

/* "none", "tensor", "head", "token"; "?" for anything else. */
const char *kvf_scale_granularity_name(int granularity);
/* The granularity named `name`, or -1. */
int kvf_scale_granularity_parse(const char *name);
/* 1 when q is all zero: bf16 caches without scales, as every case was before FP8. */
int kvf_kv_quant_is_plain(const kvf_kv_quant *q);
/* The fields in their domains. */
int kvf_kv_quant_check(const kvf_kv_quant *q, kvf_error *err);
/* Scales per cache for a shape: 0, 1, Hk or P x S x Hk. */
int64_t kvf_kv_quant_scale_count(const kvf_kv_quant *q, int32_t num_kv_heads, int32_t page_size,
                                 int64_t num_pages);
/* "bf16", "k e4m3 v e5m2 scales per head": for messages. */
void kvf_kv_quant_text(const kvf_kv_quant *q, char *buf, size_t size);

#endif
