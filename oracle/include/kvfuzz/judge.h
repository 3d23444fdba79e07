/* Tolerance rules and error metrics (docs/design.md, "Tolerance rules"): the judge compares a
 * kernel's output with the oracle's and says, per rule, whether the case passes, with the metrics
 * and the worst elements.
 *
 * Every function here is pure: it reads its inputs and writes only into the caller's structs.
 * Only kvf_judge() under the fa rule allocates, scratch for its fp32 baseline, freed before it
 * returns. Errors: kvf_rule_parse() returns KVF_EINVAL with one sentence naming the bad part of
 * the rule text; kvf_judge() returns KVF_EINVAL if the oracle result and the case do not match
 * in shape, KVF_ENOMEM if the fa rule's scratch cannot be allocated. */
#ifndef KVFUZZ_JUDGE_H
#define KVFUZZ_JUDGE_H

#include <stdint.h>

#include "kvfuzz/case.h"
#include "kvfuzz/finding_class.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/precision.h"

/* The rules, from the rule table kvfuzz/rules.def (each rule's words: kvf_rule_help):
 *   fib       FlashInfer-Bench DefaultEvaluator: fail iff abs > 1e-2 AND rel > 1e-2;
 *   sol       SOL-ExecBench: abs > atol + rtol|r|; pass if >= 99% of elements pass;
 *   allclose  torch.allclose(ATOL, RTOL);
 *   ulp       at most N ulps (bf16 for o, f32 for lse) from the rounded value;
 *   strict    condition-aware bound on |a - x| (docs/strict-rule.md);
 *   fa        o error within F x an fp32 baseline's, plus a floor (docs/fa-rule.md). */
typedef enum kvf_rule_kind {
#define KVF_RULE(id, ops) KVF_RULE_##id,
#include "kvfuzz/rules.def"
#undef KVF_RULE
    KVF_RULE_KIND_COUNT
} kvf_rule_kind;

typedef struct kvf_rule {
    kvf_rule_kind kind;
    double atol, rtol;       /* fib, sol, allclose */
    int64_t ulps;            /* ulp */
    kvf_precision precision; /* strict, fa: the precision model judged against ("strict:ftz",
                                "fa:bf16-p"; docs/precision.md); f32 by default */
    char name[64];           /* canonical text, e.g. "allclose:0.001:0.001" */
} kvf_rule;

/* Parses "fib", "sol", "allclose:ATOL:RTOL", "ulp:N", "strict", "fa", and "strict:MODEL",
 * "fa:MODEL" with a precision model (precision.h: "strict:ftz", "fa:bf16-p+ftz"). The name of a
 * model-based rule under f32 is the bare "strict" / "fa". */
int kvf_rule_parse(kvf_rule *out, const char *text, kvf_error *err);
/* The default rule, strict (never fails): the one rule of tools that judge by a single rule
 * (the minimizer). */
void kvf_rule_default(kvf_rule *out);
/* The default rule set of replay and fuzz: strict (rigorous) and fa (power at long sequences).
 * Writes min(max, KVF_DEFAULT_RULES) rules and returns how many. */
#define KVF_DEFAULT_RULES 2
int kvf_rule_default_set(kvf_rule *out, int max);
/* Whether the rule takes a precision model (strict, fa). */
int kvf_rule_takes_precision(const kvf_rule *rule);
/* Sets the precision model of a rule that takes one (and its name); other rules are left as
 * they are. */
void kvf_rule_set_precision(kvf_rule *rule, const kvf_precision *p);
/* Sets model p on each of the n rules that takes one and does not name its own (a rule that
 * names its own, strict:ftz, keeps it). */
void kvf_rules_apply_precision(kvf_rule *rules, int n, const kvf_precision *p);
/* One line per rule kind for `kvfuzz rules`. */
const char *kvf_rule_help(kvf_rule_kind kind);
/* What the rule is for (benchmark parity or finding defects) and its known blind spots. */
const char *kvf_rule_scope(kvf_rule_kind kind);

typedef enum kvf_output_kind { KVF_OUTPUT_O = 0, KVF_OUTPUT_LSE = 1 } kvf_output_kind;

