/* The fa rule's assumptions (docs/fa-rule.md; oracle/src/rules/fa.c, fa_allow.c) tested with
 * independent legitimate implementations, written here and not registered as kernels: fp64,
 * pairwise sums, split-KV chunks of 16 and 1,000 tokens, a per-token online softmax (exact-ish
 * and 2-ulp exp2/log2), q pre-scaled by sm_scale log2(e) with FMA dot products, flush-to-zero
 * arithmetic, dot products on an emulated bf16 tensor-core MMA (the behaviour
 * tests/test_mma_model.c measures), weights normalised before P.V (torch's and
 * FlashInfer-Bench's reference numerics: sequential, and with eight-lane BLAS-style sums;
 * tests/fa_rule_cases.h), and base-2 weights whose exponent argument is contracted into an FMA.
 * Each one keeps its fp32 result before the bf16 store, so the test checks the assumption
 * itself (|y - x| within the rule's pre-rounding allowance E), not only the verdict, which a
 * bf16 rounding could hide. The rule's power and allowance: tests/test_fa_allow.c; its
 * baselines: tests/test_fa_baseline.c. */
#include "case_oracle.h"
#include "fa_allow.h"
#include "fa_rule_cases.h"
#include "mma_emulation.h"

/* ---- legitimate implementations ---------------------------------------------------------- */

typedef enum impl_kind {
    IMPL_FP64,
    IMPL_PAIRWISE,
    IMPL_CHUNK16,
    IMPL_CHUNK1000,
    IMPL_ONLINE,
    IMPL_ONLINE_APPROX,
    IMPL_FMA_PRESCALED,
    IMPL_FTZ,
    IMPL_MMA,
    IMPL_BLOCKED,
    IMPL_NORMALISED,
    IMPL_FMA_EXPONENT,
    IMPL_COUNT
} impl_kind;

static const char *const impl_names[IMPL_COUNT] = {
    "fp64",       "pairwise",           "chunk16",         "chunk1000",
    "online",     "online-approx-exp2", "fma-prescaled-q", "ftz-daz",
    "mma-logits", "blocked-normalised", "normalised",      "fma-exponent"};

static int impl_ftz_model(impl_kind k) {
    return k == IMPL_FTZ;
}

/* Flush-to-zero of a result and denormals-are-zero of an input. */
static float ftz(float x) {
    return fabsf(x) < 0x1p-126f ? 0.0f * x : x;
}

/* A deterministic error of -2..+2 ulps, as a hardware approximation may make (CUDA documents 2
 * ulp for ex2.approx / log2), not biased to one side (assumption F3). */
static float perturb_ulps(float y, uint32_t salt) {
    if (!isfinite(y) || y == 0.0f) return y;
    uint32_t bits;
    memcpy(&bits, &y, sizeof bits);
    uint32_t h = (bits ^ salt) * 0x9E3779B1u;
    h ^= h >> 15;
    int k = (int)(h % 5u) - 2;
    for (; k > 0; k--)
        y = nextafterf(y, INFINITY);
    for (; k < 0; k++)
        y = nextafterf(y, -INFINITY);
    return y;
}
static float exp2_approx(float x) {
    return perturb_ulps(exp2f(x), 0x51ED27u);
}
static float log2_approx(float x) {
    return perturb_ulps(log2f(x), 0xC0FFEEu);
}

/* Base-2 logits of one row in fp32, sequential dot (or FMA on a pre-scaled q, or chained MMA
 * steps of 16 dims). */
