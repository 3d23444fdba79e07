/* Unit tests for the benchmark tolerance rules (oracle/src/rules: fib, sol, allclose, ulp) on
 * hand-made element values, and every rule on empty sequences. */
#include "judge_fixtures.h"

/* ------------------------------------------------------------------------------------------ */
/* fib                                                                                         */
/* ------------------------------------------------------------------------------------------ */

static void test_fib_and_mask(void) {
    fx f;
    fx_init(&f, 1, 1, 4, 8);
    /* abs 0.0625 is over atol but rel 0.00625 is under rtol: passes. */
    fx_set_o(&f, 0, 10.0, 10.0);
    f.o[0] = kvf_f32_to_bf16_rne(10.0625f);
    /* rel ~5 is over rtol but abs ~0.005 is under atol: passes. */
    fx_set_o(&f, 1, 0.001, 0.001);
    f.o[1] = kvf_f32_to_bf16_rne(0.006f);
    kvf_verdict v = fx_judge(&f, "fib");
    CHECK_INT_EQ(v.pass, 1);
    CHECK_INT_EQ(v.finding, KVF_FINDING_NONE);
    CHECK_INT_EQ(v.o.violations, 0);
    CHECK_DBL_EQ(v.o.max_abs, 0.0625);
    CHECK(v.o.max_rel_fib > 4 && v.o.max_rel_fib < 6);
    CHECK(v.o.max_rel_sol > 4 && v.o.max_rel_sol < 6);
    CHECK(v.o.max_margin <= 1);
    /* Both over: fails, and the element is the worst one. */
    fx_set_o(&f, 2, 1.0, 1.0);
    f.o[2] = kvf_f32_to_bf16_rne(1.03125f);
    v = fx_judge(&f, "fib");
    CHECK_INT_EQ(v.pass, 0);
    CHECK_INT_EQ(v.finding, KVF_FINDING_O_TOLERANCE);
    CHECK_INT_EQ(v.o.violations, 1);
    CHECK_INT_EQ(v.o.worst[0].d, 2);
    CHECK_INT_EQ(v.o.worst[0].fails, 1);
    CHECK(v.o.worst[0].margin > 1);
    CHECK_DBL_EQ(v.o.worst[0].kernel_value, 1.03125);
    CHECK_DBL_EQ(v.o.worst[0].rounded_value, 1.0);
    CHECK_INT_EQ(v.o.worst[0].ulps, 4);
    /* Only the lse off: lse-tolerance. */
    f.o[2] = f.orc.o_rounded[2];
    f.lse[0] = 3.5f;
    CHECK_VERDICT(&f, "fib", 0, KVF_FINDING_LSE_TOLERANCE);
    fx_free(&f);
}

static void test_fib_nonfinite(void) {
    fx f;
    fx_init(&f, 1, 1, 4, 8);
    f.o[3] = KVF_BF16_QNAN;
    kvf_verdict v = fx_judge(&f, "fib");
    CHECK_INT_EQ(v.pass, 0);
    CHECK_INT_EQ(v.finding, KVF_FINDING_NONFINITE);
    CHECK_INT_EQ(v.o.nonfinite_mismatch, 1);
    /* The mismatch is counted, not turned into a distance: the other elements are exact. */
    CHECK_INT_EQ(v.o.max_ulps, 0);
    CHECK_DBL_EQ(v.o.bits_of_error, 0.0);
    CHECK_INT_EQ(v.o.worst[0].ulps, -1);
    CHECK_INT_EQ(v.o.violations_rounded, 0);
    CHECK(isinf(v.o.worst[0].margin));
    CHECK_DBL_EQ(v.o.max_abs, 0.0); /* max abs is over finite pairs only */
    f.o[3] = KVF_BF16_POS_INF;
    CHECK_VERDICT(&f, "fib", 0, KVF_FINDING_NONFINITE);
    fx_free(&f);
}

