/* Unit tests for the judge (oracle/src/judge.c) itself: non-finite inputs, the excess margin,
 * finding classification, the metrics and worst elements, the observer, argument errors and
 * margin text. */
#include "judge_fixtures.h"

/* Non-finite inputs (oracle rows[].nonfinite_input): a NaN in q or k makes the whole row NaN,
 * an inf in v makes that column inf. Such rows are out of the input model: rules that require
 * NaN/inf to match accept a kernel that reproduces them, and whatever fails there (the
 * benchmark rules reject any non-finite output) is class overflow, counted apart from kernel
 * failures, with every element of those rows counted as out of the model. */
static void test_nonfinite_inputs(void) {
    fx f;
    fx_init(&f, 1, 2, 4, 8);
    /* Row 0: NaN q. */
    f.orc.rows[0].nonfinite_input = 1;
    for (int d = 0; d < 4; d++) {
        f.orc.o_exact[d] = NAN;
        f.orc.o_cond[d] = NAN;
        f.orc.o_rounded[d] = KVF_BF16_QNAN;
        f.o[d] = (kvf_bf16)(KVF_BF16_QNAN | 0x8001u); /* any NaN will do */
    }
    f.orc.lse_exact[0] = NAN;
    f.orc.lse_rounded[0] = NAN;
    f.lse[0] = NAN;
    /* Row 1, column 2: +inf in v. */
    f.orc.rows[1].nonfinite_input = 1;
    f.orc.o_exact[6] = INFINITY;
    f.orc.o_cond[6] = INFINITY;
    f.orc.o_rounded[6] = KVF_BF16_POS_INF;
    f.o[6] = KVF_BF16_POS_INF;
    CHECK_VERDICT(&f, "strict", 1, KVF_FINDING_NONE);
    CHECK_VERDICT(&f, "ulp:0", 1, KVF_FINDING_NONE);
    CHECK_VERDICT(&f, "fib", 0, KVF_FINDING_OVERFLOW);
    CHECK_VERDICT(&f, "sol", 0, KVF_FINDING_OVERFLOW);
    CHECK_VERDICT(&f, "allclose:0:0", 0, KVF_FINDING_OVERFLOW); /* NaN never equal */
    kvf_verdict v = fx_judge(&f, "fib");
    CHECK_INT_EQ(v.o.out_of_model, 8);
    CHECK_INT_EQ(v.lse.out_of_model, 2);
    CHECK_INT_EQ(v.o.violations_out_of_model, v.o.violations);
    CHECK_INT_EQ(kvf_verdict_status_of(&v, 0), KVF_VERDICT_OUT_OF_MODEL);
    CHECK_INT_EQ(kvf_verdict_status_of(&v, 1), KVF_VERDICT_FAIL);
    /* A finite value where the exact result is NaN or inf fails the rules that care, out of
     * the model. */
    f.o[1] = 0x3F80u;
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_OVERFLOW);
    CHECK_VERDICT(&f, "ulp:1000", 0, KVF_FINDING_OVERFLOW);
    f.o[1] = KVF_BF16_QNAN;
    f.o[6] = KVF_BF16_MAX;
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_OVERFLOW);
    f.o[6] = KVF_BF16_NEG_INF;
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_OVERFLOW);
    f.o[6] = KVF_BF16_POS_INF;
    f.o[5] = 0x3F81u;
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_OVERFLOW);
    /* Their errors stay out of the maxima, which describe in-model rows only. */
    v = fx_judge(&f, "strict");
    CHECK_INT_EQ(v.o.max_ulps, 0);
    CHECK_DBL_EQ(v.o.max_margin, 0.0);
    fx_free(&f);
}

/* The excess margin takes out the final rounding: at a bf16 tie the correctly rounded value
 * and its other neighbour use none of the headroom beyond the rounding (excess 0) though the
 * neighbour's margin counts the half ulp; a value one ulp off uses more than the rounding did. */
