/* Unit tests of the MPFR oracle (oracle/src/oracle.c) on hand-built cases whose answers are
 * known exactly: one token, equal logits, extreme and overflowing logits, accumulator
 * overflow, empty sequences, non-finite inputs, an invalid case, and the direct bf16 rounding
 * of a double; each case also streamed. Ties: tests/test_oracle_ties.c. */
#include <float.h>

#include "oracle_hand.h"

/* One token: o = v exactly (v = -0 gives +0, the exact zero) and lse = RN(s log2 e). */
static void test_one_token(void) {
    kvf_case c;
    int64_t len[1] = {1};
    if (build(&c, 2, 1, 4, 4, 1, len, 0)) return;
    const float qv[2][4] = {{0.5f, -1.25f, 3.0f, 0.0078125f}, {-2.0f, 0.75f, 1.5f, 100.0f}};
    const float kv[4] = {1.5f, 2.0f, -0.375f, 6.0f};
    const kvf_bf16 vv[4] = {bf(0.3f), bf(-7.5f), 0x8000u, 0x0001u};
    for (int d = 0; d < 4; d++) {
        *qat(&c, 0, 0, d) = bf(qv[0][d]);
        *qat(&c, 0, 1, d) = bf(qv[1][d]);
        *kat(&c, 0, 0, 0, d) = bf(kv[d]);
        *vat(&c, 0, 0, 0, d) = vv[d];
    }
    kvf_oracle_result r;
    if (run(&r, &c, 0, 0)) return;
    mpfr_t ref;
    mpfr_init2(ref, 400);
    for (int h = 0; h < 2; h++) {
        CHECK_HEX_EQ(r.o_rounded[h * 4 + 0], vv[0]);
        CHECK_HEX_EQ(r.o_rounded[h * 4 + 1], vv[1]);
        CHECK_HEX_EQ(r.o_rounded[h * 4 + 2], 0x0000u); /* exact zero: +0 */
        CHECK_HEX_EQ(r.o_rounded[h * 4 + 3], 0x0001u); /* smallest subnormal survives */
        CHECK_DBL_EQ(r.o_exact[h * 4 + 1], dv(vv[1]));
        CHECK_DBL_EQ(r.o_cond[h * 4 + 1], fabs(dv(vv[1])));
        ref_lse(ref, &c, 0, h);
        CHECK_HEX_EQ(kvf_f32_bits(r.lse_rounded[h]), kvf_f32_bits(ref_round_f32(ref)));
        CHECK(fabs(r.lse_exact[h] - mpfr_get_d(ref, MPFR_RNDN)) <= 1e-15 * fabs(r.lse_exact[h]));
        CHECK_INT_EQ(r.rows[h].length, 1);
        CHECK_INT_EQ(r.rows[h].overflow, 0);
    }
    mpfr_clear(ref);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

/* Equal logits: o is the mean of v; all-zero logits give lse = log2 L exactly. */
static void test_equal_logits(void) {
    const int64_t lens[3] = {4, 3, 5};
    for (int k = 0; k < 3; k++) {
        kvf_case c;
        int64_t len[1] = {lens[k]};
        if (build(&c, 1, 1, 2, 2, 1, len, 0)) return;
        /* k = 2: q . k_t = 3 for every token, so the logits are equal but not zero. */
        *qat(&c, 0, 0, 0) = bf(k == 2 ? 1.5f : 0.0f);
        const float v0[5] = {1, 2, 3, 6, 8};
        double mean = 0;
        for (int64_t t = 0; t < lens[k]; t++) {
            *kat(&c, 0, t, 0, 0) = bf(2.0f);
            *vat(&c, 0, t, 0, 0) = bf(v0[t]);
            *vat(&c, 0, t, 0, 1) = bf(-0.25f);
            mean += v0[t];
        }
        mean /= (double)lens[k];
        kvf_oracle_result r;
        if (run(&r, &c, 0, 0)) return;
        CHECK_HEX_EQ(r.o_rounded[0], kvf_oracle_round_bf16(mean));
        CHECK_HEX_EQ(r.o_rounded[1], bf(-0.25f));
        CHECK(fabs(r.o_exact[0] - mean) <= 1e-16 * mean);
        mpfr_t ref;
        mpfr_init2(ref, 400);
        ref_lse(ref, &c, 0, 0);
        CHECK_HEX_EQ(kvf_f32_bits(r.lse_rounded[0]), kvf_f32_bits(ref_round_f32(ref)));
        if (k == 0) {
            CHECK_DBL_EQ(r.lse_rounded[0], 2.0f);
            CHECK_DBL_EQ(r.lse_exact[0], 2.0);
        }
        mpfr_clear(ref);
        kvf_oracle_result_free(&r);
        kvf_case_free(&c);
    }
}

/* Head 0: token 0 has logit 0, the others -2^100 - 75 (about -1.3e30): o is token 0's v and
 * lse = log2(1 + 4 e^(-1.3e30)) rounds to +0. Head 1: logits 0, -100, -100, -100, -100, so
 * lse = log2(1 + 4 e^-100) ~ 2.2e-43 is an f32 subnormal, certified through log1p at once. */
static void test_extreme_negative(void) {
    kvf_case c;
    int64_t len[1] = {5};
    if (build(&c, 2, 1, 2, 8, 1, len, 0)) return;
    c.sm_scale = 1.0f;
    *qat(&c, 0, 0, 0) = bf(0x1p50f);
    *qat(&c, 0, 0, 1) = bf(0.75f);
    *qat(&c, 0, 1, 1) = bf(1.0f);
    for (int64_t t = 0; t < 5; t++) {
        *kat(&c, 0, t, 0, 0) = t ? bf(-0x1p50f) : 0;
        *kat(&c, 0, t, 0, 1) = t ? bf(-100.0f) : 0;
        *vat(&c, 0, t, 0, 0) = bf((float)(t + 1) * 1.5f);
        *vat(&c, 0, t, 0, 1) = bf(-0.125f * (float)(t + 3));
    }
    kvf_oracle_result r;
    if (run(&r, &c, 0, 0)) return;
    CHECK_HEX_EQ(r.o_rounded[0], bf(1.5f));
    CHECK_HEX_EQ(r.o_rounded[1], bf(-0.375f));
    CHECK_HEX_EQ(kvf_f32_bits(r.lse_rounded[0]), 0u); /* log2(1 + 4 e^-1.27e30): +0 */
    CHECK(r.lse_exact[0] == 0.0);
    CHECK_INT_EQ(r.rows[0].overflow, 0); /* e^s underflows f32, but s itself fits */
    CHECK(r.rows[0].logit_abs_max > 1.2e30);
    /* Head 1: reference lse by direct evaluation. */
    mpfr_t ref;
    mpfr_init2(ref, 400);
    ref_lse(ref, &c, 0, 1);
    float want = ref_round_f32(ref);
    CHECK(want > 0 && want < FLT_MIN); /* a subnormal f32 */
    CHECK_HEX_EQ(kvf_f32_bits(r.lse_rounded[1]), kvf_f32_bits(want));
    CHECK(fabs(r.lse_exact[1] - mpfr_get_d(ref, MPFR_RNDN)) <= 1e-15 * r.lse_exact[1]);
    CHECK(r.max_precision_used == 64); /* the relative lse bound certifies at once */
    mpfr_clear(ref);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

/* Logits past the f32 range: exact lse finite, rounded +-inf, overflow flag; o still exact. */
static void test_beyond_f32(void) {
    kvf_case c;
    int64_t len[1] = {3};
    if (build(&c, 2, 1, 1, 4, 1, len, 0)) return;
    c.sm_scale = 1.0f;
    *qat(&c, 0, 0, 0) = bf(0x1p100f);
    *qat(&c, 0, 1, 0) = bf(-0x1p100f);
    const float ks[3] = {0x1p100f, 0x1.02p100f, 0x1p99f};
    for (int64_t t = 0; t < 3; t++) {
        *kat(&c, 0, t, 0, 0) = bf(ks[t]);
        *vat(&c, 0, t, 0, 0) = bf((float)t - 0.5f);
    }
    kvf_oracle_result r;
    if (run(&r, &c, 0, 0)) return;
    /* Head 0: token 1 (k = 1.0078 2^100) dominates by e^(2^193). */
    CHECK_HEX_EQ(r.o_rounded[0], bf(0.5f));
    CHECK(isinf(r.lse_rounded[0]) && r.lse_rounded[0] > 0);
    double want = ldexp(1.0078125, 200) / log(2.0);
    CHECK(isfinite(r.lse_exact[0]) && fabs(r.lse_exact[0] - want) <= 1e-15 * want);
    CHECK(r.rows[0].overflow & KVF_ORACLE_OVERFLOW_LOGITS);
    /* Head 1: all logits about -2^200: lse about -2^199 / ln 2 rounds to -inf; token 2 wins. */
    CHECK_HEX_EQ(r.o_rounded[1], bf(1.5f));
    CHECK(isinf(r.lse_rounded[1]) && r.lse_rounded[1] < 0);
    CHECK(isfinite(r.lse_exact[1]) && r.lse_exact[1] < -1e59);
    CHECK(r.rows[1].overflow & KVF_ORACLE_OVERFLOW_LOGITS);
    CHECK(r.rows[1].dot_abs_max >= ldexp(1.0078125, 200));
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

/* v at the top of the bf16 range: o is exactly representable, but an fp32 accumulator of
 * sum p v overflows; the row is flagged. */
static void test_accumulator_overflow_flag(void) {
    kvf_case c;
    int64_t len[1] = {2};
    if (build(&c, 1, 1, 1, 2, 1, len, 0)) return;
    *vat(&c, 0, 0, 0, 0) = KVF_BF16_MAX;
    *vat(&c, 0, 1, 0, 0) = KVF_BF16_MAX;
    kvf_oracle_result r;
    if (run(&r, &c, 0, 0)) return;
    CHECK_HEX_EQ(r.o_rounded[0], KVF_BF16_MAX);
    CHECK_INT_EQ(r.rows[0].overflow, KVF_ORACLE_OVERFLOW_ACCUM);
    CHECK_DBL_EQ(r.lse_rounded[0], 1.0f);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

static void test_empty_sequence(void) {
    kvf_case c;
    int64_t len[3] = {3, 0, 2};
    if (build(&c, 2, 2, 3, 2, 3, len, 0)) return;
    for (int64_t t = 0; t < 3; t++)
        for (int d = 0; d < 3; d++)
            *vat(&c, 0, t, 0, d) = bf(1.0f + (float)d);
    kvf_oracle_result r;
    if (run(&r, &c, 0, 0)) return;
    for (int h = 0; h < 2; h++) {
        size_t row = 1 * 2 + (size_t)h;
        CHECK_INT_EQ(r.rows[row].length, 0);
        CHECK(isinf(r.lse_rounded[row]) && r.lse_rounded[row] < 0);
        CHECK(isinf(r.lse_exact[row]) && r.lse_exact[row] < 0);
        for (int d = 0; d < 3; d++) {
            CHECK_HEX_EQ(r.o_rounded[row * 3 + d], 0x0000u);
            CHECK_DBL_EQ(r.o_exact[row * 3 + d], 0.0);
            CHECK_DBL_EQ(r.o_cond[row * 3 + d], 0.0);
        }
    }
    CHECK_HEX_EQ(r.o_rounded[0 * 3 + 2], bf(3.0f)); /* sequence 0 is unaffected */
    CHECK_INT_EQ(r.rows[0].length, 3);
    CHECK_INT_EQ(r.rows[4].length, 2);
    CHECK(fabs(r.lse_exact[4] - 1.0) == 0); /* two zero logits: log2 2 */
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

/* NaN / inf at referenced positions: v makes only its column non-finite, q or k the row. */
static void test_nonfinite_inputs(void) {
    kvf_case c;
    int64_t len[1] = {3};
    if (build(&c, 2, 1, 4, 4, 1, len, 0)) return;
    for (int64_t i = 0; i < kvf_case_q_elems(&c); i++)
        c.q[i] = bf(0.5f);
    for (int64_t t = 0; t < 3; t++)
        for (int d = 0; d < 4; d++) {
            *kat(&c, 0, t, 0, d) = bf((float)t);
            *vat(&c, 0, t, 0, d) = bf(1.0f);
        }
    *vat(&c, 0, 1, 0, 1) = KVF_BF16_QNAN;
    *vat(&c, 0, 2, 0, 2) = KVF_BF16_POS_INF;
    *vat(&c, 0, 0, 0, 3) = KVF_BF16_POS_INF;
    *vat(&c, 0, 2, 0, 3) = KVF_BF16_NEG_INF;
    *qat(&c, 0, 1, 2) = KVF_BF16_NEG_INF;
    kvf_oracle_result r;
    if (run(&r, &c, 0, 0)) return;
    CHECK_HEX_EQ(r.o_rounded[0], bf(1.0f));
    CHECK(kvf_bf16_is_nan(r.o_rounded[1]));
    CHECK_HEX_EQ(r.o_rounded[2], KVF_BF16_POS_INF);
    CHECK(kvf_bf16_is_nan(r.o_rounded[3])); /* +inf and -inf */
    CHECK(isfinite(r.lse_rounded[0]));
    CHECK_INT_EQ(r.rows[0].nonfinite_input, 1);
    for (int d = 0; d < 4; d++)
        CHECK(kvf_bf16_is_nan(r.o_rounded[4 + d]));
    CHECK(isnan(r.lse_rounded[1]) && isnan(r.lse_exact[1]));
    CHECK_INT_EQ(r.rows[1].nonfinite_input, 1);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

static void test_invalid_case(void) {
    kvf_case c;
    int64_t len[1] = {3};
    if (build(&c, 1, 1, 2, 2, 1, len, 0)) return;
    c.kv_indices[1] = 5;
    kvf_oracle_result r;
    kvf_error err;
    CHECK_INT_EQ(kvf_oracle_run(&r, &c, NULL, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "kv_indices[1]");
    CHECK(r.o_rounded == NULL);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

static void test_round_bf16_double(void) {
    /* Rounds the double directly: 1 + 2^-8 + 2^-30 goes up, although rounding it to f32
     * first would land on the midpoint 1 + 2^-8 and then down to 1. */
    CHECK_HEX_EQ(kvf_oracle_round_bf16(1.0 + 0x1p-8 + 0x1p-30), 0x3F81u);
    CHECK_HEX_EQ(kvf_oracle_round_bf16(1.0 + 0x1p-8), 0x3F80u);
    CHECK_HEX_EQ(kvf_oracle_round_bf16(0x1p-134), 0x0000u);
    CHECK_HEX_EQ(kvf_oracle_round_bf16(0x1p-134 + 0x1p-160), 0x0001u);
    CHECK_HEX_EQ(kvf_oracle_round_bf16(-0x1p-140), 0x8000u);
    CHECK_HEX_EQ(kvf_oracle_round_bf16(0x1.ffp127), KVF_BF16_POS_INF); /* past MAX + ulp/2 */
    CHECK_HEX_EQ(kvf_oracle_round_bf16(0x1.fep127), KVF_BF16_MAX);
    CHECK_HEX_EQ(kvf_oracle_round_bf16(1e300), KVF_BF16_POS_INF);
    CHECK_HEX_EQ(kvf_oracle_round_bf16(-0.0), 0x8000u);
}

/* Every hand case of this file again with every row streamed one token per block
 * (run_streamed, tests/oracle_hand.h). */
static void test_streamed_rows(void) {
    void (*const fns[])(void) = {
        test_one_token,
        test_equal_logits,
        test_extreme_negative,
        test_beyond_f32,
        test_accumulator_overflow_flag,
        test_empty_sequence,
        test_nonfinite_inputs,
    };
    run_streamed(fns, sizeof fns / sizeof fns[0]);
}

static const check_test tests[] = {
    {"one_token", test_one_token},
    {"equal_logits", test_equal_logits},
    {"extreme_negative", test_extreme_negative},
    {"beyond_f32", test_beyond_f32},
    {"accumulator_overflow_flag", test_accumulator_overflow_flag},
    {"empty_sequence", test_empty_sequence},
    {"nonfinite_inputs", test_nonfinite_inputs},
    {"invalid_case", test_invalid_case},
    {"round_bf16_double", test_round_bf16_double},
    {"streamed_rows", test_streamed_rows},
    {NULL, NULL},
};

CHECK_MAIN(tests)
