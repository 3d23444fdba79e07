/* An outcome as text for people (outcome.h): the full report of a finding and the one line a
 * replay must reproduce. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kvfuzz/outcome.h"

static void print_dist(FILE *f, const char *name, const kvf_dist *d) {
    fprintf(f, "%s %s 2^%d p%u", name, kvf_dist_name(d->kind), d->log2_scale, d->param);
}

static void print_case(FILE *f, const kvf_spec *s, const kvf_case *c) {
    const kvf_recipe *rp = &s->recipe;
    fprintf(f, "case: Hq %u, Hk %u (group %u), D %u, S %u, batch %u", rp->num_qo_heads,
            rp->num_kv_heads, rp->num_qo_heads / rp->num_kv_heads, rp->head_dim, rp->page_size,
            rp->batch_size);
    if (c) fprintf(f, ", pool %" PRId64 " pages", c->num_pages);
    fprintf(f, ", sm_scale %.9g (0x%08x)", (double)rp->sm_scale, kvf_f32_bits(rp->sm_scale));
    if (!kvf_layout_is_dense(&s->layout)) {
        char text[160];
        kvf_layout_text(&s->layout, text, sizeof text);
        fprintf(f, ", buffers %s", text);
    }
    if (!kvf_quant_recipe_is_plain(&s->quant)) {
        char text[96];
        kvf_kv_quant_text(&s->quant.kv, text, sizeof text);
        fprintf(f, ", caches %s", text);
        if (s->quant.kv.granularity)
            fprintf(f, " (bases k %.9g v %.9g, spread %u%s)", (double)s->quant.k_scale,
                    (double)s->quant.v_scale, s->quant.spread, s->quant.fine ? ", fine" : "");
    }
    fprintf(f, "\n");
    fprintf(f, "  lengths [");
    int64_t tokens = 0;
    for (uint32_t b = 0; b < rp->batch_size; b++) {
        int64_t len = rp->num_pages[b]
                          ? (int64_t)(rp->num_pages[b] - 1) * rp->page_size + rp->last_page_len[b]
                          : 0;
        tokens += len;
        if (b == 16) {
            fprintf(f, ", ...");
            continue;
        }
        if (b < 16) fprintf(f, "%s%" PRId64, b ? ", " : "", len);
    }
    fprintf(f, "] (%" PRId64 " tokens; pages/last_page_len", tokens);
    for (uint32_t b = 0; b < rp->batch_size && b < 16; b++)
        fprintf(f, " %u/%u", rp->num_pages[b], rp->last_page_len[b]);
    fprintf(f,
            ")\n  table %s, page_id_base %u, spare %u, logits %s, poison 0x%x, seed 0x%016" PRIx64
            "\n  ",
            kvf_table_name(rp->table), rp->page_id_base, rp->spare_pages,
            kvf_logits_name(rp->logits), rp->poison, rp->seed);
    print_dist(f, "q", &rp->q);
    print_dist(f, ", k", &rp->k);
    print_dist(f, ", v", &rp->v);
    fprintf(f, "; %u override(s)%s\n", s->num_overrides,
            s->has_explicit ? "; explicit tensors" : "");
    for (uint32_t i = 0; i < s->num_overrides && i < 8; i++) {
        static const char *const targets[] = {"?", "kv_indices", "kv_last_page_len",
                                              "q", "k_cache",    "v_cache"};
        const kvf_override *o = &s->overrides[i];
        fprintf(f, "    %s[%" PRIu64 "] = 0x%x\n", targets[o->target <= 5 ? o->target : 0],
                o->index, o->value);
    }
}

static void print_metrics(FILE *f, const char *name, const kvf_output_metrics *m) {
    fprintf(f,
            "%s: %" PRId64 "/%" PRId64 " fail, margin %.3g, abs %.3g, rel %.3g, ulp %" PRId64
            " (%.2f bits)",
            name, m->violations, m->elements, m->max_margin, m->max_abs, m->max_rel_fib,
            m->max_ulps, m->bits_of_error);
}

static void print_element(FILE *f, const kvf_element_error *e) {
    int is_o = e->output == KVF_OUTPUT_O;
    if (is_o)
        fprintf(f, "    o[b=%d h=%d d=%d]", e->b, e->h, e->d);
    else
        fprintf(f, "    lse[b=%d h=%d]", e->b, e->h);
    fprintf(f,
            " kernel %.9g (0x%0*x) oracle %.9g (0x%0*x) exact %.17g (%a) ulps %" PRId64
            " allowed %.3g margin %.3g%s%s\n",
            e->kernel_value, is_o ? 4 : 8, e->kernel_bits, e->rounded_value, is_o ? 4 : 8,
            e->rounded_bits, e->exact_value, e->exact_value, e->ulps, e->allowed, e->margin,
            e->fails ? " FAIL" : "",
            /* Said on the line: such an element is no kernel failure unless overflow is
             * required, though it may be listed under a finding of another class. */
            e->out_of_model ? " (row out of the model)" : "");
}

