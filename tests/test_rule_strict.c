/* Unit tests for the strict rule (oracle/src/rules/strict.c): the correctly rounded value
 * passes, the bound on short, long and very long rows, the docs' worked example, empty and
 * non-finite rows. */
#include "judge_fixtures.h"

/* ------------------------------------------------------------------------------------------ */
/* strict                                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* The correctly rounded value always passes: |RN(x) - x| <= half an ulp <= the bound. Swept over
 * magnitudes (bf16 subnormals included), conditioning, lengths and values near midpoints. */
static void test_strict_rounded_passes(void) {
    fx f;
    fx_init(&f, 1, 1, 128, 1);
    static const int64_t lens[] = {1, 2, 37, 3264, 100000};
    static const double cond_factor[] = {1.0, 1.5, 30.0};
    uint64_t s = 0x9E3779B97F4A7C15ull;
    int64_t checked = 0;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        f.orc.rows[0].length = lens[li];
        f.orc.rows[0].dot_abs_max = 10.0;
        f.orc.rows[0].logit_abs_max = 4.0;
        f.orc.rows[0].v_abs_max = 1e4;
        for (int e = -135; e <= 12; e++) {
            for (int k = 0; k < 6; k++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                double m = 1.0 + (double)(s >> 11) * 0x1p-53; /* [1, 2) */
                if (k == 0) m = 1.0 + 0x1p-8;                 /* a bf16 midpoint (tie) */
                if (k == 1) m = 1.0 + 0x1p-8 - 0x1p-40;       /* just below one */
                double x = ldexp(m, e);
                for (size_t ci = 0; ci < 3; ci++) {
                    fx_set_o(&f, 0, x, x * cond_factor[ci]);
                    double bound = kvf_strict_bound_o(&f.c, &f.orc, 0, 0, 0);
                    double err = fabs(bf(f.orc.o_rounded[0]) - x);
                    if (!(err <= bound))
                        CHECK_FAIL_AT("RN(%a) = %a misses the bound %a (L=%lld)", x,
                                      bf(f.orc.o_rounded[0]), bound, (long long)lens[li]);
                    checked++;
                }
            }
        }
    }
    CHECK(checked > 1000);
    /* And through the whole judge, o and lse together. */
    fx_free(&f);
    fx_init(&f, 2, 3, 16, 3264);
    for (int64_t i = 0; i < fx_elems(&f); i++)
        fx_set_o(&f, i, 0.03 + 0.001 * (double)i, 0.8);
    for (int64_t r = 0; r < fx_rows(&f); r++)
        fx_set_lse(&f, r, 12.4 + 0.37 * (double)r);
    CHECK_VERDICT(&f, "strict", 1, KVF_FINDING_NONE);
    fx_free(&f);
}

/* Short sequence, C close to |x|: the bound is barely more than half an ulp, so one ulp off
 * (or a truncating store) fires while the correctly rounded value passes. */