/* Empty sequences under every rule: the exact lse is -inf and o is 0. */
static void test_empty_lse_each_rule(void) {
    fx f;
    fx_init(&f, 1, 2, 4, 8);
    fx_empty_row(&f, 1);
    /* A correct kernel (-inf): FIB fails it (any inf in the output fails), the others pass. */
    CHECK_VERDICT(&f, "fib", 0, KVF_FINDING_NONFINITE);
    CHECK_VERDICT(&f, "sol", 1, KVF_FINDING_NONE);
    CHECK_VERDICT(&f, "allclose:0:0", 1, KVF_FINDING_NONE);
    CHECK_VERDICT(&f, "ulp:0", 1, KVF_FINDING_NONE);
    CHECK_VERDICT(&f, "strict", 1, KVF_FINDING_NONE);
    /* A finite mask sentinel leaking out (bug class B01): FIB passes it (finite vs -inf gives
     * rel = inf/inf = NaN, and NaN > rtol is false); everything else flags it. */
    f.lse[1] = -50000.0f;
    kvf_verdict v = fx_judge(&f, "fib");
    CHECK_INT_EQ(v.pass, 1);
    CHECK_INT_EQ(v.lse.nonfinite_mismatch, 1);
    CHECK_INT_EQ(v.lse.worst[0].fails, 0);
    CHECK_DBL_EQ(v.lse.max_margin, 0.0); /* the NaN relative test counts as no excess */
    f.lse[1] = 7.0f;
    CHECK_VERDICT(&f, "fib", 1, KVF_FINDING_NONE);
    f.lse[1] = -50000.0f;
    CHECK_VERDICT(&f, "sol", 0, KVF_FINDING_NONFINITE);
    CHECK_VERDICT(&f, "allclose:1:1", 0, KVF_FINDING_NONFINITE);
    CHECK_VERDICT(&f, "ulp:1000", 0, KVF_FINDING_NONFINITE);
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_NONFINITE);
    /* NaN lse on the empty row (bug class B02). */
    f.lse[1] = NAN;
    CHECK_VERDICT(&f, "fib", 0, KVF_FINDING_NONFINITE);
    CHECK_VERDICT(&f, "sol", 0, KVF_FINDING_NONFINITE);
    CHECK_VERDICT(&f, "allclose:1:1", 0, KVF_FINDING_NONFINITE);
    CHECK_VERDICT(&f, "ulp:1000", 0, KVF_FINDING_NONFINITE);
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_NONFINITE);
    /* The correct -inf again, beside a finite o bug on the other row: under fib the finding is
     * the o bug's (o-tolerance), not nonfinite (it was, from the -inf fib rejects). */
    f.lse[1] = -INFINITY;
    fx_set_o(&f, 0, 1.0, 1.0);
    f.o[0] = rn_bf16(1.5);
    CHECK_VERDICT(&f, "fib", 0, KVF_FINDING_O_TOLERANCE);
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_O_TOLERANCE);
    fx_free(&f);
}

/* ------------------------------------------------------------------------------------------ */
/* sol                                                                                         */
/* ------------------------------------------------------------------------------------------ */

static void test_sol_element(void) {
    fx f;
    fx_init(&f, 1, 1, 4, 8);
    /* |a - r| = 0.015625 <= 0.01 + 0.01 * 1: sol passes where fib (abs and rel > 1e-2) fails. */
    fx_set_o(&f, 0, 1.0, 1.0);
    f.o[0] = kvf_f32_to_bf16_rne(1.015625f);
    CHECK_VERDICT(&f, "sol", 1, KVF_FINDING_NONE);
    CHECK_VERDICT(&f, "fib", 0, KVF_FINDING_O_TOLERANCE);
    fx_free(&f);
}

/* sol's 99% test over an output whose violations lie partly on a row out of the input model:
 * a failure the overflow row's violations complete is an overflow finding, never a kernel
 * failure (it was o-tolerance); one the ordinary row fails alone stays o-tolerance. */
static void test_sol_overflow_rows_apart(void) {
    fx f;
    fx_init(&f, 1, 2, 100, 8);
    f.orc.rows[1].overflow = 1;
    fx_set_o(&f, 0, 1.0, 1.0);
    f.o[0] = rn_bf16(1.03125); /* 1 of 200 elements off on the ordinary row */
    CHECK_VERDICT(&f, "sol", 1, KVF_FINDING_NONE);
    f.o[100] = rn_bf16(2.0), f.o[101] = rn_bf16(2.0); /* 2 more on the overflow row */
    CHECK_VERDICT(&f, "sol", 0, KVF_FINDING_OVERFLOW);
    f.o[100] = KVF_BF16_QNAN; /* a NaN there rejects the tensor: still the overflow row's */
    CHECK_VERDICT(&f, "sol", 0, KVF_FINDING_OVERFLOW);
    f.o[100] = rn_bf16(0.5), f.o[101] = rn_bf16(0.5);
    for (int d = 1; d < 3; d++) { /* 3 of 200 on the ordinary row alone */
        fx_set_o(&f, d, 1.0, 1.0);
        f.o[d] = rn_bf16(1.03125);
    }
    CHECK_VERDICT(&f, "sol", 0, KVF_FINDING_O_TOLERANCE);
    fx_free(&f);
}

