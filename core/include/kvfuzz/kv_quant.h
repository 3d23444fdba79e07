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

/* A set of cache dtypes: bit 1 << d for each kvf_kv_dtype d a cache may hold. Generators and
 * mutators take one (kvf_random_opts.kv_dtypes, kvf_mutate_limits.kv_dtypes) to keep every
 * case they make within it; 0 stands for every dtype. A set without bf16 asks for FP8 caches
 * in every case. */
#define KVF_KV_DTYPES_BF16 (1u << KVF_KV_BF16)
#define KVF_KV_DTYPES_FP8 ((1u << KVF_KV_E4M3) | (1u << KVF_KV_E5M2))
#define KVF_KV_DTYPES_ALL (KVF_KV_DTYPES_BF16 | KVF_KV_DTYPES_FP8)
/* The set itself, with 0 read as KVF_KV_DTYPES_ALL. */
static inline unsigned kvf_kv_dtypes_norm(unsigned set) {
    set &= KVF_KV_DTYPES_ALL;
    return set ? set : KVF_KV_DTYPES_ALL;
}
static inline int kvf_kv_dtypes_has(unsigned set, int dtype) {
    return dtype >= 0 && dtype < KVF_KV_DTYPE_COUNT && (kvf_kv_dtypes_norm(set) >> dtype) & 1u;
}
/* The set named `name`: "any" (every dtype), "bf16", "fp8" (e4m3 and e5m2), "e4m3", "e5m2";
 * -1 for any other name. */
int kvf_kv_dtypes_parse(const char *name);
/* The name kvf_kv_dtypes_parse takes for a set ("any" for 0), or "?" for a set it has none
 * for. */
const char *kvf_kv_dtypes_name(unsigned set);

#endif
