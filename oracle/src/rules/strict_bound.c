/* The strict rule's bound (docs/strict-rule.md, docs/precision.md; symbols as there): the
 * largest |a - x| a correct kernel of a precision model may produce, for one o or lse element.
 * The proof's code: each constant and term is one step of the derivation. The fa rule uses the
 * row part and the model terms too (fa.c). */
#include "strict_bound.h"

#include "rule.h"

#include "kvfuzz/fp8.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* EPS_EXP: relative error of one exponential (ex2.approx, expf) together with an optional
 * normalising division (docs/strict-rule.md, K3). */
#define U_F32 0x1p-24   /* unit roundoff of binary32, round to nearest */
#define EPS_EXP 0x1p-21 /* exponential (+ division) relative error */
#define EPS_LOG 0x1p-21 /* absolute error of a computed log2 of a number in [1/2, 2] */
/* EPS_MMA: one tensor-core MMA step's error per unit of |c| + sum |a b| over its (at most
 * MMA_K) bf16 products and fp32 accumulator c (K2): the measured H200 MMA keeps two bits below
 * the largest term's 24-bit significand, truncating the rest of each of the 16 other terms
 * (under 16 * 2^-25 = 8u), then truncates the sum to 24 bits (under 2u); 11u leaves the
 * evaluation room. tests/test_mma_model.c asserts it on the device. */
#define EPS_MMA (KVF_STRICT_MMA_EPS_U * U_F32)
#define MMA_K KVF_STRICT_MMA_K
#define LOG2E 1.4426950408889634
#define LN2 0.6931471805599453

/* gamma_n = n u / (1 - n u): the classic bound on a product of n factors (1 + d), |d| <= u. */
static double gamma_n(double n) {
    double nu = n * U_F32;
    return nu < 1 ? nu / (1 - nu) : INFINITY;
}

/* The accumulation's products of n factors (1 + d_i), |d_i| <= u, lie in [(1 - u)^n,
 * (1 + u)^n]. Unlike gamma_n (which needs n u < 1, and whose quotient forms gave up at
 * n u = 1/3 and 1/2: rows of about two million tokens), these hold for every n, and they are
 * at most the gamma forms where those exist. Evaluated in double with a relative margin of
 * 2^-40 for their own roundings. */
static double pow_up_minus_1(double n) {
    return expm1(n * log1p(U_F32)) * (1 + 0x1p-40);
}
static double pow_down(double n) {
    return exp(n * log1p(-U_F32)) * (1 - 0x1p-40);
}

/* Bound on |ln(1 + d)| for |d| <= eps < 1 (the worse side is d = -eps). */
static double log_err(double eps) {
    return -log1p(-eps);
}

/* A tensor-core dot product over D dims (K2): each product passes at most ceil(D / MMA_K)
 * steps in all (MMA steps of its slice, plus fp32 additions of slices), each with relative
 * error at most eps_step, then up to three scaling roundings. Bound on |computed - exact| per
 * unit of sum |q_d k_d|. strict takes eps_step = EPS_MMA; fa's systematic part takes 2u, the
 * step's truncation of its result toward zero (under one ulp), the part that leans one way
 * whatever the data's signs (docs/fa-rule.md, section 1; the terms' alignment truncations are
 * order-dependent errors there, assumption F5). */
static double mma_logit_rel(double D, double eps_step) {
    return expm1(ceil(D / MMA_K) * log1p(eps_step) + 3 * log1p(U_F32)) * (1 + 0x1p-40);
}
/* Its underflow: the model lets a step lose each of its terms and its result below 2^-126
 * (the probes of tests/test_mma_model.c lost none; the grid there is not characterized), at
 * most (MMA_K + 1) 2^-126 per step, in raw units. */
static double mma_logit_tiny(double D, double scale) {
    return ceil(D / MMA_K) * (MMA_K + 1) * 0x1p-126 * (1 + scale);
}

static int64_t ceil_log2(int64_t n) {
    int64_t k = 0;
    while (k < 62 && ((int64_t)1 << k) < n)
        k++;
    return k;
}