static void test_sol_threshold(void) {
    static const int32_t dims[] = {100, 200};
    for (size_t k = 0; k < 2; k++) {
        int32_t D = dims[k];
        int32_t allowed = D / 100; /* exactly 1% */
        fx f;
        fx_init(&f, 1, 1, D, 8);
        for (int32_t i = 0; i < allowed; i++) {
            fx_set_o(&f, i, 1.0, 1.0);
            f.o[i] = kvf_f32_to_bf16_rne(1.03125f); /* 0.031 > 0.02 */
        }
        kvf_verdict v = fx_judge(&f, "sol");
        CHECK_INT_EQ(v.o.violations, allowed);
        CHECK_INT_EQ(v.pass, 1); /* exactly 99% pass */
        CHECK_INT_EQ(v.finding, KVF_FINDING_NONE);
        fx_set_o(&f, allowed, 1.0, 1.0);
        f.o[allowed] = kvf_f32_to_bf16_rne(1.03125f);
        v = fx_judge(&f, "sol");
        CHECK_INT_EQ(v.o.violations, allowed + 1);
        CHECK_INT_EQ(v.pass, 0); /* just below 99% */
        CHECK_INT_EQ(v.finding, KVF_FINDING_O_TOLERANCE);
        fx_free(&f);
    }
    /* A NaN fails the tensor outright even when 99% of the elements pass. */
    fx f;
    fx_init(&f, 1, 1, 100, 8);
    f.o[17] = KVF_BF16_QNAN;
    kvf_verdict v = fx_judge(&f, "sol");
    CHECK_INT_EQ(v.o.violations, 1);
    CHECK_INT_EQ(v.pass, 0);
    CHECK_INT_EQ(v.finding, KVF_FINDING_NONFINITE);
    /* Each output is held to the ratio on its own: the single lse is 0% matched. */
    f.o[17] = f.orc.o_rounded[17];
    f.lse[0] = 3.5f;
    CHECK_VERDICT(&f, "sol", 0, KVF_FINDING_LSE_TOLERANCE);
    fx_free(&f);
}

/* ------------------------------------------------------------------------------------------ */
/* allclose                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static void test_allclose(void) {
    fx f;
    fx_init(&f, 1, 1, 4, 8);
    fx_set_o(&f, 0, 1.0, 1.0);
    f.o[0] = kvf_f32_to_bf16_rne(1.5f); /* |a - r| = 0.5 = atol: <= passes */
    CHECK_VERDICT(&f, "allclose:0.5:0", 1, KVF_FINDING_NONE);
    f.o[0] = kvf_f32_to_bf16_rne(1.5078125f);
    CHECK_VERDICT(&f, "allclose:0.5:0", 0, KVF_FINDING_O_TOLERANCE);
    CHECK_VERDICT(&f, "allclose:0:0.5078125", 1, KVF_FINDING_NONE);
    /* allclose:0:0 is exact equality; -0 equals +0. */
    f.o[0] = f.orc.o_rounded[0];
    CHECK_VERDICT(&f, "allclose:0:0", 1, KVF_FINDING_NONE);
    fx_set_o(&f, 1, 0.0, 0.0);
    f.o[1] = 0x8000u;
    CHECK_VERDICT(&f, "allclose:0:0", 1, KVF_FINDING_NONE);
    f.o[0] = (kvf_bf16)(f.orc.o_rounded[0] + 1);
    CHECK_VERDICT(&f, "allclose:0:0", 0, KVF_FINDING_O_TOLERANCE);
    f.o[0] = f.orc.o_rounded[0];
    /* NaN never equals anything, not even a NaN reference. */
    f.o[2] = KVF_BF16_QNAN;
    CHECK_VERDICT(&f, "allclose:1:1", 0, KVF_FINDING_NONFINITE);
    f.orc.o_rounded[2] = KVF_BF16_QNAN;
    CHECK_VERDICT(&f, "allclose:1:1", 0, KVF_FINDING_NONFINITE);
    fx_set_o(&f, 2, 0.5, 0.5);
    /* Infinities: same sign matches, opposite sign or finite does not, even with huge tolerances
     * (an lse past the f32 range rounds to +inf). */
    f.orc.lse_rounded[0] = INFINITY;
    f.lse[0] = INFINITY;
    CHECK_VERDICT(&f, "allclose:0:0", 1, KVF_FINDING_NONE);
    f.lse[0] = -INFINITY;
    CHECK_VERDICT(&f, "allclose:1e30:1e30", 0, KVF_FINDING_NONFINITE);
    f.lse[0] = FLT_MAX;
    CHECK_VERDICT(&f, "allclose:1e30:1e30", 0, KVF_FINDING_NONFINITE);
    fx_set_lse(&f, 0, 3.0);
    f.lse[0] = INFINITY;
    CHECK_VERDICT(&f, "allclose:1e30:1e30", 0, KVF_FINDING_NONFINITE);
    fx_free(&f);
}

