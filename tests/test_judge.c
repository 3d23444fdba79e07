/* Unit tests for the judge (oracle/src/judge.c): each tolerance rule on hand-made element values,
 * the metrics, the finding classification and rule parsing.
 *
 * Oracle results are filled in by hand (fx_* below), so these tests depend on neither the
 * oracle nor the case generator: only on the judge, the bf16 helpers and the error table. */
#include <float.h>
#include <stdint.h>

#include "check.h"
#include "kvfuzz/judge.h"

/* ------------------------------------------------------------------------------------------ */
/* Fixture: a case shape, an oracle result and the kernel's outputs, all set by hand.          */
/* ------------------------------------------------------------------------------------------ */

typedef struct fx {
    kvf_case c;
    kvf_oracle_result orc;
    kvf_bf16 *o; /* kernel o  [B][H][D] */
    float *lse;  /* kernel lse [B][H] */
} fx;

static double bf(kvf_bf16 h) {
    return (double)kvf_bf16_to_f32(h);
}

/* Round to nearest even of a double, independent of double rounding through float: take the
 * candidate from float and its two neighbours and keep the nearest (even on a tie). Positive x
 * only, which is all the tests need. */
static kvf_bf16 rn_bf16(double x) {
    kvf_bf16 c = kvf_f32_to_bf16_rne((float)x), best = c;
    double bd = fabs(bf(c) - x);
    for (int s = -1; s <= 1; s += 2) {
        if (c == 0 && s < 0) continue;
        kvf_bf16 n = (kvf_bf16)(c + s);
        double nd = fabs(bf(n) - x);
        if (nd < bd || (nd == bd && (n & 1u) == 0)) {
            best = n;
            bd = nd;
        }
    }
    return best;
}

static int64_t fx_rows(const fx *f) {
    return (int64_t)f->c.batch_size * f->c.num_qo_heads;
}
static int64_t fx_elems(const fx *f) {
    return fx_rows(f) * f->c.head_dim;
}

static void fx_set_o(fx *f, int64_t i, double x, double cond) {
    f->orc.o_exact[i] = x;
    f->orc.o_cond[i] = cond;
    f->orc.o_rounded[i] = x < 0 ? (kvf_bf16)(rn_bf16(-x) | 0x8000u) : rn_bf16(x);
    f->o[i] = f->orc.o_rounded[i];
}

static void fx_set_lse(fx *f, int64_t row, double x) {
    f->orc.lse_exact[row] = x;
    f->orc.lse_rounded[row] = (float)x;
    f->lse[row] = (float)x;
}

/* Every row: L tokens, modest logits, every o element exactly 0.5 with C = 0.5, lse = 3. The
 * kernel output starts equal to the correctly rounded one. */
static void fx_init(fx *f, int32_t B, int32_t H, int32_t D, int64_t L) {
    memset(f, 0, sizeof *f);
    f->c.batch_size = B;
    f->c.num_qo_heads = H;
    f->c.num_kv_heads = H;
    f->c.head_dim = D;
    f->c.page_size = 64;
    f->c.sm_scale = 1.0f / sqrtf((float)D);
    f->orc.batch_size = B;
    f->orc.num_qo_heads = H;
    f->orc.head_dim = D;
    int64_t rows = fx_rows(f), n = fx_elems(f);
    f->orc.o_rounded = calloc((size_t)n, sizeof *f->orc.o_rounded);
    f->orc.o_exact = calloc((size_t)n, sizeof *f->orc.o_exact);
    f->orc.o_cond = calloc((size_t)n, sizeof *f->orc.o_cond);
    f->orc.lse_rounded = calloc((size_t)rows, sizeof *f->orc.lse_rounded);
    f->orc.lse_exact = calloc((size_t)rows, sizeof *f->orc.lse_exact);
    f->orc.rows = calloc((size_t)rows, sizeof *f->orc.rows);
    f->o = calloc((size_t)n, sizeof *f->o);
    f->lse = calloc((size_t)rows, sizeof *f->lse);
    if (!f->orc.o_rounded || !f->orc.o_exact || !f->orc.o_cond || !f->orc.lse_rounded ||
        !f->orc.lse_exact || !f->orc.rows || !f->o || !f->lse) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int64_t r = 0; r < rows; r++) {
        f->orc.rows[r].length = L;
        f->orc.rows[r].dot_abs_max = 2.0;
        f->orc.rows[r].logit_abs_max = 1.0;
        f->orc.rows[r].v_abs_max = 2.0;
        fx_set_lse(f, r, 3.0);
    }
    for (int64_t i = 0; i < n; i++)
        fx_set_o(f, i, 0.5, 0.5);
}

/* Row r becomes an empty sequence: o = 0, lse = -inf, and a correct kernel's output. */
static void fx_empty_row(fx *f, int64_t r) {
    kvf_oracle_row *row = &f->orc.rows[r];
    memset(row, 0, sizeof *row);
    for (int32_t d = 0; d < f->c.head_dim; d++)
        fx_set_o(f, r * f->c.head_dim + d, 0.0, 0.0);
    f->orc.lse_exact[r] = -INFINITY;
    f->orc.lse_rounded[r] = -INFINITY;
    f->lse[r] = -INFINITY;
}