/* The ftz model's inputs read as zero (DAZ) in q.k: a product with a subnormal factor may be
 * dropped whatever the other factor is (up to the bf16 maximum, so up to about 4 per product).
 * Bound on the logit change: |sm_scale| max_t sum_d |q_d k_td| over the products with a
 * subnormal factor, computed from the case. */
static int bf16_subnormal(kvf_bf16 x) {
    return (x & 0x7F80u) == 0 && (x & 0x007Fu) != 0;
}

static double daz_logit_bound(const kvf_case *c, int32_t b, int32_t h) {
    const int32_t D = c->head_dim, g = h / (c->num_qo_heads / c->num_kv_heads);
    const kvf_bf16 *q = c->q + ((int64_t)b * c->num_qo_heads + h) * D;
    double worst = 0;
    for (int64_t t = 0; t < kvf_case_seq_len(c, b); t++) {
        const kvf_bf16 *k = c->k_cache + kvf_case_kv_offset(c, b, t, g, 0);
        double sum = 0;
        for (int32_t d = 0; d < D; d++)
            if (bf16_subnormal(q[d]) || bf16_subnormal(k[d]))
                sum += fabs((double)kvf_bf16_to_f32(q[d]) * (double)kvf_bf16_to_f32(k[d]));
        sum *= (double)kvf_case_k_scale(c, b, t, g); /* dequantized keys (1 without scales) */
        if (sum > worst) worst = sum;
    }
    return isfinite(worst) ? fabs((double)c->sm_scale) * worst : INFINITY;
}

/* P models: the tokens whose base-2 logit lies within NEAR_MAX_THETA (bf16) of the row's
 * largest. A kernel computes their weight within a few 2^-12 of 1, which rounds to exactly 1
 * (docs/precision.md, section 3), so their P carries no bf16 rounding; without this a
 * dominant token's weight would be charged 2^-8 and a truncating store could hide behind it. */
#define NEAR_MAX_THETA_BF16 0x1p-12
#define NEAR_MAX_THETA_FP16 0x1p-15

static double p_unit(int format) {
    return format == KVF_P_BF16 ? 0x1p-8 : 0x1p-11;
}

static double near_max_theta(int format) {
    return format == KVF_P_BF16 ? NEAR_MAX_THETA_BF16 : NEAR_MAX_THETA_FP16;
}

/* The logit of token t in base 2, in double: bf16 products are exact there and the sum of D of
 * them errs by at most (D + 2) 2^-52 of sum |q k| (returned through abs_err). A quantized key's
 * scale multiplies the dot: one more rounding, inside the 4 of the bound's D + 4. */
static double logit2_double(const kvf_case *c, const kvf_bf16 *q, int32_t b, int64_t t, int32_t g,
                            double *abs_err) {
    const kvf_bf16 *k = c->k_cache + kvf_case_kv_offset(c, b, t, g, 0);
    double dot = 0, absdot = 0;
    for (int32_t d = 0; d < c->head_dim; d++) {
        double prod = (double)kvf_bf16_to_f32(q[d]) * (double)kvf_bf16_to_f32(k[d]);
        dot += prod;
        absdot += fabs(prod);
    }
    const double ks = (double)kvf_case_k_scale(c, b, t, g);
    double scale2 = (double)c->sm_scale * LOG2E;
    *abs_err = (c->head_dim + 4) * 0x1p-52 * fabs(scale2) * (absdot * ks);
    return scale2 * (dot * ks);
}

/* The near-maximum tokens' share of sum p (returned) and their part of C per column (cm[D]),
 * each a lower bound: weights 2^{s - lse} from the oracle's lse, whose own error lse_err
 * (strict step 6b) and the logits' are taken off by a factor. 0 everywhere for rows without a
 * finite lse or logits, and where the logits' own error reaches theta. */
