/* Unit tests of the fa rule's allowance (oracle/src/rules/fa_allow.c, fa.c): its shape in rho
 * and C, rows whose baseline is unusable, the excess margin at an exact tie as under strict, a
 * number (strict's) wherever fa's own allowance is unbounded, and the rule's power: the
 * registry's bf16-partials and truncating-store mutants fail fa on the seed workload, where
 * strict passes them. */
#include "case_oracle.h"
#include "fa_allow.h"
#include "fa_rule_cases.h"
#include "kvfuzz/kernel.h"

/* Power: the bf16-partials and truncating-store bugs pass strict at the seed workload's length
 * and fail fa there; the production kernels pass both. */
static void test_power_on_seed(void) {
    const char *names[] = {"cpu-ref", "cpu-splitkv", "cpu-splitkv/mut=bf16-partials",
                           "cpu-splitkv/mut=trunc-store"};
    const int fa_fails[] = {0, 0, 1, 1};
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "seed-h20kv4", 1, &err), &err);
    kvf_case c;
    kvf_oracle_result r;
    if (kvf_test_case_and_oracle(&s, &c, &r)) return;
    kvf_bf16 *o = malloc((size_t)kvf_case_o_elems(&c) * sizeof *o);
    float *lse = malloc((size_t)kvf_case_lse_elems(&c) * sizeof *lse);
    for (int i = 0; i < 4; i++) {
        const kvf_kernel *k = kvf_kernel_find(names[i]);
        if (!k) {
            CHECK_FAIL_AT("kernel %s is not registered", names[i]);
            continue;
        }
        CHECK_OK(kvf_kernel_run_once(k, &c, o, lse, &err), &err);
        kvf_rule strict, fa;
        kvf_rule_parse(&strict, "strict", NULL);
        kvf_rule_parse(&fa, "fa", NULL);
        kvf_verdict vs, vf;
        CHECK_OK(kvf_judge(&vs, &strict, &c, &r, o, lse, &err), &err);
        CHECK_OK(kvf_judge(&vf, &fa, &c, &r, o, lse, &err), &err);
        CHECK(vs.pass);
        if (vf.pass == fa_fails[i])
            CHECK_FAIL_AT("%s: fa %s on the seed workload", names[i], vf.pass ? "passes" : "fails");
        if (fa_fails[i]) {
            CHECK_INT_EQ(vf.finding, KVF_FINDING_O_TOLERANCE);
            printf("%s: fa fails %lld of %lld o elements at L = %lld\n", names[i],
                   (long long)vf.o.violations, (long long)vf.o.elements,
                   (long long)r.rows[0].length);
        }
    }
    free(o);
    free(lse);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

/* The allowance's shape: the correctly rounded value passes whatever rho is; with rho = 0 an
 * element one bf16 ulp off fails; the allowance grows with rho and with C. */
static void test_allowance_shape(void) {
    kvf__fa_row fr = {1, 0.0};
    double x = 0.0301, cond = 0.8;
    double xerr = 0x1p-24 * (5 * cond + 2 * x);
    double a0 = kvf__fa_o_allowed(&fr, x, cond, 0.0, 0.0, xerr);
    double rn = kvf_bf16_to_f32(kvf_f32_to_bf16_rne((float)x));
    CHECK(fabs(rn - x) <= a0);
    CHECK(fabs(rn + kvf_bf16_ulp(rn) - x) > a0);
    fr.rho = 1e-6;
    double a1 = kvf__fa_o_allowed(&fr, x, cond, 0.0, 0.0, xerr);
    CHECK(a1 > a0);
    CHECK(kvf__fa_o_allowed(&fr, x, 2 * cond, 0.0, 0.0, xerr) > a1);
    CHECK(kvf__fa_o_allowed(&fr, x, cond, 1e-6, 0.0, xerr) > a1);
    /* A baseline that never ran, or hit a non-finite value, makes the row unusable. */
    float base[2] = {0.5f, INFINITY};
    double xs[2] = {0.5, 0.25}, cs[2] = {1, 1};
    kvf__fa_row m = {1, 0.0};
    kvf__fa_row_measure(&m, base, xs, cs, 2, 0);
    CHECK(!m.usable);
    m = (kvf__fa_row){1, 0.0};
    kvf__fa_row_measure(&m, base, xs, cs, 1, 1);
    CHECK(!m.usable);
    m = (kvf__fa_row){1, 0.0};
    kvf__fa_row_measure(&m, base, xs, cs, 1, 0);
    CHECK(m.usable && m.rho == 0.0);
    /* Several baselines: the larger error is kept. */
    float b2[1] = {0.5f + 0x1p-20f};
    kvf__fa_row_measure(&m, b2, xs, cs, 1, 0);
    CHECK(m.usable && m.rho > 0.0);
}

/* Excess margin under fa, as under strict: at an exact bf16 tie both neighbours are correct
 * roundings of the exact value, so the one the oracle did not pick uses none of the headroom
 * beyond the final rounding (excess 0) though its margin counts the half ulp. The tie is
 * built: equal logits make o the mean of v, and half the tokens holding 1 and half 1 + 2^-7
 * put that mean at 1 + 2^-8, halfway between two bf16 values. */

