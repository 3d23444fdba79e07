/* One bf16 tensor-core MMA step in software, as docs/strict-rule.md (K2) describes the H200's:
 * the accumulator c plus 16 exact bf16 products, each term truncated toward zero to the grid
 * 2^(E - 25), E the largest of the terms' exponents (a product's taken as the sum of its
 * factors' exponents), summed exactly, the sum truncated toward zero to 24 bits. With
 * MMA_EXP_SUM and MMA_TRUNC_ZERO it matches the H200 bit for bit (test_mma_model.c compares the
 * four variants with the device); test_fa_legitimate.c runs a legitimate kernel on it. Header-only
 * (static functions) for tests. */
#ifndef KVFUZZ_TESTS_MMA_EMULATION_H
#define KVFUZZ_TESTS_MMA_EMULATION_H

#include <math.h>
#include <stdint.h>

/* Where the largest term's exponent comes from: its value (TRUE), or for a product the sum of
 * its factors' exponents (SUM, as an adder that aligns before normalising the products would);
 * and which way a term's bits below the grid go. */
typedef enum mma_exp_kind { MMA_EXP_TRUE, MMA_EXP_SUM } mma_exp_kind;
typedef enum mma_trunc_kind { MMA_TRUNC_ZERO, MMA_TRUNC_FLOOR } mma_trunc_kind;

static int mma_ilogb(double x) { /* floor(log2 |x|) for x != 0 */
    int e;
    frexp(x, &e);
    return e - 1;
}

/* c + sum_i a[i] b[i] over 16 terms. Exact in double: each truncated term is below 2^27 grid
 * steps, so 17 of them sum exactly in 53 bits. Products of two bf16 values are exact. */
static float mma_step_emulated(float c, const float *a, const float *b, mma_exp_kind ek,
                               mma_trunc_kind tk) {
    double t[17];
    int e[17], n = 0, emax = INT32_MIN;
    t[n] = c, e[n] = c != 0 ? mma_ilogb(c) : INT32_MIN, n++;
    for (int i = 0; i < 16; i++, n++) {
        t[n] = (double)a[i] * (double)b[i];
        if (t[n] == 0)
            e[n] = INT32_MIN;
        else
            e[n] = ek == MMA_EXP_SUM ? mma_ilogb(a[i]) + mma_ilogb(b[i]) : mma_ilogb(t[n]);
    }
    for (int i = 0; i < n; i++)
        emax = e[i] > emax ? e[i] : emax;
    if (emax == INT32_MIN) return c + 0.0f; /* every term zero: +0 unless c is -0 */
    const double grid = ldexp(1.0, emax - 25);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += (tk == MMA_TRUNC_ZERO ? trunc(t[i] / grid) : floor(t[i] / grid)) * grid;
    float f = (float)sum;
    if (fabs((double)f) > fabs(sum)) f = nextafterf(f, 0.0f);
    return f;
}

#endif