static void test_strict_short_sequence(void) {
    fx f;
    fx_init(&f, 1, 1, 128, 2);
    f.orc.rows[0].v_abs_max = 1.1;
    double x = 1.0 + 0.3 * 0x1p-7;
    fx_set_o(&f, 0, x, x);
    CHECK_HEX_EQ(f.orc.o_rounded[0], 0x3F80u); /* r = 1.0 */
    CHECK_VERDICT(&f, "strict", 1, KVF_FINDING_NONE);
    double bound = kvf_strict_bound_o(&f.c, &f.orc, 0, 0, 0);
    CHECK(bound >= 0x1p-8 && bound < 1.05 * 0x1p-8);
    f.o[0] = 0x3F81u; /* one ulp above r */
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_O_TOLERANCE);
    kvf_verdict v = fx_judge(&f, "strict");
    CHECK(v.o.worst[0].margin > 1.35); /* 0.7 ulp off vs a bound of ~0.5 ulp */
    CHECK_DBL_EQ(v.o.worst[0].allowed, bound);
    CHECK_DBL_EQ(v.o.worst[0].exact_value, x);
    f.o[0] = 0x3F7Fu; /* one ulp below r */
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_O_TOLERANCE);
    /* Truncation instead of round to nearest: x = 1 + 0.7 ulp rounds up, truncates down. */
    x = 1.0 + 0.7 * 0x1p-7;
    fx_set_o(&f, 0, x, x);
    CHECK_HEX_EQ(f.orc.o_rounded[0], 0x3F81u);
    CHECK_VERDICT(&f, "strict", 1, KVF_FINDING_NONE);
    f.o[0] = kvf_f32_to_bf16_trunc((float)x);
    CHECK_HEX_EQ(f.o[0], 0x3F80u);
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_O_TOLERANCE);
    /* lse: a correct value passes, one 1e-3 off does not. */
    fx_set_o(&f, 0, 0.5, 0.5);
    fx_set_lse(&f, 0, 5.3);
    CHECK_VERDICT(&f, "strict", 1, KVF_FINDING_NONE);
    f.lse[0] = nextafterf(f.lse[0], 10.0f);
    CHECK_VERDICT(&f, "strict", 1, KVF_FINDING_NONE);
    f.lse[0] = (float)(5.3 + 1e-3);
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_LSE_TOLERANCE);
    /* Natural-log lse where base 2 is specified. */
    f.lse[0] = (float)(5.3 * 0.6931471805599453);
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_LSE_TOLERANCE);
    fx_free(&f);
}

static double bound_at(fx *f, int64_t L, double A, double cond, double x) {
    f->orc.rows[0].length = L;
    f->orc.rows[0].dot_abs_max = A;
    f->orc.o_exact[0] = x;
    f->orc.o_cond[0] = cond;
    return kvf_strict_bound_o(&f->c, &f->orc, 0, 0, 0);
}

static double lse_bound_at(fx *f, int64_t L, double A) {
    f->orc.rows[0].length = L;
    f->orc.rows[0].dot_abs_max = A;
    return kvf_strict_bound_lse(&f->c, &f->orc, 0, 0);
}

static void test_strict_monotone(void) {
    fx f;
    fx_init(&f, 1, 1, 128, 1);
    f.orc.rows[0].logit_abs_max = 3.0;
    f.orc.rows[0].v_abs_max = 5.0;
    f.orc.lse_exact[0] = 12.0;
    /* In L: every length to 4096, then sparser to ten million. */
    double prev = 0, prev_lse = 0;
    for (int64_t L = 1; L < 10000000; L = L < 4096 ? L + 1 : L + L / 7) {
        double b = bound_at(&f, L, 10.0, 0.8, 0.03), bl = lse_bound_at(&f, L, 10.0);
        if (!(b >= prev) || !(bl >= prev_lse)) {
            CHECK_FAIL_AT("bound not monotone at L=%lld: %a < %a or %a < %a", (long long)L, b, prev,
                          bl, prev_lse);
            break;
        }
        prev = b;
        prev_lse = bl;
    }
    CHECK(prev > bound_at(&f, 1, 10.0, 0.8, 0.03));
    /* In C, and in the logits' conditioning A. */
    prev = 0;
    for (double c = 0.03; c < 1e4; c *= 1.37) {
        double b = bound_at(&f, 3264, 10.0, c, 0.03);
        CHECK(b >= prev);
        prev = b;
    }
    prev = 0;
    prev_lse = 0;
    for (double A = 0; A < 1e6; A = A * 1.5 + 0.01) {
        double b = bound_at(&f, 3264, A, 0.8, 0.03), bl = lse_bound_at(&f, 3264, A);
        CHECK(b >= prev);
        CHECK(bl >= prev_lse);
        prev = b;
        prev_lse = bl;
    }
    /* Hopelessly conditioned logits cap the o bound at |x| + V (plus half an ulp), not inf. */
    double capped = bound_at(&f, 3264, 1e30, 0.8, 0.03);
    CHECK(isfinite(capped));
    CHECK(capped > 5.0 && capped < 5.1);
    fx_free(&f);
}

