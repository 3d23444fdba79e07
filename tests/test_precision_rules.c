/* The rules under a declared precision model (docs/precision.md; strict's bounds under a model,
 * oracle/src/rules/strict_bound.c, fa, and attribution, oracle/src/attribution.c) tested with
 * legitimate implementations of each model, written here and registered nowhere, and with
 * kernels that break the model they declare:
 *   - FlashAttention-2 style: 64-token tiles, online softmax in fp32, P rounded to bf16 (or
 *     fp16) and multiplied with V on emulated tensor-core MMA steps (tests/mma_emulation.h, the
 *     H200's behaviour), the denominator summed from the unrounded P (or the rounded one);
 *   - FlashInfer style: split-KV chunks with per-token online softmax, partial outputs stored
 *     in bf16, merged in fp32 through their lse; and the same with flush-to-zero arithmetic.
 * Each must pass `strict` and `fa` under its own model on random and preset cases; under f32
 * the bf16 ones must fail somewhere, and attribution must name their model. A bf16-P kernel
 * that accumulates P.V in bf16, and one that truncates its output store, must fail under
 * bf16-p: the declared model keeps its power. Every model's allowances are finite and never
 * below f32's. The models' texts, covering and ladder: tests/test_precision_model.c. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "case_oracle.h"
#include "check.h"
#include "kvfuzz/attribution.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/precision.h"
#include "kvfuzz/spec.h"
#include "mma_emulation.h"

#define LOG2E_F 1.44269504088896340736f

/* ---- implementations ---------------------------------------------------------------------- */

typedef enum impl_kind {
    IMPL_FA2_BF16,       /* bf16-p */
    IMPL_FA2_BF16_RSUM,  /* bf16-p-rsum */
    IMPL_FA2_FP16,       /* fp16-p */
    IMPL_FA2_FP16_RSUM,  /* fp16-p-rsum */
    IMPL_SPLIT_PARTIALS, /* bf16-partials */
    IMPL_SPLIT_FTZ,      /* bf16-partials+ftz */
    IMPL_FA2_BF16_FTZ,   /* bf16-p+ftz */
    /* Kernels that break the model they declare. */
    IMPL_MUT_BF16_ACC, /* bf16-p, and P.V accumulated in bf16 */
    IMPL_MUT_TRUNCATE, /* bf16-p, and the output store truncated toward zero */
    IMPL_COUNT
} impl_kind;

static const struct {
    const char *name, *model;
    int legit;
} impls[IMPL_COUNT] = {
    {"fa2-bf16-p", "bf16-p", 1},
    {"fa2-bf16-p-rsum", "bf16-p-rsum", 1},
    {"fa2-fp16-p", "fp16-p", 1},
    {"fa2-fp16-p-rsum", "fp16-p-rsum", 1},
    {"split-bf16-partials", "bf16-partials", 1},
    {"split-bf16-partials-ftz", "bf16-partials+ftz", 1},
    {"fa2-bf16-p-ftz", "bf16-p+ftz", 1},
    {"mut-bf16-accumulator", "bf16-p", 0},
    {"mut-truncated-store", "bf16-p", 0},
};

static float flush(float x, int ftz) {
    return ftz && fabsf(x) < 0x1p-126f ? 0.0f * x : x;
}

static float round_bf16(float x, int ftz) {
    return flush(kvf_bf16_to_f32(kvf_f32_to_bf16_rne(flush(x, ftz))), ftz);
}

/* fp16 round to nearest even, with fp16's subnormals (a 2^-24 grid below 2^-14) or, under
 * ftz, results below 2^-14 flushed. Weights are at most about 1: no overflow. */
static float round_fp16(float x, int ftz) {
    double a = fabs((double)x);
    if (a < 0x1p-14) {
        if (ftz) return 0.0f * x;
        return (float)copysign(nearbyint(a * 0x1p24) * 0x1p-24, (double)x);
    }
    int e;
    frexp(a, &e); /* a in [2^(e-1), 2^e) */
    double q = ldexp(1.0, e - 11);
    return (float)copysign(nearbyint(a / q) * q, (double)x);
}

static float round_p(float p, impl_kind k) {
    int ftz = k == IMPL_FA2_BF16_FTZ;
    return (k == IMPL_FA2_FP16 || k == IMPL_FA2_FP16_RSUM) ? round_fp16(p, ftz)
                                                           : round_bf16(p, ftz);
}

