/* `kvfuzz report`'s writers: summary.json, errors.csv, the embedded cases and index.html
 * (page.c), plus the terminal summary, all from the model (model.c). Every file is written
 * atomically so a report being regenerated next to a browser never shows half a page. */
#include "report_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kvfuzz/json_io.h"

/* ------------------------------------------------------------------------------------------ */
/* summary.json                                                                                */
/* ------------------------------------------------------------------------------------------ */

static json_t *i64(int64_t v) {
    return json_integer((json_int_t)v);
}

/* Key figures of one output. Quantiles and mean bits are null where nothing defines them. */
static json_t *figures_json(const kvf__outstats *o) {
    json_t *j = json_object();
    int bad = !j || kvf_json_set(j, "elements", i64(o->elements)) ||
              kvf_json_set(j, "violations", i64(o->violations)) ||
              kvf_json_set(j, "nonfinite", i64(o->nonfinite)) ||
              kvf_json_set(j, "max_abs", kvf_json_number(o->max_abs)) ||
              kvf_json_set(j, "max_rel", kvf_json_number(o->max_rel)) ||
              kvf_json_set(j, "max_ulps", i64(o->max_ulps));
    static const double qs[3] = {0.5, 0.99, 0.999};
    static const char *const qn[3] = {"ulps_p50", "ulps_p99", "ulps_p999"};
    for (int i = 0; !bad && i < 3; i++) {
        int64_t q = kvf__outstats_ulp_quantile(o, qs[i]);
        bad = kvf_json_set(j, qn[i], q < 0 ? json_null() : i64(q));
    }
    double mb = kvf__outstats_mean_bits(o);
    bad = bad || kvf_json_set(j, "mean_bits", isnan(mb) ? json_null() : json_real(mb)) ||
          kvf_json_set(j, "max_margin", kvf_json_number(o->max_margin)) ||
          kvf_json_set(j, "max_excess_margin", kvf_json_number(o->max_excess));
    if (bad) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* The signatures of a series under a rule split by attribution; null when the run recorded
 * no findings directory (no signature is known). */
static json_t *rule_attrib_json(const kvf__rattrib_counts *a) {
    if (a->signatures < 0) return json_null();
    json_t *j = json_object(), *w = json_object();
    int bad = !j || !w || kvf_json_set(j, "signatures", i64(a->signatures)) ||
              kvf_json_set(j, "defect", i64(a->defect)) ||
              kvf_json_set(j, "not_attributed", i64(a->unattributed)) ||
              kvf_json_set(j, "precision", i64(a->precision)) ||
              kvf_json_set(j, "declared", kvf_json_string_or_null(a->declared));
    for (size_t i = 0; !bad && i < a->nwithin; i++)
        bad = kvf_json_set(w, a->within[i].model, i64(a->within[i].n));
    bad = bad || json_object_set(j, "within", w);
    json_decref(w);
    if (bad) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* A finding's attribution as its JSON stated it (canonical model names), or null. */
static json_t *finding_attrib_json(const kvf__rattribution *a) {
    if (a->kind != KVF__ATTR_PRECISION && a->kind != KVF__ATTR_DEFECT) return json_null();
    int within = a->kind == KVF__ATTR_PRECISION;
    json_t *j = json_object();
    int bad = !j || kvf_json_set(j, "kind", json_string(within ? "precision" : "defect")) ||
              kvf_json_set(j, "declared", json_string(a->declared)) ||
              kvf_json_set(j, "within", within ? json_string(a->within) : json_null()) ||
              kvf_json_set(j, "margin", within ? kvf_json_number(a->margin) : json_null()) ||
              kvf_json_set(j, "text", kvf_json_string_or_null(a->text));
    if (bad) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static json_t *rule_json(const kvf__rmodel *m, const kvf__rseries *s, const kvf__group *gr) {
    kvf_verdict_counts vc;
    kvf__report_verdict(m, s, gr, &vc);
    char sentence[1024];
    kvf__report_sentence(m, s, gr, sentence, sizeof sentence);
    kvf__rattrib_counts ac;
    kvf__report_attrib(m, s, gr, &ac);
    json_t *j = json_object(), *f = json_object(), *oom = json_object();
    int bad = !j || !f || !oom;
    bad = bad || kvf_json_set(j, "cases", i64(gr->cases)) ||
          kvf_json_set(j, "passed", i64(gr->passed)) ||
          kvf_json_set(j, "failed", i64(kvf_verdict_counts_failed(&vc))) ||
          kvf_json_set(j, "out_of_model", i64(gr->out_of_model)) ||
          kvf_json_set(j, "rule_rejects_rounded", i64(gr->rejects_rounded)) ||
          kvf_json_set(j, "signatures", vc.signatures < 0 ? json_null() : i64(vc.signatures)) ||
          kvf_json_set(j, "attribution", rule_attrib_json(&ac)) ||
          kvf_json_set(j, "verdict", json_string(sentence));
    for (int c = 1; !bad && c < KVF_FINDING_CLASS_COUNT; c++)
        bad = kvf_json_set(f, kvf_finding_class_name((kvf_finding_class)c), i64(gr->findings[c]));
    bad = bad || json_object_set(j, "findings", f) ||
          kvf_json_set(j, "o", figures_json(&gr->out[0])) ||
          kvf_json_set(j, "lse", figures_json(&gr->out[1])) ||
          kvf_json_set(oom, "o", figures_json(&gr->oom[0])) ||
          kvf_json_set(oom, "lse", figures_json(&gr->oom[1])) ||
          json_object_set(j, "out_of_model_rows", oom);
    json_decref(f);
    json_decref(oom);
    if (bad) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static json_t *series_json(const kvf__rmodel *m, const kvf__rseries *s) {
    const kvf__kernel_runs *kr = s->runs;
    char precision[256];
    kvf__rseries_precision(s, precision, sizeof precision);
    json_t *j = json_object(), *runs = json_object(), *rules = json_object();
    int bad = !j || !runs || !rules;
    bad =
        bad || kvf_json_set(j, "name", json_string(s->name)) ||
        kvf_json_set(j, "input", i64((int64_t)s->input)) ||
        kvf_json_set(j, "kernel", json_string(s->kernel)) ||
        kvf_json_set(j, "primary_rule",
                     kvf_json_string_or_null(s->primary ? s->primary->rule : NULL)) ||
        kvf_json_set(j, "precision", kvf_json_string_or_null(precision[0] ? precision : NULL)) ||
        kvf_json_set(j, "verdict", json_string(kvf__report_series_fails(m, s) ? "fail" : "pass")) ||
        kvf_json_set(runs, "ran", i64(kr ? kr->ran : 0)) ||
        kvf_json_set(runs, "unsupported", i64(kr ? kr->unsupported : 0));
    for (int i = 0; !bad && i < KVF__N_RUN_ERRORS; i++)
        bad =
            kvf_json_set(runs, kvf_finding_class_name((kvf_finding_class)kvf__run_error_classes[i]),
                         i64(kr ? kr->errors[kvf__run_error_classes[i]] : 0));
    for (size_t g = 0; !bad && g < s->ngroups; g++)
        bad = kvf_json_set(rules, s->groups[g]->rule, rule_json(m, s, s->groups[g]));
    bad = bad || json_object_set(j, "runs", runs) || json_object_set(j, "rules", rules);
    json_decref(runs);
    json_decref(rules);
    if (bad) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static json_t *summary_json(const kvf__rmodel *m) {
    json_t *root = json_object(), *inputs = json_array(), *rules = json_array(),
           *series = json_array(), *fd = json_object(), *dirs = json_array(),
           *by_class = json_object(), *files = json_array(), *out = json_object(),
           *by_attr = json_object();
    int bad = !root || !inputs || !rules || !series || !fd || !dirs || !by_class || !files ||
              !out || !by_attr;
    bad = bad || kvf_json_set(root, "format", json_string(KVF_REPORT_SUMMARY_FORMAT)) ||
          kvf_json_set(root, "version", i64(KVF_REPORT_SUMMARY_VERSION)) ||
          kvf_json_set(root, "generated", json_string(m->generated)) ||
          kvf_json_set(root, "title", kvf_json_string_or_null(m->title));
    for (size_t i = 0; !bad && i < m->ninputs; i++) {
        const kvf_stats *st = m->inputs[i].stats;
        json_t *o = json_object();
        bad = kvf_json_push(inputs, o) ||
              kvf_json_set(o, "path", kvf_json_string_or_null(m->inputs[i].path)) ||
              kvf_json_set(o, "label", json_string(m->labels[i])) ||
              kvf_json_set(o, "incomplete", json_boolean(st->incomplete)) ||
              kvf_json_set(o, "require_overflow", json_boolean(st->require_overflow)) ||
              kvf_json_set(o, "runs_merged", i64((int64_t)st->nsources)) ||
              kvf_json_set(o, "findings_dir", kvf_json_string_or_null(st->findings_dir));
    }
    for (size_t r = 0; !bad && r < m->nrules; r++)
        bad = kvf_json_push(rules, json_string(m->rules[r]));
    int fails = 0;
    for (size_t i = 0; i < m->nseries; i++)
        fails |= kvf__report_series_fails(m, &m->series[i]);
    char detail[1024];
    static const char *const failure_names[] = {"none", "defect", "precision"};
    kvf__failure failure = kvf__report_overall(m, detail, sizeof detail);
    int64_t nattr[3] = {0, 0, 0}; /* precision, defect, not attributed */
    for (size_t i = 0; !bad && i < m->nseries; i++)
        bad = kvf_json_push(series, series_json(m, &m->series[i]));
    for (size_t i = 0; !bad && i < m->nfinding_dirs; i++)
        bad = kvf_json_push(dirs, json_string(m->finding_dirs[i]));
    for (size_t i = 0; !bad && i < m->nfindings; i++) {
        const kvf__rfinding *f = &m->findings[i];
        json_t *prev = json_object_get(by_class, f->cls);
        bad = kvf_json_set(by_class, f->cls, i64(prev ? json_integer_value(prev) + 1 : 1));
        json_t *o = json_object();
        bad = bad || kvf_json_push(files, o) || kvf_json_set(o, "name", json_string(f->stem)) ||
              kvf_json_set(o, "class", json_string(f->cls)) ||
              kvf_json_set(o, "hash", json_string(f->hash)) ||
              kvf_json_set(o, "kvfz", kvf_json_string_or_null(f->kvfz)) ||
              kvf_json_set(o, "json", kvf_json_string_or_null(f->json)) ||
              kvf_json_set(o, "kernel", kvf_json_string_or_null(f->kernel)) ||
              kvf_json_set(o, "rule", kvf_json_string_or_null(f->rule)) ||
              kvf_json_set(o, "attribution", finding_attrib_json(&f->attr)) ||
              kvf_json_set(o, "attribution_error", kvf_json_string_or_null(f->attr.error));
        nattr[f->attr.kind == KVF__ATTR_PRECISION ? 0 : f->attr.kind == KVF__ATTR_DEFECT ? 1 : 2]++;
    }
    bad =
        bad || json_object_set(fd, "dirs", dirs) ||
        kvf_json_set(fd, "count", i64((int64_t)m->nfindings)) ||
        json_object_set(fd, "by_class", by_class) ||
        kvf_json_set(by_attr, "precision", i64(nattr[0])) ||
        kvf_json_set(by_attr, "defect", i64(nattr[1])) ||
        kvf_json_set(by_attr, "not_attributed", i64(nattr[2])) ||
        json_object_set(fd, "by_attribution", by_attr) || json_object_set(fd, "files", files) ||
        kvf_json_set(out, "summary", json_string("summary.json")) ||
        kvf_json_set(out, "errors_csv", json_string("errors.csv")) ||
        kvf_json_set(out, "html", json_string("index.html")) ||
        kvf_json_set(out, "cases_dir", json_string("cases")) ||
        json_object_set(root, "inputs", inputs) || json_object_set(root, "rules", rules) ||
        kvf_json_set(root, "verdict", json_string(fails ? "fail" : "pass")) ||
        kvf_json_set(root, "failure", json_string(failure_names[failure])) ||
        kvf_json_set(root, "verdict_detail", kvf_json_string_or_null(detail[0] ? detail : NULL)) ||
        kvf_json_set(root, "groups", kvf__groups_json(m)) ||
        json_object_set(root, "series", series) || json_object_set(root, "findings", fd) ||
        json_object_set(root, "files", out);
    json_t *parts[] = {inputs, rules, series, fd, dirs, by_class, files, out, by_attr};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        json_decref(parts[i]);
    if (bad) {
        json_decref(root);
        return NULL;
    }
    return root;
}

static int fill_summary(FILE *f, void *ctx) {
    json_t *root = summary_json(ctx);
    if (!root) {
        errno = ENOMEM;
        return -1;
    }
    int rc = kvf_json_dump(root, f, 1);
    json_decref(root);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* errors.csv                                                                                  */
/* ------------------------------------------------------------------------------------------ */

static void csv_string(FILE *f, const char *s) {
    if (!s) return;
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void csv_double(FILE *f, double x) {
    if (isnan(x))
        fputs("nan", f);
    else if (isinf(x))
        fputs(x > 0 ? "inf" : "-inf", f);
    else
        fprintf(f, "%.17g", x);
}

static int fill_csv(FILE *f, void *ctx) {
    const kvf__rmodel *m = ctx;
    fputs("series,kernel,rule,output,rank,case_hash,case_path,case_link,b,h,d,seq_len,page_size,"
          "kernel_value,rounded_value,exact_value,kernel_bits,rounded_bits,abs_error,rel_error,"
          "ulps,allowed,margin,excess_margin,fails,out_of_model\n",
          f);
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__rseries *s = &m->series[i];
        for (size_t g = 0; g < s->ngroups; g++)
            for (int k = 0; k < 4; k++) {
                int out = k % 2;
                const kvf__outstats *o = k < 2 ? &s->groups[g]->out[out] : &s->groups[g]->oom[out];
                for (int w = 0; w < o->worst_count; w++) {
                    const kvf__worst *wr = &o->worst[w];
                    const kvf_element_error *e = &wr->e;
                    csv_string(f, s->name);
                    fputc(',', f);
                    csv_string(f, s->kernel);
                    fputc(',', f);
                    csv_string(f, s->groups[g]->rule);
                    fprintf(f, ",%s,%d,", out ? "lse" : "o", w + 1);
                    if (wr->ci && wr->ci->has_hash) fprintf(f, "%016" PRIx64, wr->ci->hash);
                    fputc(',', f);
                    if (wr->ci) csv_string(f, wr->ci->path);
                    fputc(',', f);
                    char *link = kvf__report_case_link(m, wr->ci);
                    csv_string(f, link);
                    free(link);
                    fprintf(f, ",%d,%d,%d,%" PRId64 ",%d,", (int)e->b, (int)e->h, (int)e->d,
                            wr->seq_len, (int)wr->page_size);
                    csv_double(f, e->kernel_value);
                    fputc(',', f);
                    csv_double(f, e->rounded_value);
                    fputc(',', f);
                    csv_double(f, e->exact_value);
                    fprintf(f, out ? ",0x%08x,0x%08x," : ",0x%04x,0x%04x,",
                            (unsigned)e->kernel_bits, (unsigned)e->rounded_bits);
                    csv_double(f, e->abs_error);
                    fputc(',', f);
                    csv_double(f, e->rel_error);
                    fputc(',', f);
                    if (e->ulps >= 0) fprintf(f, "%" PRId64, e->ulps); /* empty: no distance */
                    fputc(',', f);
                    csv_double(f, e->allowed);
                    fputc(',', f);
                    csv_double(f, e->margin);
                    fputc(',', f);
                    csv_double(f, e->excess_margin);
                    fprintf(f, ",%d,%d\n", e->fails ? 1 : 0, e->out_of_model ? 1 : 0);
                }
            }
    }
    return ferror(f) ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Embedded cases                                                                              */
/* ------------------------------------------------------------------------------------------ */

static int fill_hex(FILE *f, void *ctx) {
    const char *hex = ctx;
    const size_t n = strlen(hex) / 2;
    uint8_t *bytes = malloc(n ? n : 1);
    if (!bytes) return -1;
    kvf__hex_bytes(hex, bytes);
    const size_t put = fwrite(bytes, 1, n, f);
    free(bytes);
    return put != n || ferror(f) ? -1 : 0;
}

static int write_cases(const kvf__rmodel *m, const char *dir, kvf_error *err) {
    int made_dir = 0;
    for (size_t i = 0; i < m->nseries; i++)
        for (size_t g = 0; g < m->series[i].ngroups; g++)
            for (int out = 0; out < 2; out++) {
                const kvf__outstats *o = &m->series[i].groups[g]->out[out];
                for (int w = 0; w < o->worst_count; w++) {
                    const kvf__case_info *ci = o->worst[w].ci;
                    if (!ci || !ci->hex || !ci->has_hash) continue;
                    if (!made_dir) {
                        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
                            return kvf_error_set(err, KVF_EIO, "cannot create %s: %s", dir,
                                                 strerror(errno));
                        made_dir = 1;
                    }
                    char path[PATH_MAX + 32];
                    snprintf(path, sizeof path, "%s/%016" PRIx64 ".kvfz", dir, ci->hash);
                    if (access(path, F_OK) == 0) continue; /* same hash, same bytes */
                    int rc = kvf_write_atomic(path, fill_hex, ci->hex, err);
                    if (rc) return rc;
                }
            }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Terminal summary                                                                            */
/* ------------------------------------------------------------------------------------------ */

/* Verdicts first (what a reader needs), then the figures behind them. */
static void print_terminal(FILE *t, const kvf__rmodel *m) {
    char detail[1024];
    kvf__failure failure = kvf__report_overall(m, detail, sizeof detail);
    /* The pass/fail word is unchanged by attribution (failing the declared model is failing);
     * the detail says whether any failure is a defect. */
    fprintf(t, "verdict: %s%s%s\n", failure ? "FAIL" : "PASS", detail[0] ? ": " : "", detail);
    /* The defects next, one line each: what an overnight run's reader asks first. */
    kvf__groups_print(t, m);
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__rseries *s = &m->series[i];
        for (size_t g = 0; g < s->ngroups; g++) {
            kvf_verdict_counts vc;
            kvf__report_verdict(m, s, s->groups[g], &vc);
            char sentence[1024], notes[1024];
            kvf__report_sentence(m, s, s->groups[g], sentence, sizeof sentence);
            kvf_verdict_counts_notes(&vc, "      ", notes, sizeof notes);
            fprintf(t, "  %s  %s  %s\n%s", s->name, s->groups[g]->rule, sentence, notes);
        }
        if (kvf__rseries_run_errors(s)) {
            const kvf__kernel_runs *r = s->runs;
            fprintf(t, "  %s  FAILS: run errors:", s->name);
            for (int e = 0; e < KVF__N_RUN_ERRORS; e++)
                if (r->errors[kvf__run_error_classes[e]])
                    fprintf(t, " %" PRId64 " %s", r->errors[kvf__run_error_classes[e]],
                            kvf_finding_class_name((kvf_finding_class)kvf__run_error_classes[e]));
            fputc('\n', t);
        }
    }
    for (size_t i = 0; i < m->ninputs; i++)
        if (m->inputs[i].stats->require_overflow)
            fprintf(t,
                    "  %s: --require-overflow: failures out of the input model count as "
                    "kernel failures\n",
                    m->labels[i]);
    /* The model strict and fa judged under: their rule names carry it unless it is f32. */
    char shared[256];
    int models = kvf__report_precision_shared(m, shared, sizeof shared);
    if (models == 1)
        fprintf(t, "  precision model judged by strict and fa (declared): %s\n", shared);
    else if (models == 2) {
        fputs("  precision model judged by strict and fa (declared):", t);
        const char *sep = " ";
        for (size_t i = 0; i < m->nseries; i++) {
            char p[256];
            kvf__rseries_precision(&m->series[i], p, sizeof p);
            if (!p[0]) continue;
            fprintf(t, "%s%s %s", sep, m->series[i].name, p);
            sep = "; ";
        }
        fputc('\n', t);
    }
    int sw = 6, rw = 4;
    for (size_t i = 0; i < m->nseries; i++)
        if ((int)strlen(m->series[i].name) > sw) sw = (int)strlen(m->series[i].name);
    for (size_t r = 0; r < m->nrules; r++)
        if ((int)strlen(m->rules[r]) > rw) rw = (int)strlen(m->rules[r]);
    if (sw > 40) sw = 40;
    fprintf(t, "\n%zu series from %zu stats file(s); in-model rows:\n", m->nseries, m->ninputs);
    fprintf(t, "%-*s %-*s %7s %7s %6s | %10s %7s %7s %6s %5s %9s %6s | %6s %7s | %7s %7s\n", sw,
            "series", rw, "rule", "cases", "failed", "o.o.m.", "o elements", "viol", "max_ulp",
            "p99", "bits", "max_abs", "nonfin", "viol", "max_ulp", "margin", "excess");
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__rseries *s = &m->series[i];
        for (size_t g = 0; g < s->ngroups; g++) {
            const kvf__group *gr = s->groups[g];
            const kvf__outstats *o = &gr->out[0], *l = &gr->out[1];
            kvf_verdict_counts vc;
            kvf__report_verdict(m, s, gr, &vc);
            char abs[24], margin[24], excess[24], bits[16], p99[24];
            kvf__fmt_num(abs, sizeof abs, o->max_abs);
            kvf_margin_text(margin, sizeof margin, fmax(o->max_margin, l->max_margin));
            kvf__fmt_num(excess, sizeof excess, fmax(o->max_excess, l->max_excess));
            double mb = kvf__outstats_mean_bits(o);
            snprintf(bits, sizeof bits, isnan(mb) ? "-" : "%.2f", mb);
            int64_t q = kvf__outstats_ulp_quantile(o, 0.99);
            if (q < 0)
                snprintf(p99, sizeof p99, o->elements ? "NaN" : "-");
            else
                snprintf(p99, sizeof p99, "%" PRId64, q);
            fprintf(
                t,
                "%-*.*s %-*s %7" PRId64 " %7" PRId64 " %6" PRId64 " | %10" PRId64 " %7" PRId64
                " %7" PRId64 " %6s %5s %9s %6" PRId64 " | %6" PRId64 " %7" PRId64 " | %7s %7s\n",
                sw, sw, g ? "" : s->name, rw, gr->rule, gr->cases, kvf_verdict_counts_failed(&vc),
                gr->out_of_model, o->elements, o->violations, o->max_ulps, p99, bits, abs,
                o->nonfinite + l->nonfinite, l->violations, l->max_ulps, margin, excess);
        }
    }
    for (size_t i = 0; i < m->ninputs; i++)
        if (m->inputs[i].stats->incomplete)
            fprintf(t, "warning: %s is incomplete (memory ran out while counting)\n", m->labels[i]);
    if (m->nfinding_dirs) {
        fprintf(t, "findings: %zu", m->nfindings);
        for (size_t i = 0; i < m->nfindings; i++) {
            if (i && strcmp(m->findings[i].cls, m->findings[i - 1].cls) == 0) continue;
            size_t n = 0;
            for (size_t j = 0; j < m->nfindings; j++)
                n += strcmp(m->findings[j].cls, m->findings[i].cls) == 0;
            fprintf(t, "%s%zu %s", i ? ", " : " (", n, m->findings[i].cls);
        }
        size_t prec = 0, defect = 0;
        for (size_t i = 0; i < m->nfindings; i++) {
            prec += m->findings[i].attr.kind == KVF__ATTR_PRECISION;
            defect += m->findings[i].attr.kind == KVF__ATTR_DEFECT;
        }
        /* Only when the findings carry attributions: older ones read as they always did. */
        if (prec + defect)
            fprintf(t, "; %zu %s, %zu within a looser precision model", m->nfindings - prec,
                    m->nfindings - prec == 1 ? "defect" : "defects", prec);
        fprintf(t, "%s in", m->nfindings ? ")" : "");
        for (size_t i = 0; i < m->nfinding_dirs; i++)
            fprintf(t, " %s", m->finding_dirs[i]);
        fputc('\n', t);
        for (size_t i = 0; i < m->nfindings; i++)
            if (m->findings[i].attr.error)
                fprintf(t, "warning: %s; the finding counts as not attributed (a defect)\n",
                        m->findings[i].attr.error);
    }
    fputs("failed: kernel failures; o.o.m.: cases failing only on rows out of the input model "
          "(counted apart); o: violations, max and 99th-percentile ULP distance (an upper bound "
          "from its bucket; NaN: the percentile falls among NaN/inf mismatches), mean bits of "
          "error log2(ulps+1), max abs error, NaN/inf mismatches (o and lse); lse: violations, "
          "max ULP distance (f32); margin: largest error / allowance (> 1 fails); excess: the "
          "margin beyond the final rounding (0 for the correctly rounded value)\n",
          t);
}

/* ------------------------------------------------------------------------------------------ */
/* Driver                                                                                      */
/* ------------------------------------------------------------------------------------------ */

static int fill_html(FILE *f, void *ctx) {
    return kvf__report_write_html(f, ctx);
}

/* Callers check the directory's length first, so the names always fit. */
static void join(char *buf, size_t size, const char *dir, const char *name) {
    snprintf(buf, size, "%s/%s", dir, name);
}

int kvf_report_write(const kvf_report_input *inputs, size_t n, const kvf_report_opts *opts,
                     kvf_report_result *result, kvf_error *err) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    kvf_report_opts def = {0};
    if (!opts) opts = &def;
    if (!inputs || n == 0)
        return kvf_error_set(err, KVF_EINVAL, "a report needs at least one stats input");
    for (size_t i = 0; i < n; i++)
        if (!inputs[i].stats)
            return kvf_error_set(err, KVF_EINVAL, "report input %zu has no statistics", i + 1);
    /* Nothing judged anywhere: a page of empty charts would read like a clean run. */
    size_t judged = 0;
    for (size_t i = 0; i < n; i++)
        judged += inputs[i].stats->ngroups + inputs[i].stats->nkernels;
    if (judged == 0)
        return kvf_error_set(err, KVF_EINVAL,
                             "%s holds no judged case (written before the run judged anything), "
                             "so there is nothing to report",
                             inputs[0].path ? inputs[0].path : "the statistics");
    kvf__rmodel m;
    int rc = kvf__report_model_build(&m, inputs, n, opts, err);
    char path[PATH_MAX];
    long html_bytes = 0;
    if (rc == 0 && opts->out_dir) {
        static const char *const names[3] = {"summary.json", "errors.csv", "cases"};
        int (*const fills[2])(FILE *, void *) = {fill_summary, fill_csv};
        for (int i = 0; i < 3 && rc == 0; i++) {
            join(path, sizeof path, opts->out_dir, names[i]);
            rc = i < 2 ? kvf_write_atomic(path, fills[i], &m, err) : write_cases(&m, path, err);
        }
        /* The page last: whoever watches it sees the new one only when everything is there. */
        if (rc == 0) {
            join(path, sizeof path, opts->out_dir, "index.html");
            rc = kvf_write_atomic(path, fill_html, &m, err);
        }
        struct stat st;
        if (rc == 0 && stat(path, &st) == 0) html_bytes = (long)st.st_size;
    }
    if (rc == 0 && opts->terminal) print_terminal(opts->terminal, &m);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc == 0 && result) {
        result->series = m.nseries;
        result->findings = m.nfindings;
        result->html_bytes = html_bytes;
        result->seconds =
            (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    }
    kvf__report_model_free(&m);
    return rc;
}
