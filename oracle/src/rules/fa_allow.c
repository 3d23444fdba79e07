/* The `fa` rule's per-element allowance (docs/fa-rule.md, whose symbols the code uses).
 *
 * The allowance has the shape of strict's last step: a bound E on the kernel's fp32 result
 * before the bf16 store, then half a bf16 ulp at |x| + E for the store itself. Only E differs:
 * strict takes the worst case over every summation order, fa takes F times what the judge's
 * fp32 baseline actually lost on this row, in units of (C + |x|), plus a floor. */
#include "fa_allow.h"

#include <math.h>

#include "fa_baseline.h"
#include "kvfuzz/bf16.h"

#define U_F32 0x1p-24

void kvf__fa_row_measure(kvf__fa_row *r, const float *base, const double *x, const double *cond,
                         int32_t D, int flagged) {
    if (flagged) r->usable = 0;
    for (int32_t d = 0; d < D && r->usable; d++) {
        if (!isfinite(x[d])) continue; /* judged exactly (strict's non-finite check) */
        double b = (double)base[d];
        if (!isfinite(b)) {
            r->usable = 0; /* the baseline overflowed or met a NaN: nothing to measure */
            break;
        }
        double scale = fabs(cond[d]) + fabs(x[d]);
        if (!(scale > 0)) continue; /* every v of the column is 0: o is 0 for every kernel */
        double rho = fabs(b - x[d]) / scale;
        if (rho > r->rho) r->rho = rho;
    }
    if (!isfinite(r->rho)) r->usable = 0;
}

/* Whether a row's logits make its weights (nearly) all alike: every logit within
 * L * KVF_FA_ALIKE_SPREAD of the others, or one logit value shared by more than half the
 * tokens (Boyer-Moore majority vote). There a column's terms p.v repeat wherever v does, and a
 * sum of repeated terms rounds the same way at every step of a binade: its error grows with
 * L, by an amount set by the low bits of the repeated term, which differ between the baselines
 * and a kernel whose weights carry any other rounding (normalised first, a contracted exponent
 * argument). The baselines' error then says nothing about such a kernel's (docs/fa-rule.md,
 * F2). Weights that drift by a relative spread T over L tokens keep a term's rounding for
 * about 2^-23 L^2 / T tokens, so a row holds about 2^23 T / L independent runs; the spread
 * bound keeps at least 64 of them. */
static int alike_weights(const float *s, int64_t L) {
    if (L < 2) return 0;
    float lo = s[0], hi = s[0], cand = s[0];
    int64_t votes = 0;
    for (int64_t t = 0; t < L; t++) {
        if (!(s[t] >= lo)) lo = s[t];
        if (!(s[t] <= hi)) hi = s[t];
        if (votes == 0) cand = s[t];
        votes += s[t] == cand ? 1 : -1;
    }
    if ((double)hi - (double)lo <= (double)L * KVF_FA_ALIKE_SPREAD) return 1;
    int64_t n = 0;
    for (int64_t t = 0; t < L; t++)
        n += s[t] == cand;
    return 2 * n > L;
}

void kvf__fa_row_compute(kvf__fa_row *r, const kvf_case *c, int32_t b, int32_t h, const double *x,
                         const double *cond, int flagged, const kvf__fa_scratch *scratch) {
    r->usable = !flagged; /* a flagged row measures nothing (kvf__fa_row_measure) */
    r->rho = 0.0;
    if (!r->usable) return;
    kvf__fa_baseline_logits(c, b, h, scratch->s);
    if (alike_weights(scratch->s, kvf_case_seq_len(c, b))) {
        r->usable = 0; /* judged by strict, whose bound covers sums of repeated terms */
        return;
    }
    for (int k = 0; k < KVF__FA_ORDERS && r->usable; k++) {
        kvf__fa_baseline_softmax(c, b, h, (kvf__fa_order)k, scratch->s, scratch->w, scratch->o);
        kvf__fa_row_measure(r, scratch->o, x, cond, c->head_dim, flagged);
    }
}

double kvf__fa_o_pre(const kvf__fa_row *r, double x, double cond, double e1_fixed, double floor_abs,
                     double xerr) {
    double scale = fabs(cond) + fabs(x) + xerr;
    /* rho was measured against the oracle's x, not the exact o: it may be low by xerr / scale,
     * hence the xerr inside the factor as well as outside. */
    return KVF_FA_FACTOR * (r->rho * scale + xerr) + e1_fixed * scale +
           KVF_FA_FLOOR_U * U_F32 * scale + floor_abs;
}

double kvf__fa_o_allowed(const kvf__fa_row *r, double x, double cond, double e1_fixed,
                         double floor_abs, double xerr) {
    double e = kvf__fa_o_pre(r, x, cond, e1_fixed, floor_abs, xerr);
    double ax = fabs(x) + xerr;
    return e + 0.5 * kvf_bf16_ulp(ax + e) + xerr;
}