static const kvf_bf16 *kv_at(const kvf_case *c, const kvf_bf16 *cache, int32_t b, int64_t t,
                             int32_t g) {
    return cache + kvf_case_kv_offset(c, b, t, g, 0);
}

/* Base-2 logits in fp32: sequential dot, times the folded sm_scale log2(e). */
static void logits2(const kvf_case *c, int32_t b, int32_t h, int ftz, float *s) {
    const int32_t D = c->head_dim, g = h / (c->num_qo_heads / c->num_kv_heads);
    const kvf_bf16 *q = c->q + ((int64_t)b * c->num_qo_heads + h) * D;
    const float folded = c->sm_scale * LOG2E_F;
    for (int64_t t = 0; t < kvf_case_seq_len(c, b); t++) {
        const kvf_bf16 *k = kv_at(c, c->k_cache, b, t, g);
        float acc = 0.0f;
        for (int32_t d = 0; d < D; d++)
            acc = flush(
                acc + flush(flush(kvf_bf16_to_f32(q[d]), ftz) * flush(kvf_bf16_to_f32(k[d]), ftz),
                            ftz),
                ftz);
        s[t] = flush(acc * folded, ftz);
    }
}

#define TILE 64

/* FlashAttention-2's decode loop: tiles of 64 tokens; per tile the running maximum, the
 * accumulator and the sum rescaled, P = exp2(s - m) rounded for P.V, which runs on MMA steps
 * of 16 tokens per output dimension; the sum gets the unrounded P (or the rounded one). */
static void fa2_row(const kvf_case *c, int32_t b, int32_t h, impl_kind k, float *s, float *acc,
                    double *y, float *lse) {
    const int32_t D = c->head_dim, g = h / (c->num_qo_heads / c->num_kv_heads);
    const int64_t L = kvf_case_seq_len(c, b);
    const int ftz = k == IMPL_FA2_BF16_FTZ;
    const int rsum = k == IMPL_FA2_BF16_RSUM || k == IMPL_FA2_FP16_RSUM;
    logits2(c, b, h, ftz, s);
    float m = -INFINITY, l = 0.0f;
    for (int32_t d = 0; d < D; d++)
        acc[d] = 0.0f;
    for (int64_t t0 = 0; t0 < L; t0 += TILE) {
        int64_t t1 = t0 + TILE < L ? t0 + TILE : L;
        float mt = m;
        for (int64_t t = t0; t < t1; t++)
            mt = s[t] > mt ? s[t] : mt;
        float alpha = flush(exp2f(m - mt), ftz);
        l = flush(l * alpha, ftz);
        for (int32_t d = 0; d < D; d++)
            acc[d] = flush(acc[d] * alpha, ftz);
        m = mt;
        float p[TILE], pr[TILE];
        for (int64_t t = t0; t < t1; t++) {
            p[t - t0] = flush(exp2f(s[t] - m), ftz);
            pr[t - t0] = round_p(p[t - t0], k);
            l = flush(l + (rsum ? pr[t - t0] : p[t - t0]), ftz);
        }
        for (int64_t u0 = t0; u0 < t1; u0 += 16) {
            float a[16], vv[16];
            for (int32_t d = 0; d < D; d++) {
                for (int i = 0; i < 16; i++) {
                    int64_t t = u0 + i;
                    a[i] = t < t1 ? pr[t - t0] : 0.0f;
                    vv[i] = t < t1 ? flush(kvf_bf16_to_f32(kv_at(c, c->v_cache, b, t, g)[d]), ftz)
                                   : 0.0f;
                }
                if (k == IMPL_MUT_BF16_ACC) {
                    for (int i = 0; i < 16; i++)
                        acc[d] = round_bf16(acc[d] + a[i] * vv[i], 0);
                } else {
                    acc[d] =
                        flush(mma_step_emulated(acc[d], a, vv, MMA_EXP_SUM, MMA_TRUNC_ZERO), ftz);
                }
            }
        }
    }
    for (int32_t d = 0; d < D; d++)
        y[d] = (double)flush(acc[d] / l, ftz);
    *lse = m + log2f(l);
}

/* FlashInfer's split-KV decode: chunks of `chunk` tokens, each an online softmax token by
 * token in fp32, its normalised partial output stored in bf16 and its lse in f32; the merge
 * weighs the partials by 2^(lse_i - lse_max) in fp32. */
