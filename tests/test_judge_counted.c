/* The judge's counted elements (oracle/src/judge.c, count_exact): without an observer, an
 * element whose bits are the correctly rounded value's is counted instead of judged once its
 * output's worst list is full, and a row's bound and fa baseline are computed only when an
 * element needs them. The verdicts must be exactly those of judging every element, which
 * kvf_judge_observe does (an observer sees every element). Checked field by field, bit for bit,
 * on generated cases, every registered CPU kernel's output (mutants included: wrong outputs of
 * every shape), the correctly rounded output and perturbed copies of it, under every rule.
 *
 * The same for the statistics' runs (kvf_judge_observe_runs with kvf_stats_observe_exact_run):
 * the verdicts, and the statistics gathered over every judgment, must equal those of the
 * element observer alone, with a worst-element list that fills at once and one that stays
 * open longer, so that runs are both taken and declined. */
#include <stdint.h>

#include "check.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/spec.h"
#include "kvfuzz/stats.h"

#define CASES 12

static const char *const rule_texts[] = {"strict", "fa",  "strict:ftz",         "fa:ftz",
                                         "fib",    "sol", "allclose:1e-3:1e-3", "ulp:2"};
#define NRULES (sizeof rule_texts / sizeof rule_texts[0])

static void observe_nothing(void *ctx, const kvf_element_error *e) {
    (void)e;
    ++*(int64_t *)ctx;
}

static int same_bits(double a, double b) {
    return memcmp(&a, &b, sizeof a) == 0;
}

static int same_element(const kvf_element_error *a, const kvf_element_error *b) {
    return a->output == b->output && a->b == b->b && a->h == b->h && a->d == b->d &&
           same_bits(a->kernel_value, b->kernel_value) &&
           same_bits(a->rounded_value, b->rounded_value) &&
           same_bits(a->exact_value, b->exact_value) && a->kernel_bits == b->kernel_bits &&
           a->rounded_bits == b->rounded_bits && same_bits(a->abs_error, b->abs_error) &&
           same_bits(a->rel_error, b->rel_error) && a->ulps == b->ulps &&
           same_bits(a->allowed, b->allowed) && same_bits(a->margin, b->margin) &&
           same_bits(a->excess_margin, b->excess_margin) && a->fails == b->fails &&
           a->out_of_model == b->out_of_model;
}

/* The first field that differs, or NULL. */
static const char *metrics_differ(const kvf_output_metrics *a, const kvf_output_metrics *b) {
    if (a->elements != b->elements) return "elements";
    if (a->violations != b->violations) return "violations";
    if (a->out_of_model != b->out_of_model) return "out_of_model";
    if (a->violations_out_of_model != b->violations_out_of_model) return "violations_out_of_model";
    if (a->violations_rounded != b->violations_rounded) return "violations_rounded";
    if (!same_bits(a->max_abs, b->max_abs)) return "max_abs";
    if (!same_bits(a->max_rel_fib, b->max_rel_fib)) return "max_rel_fib";
    if (!same_bits(a->max_rel_sol, b->max_rel_sol)) return "max_rel_sol";
    if (a->max_ulps != b->max_ulps) return "max_ulps";
    if (!same_bits(a->bits_of_error, b->bits_of_error)) return "bits_of_error";
    if (!same_bits(a->max_margin, b->max_margin)) return "max_margin";
    if (!same_bits(a->max_excess_margin, b->max_excess_margin)) return "max_excess_margin";
    if (a->nonfinite_mismatch != b->nonfinite_mismatch) return "nonfinite_mismatch";
    if (a->worst_count != b->worst_count) return "worst_count";
    for (int i = 0; i < a->worst_count; i++)
        if (!same_element(&a->worst[i], &b->worst[i])) return "worst";
    return NULL;
}

typedef struct tally {
    int64_t judgments;       /* (output, rule) pairs compared */
    int64_t counted;         /* ... where elements past the worst list were correctly rounded */
    int64_t failing;         /* ... whose verdict fails */
    int64_t fa_inexact_rows; /* fa judgments with an element that is not correctly rounded */
    int64_t nan_rows;        /* judgments of outputs whose rounded value holds NaN */
} tally;

/* Statistics gathered element by element and with runs, for two worst-list lengths. */
#define NSTATS 2
static const int worst_lengths[NSTATS] = {2, 200};
static kvf_stats *by_element[NSTATS], *by_run[NSTATS];

/* How the statistics answered the runs offered to them. */
static struct { int64_t taken, declined, elements; } runs;

static int count_run(void *ctx, const kvf_exact_run *r) {
    const int took = kvf_stats_observe_exact_run(ctx, r);
    runs.taken += took;
    runs.declined += !took;
    runs.elements += took ? r->n : 0;
    return took;
}