static void test_excess_margin(void) {
    fx f;
    fx_init(&f, 1, 1, 4, 1);
    double x = 1.0 + 0x1p-8; /* halfway between the bf16 values 1 and 1 + 2^-7 */
    fx_set_o(&f, 0, x, x);
    kvf_verdict v = fx_judge(&f, "strict");
    CHECK_INT_EQ(v.pass, 1);
    CHECK_DBL_EQ(v.o.max_excess_margin, 0.0);
    /* The other neighbour of the tie is just as good: half an ulp from x, so its margin shows
     * the rounding (the correctly rounded value itself always passes with margin 0), its
     * excess does not. */
    f.o[0] = (kvf_bf16)(f.orc.o_rounded[0] ^ 1u);
    v = fx_judge(&f, "strict");
    CHECK_INT_EQ(v.pass, 1);
    CHECK(v.o.max_margin > 0);
    CHECK_DBL_EQ(v.o.max_excess_margin, 0.0);
    /* Off the tie, one ulp away fails and both margins say so. */
    fx_set_o(&f, 0, 1.0, 1.0);
    f.o[0] = (kvf_bf16)(f.orc.o_rounded[0] + 1u);
    v = fx_judge(&f, "strict");
    CHECK_INT_EQ(v.pass, 0);
    CHECK(v.o.max_margin > 1);
    CHECK(v.o.max_excess_margin > 1);
    /* Rules measured against r: the excess margin is the margin. */
    v = fx_judge(&f, "ulp:2");
    CHECK_DBL_EQ(v.o.max_excess_margin, v.o.max_margin);
    fx_free(&f);
}

/* fib fails the exact -inf lse of an empty sequence: the verdict says the rule rejects the
 * correctly rounded value, which is not a kernel failure; a wrong value there is one. */
static void test_rule_rejects_rounded(void) {
    fx f;
    fx_init(&f, 1, 2, 4, 8);
    fx_empty_row(&f, 1);
    kvf_verdict v = fx_judge(&f, "fib");
    CHECK_INT_EQ(v.pass, 0);
    CHECK_INT_EQ(v.lse.violations_rounded, 1);
    CHECK_INT_EQ(kvf_verdict_status_of(&v, 0), KVF_VERDICT_RULE_REJECTS_ROUNDED);
    CHECK_STR_CONTAINS(kvf_verdict_status_name(kvf_verdict_status_of(&v, 0)),
                       "rule-rejects-rounded");
    f.lse[1] = NAN;
    v = fx_judge(&f, "fib");
    CHECK_INT_EQ(kvf_verdict_status_of(&v, 0), KVF_VERDICT_FAIL);
    v = fx_judge(&f, "strict");
    CHECK_INT_EQ(kvf_verdict_status_of(&v, 0), KVF_VERDICT_FAIL);
    f.lse[1] = -INFINITY;
    v = fx_judge(&f, "strict");
    CHECK_INT_EQ(kvf_verdict_status_of(&v, 0), KVF_VERDICT_PASS);
    fx_free(&f);
}

/* ------------------------------------------------------------------------------------------ */
/* Classification, metrics, observer, errors                                                   */
/* ------------------------------------------------------------------------------------------ */

static void test_classification(void) {
    fx f;
    fx_init(&f, 1, 3, 4, 8);
    f.orc.rows[2].overflow = 1;
    /* A NaN on an overflow row alone: overflow, not nonfinite. */
    f.o[2 * 4 + 1] = KVF_BF16_QNAN;
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_OVERFLOW);
    CHECK_VERDICT(&f, "fib", 0, KVF_FINDING_OVERFLOW);
    f.lse[2] = 1e6f;
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_OVERFLOW);
    /* Plus a tolerance failure on an ordinary row: that one is the finding. */
    f.o[0] = 0x3F81u; /* 0.5 -> 1.0078125 */
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_O_TOLERANCE);
    f.lse[1] = 4.0f;
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_O_TOLERANCE);
    f.o[0] = f.orc.o_rounded[0];
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_LSE_TOLERANCE);
    /* A NaN on an ordinary row outranks everything. */
    f.o[1] = KVF_BF16_QNAN;
    CHECK_VERDICT(&f, "strict", 0, KVF_FINDING_NONFINITE);
    fx_free(&f);
}

