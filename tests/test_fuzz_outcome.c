/* Unit tests for the outcome (fuzz/trial/outcome.c, features.c, signature.c): error buckets,
 * judging a case into a finding class and its signature, and overflow counted only when asked
 * for. */
#include "fuzz_fixtures.h"

static void buckets(void) {
    CHECK_INT_EQ(kvf_margin_bucket(0), 0);
    CHECK_INT_EQ(kvf_margin_bucket(1.0), 51);
    CHECK_INT_EQ(kvf_margin_bucket(1.5), 51);
    CHECK_INT_EQ(kvf_margin_bucket(2.0), 52);
    CHECK_INT_EQ(kvf_margin_bucket(0.5), 50);
    CHECK_INT_EQ(kvf_margin_bucket(1e-300), 1);
    CHECK_INT_EQ(kvf_margin_bucket(1e300), 61);
    CHECK_INT_EQ(kvf_margin_bucket(INFINITY), 62);
    CHECK_INT_EQ(kvf_margin_bucket(NAN), 63);
    CHECK_INT_EQ(kvf_ulp_bucket(0), 0);
    CHECK_INT_EQ(kvf_ulp_bucket(1), 1);
    CHECK_INT_EQ(kvf_ulp_bucket(2), 2);
    CHECK_INT_EQ(kvf_ulp_bucket(3), 2);
    CHECK_INT_EQ(kvf_ulp_bucket(4), 3);
    CHECK_INT_EQ(kvf_ulp_bucket(INT64_MAX), 64);
    CHECK_INT_EQ(kvf_ulp_bucket(-1), 65);
}

/* A generated beyond-f32 case of batch 3, lengths 1, 0, 0, judged by the default rules (strict
 * and fa) on the outputs FlashInfer gave for it: NaN o and lse on sequence 0, whose logits
 * leave f32 (lse about 1.4e41), and its empty-sequence lse of about -5e4 (its "-inf"). The
 * finding is nonfinite, and rightly: the empty sequences are in the model. It was filed as
 * "nonfinite ... o nan", described by the out-of-model NaNs; its signature now names the lse
 * that decided it, the known FlashInfer empty-sequence finding ("lse|finite"). */
static void beyond_f32_finding_signature(void) {
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "beyond-f32-logits", 1, &err), &err);
    CHECK_OK(kvf_spec_set_batch(&s, 3, &err), &err);
    kvf_recipe_set_seq_len(&s.recipe, 0, 1);
    kvf_recipe_set_seq_len(&s.recipe, 1, 0);
    kvf_recipe_set_seq_len(&s.recipe, 2, 0);
    kvf_limits cl = case_limits();
    kvf_case c;
    CHECK_OK(kvf_case_build(&c, &s, &cl, &err), &err);
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    kvf_oracle_result oracle;
    CHECK_OK(kvf_oracle_run(&oracle, &c, &oo, &err), &err);
    const int64_t rows = kvf_case_lse_elems(&c), D = c.head_dim;
    /* The oracle flags every row of sequence 0 (some with an lse past f32), none of the empty
     * ones. */
    int beyond = 0;
    for (int64_t r = 0; r < rows; r++) {
        int seq0 = r < c.num_qo_heads;
        CHECK_INT_EQ(oracle.rows[r].overflow != 0, seq0);
        CHECK_INT_EQ(oracle.rows[r].nonfinite_input, 0);
        if (seq0 && isfinite(oracle.lse_exact[r]) && fabs(oracle.lse_exact[r]) > ldexp(1.0, 128))
            beyond++;
    }
    CHECK(beyond > 0);
    kvf_bf16 *o = malloc((size_t)kvf_case_o_elems(&c) * sizeof *o);
    float *lse = malloc((size_t)rows * sizeof *lse);
    if (!o || !lse) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int64_t r = 0; r < rows; r++) {
        int seq0 = r < c.num_qo_heads;
        for (int64_t d = 0; d < D; d++)
            o[r * D + d] = seq0 ? KVF_BF16_QNAN : 0x0000u;
        lse[r] = seq0 ? NAN : -INFINITY;
    }
    kvf_rule rules[KVF_DEFAULT_RULES];
    int nr = kvf_rule_default_set(rules, KVF_DEFAULT_RULES);
    kvf_outcome out;
    char sig[256];
    /* Correct empty sequences: only the overflow rows fail, class overflow, no finding. */
    CHECK_OK(kvf_outcome_judge(&out, rules, nr, 0, &c, &oracle, o, lse, NULL, NULL, &err), &err);
    for (int r = 0; r < nr; r++)
        CHECK_INT_EQ(out.verdicts[r].finding, KVF_FINDING_OVERFLOW);
    CHECK_INT_EQ(out.finding, KVF_FINDING_NONE);
    CHECK_OK(kvf_outcome_judge(&out, rules, nr, 1, &c, &oracle, o, lse, NULL, NULL, &err), &err);
    CHECK_INT_EQ(out.finding, KVF_FINDING_OVERFLOW);
    kvf_outcome_signature(&out, "flashinfer", sig, sizeof sig);
    CHECK_STR_CONTAINS(sig, "overflow|flashinfer|strict|o|");
    /* The lse the oracle rounds (+-inf) on those rows: still overflow. */
    for (int64_t r = 0; r < c.num_qo_heads; r++)
        lse[r] = oracle.lse_rounded[r];
    CHECK_OK(kvf_outcome_judge(&out, rules, nr, 0, &c, &oracle, o, lse, NULL, NULL, &err), &err);
    for (int r = 0; r < nr; r++)
        CHECK_INT_EQ(out.verdicts[r].finding, KVF_FINDING_OVERFLOW);
    CHECK_INT_EQ(out.finding, KVF_FINDING_NONE);
    /* FlashInfer's empty-sequence lse: nonfinite, named by the lse. */
    for (int64_t r = c.num_qo_heads; r < rows; r++)
        lse[r] = -49998.4f;
    CHECK_OK(kvf_outcome_judge(&out, rules, nr, 0, &c, &oracle, o, lse, NULL, NULL, &err), &err);
    for (int r = 0; r < nr; r++)
        CHECK_INT_EQ(out.verdicts[r].finding, KVF_FINDING_NONFINITE);
    CHECK_INT_EQ(out.finding, KVF_FINDING_NONFINITE);
    kvf_outcome_signature(&out, "flashinfer", sig, sizeof sig);
    CHECK_STR_CONTAINS(sig, "nonfinite|flashinfer|strict|lse|finite");
    CHECK_INT_EQ(out.verdicts[0].lse.worst[0].out_of_model, 0);
    /* A NaN on an in-model row (sequence 1) is the o's finding. */
    for (int64_t r = c.num_qo_heads; r < rows; r++)
        lse[r] = -INFINITY;
    o[(c.num_qo_heads + 1) * D + 3] = KVF_BF16_QNAN;
    CHECK_OK(kvf_outcome_judge(&out, rules, nr, 0, &c, &oracle, o, lse, NULL, NULL, &err), &err);
    CHECK_INT_EQ(out.finding, KVF_FINDING_NONFINITE);
    kvf_outcome_signature(&out, "flashinfer", sig, sizeof sig);
    CHECK_STR_CONTAINS(sig, "nonfinite|flashinfer|strict|o|nan");
    CHECK_INT_EQ(out.verdicts[0].o.worst[0].b, 1);
    CHECK_INT_EQ(out.verdicts[0].o.worst[0].d, 3);
    free(o);
    free(lse);
    kvf_oracle_result_free(&oracle);
    kvf_case_free(&c);
    kvf_spec_free(&s);
}

