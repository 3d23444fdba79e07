/* The page's tables: key figures and verdicts by rule, the worst elements, the rows out of
 * the input model and the findings. Numbers go through the report's own formatters
 * (kvf__fmt_num, kvf_margin_text) so that a figure reads the same here as in the other
 * writers. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "tables.h"

static void td_num(FILE *f, double x) {
    char b[32];
    kvf__fmt_num(b, sizeof b, x);
    fprintf(f, "<td class=\"n\">%s</td>", b);
}

/* A margin as everywhere else (kvf_margin_text): below 1 never rounded up to "1". */
static void td_margin(FILE *f, double m) {
    char b[32];
    kvf_margin_text(b, sizeof b, m);
    fprintf(f, "<td class=\"n\">%s</td>", b);
}

static void td_i64(FILE *f, int64_t x) {
    fprintf(f, "<td class=\"n\">%" PRId64 "</td>", x);
}

static void swatch(FILE *f, const kvf__rseries *s) {
    fprintf(f, "<td><span class=\"sw\" style=\"background:%s\"></span>", s->color);
    kvf__html_escape(f, s->name);
    fputs("</td>", f);
}

void kvf__figures_table(FILE *f, const kvf__rmodel *m) {
    fputs("<section id=\"sec-figures\"><h2>Key figures</h2>\n<p class=\"note\">Per series under "
          "its primary rule (strict when judged, else the rule with the most elements). ULP "
          "distances are from the correctly rounded value; p99 is an upper bound read from its "
          "histogram bucket; bits = mean log2(ulps + 1); margin = error / allowance, above 1 "
          "fails; excess = the margin beyond the final rounding, the headroom a kernel actually "
          "uses (0 for the correctly rounded value, which always passes with margin 0). "
          "Failed counts kernel failures only; cases failing only on rows out of the input "
          "model are in their own column and panel, and every figure here is over in-model "
          "rows. o max abs is the largest |kernel - exact| in o's own units, so it is large on "
          "cases whose values reach 1e30. o max ulp is large where an output element is near 0 "
          "by cancellation (weighted values of both signs summing to almost nothing): the rules "
          "bound o's error by the weighted sum of |v|, not by |o|. "
          "lse's ulp distance is huge where the exact lse is 0 or near it (a sum of "
          "exponentials near 1): an error of 1e-7 there is hundreds of millions of f32 ulps. "
          "The rules bound lse's error relative to its conditioning. For both, the margin, not "
          "the ulp distance, says how close a kernel came to failing.</p>\n"
          "<div class=\"tw\"><table><tr><th>series</th><th>rule</th><th>cases</th>"
          "<th>failed</th>"
          "<th>out of model</th>"
          "<th>o elements</th><th>o violations</th><th>o max ulp</th><th>o p99 ulp</th>"
          "<th>o bits</th><th>o max abs</th><th>lse violations</th>"
          "<th>lse max ulp</th><th>max margin</th><th>max excess</th>"
          "<th>NaN/inf mismatches</th>"
          "<th>run errors</th></tr>\n",
          f);
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__rseries *s = &m->series[i];
        const kvf__group *g = s->primary;
        fputs("<tr>", f);
        swatch(f, s);
        if (!g) {
            fputs("<td colspan=\"15\">no judged elements</td>", f);
        } else {
            const kvf__outstats *o = &g->out[0], *l = &g->out[1];
            fputs("<td>", f);
            kvf__html_escape(f, g->rule);
            fputs("</td>", f);
            td_i64(f, g->cases);
            kvf_verdict_counts vc;
            kvf__report_verdict(m, s, g, &vc);
            int64_t failed = kvf_verdict_counts_failed(&vc);
            fprintf(f, "<td class=\"n%s\">%" PRId64 "</td>", failed ? " bad" : "", failed);
            td_i64(f, g->out_of_model);
            td_i64(f, o->elements);
            td_i64(f, o->violations);
            td_i64(f, o->max_ulps);
            int64_t p99 = kvf__outstats_ulp_quantile(o, 0.99);
            if (p99 < 0)
                fputs("<td class=\"n\">NaN</td>", f);
            else
                td_i64(f, p99);
            td_num(f, kvf__outstats_mean_bits(o));
            td_num(f, o->max_abs);
            td_i64(f, l->violations);
            td_i64(f, l->max_ulps);
            td_margin(f, fmax(o->max_margin, l->max_margin));
            td_margin(f, fmax(o->max_excess, l->max_excess));
            td_i64(f, o->nonfinite + l->nonfinite);
        }
        fprintf(f, "<td class=\"n\">%" PRId64 "</td></tr>\n", kvf__rseries_run_errors(s));
    }
    fputs("</table></div>\n", f);
    /* Verdicts under every rule. */
    fputs("<h3>Verdicts by rule</h3><table><tr><th>series</th>", f);
    for (size_t r = 0; r < m->nrules; r++) {
        fputs("<th>", f);
        kvf__html_escape(f, m->rules[r]);
        fputs("</th>", f);
    }
    fputs("</tr>\n", f);
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__rseries *s = &m->series[i];
        fputs("<tr>", f);
        swatch(f, s);
        for (size_t r = 0; r < m->nrules; r++) {
            const kvf__group *g = kvf__rseries_group(s, m->rules[r]);
            if (!g) {
                fputs("<td>-</td>", f);
                continue;
            }
            kvf_verdict_counts vc;
            kvf__report_verdict(m, s, g, &vc);
            char sentence[1024];
            kvf__report_sentence(m, s, g, sentence, sizeof sentence);
            fprintf(f, "<td%s>", kvf_verdict_counts_failed(&vc) ? " class=\"bad\"" : "");
            kvf__html_escape(f, sentence);
            for (int c = 1; c < KVF_FINDING_CLASS_COUNT; c++)
                if (g->findings[c])
                    fprintf(f, "<br>%" PRId64 " %s", g->findings[c],
                            kvf_finding_class_name((kvf_finding_class)c));
            if (g->out_of_model)
                fprintf(f, "<br><span class=\"dim\">%" PRId64 " out of the model</span>",
                        g->out_of_model);
            if (g->rejects_rounded)
                fprintf(f,
                        "<br><span class=\"dim\">%" PRId64
                        " rejected although correctly rounded (benign)</span>",
                        g->rejects_rounded);
            fputs("</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</table></section>\n", f);
}

