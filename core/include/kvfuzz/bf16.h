/* bfloat16 and float32 bit helpers: conversions, ulps and ordered distances.
 *
 * Everything here is a pure function of its arguments; nothing allocates and nothing fails.
 * bf16 values travel as their raw bits (kvf_bf16) so that NaN payloads, -0 and subnormals
 * survive every copy exactly. */
#ifndef KVFUZZ_BF16_H
#define KVFUZZ_BF16_H

#include <stdint.h>
#include <string.h>

typedef uint16_t kvf_bf16;

#define KVF_BF16_POS_INF ((kvf_bf16)0x7F80u)
#define KVF_BF16_NEG_INF ((kvf_bf16)0xFF80u)
#define KVF_BF16_QNAN ((kvf_bf16)0x7FC0u)
#define KVF_BF16_MAX ((kvf_bf16)0x7F7Fu)

static inline uint32_t kvf_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float kvf_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Exact: every bf16 is a float32 with the low 16 bits zero. */
static inline float kvf_bf16_to_f32(kvf_bf16 h) {
    return kvf_f32_from_bits((uint32_t)h << 16);
}

static inline int kvf_bf16_is_nan(kvf_bf16 h) {
    return (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu);
}
static inline int kvf_bf16_is_inf(kvf_bf16 h) {
    return (h & 0x7FFFu) == 0x7F80u;
}
static inline int kvf_bf16_is_finite(kvf_bf16 h) {
    return (h & 0x7F80u) != 0x7F80u;
}

/* Round to nearest, ties to even, as IEEE 754 and every CUDA __float2bfloat16 does. NaN stays
 * NaN (quieted, sign kept); overflow goes to +-inf; subnormals are rounded, not flushed. */
kvf_bf16 kvf_f32_to_bf16_rne(float f);
/* Truncation (round toward zero on the bits); the classic wrong store. NaN stays NaN. */
kvf_bf16 kvf_f32_to_bf16_trunc(float f);

/* Size of one unit in the last place of a bf16 / f32 value of magnitude |x| (for |x| below the
 * smallest normal, the subnormal spacing). For |x| beyond the format's range, the ulp of its
 * largest binade. */
double kvf_bf16_ulp(double x);
double kvf_f32_ulp(double x);

/* Number of representable values between a and b counted on the ordered line, -0 == +0.
 * Returns -1 when exactly one side is NaN; NaN to NaN is 0. Infinities are one step past the
 * largest finite value. */
int64_t kvf_bf16_ulp_distance(kvf_bf16 a, kvf_bf16 b);
int64_t kvf_f32_ulp_distance(float a, float b);

#endif