/* The finding that looked misclassified (FlashInfer on a beyond-f32 case, batch 3 of lengths
 * 1, 0, 0: "nonfinite", o = NaN where the exact o is 54): the NaNs are on the row whose logits
 * leave f32 and are class overflow alone; what made the verdict nonfinite is FlashInfer's lse
 * of about -5e4 on the empty sequences (in the model, exact -inf). The class was right; the
 * worst list, ranked by margin alone, was filled by the out-of-model NaNs (margin inf, seen
 * first) and never showed the elements that decided the class. */
static void test_overflow_row_beside_empty_rows(void) {
    const int32_t H = 4, D = 4;
    /* fa needs the case's tensors for its baseline; tests/test_fuzz.c judges it on a real case. */
    static const char *const rules[] = {"strict", "ulp:1000", "allclose:1:1"};
    fx f;
    fx_init(&f, 3, H, D, 1);
    for (int32_t h = 0; h < H; h++) {
        /* Sequence 0, one token: logits about 1e41, lse beyond f32 (rounds to +inf). */
        kvf_oracle_row *row = &f.orc.rows[h];
        row->overflow = KVF_ORACLE_OVERFLOW_LOGITS;
        row->dot_abs_max = row->logit_abs_max = 9.5e40;
        row->v_abs_max = 54.0;
        fx_set_lse(&f, h, 1.37e41);
        CHECK(isinf(f.orc.lse_rounded[h]));
        for (int32_t d = 0; d < D; d++)
            fx_set_o(&f, h * D + d, 54.0, 54.0);
        fx_empty_row(&f, H + h);
        fx_empty_row(&f, 2 * H + h);
    }
    /* NaN o (inf - inf in an fp32 kernel), lse NaN or the correctly rounded +inf: overflow. */
    for (int64_t i = 0; i < (int64_t)H * D; i++)
        f.o[i] = KVF_BF16_QNAN;
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        CHECK_VERDICT(&f, rules[r], 0, KVF_FINDING_OVERFLOW);
        for (int32_t h = 0; h < H; h++)
            f.lse[h] = NAN;
        CHECK_VERDICT(&f, rules[r], 0, KVF_FINDING_OVERFLOW);
        kvf_verdict v = fx_judge(&f, rules[r]);
        CHECK_INT_EQ(kvf_verdict_status_of(&v, 0), KVF_VERDICT_OUT_OF_MODEL);
        CHECK_INT_EQ(v.o.violations_out_of_model, v.o.violations);
        CHECK_INT_EQ(v.lse.violations_out_of_model, v.lse.violations);
        for (int32_t h = 0; h < H; h++)
            f.lse[h] = INFINITY;
    }
    for (int32_t h = 0; h < H; h++)
        f.lse[h] = NAN;
    /* FlashInfer's empty-sequence lse (its "-inf" is -5e4): an in-model failure, nonfinite, and
     * the worst lse elements are those, ahead of the overflow row's NaNs. */
    for (int32_t h = 0; h < 2 * H; h++)
        f.lse[H + h] = -49998.4f;
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        kvf_verdict v = fx_judge(&f, rules[r]);
        if (v.finding != KVF_FINDING_NONFINITE)
            CHECK_FAIL_AT("rule %s: finding %s, want nonfinite", rules[r],
                          kvf_finding_class_name(v.finding));
        CHECK_INT_EQ(v.lse.worst_count, KVF_WORST_ELEMENTS);
        for (int i = 0; i < v.lse.worst_count; i++) {
            const kvf_element_error *e = &v.lse.worst[i];
            if (e->out_of_model || !e->fails || e->b == 0 || e->kernel_value != -49998.4f)
                CHECK_FAIL_AT("rule %s: worst lse %d is lse[%d,%d] = %g (out of model %d)",
                              rules[r], i, e->b, e->h, e->kernel_value, e->out_of_model);
        }
        /* o fails only out of the model: its list is the NaNs, said as such. */
        CHECK_INT_EQ(v.o.violations, v.o.violations_out_of_model);
        CHECK_INT_EQ(v.o.worst[0].out_of_model, 1);
    }
    for (int32_t h = 0; h < 2 * H; h++)
        f.lse[H + h] = -INFINITY;
    /* A NaN on an in-model row of the same batch is still nonfinite, and it leads o's list. */
    f.o[(2 * H + 1) * D + 2] = KVF_BF16_QNAN;
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        kvf_verdict v = fx_judge(&f, rules[r]);
        if (v.finding != KVF_FINDING_NONFINITE)
            CHECK_FAIL_AT("rule %s: finding %s, want nonfinite", rules[r],
                          kvf_finding_class_name(v.finding));
        CHECK_INT_EQ(v.o.violations - v.o.violations_out_of_model, 1);
        CHECK_INT_EQ(v.o.worst[0].out_of_model, 0);
        CHECK_INT_EQ(v.o.worst[0].b, 2);
        CHECK_INT_EQ(v.o.worst[0].h, 1);
        CHECK_INT_EQ(v.o.worst[0].d, 2);
        for (int i = 1; i < v.o.worst_count; i++)
            CHECK_INT_EQ(v.o.worst[i].out_of_model, 1);
        CHECK_INT_EQ(kvf_verdict_status_of(&v, 0), KVF_VERDICT_FAIL);
    }
    fx_free(&f);
}

