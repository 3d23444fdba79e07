/* The `fa` rule's fp32 baselines: softmax attention in three orders, every sum sequential.
 *
 * Why these: of the orders a decode kernel uses (sequential, tiles, split chunks, trees), one
 * sequential pass over all L tokens has the deepest summation tree (L - 1 levels), so its
 * accumulation errors are the largest an ordinary fp32 order produces; and a one-pass online
 * softmax rescales its state at every new running maximum, which on ascending (or, scanned
 * backwards, descending) logits is every token, so its rescale errors are the largest a
 * forward (backward) scan produces. Two details cover runs of equal weights (below). The rule
 * takes the worst of the three (docs/fa-rule.md, assumption F2). Exponentials are libm's expf
 * (below 1 ulp), logits are the fp32 dot product times sm_scale (one rounding) in natural units.
 *
 * Every intermediate is assigned to a float: under -std=c11 each assignment is one IEEE
 * binary32 rounding and the compiler may not contract across statements. */
#include "fa_baseline.h"

#include <math.h>

static int32_t kv_head(const kvf_case *c, int32_t h) {
    return h / (c->num_qo_heads / c->num_kv_heads);
}

/* A cache element as the baselines read it: a quantized value times its scale in f32. */
static float dequant(kvf_bf16 x, float scale, const kvf_case *c) {
    return c->quant.granularity ? scale * kvf_bf16_to_f32(x) : kvf_bf16_to_f32(x);
}

void kvf__fa_baseline_logits(const kvf_case *c, int32_t b, int32_t h, float *s) {
    const int32_t D = c->head_dim, g = kv_head(c, h);
    const int64_t L = kvf_case_seq_len(c, b);
    const kvf_bf16 *q = c->q + ((int64_t)b * c->num_qo_heads + h) * D;
    for (int64_t t = 0; t < L; t++) {
        const kvf_bf16 *k = c->k_cache + kvf_case_kv_offset(c, b, t, g, 0);
        const float ks = kvf_case_k_scale(c, b, t, g);
        float dot = 0.0f;
        for (int32_t d = 0; d < D; d++) {
            /* A quantized key dequantized in f32 (one rounding); exact without scales. */
            float kd = dequant(k[d], ks, c);
            float prod = kvf_bf16_to_f32(q[d]) * kd; /* exact without scales */
            dot = dot + prod;
        }
        s[t] = dot * c->sm_scale;
    }
}

/* The weights are normalised before P.V, by three times their sum, and the output multiplied by
 * three: torch's softmax-then-matmul and FlashInfer-Bench's reference normalise first, which
 * rounds every product p.v even among tokens of equal logits, whose unnormalised weights are
 * exactly 1 and whose sums of exact products make no error to compare with; the factor three
 * keeps the weights rounding when the sum is a power of two. (A row where most tokens share a
 * logit is not measured at all: rule_fa.c, alike_weights. This covers the shorter runs.) */
static void two_pass(const kvf_case *c, int32_t b, int32_t g, int64_t L, const float *s, float *w,
                     float *o) {
    const int32_t D = c->head_dim;
    float m = -INFINITY;
    for (int64_t t = 0; t < L; t++)
        if (s[t] > m || isnan(s[t])) m = s[t];
    float den = 0.0f;
    for (int64_t t = 0; t < L; t++) {
        float arg = s[t] - m;
        w[t] = expf(arg);
        den = den + w[t];
    }
    const float den3 = 3.0f * den;
    for (int64_t t = 0; t < L; t++) {
        const kvf_bf16 *v = c->v_cache + kvf_case_kv_offset(c, b, t, g, 0);
        const float vs = kvf_case_v_scale(c, b, t, g);
        float p = w[t] / den3;
        for (int32_t d = 0; d < D; d++) {
            float prod = p * dequant(v[d], vs, c);
            o[d] = o[d] + prod;
        }
    }
    for (int32_t d = 0; d < D; d++)
        o[d] = 3.0f * o[d];
}

/* The running maximum starts at the first token's logit (no exp of -inf is ever formed); a
 * rescale happens only when a logit exceeds it. The backward scan multiplies every weight by
 * 1 - 2^-24, the float just below 1: a kernel whose weights share one rounded factor (an
 * exponent argument contracted into an FMA, an approximate exponential) moves every product of
 * a run of equal logits off the ties its sums would round to even, so those sums round one way
 * and their error grows with the run; a factor just off 1 makes the same error here. */
static void online(const kvf_case *c, int32_t b, int32_t g, int64_t L, int backward, const float *s,
                   float *o) {
    const int32_t D = c->head_dim;
    float m = s[backward ? L - 1 : 0], den = 0.0f;
    for (int64_t i = 0; i < L; i++) {
        int64_t t = backward ? L - 1 - i : i;
        if (s[t] > m || isnan(s[t])) {
            float arg = m - s[t];
            float alpha = expf(arg);
            den = den * alpha;
            for (int32_t d = 0; d < D; d++)
                o[d] = o[d] * alpha;
            m = s[t];
        }
        float arg = s[t] - m;
        float e = expf(arg);
        float p = backward ? e * (1.0f - 0x1p-24f) : e;
        den = den + p;
        const kvf_bf16 *v = c->v_cache + kvf_case_kv_offset(c, b, t, g, 0);
        const float vs = kvf_case_v_scale(c, b, t, g);
        for (int32_t d = 0; d < D; d++) {
            float prod = p * dequant(v[d], vs, c);
            o[d] = o[d] + prod;
        }
    }
    for (int32_t d = 0; d < D; d++)
        o[d] = o[d] / den;
}

void kvf__fa_baseline_softmax(const kvf_case *c, int32_t b, int32_t h, kvf__fa_order order,
                              const float *s, float *w, float *o_out) {
    const int64_t L = kvf_case_seq_len(c, b);
    const int32_t g = kv_head(c, h);
    for (int32_t d = 0; d < c->head_dim; d++)
        o_out[d] = 0.0f;
    if (L == 0) return;
    if (order == KVF__FA_TWO_PASS)
        two_pass(c, b, g, L, s, w, o_out);
    else
        online(c, b, g, L, order == KVF__FA_ONLINE_BWD, s, o_out);
}