static void split_row(const kvf_case *c, int32_t b, int32_t h, int ftz, int64_t chunk, float *s,
                      float *acc, float *merged, double *y, float *lse) {
    const int32_t D = c->head_dim, g = h / (c->num_qo_heads / c->num_kv_heads);
    const int64_t L = kvf_case_seq_len(c, b);
    logits2(c, b, h, ftz, s);
    const int64_t nchunks = (L + chunk - 1) / chunk;
    float lse_max = -INFINITY;
    for (int pass = 0; pass < 2; pass++) {
        float den = 0.0f;
        for (int32_t d = 0; pass == 1 && d < D; d++)
            merged[d] = 0.0f;
        for (int64_t ci = 0; ci < nchunks; ci++) {
            int64_t t0 = ci * chunk, t1 = t0 + chunk < L ? t0 + chunk : L;
            float m = -INFINITY, l = 0.0f;
            for (int32_t d = 0; d < D; d++)
                acc[d] = 0.0f;
            for (int64_t t = t0; t < t1; t++) {
                float mn = s[t] > m ? s[t] : m;
                float alpha = flush(exp2f(m - mn), ftz), p = flush(exp2f(s[t] - mn), ftz);
                const kvf_bf16 *v = kv_at(c, c->v_cache, b, t, g);
                l = flush(flush(l * alpha, ftz) + p, ftz);
                for (int32_t d = 0; d < D; d++)
                    acc[d] = flush(flush(acc[d] * alpha, ftz) +
                                       flush(p * flush(kvf_bf16_to_f32(v[d]), ftz), ftz),
                                   ftz);
                m = mn;
            }
            float lse_c = m + log2f(l);
            if (pass == 0) {
                lse_max = lse_c > lse_max ? lse_c : lse_max;
                continue;
            }
            float w = flush(exp2f(lse_c - lse_max), ftz);
            den = flush(den + w, ftz);
            for (int32_t d = 0; d < D; d++) {
                float part =
                    nchunks > 1 ? round_bf16(flush(acc[d] / l, ftz), ftz) : flush(acc[d] / l, ftz);
                merged[d] = flush(merged[d] + flush(w * part, ftz), ftz);
            }
        }
        if (pass == 1) {
            for (int32_t d = 0; d < D; d++)
                y[d] = (double)flush(merged[d] / den, ftz);
            *lse = lse_max + log2f(den);
        }
    }
}

/* Chunk sizes a split kernel may pick: a few tokens (many partials), a page, and long ones. */
static int64_t split_chunk(const kvf_case *c, int32_t b) {
    int64_t L = kvf_case_seq_len(c, b);
    return L < 8 ? 2 : (L < 200 ? 7 + (b % 5) : 64 + 61 * (b % 3));
}

static void impl_row(const kvf_case *c, int32_t b, int32_t h, impl_kind k, float *s, float *acc,
                     float *merged, double *y, float *lse) {
    const int32_t D = c->head_dim;
    if (kvf_case_seq_len(c, b) == 0) {
        for (int32_t d = 0; d < D; d++)
            y[d] = 0.0;
        *lse = -INFINITY;
        return;
    }
    if (k == IMPL_SPLIT_PARTIALS || k == IMPL_SPLIT_FTZ)
        split_row(c, b, h, k == IMPL_SPLIT_FTZ, split_chunk(c, b), s, acc, merged, y, lse);
    else
        fa2_row(c, b, h, k, s, acc, y, lse);
}

static kvf_bf16 store_bf16(double y, impl_kind k) {
    if (k != IMPL_MUT_TRUNCATE) return kvf_f32_to_bf16_rne((float)y);
    uint32_t bits;
    float f = (float)y;
    memcpy(&bits, &f, sizeof bits);
    return (kvf_bf16)(bits >> 16); /* toward zero */
}

/* ---- the sweep ---------------------------------------------------------------------------- */

typedef struct tally {
    int cases;
    int fail_declared;   /* cases failing strict or fa under the declared model */
    int fail_f32;        /* cases failing strict or fa under f32 */
    int attributed;      /* f32 failures attributed to a model no looser on the ladder than the
                            declared one */
    int misattributed;   /* f32 failures of a legitimate kernel attributed otherwise */
    double worst_margin; /* the largest element margin under the declared model */
    char worst_at[160];  /* where */
} tally;

static tally tallies[IMPL_COUNT];

static int verdict_fails(const kvf_verdict *v) {
    return kvf_verdict_status_of(v, 0) == KVF_VERDICT_FAIL;
}