/* Judges under `rule` into by_element[k] and by_run[k]; the verdict with runs must be `full`'s. */
static void compare_stats(const kvf_rule *rule, const kvf_case *c, const kvf_oracle_result *r,
                          const kvf_bf16 *o, const float *lse, const kvf_verdict *full,
                          const char *what, uint64_t seed, const char *rule_text) {
    for (int k = 0; k < NSTATS; k++) {
        kvf_error err = {0};
        kvf_stats_scope se, sr;
        kvf_verdict ve, vr;
        CHECK_OK(kvf_stats_begin(&se, by_element[k], what, rule, c, NULL, &err), &err);
        CHECK_OK(kvf_judge_observe(&ve, rule, c, r, o, lse, kvf_stats_observe_element, &se, &err),
                 &err);
        kvf_stats_observe_verdict(&se, &ve);
        CHECK_OK(kvf_stats_begin(&sr, by_run[k], what, rule, c, NULL, &err), &err);
        CHECK_OK(kvf_judge_observe_runs(&vr, rule, c, r, o, lse, kvf_stats_observe_element,
                                        count_run, &sr, &err),
                 &err);
        kvf_stats_observe_verdict(&sr, &vr);
        const char *field = NULL, *output = "o";
        if (vr.pass != full->pass) field = "pass";
        if (!field && vr.finding != full->finding) field = "finding";
        if (!field) field = metrics_differ(&vr.o, &full->o);
        if (!field && (field = metrics_differ(&vr.lse, &full->lse))) output = "lse";
        if (field)
            CHECK_FAIL_AT("seed %llu, %s, rule %s: the verdict judged with runs differs in %s.%s",
                          (unsigned long long)seed, what, rule_text, output, field);
    }
}

static void compare(const kvf_case *c, const kvf_oracle_result *r, const kvf_bf16 *o,
                    const float *lse, const char *what, uint64_t seed, tally *t) {
    int64_t n_o = kvf_case_o_elems(c), exact = 0;
    for (int64_t i = 0; i < n_o; i++)
        exact += o[i] == r->o_rounded[i] && (o[i] & 0x7F80u) != 0x7F80u;
    for (size_t k = 0; k < NRULES; k++) {
        kvf_rule rule;
        kvf_error err = {0};
        CHECK_OK(kvf_rule_parse(&rule, rule_texts[k], &err), &err);
        kvf_verdict fast, full;
        int64_t seen = 0;
        CHECK_OK(kvf_judge(&fast, &rule, c, r, o, lse, &err), &err);
        CHECK_OK(kvf_judge_observe(&full, &rule, c, r, o, lse, observe_nothing, &seen, &err), &err);
        CHECK_INT_EQ(seen, n_o + kvf_case_lse_elems(c));
        const char *field = NULL, *output = "o";
        if (fast.pass != full.pass) field = "pass";
        if (!field && fast.finding != full.finding) field = "finding";
        if (!field) field = metrics_differ(&fast.o, &full.o);
        if (!field && (field = metrics_differ(&fast.lse, &full.lse))) output = "lse";
        if (field)
            CHECK_FAIL_AT("seed %llu, %s, rule %s: the counted verdict differs in %s.%s",
                          (unsigned long long)seed, what, rule_texts[k], output, field);
        compare_stats(&rule, c, r, o, lse, &full, what, seed, rule_texts[k]);
        t->judgments++;
        t->counted += exact > KVF_WORST_ELEMENTS;
        t->failing += !full.pass;
        t->fa_inexact_rows += rule.kind == KVF_RULE_FA && exact < n_o;
        t->nan_rows += full.o.nonfinite_mismatch > 0;
    }
}

/* Copies of the correctly rounded output with a few elements moved: by 1 to 3 ulps, to the
 * other sign, to NaN or inf, the first or last of a row by an ulp, and lse by an ulp; `variant`
 * picks which. */
static void perturb(const kvf_case *c, const kvf_oracle_result *r, kvf_prng *rng, int variant,
                    kvf_bf16 *o, float *lse) {
    int64_t n_o = kvf_case_o_elems(c), n_l = kvf_case_lse_elems(c);
    memcpy(o, r->o_rounded, (size_t)n_o * sizeof *o);
    memcpy(lse, r->lse_rounded, (size_t)n_l * sizeof *lse);
    if (n_o == 0) return;
    int moves = 1 + (int)kvf_prng_below(rng, 6);
    for (int m = 0; m < moves; m++) {
        int64_t i = (int64_t)kvf_prng_below(rng, (uint64_t)n_o);
        switch (variant) {
        case 0:
            o[i] = (kvf_bf16)(o[i] + 1 + kvf_prng_below(rng, 3));
            break;
        case 1:
            o[i] = (kvf_bf16)(o[i] ^ 0x8000u);
            break;
        case 2:
            o[i] = kvf_prng_below(rng, 2) ? KVF_BF16_QNAN : (kvf_bf16)0x7F80u;
            break;
        case 3: { /* a row's first or last element: where a row's lazy state starts and ends */
            int64_t D = c->head_dim, row = i / D;
            i = row * D + (kvf_prng_below(rng, 2) ? 0 : D - 1);
            o[i] = (kvf_bf16)(o[i] + 1);
            break;
        }
        default: {
            int64_t row = (int64_t)kvf_prng_below(rng, (uint64_t)n_l);
            if (isfinite(lse[row])) lse[row] = nextafterf(lse[row], INFINITY);
            break;
        }
        }
    }
}