static const char *signal_name(int sig) {
    const char *s = strsignal(sig);
    return s ? s : "unknown signal";
}

void kvf_outcome_print(FILE *f, const kvf_outcome *out, const char *kernel, const kvf_spec *s,
                       const kvf_case *c) {
    fprintf(f, "==== kvfuzz finding: %s (kernel %s", kvf_finding_class_name(out->finding), kernel);
    if (out->rule >= 0) fprintf(f, ", rule %s", out->verdicts[out->rule].rule.name);
    fprintf(f, ") ====\n");
    if (out->plan[0]) fprintf(f, "plan: %s\n", out->plan);
    if (out->attribution.kind != KVF_ATTRIB_NONE)
        fprintf(f, "attribution: %s\n", out->attribution.text);
    if (s) print_case(f, s, c);
    if (out->status != KVF_RUN_OK) {
        fprintf(f, "run: %s: %s\n", kvf_run_status_name(out->status), out->message);
        if (out->status == KVF_RUN_CRASH && out->signal)
            fprintf(f, "  the worker was killed by signal %d (%s)\n", out->signal,
                    signal_name(out->signal));
        return;
    }
    if (out->nondeterministic || out->relation_broken) {
        const kvf_difference *d = &out->difference;
        if (out->relation_broken)
            fprintf(f,
                    "%s: %s %s (%s, seed %" PRIu64 "): %" PRId64
                    " element(s) differ; first %s[b=%d h=%d",
                    out->relation_promised ? "invariance" : "property",
                    kvf_relation_name((kvf_relation)out->relation),
                    out->relation_promised ? "broken" : "does not hold", out->relation_what,
                    out->relation_seed, d->count, d->output == KVF_OUTPUT_O ? "o" : "lse", d->b,
                    d->h);
        else
            fprintf(f,
                    "nondeterminism: %" PRId64
                    " element(s) differ between two runs; first %s[b=%d h=%d",
                    d->count, d->output == KVF_OUTPUT_O ? "o" : "lse", d->b, d->h);
        if (d->d >= 0) fprintf(f, " d=%d", d->d);
        fprintf(f, "] 0x%x then 0x%x\n", d->first_bits, d->second_bits);
    }
    for (int r = 0; r < out->nrules; r++) {
        const kvf_verdict *v = &out->verdicts[r];
        fprintf(f, "rule %-20s %s", v->rule.name, v->pass ? "pass" : "FAIL ");
        if (!v->pass) fprintf(f, "%s", kvf_finding_class_name(v->finding));
        fprintf(f, "\n  ");
        print_metrics(f, "o", &v->o);
        fprintf(f, "\n  ");
        print_metrics(f, "lse", &v->lse);
        fprintf(f, "\n");
    }
    int r = out->rule >= 0 ? out->rule : 0;
    if (out->nrules > 0) {
        const kvf_verdict *v = &out->verdicts[r];
        fprintf(f, "worst elements under %s:\n", v->rule.name);
        for (int i = 0; i < v->o.worst_count; i++)
            print_element(f, &v->o.worst[i]);
        for (int i = 0; i < v->lse.worst_count && i < 4; i++)
            print_element(f, &v->lse.worst[i]);
    }
}

void kvf_outcome_line(FILE *f, const kvf_outcome *out) {
    fprintf(f, "%s", kvf_finding_class_name(out->finding));
    if (out->status != KVF_RUN_OK) {
        fprintf(f, " %s\n", kvf_run_status_name(out->status));
        return;
    }
    if (out->nrules == 0) {
        fprintf(f, "\n");
        return;
    }
    const kvf_verdict *v = &out->verdicts[out->rule >= 0 ? out->rule : 0];
    const kvf_output_metrics *m = out->finding == KVF_FINDING_LSE_TOLERANCE ? &v->lse : &v->o;
    fprintf(f, " rule %s max_abs %.17g max_rel %.17g max_ulp %" PRId64 " margin %.17g\n",
            v->rule.name, m->max_abs, m->max_rel_fib, m->max_ulps, m->max_margin);
}