static void logits2(const kvf_case *c, int32_t b, int32_t h, impl_kind kind, float *s) {
    const int32_t D = c->head_dim, g = h / (c->num_qo_heads / c->num_kv_heads);
    const kvf_bf16 *q = c->q + ((int64_t)b * c->num_qo_heads + h) * D;
    const float folded = c->sm_scale * LOG2E_F;
    for (int64_t t = 0; t < kvf_case_seq_len(c, b); t++) {
        const kvf_bf16 *k = kv_at(c, c->k_cache, b, t, g);
        float acc = 0.0f;
        for (int32_t d0 = 0; kind == IMPL_MMA && d0 < D; d0 += 16) {
            float qs[16] = {0}, ks[16] = {0};
            for (int32_t i = 0; i < 16 && d0 + i < D; i++)
                qs[i] = kvf_bf16_to_f32(q[d0 + i]), ks[i] = kvf_bf16_to_f32(k[d0 + i]);
            acc = mma_step_emulated(acc, qs, ks, MMA_EXP_SUM, MMA_TRUNC_ZERO);
        }
        for (int32_t d = 0; kind != IMPL_MMA && d < D; d++) {
            float qd = kvf_bf16_to_f32(q[d]), kd = kvf_bf16_to_f32(k[d]);
            if (kind == IMPL_FMA_PRESCALED) {
                acc = fmaf(qd * folded, kd, acc);
            } else if (kind == IMPL_FTZ) {
                acc = ftz(acc + ftz(ftz(qd) * ftz(kd)));
            } else {
                acc += qd * kd;
            }
        }
        s[t] = kind == IMPL_FMA_PRESCALED ? acc
                                          : (kind == IMPL_FTZ ? ftz(acc * folded) : acc * folded);
    }
}

static float vval(const kvf_bf16 *v, int32_t d, impl_kind kind) {
    float x = kvf_bf16_to_f32(v[d]);
    return kind == IMPL_FTZ ? ftz(x) : x;
}

/* One chunk [t0, t1): two-pass, sequential; normalised partial o and its lse. */
static void chunk_state(const kvf_case *c, int32_t b, int32_t g, const float *s, int64_t t0,
                        int64_t t1, float *o, float *lse, float *w) {
    const int32_t D = c->head_dim;
    float m = -INFINITY, den = 0.0f;
    for (int64_t t = t0; t < t1; t++)
        m = s[t] > m ? s[t] : m;
    for (int32_t d = 0; d < D; d++)
        o[d] = 0.0f;
    for (int64_t t = t0; t < t1; t++) {
        w[t - t0] = exp2f(s[t] - m);
        den += w[t - t0];
        const kvf_bf16 *v = kv_at(c, c->v_cache, b, t, g);
        for (int32_t d = 0; d < D; d++)
            o[d] += w[t - t0] * kvf_bf16_to_f32(v[d]);
    }
    for (int32_t d = 0; d < D; d++)
        o[d] /= den;
    *lse = m + log2f(den);
}

/* Base-2 weights with the exponent argument contracted into one FMA, exp2(dot * c - fl(m * c)),
 * c = fl(sm_scale log2 e): on equal logits the argument is the rounding error of m * c, not 0,
 * so every weight carries the same inexact factor. Normalised at the end. */
static void fma_exponent_row(const kvf_case *c, int32_t b, int32_t h, float *s, double *y,
                             float *lse) {
    const int32_t D = c->head_dim, g = h / (c->num_qo_heads / c->num_kv_heads);
    const int64_t L = kvf_case_seq_len(c, b);
    const kvf_bf16 *q = c->q + ((int64_t)b * c->num_qo_heads + h) * D;
    const float folded = c->sm_scale * LOG2E_F;
    float m = -INFINITY;
    for (int64_t t = 0; t < L; t++) {
        const kvf_bf16 *k = kv_at(c, c->k_cache, b, t, g);
        float acc = 0.0f;
        for (int32_t d = 0; d < D; d++)
            acc += kvf_bf16_to_f32(q[d]) * kvf_bf16_to_f32(k[d]);
        s[t] = acc;
        m = acc > m ? acc : m;
    }
    const float mc = m * folded;
    float den = 0.0f;
    float *acc = calloc((size_t)D, sizeof *acc);
    for (int64_t t = 0; t < L; t++) {
        const float p = exp2f(fmaf(s[t], folded, -mc));
        den += p;
        const kvf_bf16 *v = kv_at(c, c->v_cache, b, t, g);
        for (int32_t d = 0; d < D; d++)
            acc[d] += p * kvf_bf16_to_f32(v[d]);
    }
    for (int32_t d = 0; d < D; d++)
        y[d] = acc[d] / den;
    *lse = mc + log2f(den);
    free(acc);
}

