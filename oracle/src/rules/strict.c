/* The strict rule (docs/strict-rule.md): |a - x| within what a correct kernel of the precision
 * model can lose, worst case over every summation order, plus the final rounding. The bound
 * itself is strict_bound.c. */
#include "strict.h"

#include <math.h>
#include <stdlib.h>

int kvf__strict_state_open(kvf__strict_state *st, const kvf_precision *p, const kvf_case *c,
                           kvf_error *err) {
    st->cm = NULL;
    st->row = -1;
    /* P models: one row's near-maximum part of C per column, and its logits. */
    if (kvf__strict_needs_scratch(p) && c->batch_size > 0 && c->num_qo_heads > 0) {
        st->cm = malloc(kvf__strict_scratch_doubles(c) * sizeof *st->cm);
        if (!st->cm)
            return kvf_error_set(err, KVF_ENOMEM,
                                 "the precision model's row scratch (%zu doubles) could not be "
                                 "allocated",
                                 kvf__strict_scratch_doubles(c));
    }
    return 0;
}

void kvf__strict_state_close(kvf__strict_state *st) {
    free(st->cm);
    st->cm = NULL;
}

const kvf__strict_row *kvf__strict_row_of(kvf__strict_state *st, const kvf__rule_row *row) {
    if (st->row != row->row) {
        kvf__strict_row_begin(&st->s, &row->rule->precision, row->c, row->oracle, row->row, st->cm);
        st->row = row->row;
    }
    return &st->s;
}

void kvf__strict_check(const kvf__strict_row *s, const kvf__elem_in *in, kvf_element_error *e) {
    double x = in->x;
    if (in->a == in->r && !isnan(in->a)) {
        /* The correctly rounded value always passes, including the inf that an lse beyond the
         * f32 range rounds to (oracle.h), whatever the bound says there. (+-0 compare equal:
         * either zero is accepted for an exact zero, as step 8 allows.) */
        e->allowed = in->output == KVF_OUTPUT_O && isfinite(x)
                         ? kvf__strict_o_allowed(s, x, in->cond, in->d)
                     : isfinite(x) ? kvf__strict_lse_allowed(s, x)
                                   : 0.0;
        e->fails = 0;
        e->margin = 0.0;
        return;
    }
    if (!isfinite(x)) {
        /* The empty sequence's lse = -inf, or a non-finite input (oracle rows[].nonfinite_input:
         * NaN in q/k makes the row NaN, an inf in v makes that column +-inf or NaN). The kernel
         * must reproduce it: the same infinity, or any NaN for a NaN. */
        e->allowed = 0;
        e->fails = isnan(x) ? !isnan(in->a) : !(in->a == x);
        e->margin = e->fails ? INFINITY : 0.0;
        return;
    }
    e->allowed = in->output == KVF_OUTPUT_O ? kvf__strict_o_allowed(s, x, in->cond, in->d)
                                            : kvf__strict_lse_allowed(s, x);
    kvf__check_distance(in, x, e);
}

static int strict_open(void **state, const kvf_rule *rule, const kvf_case *c, kvf_error *err) {
    kvf__strict_state *st = malloc(sizeof *st);
    if (!st)
        return kvf_error_set(err, KVF_ENOMEM, "the strict rule's state could not be allocated");
    int rc = kvf__strict_state_open(st, &rule->precision, c, err);
    if (rc) {
        free(st);
        return rc;
    }
    *state = st;
    return 0;
}

static void strict_check(void *state, const kvf__rule_row *row, const kvf__elem_in *in,
                         kvf_element_error *e, int *prefilter) {
    (void)prefilter;
    kvf__strict_check(kvf__strict_row_of(state, row), in, e);
}

static void strict_close(void *state) {
    if (!state) return;
    kvf__strict_state_close(state);
    free(state);
}

const kvf__rule_ops kvf__rule_strict = {
    .name = "strict",
    .syntax = "strict[:MODEL]",
    .help = "strict[:MODEL]      |a-x| within what a correct kernel of the precision model "
            "(f32 by default; docs/precision.md) can lose plus the final rounding, worst case "
            "over every order (docs/strict-rule.md); default set",
    .scope = "for finding defects with proof: every failure is outside what any kernel of "
             "the model can produce. Blind: loose at long L (a worst case over every summation "
             "order and per-token rescale grows like L u), so bugs of about one bf16 ulp (bf16 "
             "split partials, truncating store) pass beyond a few hundred tokens.",
    .against_exact = 1,
    .takes_precision = 1,
    .parse = kvf__rule_parse_model,
    .open = strict_open,
    .check = strict_check,
    .close = strict_close,
};