/* ------------------------------------------------------------------------------------------ */
/* ulp                                                                                         */
/* ------------------------------------------------------------------------------------------ */

static void test_ulp(void) {
    fx f;
    fx_init(&f, 1, 1, 4, 8);
    /* Across zero: +min subnormal to -min subnormal is two steps; -0 and +0 are one value. */
    f.orc.o_rounded[0] = 0x0001u;
    f.orc.o_exact[0] = bf(0x0001u);
    f.o[0] = 0x8001u;
    CHECK_VERDICT(&f, "ulp:1", 0, KVF_FINDING_O_TOLERANCE);
    kvf_verdict v = fx_judge(&f, "ulp:2");
    CHECK_INT_EQ(v.pass, 1);
    CHECK_INT_EQ(v.o.max_ulps, 2);
    CHECK_DBL_EQ(v.o.bits_of_error, log2(3.0));
    f.orc.o_rounded[0] = 0x0000u;
    f.orc.o_exact[0] = 0.0;
    f.o[0] = 0x8000u;
    CHECK_VERDICT(&f, "ulp:0", 1, KVF_FINDING_NONE);
    /* The bf16 max / inf boundary: inf is one ordered step past max but never within N. */
    f.orc.o_rounded[1] = KVF_BF16_MAX;
    f.orc.o_exact[1] = bf(KVF_BF16_MAX);
    f.o[1] = KVF_BF16_POS_INF;
    v = fx_judge(&f, "ulp:1000");
    CHECK_INT_EQ(v.pass, 0);
    CHECK_INT_EQ(v.finding, KVF_FINDING_NONFINITE);
    /* inf against max is a NaN/inf mismatch, counted as such, not a distance of one. */
    CHECK_INT_EQ(v.o.max_ulps, 0);
    CHECK_INT_EQ(v.o.nonfinite_mismatch, 1);
    CHECK_INT_EQ(v.o.worst[0].ulps, -1);
    f.o[1] = (kvf_bf16)(KVF_BF16_MAX - 1);
    CHECK_VERDICT(&f, "ulp:1", 1, KVF_FINDING_NONE);
    CHECK_VERDICT(&f, "ulp:0", 0, KVF_FINDING_O_TOLERANCE);
    f.orc.o_rounded[1] = (kvf_bf16)(KVF_BF16_MAX | 0x8000u);
    f.orc.o_exact[1] = -bf(KVF_BF16_MAX);
    f.o[1] = KVF_BF16_NEG_INF;
    CHECK_VERDICT(&f, "ulp:1000", 0, KVF_FINDING_NONFINITE);
    fx_set_o(&f, 1, 0.5, 0.5);
    /* lse counts f32 ulps. */
    float r = 1.0f;
    fx_set_lse(&f, 0, r);
    f.lse[0] = nextafterf(nextafterf(nextafterf(r, 2.0f), 2.0f), 2.0f);
    CHECK_VERDICT(&f, "ulp:2", 0, KVF_FINDING_LSE_TOLERANCE);
    CHECK_VERDICT(&f, "ulp:3", 1, KVF_FINDING_NONE);
    f.lse[0] = NAN;
    CHECK_VERDICT(&f, "ulp:1000", 0, KVF_FINDING_NONFINITE);
    f.orc.lse_rounded[0] = FLT_MAX;
    f.lse[0] = INFINITY;
    CHECK_VERDICT(&f, "ulp:1000", 0, KVF_FINDING_NONFINITE);
    f.orc.lse_rounded[0] = INFINITY;
    CHECK_VERDICT(&f, "ulp:0", 1, KVF_FINDING_NONE);
    fx_free(&f);
}

static const check_test tests[] = {
    {"fib_and_mask", test_fib_and_mask},
    {"fib_nonfinite", test_fib_nonfinite},
    {"empty_lse_each_rule", test_empty_lse_each_rule},
    {"sol_element", test_sol_element},
    {"sol_overflow_rows_apart", test_sol_overflow_rows_apart},
    {"sol_threshold", test_sol_threshold},
    {"allclose", test_allclose},
    {"ulp", test_ulp},
    {NULL, NULL},
};

CHECK_MAIN(tests)
