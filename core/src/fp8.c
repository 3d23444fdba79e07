/* FP8 conversions (kvfuzz/fp8.h). Values are formed in double, where every FP8 value and every
 * step below is exact. */
#include "kvfuzz/fp8.h"

#include <math.h>
#include <string.h>

typedef struct fp8_format {
    int mbits; /* mantissa bits */
    int bias;
    int emin; /* exponent of the smallest normal */
    int has_inf;
    double max;
} fp8_format;

static const fp8_format formats[KVF_KV_DTYPE_COUNT] = {
    [KVF_KV_E4M3] = {3, 7, -6, 0, 448.0},
    [KVF_KV_E5M2] = {2, 15, -14, 1, 57344.0},
};

const char *kvf_kv_dtype_name(int dtype) {
    switch (dtype) {
    case KVF_KV_BF16:
        return "bf16";
    case KVF_KV_E4M3:
        return "e4m3";
    case KVF_KV_E5M2:
        return "e5m2";
    default:
        return "?";
    }
}

int kvf_kv_dtype_parse(const char *name) {
    if (!name) return -1;
    if (!strcmp(name, "bf16") || !strcmp(name, "bfloat16")) return KVF_KV_BF16;
    if (!strcmp(name, "e4m3") || !strcmp(name, "float8_e4m3fn")) return KVF_KV_E4M3;
    if (!strcmp(name, "e5m2") || !strcmp(name, "float8_e5m2")) return KVF_KV_E5M2;
    return -1;
}

double kvf_fp8_max(int dtype) {
    return kvf_kv_dtype_is_fp8(dtype) ? formats[dtype].max : 0.0;
}

static int byte_is_nan(uint8_t x, const fp8_format *f) {
    uint8_t mag = x & 0x7Fu;
    if (f->has_inf) return (mag >> f->mbits) == 0x1Fu && (mag & ((1u << f->mbits) - 1u));
    return mag == 0x7Fu;
}

static int byte_is_inf(uint8_t x, const fp8_format *f) {
    return f->has_inf && (x & 0x7Fu) == 0x7Cu;
}

float kvf_fp8_to_f32(uint8_t x, int dtype) {
    if (!kvf_kv_dtype_is_fp8(dtype)) return NAN;
    const fp8_format *f = &formats[dtype];
    double sign = (x & 0x80u) ? -1.0 : 1.0;
    if (byte_is_nan(x, f)) return (float)(sign * NAN);
    if (byte_is_inf(x, f)) return (float)(sign * INFINITY);
    int e = (x & 0x7F) >> f->mbits;
    int m = x & ((1 << f->mbits) - 1);
    double v = e == 0 ? ldexp(m, f->emin - f->mbits)
                      : ldexp((double)((1 << f->mbits) | m), e - f->bias - f->mbits);
    return (float)(sign * v);
}

kvf_bf16 kvf_fp8_to_bf16(uint8_t x, int dtype) {
    if (kvf_kv_dtype_is_fp8(dtype) && byte_is_nan(x, &formats[dtype]))
        return (kvf_bf16)(((x & 0x80u) << 8) | 0x7FC0u | (x & 0x3Fu));
    /* Exact: an FP8 value has at most 4 significant bits and an exponent inside bf16's. */
    return kvf_f32_to_bf16_rne(kvf_fp8_to_f32(x, dtype));
}

int kvf_fp8_from_bf16_exact(kvf_bf16 b, int dtype, uint8_t *out) {
    if (!kvf_kv_dtype_is_fp8(dtype)) return 0;
    uint8_t sign = (uint8_t)((b >> 8) & 0x80u);
    if (kvf_bf16_is_nan(b)) {
        /* Only the images kvf_fp8_to_bf16 makes: quiet, payload a NaN byte's low bits. */
        uint8_t x = (uint8_t)(sign | 0x40u | (b & 0x3Fu));
        if ((b & 0x7FC0u) != 0x7FC0u || (b & 0x3Fu) != (x & 0x3Fu)) return 0;
        x = (uint8_t)(sign | (b & 0x7Fu) | 0x40u);
        if (!byte_is_nan(x, &formats[dtype])) return 0;
        *out = x;
        return 1;
    }
    uint8_t x = kvf_fp8_from_f32(kvf_bf16_to_f32(b), dtype);
    if (kvf_fp8_to_bf16(x, dtype) != b) return 0;
    *out = x;
    return 1;
}

uint8_t kvf_fp8_from_f32(float in, int dtype) {
    if (!kvf_kv_dtype_is_fp8(dtype)) return 0;
    const fp8_format *f = &formats[dtype];
    uint8_t sign = signbit(in) ? 0x80u : 0;
    uint8_t nan = (uint8_t)(sign | 0x7Fu);
    if (isnan(in)) return nan;
    if (isinf(in)) return f->has_inf ? (uint8_t)(sign | 0x7Cu) : nan;
    double a = fabs((double)in);
    int e = a > 0 ? ilogb(a) : f->emin;
    if (e < f->emin) e = f->emin;
    double quantum = ldexp(1.0, e - f->mbits);
    double v = nearbyint(a / quantum) * quantum; /* ties to even: the default rounding mode */
    if (v > f->max) v = f->max;
    if (v == 0) return sign;
    int ev = ilogb(v);
    if (ev < f->emin) return (uint8_t)(sign | (int)ldexp(v, f->mbits - f->emin));
    int m = (int)ldexp(v, f->mbits - ev) - (1 << f->mbits);
    return (uint8_t)(sign | ((ev + f->bias) << f->mbits) | m);
}