static double near_max_compute(const kvf_case *c, int32_t b, int32_t h, double lse_exact,
                               double lse_err, double theta, double *cm, double *s2) {
    const int32_t D = c->head_dim, g = h / (c->num_qo_heads / c->num_kv_heads);
    for (int32_t d = 0; d < D; d++)
        cm[d] = 0.0;
    int64_t L = kvf_case_seq_len(c, b);
    if (L <= 0 || !isfinite(lse_exact) || !isfinite(lse_err)) return 0.0;
    const kvf_bf16 *q = c->q + ((int64_t)b * c->num_qo_heads + h) * D;
    double smax = -INFINITY, dot_err = 0;
    for (int64_t t = 0; t < L; t++) {
        double e;
        s2[t] = logit2_double(c, q, b, t, g, &e);
        if (!isfinite(s2[t])) return 0.0;
        if (s2[t] > smax) smax = s2[t];
        if (e > dot_err) dot_err = e;
    }
    if (4 * dot_err >= theta) return 0.0;
    double share = 0;
    for (int64_t t = 0; t < L; t++) {
        /* Within theta less twice the logits' own error: truly within theta of the maximum. */
        if (s2[t] < smax - theta + 2 * dot_err) continue;
        const kvf_bf16 *v = c->v_cache + kvf_case_kv_offset(c, b, t, g, 0);
        double w = exp2(s2[t] - lse_exact);
        share += w;
        /* C in dequantized units: the value scale joins the weight (1 without scales) */
        const double wv = w * (double)kvf_case_v_scale(c, b, t, g);
        for (int32_t d = 0; d < D; d++)
            cm[d] += wv * fabs((double)kvf_bf16_to_f32(v[d]));
    }
    /* Each w carries the lse's error and the logit's, as factors 2^{+-err}; the sums in double
     * lose far less than the 2^-30 taken besides. */
    double lower = exp2(-(lse_err + dot_err)) * (1 - 0x1p-30);
    for (int32_t d = 0; d < D; d++)
        cm[d] *= lower;
    share *= lower;
    return share < 1 ? share : 1.0;
}

/* The model's row inputs beyond the oracle row: DAZ's logit bound (ftz), and for P models the
 * near-maximum tokens' share and per-column part of C (near_max_compute; cm may be NULL). */
typedef struct strict_model_in {
    const kvf_precision *prec;
    double daz;
    double share_m;
    const double *cm;
    /* Quantized caches (docs/strict-rule.md, "Quantized caches"): the dequantization's
     * roundings are charged, and the underflow of its products, dequant_tiny in logit units. */
    int quant;
    double dequant_tiny;
} strict_model_in;