/* Row (b, h): y[D] (fp32, or fp64 for IMPL_FP64 in yd) and the lse. */
static void impl_row(const kvf_case *c, int32_t b, int32_t h, impl_kind kind, double *y,
                     float *lse) {
    const int32_t D = c->head_dim, g = h / (c->num_qo_heads / c->num_kv_heads);
    const int64_t L = kvf_case_seq_len(c, b);
    for (int32_t d = 0; d < D; d++)
        y[d] = 0.0;
    if (L == 0) {
        *lse = -INFINITY;
        return;
    }
    float *s = malloc((size_t)L * sizeof *s), *w = malloc((size_t)L * sizeof *w);
    float *acc = calloc((size_t)D, sizeof *acc), *part = calloc((size_t)D, sizeof *part);
    if (kind == IMPL_FP64) {
        const kvf_bf16 *q = c->q + ((int64_t)b * c->num_qo_heads + h) * D;
        double *sd = malloc((size_t)L * sizeof *sd), m = -INFINITY, den = 0;
        for (int64_t t = 0; t < L; t++) {
            const kvf_bf16 *k = kv_at(c, c->k_cache, b, t, g);
            double dot = 0;
            for (int32_t d = 0; d < D; d++)
                dot += (double)kvf_bf16_to_f32(q[d]) * kvf_bf16_to_f32(k[d]);
            sd[t] = dot * c->sm_scale;
            m = sd[t] > m ? sd[t] : m;
        }
        for (int64_t t = 0; t < L; t++) {
            double p = exp(sd[t] - m);
            den += p;
            const kvf_bf16 *v = kv_at(c, c->v_cache, b, t, g);
            for (int32_t d = 0; d < D; d++)
                y[d] += p * kvf_bf16_to_f32(v[d]);
        }
        for (int32_t d = 0; d < D; d++)
            y[d] /= den;
        *lse = (float)((m + log(den)) * 1.4426950408889634);
        free(sd);
    } else if (kind == IMPL_PAIRWISE) {
        logits2(c, b, h, kind, s);
        float m = -INFINITY;
        for (int64_t t = 0; t < L; t++)
            m = s[t] > m ? s[t] : m;
        for (int64_t t = 0; t < L; t++)
            s[t] = exp2f(s[t] - m);
        float den = pairwise(s, L);
        for (int32_t d = 0; d < D; d++) {
            for (int64_t t = 0; t < L; t++)
                w[t] = s[t] * kvf_bf16_to_f32(kv_at(c, c->v_cache, b, t, g)[d]);
            y[d] = pairwise(w, L) / den;
        }
        *lse = m + log2f(den);
    } else if (kind == IMPL_CHUNK16 || kind == IMPL_CHUNK1000) {
        const int64_t chunk = kind == IMPL_CHUNK16 ? 16 : 1000;
        logits2(c, b, h, kind, s);
        const int64_t n = (L + chunk - 1) / chunk;
        float *lses = malloc((size_t)n * sizeof *lses), *os = malloc((size_t)(n * D) * sizeof *os);
        float big = -INFINITY;
        for (int64_t j = 0; j < n; j++) {
            int64_t t1 = (j + 1) * chunk < L ? (j + 1) * chunk : L;
            chunk_state(c, b, g, s, j * chunk, t1, os + j * D, &lses[j], w);
            big = lses[j] > big ? lses[j] : big;
        }
        float den = 0.0f;
        for (int64_t j = 0; j < n; j++) {
            float wj = exp2f(lses[j] - big);
            den += wj;
            for (int32_t d = 0; d < D; d++)
                acc[d] += wj * os[j * D + d];
        }
        for (int32_t d = 0; d < D; d++)
            y[d] = acc[d] / den;
        *lse = big + log2f(den);
        free(lses);
        free(os);
    } else if (kind == IMPL_FMA_EXPONENT) {
        fma_exponent_row(c, b, h, s, y, lse);
    } else if (kind == IMPL_BLOCKED || kind == IMPL_NORMALISED) {
        blocked_row(c, b, h, s, y, lse, kind == IMPL_BLOCKED ? 8 : 1);
    } else { /* online softmax, one token at a time: ONLINE, ONLINE_APPROX, FMA, FTZ */
        logits2(c, b, h, kind, s);
        float m = -INFINITY, den = 0.0f;
        int approx = kind == IMPL_ONLINE_APPROX;
        for (int64_t t = 0; t < L; t++) {
            const kvf_bf16 *v = kv_at(c, c->v_cache, b, t, g);
            if (s[t] > m) {
                float alpha = approx ? exp2_approx(m - s[t]) : exp2f(m - s[t]);
                if (kind == IMPL_FTZ) alpha = ftz(alpha);
                den *= alpha;
                for (int32_t d = 0; d < D; d++)
                    acc[d] = kind == IMPL_FTZ ? ftz(acc[d] * alpha) : acc[d] * alpha;
                m = s[t];
            }
            float p = approx ? exp2_approx(s[t] - m) : exp2f(s[t] - m);
            if (kind == IMPL_FTZ) p = ftz(p);
            den += p;
            for (int32_t d = 0; d < D; d++)
                acc[d] = kind == IMPL_FTZ ? ftz(acc[d] + ftz(p * vval(v, d, kind)))
                                          : acc[d] + p * vval(v, d, kind);
        }
        for (int32_t d = 0; d < D; d++)
            y[d] = kind == IMPL_FTZ ? ftz(acc[d] / den) : acc[d] / den;
        *lse = m + (approx ? log2_approx(den) : log2f(den));
    }
    free(s);
    free(w);
    free(acc);
    free(part);
}