static void case_cell(FILE *f, const kvf__rmodel *m, const kvf__case_info *ci) {
    fputs("<td>", f);
    if (!ci) {
        fputs("-</td>", f);
        return;
    }
    char label[256];
    if (ci->path) {
        const char *base = strrchr(ci->path, '/') ? strrchr(ci->path, '/') + 1 : ci->path;
        snprintf(label, sizeof label, "%s", base);
    } else {
        snprintf(label, sizeof label, "%016" PRIx64, ci->hash);
    }
    char *link = kvf__report_case_link(m, ci);
    if (link) {
        fputs("<a href=\"", f);
        kvf__html_escape(f, link);
        fputs("\">", f);
        kvf__html_escape(f, label);
        fputs("</a>", f);
        free(link);
    } else {
        kvf__html_escape(f, label);
    }
    if (ci->has_hash) fprintf(f, " <span class=\"dim\">%016" PRIx64 "</span>", ci->hash);
    fputs("</td>", f);
}

/* Rows shown per series: in-model elements are the kernel's headroom and get more; out-of-model
 * rows usually repeat one overflowing case, so a few show what they look like. */
#define WORST_SHOWN 10
#define WORST_SHOWN_OUT_OF_MODEL 3

/* Rows of the worst elements of one series under one group, o and lse merged by rank; oom
 * picks the out-of-model statistics. */
static void worst_rows(FILE *f, const kvf__rmodel *m, const kvf__rseries *s, const kvf__group *g,
                       int oom) {
    const kvf__outstats *o = oom ? &g->oom[0] : &g->out[0], *l = oom ? &g->oom[1] : &g->out[1];
    const int limit = oom ? WORST_SHOWN_OUT_OF_MODEL : WORST_SHOWN;
    int io = 0, il = 0;
    for (int shown = 0; shown < limit && (io < o->worst_count || il < l->worst_count); shown++) {
        const kvf__worst *w;
        int is_lse;
        if (il >= l->worst_count ||
            (io < o->worst_count && kvf__worst_cmp(&o->worst[io], &l->worst[il]) <= 0)) {
            w = &o->worst[io++];
            is_lse = 0;
        } else {
            w = &l->worst[il++];
            is_lse = 1;
        }
        const kvf_element_error *e = &w->e;
        /* The collector keeps the two apart already (stats_collect.c); a stats file read from
         * elsewhere is not trusted to, so that an out-of-model row never stands among a kernel's
         * worst elements. */
        if ((e->out_of_model != 0) != (oom != 0)) {
            shown--;
            continue;
        }
        fputs("<tr>", f);
        swatch(f, s);
        fputs("<td>", f);
        kvf__html_escape(f, g->rule);
        fputs("</td>", f);
        case_cell(f, m, w->ci);
        fprintf(f, "<td>%s</td>", is_lse ? "lse" : "o");
        td_i64(f, e->b);
        td_i64(f, e->h);
        fputs(is_lse ? "<td class=\"n\">-</td>" : "", f);
        if (!is_lse) td_i64(f, e->d);
        td_i64(f, w->seq_len);
        td_i64(f, w->page_size);
        char a[40], r[40], x[40];
        snprintf(a, sizeof a, "%.6g", e->kernel_value);
        snprintf(r, sizeof r, "%.6g", e->rounded_value);
        snprintf(x, sizeof x, "%.9g", e->exact_value);
        fprintf(f, "<td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td>", a, r,
                x);
        td_num(f, e->abs_error);
        if (e->ulps < 0)
            fputs("<td class=\"n\">NaN/inf</td>", f);
        else
            td_i64(f, e->ulps);
        td_margin(f, e->margin);
        td_margin(f, e->excess_margin);
        /* Out of the model, a failure is not the kernel's: say so next to the verdict. */
        fprintf(f, "<td%s>%s</td></tr>\n", e->fails && !oom ? " class=\"bad\"" : "",
                e->fails ? (oom ? "fails (out of model)" : "fails") : "passes");
    }
}