/* The worked example of docs/strict-rule.md (seed shape, typical N(0,1) data). If the bound's
 * formula changes, the document's numbers must change with it. */
static void test_strict_seed_shape_number(void) {
    fx f;
    fx_init(&f, 1, 1, 128, 3264);
    f.c.sm_scale = 1.0f / sqrtf(128.0f);
    f.orc.rows[0].logit_abs_max = 3.6;
    f.orc.rows[0].v_abs_max = 4.8;
    double b = bound_at(&f, 3264, 9.8, 0.8, 0.03);
    CHECK(fabs(b / 2.1901e-3 - 1) < 1e-4);
    b = bound_at(&f, 3264, 9.8, 0.8, 0.1);
    CHECK(fabs(b / 2.4865e-3 - 1) < 1e-4);
    f.orc.lse_exact[0] = 12.4;
    double bl = lse_bound_at(&f, 3264, 9.8);
    CHECK(fabs(bl / 3.5956e-3 - 1) < 1e-4);
    fx_free(&f);
}

static void test_strict_empty_and_nonfinite(void) {
    fx f;
    fx_init(&f, 1, 2, 4, 8);
    fx_empty_row(&f, 0);
    CHECK_DBL_EQ(kvf_strict_bound_o(&f.c, &f.orc, 0, 0, 0), 0.0);
    f.o[1] = 0x8000u; /* -0 is fine */
    CHECK_VERDICT(&f, "strict", 1, KVF_FINDING_NONE);
    f.o[1] = 0x0001u; /* anything else is not, however tiny */
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_O_TOLERANCE);
    f.o[1] = KVF_BF16_QNAN;
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_NONFINITE);
    f.o[1] = 0;
    /* NaN / inf where the exact result is finite. */
    f.o[5] = KVF_BF16_POS_INF;
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_NONFINITE);
    f.o[5] = f.orc.o_rounded[5];
    f.lse[1] = NAN;
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_NONFINITE);
    fx_free(&f);
}

/* Rows of millions of tokens: gamma_n's forms give up at n u = 1/3 (lse) and 1/2 (o), which
 * made any finite output pass strict from about 1.9 million tokens on. The bounds stay finite
 * at every length, and at 2 million tokens an lse of 0 or in natural log still fails. */
static void test_strict_very_long_rows(void) {
    const int64_t lens[3] = {1000000, 2000000, 16000000};
    for (int k = 0; k < 3; k++) {
        fx f;
        fx_init(&f, 1, 1, 4, lens[k]);
        fx_set_lse(&f, 0, 21.0);
        const double bl = kvf_strict_bound_lse(&f.c, &f.orc, 0, 0);
        const double bo = kvf_strict_bound_o(&f.c, &f.orc, 0, 0, 0);
        if (!(isfinite(bl) && bl > 0 && isfinite(bo) && bo > 0))
            CHECK_FAIL_AT("L = %lld: strict allows lse %g, o %g", (long long)lens[k], bl, bo);
        CHECK_VERDICT(&f, "strict", 1, KVF_FINDING_NONE);
        if (lens[k] == 2000000) {
            CHECK(bl < 3.0);
            f.lse[0] = 0.0f;
            CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_LSE_TOLERANCE);
            f.lse[0] = (float)(21.0 * 0.6931471805599453); /* natural log */
            CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_LSE_TOLERANCE);
        }
        fx_free(&f);
    }
}

static const check_test tests[] = {
    {"strict_very_long_rows", test_strict_very_long_rows},
    {"strict_rounded_passes", test_strict_rounded_passes},
    {"strict_short_sequence", test_strict_short_sequence},
    {"strict_monotone", test_strict_monotone},
    {"strict_seed_shape_number", test_strict_seed_shape_number},
    {"strict_empty_and_nonfinite", test_strict_empty_and_nonfinite},
    {NULL, NULL},
};

CHECK_MAIN(tests)