/* ---- measuring -------------------------------------------------------------------------- */

typedef struct tally {
    int cases, rows, strict_fail, fa_fail;
    double worst_pre;   /* max |y - x| / E over elements: must stay <= 1 (assumption F2) */
    double worst_ratio; /* max |y - x| / (rho (C + |x|)): what F must exceed */
    char worst_at[160]; /* where worst_pre was reached */
} tally;

static tally tallies[IMPL_COUNT];

/* Runs every implementation on one case: verdicts under strict and fa (the :ftz forms for the
 * flush-to-zero one), and the pre-rounding check of every o element of every usable row. */
static void measure_case(const kvf_case *c, const kvf_oracle_result *r, const char *what) {
    const int32_t D = c->head_dim;
    const int64_t rows = kvf_case_lse_elems(c);
    kvf_bf16 *o = malloc((size_t)(rows * D + 1) * sizeof *o);
    float *lse = malloc((size_t)(rows + 1) * sizeof *lse);
    double *y = malloc((size_t)(rows * D + 1) * sizeof *y);
    float *base = malloc((size_t)(D + 1) * sizeof *base);
    int64_t max_len = kvf_case_max_seq_len(c);
    float *scratch = malloc((size_t)(max_len + 1) * sizeof *scratch);
    float *scratch2 = malloc((size_t)(max_len + 1) * sizeof *scratch2);
    double *allowed = malloc((size_t)D * sizeof *allowed), *pre = malloc((size_t)D * sizeof *pre);
    for (int k = 0; k < IMPL_COUNT; k++) {
        tally *tl = &tallies[k];
        for (int64_t row = 0; row < rows; row++) {
            int32_t b = (int32_t)(row / c->num_qo_heads), h = (int32_t)(row % c->num_qo_heads);
            impl_row(c, b, h, (impl_kind)k, y + row * D, &lse[row]);
            for (int32_t d = 0; d < D; d++)
                o[row * D + d] = k == IMPL_FP64 ? kvf_oracle_round_bf16(y[row * D + d])
                                                : kvf_f32_to_bf16_rne((float)y[row * D + d]);
        }
        kvf_rule strict, fa;
        kvf_rule_parse(&strict, impl_ftz_model((impl_kind)k) ? "strict:ftz" : "strict", NULL);
        kvf_rule_parse(&fa, impl_ftz_model((impl_kind)k) ? "fa:ftz" : "fa", NULL);
        kvf_verdict vs, vf;
        kvf_error jerr = {0};
        CHECK_OK(kvf_judge(&vs, &strict, c, r, o, lse, &jerr), &jerr);
        CHECK_OK(kvf_judge(&vf, &fa, c, r, o, lse, &jerr), &jerr);
        int s_ok = vs.pass || vs.finding == KVF_FINDING_OVERFLOW;
        int f_ok = vf.pass || vf.finding == KVF_FINDING_OVERFLOW;
        tl->cases++;
        tl->strict_fail += !s_ok;
        tl->fa_fail += !f_ok;
        if (!s_ok || !f_ok) {
            const kvf_verdict *v = !f_ok ? &vf : &vs;
            const kvf_element_error *e = v->o.violations ? &v->o.worst[0] : &v->lse.worst[0];
            CHECK_FAIL_AT("%s fails %s on %s: (%d,%d,%d) a=%.9g x=%.9g margin %.3g", impl_names[k],
                          v->rule.name, what, e->b, e->h, e->d, e->kernel_value, e->exact_value,
                          e->margin);
        }
        /* The assumption itself, before the bf16 store: y inside the rule's bound E. */
        for (int64_t row = 0; row < rows; row++) {
            const kvf_oracle_row *orow = &r->rows[row];
            if (orow->length == 0 || orow->overflow || orow->nonfinite_input) continue;
            int32_t b = (int32_t)(row / c->num_qo_heads), h = (int32_t)(row % c->num_qo_heads);
            CHECK_INT_EQ(kvf_fa_bound_row(c, r, b, h, &fa.precision, allowed, pre), 0);
            if (!isfinite(pre[0])) continue; /* baseline unusable: the row is judged by strict */
            kvf__fa_row fr;
            kvf__fa_scratch sc = {scratch, scratch2, base};
            kvf__fa_row_compute(&fr, c, b, h, r->o_exact + row * D, r->o_cond + row * D, 0, &sc);
            tl->rows++;
            for (int32_t d = 0; d < D; d++) {
                double x = r->o_exact[row * D + d], cond = r->o_cond[row * D + d];
                double scale = fabs(cond) + fabs(x);
                if (!isfinite(x) || !(scale > 0)) continue;
                double err = fabs(y[row * D + d] - x);
                if (err / pre[d] > tl->worst_pre) {
                    tl->worst_pre = err / pre[d];
                    snprintf(tl->worst_at, sizeof tl->worst_at,
                             "%s row %lld d %d: L %lld y %.9g x %.9g C %.3g rho %.3g", what,
                             (long long)row, (int)d, (long long)orow->length, y[row * D + d], x,
                             cond, fr.rho);
                }
                if (fr.rho > 0 && err / (fr.rho * scale) > tl->worst_ratio)
                    tl->worst_ratio = err / (fr.rho * scale);
            }
        }
    }
    free(o);
    free(lse);
    free(y);
    free(base);
    free(scratch);
    free(scratch2);
    free(allowed);
    free(pre);
}