static const char WORST_HEAD[] =
    "<div class=\"tw\"><table><tr><th>series</th><th>rule</th><th>case</th><th>out</th>"
    "<th>b</th><th>h</th>"
    "<th>d</th><th>L</th><th>page size</th><th>kernel</th><th>rounded</th><th>exact</th>"
    "<th>abs</th><th>ulps</th><th>margin</th><th>excess</th><th></th></tr>\n";

void kvf__worst_table(FILE *f, const kvf__rmodel *m) {
    fputs("<section id=\"sec-worst\"><h2>Worst elements</h2>\n<p class=\"note\">The "
          "elements of in-model rows that use most of the rule's headroom (ranked by excess "
          "margin, then margin), per series under its primary rule, o and lse together "
          "(errors.csv has every kept element under every rule; rows out of the input model "
          "have their own panel). An element many ulps from the correctly rounded value can pass: "
          "where the terms of the weighted sum of v cancel, so that |o| is far below the mean "
          "|v| under the softmax weights, fp32 accumulation legitimately loses that much and "
          "the rules allow for it (docs/strict-rule.md). Case links open the case file: replay "
          "it with <code>kvfuzz replay --kernel K FILE</code>.</p>\n",
          f);
    fputs(WORST_HEAD, f);
    for (size_t i = 0; i < m->nseries; i++)
        if (m->series[i].primary) worst_rows(f, m, &m->series[i], m->series[i].primary, 0);
    fputs("</table></div></section>\n", f);
}

/* Rows out of the input model (logits an fp32 kernel cannot hold, non-finite inputs): counted
 * and shown here, never among a kernel's failures (docs/design.md, "The oracle"). */
void kvf__out_of_model_panel(FILE *f, const kvf__rmodel *m) {
    fputs("<section id=\"sec-out-of-model\"><h2>Rows out of the input model</h2>\n"
          "<p class=\"note\">Rows whose logits leave the f32 range (the overflow class) or "
          "that read a non-finite input have no defined fp32 answer; their elements are counted "
          "here, apart from the figures above, and a case that fails only on them is not a "
          "kernel failure unless the run required it (<code>--require-overflow</code>).</p>\n",
          f);
    int any = 0;
    for (size_t i = 0; i < m->nseries; i++)
        for (size_t g = 0; g < m->series[i].ngroups; g++) {
            const kvf__group *gr = m->series[i].groups[g];
            any |= gr->oom[0].elements + gr->oom[1].elements > 0 || gr->out_of_model > 0;
        }
    if (!any) {
        fputs("<p>No judged element was on a row out of the model.</p></section>\n", f);
        return;
    }
    fputs("<table><tr><th>series</th><th>rule</th><th>cases failing only there</th>"
          "<th>overflow required</th><th>o elements</th><th>o violations</th>"
          "<th>lse elements</th><th>lse violations</th><th>NaN/inf mismatches</th></tr>\n",
          f);
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__rseries *s = &m->series[i];
        for (size_t g = 0; g < s->ngroups; g++) {
            const kvf__group *gr = s->groups[g];
            const kvf__outstats *o = &gr->oom[0], *l = &gr->oom[1];
            if (o->elements + l->elements == 0 && gr->out_of_model == 0) continue;
            fputs("<tr>", f);
            swatch(f, s);
            fputs("<td>", f);
            kvf__html_escape(f, gr->rule);
            fputs("</td>", f);
            td_i64(f, gr->out_of_model);
            fprintf(f, "<td>%s</td>", s->st->require_overflow ? "yes" : "no");
            td_i64(f, o->elements);
            td_i64(f, o->violations);
            td_i64(f, l->elements);
            td_i64(f, l->violations);
            td_i64(f, o->nonfinite + l->nonfinite);
            fputs("</tr>\n", f);
        }
    }
    fputs("</table>\n<h3>Their worst elements</h3>\n<p class=\"note\">The first few per "
          "series; errors.csv has all kept ones.</p>\n",
          f);
    fputs(WORST_HEAD, f);
    for (size_t i = 0; i < m->nseries; i++)
        if (m->series[i].primary) worst_rows(f, m, &m->series[i], m->series[i].primary, 1);
    fputs("</table></div></section>\n", f);
}

