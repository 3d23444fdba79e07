/* The fa rule (docs/fa-rule.md): an o element's error within a multiple of the judge's own fp32
 * baselines' on its row, plus a floor and the precision model's terms, plus the bf16 rounding;
 * lse, non-finite values and rows whose baseline is unusable are judged as strict judges them.
 * The baselines are fa_baseline.c, the allowance fa_allow.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fa_allow.h"
#include "fa_baseline.h"
#include "strict.h"

typedef struct kvf__fa_state {
    kvf__strict_state strict;
    kvf__fa_scratch scratch; /* one row's baselines: logits, weights, D outputs */
    kvf__fa_row f;           /* the baselines' measure on row f_row */
    int64_t f_row;           /* -1 before the first */
} kvf__fa_state;

static void fa_state_close(kvf__fa_state *st) {
    kvf__strict_state_close(&st->strict);
    free(st->scratch.s);
    free(st->scratch.w);
    free(st->scratch.o);
}

static int fa_state_open(kvf__fa_state *st, const kvf_precision *p, const kvf_case *c,
                         kvf_error *err) {
    memset(st, 0, sizeof *st);
    st->f_row = -1;
    int64_t max_len = kvf_case_max_seq_len(c);
    size_t n = (size_t)(max_len > 0 ? max_len : 1);
    st->scratch.s = malloc(n * sizeof *st->scratch.s);
    st->scratch.w = malloc(n * sizeof *st->scratch.w);
    st->scratch.o = malloc((size_t)(c->head_dim > 0 ? c->head_dim : 1) * sizeof *st->scratch.o);
    if (!st->scratch.s || !st->scratch.w || !st->scratch.o) {
        fa_state_close(st);
        return kvf_error_set(err, KVF_ENOMEM,
                             "the fa rule could not allocate its baseline scratch (%lld tokens)",
                             (long long)max_len);
    }
    int rc = kvf__strict_state_open(&st->strict, p, c, err);
    if (rc) fa_state_close(st);
    return rc;
}

/* The baselines of the element's row, run when one of its elements first needs them (three
 * fp32 attention passes over the row, as costly as the oracle's own pass): only an element
 * that is not correctly rounded does, and most rows of a good kernel have none. */
static const kvf__fa_row *fa_row_of(kvf__fa_state *st, const kvf__rule_row *row) {
    if (st->f_row != row->row) {
        const int32_t D = row->c->head_dim;
        kvf__fa_row_compute(&st->f, row->c, row->b, row->h, row->oracle->o_exact + row->row * D,
                            row->oracle->o_cond + row->row * D, row->out_of_model, &st->scratch);
        st->f_row = row->row;
    }
    return &st->f;
}

/* fa's allowance for an o element (x finite, row usable), and the same before the bf16 store. */
static double fa_allowed(const kvf__strict_row *s, const kvf__fa_row *f, double x, double cond,
                         int32_t d, int pre) {
    double c = fabs(cond);
    double floor_abs = s->floor_abs + kvf__fa_model_extra(s, x, c, d);
    double xerr = kvf__oracle_o_err(x, c);
    return pre ? kvf__fa_o_pre(f, x, c, s->e1_fixed, floor_abs, xerr)
               : kvf__fa_o_allowed(f, x, c, s->e1_fixed, floor_abs, xerr);
}

static int fa_open(void **state, const kvf_rule *rule, const kvf_case *c, kvf_error *err) {
    kvf__fa_state *st = malloc(sizeof *st);
    if (!st) return kvf_error_set(err, KVF_ENOMEM, "the fa rule's state could not be allocated");
    int rc = fa_state_open(st, &rule->precision, c, err);
    if (rc) {
        free(st);
        return rc;
    }
    *state = st;
    return 0;
}