static void strict_row_init(kvf__strict_row *s, int32_t head_dim, float sm_scale,
                            const kvf_oracle_row *row, const strict_model_in *mi) {
    memset(s, 0, sizeof *s);
    int64_t len = row->length;
    if (len <= 0) {
        s->empty = 1;
        return;
    }
    const kvf_precision *prec = mi->prec;
    const int ftz = prec->ftz != 0;
    const double daz = mi->daz;
    double L = (double)len, D = (double)head_dim;
    double A = fabs(row->dot_abs_max), S = fabs(row->logit_abs_max);
    double scale = fabs((double)sm_scale);
    s->v = fabs(row->v_abs_max);
    s->ln_len = log(L) + 1;

    /* R: rescales of a token's contribution (at most one per later token, as a per-token
     * online softmax does on ascending logits, plus a merge tree); Rm: merge levels, each
     * possibly forming an lse with a log2 (K5). */
    double Rm = (double)(ceil_log2(len + 1) + 1);
    double R = L + Rm;
    double lg = log2(L + 1);

    /* Step 1: logits. Products, up to three scalings and D-1 additions in any order (CUDA
     * cores), or chained tensor-core MMA steps (K2): the larger of the two bounds. Below
     * 2^-126 a CUDA-core result is flushed (ftz model, at most 2^-126) or rounded on the
     * subnormal grid (at most 2^-150; additions there are exact). */
    double tiny = ftz ? 0x1p-126 : 0x1p-150;
    double ftz_logit = (D + 3) * tiny * (1 + scale);
    double mma_tiny = mma_logit_tiny(D, scale);
    double h_mma = mma_logit_rel(D, EPS_MMA) * A + mma_tiny;
    /* Quantized caches (Q1): a dequantized key element (k8 times its scale) and a scale fold
     * (into sm_scale, or a per-slot scale times the dot) are two more roundings of each
     * product, and their underflow is an absolute error of its own. */
    const double nq = mi->quant ? 2 : 0;
    if (mi->quant)
        h_mma = (mma_logit_rel(D, EPS_MMA) + pow_up_minus_1(nq) +
                 mma_logit_rel(D, EPS_MMA) * pow_up_minus_1(nq)) *
                    A * (1 + 0x1p-40) +
                mma_tiny;
    double h_logit =
        fmax(gamma_n(D + 3 + nq) * A + ftz_logit, h_mma) + daz + (mi->quant ? mi->dequant_tiny : 0);
    /* Bound on any computed base-2 logit (natural-unit kernels: the same times ln 2). */
    double M2 = LOG2E * (S + h_logit);

    /* Step 2: each weight's relative error, as a bound H on |ln(w_hat / w)|. */
    double eps_log = EPS_LOG * fmax(1.0, lg);     /* log2 of a denominator up to ~L */
    double per_lse = eps_log + U_F32 * (M2 + lg); /* one lse = m + log2(d) formation */
    double T = 2 * M2 + lg + Rm * per_lse;        /* telescoped rescale arguments */
    s->h = h_logit                                /* own logit */
           + LN2 * gamma_n(2) * (2 * M2 + T)      /* exponent arguments */
           + (R + 1) * log_err(EPS_EXP)           /* own exp and R rescale exps */
           + Rm * LN2 * per_lse                   /* merge weights built from lse */
           + R * log_err(U_F32);                  /* shared scale-factor products */

    double eh = exp(s->h);
    s->e1 = eh * expm1(s->h);
    /* fa's systematic part: the scaling roundings of K2 (a rounded folded constant is a common
     * factor on every logit, a temperature error), or with them a tensor-core dot product's
     * truncations of its step results (all toward zero: no baseline order makes them), the
     * exponent argument's two roundings, and one exponential with its division. */
    double h_fixed = fmax(gamma_n(3) * A + (D + 3) * tiny * (1 + scale),
                          mma_logit_rel(D, 2 * U_F32) * A + mma_tiny) +
                     daz + LN2 * gamma_n(2) * 2 * M2 + log_err(EPS_EXP);
    s->e1_fixed = exp(h_fixed) * expm1(h_fixed);
    s->e2h = eh * eh;

    /* P models (docs/precision.md, section 3): P rounded to bf16 / fp16 for P.V. The P.V
     * product may then run on tensor-core MMA steps: a step of k tokens errs by at most
     * (k/2 + 3) u of |c| + sum |p v| (K2's measurement: each term truncated below a grid two
     * bits under the largest, the sum truncated to 24 bits), steps without a token are exact,
     * so a term passes at most L/2 + 3L such units: 4L more factors (1 + u). */
    double n_acc = L + 2 * R;
    /* Quantized caches (Q2): a dequantized value (v8 times its scale) and a per-slot scale
     * times the weight are two more roundings of each term of the numerator. */
    if (mi->quant) {
        n_acc += 2;
        s->quant = 1;
    }
    if (prec->p_format != KVF_P_F32) {
        s->p_model = prec->p_sum_rounded ? 2 : 1;
        s->u_p = p_unit(prec->p_format);
        /* A near-maximum token's computed weight lies in [2^{-theta - 2 h2 - a}(1 - eps_exp),
         * 2^{a}(1 + eps_exp)] (its argument is at most 0 before its two roundings, a =
         * 2 gamma_2 M2 after them; h2 = log2e h_logit): within eps_m of 1, it rounds to 1
         * whenever eps_m is below half the spacing under 1. */
        double theta = near_max_theta(prec->p_format);
        double half_below_one = s->u_p / 2;
        double eps_m =
            (LN2 * (theta + 2 * LOG2E * h_logit + 2 * gamma_n(2) * M2) + EPS_EXP) * (1 + 0x1p-10);
        s->delta_m = eps_m < half_below_one ? eps_m / (1 - eps_m) : s->u_p;
        s->share_m = mi->cm ? mi->share_m : 0.0;
        s->cm = mi->cm;
        /* Underflow of P: below fp16's normal range (2^-14) a weight rounds on a 2^-24 grid
         * (at most 2^-25 lost), flushed under ftz (at most 2^-14); bf16's subnormal grid is
         * 2^-133 (2^-126 under ftz). A weight is relative to a running maximum, at most e^H
         * above the final one, and the denominator is at least e^{-2H} in those units. */
        double tau =
            prec->p_format == KVF_P_FP16 ? (ftz ? 0x1p-14 : 0x1p-25) : (ftz ? 0x1p-126 : 0x1p-134);
        /* Only the rescale factors carry a weight from its own running maximum to the final
         * one, so the logits' own errors (h_logit, huge on rows of huge logits) do not enter. */
        s->p_abs = L * tau * exp(3 * (s->h - h_logit));
        n_acc += 4 * L;
        /* fa: the steps' final truncation toward zero (under 2u of the result) leans one way
         * whatever the data; with steps of at least 8 tokens on average (assumption F6,
         * docs/precision.md) a term passes L/8 + 2 of them. */
        s->g_mma_fa = pow_up_minus_1(2 * (L / 8 + 2));
    }
    if (prec->partials_bf16) {
        s->u_part = 0x1p-8;
        s->part_tiny = ftz ? 0x1p-126 : 0x1p-134;
    }
    s->cap_scale = (1 + s->u_p) * (1 + s->u_part);
    /* Q2, Q3: the dequantized values and the output's product with a value scale. */
    if (mi->quant) s->cap_scale *= (1 + U_F32) * (1 + U_F32) * (1 + 0x1p-40);

    /* Step 3: fp32 accumulation of numerator and denominator. */
    /* |theta| <= (1 + u)^n - 1, and the computed denominator is at least (1 - u)^n of its
     * unrounded value. */
    s->gn = pow_up_minus_1(n_acc);
    s->g = s->gn / pow_down(n_acc);

    /* Underflow (step 5), in units where the largest weight is about 1 and the denominator is
     * at least 1/2. ftz model: every weight, product, partial sum or rescaled accumulator may
     * be flushed, each at most 2^-126 (times V in the numerator), and a subnormal v read as
     * zero moves the convex combination o by less than 2^-126. Default model: products and
     * quotients below 2^-126 round on the subnormal grid (at most 2^-150 each, L + 2R + 1 per
     * element); an exponential may still flush its result (ex2.approx.ftz), but only when its
     * argument can reach below -126, i.e. when the row's base-2 logits span that much, and a
     * flushed weight loses at most 2^-126 V from the numerator and a relative 2^-125 (L + R)
     * from the denominator. */
    if (ftz) {
        s->floor_abs = 0x1p-122 * (L + R) * (2 * s->v + 1) + 0x1p-126;
    } else {
        s->floor_abs = 0x1p-149 * (L + 2 * R + 1);
        if (2 * M2 + lg + 1 >= 126) s->floor_abs += 0x1p-125 * (L + R) * 2 * s->v;
    }
    /* Q2, Q3: a dequantized value and the scaled output may each round on the subnormal grid
     * or flush (two losses of `tiny`), and a weight times a per-slot scale may lose `tiny`
     * before it multiplies an FP8 value of up to 57344: L such terms over a denominator of at
     * least 1 (in units of the running maximum's weight). */
    if (mi->quant) s->floor_abs += tiny * (2 + L * kvf_fp8_max(KVF_KV_E5M2));
    /* P.V on MMA steps may lose each term and the result below 2^-126 (K2: not
     * characterized there), at most MMA_K + 2 of them per step and L steps. */
    if (s->p_model) s->floor_abs += 2 * (MMA_K + 2) * L * 0x1p-126 * fmax(1.0, s->v);

    /* lse: weights and denominator sum shift log2(d) by at most log2e (H + n ln(1/(1 - u))),
     * plus the log2 evaluation itself. A denominator of rounded P (p-rsum) moves by at most
     * e^{2H} (u_p (1 - share_m) + delta_m share_m) relative, plus P's underflow. */
    s->lse_pre = LOG2E * (s->h - n_acc * log1p(-U_F32) * (1 + 0x1p-40)) + eps_log;
    if (s->p_model == 2) {
        /* A weighted mean of the weights' relative roundings is at most the largest, u_p;
         * the near-maximum refinement (exact shares, hence e^{2H}) helps only below that. The
         * bound stays finite: an infinite allowance would pass any lse. */
        double rel =
            fmin(s->u_p, s->e2h * (s->u_p * (1 - s->share_m) + s->delta_m * s->share_m)) + s->p_abs;
        if (rel <= 0.5) {
            s->lse_pre += LOG2E * log_err(rel);
        } else {
            /* Underflow bounds nothing useful: the sum may grow by at most rel, and it cannot
             * fall below the maximum token's own weight, which never underflows (1 before its
             * rounding, at least 1/(L + 1) of the sum, within the weights' f32 error). */
            s->lse_pre += fmax(log2(1 + rel), log2(L + 1) + LOG2E * log_err(s->u_p));
        }
    }
}