/* One element's comparison. */
typedef struct kvf_element_error {
    kvf_output_kind output;
    int32_t b, h, d;                    /* d = -1 for lse */
    double kernel_value;                /* a */
    double rounded_value;               /* r */
    double exact_value;                 /* x */
    uint32_t kernel_bits, rounded_bits; /* bf16 (low 16) or f32 bits */
    double abs_error;                   /* |a - r| */
    double rel_error;                   /* |a - r| / (|r| + 1e-8), FIB's definition */
    int64_t ulps;         /* ordered distance from r when both are finite, 0 when they are the
                             same infinity; -1 for a NaN/inf mismatch (one side NaN or
                             infinite and the two differ), which has no distance */
    double allowed;       /* the rule's allowance for this element (abs units) */
    double margin;        /* rule-specific error / allowance: > 1 means the element fails */
    double excess_margin; /* the margin of the error beyond the final rounding, i.e. the
                             share of the headroom used: for rules measured against x
                             (strict, fa), (|a-x| - |r-x|) / (allowed - |r-x|), so the correctly
                             rounded value scores 0 even at a bf16 tie, where its margin is
                             about 1; for rules measured against r it equals margin. > 1
                             exactly when the element fails. */
    int fails;
    int out_of_model; /* the row is outside the input model (oracle rows[].overflow or
                         rows[].nonfinite_input) */
} kvf_element_error;

#define KVF_WORST_ELEMENTS 8

/* One meaning per figure: counts are over every element of the output; the maxima are over
 * elements on in-model rows only (rows out of the model have no defined fp32 answer, so their
 * errors say nothing about the kernel), and the distance-based ones over pairs that have a
 * distance. NaN/inf mismatches are counted, never folded into a distance. */
typedef struct kvf_output_metrics {
    int64_t elements;
    int64_t violations;              /* failing elements, out-of-model rows included (the
                                        verdict and its class are decided from all of them) */
    int64_t out_of_model;            /* elements on rows out of the input model */
    int64_t violations_out_of_model; /* violations among those */
    int64_t violations_rounded;      /* violations whose kernel value is bit for bit the
                                        correctly rounded one: the rule rejects the right answer
                                        (fib on the -inf lse of an empty sequence) */
    double max_abs;                  /* max |a - r| over finite pairs */
    double max_rel_fib;              /* max |a - r| / (|r| + 1e-8) over finite pairs */
    double max_rel_sol;              /* max |a - r| / |r| over finite pairs with |r| > 0 */
    int64_t max_ulps;                /* max ordered distance from r over pairs that have one
                                        (0 when none) */
    double bits_of_error;            /* log2(max_ulps + 1) */
    double max_margin;               /* largest element margin */
    double max_excess_margin;        /* largest excess_margin: the headroom actually used */
    int nonfinite_mismatch;          /* NaN/inf mismatches, out-of-model rows included */
    int worst_count;
    kvf_element_error worst[KVF_WORST_ELEMENTS]; /* failures on in-model rows first, then
                                                    by margin, largest first */
} kvf_output_metrics;

typedef struct kvf_verdict {
    kvf_rule rule;
    int pass;
    kvf_finding_class finding; /* NONE when pass */
    kvf_output_metrics o, lse;
} kvf_verdict;

/* Judges o (bf16 [B][Hq][D]) and lse (f32 [B][Hq]) against the oracle under one rule.
 * Finding of a failing verdict: nonfinite if a failing element on an in-model row involves a
 * NaN/inf (kernel, rounded or exact value); else o-tolerance if an o element on such a row
 * fails; else lse-tolerance if an lse element does; else overflow (every failure is on rows
 * out of the model, NaN/inf ones included). */
int kvf_judge(kvf_verdict *out, const kvf_rule *rule, const kvf_case *c,
              const kvf_oracle_result *oracle, const kvf_bf16 *o, const float *lse, kvf_error *err);

/* The error strict's model allows one bf16 tensor-core MMA step (docs/strict-rule.md, K2), in
 * units of 2^-24 per unit of |c| + sum |a b| over its accumulator and (at most
 * KVF_STRICT_MMA_K) products. tests/test_mma_model.c asserts it on the device. */
#define KVF_STRICT_MMA_EPS_U 11
#define KVF_STRICT_MMA_K 16

/* The strict rule's allowance for one element (docs/strict-rule.md), exposed for tests and
 * reports: the largest |a - x| a correct kernel may produce (0 for an empty sequence, whose o
 * must be +-0 and whose lse must be -inf exactly). NaN if the indices are out of range or the
 * oracle result does not match the case's shape. */
double kvf_strict_bound_o(const kvf_case *c, const kvf_oracle_result *oracle, int32_t b, int32_t h,
                          int32_t d);
double kvf_strict_bound_lse(const kvf_case *c, const kvf_oracle_result *oracle, int32_t b,
                            int32_t h);
