#include "kvfuzz/bf16.h"

#include <math.h>

kvf_bf16 kvf_f32_to_bf16_rne(float f) {
    uint32_t u = kvf_f32_bits(f);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu))
        return (kvf_bf16)((u >> 16) | 0x0040u); /* quiet the NaN, keep its sign */
    /* Adding 0x7FFF plus the lowest kept bit rounds half to even on the bit pattern; a carry
     * into the exponent is exactly the step to the next binade (or to inf). */
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7FFFu + lsb;
    return (kvf_bf16)(u >> 16);
}

kvf_bf16 kvf_f32_to_bf16_trunc(float f) {
    uint32_t u = kvf_f32_bits(f);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu))
        return (kvf_bf16)((u >> 16) | 0x0040u);
    return (kvf_bf16)(u >> 16);
}

static double format_ulp(double x, int mant_bits, int emin, int emax) {
    x = fabs(x);
    if (!(x > 0) || isnan(x)) return ldexp(1.0, emin - mant_bits);
    int e;
    frexp(x, &e); /* x = m * 2^e, 0.5 <= m < 1: the binade [2^(e-1), 2^e) */
    int binade = e - 1;
    if (binade < emin) binade = emin;
    if (binade > emax) binade = emax;
    return ldexp(1.0, binade - mant_bits);
}

/* bf16: 7 stored mantissa bits, normal exponents -126..127. f32: 23 bits, same range. */
double kvf_bf16_ulp(double x) {
    return format_ulp(x, 7, -126, 127);
}
double kvf_f32_ulp(double x) {
    return format_ulp(x, 23, -126, 127);
}

/* Maps the sign-magnitude bit pattern onto a monotone integer line where -0 and +0 coincide. */
static int64_t ordered_index(uint32_t bits, uint32_t sign_bit) {
    uint32_t mag = bits & (sign_bit - 1u);
    return (bits & sign_bit) ? -(int64_t)mag : (int64_t)mag;
}

int64_t kvf_bf16_ulp_distance(kvf_bf16 a, kvf_bf16 b) {
    int an = kvf_bf16_is_nan(a), bn = kvf_bf16_is_nan(b);
    if (an || bn) return (an && bn) ? 0 : -1;
    int64_t d = ordered_index(a, 0x8000u) - ordered_index(b, 0x8000u);
    return d < 0 ? -d : d;
}

int64_t kvf_f32_ulp_distance(float a, float b) {
    int an = isnan(a), bn = isnan(b);
    if (an || bn) return (an && bn) ? 0 : -1;
    int64_t d =
        ordered_index(kvf_f32_bits(a), 0x80000000u) - ordered_index(kvf_f32_bits(b), 0x80000000u);
    return d < 0 ? -d : d;
}