/* The oracle's x is not the exact value but within 2^-p (5 C + 2|x|) of it (oracle.h), with
 * p >= 24 (its minimum working precision), then rounded to double. The judge compares against
 * that x, so the allowance grows by the same amount and every |x| below is taken at its upper
 * end. For lse the oracle's bound is 2^-p (5|y| + 6 ln Z) + 3 n_neg eta (oracle.c, item 3),
 * y = lse ln 2, 1 <= Z <= L; the constant 5 covers the eta term. */
#define ORACLE_U 0x1p-24

static double oracle_lse_err(double x, double ln_len) {
    return ORACLE_U * (5 * fabs(x) + 5 + 6 * ln_len) + 0x1p-53 * fabs(x);
}

/* The precision model's own terms for one o element (0 under f32), given the weights' f32
 * error w on it and |x|'s upper end ax (docs/precision.md, section 3):
 *   *wp   rounding P: unrounded denominator, e^{2H} (u_p C_n + delta_m C_m) + p_abs V;
 *         rounded denominator, the weight lemma with those per-token errors, |o| included;
 *   *part bf16 partials: u_part (1 + u_p)(1 + g) e^{2H} C, plus their subnormal rounding;
 *   *cw   the conditioning of the rounded weights, for the accumulation term. */
static void model_terms(const kvf__strict_row *s, double c, double ax, double w, int32_t d,
                        double *wp, double *part, double *cw) {
    *wp = *part = 0.0;
    *cw = s->e2h * c;
    if (s->p_model) {
        double cm = s->cm ? fmin(c, s->cm[d]) : 0.0, cn = c - cm;
        double ao = ax + w;
        if (s->p_model == 1) {
            *wp = s->e2h * (s->u_p * cn + s->delta_m * cm) + s->p_abs * s->v;
            *cw = s->e2h * c * (1 + s->u_p) + s->p_abs * s->v;
        } else {
            double ep = 1 / (1 - s->u_p), em = 1 / (1 - s->delta_m);
            double sm = s->share_m, sn = 1 - sm;
            *wp = ep * s->e2h * ((ep - 1) * (cn + ao * sn) + (em - 1) * (cm + ao * sm));
            *wp += s->p_abs < 1 ? s->p_abs * (s->v + ao + *wp) / (1 - s->p_abs) : INFINITY;
            *cw = s->e2h * c * ep + s->p_abs * s->v;
        }
    }
    if (s->u_part > 0) *part = s->u_part * (1 + s->g) * *cw + s->part_tiny;
}

