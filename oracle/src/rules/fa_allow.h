/* The `fa` rule's allowance (docs/fa-rule.md): a kernel's error on each o element may be at most
 * a fixed multiple of what the judge's own fp32 baseline loses on the same row, plus a floor,
 * plus the final bf16 rounding. lse and non-finite values are judged as `strict` judges them.
 *
 * Internal to the oracle library; the fa rule (fa.c) calls it. Pure functions, no allocation. */
#ifndef KVFUZZ_RULES_FA_ALLOW_H
#define KVFUZZ_RULES_FA_ALLOW_H

#include <stdint.h>

#include "kvfuzz/case.h"

/* F: the multiple of the baseline's normalised error a kernel may show (docs/fa-rule.md,
 * section 3, F2). */
#define KVF_FA_FACTOR 8.0
/* The floor, in units of u = 2^-24 times (C + |x|): roundings a kernel makes per element
 * whatever the length (docs/fa-rule.md, section 3, F2). */
#define KVF_FA_FLOOR_U 32.0

/* Rows of L tokens whose natural-unit logits all lie within L times this of one another (64
 * runs of like terms at 2^-23 per run and token), or where one logit value holds most tokens,
 * are judged by strict: their baselines measure nothing about other kernels
 * (kvf__fa_row_compute). */
#define KVF_FA_ALIKE_SPREAD 0x1p-17

typedef struct kvf__fa_row {
    int usable; /* the baseline is finite wherever the exact o is, the row is not flagged
                   overflow or non-finite, and its weights are not all alike: judge against
                   it; otherwise fall back to strict */
    double rho; /* max_d |base_d - x_d| / (C_d + |x_d|) over the row's columns with C + |x| > 0 */
} kvf__fa_row;

/* Measures the baseline's normalised error on one row of D columns: base (fp32 baseline),
 * x (oracle o_exact), cond (oracle o_cond). `flagged`: the oracle row is overflow or has a
 * non-finite input. Keeps the larger of r->rho and this baseline's error, so that it can be
 * called once per baseline order after r->usable = 1, r->rho = 0. */
void kvf__fa_row_measure(kvf__fa_row *r, const float *base, const double *x, const double *cond,
                         int32_t D, int flagged);

/* Scratch for kvf__fa_row_compute: L floats of logits, L of weights, D of output. */
typedef struct kvf__fa_scratch {
    float *s, *w, *o;
} kvf__fa_scratch;

/* Runs every baseline order on row (b, h) of a valid case and measures them (the rule's rho is
 * the largest); a row whose weights are all alike is marked unusable. x, cond: the row's
 * o_exact and o_cond. */
void kvf__fa_row_compute(kvf__fa_row *r, const kvf_case *c, int32_t b, int32_t h, const double *x,
                         const double *cond, int flagged, const kvf__fa_scratch *scratch);

/* Allowed |a - x| for one o element (x finite, row usable). e1_fixed: the weight lemma's
 * factor for the row's systematic weight errors, those the baseline does not sample (a rounded
 * scaling constant, one exponential; docs/fa-rule.md section 1); floor_abs: strict's underflow
 * floor for the row (the same underflow model for both rules); xerr: the oracle's own error
 * bound on x (docs/strict-rule.md, step 6b). */
double kvf__fa_o_allowed(const kvf__fa_row *r, double x, double cond, double e1_fixed,
                         double floor_abs, double xerr);
/* The same allowance before the bf16 store: the bound E on the kernel's fp32 result. */
double kvf__fa_o_pre(const kvf__fa_row *r, double x, double cond, double e1_fixed, double floor_abs,
                     double xerr);

#endif