static void test_legitimate_implementations(void) {
    memset(tallies, 0, sizeof tallies);
    kvf_random_opts ro;
    kvf_random_opts_default(&ro);
    ro.max_work = 1 << 17;
    const char *env_seeds = getenv("KVF_FA_SEEDS"); /* more random recipes for a longer sweep */
    const uint64_t nseeds = env_seeds ? strtoull(env_seeds, NULL, 10) : 160;
    for (uint64_t seed = 0; seed < nseeds; seed++) {
        kvf_spec s;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_random(&s, 7000 + seed, &ro, &err), &err);
        kvf_case c;
        kvf_oracle_result r;
        if (kvf_test_case_and_oracle(&s, &c, &r)) continue;
        char what[64];
        snprintf(what, sizeof what, "random seed %llu", (unsigned long long)(7000 + seed));
        measure_case(&c, &r, what);
        kvf_oracle_result_free(&r);
        kvf_case_free(&c);
    }
    static const char *const presets[] = {"seed-h20kv4",  "ascending-logits", "long-4k",
                                          "equal-logits", "subnormal-values", "log-uniform"};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        kvf_spec s;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_preset(&s, presets[i], 3, &err), &err);
        kvf_case c;
        kvf_oracle_result r;
        if (kvf_test_case_and_oracle(&s, &c, &r)) continue;
        measure_case(&c, &r, presets[i]);
        kvf_oracle_result_free(&r);
        kvf_case_free(&c);
    }
    /* Equal logits (q = 0, or every key equal) over same-signed values: fa judges these rows as
     * strict does (alike_weights), and every implementation must pass them. */
    static const char *const flat[] = {"seed-h20kv4"};
    for (size_t i = 0; i < sizeof flat / sizeof flat[0]; i++) {
        for (int mode = 1; mode < 3; mode++) {
            kvf_spec s;
            kvf_error err = {0};
            CHECK_OK(kvf_spec_preset(&s, flat[i], 5, &err), &err);
            kvf_limits lim;
            kvf_limits_default(&lim);
            kvf_case c;
            CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
            kvf_spec_free(&s);
            const int64_t n = (int64_t)(c.pool_bytes / sizeof *c.v_cache);
            const int64_t slot = (int64_t)c.num_kv_heads * c.head_dim;
            if (mode < 2) memset(c.q, 0, (size_t)kvf_case_q_elems(&c) * sizeof *c.q);
            for (int64_t e = 0; mode > 0 && e < n; e++) {
                c.v_cache[e] &= 0x7fff;
                if (mode == 2) c.k_cache[e] = c.k_cache[e % slot];
            }
            kvf_oracle_result r;
            kvf_oracle_opts oo;
            kvf_oracle_opts_default(&oo);
            CHECK_OK(kvf_oracle_run(&r, &c, &oo, &err), &err);
            char what[64];
            snprintf(what, sizeof what, "%s %s%s", flat[i], mode < 2 ? "q=0" : "equal keys",
                     mode > 0 ? " v>=0" : "");
            measure_case(&c, &r, what);
            kvf_oracle_result_free(&r);
            kvf_case_free(&c);
        }
    }
    printf("%-20s %6s %6s %7s %7s %12s %12s\n", "implementation", "cases", "rows", "strict", "fa",
           "max |y-x|/E", "max/(rho s)");
    for (int k = 0; k < IMPL_COUNT; k++) {
        const tally *t = &tallies[k];
        printf("%-20s %6d %6d %7d %7d %12.3g %12.3g  (%s)\n", impl_names[k], t->cases, t->rows,
               t->strict_fail, t->fa_fail, t->worst_pre, t->worst_ratio, t->worst_at);
        /* F2: every legitimate implementation's fp32 result lies inside E. */
        if (!(t->worst_pre <= 1.0))
            CHECK_FAIL_AT("%s: |y - x| reaches %.3g of fa's pre-rounding allowance", impl_names[k],
                          t->worst_pre);
    }
}

static const check_test tests[] = {
    {"legitimate_implementations", test_legitimate_implementations},
    {NULL, NULL},
};

CHECK_MAIN(tests)