/* Allowed |a - x| for one o element (column d) with exact value x and conditioning C. */
double kvf__strict_o_allowed(const kvf__strict_row *s, double x, double cond, int32_t d) {
    if (s->empty) return 0.0;
    double c = fabs(cond);
    double xerr = kvf__oracle_o_err(x, c);
    double ax = fabs(x) + xerr;
    double w = s->e1 * (c + ax); /* weight errors */
    double wp, part, cw;
    model_terms(s, c, ax, w, d, &wp, &part, &cw);
    double e_model = wp + part;
    double e_pre = w + e_model + s->g * ((1 + s->u_part) * cw + ax + w + e_model); /* + accum. */
    double e = e_pre + U_F32 * (ax + e_pre) + s->floor_abs; /* + final division */
    /* Q3: the output times a tensor or head value scale after the division, one more rounding
     * of the result. */
    if (s->quant) e += U_F32 * (ax + e);
    /* Whatever the weights, a correct kernel's fp32 result is a near-convex combination of the
     * row's v values, so |y| <= V (1 + gamma_n)(1 + u)/(1 - gamma_n) (plus the floor; times
     * the model's roundings of P and of the partials). This caps the bound where H is huge
     * (rows whose logits an fp32 kernel cannot resolve). */
    double cap = ax + s->v * s->cap_scale * (1 + s->g) * (1 + U_F32) * (1 + s->gn) + s->floor_abs;
    if (!(e <= cap)) e = cap;
    /* The bf16 store: round to nearest of y, |y| <= |x| + e, costs half an ulp there. */
    return e + 0.5 * kvf_bf16_ulp(ax + e) + xerr;
}

