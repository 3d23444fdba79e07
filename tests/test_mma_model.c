/* The bf16 tensor-core MMA (mma.sync m16n8k16, fp32 accumulator) measured against exact sums:
 * how it rounds, aligns and treats subnormals (printed and asserted, docs/strict-rule.md
 * section 2, K2); the per-MMA error bound that strict's model of a tensor-core dot product
 * assumes, and the software model of tests/mma_emulation.h bit for bit, both on adversarial and
 * random operands. Skips (exit 77) without a CUDA device. */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "kvfuzz/judge.h"
#include "mma_emulation.h"
#include "mma_probe.h"

typedef __float128 quad;

static quad qabs(quad x) {
    return x < 0 ? -x : x;
}

static uint16_t bf16_make(int sign, int exp, int mant7) { /* value (1 + mant7/128) * 2^exp */
    return (uint16_t)((sign ? 0x8000u : 0u) | (unsigned)(exp + 127) << 7 | (unsigned)mant7);
}
static float bf16_value(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

typedef struct problems {
    int n;
    uint16_t *A, *B;
    float *C, *D;
} problems;

static int problems_alloc(problems *p, int n) {
    p->n = n;
    p->A = calloc((size_t)n * 256, 2), p->B = calloc((size_t)n * 128, 2);
    p->C = calloc((size_t)n * 128, 4), p->D = calloc((size_t)n * 128, 4);
    return p->A && p->B && p->C && p->D ? 0 : -1;
}
static void problems_free(problems *p) {
    free(p->A), free(p->B), free(p->C), free(p->D);
}

/* Exact D[m][n] (quad: every product has 16 significant bits and the generators keep the
 * exponents within 80 bits of each other, so 113 bits hold the sum exactly), and the sum of the
 * magnitudes of its 17 terms. */
static quad exact_elem(const problems *p, int prob, int m, int n, quad *abs_sum) {
    const uint16_t *a = p->A + (size_t)prob * 256, *b = p->B + (size_t)prob * 128;
    quad s = p->C[(size_t)prob * 128 + m * 8 + n], as = qabs(s);
    for (int k = 0; k < 16; k++) {
        const quad t = (quad)bf16_value(a[m * 16 + k]) * (quad)bf16_value(b[k * 8 + n]);
        s += t, as += qabs(t);
    }
    *abs_sum = as;
    return s;
}

static int run(problems *p) {
    char why[256];
    if (kvf_test_mma_bf16(p->A, p->B, p->C, p->D, p->n, why, sizeof why) != 0) {
        CHECK_FAIL_AT("%s", why);
        return -1;
    }
    return 0;
}

static int no_gpu(void) {
    problems p;
    char why[256];
    if (problems_alloc(&p, 1) != 0) return 1;
    const int rc = kvf_test_mma_bf16(p.A, p.B, p.C, p.D, 1, why, sizeof why);
    problems_free(&p);
    if (rc != 0) printf("no usable CUDA device: %s\n", why);
    return rc != 0;
}

/* One product of `big` (row 0, k 0), `count` products of `small` each, accumulator c: D[0][0]. */
static float one_sum(float c, int big_exp, int count, int small_exp, int small_mant7) {
    problems p;
    if (problems_alloc(&p, 1) != 0) return NAN;
    p.C[0] = c;
    p.A[0] = bf16_make(0, 0, 0);
    p.B[0] = big_exp > -200 ? bf16_make(0, big_exp, 0) : 0;
    for (int k = 1; k <= count && k < 16; k++) {
        p.A[k] = bf16_make(0, 0, 0);
        p.B[k * 8] = bf16_make(0, small_exp, small_mant7);
    }
    const float d = run(&p) == 0 ? p.D[0] : NAN;
    problems_free(&p);
    return d;
}

/* The measured behaviour, printed and asserted: the normalized result is truncated, and the
 * adder keeps two bits below the largest term's 24-bit significand (1 + 15 x 2^-25 keeps 3 of
 * its 3.75 ulps, 1 + 15 x 2^-26 none of its 1.875), whether the largest term is a product or
 * the accumulator. */
static void characterize(void) {
    if (no_gpu()) CHECK_SKIP("no usable CUDA device");
    const float up = one_sum(1.0f, -200, 1, -24, 64); /* 1 + 0.75 ulp */
    printf("1 + 0.75 ulp(1) (accumulator 1, one product) -> 1 + %.3g ulp: %s\n",
           (up - 1.0f) / 0x1p-23f, up == 1.0f ? "rounded toward zero" : "rounded up");
    CHECK_DBL_EQ(up, 1.0f);
    static const double kept[9] = {15, 7, 3, 0, 0, 0, 0, 0, 0};
    for (int j = 0; j <= 8; j++) {
        const float r = one_sum(0.0f, 0, 15, -23 - j, 0);
        const float rc = one_sum(1.0f, -200, 15, -23 - j, 0);
        printf("1 + 15 x 2^-%d: product 1 -> 1 + %.4g ulp, accumulator 1 -> 1 + %.4g ulp "
               "(exact %.4g)\n",
               23 + j, (r - 1.0f) / 0x1p-23f, (rc - 1.0f) / 0x1p-23f, 15.0 / (1 << j));
        CHECK_DBL_EQ((r - 1.0f) / 0x1p-23f, kept[j]);
        CHECK_DBL_EQ((rc - 1.0f) / 0x1p-23f, kept[j]);
    }
    /* The accumulator's own low bits when a product is larger: c = 1 + 2^-23 + ..., product 2. */
    const float c = 1.0f + 0x1p-23f;
    const float r = one_sum(c, 1, 0, 0, 0);
    printf("2 + (1 + 2^-23): %.9g (exact 3.00000012, RZ in 24 bits 3)\n", r);
    /* Subnormal operands and results: kept, not flushed. */
    problems p;
    if (problems_alloc(&p, 1) != 0) return;
    p.A[0] = 8;                     /* bf16 subnormal 8/128 * 2^-126 = 2^-130 */
    p.B[0] = bf16_make(0, 100, 0);  /* 2^100 */
    p.A[16] = bf16_make(0, -70, 0); /* row 1: 2^-70 * 2^-70 = 2^-140 */
    p.B[1] = bf16_make(0, -70, 0);
    p.A[32] = bf16_make(0, -70, 0); /* row 2, column 2: 2^-70 * 2^-57 = 2^-127 */
    p.B[2] = bf16_make(0, -57, 0);
    p.C[3 * 8 + 3] = 0x1p-140f; /* row 3, column 3: a subnormal accumulator */
    if (run(&p) == 0) {
        printf("subnormal bf16 x 2^100: %a (exact 0x1p-30); 2^-70 x 2^-70: %a (exact 0x1p-140); "
               "2^-70 x 2^-57: %a (exact 0x1p-127); accumulator 2^-140 + 0: %a\n",
               p.D[0], p.D[1 * 8 + 1], p.D[2 * 8 + 2], p.D[3 * 8 + 3]);
        CHECK_DBL_EQ(p.D[0], 0x1p-30);
        CHECK_DBL_EQ(p.D[1 * 8 + 1], 0x1p-140);
        CHECK_DBL_EQ(p.D[2 * 8 + 2], 0x1p-127);
        CHECK_DBL_EQ(p.D[3 * 8 + 3], 0x1p-140);
    }
    problems_free(&p);
}

/* Per-MMA error / (|c| + sum |products|), in units of 2^-24, over operands built to lose the
 * most to truncation (all-ones significands just below the largest term's alignment) and over
 * random operands of wide exponent spread, both signs. */
static void per_mma_bound(void) {
    if (no_gpu()) CHECK_SKIP("no usable CUDA device");
    const int n = 40000;
    problems p;
    CHECK(problems_alloc(&p, n) == 0);
    uint64_t st = 0x9e3779b97f4a7c15ull;
    for (int prob = 0; prob < n; prob++) {
        const int kind = prob % 4;
        for (int i = 0; i < 256; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            const uint32_t r = (uint32_t)(st >> 32);
            int e, sign = kind == 3 ? (int)(r & 1) : 0, mant = (int)(r >> 1 & 127);
            if (kind == 0)
                e = -(int)(r >> 8 & 31), mant = 127; /* all ones, spread 31 */
            else
                e = (int)(r >> 8 & 63) - 32;                  /* random, spread 63 */
            if (kind == 1 && (i & 15) == 0) e = 20, mant = 0; /* one dominant term */
            p.A[(size_t)prob * 256 + i] = bf16_make(sign, e / 2, mant);
            if (i < 128) p.B[(size_t)prob * 128 + i] = bf16_make(sign && (r & 2), e - e / 2, mant);
        }
        for (int i = 0; i < 128; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            const uint32_t r = (uint32_t)(st >> 32);
            const float f =
                ldexpf(1.0f + (float)(r & 0x7fffff) * 0x1p-23f, (int)(r >> 24 & 31) - 16);
            p.C[(size_t)prob * 128 + i] = kind == 2 ? 0.0f : (r & 1) && kind == 3 ? -f : f;
        }
    }
    if (run(&p) == 0) {
        double worst[4] = {0};
        long above[4] = {0}, below[4] = {0}, differ[4] = {0};
        for (int prob = 0; prob < n; prob++)
            for (int m = 0; m < 16; m++)
                for (int c = 0; c < 8; c++) {
                    quad as;
                    const quad x = exact_elem(&p, prob, m, c, &as);
                    const float dv = p.D[(size_t)prob * 128 + m * 8 + c];
                    const quad d = dv;
                    const double err = (double)qabs(d - x);
                    const int k = prob % 4;
                    if (as > 0 && err / (double)as / 0x1p-24 > worst[k])
                        worst[k] = err / (double)as / 0x1p-24;
                    if (x != 0 && (double)(qabs(d) - qabs(x)) > 0) above[k]++;
                    if (x != 0 && (double)(qabs(d) - qabs(x)) < 0) below[k]++;
                    /* The software model, every way it could align and truncate. */
                    float a[16], b[16];
                    for (int i = 0; i < 16; i++) {
                        a[i] = bf16_value(p.A[(size_t)prob * 256 + m * 16 + i]);
                        b[i] = bf16_value(p.B[(size_t)prob * 128 + i * 8 + c]);
                    }
                    const float cv = p.C[(size_t)prob * 128 + m * 8 + c];
                    for (int v = 0; v < 4; v++) {
                        const float e = mma_step_emulated(cv, a, b, (mma_exp_kind)(v / 2),
                                                          (mma_trunc_kind)(v % 2));
                        if (memcmp(&e, &dv, 4) != 0) differ[v]++;
                    }
                }
        for (int k = 0; k < 4; k++) {
            printf("kind %d: worst |d - x| / (|c| + sum|a b|) = %.3f u; |d| > |x| %ld, |d| < |x| "
                   "%ld\n",
                   k, worst[k], above[k], below[k]);
            CHECK(worst[k] <= KVF_STRICT_MMA_EPS_U);
        }
        static const char *const variant[4] = {
            "value exponent, toward zero", "value exponent, toward -inf",
            "exponent sum, toward zero", "exponent sum, toward -inf"};
        for (int v = 0; v < 4; v++)
            printf("emulation (%s): %ld of %ld elements differ\n", variant[v], differ[v],
                   (long)n * 128);
        /* The model docs/strict-rule.md states, and test_fa_rule.c emulates. */
        CHECK_INT_EQ(differ[MMA_EXP_SUM * 2 + MMA_TRUNC_ZERO], 0);
    }
    problems_free(&p);
}

static const check_test tests[] = {
    {"characterize", characterize}, {"per_mma_bound", per_mma_bound}, {NULL, NULL}};
CHECK_MAIN(tests)