/* The same under a precision model (NULL: f32). */
double kvf_strict_bound_o_under(const kvf_precision *p, const kvf_case *c,
                                const kvf_oracle_result *oracle, int32_t b, int32_t h, int32_t d);
double kvf_strict_bound_lse_under(const kvf_precision *p, const kvf_case *c,
                                  const kvf_oracle_result *oracle, int32_t b, int32_t h);

/* The fa rule's allowance for the D o elements of row (b, h) (docs/fa-rule.md), exposed for
 * tests and reports: allowed[d] as the rule applies it, and pre[d] (may be NULL) the bound on
 * the kernel's fp32 result before its bf16 store, under precision model `p` (NULL: f32). Rows
 * whose baseline is unusable (overflow, non-finite input or result) get strict's allowance and
 * pre = NaN; an empty row gets 0. Returns 0, KVF_EINVAL for indices out of range or a shape
 * mismatch, KVF_ENOMEM. */
int kvf_fa_bound_row(const kvf_case *c, const kvf_oracle_result *oracle, int32_t b, int32_t h,
                     const kvf_precision *p, double *allowed, double *pre);

/* Optional per-element observer (reports' streaming statistics): called once per element
 * judged, after its metrics are computed, row by row ((b, h) ascending): the row's D o
 * elements in d order, then its lse (d = -1). */
typedef void (*kvf_element_observer)(void *ctx, const kvf_element_error *e);
int kvf_judge_observe(kvf_verdict *out, const kvf_rule *rule, const kvf_case *c,
                      const kvf_oracle_result *oracle, const kvf_bf16 *o, const float *lse,
                      kvf_element_observer observer, void *ctx, kvf_error *err);

/* A run of consecutive elements of one row whose kernel bits are the correctly rounded value's,
 * finite: o elements d .. d + n - 1 of row (b, h), or its lse (d = -1, n = 1). Under every rule
 * each such element passes with abs, rel and ulp error 0, margin 0 and excess margin 0; only
 * its position, its exact value, its row's out-of-model flag and its `allowed` tell it apart.
 * The pointers are the judge's and valid only during the call. */
typedef struct kvf_exact_run {
    kvf_output_kind output;
    int32_t b, h, d, n;
    int out_of_model;
    const double *exact; /* [n] their exact values */
} kvf_exact_run;

/* Offered a run instead of its elements one by one: returns 1 when it has counted them all,
 * 0 when it wants each element (with its `allowed`) through the element observer instead. */
typedef int (*kvf_exact_run_observer)(void *ctx, const kvf_exact_run *run);

/* kvf_judge_observe, offering runs of correctly rounded elements to `run` (may be NULL: every
 * element goes to `observer`) once the output's verdict has its KVF_WORST_ELEMENTS worst
 * elements (a passing element with margin 0 never enters a full list). The verdict, and what
 * the two observers see together, are exactly those of kvf_judge_observe. */
int kvf_judge_observe_runs(kvf_verdict *out, const kvf_rule *rule, const kvf_case *c,
                           const kvf_oracle_result *oracle, const kvf_bf16 *o, const float *lse,
                           kvf_element_observer observer, kvf_exact_run_observer run, void *ctx,
                           kvf_error *err);

/* What a verdict means for a run, the same in every command and report. */
typedef enum kvf_verdict_status {
    KVF_VERDICT_PASS = 0,             /* the rule passes the case */
    KVF_VERDICT_FAIL,                 /* a kernel failure */
    KVF_VERDICT_OUT_OF_MODEL,         /* fails only on rows out of the input model (class overflow)
                                         and overflow is not required */
    KVF_VERDICT_RULE_REJECTS_ROUNDED, /* every violation is an element the kernel got bit for
                                         bit right: the rule, not the kernel, fails (fib on an
                                         empty sequence's -inf lse) */
} kvf_verdict_status;

kvf_verdict_status kvf_verdict_status_of(const kvf_verdict *v, int require_overflow);
/* "pass", "FAIL", "out-of-model", "rule-rejects-rounded". */
const char *kvf_verdict_status_name(kvf_verdict_status s);

/* A margin as text for people, into out (cut at its end): below 1, where the element passes,
 * it is cut to three decimals (0.9996 reads "0.999", never "1", which only a margin of exactly
 * 1 gives); from 1 on, three significant digits; "inf" and "nan" as such. */
void kvf_margin_text(char *out, size_t size, double margin);

#endif