static void test_metrics_and_worst(void) {
    fx f;
    fx_init(&f, 1, 1, 16, 8);
    /* Element i is i ulps above r = 1.0 (ulp 2^-7). */
    for (int32_t i = 0; i < 16; i++) {
        fx_set_o(&f, i, 1.0, 1.0);
        f.o[i] = (kvf_bf16)(0x3F80u + (unsigned)i);
    }
    kvf_verdict v = fx_judge(&f, "ulp:3");
    CHECK_INT_EQ(v.o.elements, 16);
    CHECK_INT_EQ(v.lse.elements, 1);
    CHECK_INT_EQ(v.o.violations, 12);
    CHECK_INT_EQ(v.o.max_ulps, 15);
    CHECK_DBL_EQ(v.o.bits_of_error, 4.0);
    CHECK_DBL_EQ(v.o.max_abs, 15 * 0x1p-7);
    CHECK_DBL_EQ(v.o.max_rel_sol, 15 * 0x1p-7);
    CHECK_DBL_EQ(v.o.max_margin, 5.0);
    CHECK_INT_EQ(v.o.worst_count, KVF_WORST_ELEMENTS);
    for (int k = 0; k < KVF_WORST_ELEMENTS; k++) {
        CHECK_INT_EQ(v.o.worst[k].d, 15 - k);
        CHECK_INT_EQ(v.o.worst[k].b, 0);
        CHECK_INT_EQ(v.o.worst[k].h, 0);
        CHECK_INT_EQ(v.o.worst[k].output, KVF_OUTPUT_O);
        CHECK_HEX_EQ(v.o.worst[k].kernel_bits, 0x3F80u + (unsigned)(15 - k));
        CHECK_HEX_EQ(v.o.worst[k].rounded_bits, 0x3F80u);
        if (k > 0) CHECK(v.o.worst[k].margin <= v.o.worst[k - 1].margin);
    }
    CHECK_INT_EQ(v.lse.worst_count, 1);
    CHECK_INT_EQ(v.lse.worst[0].d, -1);
    CHECK_INT_EQ(v.lse.worst[0].output, KVF_OUTPUT_LSE);
    /* r = 0 counts for FIB's relative error (over |r| + 1e-8) but not SOL's (|r| > 0 only). */
    fx_set_o(&f, 0, 0.0, 0.0);
    f.o[0] = kvf_f32_to_bf16_rne(0.001f);
    v = fx_judge(&f, "ulp:3");
    CHECK(v.o.max_rel_fib > 1e4);
    CHECK_DBL_EQ(v.o.max_rel_sol, 15 * 0x1p-7);
    fx_free(&f);
}

