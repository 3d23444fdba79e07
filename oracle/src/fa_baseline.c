/* The `fa` rule's fp32 baseline: two-pass softmax attention, every sum sequential.
 *
 * Why this algorithm: of the orders a decode kernel uses (sequential, tiles, split chunks,
 * trees), one sequential pass over all L tokens has the deepest summation tree (L - 1 levels),
 * so its rounding errors are the largest an ordinary fp32 order produces; the rule measures
 * kernels against it (docs/fa-rule.md, assumption F2). Weights are not normalised before P.V
 * (one division at the end), exponentials are libm's expf (below 1 ulp), logits are the fp32
 * dot product times sm_scale (one rounding) in natural units.
 *
 * Every intermediate is assigned to a float: under -std=c11 each assignment is one IEEE
 * binary32 rounding and the compiler may not contract across statements. */
#include "fa_baseline.h"

#include <math.h>

void kvf__fa_baseline_row(const kvf_case *c, int32_t b, int32_t h, float *o_out, float *scratch) {
    const int32_t D = c->head_dim;
    const int32_t g = h / (c->num_qo_heads / c->num_kv_heads);
    const int64_t L = kvf_case_seq_len(c, b);
    const kvf_bf16 *q = c->q + ((int64_t)b * c->num_qo_heads + h) * D;

    for (int32_t d = 0; d < D; d++)
        o_out[d] = 0.0f;
    if (L == 0) return;

    /* Pass 1: logits and their maximum. A bf16 x bf16 product is exact in fp32. */
    float m = -INFINITY;
    for (int64_t t = 0; t < L; t++) {
        const kvf_bf16 *k = c->k_cache + kvf_case_kv_offset(c, b, t, g, 0);
        float dot = 0.0f;
        for (int32_t d = 0; d < D; d++) {
            float prod = kvf_bf16_to_f32(q[d]) * kvf_bf16_to_f32(k[d]);
            dot = dot + prod;
        }
        float s = dot * c->sm_scale;
        scratch[t] = s;
        if (s > m || isnan(s)) m = s;
    }

    /* Pass 2: weights, the denominator and the numerators, each summed token by token. */
    float den = 0.0f;
    for (int64_t t = 0; t < L; t++) {
        float arg = scratch[t] - m;
        float w = expf(arg);
        scratch[t] = w;
        den = den + w;
    }
    for (int64_t t = 0; t < L; t++) {
        const kvf_bf16 *v = c->v_cache + kvf_case_kv_offset(c, b, t, g, 0);
        float w = scratch[t];
        for (int32_t d = 0; d < D; d++) {
            float prod = w * kvf_bf16_to_f32(v[d]);
            o_out[d] = o_out[d] + prod;
        }
    }
    for (int32_t d = 0; d < D; d++)
        o_out[d] = o_out[d] / den;
}