static size_t ladder_index(const kvf_precision *p) {
    for (size_t i = 0; i < kvf_precision_ladder_count(); i++)
        if (kvf_precision_equal(kvf_precision_ladder_at(i), p)) return i;
    return (size_t)-1;
}

static void measure_case(const kvf_case *c, const kvf_oracle_result *r, const char *what) {
    const int32_t D = c->head_dim;
    const int64_t rows = kvf_case_lse_elems(c);
    int64_t max_len = kvf_case_max_seq_len(c);
    kvf_bf16 *o = malloc((size_t)(rows * D + 1) * sizeof *o);
    float *lse = malloc((size_t)(rows + 1) * sizeof *lse);
    double *y = malloc((size_t)(D + 1) * sizeof *y);
    float *s = malloc((size_t)(max_len + 1) * sizeof *s);
    float *acc = malloc((size_t)(D + 1) * sizeof *acc);
    float *merged = malloc((size_t)(D + 1) * sizeof *merged);
    for (int k = 0; k < IMPL_COUNT; k++) {
        tally *t = &tallies[k];
        for (int64_t row = 0; row < rows; row++) {
            int32_t b = (int32_t)(row / c->num_qo_heads), h = (int32_t)(row % c->num_qo_heads);
            impl_row(c, b, h, (impl_kind)k, s, acc, merged, y, &lse[row]);
            for (int32_t d = 0; d < D; d++)
                o[row * D + d] = store_bf16(y[d], (impl_kind)k);
        }
        kvf_precision declared;
        kvf_precision_parse(&declared, impls[k].model, NULL);
        int fails_declared = 0, fails_f32 = 0;
        for (int rk = 0; rk < 2; rk++) {
            kvf_rule rule, rule32;
            kvf_rule_parse(&rule, rk ? "fa" : "strict", NULL);
            rule32 = rule;
            kvf_rule_set_precision(&rule, &declared);
            kvf_verdict v, v32;
            kvf_error err = {0};
            CHECK_OK(kvf_judge(&v, &rule, c, r, o, lse, &err), &err);
            CHECK_OK(kvf_judge(&v32, &rule32, c, r, o, lse, &err), &err);
            if (verdict_fails(&v)) fails_declared = 1;
            {
                double mm = v.o.max_margin > v.lse.max_margin ? v.o.max_margin : v.lse.max_margin;
                if (mm > t->worst_margin) {
                    t->worst_margin = mm;
                    const kvf_element_error *e = v.o.violations ? &v.o.worst[0] : &v.lse.worst[0];
                    snprintf(t->worst_at, sizeof t->worst_at, "%s %s (%d,%d,%d) a=%.6g x=%.6g",
                             what, v.rule.name, e->b, e->h, e->d, e->kernel_value, e->exact_value);
                }
            }
            if (verdict_fails(&v32)) {
                fails_f32 = 1;
                kvf_attribution at;
                CHECK_OK(kvf_attribute(&at, &v32, c, r, o, lse, &err), &err);
                /* The declared model accepts this case (checked below), so the tightest model
                 * that does is at most as far down the ladder. */
                /* An fp16 design judged under f32 may be named by a bf16 model: attribution
                 * tries fp16 models last for kernels that do not declare them
                 * (docs/precision.md, section 5). */
                int fp16 = declared.p_format == KVF_P_FP16;
                if (at.kind == KVF_ATTRIB_PRECISION &&
                    (fp16 || ladder_index(&at.model) <= ladder_index(&declared)))
                    t->attributed++;
                else if (impls[k].legit && !verdict_fails(&v)) {
                    t->misattributed++;
                    CHECK_FAIL_AT("%s on %s under %s: attributed '%s'", impls[k].name, what,
                                  v32.rule.name, at.text);
                }
            }
        }
        t->cases++;
        t->fail_declared += fails_declared;
        t->fail_f32 += fails_f32;
        if (fails_declared && impls[k].legit)
            CHECK_FAIL_AT("%s (declares %s) fails its own model on %s: %s", impls[k].name,
                          impls[k].model, what, t->worst_at);
    }
    free(o);
    free(lse);
    free(y);
    free(s);
    free(acc);
    free(merged);
}