/* The model's terms that fa adds to its allowance for one o element (docs/precision.md,
 * section 4): the rounding of P and of the partials, bounded as strict bounds them, and the
 * P.V steps' one-way truncation. 0 under f32 and ftz. */
double kvf__fa_model_extra(const kvf__strict_row *s, double x, double cond, int32_t d) {
    if (s->empty || (!s->p_model && s->u_part == 0)) return 0.0;
    double c = fabs(cond);
    double ax = fabs(x) + kvf__oracle_o_err(x, c);
    double w = s->e1_fixed * (c + ax);
    double wp, part, cw;
    model_terms(s, c, ax, w, d, &wp, &part, &cw);
    return wp + part + s->g_mma_fa * (cw + ax + w + wp + part);
}

/* Allowed |a - x| for one lse element (x finite). */
double kvf__strict_lse_allowed(const kvf__strict_row *s, double x) {
    if (s->empty) return 0.0;
    double xerr = oracle_lse_err(x, s->ln_len);
    double ax = fabs(x) + xerr;
    /* Two roundings before the final one (m + log2 d, or (m + ln d) * log2e with a rounded
     * constant), each at most u of a quantity bounded by |x| + error. */
    double e = s->lse_pre + 2 * U_F32 * (ax + s->lse_pre);
    return e + 0.5 * kvf_f32_ulp(ax + e) + xerr;
}

/* Doubles of the scratch model_in_compute needs for any row of the case: D columns of C's
 * near-maximum part, then one logit per token. */
size_t kvf__strict_scratch_doubles(const kvf_case *c) {
    int64_t L = kvf_case_max_seq_len(c);
    return (size_t)c->head_dim + (size_t)(L > 0 ? L : 0) + 1;
}

/* Only P models read the case's tokens (near_max_compute). */
int kvf__strict_needs_scratch(const kvf_precision *p) {
    return p && p->p_format != KVF_P_F32;
}

/* Everything a strict or fa judgement of one row needs beyond the oracle row, computed from
 * the case under the model: the DAZ bound (ftz) and the near-maximum data (P models, into the
 * caller's scratch cm of kvf__strict_scratch_doubles(c)). */
static void model_in_compute(strict_model_in *mi, const kvf_precision *prec, const kvf_case *c,
                             const kvf_oracle_result *oracle, int64_t row, double *cm) {
    const kvf_oracle_row *orow = &oracle->rows[row];
    int32_t b = (int32_t)(row / c->num_qo_heads), h = (int32_t)(row % c->num_qo_heads);
    mi->prec = prec;
    mi->daz = prec->ftz && orow->length > 0 ? daz_logit_bound(c, b, h) : 0.0;
    mi->quant = c->quant.granularity != KVF_SCALE_NONE;
    mi->dequant_tiny = 0.0;
    if (mi->quant) {
        /* Q1: a key element's product with its scale and the fold's product each lose at most
         * `tiny` below 2^-126: |sm| sum|q| tiny and tiny sum|q| max|k8| log2 e, and a per-slot
         * scale times the dot one more tiny (base-2 units, log2 e < 2). */
        const double tiny = prec->ftz ? 0x1p-126 : 0x1p-150;
        const kvf_bf16 *q = c->q + ((int64_t)b * c->num_qo_heads + h) * c->head_dim;
        double qsum = 0;
        for (int32_t d = 0; d < c->head_dim; d++)
            qsum += fabs((double)kvf_bf16_to_f32(q[d]));
        mi->dequant_tiny =
            tiny * (qsum * (fabs((double)c->sm_scale) + 2 * kvf_fp8_max(KVF_KV_E5M2)) + 2);
        if (!isfinite(mi->dequant_tiny)) mi->dequant_tiny = INFINITY;
    }
    mi->share_m = 0.0;
    mi->cm = NULL;
    if (prec->p_format != KVF_P_F32 && orow->length > 0 && cm && !orow->overflow &&
        !orow->nonfinite_input) {
        double lse = oracle->lse_exact[row];
        double theta = near_max_theta(prec->p_format);
        mi->share_m =
            near_max_compute(c, b, h, lse, oracle_lse_err(lse, log((double)orow->length) + 1),
                             theta, cm, cm + c->head_dim);
        mi->cm = cm;
    }
}