static void link_or_dash(FILE *f, const char *href, const char *label) {
    if (!href) {
        fputs("-", f);
        return;
    }
    fputs("<a href=\"", f);
    kvf__html_escape(f, href);
    fputs("\">", f);
    kvf__html_escape(f, label);
    fputs("</a>", f);
}

/* The fuzzer's own sentence (or why the member could not be read) as the tooltip. */
static void attribution_cell(FILE *f, const kvf__rattribution *a) {
    static const char *const kinds[] = {"none", "precision", "defect", "malformed"};
    char cell[160];
    kvf__attr_cell(a, cell, sizeof cell);
    fprintf(f, "<td class=\"attr%s\" data-attribution=\"%s\"",
            a->kind == KVF__ATTR_PRECISION   ? " prec"
            : a->kind == KVF__ATTR_MALFORMED ? " bad"
                                             : "",
            kinds[a->kind]);
    const char *tip = a->error ? a->error : a->text;
    if (tip) {
        fputs(" title=\"", f);
        kvf__html_escape(f, tip);
        fputs("\"", f);
    }
    fputs(">", f);
    kvf__html_escape(f, cell);
    fputs("</td>", f);
}

void kvf__findings_table(FILE *f, const kvf__rmodel *m) {
    fputs("<section id=\"sec-findings\"><h2>Findings</h2>\n", f);
    if (m->nfinding_dirs == 0) {
        fputs("<p class=\"note\">No findings directory: the stats files recorded none and "
              "<code>--findings DIR</code> was not given.</p></section>\n",
              f);
        return;
    }
    fprintf(f, "<p class=\"note\">%zu finding(s) in", m->nfindings);
    for (size_t i = 0; i < m->nfinding_dirs; i++) {
        fputs(" <code>", f);
        kvf__html_escape(f, m->finding_dirs[i]);
        fputs("</code>", f);
        if (m->finding_dir_notes[i]) {
            fputs(" (", f);
            kvf__html_escape(f, m->finding_dir_notes[i]);
            fputs(")", f);
        }
    }
    fputs(". Each is a case file and a JSON report named &lt;class&gt;-&lt;hash&gt;. "
          "Attribution: <i>precision</i> when a looser precision model than the one declared "
          "accepts the finding (the kernel fails what it declared, but no defect is shown; "
          "hover for the model's roundings), <i>defect</i> when none does or the finding was "
          "not attributed (crashes, older findings).</p>\n",
          f);
    for (size_t i = 0; i < m->nfindings; i++)
        if (m->findings[i].attr.error) {
            fputs("<p class=\"note bad attr-error\">", f);
            kvf__html_escape(f, m->findings[i].attr.error);
            fputs("; the finding counts as not attributed (a defect).</p>\n", f);
        }
    if (m->nfindings) {
        fputs("<table><tr><th>class</th><th>hash</th><th>case</th><th>report</th>"
              "<th>kernel</th><th>rule</th><th>attribution</th><th>detail</th></tr>\n",
              f);
        for (size_t i = 0; i < m->nfindings; i++) {
            const kvf__rfinding *fd = &m->findings[i];
            fputs("<tr><td>", f);
            kvf__html_escape(f, fd->cls);
            fputs("</td><td><code>", f);
            kvf__html_escape(f, fd->hash);
            fputs("</code></td><td>", f);
            link_or_dash(f, fd->kvfz, ".kvfz");
            fputs("</td><td>", f);
            link_or_dash(f, fd->json, ".json");
            fputs("</td><td>", f);
            kvf__html_escape(f, fd->kernel ? fd->kernel : "");
            fputs("</td><td>", f);
            kvf__html_escape(f, fd->rule ? fd->rule : "");
            fputs("</td>", f);
            attribution_cell(f, &fd->attr);
            fputs("<td>", f);
            kvf__html_escape(f, fd->detail ? fd->detail : "");
            fputs("</td></tr>\n", f);
        }
        fputs("</table>\n", f);
    }
    fputs("</section>\n", f);
}
