/* Double-precision building blocks of the oracle's fast path, each with a proven error bound
 * (docs/oracle.md, "The fast path", F2-F4). u = 2^-53 is the unit roundoff of double; every
 * function assumes the default rounding mode (round to nearest even) and IEEE double
 * evaluation (FLT_EVAL_METHOD 0, no contraction into fused operations beyond what the bounds
 * allow: the bounds hold whether or not a multiply-add is fused).
 *
 * The constants (the 2^(j/64) table, ln 2 split for the reduction, series coefficients) are
 * computed once with MPFR, correctly rounded, by kvf__fm_init(); call it before the others. */
#ifndef KVFUZZ_ORACLE_FASTMATH_H
#define KVFUZZ_ORACLE_FASTMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kvfuzz/bf16.h"

#define KVF__U 0x1p-53 /* unit roundoff of double */

/* e^x for x in [-701, 0]: relative error at most KVF__EXP_ERR (F2). */
#define KVF__EXP_ERR (16 * KVF__U)
/* ln(1 + r) for r in [0, 1/2] and the series part of ln z: relative error at most
 * KVF__SERIES_ERR (F3). */
#define KVF__SERIES_ERR (32 * KVF__U)

typedef struct kvf__fm_consts {
    double t2[64];     /* RN(2^(j/64)) */
    double inv_l;      /* RN(64 / ln 2) */
    double l_hi, l_lo; /* l_hi = RN_36(ln 2 / 64), l_lo = RN(ln 2 / 64 - l_hi) */
    double ec[7];      /* RN(1 / i!) */
    double lc[14];     /* RN(1 / (2i + 1)) */
    double ln2, log2e; /* RN(ln 2), RN(1 / ln 2) */
} kvf__fm_consts;

extern kvf__fm_consts kvf__fm;

/* Fills kvf__fm once (thread-safe). */
void kvf__fm_init(void);

static inline double kvf__fm_pow2i(int m) { /* 2^m for m in [-1022, 1023], exact */
    uint64_t b = (uint64_t)(m + 1023) << 52;
    double r;
    memcpy(&r, &b, sizeof r);
    return r;
}

/* The neighbours of a finite double (the next one up / down on the line, -0 and +0 being the
 * same point); infinities and NaN are returned unchanged. */
static inline double kvf__next_up(double x) {
    if (x != x || x == (double)INFINITY) return x;
    if (x == 0) return 0x1p-1074;
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    b = x > 0 ? b + 1 : b - 1;
    memcpy(&x, &b, sizeof b);
    return x;
}
static inline double kvf__next_down(double x) {
    return -kvf__next_up(-x);
}

/* Exponent of the lowest set bit of a finite nonzero double: x is an odd integer times 2^result. */
static inline int kvf__lsb_exp(double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    int ef = (int)((b >> 52) & 0x7FFu);
    uint64_t m = b & ((UINT64_C(1) << 52) - 1);
    int e = ef ? ef - 1075 : -1074;
    if (ef) m |= UINT64_C(1) << 52;
    while (!(m & 1)) {
        m >>= 1;
        e++;
    }
    return e;
}

/* e^x, x in [-701, 0]. x = n ln2/64 + r with n = RN(64 x / ln 2), |n| < 2^16, so n l_hi is
 * exact (36 + 16 bits) and |r| <= 0.00543; e^r by its degree-6 Taylor polynomial (Horner);
 * e^x = 2^(n div 64) * 2^((n mod 64)/64) * e^r. */
static inline double kvf__exp(double x) {
    const kvf__fm_consts *k = &kvf__fm;
    double nd = x * k->inv_l;
    nd = (nd + 0x1.8p52) - 0x1.8p52; /* nearest integer: |nd| < 2^51 */
    int n = (int)nd;
    double r = (x - nd * k->l_hi) - nd * k->l_lo;
    double p = k->ec[6];
    p = p * r + k->ec[5];
    p = p * r + k->ec[4];
    p = p * r + k->ec[3];
    p = p * r + k->ec[2];
    p = p * r + 1.0;
    p = p * r + 1.0;
    int j = n & 63;
    int m = (n - j) / 64; /* exact: n - j is a multiple of 64; m >= -1012 */
    return (k->t2[j] * p) * kvf__fm_pow2i(m);
}

/* 2 atanh(s) = 2 s sum_i s^(2i) / (2i + 1), |s| <= 0.2, to s^27. */
static inline double kvf__atanh2(double s) {
    const kvf__fm_consts *k = &kvf__fm;
    double t = s * s;
    double q = k->lc[13];
    for (int i = 12; i >= 0; i--)
        q = q * t + k->lc[i];
    return (2 * s) * q;
}

/* ln(1 + r), r in [0, 1/2]: 2 atanh(r / (2 + r)); relative error <= KVF__SERIES_ERR. */
static inline double kvf__log1p_small(double r) {
    return kvf__atanh2(r / (2.0 + r));
}

/* ln z, z >= 1 finite: z = 2^e f with f in [sqrt(1/2), sqrt(2)), ln z = e ln2 + 2 atanh(s),
 * s = (f - 1)/(f + 1). *err receives an upper bound on |result - ln z| (F3). */
double kvf__log_ge1(double z, double *err);

/* Correct rounding of a double to bf16, round to nearest even, IEEE subnormals and overflow
 * to +-inf; the sign of a result that rounds to zero is kept. Non-finite x: not used. */
static inline kvf_bf16 kvf__bf16_rne(double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    uint64_t sign = b >> 63;
    double a = x < 0 ? -x : x;
    uint32_t mag;
    if (a >= 0x1p-126) {
        /* Normal in bf16: keep 7 of the 52 fraction bits, ties to even, by adding just under
         * half of the dropped unit plus the kept lsb; a carry moves into the exponent, which
         * is the right rounding of the next binade. */
        uint64_t ab = b & ~((uint64_t)1 << 63);
        uint64_t lsb = (ab >> 45) & 1u;
        ab += ((uint64_t)1 << 44) - 1 + lsb;
        ab &= ~(((uint64_t)1 << 45) - 1);
        int e = (int)(ab >> 52) - 1023; /* value = 1.f * 2^e */
        if (e > 127) {
            mag = 0x7F80u;
        } else {
            uint32_t frac = (uint32_t)((ab >> 45) & 0x7Fu);
            mag = ((uint32_t)(e + 127) << 7) | frac;
        }
    } else {
        /* Subnormal range: the quantum is 2^-133; a * 2^133 < 2^7 is exact and rounding it to
         * an integer with the 2^52 trick is round to nearest even. A result of 128 is the
         * smallest normal, whose bits are 0x0080 = 128 as well. */
        double y = a * 0x1p133;
        double ri = (y + 0x1p52) - 0x1p52;
        mag = (uint32_t)ri;
    }
    return (kvf_bf16)((sign << 15) | mag);
}

/* Correct rounding of a double to f32, round to nearest even, IEEE subnormals, and overflow
 * to +-inf from 2^128 - 2^103 (half an ulp above the largest float) up, stated here rather
 * than left to the conversion of an out-of-range value. */
static inline float kvf__f32_rne(double x) {
    if (x >= 0x1.ffffffp127) return (float)INFINITY;
    if (x <= -0x1.ffffffp127) return -(float)INFINITY;
    return (float)x;
}

#endif