static void fa_check(void *state, const kvf__rule_row *row, const kvf__elem_in *in,
                     kvf_element_error *e, int *prefilter) {
    (void)prefilter;
    kvf__fa_state *st = state;
    const kvf__strict_row *s = kvf__strict_row_of(&st->strict, row);
    kvf__strict_check(s, in, e);
    if (in->output != KVF_OUTPUT_O || !isfinite(in->x) || s->empty) return;
    if (in->a == in->r && !isnan(in->a)) return; /* correctly rounded: passes (strict) */
    const kvf__fa_row *f = fa_row_of(st, row);
    if (!f->usable) return;
    double allowed = fa_allowed(s, f, in->x, in->cond, in->d, 0);
    /* Where strict's model terms are unbounded (e1 infinite on rows of huge logits), the sum is
     * infinite or NaN, and a NaN allowance would pass any error: strict's verdict stands. */
    if (!isfinite(allowed)) return;
    e->allowed = allowed;
    kvf__check_distance(in, in->x, e);
}

static void fa_close(void *state) {
    if (!state) return;
    fa_state_close(state);
    free(state);
}

const kvf__rule_ops kvf__rule_fa = {
    .name = "fa",
    .syntax = "fa[:MODEL]",
    .help = "fa[:MODEL]          o: |a-x| within 8x the normalised error of the judge's own "
            "fp32 baselines on the row, plus model terms and 32u(C+|x|), plus the bf16 "
            "rounding; lse as strict (docs/fa-rule.md); default set",
    .scope = "for finding defects at real lengths (4k-128k): fails bf16 split partials and "
             "truncating stores where strict cannot. Its argument is statistical, resting on "
             "stated assumptions (docs/fa-rule.md). Blind: lse bugs below strict's bound, rows "
             "whose baseline is unusable (overflow, non-finite), and bugs far below a bf16 "
             "ulp.",
    .against_exact = 1,
    .takes_precision = 1,
    .parse = kvf__rule_parse_model,
    .open = fa_open,
    .check = fa_check,
    .close = fa_close,
};

int kvf_fa_bound_row(const kvf_case *c, const kvf_oracle_result *oracle, int32_t b, int32_t h,
                     const kvf_precision *p, double *allowed, double *pre) {
    if (!kvf__oracle_shape_ok(c, oracle) || !oracle->rows || !oracle->o_exact || !oracle->o_cond ||
        !oracle->lse_exact || !allowed || b < 0 || b >= oracle->batch_size || h < 0 ||
        h >= oracle->num_qo_heads)
        return KVF_EINVAL;
    kvf_rule rule;
    memset(&rule, 0, sizeof rule);
    rule.kind = KVF_RULE_FA;
    if (p) rule.precision = *p;
    kvf__fa_state st;
    if (fa_state_open(&st, &rule.precision, c, NULL)) return KVF_ENOMEM;
    const int32_t D = oracle->head_dim;
    const int64_t r = (int64_t)b * oracle->num_qo_heads + h;
    const kvf_oracle_row *orow = &oracle->rows[r];
    const kvf__rule_row row = {
        &rule, c, oracle, r, b, h, orow->overflow != 0 || orow->nonfinite_input != 0};
    const kvf__strict_row *s = kvf__strict_row_of(&st.strict, &row);
    const kvf__fa_row *f = s->empty ? NULL : fa_row_of(&st, &row);
    for (int32_t d = 0; d < D; d++) {
        double x = oracle->o_exact[r * D + d], cond = fabs(oracle->o_cond[r * D + d]);
        int usable = f && f->usable && isfinite(x);
        double fa = usable ? fa_allowed(s, f, x, cond, d, 0) : NAN;
        /* As the judge applies it (fa_check): an fa allowance that is not finite falls back to
         * strict's. */
        if (!isfinite(fa)) usable = 0;
        allowed[d] = s->empty      ? 0.0
                     : usable      ? fa
                     : isfinite(x) ? kvf__strict_o_allowed(s, x, cond, d)
                                   : 0.0;
        if (pre) pre[d] = s->empty ? 0.0 : usable ? fa_allowed(s, f, x, cond, d, 1) : NAN;
    }
    fa_state_close(&st);
    return 0;
}
