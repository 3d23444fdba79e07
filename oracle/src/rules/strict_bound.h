/* The strict rule's bound for one row and one element (docs/strict-rule.md, docs/precision.md):
 * what strict.c checks against, what fa.c builds on, and what the public kvf_strict_bound_*
 * functions (judge.h) expose.
 *
 * Internal to the oracle library. Pure functions; the caller owns the row struct and the
 * scratch (kvf__strict_scratch_doubles doubles for a P model, else none). */
#ifndef KVFUZZ_RULES_STRICT_BOUND_H
#define KVFUZZ_RULES_STRICT_BOUND_H

#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/judge.h"

/* Everything in the bound that depends only on the row (sequence, q head) and the model. */
typedef struct kvf__strict_row {
    int empty;        /* L = 0: o must be +-0 exactly, lse must be -inf */
    double h;         /* H: bound on |ln| of each weight's relative error */
    double e1;        /* e^H (e^H - 1): the weights' effect on o per unit of (C + |x|) */
    double e2h;       /* e^{2H}: how much perturbed weights can inflate C */
    double gn, g;     /* gamma_n and gamma_n / (1 - gamma_n), n = L + 2R (+ 4L, P models) */
    double floor_abs; /* flush-to-zero / underflow floor on o */
    double v;         /* V = max |v| of the row */
    double lse_pre;   /* lse error before the final roundings */
    double ln_len;    /* ln(L) + 1, for the oracle's own lse error */
    double e1_fixed;  /* the weights' effect (as e1) of the terms of H that no summation order
                         or length changes, for fa (docs/fa-rule.md, section 1) */
    /* Precision models (docs/precision.md). */
    int p_model;      /* 0: P in fp32; 1: P rounded, denominator unrounded; 2: both rounded */
    double u_p;       /* P's unit roundoff: 2^-8 (bf16) or 2^-11 (fp16) */
    double delta_m;   /* relative rounding error of a near-maximum token's P (below u_p when
                         such a weight provably rounds to 1) */
    double p_abs;     /* P's underflow: its absolute loss over the row per unit of denominator */
    double share_m;   /* lower bound on the near-maximum tokens' share of sum p */
    const double *cm; /* [D] lower bounds on their part of C per column; NULL: none */
    double u_part;    /* bf16 partials: 2^-8, else 0 */
    double part_tiny; /* a bf16 partial's absolute rounding below the normal range */
    double g_mma_fa;  /* fa's charge for P.V tensor-core steps' truncation (P models) */
    double cap_scale; /* the cap's V multiplier: (1 + u_p)(1 + u_part), and (1 + u)^2 for
                         quantized caches */
    int quant;        /* quantized caches: the output's product with a value scale (Q3) */
} kvf__strict_row;

/* Whether model p needs row scratch (P models read the row's tokens), and how many doubles of
 * it any row of case c needs. */
int kvf__strict_needs_scratch(const kvf_precision *p);
size_t kvf__strict_scratch_doubles(const kvf_case *c);
/* The row part of the bound of row `row` under model p (NULL: f32); cm: the scratch when p
 * needs it, else NULL. */
void kvf__strict_row_begin(kvf__strict_row *s, const kvf_precision *p, const kvf_case *c,
                           const kvf_oracle_result *oracle, int64_t row, double *cm);
/* Allowed |a - x| for an o element (column d; x finite, C its conditioning) and for an lse
 * element (x finite). */
double kvf__strict_o_allowed(const kvf__strict_row *s, double x, double cond, int32_t d);
double kvf__strict_lse_allowed(const kvf__strict_row *s, double x);
/* The model's terms that fa adds to its allowance of an o element (0 under f32 and ftz). */
double kvf__fa_model_extra(const kvf__strict_row *s, double x, double cond, int32_t d);
/* The oracle's own error bound on an o element's x (docs/strict-rule.md, step 6b). */
double kvf__oracle_o_err(double x, double cond);

#endif
