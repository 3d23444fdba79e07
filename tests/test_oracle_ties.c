/* Unit tests of the MPFR oracle's exact ties (oracle/src/oracle.c): midpoints rounded to even
 * both ways, an exact zero as +0, ties of several logit groups, midpoints decided by far lower
 * groups (e^-(10^7) and e^-(2^100) below, and 100 groups at once), and the sign of a zero
 * decided by a far group; each case also streamed. */
#include "oracle_hand.h"

/* Two tokens of one logit whose v mean is exactly `mid`: the result must be `want` and the
 * oracle must have counted an exact tie. */
static void check_tie(kvf_bf16 v1, kvf_bf16 v2, kvf_bf16 want) {
    kvf_case c;
    int64_t len[1] = {2};
    if (build(&c, 1, 1, 1, 4, 1, len, 0)) return;
    *qat(&c, 0, 0, 0) = bf(0.5f);
    *kat(&c, 0, 0, 0, 0) = bf(3.0f);
    *kat(&c, 0, 1, 0, 0) = bf(3.0f);
    *vat(&c, 0, 0, 0, 0) = v1;
    *vat(&c, 0, 1, 0, 0) = v2;
    kvf_oracle_result r;
    if (run(&r, &c, 0, 0)) return;
    CHECK_HEX_EQ(r.o_rounded[0], want);
    CHECK_DBL_EQ(r.o_exact[0], (dv(v1) + dv(v2)) / 2);
    CHECK(r.exact_ties >= 1);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

static void test_tie_to_even_down(void) {
    check_tie(0x3F80u, 0x3F81u, 0x3F80u); /* 1 + 2^-8 between 1 (even) and 1 + 2^-7 */
    check_tie(0xBF81u, 0xBF80u, 0xBF80u); /* the same, negative */
    check_tie(0x0000u, 0x8001u, 0x8000u); /* -2^-134: between -0 (even) and -2^-133 */
}

static void test_tie_to_even_up(void) {
    check_tie(0x3F81u, 0x3F82u, 0x3F82u); /* 1 + 3 2^-8: up to the even 1 + 2^-6 */
    check_tie(0x4000u, 0x3FFFu, 0x4000u); /* 2 - 2^-8: up across the binade to 2 */
    check_tie(0x0001u, 0x0002u, 0x0002u); /* 3 2^-134: up to the even 2^-132 */
    check_tie(0x7F7Eu, 0x7F7Fu, 0x7F7Eu); /* near the top of the range: down to even */
}

static void test_tie_exact_zero(void) {
    check_tie(0x3F80u, 0xBF80u, 0x0000u); /* 1 + (-1): exactly 0 gives +0, never -0 */
    check_tie(0x8001u, 0x0001u, 0x0000u);
}

/* Two groups of two tokens with different logits, each group's v mean a midpoint: o is
 * exactly that midpoint (Lindemann-Weierstrass), so it ties to even. Moving one value of the
 * lower group breaks the tie by a tiny weighted amount that decides the direction, including
 * when the lower group is e^(-10^7) below (no working precision resolves that directly). */
static void groups_case(kvf_case *c, float low_k, kvf_bf16 low_v1, kvf_bf16 low_v2) {
    int64_t len[1] = {4};
    if (build(c, 1, 1, 1, 2, 1, len, 0)) return;
    c->sm_scale = 1.0f;
    *qat(c, 0, 0, 0) = bf(1.0f);
    *kat(c, 0, 0, 0, 0) = bf(2.0f);
    *kat(c, 0, 1, 0, 0) = bf(2.0f);
    *kat(c, 0, 2, 0, 0) = bf(low_k);
    *kat(c, 0, 3, 0, 0) = bf(low_k);
    *vat(c, 0, 0, 0, 0) = 0x3F80u;
    *vat(c, 0, 1, 0, 0) = 0x3F81u;
    *vat(c, 0, 2, 0, 0) = low_v1;
    *vat(c, 0, 3, 0, 0) = low_v2;
}

static void test_tie_groups(void) {
    const float lows[3] = {1.0f, -40.0f, -1.6777216e7f};
    for (int i = 0; i < 3; i++) {
        kvf_case c;
        kvf_oracle_result r;
        /* Tie: the lower group's mean is the midpoint too. */
        groups_case(&c, lows[i], 0x3F81u, 0x3F80u);
        if (run(&r, &c, 0, 0)) return;
        CHECK_HEX_EQ(r.o_rounded[0], 0x3F80u);
        CHECK_DBL_EQ(r.o_exact[0], 1.00390625);
        CHECK_INT_EQ(r.exact_ties, 1);
        kvf_oracle_result_free(&r);
        kvf_case_free(&c);
        /* Lower group slightly above the midpoint: o > midpoint, rounds up. */
        groups_case(&c, lows[i], 0x3F81u, 0x3F81u);
        if (run(&r, &c, 0, 0)) return;
        CHECK_HEX_EQ(r.o_rounded[0], 0x3F81u);
        CHECK_INT_EQ(r.exact_ties, 0);
        kvf_oracle_result_free(&r);
        kvf_case_free(&c);
        /* ... and below: rounds down. */
        groups_case(&c, lows[i], 0x3F80u, 0x3F80u);
        if (run(&r, &c, 0, 0)) return;
        CHECK_HEX_EQ(r.o_rounded[0], 0x3F80u);
        CHECK_INT_EQ(r.exact_ties, 0);
        kvf_oracle_result_free(&r);
        kvf_case_free(&c);
    }
}

/* Runs the oracle on c, whose o[0][0][0] lies on a midpoint that lower groups decide (no exact
 * tie): it must round to want. Frees c. Nonzero when the oracle failed. */
static int check_side_decided(kvf_case *c, kvf_bf16 want) {
    kvf_oracle_result r;
    if (run(&r, c, 0, 0)) return 1;
    CHECK_HEX_EQ(r.o_rounded[0], want);
    CHECK_INT_EQ(r.exact_ties, 0);
    kvf_oracle_result_free(&r);
    kvf_case_free(c);
    return 0;
}

/* The top group's mean is a midpoint; two groups about e^(-2^100) below decide together:
 * T = S_2 + e^-1 S_3 with S_2 = -2^-8 and S_3 = 3 2^-8 (up) or 2^-8 (down). */
static void test_tie_broken_by_two_far_groups(void) {
    const kvf_bf16 v3[2] = {0x3F82u, 0x3F81u}, want[2] = {0x3F81u, 0x3F80u};
    for (int k = 0; k < 2; k++) {
        kvf_case c;
        int64_t len[1] = {4};
        if (build(&c, 1, 1, 2, 4, 1, len, 0)) return;
        c.sm_scale = 1.0f;
        *qat(&c, 0, 0, 0) = bf(0x1p50f);
        *qat(&c, 0, 0, 1) = bf(1.0f);
        *kat(&c, 0, 2, 0, 0) = bf(-0x1p50f);
        *kat(&c, 0, 3, 0, 0) = bf(-0x1p50f);
        *kat(&c, 0, 3, 0, 1) = bf(-1.0f);
        *vat(&c, 0, 0, 0, 0) = 0x3F80u;
        *vat(&c, 0, 1, 0, 0) = 0x3F81u;
        *vat(&c, 0, 2, 0, 0) = 0x3F80u;
        *vat(&c, 0, 3, 0, 0) = v3[k];
        if (check_side_decided(&c, want[k])) return;
    }
}

/* The top group's mean is a midpoint and 100 lower groups of distinct logits, e^-66 to e^-165
 * below it, decide the side together: more groups than a streamed row's block has tokens, so
 * the operand list of the group sum must be sized by the groups (a heap overflow once). */
static void test_tie_broken_by_many_groups(void) {
    const kvf_bf16 low_v[2] = {0x3F81u, 0x3F80u}, want[2] = {0x3F81u, 0x3F80u};
    for (int k = 0; k < 2; k++) {
        kvf_case c;
        int64_t len[1] = {102};
        if (build(&c, 1, 1, 1, 16, 1, len, 0)) return;
        c.sm_scale = 1.0f;
        *qat(&c, 0, 0, 0) = bf(1.0f);
        *kat(&c, 0, 0, 0, 0) = bf(2.0f);
        *kat(&c, 0, 1, 0, 0) = bf(2.0f);
        *vat(&c, 0, 0, 0, 0) = 0x3F80u;
        *vat(&c, 0, 1, 0, 0) = 0x3F81u;
        for (int t = 2; t < 102; t++) {
            *kat(&c, 0, t, 0, 0) = bf(-(float)(62 + t)); /* integers below 256: exact */
            *vat(&c, 0, t, 0, 0) = low_v[k];
        }
        if (check_side_decided(&c, want[k])) return;
    }
}

/* o exactly 0 in the top group with a far lower group deciding the sign of the zero. */
static void test_signed_zero_from_far_group(void) {
    kvf_case c;
    kvf_oracle_result r;
    groups_case(&c, -1.6777216e7f, bf(-1.0f), bf(-2.0f));
    *vat(&c, 0, 0, 0, 0) = bf(1.0f);
    *vat(&c, 0, 1, 0, 0) = bf(-1.0f);
    if (run(&r, &c, 0, 0)) return;
    CHECK_HEX_EQ(r.o_rounded[0], 0x8000u); /* tiny negative: -0 */
    kvf_oracle_result_free(&r);
    *vat(&c, 0, 2, 0, 0) = bf(1.0f);
    *vat(&c, 0, 3, 0, 0) = bf(2.0f);
    if (run(&r, &c, 0, 0)) return;
    CHECK_HEX_EQ(r.o_rounded[0], 0x0000u);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

/* Every hand case of this file again with every row streamed one token per block
 * (run_streamed, tests/oracle_hand.h). */
static void test_streamed_rows(void) {
    void (*const fns[])(void) = {
        test_tie_to_even_down,
        test_tie_to_even_up,
        test_tie_exact_zero,
        test_tie_groups,
        test_tie_broken_by_two_far_groups,
        test_tie_broken_by_many_groups,
        test_signed_zero_from_far_group,
    };
    run_streamed(fns, sizeof fns / sizeof fns[0]);
}

static const check_test tests[] = {
    {"tie_to_even_down", test_tie_to_even_down},
    {"tie_to_even_up", test_tie_to_even_up},
    {"tie_exact_zero", test_tie_exact_zero},
    {"tie_groups", test_tie_groups},
    {"tie_broken_by_two_far_groups", test_tie_broken_by_two_far_groups},
    {"tie_broken_by_many_groups", test_tie_broken_by_many_groups},
    {"signed_zero_from_far_group", test_signed_zero_from_far_group},
    {"streamed_rows", test_streamed_rows},
    {NULL, NULL},
};

CHECK_MAIN(tests)