static void fx_free(fx *f) {
    free(f->orc.o_rounded);
    free(f->orc.o_exact);
    free(f->orc.o_cond);
    free(f->orc.lse_rounded);
    free(f->orc.lse_exact);
    free(f->orc.rows);
    free(f->o);
    free(f->lse);
    memset(f, 0, sizeof *f);
}

static kvf_verdict fx_judge(const fx *f, const char *rule_text) {
    kvf_rule rule;
    kvf_error err = {0};
    kvf_verdict v;
    memset(&v, 0, sizeof v);
    CHECK_OK(kvf_rule_parse(&rule, rule_text, &err), &err);
    CHECK_OK(kvf_judge(&v, &rule, &f->c, &f->orc, f->o, f->lse, &err), &err);
    return v;
}

#define CHECK_VERDICT(f, rule, want_pass, want_finding)                                            \
    do {                                                                                           \
        kvf_verdict v_ = fx_judge((f), (rule));                                                    \
        CHECK_INT_EQ(v_.pass, (want_pass));                                                        \
        if (v_.finding != (want_finding))                                                          \
            CHECK_FAIL_AT("rule %s: finding %s, want %s", (rule),                                  \
                          kvf_finding_class_name(v_.finding),                                      \
                          kvf_finding_class_name(want_finding));                                   \
    } while (0)

/* ------------------------------------------------------------------------------------------ */
/* Rule parsing                                                                                */
/* ------------------------------------------------------------------------------------------ */

static void test_parse_valid(void) {
    kvf_rule r;
    kvf_error err = {0};
    CHECK_OK(kvf_rule_parse(&r, "fib", &err), &err);
    CHECK_INT_EQ(r.kind, KVF_RULE_FIB);
    CHECK_DBL_EQ(r.atol, 1e-2);
    CHECK_DBL_EQ(r.rtol, 1e-2);
    CHECK(strcmp(r.name, "fib") == 0);
    CHECK_OK(kvf_rule_parse(&r, "sol", &err), &err);
    CHECK_INT_EQ(r.kind, KVF_RULE_SOL);
    CHECK_DBL_EQ(r.atol, 1e-2);
    CHECK_OK(kvf_rule_parse(&r, "strict", &err), &err);
    CHECK_INT_EQ(r.kind, KVF_RULE_STRICT);
    CHECK_OK(kvf_rule_parse(&r, "allclose:1e-3:1e-3", &err), &err);
    CHECK_INT_EQ(r.kind, KVF_RULE_ALLCLOSE);
    CHECK_DBL_EQ(r.atol, 1e-3);
    CHECK_DBL_EQ(r.rtol, 1e-3);
    CHECK(strcmp(r.name, "allclose:0.001:0.001") == 0);
    CHECK_OK(kvf_rule_parse(&r, "allclose:0x1p-3:-0", &err), &err);
    CHECK_DBL_EQ(r.atol, 0.125);
    CHECK(strcmp(r.name, "allclose:0.125:0") == 0);
    /* The canonical name parses back to the very same tolerances. */
    CHECK_OK(kvf_rule_parse(&r, "allclose:0.1:3e-7", &err), &err);
    kvf_rule again;
    CHECK_OK(kvf_rule_parse(&again, r.name, &err), &err);
    CHECK_DBL_EQ(again.atol, r.atol);
    CHECK_DBL_EQ(again.rtol, r.rtol);
    CHECK(strcmp(again.name, r.name) == 0);
    CHECK_OK(kvf_rule_parse(&r, "ulp:0", &err), &err);
    CHECK_INT_EQ(r.kind, KVF_RULE_ULP);
    CHECK_INT_EQ(r.ulps, 0);
    CHECK_OK(kvf_rule_parse(&r, "ulp:007", &err), &err);
    CHECK_INT_EQ(r.ulps, 7);
    CHECK(strcmp(r.name, "ulp:7") == 0);
    kvf_rule_default(&r);
    CHECK_INT_EQ(r.kind, KVF_RULE_STRICT);
    CHECK(strcmp(r.name, "strict") == 0);
    for (int k = 0; k < KVF_RULE_KIND_COUNT; k++)
        CHECK(strlen(kvf_rule_help((kvf_rule_kind)k)) > 10);
}

