/* Tolerance rules and error metrics (docs/design.md, "Tolerance rules").
 *
 * Reads top-down: metrics and the worst-element list; the judge loop, through the rule table
 * (kvfuzz/rules.def; each rule's parse, words and per-element check are its own file under
 * rules/, parsing and naming a rule rules/rule_api.c); the finding classification. */
#include "kvfuzz/judge.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/rule.h"

/* ------------------------------------------------------------------------------------------ */
/* Per-element settling                                                                        */
/* ------------------------------------------------------------------------------------------ */

/* Sets margin so that margin > 1 exactly when the element fails, whatever rounding did to the
 * ratio, and never NaN. */
static void settle_margin(kvf_element_error *e) {
    if (e->fails) {
        if (!(e->margin > 1)) e->margin = nextafter(1.0, INFINITY);
    } else if (!(e->margin <= 1)) {
        e->margin = isnan(e->margin) ? 0.0 : 1.0;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Metrics                                                                                     */
/* ------------------------------------------------------------------------------------------ */

static void metrics_init(kvf_output_metrics *m) {
    memset(m, 0, sizeof *m);
}

/* Whether e ranks ahead of w in the worst list: a failure on an in-model row before anything
 * else, then the larger margin. By margin alone, the NaNs of a row whose logits leave f32
 * (margin inf, one per element) fill the list and hide the in-model failure that decided the
 * class (an empty sequence's lse beside them), so a finding's report and signature
 * (fuzz/trial/outcome.c) would show an out-of-model element as the kernel's failure. */
static int kvf__worst_ahead(const kvf_element_error *e, const kvf_element_error *w) {
    const int e_in = e->fails && !e->out_of_model, w_in = w->fails && !w->out_of_model;
    if (e_in != w_in) return e_in;
    return e->margin > w->margin;
}

static void worst_insert(kvf_output_metrics *m, const kvf_element_error *e) {
    int n = m->worst_count;
    /* Strictly ahead moves ahead, so among equals the first element seen stays first; a
     * passing element of margin 0 never enters a full list (the exact runs rely on it). */
    if (n == KVF_WORST_ELEMENTS && !kvf__worst_ahead(e, &m->worst[n - 1])) return;
    int pos = n < KVF_WORST_ELEMENTS ? n : n - 1;
    while (pos > 0 && kvf__worst_ahead(e, &m->worst[pos - 1])) {
        m->worst[pos] = m->worst[pos - 1];
        pos--;
    }
    m->worst[pos] = *e;
    if (n < KVF_WORST_ELEMENTS) m->worst_count = n + 1;
}

static void metrics_add(kvf_output_metrics *m, const kvf_element_error *e, int mismatch) {
    m->elements++;
    if (e->fails) {
        m->violations++;
        if (e->out_of_model) m->violations_out_of_model++;
        if (e->kernel_bits == e->rounded_bits) m->violations_rounded++;
    }
    if (mismatch) m->nonfinite_mismatch++;
    if (e->out_of_model) {
        m->out_of_model++;
    } else {
        if (isfinite(e->kernel_value) && isfinite(e->rounded_value)) {
            if (e->abs_error > m->max_abs) m->max_abs = e->abs_error;
            if (e->rel_error > m->max_rel_fib) m->max_rel_fib = e->rel_error;
            if (e->rounded_value != 0) {
                double rel = e->abs_error / fabs(e->rounded_value);
                if (rel > m->max_rel_sol) m->max_rel_sol = rel;
            }
        }
        if (e->ulps > m->max_ulps) m->max_ulps = e->ulps;
        if (e->margin > m->max_margin) m->max_margin = e->margin;
        if (e->excess_margin > m->max_excess_margin) m->max_excess_margin = e->excess_margin;
    }
    worst_insert(m, e);
}

/* The excess margin (judge.h): what is left of the margin once the final rounding, which even
 * the correctly rounded value pays, is taken out. Only rules measured against the exact value
 * charge that rounding; the others compare with r and already start from zero. Kept on the
 * same side of 1 as the margin, so either number tells pass from fail. */
static void settle_excess(const kvf__rule_ops *ops, const kvf__elem_in *in, kvf_element_error *e) {
    e->excess_margin = e->margin;
    int against_exact = ops->against_exact;
    if (against_exact && isfinite(in->x) && isfinite(in->a) && isfinite(in->r)) {
        double base = fabs(in->r - in->x), err = fabs(in->a - in->x);
        double room = e->allowed - base;
        e->excess_margin = err <= base ? 0.0 : room > 0 ? (err - base) / room : INFINITY;
    }
    if (e->fails) {
        if (!(e->excess_margin > 1)) e->excess_margin = nextafter(1.0, INFINITY);
    } else if (!(e->excess_margin <= 1)) {
        e->excess_margin = isnan(e->excess_margin) ? 0.0 : 1.0;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The judge                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* What classification needs beyond the public metrics, per output. */
typedef struct class_tally {
    int64_t fail_plain;             /* failing elements on rows not flagged overflow */
    int64_t fail_nonfinite;         /* ... of which involve a NaN/inf (kernel, rounded or exact)
                                     * where the kernel's bits are not the rounded value's */
    int64_t fail_nonfinite_rounded; /* ... and where they are (a rule rejecting a correct -inf,
                                     * as fib does) */
    int64_t fail_overflow;          /* failing elements on overflow rows */
    int prefilter;                  /* sol: a NaN/inf kernel value rejects the whole tensor */
    int prefilter_plain;            /* ... one on a row not flagged overflow */
} class_tally;

static void judge_one(const kvf__rule_ops *ops, void *state, const kvf__rule_row *row,
                      const kvf__elem_in *in, kvf_output_metrics *m, class_tally *t,
                      kvf_element_observer observer, void *ctx) {
    const int overflow_row = row->out_of_model;
    kvf_element_error e;
    memset(&e, 0, sizeof e);
    e.output = in->output;
    e.b = in->b;
    e.h = in->h;
    e.d = in->d;
    e.kernel_value = in->a;
    e.rounded_value = in->r;
    e.exact_value = in->x;
    e.kernel_bits = in->abits;
    e.rounded_bits = in->rbits;
    e.abs_error = fabs(in->a - in->r);
    e.rel_error = e.abs_error / (fabs(in->r) + 1e-8);
    /* A NaN/inf mismatch against the rounded reference (NaN never matches) has no distance:
     * the ordered distance would put inf one step past the largest finite value and report a
     * huge number that means nothing. */
    int mismatch = (!isfinite(in->a) || !isfinite(in->r)) && !(in->a == in->r);
    if (mismatch)
        e.ulps = -1;
    else if (!isfinite(in->a))
        e.ulps = 0; /* the same infinity */
    else
        e.ulps = in->output == KVF_OUTPUT_O
                     ? kvf_bf16_ulp_distance((kvf_bf16)in->abits, (kvf_bf16)in->rbits)
                     : kvf_f32_ulp_distance((float)in->a, (float)in->r);
    e.out_of_model = overflow_row;

    ops->check(state, row, in, &e, overflow_row ? &t->prefilter : &t->prefilter_plain);
    settle_margin(&e);
    settle_excess(ops, in, &e);

    if (e.fails) {
        if (overflow_row) {
            t->fail_overflow++;
        } else {
            t->fail_plain++;
            if (!isfinite(in->a) || !isfinite(in->r) || !isfinite(in->x)) {
                if (in->abits == in->rbits)
                    t->fail_nonfinite_rounded++;
                else
                    t->fail_nonfinite++;
            }
        }
    }
    metrics_add(m, &e, mismatch);
    if (observer) observer(ctx, &e);
}

/* An element whose kernel bits are the correctly rounded value's (finite), once its output's
 * worst list is full: under every rule judge_one would find it passing with margin 0, excess
 * margin 0, 0 ulps and no error (each check_* measures a zero difference), so the only trace it
 * leaves in the verdict is its count (and, on a row out of the model, that count). Most
 * elements of a correct kernel are such elements; counting them from their bits, without the
 * row's bound or the fa baseline, gives the same verdict at a fraction of the cost. Every
 * margin is >= 0, so a full list never takes a 0. An element observer sees such elements only
 * when it takes them as runs (kvf_exact_run_observer); otherwise each is judged. */
static int countable_now(int countable, const kvf_output_metrics *m) {
    return countable && m->worst_count == KVF_WORST_ELEMENTS;
}

static void count_exact(kvf_output_metrics *m, int64_t n, int overflow_row) {
    m->elements += n;
    if (overflow_row) m->out_of_model += n;
}

/* The leading run of o elements (at most n) whose bits are the rounded ones, finite. Four at a
 * time while all four are: in x = (r & E) ^ E a 16-bit lane is 0 exactly when that element's
 * exponent is all ones (NaN or inf), and (x - 1) & ~x & 0x8000 per lane finds a zero lane (the
 * lanes are below 0x8000, so no lane borrows without a zero one below it). */
static int32_t exact_run(const kvf_bf16 *a, const kvf_bf16 *r, int32_t n) {
    const uint64_t e = 0x7F807F807F807F80ull, one = 0x0001000100010001ull,
                   top = 0x8000800080008000ull;
    int32_t k = 0;
    for (; k + 4 <= n; k += 4) {
        uint64_t wa, wr;
        memcpy(&wa, a + k, sizeof wa);
        memcpy(&wr, r + k, sizeof wr);
        const uint64_t x = (wr & e) ^ e;
        if (wa != wr || ((x - one) & ~x & top)) break;
    }
    while (k < n && a[k] == r[k] && (a[k] & 0x7F80u) != 0x7F80u)
        k++;
    return k;
}

/* Whether the output fails: on all its rows, or (plain) on its ordinary rows alone (their
 * violations and NaN/inf, the elements of every row counted): a failure only the overflow rows
 * complete is theirs. */
static int output_fails(const kvf__rule_ops *ops, const kvf_output_metrics *m, const class_tally *t,
                        int plain) {
    const int64_t failing = plain ? t->fail_plain : m->violations;
    const int prefilter = plain ? t->prefilter_plain : t->prefilter || t->prefilter_plain;
    return ops->output_fails ? ops->output_fails(m->elements, failing, prefilter) : failing > 0;
}

/* Offers a run of correctly rounded elements to the run observer; 1 when it took them. */
static int offer_run(kvf_exact_run_observer run, void *ctx, kvf_output_kind output, int32_t b,
                     int32_t h, int32_t d, int32_t n, int overflow_row, const double *exact) {
    const kvf_exact_run r = {output, b, h, d, n, overflow_row, exact};
    return run(ctx, &r) == 1;
}

/* What one judgement carries from row to row. */
typedef struct judge_pass {
    const kvf__rule_ops *ops;
    void *state; /* the rule's (ops->open) */
    const kvf_case *c;
    const kvf_oracle_result *oracle;
    const kvf_bf16 *o;
    const float *lse;
    kvf_element_observer observer;
    kvf_exact_run_observer run;
    void *ctx;
    int offers;    /* runs go to `run` before they are counted */
    int countable; /* correctly rounded elements may be counted without a check */
    kvf_verdict *out;
    class_tally to, tl;
} judge_pass;

/* One element as the checks see it: o element i (d < D) or the row's lse (d = D). */
static kvf__elem_in element_in(const judge_pass *p, int64_t row, int32_t b, int32_t h, int32_t d) {
    const kvf_oracle_result * or = p->oracle;
    if (d < p->c->head_dim) {
        const int64_t i = row * p->c->head_dim + d;
        return (kvf__elem_in){KVF_OUTPUT_O,
                              b,
                              h,
                              d,
                              kvf_bf16_to_f32(p->o[i]),
                              kvf_bf16_to_f32(or->o_rounded[i]),
                              or->o_exact[i],
                              or->o_cond[i],
                              p->o[i],
                              or->o_rounded[i]};
    }
    return (kvf__elem_in){KVF_OUTPUT_LSE,
                          b,
                          h,
                          -1,
                          p->lse[row],
                          or->lse_rounded[row],
                          or->lse_exact[row],
                          0.0,
                          kvf_f32_bits(p->lse[row]),
                          kvf_f32_bits(or->lse_rounded[row])};
}

/* One row: its o elements (d ascending), then its lse. Once an output's worst list is full,
 * runs of correctly rounded elements are counted from their bits (countable_now); the rule's
 * row state is prepared lazily by its check, so rows of such elements cost no bound. */
static void judge_row(judge_pass *p, const kvf_rule *rule, int64_t row) {
    const kvf_case *c = p->c;
    const kvf_oracle_result *oracle = p->oracle;
    const int32_t D = c->head_dim;
    const int32_t b = (int32_t)(row / c->num_qo_heads), h = (int32_t)(row % c->num_qo_heads);
    /* Rows out of the input model (docs/design.md, "The oracle"): logits an fp32 kernel cannot
     * hold, or a non-finite input the row reads. */
    const kvf_oracle_row *orow = &oracle->rows[row];
    const kvf__rule_row rrow = {
        rule, c, oracle, row, b, h, orow->overflow != 0 || orow->nonfinite_input != 0};
    const int overflow_row = rrow.out_of_model;
    if (p->ops->row) p->ops->row(p->state, &rrow);
    int32_t judged_until = 0; /* o elements below it were declined as a run: judged */
    for (int32_t d = 0; d <= D; d++) {
        const int lse_elem = d == D;
        const int64_t i = row * D + d;
        kvf_output_metrics *m = lse_elem ? &p->out->lse : &p->out->o;
        if (countable_now(p->countable, m) && d >= judged_until) {
            if (!lse_elem) {
                int32_t n = exact_run(p->o + i, oracle->o_rounded + i, D - d);
                if (n > 0 && (!p->offers || offer_run(p->run, p->ctx, KVF_OUTPUT_O, b, h, d, n,
                                                      overflow_row, oracle->o_exact + i))) {
                    count_exact(m, n, overflow_row);
                    d += n - 1;
                    continue;
                }
                judged_until = d + n;
            } else if (kvf_f32_bits(p->lse[row]) == kvf_f32_bits(oracle->lse_rounded[row]) &&
                       isfinite(p->lse[row]) &&
                       (!p->offers || offer_run(p->run, p->ctx, KVF_OUTPUT_LSE, b, h, -1, 1,
                                                overflow_row, oracle->lse_exact + row))) {
                count_exact(m, 1, overflow_row);
                continue;
            }
        }
        const kvf__elem_in in = element_in(p, row, b, h, d);
        judge_one(p->ops, p->state, &rrow, &in, m, lse_elem ? &p->tl : &p->to, p->observer, p->ctx);
    }
}

/* The verdict's pass and finding class from its outputs' tallies. Failures on rows an fp32
 * kernel cannot hold are reported as overflow only when nothing else failed, so a NaN produced
 * by such a row is an overflow finding, not a nonfinite one; anything failing on an ordinary row
 * takes precedence. A rule that rejects a correctly rounded non-finite value (fib on the -inf
 * lse of an empty sequence) names the class only when nothing else failed: a finite o bug
 * beside it is an o-tolerance finding. */
static void classify(kvf_verdict *out, const kvf__rule_ops *ops, const class_tally *to,
                     const class_tally *tl) {
    const int fails = output_fails(ops, &out->o, to, 0) | output_fails(ops, &out->lse, tl, 0);
    out->pass = !fails;
    if (!fails) return;
    const int plain = output_fails(ops, &out->o, to, 1) | output_fails(ops, &out->lse, tl, 1);
    if (!plain)
        out->finding = KVF_FINDING_OVERFLOW;
    else if (to->fail_nonfinite + tl->fail_nonfinite > 0)
        out->finding = KVF_FINDING_NONFINITE;
    else if (to->fail_plain > to->fail_nonfinite_rounded)
        out->finding = KVF_FINDING_O_TOLERANCE;
    else if (tl->fail_plain > tl->fail_nonfinite_rounded)
        out->finding = KVF_FINDING_LSE_TOLERANCE;
    else if (to->fail_nonfinite_rounded + tl->fail_nonfinite_rounded > 0)
        out->finding = KVF_FINDING_NONFINITE;
    else
        out->finding = KVF_FINDING_OVERFLOW;
}

static int check_inputs(const kvf_rule *rule, const kvf_case *c, const kvf_oracle_result *oracle,
                        const kvf_bf16 *o, const float *lse, kvf_error *err) {
    if (!rule || !c || !oracle)
        return kvf_error_set(err, KVF_EINVAL,
                             "the judge needs a verdict, a rule, a case and an "
                             "oracle result, and one of them is NULL");
    if (!kvf__rule_ops_of(rule->kind))
        return kvf_error_set(err, KVF_EINVAL, "the rule kind %d is not a known rule",
                             (int)rule->kind);
    if (!kvf__oracle_shape_ok(c, oracle))
        return kvf_error_set(err, KVF_EINVAL,
                             "the oracle result's shape (B=%d, Hq=%d, D=%d) does not match the "
                             "case's (B=%d, Hq=%d, D=%d)",
                             (int)oracle->batch_size, (int)oracle->num_qo_heads,
                             (int)oracle->head_dim, (int)c->batch_size, (int)c->num_qo_heads,
                             (int)c->head_dim);
    int64_t rows = (int64_t)c->batch_size * c->num_qo_heads;
    if (rows > 0 && (!o || !lse || !oracle->o_rounded || !oracle->o_exact || !oracle->o_cond ||
                     !oracle->lse_rounded || !oracle->lse_exact || !oracle->rows))
        return kvf_error_set(err, KVF_EINVAL,
                             "an output or oracle array is NULL for a case with %lld rows",
                             (long long)rows);
    return 0;
}

int kvf_judge_observe_runs(kvf_verdict *out, const kvf_rule *rule, const kvf_case *c,
                           const kvf_oracle_result *oracle, const kvf_bf16 *o, const float *lse,
                           kvf_element_observer observer, kvf_exact_run_observer run, void *ctx,
                           kvf_error *err) {
    if (!out) return check_inputs(NULL, NULL, NULL, NULL, NULL, err);
    int rc = check_inputs(rule, c, oracle, o, lse, err);
    if (rc) return rc;
    const int64_t rows = (int64_t)c->batch_size * c->num_qo_heads;
    judge_pass p;
    memset(&p, 0, sizeof p);
    p.ops = kvf__rule_ops_of(rule->kind);
    if (p.ops->open && rows > 0 && (rc = p.ops->open(&p.state, rule, c, err))) return rc;
    p.c = c;
    p.oracle = oracle;
    p.o = o;
    p.lse = lse;
    p.observer = observer;
    p.run = run;
    p.ctx = ctx;
    p.offers = observer && run;
    p.countable = !observer || p.offers;
    p.out = out;
    memset(out, 0, sizeof *out);
    out->rule = *rule;
    metrics_init(&out->o);
    metrics_init(&out->lse);
    for (int64_t row = 0; row < rows; row++)
        judge_row(&p, rule, row);
    if (p.ops->close) p.ops->close(p.state);
    out->o.bits_of_error = log2((double)out->o.max_ulps + 1.0);
    out->lse.bits_of_error = log2((double)out->lse.max_ulps + 1.0);
    classify(out, p.ops, &p.to, &p.tl);
    return 0;
}

kvf_verdict_status kvf_verdict_status_of(const kvf_verdict *v, int require_overflow) {
    if (v->pass) return KVF_VERDICT_PASS;
    /* Out of the model first: there the rounded value is no standard to meet either. */
    if (!kvf_finding_class_fails(v->finding, require_overflow)) return KVF_VERDICT_OUT_OF_MODEL;
    int64_t viol = v->o.violations + v->lse.violations;
    if (viol > 0 && v->o.violations_rounded + v->lse.violations_rounded == viol)
        return KVF_VERDICT_RULE_REJECTS_ROUNDED;
    return KVF_VERDICT_FAIL;
}

const char *kvf_verdict_status_name(kvf_verdict_status s) {
    switch (s) {
    case KVF_VERDICT_PASS:
        return "pass";
    case KVF_VERDICT_FAIL:
        return "FAIL";
    case KVF_VERDICT_OUT_OF_MODEL:
        return "out-of-model";
    case KVF_VERDICT_RULE_REJECTS_ROUNDED:
        return "rule-rejects-rounded";
    default:
        return "unknown";
    }
}

int kvf_judge_observe(kvf_verdict *out, const kvf_rule *rule, const kvf_case *c,
                      const kvf_oracle_result *oracle, const kvf_bf16 *o, const float *lse,
                      kvf_element_observer observer, void *ctx, kvf_error *err) {
    return kvf_judge_observe_runs(out, rule, c, oracle, o, lse, observer, NULL, ctx, err);
}

int kvf_judge(kvf_verdict *out, const kvf_rule *rule, const kvf_case *c,
              const kvf_oracle_result *oracle, const kvf_bf16 *o, const float *lse,
              kvf_error *err) {
    return kvf_judge_observe(out, rule, c, oracle, o, lse, NULL, NULL, err);
}

void kvf_margin_text(char *out, size_t size, double margin) {
    if (!size) return;
    if (isnan(margin))
        snprintf(out, size, "nan");
    else if (isinf(margin))
        snprintf(out, size, margin > 0 ? "inf" : "-inf");
    else if (margin >= 1 || margin <= -1)
        snprintf(out, size, "%.3g", margin);
    else if (fabs(margin) >= 0.001)
        /* Cut toward zero: a passing margin of 0.9996 must not read "1" (at the limit). */
        snprintf(out, size, "%.3f", trunc(margin * 1000) / 1000);
    else
        snprintf(out, size, "%.2g", margin);
}