/* Overflow-class violations count only when asked for. */
static void overflow_needs_asking(void) {
    kvf_outcome out;
    kvf_rule rule;
    kvf_rule_parse(&rule, "strict", NULL);
    kvf_verdict v = {0};
    v.rule = rule;
    v.pass = 0;
    v.finding = KVF_FINDING_OVERFLOW;
    /* Judge-free check of the selection: fake one overflow verdict. */
    kvf_outcome_from_run(&out, KVF_RUN_OK, NULL);
    out.nrules = 1;
    out.verdicts[0] = v;
    int f[16];
    CHECK(kvf_outcome_features(&out, f) == 5);
    kvf_spec s = small_spec(1);
    s.recipe.logits = KVF_LOGITS_BEYOND_F32;
    kvf_limits cl = case_limits();
    kvf_case c;
    kvf_error err = {0};
    CHECK_OK(kvf_case_build(&c, &s, &cl, &err), &err);
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    kvf_oracle_result oracle;
    CHECK_OK(kvf_oracle_run(&oracle, &c, &oo, &err), &err);
    kvf_bf16 *o = calloc((size_t)kvf_case_o_elems(&c), sizeof *o);
    float *lse = calloc((size_t)kvf_case_lse_elems(&c), sizeof *lse);
    /* All-zero output on overflow rows: wrong, but only in the overflow class. */
    CHECK_OK(kvf_outcome_judge(&out, &rule, 1, 0, &c, &oracle, o, lse, NULL, NULL, &err), &err);
    CHECK_INT_EQ(out.verdicts[0].finding, KVF_FINDING_OVERFLOW);
    CHECK_INT_EQ(out.finding, KVF_FINDING_NONE);
    CHECK_OK(kvf_outcome_judge(&out, &rule, 1, 1, &c, &oracle, o, lse, NULL, NULL, &err), &err);
    CHECK_INT_EQ(out.finding, KVF_FINDING_OVERFLOW);
    CHECK_INT_EQ(out.rule, 0);
    free(o);
    free(lse);
    kvf_oracle_result_free(&oracle);
    kvf_case_free(&c);
    kvf_spec_free(&s);
}

static const check_test tests[] = {
    {"buckets", buckets},
    {"overflow_needs_asking", overflow_needs_asking},
    {"beyond_f32_finding_signature", beyond_f32_finding_signature},
    {NULL, NULL},
};

CHECK_MAIN(tests)
