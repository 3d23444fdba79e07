/* Collecting: elements, verdicts and runs into the statistics (kvf_stats_begin, the element
 * observer, kvf_stats_judge, kvf_stats_count_run). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/prng.h"
#include "stats_internal.h"

/* ------------------------------------------------------------------------------------------ */
/* Observing                                                                                   */
/* ------------------------------------------------------------------------------------------ */

int kvf_stats_begin(kvf_stats_scope *scope, kvf_stats *s, const char *kernel, const kvf_rule *rule,
                    const kvf_case *c, const kvf_stats_case *ref, kvf_error *err) {
    memset(scope, 0, sizeof *scope);
    if (!s || !kernel || !rule || !c)
        return kvf_error_set(err, KVF_EINVAL,
                             "statistics need a stats object, a kernel name, a rule and a case");
    kvf__group *g = kvf__group_get(s, kernel, rule->name);
    if (!g) {
        s->incomplete = 1;
        return kvf_error_set(err, KVF_ENOMEM, "out of memory adding statistics for %s / %s", kernel,
                             rule->name);
    }
    scope->stats = s;
    scope->group = g;
    scope->c = c;
    if (ref) scope->ref = *ref;
    scope->has_hash = scope->ref.kvfz != NULL;
    if (scope->has_hash) scope->hash = kvf_hash64(scope->ref.kvfz, scope->ref.kvfz_size);
    return 0;
}

/* The scope's case record, created on the first worst-list entry it makes. The scope keeps
 * one reference until it ends, so evictions within the same case cannot free it under us. */
static kvf__case_info *scope_case(kvf_stats_scope *sc) {
    if (sc->case_info) return sc->case_info;
    const kvf_stats_case *r = &sc->ref;
    sc->case_info =
        kvf__case_info_new(sc->has_hash, sc->hash, r->path, r->kvfz, r->kvfz_size, NULL);
    return sc->case_info;
}

void kvf_stats_observe_element(void *ctx, const kvf_element_error *e) {
    kvf_stats_scope *sc = ctx;
    if (!sc || !sc->group || (e->output != KVF_OUTPUT_O && e->output != KVF_OUTPUT_LSE)) return;
    kvf_stats *s = sc->stats;
    kvf__group *g = sc->group;
    kvf__outstats *o = e->out_of_model ? &g->oom[e->output] : &g->out[e->output];
    const kvf_case *c = sc->c;
    double a = e->kernel_value, r = e->rounded_value;
    int finite_pair = isfinite(a) && isfinite(r);
    int mismatch = !finite_pair && !(a == r); /* the judge's definition */
    int bad = 0;

    o->elements++;
    if (e->fails) o->violations++;
    if (mismatch) o->nonfinite++;
    if (finite_pair) {
        if (e->abs_error > o->max_abs) o->max_abs = e->abs_error;
        if (e->rel_error > o->max_rel) o->max_rel = e->rel_error;
    }
    if (e->ulps > o->max_ulps) o->max_ulps = e->ulps;
    if (e->margin > o->max_margin) o->max_margin = e->margin;
    if (e->excess_margin > o->max_excess) o->max_excess = e->excess_margin;
    if (!sc->pending && !(sc->pending = kvf__pending_new(s, c)))
        bad = 1; /* the buckets and classes of this scope are lost */
    else
        kvf__pending_add(sc->pending, o, e, finite_pair, mismatch);
    int64_t len = 0;
    int32_t S = c->page_size;
    if (e->b >= 0 && e->b < c->batch_size) len = kvf_case_seq_len(c, e->b);

    /* Rank against a stack copy of the case identity first; the record (with its hex copy of
     * the case) is only built once this case actually enters a list. */
    kvf__case_info probe = {0};
    probe.has_hash = sc->has_hash;
    probe.hash = sc->hash;
    probe.path = (char *)sc->ref.path;
    kvf__worst cand = {*e, len, S, sc->case_info ? (kvf__case_info *)sc->case_info : &probe};
    if (kvf__worst_wants(o, s->worst_n, &cand)) {
        kvf__case_info *ci = scope_case(sc);
        if (!ci && (sc->ref.path || sc->ref.kvfz)) {
            bad = 1;
        } else {
            if (ci) ci->refs++;
            cand.ci = ci;
            kvf__worst_insert(o, s->worst_n, cand);
        }
    }
    if (bad) s->incomplete = 1;
}