typedef struct obs_log {
    int64_t calls, o_calls, lse_calls, order_errors;
    int32_t next_d;
} obs_log;

static void observe(void *ctx, const kvf_element_error *e) {
    obs_log *log = ctx;
    log->calls++;
    if (e->output == KVF_OUTPUT_O) {
        log->o_calls++;
        if (e->d != log->next_d) log->order_errors++;
        log->next_d = e->d + 1;
    } else {
        log->lse_calls++;
        if (e->d != -1 || log->next_d != 4) log->order_errors++;
        log->next_d = 0;
    }
}

static void test_observer(void) {
    fx f;
    fx_init(&f, 2, 3, 4, 8);
    kvf_rule rule;
    kvf_rule_default(&rule);
    kvf_verdict v;
    kvf_error err = {0};
    obs_log log = {0, 0, 0, 0, 0};
    CHECK_OK(kvf_judge_observe(&v, &rule, &f.c, &f.orc, f.o, f.lse, observe, &log, &err), &err);
    CHECK_INT_EQ(log.calls, 2 * 3 * 4 + 2 * 3);
    CHECK_INT_EQ(log.o_calls, 2 * 3 * 4);
    CHECK_INT_EQ(log.lse_calls, 2 * 3);
    CHECK_INT_EQ(log.order_errors, 0);
    CHECK_INT_EQ(v.pass, 1);
    fx_free(&f);
}

static void test_judge_errors(void) {
    fx f;
    fx_init(&f, 1, 2, 4, 8);
    kvf_rule rule;
    kvf_rule_default(&rule);
    kvf_verdict v;
    kvf_error err = {0};
    f.orc.head_dim = 8;
    CHECK_INT_EQ(kvf_judge(&v, &rule, &f.c, &f.orc, f.o, f.lse, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "does not match");
    CHECK(isnan(kvf_strict_bound_o(&f.c, &f.orc, 0, 0, 0)));
    f.orc.head_dim = 4;
    CHECK_INT_EQ(kvf_judge(&v, &rule, &f.c, &f.orc, NULL, f.lse, &err), KVF_EINVAL);
    CHECK_INT_EQ(kvf_judge(&v, NULL, &f.c, &f.orc, f.o, f.lse, &err), KVF_EINVAL);
    CHECK(isnan(kvf_strict_bound_o(&f.c, &f.orc, 0, 2, 0)));
    CHECK(isnan(kvf_strict_bound_lse(&f.c, &f.orc, 1, 0)));
    fx_free(&f);
}

/* Margins as people read them: a passing margin never prints as the limit. */
static void margin_is(double m, const char *want) {
    char b[32];
    kvf_margin_text(b, sizeof b, m);
    if (strcmp(b, want) != 0) CHECK_FAIL_AT("margin %.17g reads \"%s\", not \"%s\"", m, b, want);
}

static void test_margin_text(void) {
    margin_is(0.9995949121809085, "0.999");
    margin_is(0.9999999, "0.999");
    margin_is(1.0, "1");
    margin_is(1.00049, "1");
    margin_is(2.5e6, "2.5e+06");
    margin_is(0.0475, "0.047");
    margin_is(0, "0");
    margin_is(3e-5, "3e-05");
    margin_is(INFINITY, "inf");
    margin_is(NAN, "nan");
}

static const check_test tests[] = {
    {"margin_text", test_margin_text},
    {"nonfinite_inputs", test_nonfinite_inputs},
    {"excess_margin", test_excess_margin},
    {"rule_rejects_rounded", test_rule_rejects_rounded},
    {"classification", test_classification},
    {"overflow_row_beside_empty_rows", test_overflow_row_beside_empty_rows},
    {"metrics_and_worst", test_metrics_and_worst},
    {"observer", test_observer},
    {"judge_errors", test_judge_errors},
    {NULL, NULL},
};

CHECK_MAIN(tests)