static void test_tie_excess_margin(void) {
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "equal-logits", 1, &err), &err);
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_case c;
    int rc = kvf_case_build(&c, &s, &lim, &err);
    kvf_spec_free(&s);
    CHECK_OK(rc, &err);
    if (rc) return;
    int64_t L = kvf_case_seq_len(&c, 0);
    CHECK(L >= 2 && L % 2 == 0);
    for (int64_t t = 0; t < L; t++)
        c.v_cache[kvf_case_kv_offset(&c, 0, t, 0, 0)] =
            kvf_f32_to_bf16_rne(t < L / 2 ? 1.0f : 1.0078125f);
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    kvf_oracle_result r;
    CHECK_OK(kvf_oracle_run(&r, &c, &oo, &err), &err);
    CHECK(r.o_exact[0] == 1.0 + 0x1p-8);
    int64_t n = kvf_case_o_elems(&c), rows = kvf_case_lse_elems(&c);
    kvf_bf16 *o = malloc((size_t)n * sizeof *o);
    float *lse = malloc((size_t)rows * sizeof *lse);
    memcpy(o, r.o_rounded, (size_t)n * sizeof *o);
    memcpy(lse, r.lse_rounded, (size_t)rows * sizeof *lse);
    o[0] ^= 1u; /* the tie's other neighbour */
    CHECK(kvf_bf16_to_f32(o[0]) == 1.0f || kvf_bf16_to_f32(o[0]) == 1.0078125f);
    static const char *const against_exact[] = {"strict", "fa"};
    for (int i = 0; i < 2; i++) {
        const kvf_verdict vd = judged_by(against_exact[i], &c, &r, o, lse);
        CHECK(vd.pass);
        CHECK(vd.o.max_margin > 0.5);
        CHECK_DBL_EQ(vd.o.max_excess_margin, 0.0);
    }
    free(o);
    free(lse);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

/* A row whose model terms are unbounded (a heavily cancelling case from an H200 campaign: the
 * exact o is 0 and fp32 kernels are 10^9 off) once gave fa a NaN allowance, which passed every
 * error with margin 1. Every o element must be judged against a number: strict's where fa's
 * own allowance is unbounded. */
static void test_unbounded_allowance(void) {
    kvf_case c;
    kvf_oracle_result r;
    kvf_error err = {0};
    if (load_test_case("fa-unbounded-allowance.kvfz", &c, &r)) return;
    kvf_bf16 *o = malloc((size_t)kvf_case_o_elems(&c) * sizeof *o);
    float *lse = malloc((size_t)kvf_case_lse_elems(&c) * sizeof *lse);
    CHECK_OK(kvf_kernel_run_once(kvf_kernel_find("cpu-ref"), &c, o, lse, &err), &err);
    kvf_rule fa;
    kvf_rule_parse(&fa, "fa", NULL);
    kvf_verdict v;
    CHECK_OK(kvf_judge(&v, &fa, &c, &r, o, lse, &err), &err);
    CHECK(v.o.worst_count > 0);
    for (int i = 0; i < v.o.worst_count; i++) {
        if (isnan(v.o.worst[i].allowed))
            CHECK_FAIL_AT("o[%d,%d,%d]: fa's allowance is NaN (error %g)", v.o.worst[i].b,
                          v.o.worst[i].h, v.o.worst[i].d, v.o.worst[i].abs_error);
        CHECK(v.o.worst[i].margin < 1);
    }
    /* kvf_fa_bound_row reports the allowance the judge applies: a number, strict's there. */
    const int32_t D = c.head_dim;
    double *allowed = malloc((size_t)D * sizeof *allowed), *pre = malloc((size_t)D * sizeof *pre);
    long numbers = 0;
    for (int32_t b = 0; b < c.batch_size; b++)
        for (int32_t h = 0; h < c.num_qo_heads; h++) {
            CHECK_INT_EQ(kvf_fa_bound_row(&c, &r, b, h, NULL, allowed, pre), 0);
            for (int32_t d = 0; d < D; d++) {
                const double x = r.o_exact[((int64_t)b * c.num_qo_heads + h) * D + d];
                if (!isfinite(x)) continue;
                if (!isfinite(allowed[d]))
                    CHECK_FAIL_AT("kvf_fa_bound_row o[%d,%d,%d] = %g", b, h, d, allowed[d]);
                numbers++;
            }
        }
    CHECK(numbers > 0);
    free(allowed);
    free(pre);
    free(o);
    free(lse);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

static const check_test tests[] = {
    {"unbounded_allowance", test_unbounded_allowance},
    {"tie_excess_margin", test_tie_excess_margin},
    {"allowance_shape", test_allowance_shape},
    {"power_on_seed", test_power_on_seed},
    {NULL, NULL},
};

CHECK_MAIN(tests)
