/* The tolerance rules' descriptors: what judge.c needs of each rule, one descriptor per rule in
 * its own file under oracle/src/rules/, listed in kvfuzz/rules.def (docs/design.md §8 shows how
 * a rule is added).
 *
 * Internal to the oracle library. The judge (judge.c) owns the loop over elements, the metrics,
 * the worst-element list and the classification; a rule owns its parsing, its words for people
 * and its per-element check, with any state a judgement needs (open allocates it, close frees
 * it). Checks are pure apart from that state. */
#ifndef KVFUZZ_RULES_RULE_H
#define KVFUZZ_RULES_RULE_H

#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/judge.h"

/* One element as the checks see it: the kernel's value a, the correctly rounded r, the exact x
 * with its conditioning C (o only; 0 for lse), and the bits of a and r. */
typedef struct kvf__elem_in {
    kvf_output_kind output;
    int32_t b, h, d;
    double a, r, x, cond;
    uint32_t abits, rbits;
} kvf__elem_in;

/* The row an element belongs to. */
typedef struct kvf__rule_row {
    const kvf_rule *rule;
    const kvf_case *c;
    const kvf_oracle_result *oracle;
    int64_t row; /* b * Hq + h */
    int32_t b, h;
    int out_of_model; /* oracle rows[].overflow or rows[].nonfinite_input */
} kvf__rule_row;

typedef struct kvf__rule_ops {
    const char *name;   /* the rule text's head: "allclose" */
    const char *syntax; /* its full form for people: "allclose:ATOL:RTOL" */
    const char *help;   /* the `kvfuzz rules` line */
    const char *scope;  /* what the rule is for, and its blind spots */
    /* Measured against the exact value x (strict, fa): the excess margin then discounts the final
     * rounding, which even the correctly rounded value pays (judge.h, excess_margin). */
    int against_exact;
    /* Takes a precision model ("strict:bf16-p"; docs/precision.md). */
    int takes_precision;
    /* Fills *out (zeroed, kind set) from the rule text; args is what follows the first ':', or
     * NULL when the text is the bare name. Errors: KVF_EINVAL with one sentence. */
    int (*parse)(kvf_rule *out, const char *text, const char *args, kvf_error *err);
    /* Optional: state for one judgement of case c (NULL when not needed). Errors: KVF_ENOMEM. */
    int (*open)(void **state, const kvf_rule *rule, const kvf_case *c, kvf_error *err);
    /* Optional: a new row begins (rows in ascending order; state prepared for it lazily). */
    void (*row)(void *state, const kvf__rule_row *row);
    /* Judges one element: sets e->allowed, e->fails and e->margin (judge.c settles the margin
     * so that it is > 1 exactly when the element fails). *prefilter: set when a NaN/inf kernel
     * value rejects the whole output (sol). */
    void (*check)(void *state, const kvf__rule_row *row, const kvf__elem_in *in,
                  kvf_element_error *e, int *prefilter);
    /* Optional: whether an output of `elements` elements fails with `failing` failing ones
     * (prefilter: set by a check); NULL means any failing element fails it. */
    int (*output_fails)(int64_t elements, int64_t failing, int prefilter);
    void (*close)(void *state); /* optional */
} kvf__rule_ops;

/* The table (table.c). The descriptor of a rule kind, or NULL for a kind out of range. */
const kvf__rule_ops *kvf__rule_ops_of(kvf_rule_kind kind);
/* The rule whose name is the n characters at head, or NULL. */
const kvf__rule_ops *kvf__rule_ops_named(const char *head, size_t n);

/* Shared by the judge and the rules' files: the checks' common steps (rule_checks.c) and
 * setting and parsing a rule (rule_api.c). */
/* Whether the oracle result has the case's shape (B, Hq, D). */
int kvf__oracle_shape_ok(const kvf_case *c, const kvf_oracle_result *oracle);
/* Sets every field of a rule. */
void kvf__rule_set(kvf_rule *out, kvf_rule_kind kind, double atol, double rtol, int64_t ulps,
                   const char *name);
/* err / allowed, 0 for no error and inf for an error against a zero allowance. */
double kvf__ratio(double err, double allowed);
/* Parse of a rule without parameters: its canonical name, or KVF_EINVAL when args is given. */
int kvf__rule_parse_plain(kvf_rule *out, const char *text, const char *args, kvf_error *err);
/* Parse of a rule that takes a precision model, "strict:bf16-p+ftz" (kvfuzz/precision.h). */
int kvf__rule_parse_model(kvf_rule *out, const char *text, const char *args, kvf_error *err);
/* The tail of a check measured as |a - ref| against e->allowed: a non-finite a fails. */
void kvf__check_distance(const kvf__elem_in *in, double ref, kvf_element_error *e);

#endif