static const kvf_precision kvf__f32_model = {0, 0, 0, 0};

void kvf__strict_row_begin(kvf__strict_row *s, const kvf_precision *p, const kvf_case *c,
                           const kvf_oracle_result *oracle, int64_t row, double *cm) {
    strict_model_in mi;
    model_in_compute(&mi, p ? p : &kvf__f32_model, c, oracle, row, cm);
    strict_row_init(s, c->head_dim, c->sm_scale, &oracle->rows[row], &mi);
}

double kvf__oracle_o_err(double x, double cond) {
    return ORACLE_U * (5 * fabs(cond) + 2 * fabs(x)) + 0x1p-53 * fabs(x);
}

double kvf_strict_bound_o_under(const kvf_precision *p, const kvf_case *c,
                                const kvf_oracle_result *oracle, int32_t b, int32_t h, int32_t d) {
    if (!kvf__oracle_shape_ok(c, oracle) || !oracle->rows || !oracle->o_exact || !oracle->o_cond ||
        !oracle->lse_exact || b < 0 || b >= oracle->batch_size || h < 0 ||
        h >= oracle->num_qo_heads || d < 0 || d >= oracle->head_dim)
        return NAN;
    int64_t row = (int64_t)b * oracle->num_qo_heads + h;
    int64_t idx = row * oracle->head_dim + d;
    double *cm = NULL;
    if (kvf__strict_needs_scratch(p) && !(cm = malloc(kvf__strict_scratch_doubles(c) * sizeof *cm)))
        return NAN;
    kvf__strict_row s;
    kvf__strict_row_begin(&s, p, c, oracle, row, cm);
    double bound = kvf__strict_o_allowed(&s, oracle->o_exact[idx], oracle->o_cond[idx], d);
    free(cm);
    return bound;
}

double kvf_strict_bound_o(const kvf_case *c, const kvf_oracle_result *oracle, int32_t b, int32_t h,
                          int32_t d) {
    return kvf_strict_bound_o_under(NULL, c, oracle, b, h, d);
}

double kvf_strict_bound_lse_under(const kvf_precision *p, const kvf_case *c,
                                  const kvf_oracle_result *oracle, int32_t b, int32_t h) {
    if (!kvf__oracle_shape_ok(c, oracle) || !oracle->rows || !oracle->lse_exact || b < 0 ||
        b >= oracle->batch_size || h < 0 || h >= oracle->num_qo_heads)
        return NAN;
    int64_t row = (int64_t)b * oracle->num_qo_heads + h;
    double *cm = NULL;
    if (kvf__strict_needs_scratch(p) && !(cm = malloc(kvf__strict_scratch_doubles(c) * sizeof *cm)))
        return NAN;
    kvf__strict_row s;
    kvf__strict_row_begin(&s, p, c, oracle, row, cm);
    free(cm);
    return kvf__strict_lse_allowed(&s, oracle->lse_exact[row]);
}

double kvf_strict_bound_lse(const kvf_case *c, const kvf_oracle_result *oracle, int32_t b,
                            int32_t h) {
    return kvf_strict_bound_lse_under(NULL, c, oracle, b, h);
}
