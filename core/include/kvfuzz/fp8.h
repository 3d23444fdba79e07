/* FP8 KV caches (docs/design.md §1, "KV dtypes"): the element types a K or V cache may hold,
 * and exact conversions between FP8 bytes, f32 and bf16.
 *
 * e4m3 is float8_e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; S.1111.111
 * is NaN; largest finite 448, smallest subnormal 2^-9. e5m2: 1 sign, 5 exponent (bias 15), 2
 * mantissa bits; S.11111.00 is +-inf, S.11111.{01,10,11} NaN; largest finite 57344, smallest
 * subnormal 2^-16. Every finite FP8 value of either format is a bf16 value, so a case keeps an
 * FP8 cache as the bf16 images of its bytes (kvf_fp8_to_bf16), and the map is one to one: a NaN
 * byte's image is a bf16 NaN of the same sign whose low mantissa bits are the byte's.
 *
 * Pure functions of their arguments; nothing allocates and nothing fails. */
#ifndef KVFUZZ_FP8_H
#define KVFUZZ_FP8_H

#include <stdint.h>

#include "kvfuzz/bf16.h"

/* A cache's element type; .kvfz files and the plugin ABI store these codes. */
typedef enum kvf_kv_dtype {
    KVF_KV_BF16 = 0,
    KVF_KV_E4M3 = 1,
    KVF_KV_E5M2 = 2,
    KVF_KV_DTYPE_COUNT
} kvf_kv_dtype;

/* "bf16", "e4m3", "e5m2"; "?" for anything else. */
const char *kvf_kv_dtype_name(int dtype);
/* The dtype named `name` ("e4m3" and "float8_e4m3fn" both name e4m3), or -1. */
int kvf_kv_dtype_parse(const char *name);
/* Bytes of one element: 2 for bf16, 1 for FP8. */
static inline int kvf_kv_dtype_bytes(int dtype) {
    return dtype == KVF_KV_BF16 ? 2 : 1;
}
static inline int kvf_kv_dtype_is_fp8(int dtype) {
    return dtype == KVF_KV_E4M3 || dtype == KVF_KV_E5M2;
}

/* The largest finite value: 448 (e4m3), 57344 (e5m2). */
double kvf_fp8_max(int dtype);

/* The byte's value (NaN and, for e5m2, +-inf as such). Exact. */
float kvf_fp8_to_f32(uint8_t x, int dtype);
/* The byte's bf16 image: its value, or for a NaN byte the bf16 NaN that names it. */
kvf_bf16 kvf_fp8_to_bf16(uint8_t x, int dtype);
/* The inverse of kvf_fp8_to_bf16: 1 with the byte when b is an image of one, else 0. */
int kvf_fp8_from_bf16_exact(kvf_bf16 b, int dtype, uint8_t *out);
/* Quantizes f to the nearest FP8 value, ties to even, as a saturating cast does (CUDA's
 * __nv_cvt_float_to_fp8 with __NV_SATFINITE): finite values past the largest go to +-max;
 * +-inf to +-inf for e5m2 and to NaN for e4m3, which has none; NaN to NaN. */
uint8_t kvf_fp8_from_f32(float f, int dtype);

#endif