int kvf_stats_observe_exact_run(void *ctx, const kvf_exact_run *r) {
    kvf_stats_scope *sc = ctx;
    if (!sc || !sc->group || !r || (r->output != KVF_OUTPUT_O && r->output != KVF_OUTPUT_LSE))
        return 0;
    kvf_stats *s = sc->stats;
    kvf__group *g = sc->group;
    kvf__outstats *o = r->out_of_model ? &g->oom[r->output] : &g->out[r->output];
    if (!kvf__worst_shuts_out_zero(o, s->worst_n)) return 0;
    if (!sc->pending && !(sc->pending = kvf__pending_new(s, sc->c))) return 0;
    /* Every maximum starts at 0 and every figure of these elements is 0: only counts grow. */
    o->elements += r->n;
    kvf__pending_add_exact(sc->pending, o, r);
    return 1;
}

void kvf_stats_end(kvf_stats_scope *scope) {
    if (!scope) return;
    if (kvf__pending_finish(scope->stats, scope->pending) && scope->stats)
        scope->stats->incomplete = 1;
    kvf__case_info_unref(scope->case_info);
    memset(scope, 0, sizeof *scope);
}

void kvf_stats_observe_verdict(kvf_stats_scope *scope, const kvf_verdict *v) {
    if (scope && scope->group && v) {
        kvf__group *g = scope->group;
        g->cases++;
        switch (kvf_verdict_status_of(v, scope->stats->require_overflow)) {
        case KVF_VERDICT_PASS:
            g->passed++;
            break;
        case KVF_VERDICT_OUT_OF_MODEL:
            g->out_of_model++;
            break;
        case KVF_VERDICT_RULE_REJECTS_ROUNDED:
            g->rejects_rounded++;
            break;
        default:
            if ((unsigned)v->finding < KVF_FINDING_CLASS_COUNT) g->findings[v->finding]++;
            break;
        }
    }
    kvf_stats_end(scope);
}

int kvf_stats_judge(kvf_stats *s, const char *kernel, const kvf_stats_case *ref, kvf_verdict *out,
                    const kvf_rule *rule, const kvf_case *c, const kvf_oracle_result *oracle,
                    const kvf_bf16 *o, const float *lse, kvf_error *err) {
    if (!s) return kvf_judge(out, rule, c, oracle, o, lse, err);
    kvf_stats_scope sc;
    kvf_error serr = {0};
    if (kvf_stats_begin(&sc, s, kernel, rule, c, ref, &serr)) {
        /* Still judge: losing statistics must not lose a verdict. */
        int rc = kvf_judge(out, rule, c, oracle, o, lse, err);
        if (rc) return rc;
        if (err) *err = serr;
        return serr.code;
    }
    int rc = kvf_judge_observe_runs(out, rule, c, oracle, o, lse, kvf_stats_observe_element,
                                    kvf_stats_observe_exact_run, &sc, err);
    if (rc) {
        kvf_stats_end(&sc);
        return rc;
    }
    kvf_stats_observe_verdict(&sc, out);
    return 0;
}

int kvf_stats_count_run(kvf_stats *s, const char *kernel, int outcome, kvf_error *err) {
    if (!s || !kernel)
        return kvf_error_set(err, KVF_EINVAL, "counting a run needs a stats object and a kernel");
    int known = outcome == KVF_STATS_RAN || outcome == KVF_STATS_UNSUPPORTED;
    for (int i = 0; i < KVF__N_RUN_ERRORS; i++)
        known |= outcome == kvf__run_error_classes[i];
    if (!known) {
        char names[256] = "";
        for (int i = 0, n = 0; i < KVF__N_RUN_ERRORS && n >= 0 && (size_t)n < sizeof names; i++)
            n += snprintf(names + n, sizeof names - (size_t)n, "%s%s", i ? ", " : "",
                          kvf_finding_class_name((kvf_finding_class)kvf__run_error_classes[i]));
        return kvf_error_set(err, KVF_EINVAL,
                             "a run outcome must be ran, unsupported or a run-level finding "
                             "class (%s), got %d",
                             names, outcome);
    }
    kvf__kernel_runs *k = kvf__kernel_runs_get(s, kernel);
    if (!k) {
        s->incomplete = 1;
        return kvf_error_set(err, KVF_ENOMEM, "out of memory counting a run of %s", kernel);
    }
    if (outcome == KVF_STATS_RAN)
        k->ran++;
    else if (outcome == KVF_STATS_UNSUPPORTED)
        k->unsupported++;
    else
        k->errors[outcome]++;
    return 0;
}