static void test_parse_errors(void) {
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"", "empty"},
        {NULL, "empty"},
        {"FIB", "unknown rule 'FIB'"},
        {"ulpx", "unknown rule 'ulpx'"},
        {"allclosex:1:1", "unknown rule"},
        {"fib:0.1", "'fib' takes no parameters"},
        {"sol:0.1:0.1", "'sol' takes no parameters"},
        {"strict:2", "unknown component '2'"},
        {"fa:bf16-p+bf16-p", "names P's rounding twice"},
        {"strict:", "empty precision model"},
        {"allclose", "needs two tolerances"},
        {"allclose:1e-3", "needs two tolerances"},
        {"allclose:1:2:3", "more than two tolerances"},
        {"allclose:1e-3:", "RTOL in rule"},
        {"allclose::1e-3", "ATOL in rule"},
        {"allclose:abc:1e-3", "ATOL 'abc'"},
        {"allclose:1e-3:1e-3x", "trailing characters 'x'"},
        {"allclose:-1:0", "ATOL '-1' in rule 'allclose:-1:0' is negative"},
        {"allclose:inf:0", "ATOL 'inf' in rule 'allclose:inf:0' is not finite"},
        {"allclose:0:nan", "RTOL 'nan' in rule 'allclose:0:nan' is not finite"},
        {"allclose:1e999:0", "is not finite"},
        {"allclose: 1:2", "starts with a blank"},
        {"ulp", "needs a count"},
        {"ulp:", "needs a count"},
        {"ulp:-1", "ulp count '-1'"},
        {"ulp:1.5", "ulp count '1.5'"},
        {"ulp:+1", "ulp count '+1'"},
        {"ulp:1e3", "ulp count '1e3'"},
        {"ulp: 1", "ulp count ' 1'"},
        {"ulp:99999999999999999999", "too large"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kvf_rule r;
        kvf_error err = {0};
        int rc = kvf_rule_parse(&r, bad[i].text, &err);
        if (rc != KVF_EINVAL) {
            CHECK_FAIL_AT("rule '%s' gave %d, want KVF_EINVAL",
                          bad[i].text ? bad[i].text : "(null)", rc);
            continue;
        }
        CHECK_INT_EQ(err.code, KVF_EINVAL);
        CHECK_STR_CONTAINS(err.msg, bad[i].needle);
        CHECK(strchr(err.msg, '\n') == NULL);
    }
}

/* The rule table (kvfuzz/rules.def): every kind has its words and parses back from its name,
 * the sentence for an unknown rule lists every rule, and only strict and fa take a model. */
static void test_rule_table(void) {
    kvf_error err = {0};
    kvf_rule bad;
    CHECK(kvf_rule_parse(&bad, "no-such-rule", &err) == KVF_EINVAL);
    for (int k = 0; k < KVF_RULE_KIND_COUNT; k++) {
        const char *help = kvf_rule_help((kvf_rule_kind)k);
        char name[32];
        size_t n = strcspn(help, " :[");
        CHECK(n > 0 && n < sizeof name);
        memcpy(name, help, n);
        name[n] = '\0';
        CHECK_STR_CONTAINS(err.msg, name);
        CHECK(strlen(kvf_rule_scope((kvf_rule_kind)k)) > 10);
        kvf_rule r;
        const char *text = strcmp(name, "allclose") == 0 ? "allclose:1e-3:1e-3"
                           : strcmp(name, "ulp") == 0    ? "ulp:2"
                                                         : name;
        CHECK(kvf_rule_parse(&r, text, NULL) == 0);
        CHECK_INT_EQ(r.kind, k);
        CHECK_INT_EQ(kvf_rule_takes_precision(&r), k == KVF_RULE_STRICT || k == KVF_RULE_FA);
    }
    CHECK(strcmp(kvf_rule_help(KVF_RULE_KIND_COUNT), "unknown rule kind") == 0);
    /* A model applies to the rules that take one and name none. */
    kvf_rule rs[4];
    CHECK(kvf_rule_parse(&rs[0], "strict", NULL) == 0);
    CHECK(kvf_rule_parse(&rs[1], "fa:ftz", NULL) == 0);
    CHECK(kvf_rule_parse(&rs[2], "fib", NULL) == 0);
    CHECK(kvf_rule_parse(&rs[3], "fa", NULL) == 0);
    kvf_precision p;
    CHECK(kvf_precision_parse(&p, "bf16-p", NULL) == 0);
    kvf_rules_apply_precision(rs, 4, &p);
    CHECK(strcmp(rs[0].name, "strict:bf16-p") == 0);
    CHECK(strcmp(rs[1].name, "fa:ftz") == 0);
    CHECK(strcmp(rs[2].name, "fib") == 0);
    CHECK(strcmp(rs[3].name, "fa:bf16-p") == 0);
}

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
    {"margin_text", test_margin_text},
    {"sol_overflow_rows_apart", test_sol_overflow_rows_apart},
    {"strict_very_long_rows", test_strict_very_long_rows},
    {"parse_valid", test_parse_valid},
    {"parse_errors", test_parse_errors},
    {"rule_table", test_rule_table},
    {"fib_and_mask", test_fib_and_mask},
    {"fib_nonfinite", test_fib_nonfinite},
    {"empty_lse_each_rule", test_empty_lse_each_rule},
    {"sol_element", test_sol_element},
    {"sol_threshold", test_sol_threshold},
    {"allclose", test_allclose},
    {"ulp", test_ulp},
    {"strict_rounded_passes", test_strict_rounded_passes},
    {"strict_short_sequence", test_strict_short_sequence},
    {"strict_monotone", test_strict_monotone},
    {"strict_seed_shape_number", test_strict_seed_shape_number},
    {"strict_empty_and_nonfinite", test_strict_empty_and_nonfinite},
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