static void run_case(kvf_spec *s, const char *what) {
    kvf_case c;
    kvf_oracle_result r;
    if (kvf_test_case_and_oracle(s, &c, &r)) return;
    measure_case(&c, &r, what);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

static void test_models(void) {
    memset(tallies, 0, sizeof tallies);
    kvf_random_opts ro;
    kvf_random_opts_default(&ro);
    ro.max_work = 1 << 16;
    const char *env_seeds = getenv("KVF_PRECISION_SEEDS"); /* a longer sweep */
    const uint64_t nseeds = env_seeds ? strtoull(env_seeds, NULL, 10) : 80;
    for (uint64_t seed = 0; seed < nseeds; seed++) {
        kvf_spec s;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_random(&s, 9100 + seed, &ro, &err), &err);
        char what[64];
        snprintf(what, sizeof what, "random seed %llu", (unsigned long long)(9100 + seed));
        run_case(&s, what);
    }
    static const char *const presets[] = {"seed-h20kv4",      "ascending-logits", "equal-logits",
                                          "subnormal-values", "log-uniform",      "long-4k"};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        kvf_spec s;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_preset(&s, presets[i], 3, &err), &err);
        run_case(&s, presets[i]);
    }
    printf("%-26s %-18s %6s %9s %6s %11s %8s\n", "implementation", "declares", "cases", "fail-decl",
           "f32", "attributed", "margin");
    for (int k = 0; k < IMPL_COUNT; k++) {
        const tally *t = &tallies[k];
        printf("%-26s %-18s %6d %9d %6d %11d %8.3g  %s\n", impls[k].name, impls[k].model, t->cases,
               t->fail_declared, t->fail_f32, t->attributed, t->worst_margin, t->worst_at);
    }
    /* The declared bf16 models are looser than f32 for a reason: f32 must fail their kernels
     * somewhere (and attribution then names their model, checked per case above). */
    for (int k = 0; k < IMPL_COUNT; k++) {
        if (!impls[k].legit) {
            /* Power: a kernel outside its declared model fails it. */
            if (tallies[k].fail_declared == 0)
                CHECK_FAIL_AT("%s passes its declared model %s on every case", impls[k].name,
                              impls[k].model);
            continue;
        }
        int bf16 = strstr(impls[k].model, "bf16") != NULL;
        if (bf16 && tallies[k].fail_f32 == 0)
            CHECK_FAIL_AT("%s never fails f32: its model is not exercised", impls[k].name);
    }
}

/* Every model's allowances are finite on every in-model row with a finite exact value, however
 * large the logits: an infinite one would pass any error (an lse off by 1.7e5 passed
 * bf16-p-rsum on FlashInfer's -5e4 sentinel rows before the rounded sum's term was bounded by
 * u_p). And a model's allowance is never below f32's. */
static void test_allowances_finite(void) {
    static const char *const presets[] = {"huge-logits", "very-negative-logits", "spike-logit",
                                          "mixed-lengths", "subnormal-values"};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        kvf_spec s;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_preset(&s, presets[i], 2, &err), &err);
        kvf_case c;
        kvf_oracle_result r;
        if (kvf_test_case_and_oracle(&s, &c, &r)) continue;
        for (size_t m = 0; m < kvf_precision_ladder_count(); m++) {
            const kvf_precision *p = kvf_precision_ladder_at(m);
            char name[KVF_PRECISION_NAME_MAX];
            kvf_precision_name(p, name, sizeof name);
            for (int32_t b = 0; b < c.batch_size; b++)
                for (int32_t h = 0; h < c.num_qo_heads; h++) {
                    const kvf_oracle_row *row = &r.rows[(int64_t)b * c.num_qo_heads + h];
                    if (row->length == 0 || row->overflow || row->nonfinite_input) continue;
                    double lse = kvf_strict_bound_lse_under(p, &c, &r, b, h);
                    double lse32 = kvf_strict_bound_lse_under(NULL, &c, &r, b, h);
                    double o = kvf_strict_bound_o_under(p, &c, &r, b, h, 0);
                    double o32 = kvf_strict_bound_o_under(NULL, &c, &r, b, h, 0);
                    if (!(isfinite(lse) && isfinite(o) && lse >= lse32 && o >= o32))
                        CHECK_FAIL_AT("%s, %s row (%d,%d): lse %g (f32 %g), o %g (f32 %g)",
                                      presets[i], name, b, h, lse, lse32, o, o32);
                }
        }
        kvf_oracle_result_free(&r);
        kvf_case_free(&c);
    }
}

static const check_test tests[] = {
    {"allowances_finite", test_allowances_finite},
    {"models", test_models},
    {NULL, NULL},
};

CHECK_MAIN(tests)
