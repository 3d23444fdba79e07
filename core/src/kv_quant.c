/* The KV caches' dtypes and scale layout (kvfuzz/kv_quant.h). */
#include "kvfuzz/kv_quant.h"

#include <stdio.h>
#include <string.h>

static const char *const granularity_names[KVF_SCALE_GRANULARITY_COUNT] = {"none", "tensor", "head",
                                                                           "token"};

const char *kvf_scale_granularity_name(int granularity) {
    return granularity >= 0 && granularity < KVF_SCALE_GRANULARITY_COUNT
               ? granularity_names[granularity]
               : "?";
}

int kvf_scale_granularity_parse(const char *name) {
    for (int i = 0; name && i < KVF_SCALE_GRANULARITY_COUNT; i++)
        if (!strcmp(name, granularity_names[i])) return i;
    return -1;
}

int kvf_kv_quant_is_plain(const kvf_kv_quant *q) {
    return q->k_dtype == KVF_KV_BF16 && q->v_dtype == KVF_KV_BF16 &&
           q->granularity == KVF_SCALE_NONE;
}

int kvf_kv_quant_check(const kvf_kv_quant *q, kvf_error *err) {
    if (q->k_dtype >= KVF_KV_DTYPE_COUNT)
        return kvf_error_set(err, KVF_EINVAL, "the k cache's dtype code %u is not 0..%d",
                             q->k_dtype, KVF_KV_DTYPE_COUNT - 1);
    if (q->v_dtype >= KVF_KV_DTYPE_COUNT)
        return kvf_error_set(err, KVF_EINVAL, "the v cache's dtype code %u is not 0..%d",
                             q->v_dtype, KVF_KV_DTYPE_COUNT - 1);
    if (q->granularity >= KVF_SCALE_GRANULARITY_COUNT)
        return kvf_error_set(err, KVF_EINVAL, "the scale granularity code %u is not 0..%d",
                             q->granularity, KVF_SCALE_GRANULARITY_COUNT - 1);
    if (q->granularity != KVF_SCALE_NONE &&
        !(kvf_kv_dtype_is_fp8(q->k_dtype) && kvf_kv_dtype_is_fp8(q->v_dtype)))
        return kvf_error_set(err, KVF_EINVAL,
                             "scales dequantize FP8 caches: with %s scales both caches must be "
                             "e4m3 or e5m2, not k %s and v %s",
                             kvf_scale_granularity_name(q->granularity),
                             kvf_kv_dtype_name(q->k_dtype), kvf_kv_dtype_name(q->v_dtype));
    return 0;
}

int64_t kvf_kv_quant_scale_count(const kvf_kv_quant *q, int32_t num_kv_heads, int32_t page_size,
                                 int64_t num_pages) {
    switch (q->granularity) {
    case KVF_SCALE_TENSOR:
        return 1;
    case KVF_SCALE_HEAD:
        return num_kv_heads;
    case KVF_SCALE_TOKEN:
        return num_pages * page_size * num_kv_heads;
    default:
        return 0;
    }
}

void kvf_kv_quant_text(const kvf_kv_quant *q, char *buf, size_t size) {
    if (kvf_kv_quant_is_plain(q)) {
        snprintf(buf, size, "bf16");
        return;
    }
    snprintf(buf, size, "k %s v %s scales %s", kvf_kv_dtype_name(q->k_dtype),
             kvf_kv_dtype_name(q->v_dtype), kvf_scale_granularity_name(q->granularity));
}

static const struct {
    const char *name;
    unsigned set;
} dtype_sets[] = {{"any", KVF_KV_DTYPES_ALL},
                  {"bf16", KVF_KV_DTYPES_BF16},
                  {"fp8", KVF_KV_DTYPES_FP8},
                  {"e4m3", 1u << KVF_KV_E4M3},
                  {"e5m2", 1u << KVF_KV_E5M2}};

int kvf_kv_dtypes_parse(const char *name) {
    for (size_t i = 0; name && i < sizeof dtype_sets / sizeof dtype_sets[0]; i++)
        if (!strcmp(name, dtype_sets[i].name)) return (int)dtype_sets[i].set;
    return -1;
}

const char *kvf_kv_dtypes_name(unsigned set) {
    set = kvf_kv_dtypes_norm(set);
    for (size_t i = 0; i < sizeof dtype_sets / sizeof dtype_sets[0]; i++)
        if (dtype_sets[i].set == set) return dtype_sets[i].name;
    return "?";
}