static void test_counted_verdicts_match(void) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_random_opts ro;
    kvf_random_opts_default(&ro);
    ro.max_batch = 4;
    ro.max_pages = 6;
    ro.max_work = 1 << 13;
    tally t = {0, 0, 0, 0, 0};
    int cases = 0;
    for (int k = 0; k < NSTATS; k++) {
        kvf_stats_opts so;
        kvf_error err = {0};
        kvf_stats_opts_default(&so);
        so.worst_n = worst_lengths[k];
        so.command = "test_judge_counted";
        CHECK_OK(kvf_stats_create(&by_element[k], &so, &err), &err);
        CHECK_OK(kvf_stats_create(&by_run[k], &so, &err), &err);
    }
    for (uint64_t seed = 1; cases < CASES && seed < 10 * CASES; seed++) {
        kvf_spec s;
        kvf_case c;
        kvf_error err = {0};
        if (kvf_spec_random(&s, seed, &ro, &err)) continue;
        int rc = kvf_case_build(&c, &s, &lim, &err);
        kvf_spec_free(&s);
        if (rc) continue; /* a recipe past the limits: not what is tested here */
        /* Every other case reads a NaN in the q of its last non-empty sequence's last head:
         * that row is NaN, in the correctly rounded output too, and an element whose bits
         * match as NaN is still judged (a NaN never matches: a nonfinite mismatch). */
        for (int32_t b = c.batch_size - 1; seed % 2 == 0 && b >= 0; b--)
            if (kvf_case_seq_len(&c, b) > 0) {
                c.q[((int64_t)b * c.num_qo_heads + c.num_qo_heads - 1) * c.head_dim] =
                    KVF_BF16_QNAN;
                break;
            }
        kvf_oracle_result r;
        kvf_oracle_opts oo;
        kvf_oracle_opts_default(&oo);
        CHECK_OK(kvf_oracle_run(&r, &c, &oo, &err), &err);
        cases++;
        kvf_bf16 *o = malloc((size_t)(kvf_case_o_elems(&c) + 1) * sizeof *o);
        float *lse = malloc((size_t)(kvf_case_lse_elems(&c) + 1) * sizeof *lse);
        for (size_t i = 0; i < kvf_kernel_count(); i++) {
            const kvf_kernel *k = kvf_kernel_at(i);
            if (k->device != KVF_DEVICE_CPU) continue;
            if (kvf_kernel_run_once(k, &c, o, lse, &err) == 0)
                compare(&c, &r, o, lse, k->name, seed, &t);
        }
        kvf_prng rng;
        kvf_prng_seed(&rng, seed);
        const char *variants[] = {"ulps moved", "signs flipped", "NaN or inf", "row edges moved",
                                  "lse moved"};
        compare(&c, &r, r.o_rounded, r.lse_rounded, "the correctly rounded output", seed, &t);
        for (int v = 0; v < 5; v++) {
            perturb(&c, &r, &rng, v, o, lse);
            compare(&c, &r, o, lse, variants[v], seed, &t);
        }
        free(o);
        free(lse);
        kvf_oracle_result_free(&r);
        kvf_case_free(&c);
    }
    CHECK_INT_EQ(cases, CASES);
    /* The comparison covered what it is about: elements counted, failing verdicts, and fa rows
     * whose baseline had to be computed. */
    CHECK(t.counted > t.judgments / 4);
    CHECK(t.nan_rows > 0);
    CHECK(t.failing > t.judgments / 10);
    CHECK(t.fa_inexact_rows > 0);
    /* The statistics, every count, histogram, cell and worst list, are the same both ways. */
    for (int k = 0; k < NSTATS; k++) {
        if (!kvf_stats_equal(by_element[k], by_run[k]))
            CHECK_FAIL_AT("worst list of %d: the statistics gathered with runs differ from "
                          "those gathered element by element",
                          worst_lengths[k]);
        kvf_stats_free(by_element[k]);
        kvf_stats_free(by_run[k]);
    }
    /* Runs were taken (most elements went that way) and declined (a list not yet full). */
    printf("runs: %lld taken (%lld elements), %lld declined\n", (long long)runs.taken,
           (long long)runs.elements, (long long)runs.declined);
    CHECK(runs.taken > 0 && runs.declined > 0);
}

static const check_test tests[] = {
    {"counted_verdicts_match", test_counted_verdicts_match},
    {NULL, NULL},
};

CHECK_MAIN(tests)
