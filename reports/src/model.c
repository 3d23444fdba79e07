/* The report's model (report_internal.h): the inputs gathered into series and rules, their
 * verdicts, and the findings on disk, with links relative to the output directory. The
 * writers (report.c) and the page (page.c) only read it. */
#include "report_internal.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kvfuzz/json_io.h"
#include "kvfuzz/precision.h"

/* Distinguishable on white and for the common colour-vision deficiencies, in order of use. */
static const char *const PALETTE[] = {"#3b6fb6", "#d1495b", "#2e933c", "#e09f3e",
                                      "#7b4f9d", "#00798c", "#8c564b", "#5c5c5c"};
#define NPALETTE (sizeof PALETTE / sizeof PALETTE[0])

/* ------------------------------------------------------------------------------------------ */
/* Small helpers                                                                               */
/* ------------------------------------------------------------------------------------------ */

void kvf__fmt_num(char *buf, size_t size, double x) {
    if (isnan(x))
        snprintf(buf, size, "nan");
    else if (isinf(x))
        snprintf(buf, size, x > 0 ? "inf" : "-inf");
    else if (x == 0)
        snprintf(buf, size, "0");
    else if (fabs(x) >= 1e-3 && fabs(x) < 1e5)
        snprintf(buf, size, "%.3g", x);
    else
        snprintf(buf, size, "%.2e", x);
}

static int cmp_cstr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int kvf__rule_is(const char *rule, const char *base) {
    size_t n = strlen(base);
    return strncmp(rule, base, n) == 0 && (rule[n] == '\0' || rule[n] == ':');
}

/* strict (the default rule, under whatever precision model the run declared: its name then
 * reads "strict:bf16-p") first, the others by name. */
static int cmp_rule(const void *a, const void *b) {
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int xs = kvf__rule_is(x, "strict"), ys = kvf__rule_is(y, "strict");
    if (xs != ys) return ys - xs;
    return strcmp(x, y);
}

static int cmp_group_rule(const void *a, const void *b) {
    const kvf__group *x = *(const kvf__group *const *)a, *y = *(const kvf__group *const *)b;
    return cmp_rule(&x->rule, &y->rule);
}

const kvf__group *kvf__rseries_group(const kvf__rseries *s, const char *rule) {
    for (size_t i = 0; i < s->ngroups; i++)
        if (strcmp(s->groups[i]->rule, rule) == 0) return s->groups[i];
    return NULL;
}

/* Whether a findings directory is the one a run recorded (stats hold it absolute). */
static int same_dir(const char *dir, const char *recorded) {
    char abs[PATH_MAX];
    return recorded && realpath(dir, abs) && strcmp(abs, recorded) == 0;
}

/* Whether a finding file is one of the signatures of a series under a rule. Each finding file
 * is one signature (docs/fuzzing.md, Findings). They belong to the run that recorded their
 * directory; a run that recorded none (a replay) has its failures named by class instead, even
 * when the report lists someone else's findings. */
static int finding_of(const kvf__rfinding *f, const kvf__rseries *s, const kvf__group *g) {
    return f->kernel && f->rule && strcmp(f->kernel, s->kernel) == 0 &&
           strcmp(f->rule, g->rule) == 0 && same_dir(f->dir, s->st->findings_dir);
}

void kvf__report_verdict(const kvf__rmodel *m, const kvf__rseries *s, const kvf__group *g,
                         kvf_verdict_counts *out) {
    memset(out, 0, sizeof *out);
    out->kernel = s->kernel;
    out->rule = g->rule;
    out->cases = g->cases;
    out->passed = g->passed;
    out->out_of_model = g->out_of_model;
    out->rejects_rounded = g->rejects_rounded;
    memcpy(out->findings, g->findings, sizeof out->findings);
    out->require_overflow = s->st->require_overflow;
    out->signatures = -1;
    for (size_t i = 0; i < m->nfindings; i++)
        if (finding_of(&m->findings[i], s, g))
            out->signatures = out->signatures < 0 ? 1 : out->signatures + 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Attribution: defects apart from precision below the declared model                         */
/* ------------------------------------------------------------------------------------------ */

static void attrib_add(kvf__rattrib_counts *a, const kvf__rattribution *fa) {
    a->signatures = a->signatures < 0 ? 1 : a->signatures + 1;
    if (fa->declared && !a->declared) a->declared = fa->declared;
    if (fa->kind == KVF__ATTR_DEFECT) {
        a->defect++;
        return;
    }
    if (fa->kind != KVF__ATTR_PRECISION) {
        a->unattributed++;
        return;
    }
    a->precision++;
    size_t w = 0;
    while (w < a->nwithin && strcmp(a->within[w].model, fa->within) != 0)
        w++;
    if (w == KVF__MAX_WITHIN) w--; /* more models than the ladder has: counted with the last */
    if (w == a->nwithin) {
        a->within[w].model = fa->within;
        a->within[w].n = 0;
        a->nwithin++;
    }
    a->within[w].n++;
}

/* Sums b into a (the report's total over its series and rules). */
static void attrib_merge(kvf__rattrib_counts *a, const kvf__rattrib_counts *b) {
    if (b->signatures < 0) return;
    a->signatures = (a->signatures < 0 ? 0 : a->signatures) + b->signatures;
    a->defect += b->defect;
    a->unattributed += b->unattributed;
    a->precision += b->precision;
    if (!a->declared) a->declared = b->declared;
    for (size_t i = 0; i < b->nwithin; i++) {
        size_t w = 0;
        while (w < a->nwithin && strcmp(a->within[w].model, b->within[i].model) != 0)
            w++;
        if (w == KVF__MAX_WITHIN) w--;
        if (w == a->nwithin) {
            a->within[w].model = b->within[i].model;
            a->within[w].n = 0;
            a->nwithin++;
        }
        a->within[w].n += b->within[i].n;
    }
}

/* Most frequent model first, then by name, so the same findings always read the same. */
static void attrib_sort(kvf__rattrib_counts *a) {
    for (size_t i = 1; i < a->nwithin; i++)
        for (size_t j = i; j > 0; j--) {
            long dn = a->within[j].n - a->within[j - 1].n;
            if (dn < 0 || (dn == 0 && strcmp(a->within[j].model, a->within[j - 1].model) >= 0))
                break;
            const char *tm = a->within[j].model;
            long tn = a->within[j].n;
            a->within[j] = a->within[j - 1];
            a->within[j - 1].model = tm;
            a->within[j - 1].n = tn;
        }
}

void kvf__report_attrib(const kvf__rmodel *m, const kvf__rseries *s, const kvf__group *g,
                        kvf__rattrib_counts *out) {
    memset(out, 0, sizeof *out);
    out->signatures = -1;
    for (size_t i = 0; i < m->nfindings; i++)
        if (finding_of(&m->findings[i], s, g)) attrib_add(out, &m->findings[i].attr);
    attrib_sort(out);
}

/* Appends to buf at *n, never past size (text that does not fit is cut, as in verdict.c). */
static void put(char *buf, size_t size, size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t size, size_t *n, const char *fmt, ...) {
    if (*n >= size) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *n, size - *n, fmt, ap);
    va_end(ap);
    if (k > 0) *n = *n + (size_t)k < size ? *n + (size_t)k : size;
}

/* "(bf16-partials: 5, fp16-p: 1)" */
static void put_within(char *buf, size_t size, size_t *n, const kvf__rattrib_counts *a) {
    for (size_t w = 0; w < a->nwithin; w++)
        put(buf, size, n, "%s%s: %ld", w ? ", " : "(", a->within[w].model, a->within[w].n);
    put(buf, size, n, ")");
}

/* "2 defects (no precision model explains them)", naming those never attributed apart: they
 * count as defects, as every failure did before attribution, but nothing was tried on them. */
static void put_defects(char *buf, size_t size, size_t *n, const kvf__rattrib_counts *a) {
    long d = a->defect + a->unattributed;
    put(buf, size, n, "%ld %s ", d, d == 1 ? "defect" : "defects");
    if (a->unattributed == 0)
        put(buf, size, n, "(no precision model explains %s)", d == 1 ? "it" : "them");
    else if (a->defect == 0)
        put(buf, size, n, "(not attributed)");
    else
        put(buf, size, n, "(no precision model explains %ld; %ld not attributed)", a->defect,
            a->unattributed);
}

static void put_precision(char *buf, size_t size, size_t *n, const kvf__rattrib_counts *a) {
    put(buf, size, n, "%ld %s within a looser precision model than declared ", a->precision,
        a->precision == 1 ? "signature" : "signatures");
    put_within(buf, size, n, a);
}

void kvf__report_sentence(const kvf__rmodel *m, const kvf__rseries *s, const kvf__group *g,
                          char *buf, size_t size) {
    kvf_verdict_counts vc;
    kvf__report_verdict(m, s, g, &vc);
    kvf_verdict_counts_sentence(&vc, buf, size);
    kvf__rattrib_counts a;
    kvf__report_attrib(m, s, g, &a);
    /* Findings from before attribution (or a replay's failures, which have no files) read as
     * they always did. */
    if (!kvf_verdict_counts_failed(&vc) || a.signatures <= 0 || a.precision + a.defect == 0) return;
    size_t n = strlen(buf);
    if (a.precision == a.signatures) {
        put(buf, size, &n, ", all within a looser precision model than declared ");
        put_within(buf, size, &n, &a);
        put(buf, size, &n,
            ": no defect found under this rule, but the kernel's precision is below the declared "
            "%s",
            a.declared ? a.declared : "model");
        return;
    }
    put(buf, size, &n, ": ");
    put_defects(buf, size, &n, &a);
    if (a.precision) {
        put(buf, size, &n, "; ");
        put_precision(buf, size, &n, &a);
    }
}

kvf__failure kvf__report_overall(const kvf__rmodel *m, char *buf, size_t size) {
    if (size) buf[0] = '\0';
    kvf__rattrib_counts all;
    memset(&all, 0, sizeof all);
    all.signatures = -1;
    int fails = 0;
    long run_error_series = 0, unfiled_series = 0; /* failures no finding file stands for */
    int one_declared = 1; /* every attributed finding failed the same model */
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__rseries *s = &m->series[i];
        fails |= kvf__report_series_fails(m, s);
        run_error_series += kvf__rseries_run_errors(s) > 0;
        /* A campaign files each failing case once, under the first rule it fails, so a rule
         * can fail with no file of its own (fa on the cases strict filed): the series' files
         * stand for all its failures. Only a series that failed and filed nothing (a replay)
         * has failures no finding speaks for. */
        int failed = 0;
        long filed = 0;
        for (size_t g = 0; g < s->ngroups; g++) {
            kvf_verdict_counts vc;
            kvf__report_verdict(m, s, s->groups[g], &vc);
            if (!kvf_verdict_counts_failed(&vc)) continue;
            failed = 1;
            kvf__rattrib_counts a;
            kvf__report_attrib(m, s, s->groups[g], &a);
            if (a.signatures <= 0) continue;
            filed += a.signatures;
            if (a.declared && all.declared && strcmp(a.declared, all.declared) != 0)
                one_declared = 0;
            attrib_merge(&all, &a);
        }
        unfiled_series += failed && !filed;
    }
    if (!fails) return KVF__FAILURE_NONE;
    attrib_sort(&all);
    long defects = all.defect + all.unattributed;
    int precision_only = all.precision > 0 && defects == 0 && !run_error_series && !unfiled_series;
    /* Nothing attributed anywhere: "FAIL" says it all, as it did before attribution. */
    if (all.precision + all.defect == 0) return KVF__FAILURE_DEFECT;
    size_t n = 0;
    if (precision_only) {
        put(buf, size, &n, "no defect found, but the precision is below what was declared");
        if (one_declared && all.declared) put(buf, size, &n, " (%s)", all.declared);
        put(buf, size, &n, ": all %ld failing %s within a looser precision model ", all.precision,
            all.precision == 1 ? "signature lies" : "signatures lie");
        put_within(buf, size, &n, &all);
        return KVF__FAILURE_PRECISION;
    }
    const char *sep = "";
    if (defects) {
        put_defects(buf, size, &n, &all);
        sep = "; ";
    }
    if (all.precision) {
        put(buf, size, &n, "%s", sep);
        put_precision(buf, size, &n, &all);
        sep = "; ";
    }
    if (run_error_series) {
        put(buf, size, &n, "%srun errors in %ld series", sep, run_error_series);
        sep = "; ";
    }
    if (unfiled_series)
        put(buf, size, &n, "%sfailures with no finding file in %ld series", sep, unfiled_series);
    return KVF__FAILURE_DEFECT;
}

void kvf__rseries_precision(const kvf__rseries *s, char *buf, size_t size) {
    size_t n = 0;
    if (size) buf[0] = '\0';
    for (size_t g = 0; g < s->ngroups; g++) {
        const char *rule = s->groups[g]->rule;
        if (!kvf__rule_is(rule, "strict") && !kvf__rule_is(rule, "fa")) continue;
        const char *colon = strchr(rule, ':');
        const char *model = colon ? colon + 1 : "f32"; /* the model judge.c leaves unnamed */
        /* Listed once: strict and fa of one run carry the same model. */
        int seen = 0;
        for (size_t h = 0; h < g && !seen; h++) {
            const char *r2 = s->groups[h]->rule;
            if (!kvf__rule_is(r2, "strict") && !kvf__rule_is(r2, "fa")) continue;
            const char *c2 = strchr(r2, ':');
            seen = strcmp(c2 ? c2 + 1 : "f32", model) == 0;
        }
        if (!seen) put(buf, size, &n, "%s%s", n ? ", " : "", model);
    }
}

int kvf__report_precision_shared(const kvf__rmodel *m, char *buf, size_t size) {
    int any = 0, same = 1;
    if (size) buf[0] = '\0';
    for (size_t i = 0; i < m->nseries; i++) {
        char p[256];
        kvf__rseries_precision(&m->series[i], p, sizeof p);
        if (!p[0]) continue;
        if (!any) snprintf(buf, size, "%s", p);
        same &= strcmp(buf, p) == 0;
        any = 1;
    }
    if (any && !same && size) buf[0] = '\0';
    return !any ? 0 : same ? 1 : 2;
}

void kvf__attr_cell(const kvf__rattribution *a, char *buf, size_t size) {
    char margin[32];
    switch (a->kind) {
    case KVF__ATTR_PRECISION:
        kvf_margin_text(margin, sizeof margin, a->margin);
        snprintf(buf, size, "precision: within %s (margin %s)", a->within, margin);
        break;
    case KVF__ATTR_DEFECT:
        snprintf(buf, size, "defect");
        break;
    case KVF__ATTR_MALFORMED:
        snprintf(buf, size, "defect (attribution unreadable)");
        break;
    default:
        snprintf(buf, size, "defect (not attributed)");
        break;
    }
}

int64_t kvf__rseries_run_errors(const kvf__rseries *s) {
    const kvf__kernel_runs *r = s->runs;
    int64_t n = 0;
    for (int i = 0; r && i < KVF__N_RUN_ERRORS; i++)
        n += r->errors[kvf__run_error_classes[i]];
    return n;
}

int kvf__report_series_fails(const kvf__rmodel *m, const kvf__rseries *s) {
    (void)m;
    if (kvf__rseries_run_errors(s)) return 1;
    for (size_t g = 0; g < s->ngroups; g++) {
        int64_t failed = 0;
        for (int c = 1; c < KVF_FINDING_CLASS_COUNT; c++)
            failed += s->groups[g]->findings[c];
        if (failed) return 1;
    }
    return 0;
}

static char *relative_path(const char *from, const char *to) {
    size_t i = 0, common = 0;
    /* Longest common prefix ending at a component boundary. */
    while (from[i] && to[i] && from[i] == to[i]) {
        i++;
        if (from[i] == '/' || from[i] == 0) {
            if (to[i] == '/' || to[i] == 0) common = i;
        }
    }
    if (strcmp(from, "/") == 0) common = 0;
    size_t ups = 0;
    for (const char *p = from + common; *p; p++)
        if (*p == '/') ups++;
    const char *rest = to + common;
    while (*rest == '/')
        rest++;
    char *out = malloc(ups * 3 + strlen(rest) + 2);
    if (!out) return NULL;
    out[0] = 0;
    for (size_t u = 0; u < ups; u++)
        strcat(out, "../");
    strcat(out, rest);
    if (!out[0]) strcpy(out, ".");
    return out;
}

char *kvf__report_link(const kvf__rmodel *m, const char *file) {
    char abs[PATH_MAX];
    if (!file || !realpath(file, abs)) return NULL;
    if (!m->out_abs) return strdup(abs);
    return relative_path(m->out_abs, abs);
}

char *kvf__report_case_link(const kvf__rmodel *m, const kvf__case_info *ci) {
    if (!ci) return NULL;
    if (ci->hex && ci->has_hash) {
        char buf[64];
        snprintf(buf, sizeof buf, "cases/%016" PRIx64 ".kvfz", ci->hash);
        return strdup(buf);
    }
    return kvf__report_link(m, ci->path);
}

/* ------------------------------------------------------------------------------------------ */
/* The model                                                                                   */
/* ------------------------------------------------------------------------------------------ */

void kvf__report_model_free(kvf__rmodel *m) {
    for (size_t i = 0; i < m->ninputs && m->labels; i++)
        free(m->labels[i]);
    free(m->labels);
    for (size_t i = 0; i < m->nseries; i++)
        free(m->series[i].groups);
    free(m->series);
    free(m->rules);
    for (size_t i = 0; i < m->nfindings; i++) {
        kvf__rfinding *f = &m->findings[i];
        free(f->stem);
        free(f->cls);
        free(f->hash);
        free(f->kvfz);
        free(f->json);
        free(f->kernel);
        free(f->rule);
        free(f->detail);
        free(f->attr.declared);
        free(f->attr.within);
        free(f->attr.text);
        free(f->attr.error);
    }
    free(m->findings);
    for (size_t i = 0; i < m->nfinding_dirs; i++) {
        free(m->finding_dirs[i]);
        free(m->finding_dir_notes[i]);
    }
    free(m->finding_dirs);
    free(m->finding_dir_notes);
    kvf_groups_free(&m->groups);
    free(m->out_abs);
}

static char *input_label(const kvf_report_input *in, size_t i) {
    if (in->label) return strdup(in->label);
    if (in->stats->label) return strdup(in->stats->label);
    if (in->path) {
        const char *base = strrchr(in->path, '/') ? strrchr(in->path, '/') + 1 : in->path;
        size_t n = strlen(base);
        if (n > 5 && strcmp(base + n - 5, ".json") == 0) n -= 5;
        return strndup(base, n);
    }
    char buf[32];
    snprintf(buf, sizeof buf, "input%zu", i + 1);
    return strdup(buf);
}

/* Picks the group whose elements feed the rule-independent charts. Error histograms do not
 * depend on the rule, but a run may have judged different rules on different cases, so one
 * group is chosen: strict (judged on everything by default) if present, else the group that
 * saw the most o elements. */
static const kvf__group *pick_primary(const kvf__group *const *groups, size_t n) {
    const kvf__group *best = NULL;
    for (size_t i = 0; i < n; i++) {
        if (kvf__rule_is(groups[i]->rule, "strict")) return groups[i];
        if (!best || groups[i]->out[0].elements > best->out[0].elements) best = groups[i];
    }
    return best;
}

static int build_series(kvf__rmodel *m) {
    size_t cap = 0;
    for (size_t i = 0; i < m->ninputs; i++)
        cap += m->inputs[i].stats->ngroups + m->inputs[i].stats->nkernels;
    m->series = calloc(cap ? cap : 1, sizeof *m->series);
    const char **kernels = malloc((cap ? cap : 1) * sizeof *kernels);
    m->rules = malloc((cap ? cap : 1) * sizeof *m->rules);
    if (!m->series || !kernels || !m->rules) {
        free(kernels);
        return -1;
    }
    for (size_t i = 0; i < m->ninputs; i++) {
        const kvf_stats *st = m->inputs[i].stats;
        size_t nk = 0;
        for (size_t g = 0; g < st->ngroups; g++)
            kernels[nk++] = st->groups[g]->kernel;
        for (size_t k = 0; k < st->nkernels; k++)
            kernels[nk++] = st->kernels[k].kernel;
        qsort(kernels, nk, sizeof *kernels, cmp_cstr);
        for (size_t k = 0; k < nk; k++) {
            if (k && strcmp(kernels[k], kernels[k - 1]) == 0) continue;
            kvf__rseries *s = &m->series[m->nseries++];
            s->input = i;
            s->st = st;
            s->kernel = kernels[k];
            s->groups = malloc((st->ngroups ? st->ngroups : 1) * sizeof *s->groups);
            if (!s->groups) {
                free(kernels);
                return -1;
            }
            for (size_t g = 0; g < st->ngroups; g++)
                if (strcmp(st->groups[g]->kernel, s->kernel) == 0)
                    s->groups[s->ngroups++] = st->groups[g];
            qsort(s->groups, s->ngroups, sizeof *s->groups, cmp_group_rule);
            s->primary = pick_primary(s->groups, s->ngroups);
            for (size_t r = 0; r < st->nkernels; r++)
                if (strcmp(st->kernels[r].kernel, s->kernel) == 0) s->runs = &st->kernels[r];
            for (size_t g = 0; g < s->ngroups; g++) {
                size_t r = 0;
                while (r < m->nrules && strcmp(m->rules[r], s->groups[g]->rule) != 0)
                    r++;
                if (r == m->nrules) m->rules[m->nrules++] = s->groups[g]->rule;
            }
        }
    }
    free(kernels);
    qsort(m->rules, m->nrules, sizeof *m->rules, cmp_rule);
    /* When one kernel appears in two inputs every series carries its input's label, so that
     * the names read alike ("seeds:cpu-ref" beside "seeds:cpu-splitkv", not "cpu-ref"). */
    int shared = 0;
    for (size_t i = 0; i < m->nseries; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(m->series[j].kernel, m->series[i].kernel) == 0) shared = 1;
    for (size_t i = 0; i < m->nseries; i++) {
        kvf__rseries *s = &m->series[i];
        if (shared)
            snprintf(s->name, sizeof s->name, "%s:%s", m->labels[s->input], s->kernel);
        else
            snprintf(s->name, sizeof s->name, "%s", s->kernel);
        s->color = PALETTE[i % NPALETTE];
    }
    return 0;
}

static int is_hex_word(const char *s, size_t n) {
    if (n < 4) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
              (s[i] >= 'A' && s[i] <= 'F')))
            return 0;
    return 1;
}

static char *json_member_string(const json_t *root, const char *key) {
    const json_t *v = json_object_get(root, key);
    return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

static const char *json_type_word(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/* A model name member of the attribution, canonicalized; NULL with why[] set when it is not a
 * model kvfuzz knows. */
static char *attr_model(const json_t *obj, const char *key, char *why, size_t size) {
    const json_t *v = json_object_get(obj, key);
    if (!json_is_string(v)) {
        snprintf(why, size, "attribution.%s is %s, not a precision model name", key,
                 v ? json_type_word(v) : "missing");
        return NULL;
    }
    kvf_precision p;
    kvf_error err = {0};
    if (kvf_precision_parse(&p, json_string_value(v), &err)) {
        snprintf(why, size, "attribution.%s \"%.60s\": %.400s", key, json_string_value(v), err.msg);
        return NULL;
    }
    char name[KVF_PRECISION_NAME_MAX];
    kvf_precision_name(&p, name, sizeof name);
    return strdup(name);
}

/* The "attribution" member (fuzz/trial/finding_json.c): absent or null reads as not attributed;
 * anything else must be what the fuzzer writes, or the finding keeps one sentence saying what
 * is wrong (and counts as a defect, as a finding that was never attributed). Returns -1 only
 * when memory ran out. */
static int read_attribution(kvf__rattribution *a, const json_t *root, const char *path) {
    const json_t *j = json_object_get(root, "attribution");
    if (!j || json_is_null(j)) return 0;
    char why[640] = ""; /* room for the model parser's sentence */
    const json_t *kind = json_object_get(j, "kind");
    const json_t *within = json_object_get(j, "within"), *margin = json_object_get(j, "margin");
    const json_t *text = json_object_get(j, "text");
    int precision = 0;
    if (!json_is_object(j)) {
        snprintf(why, sizeof why, "attribution is %s, not an object or null", json_type_word(j));
    } else if (!json_is_string(kind)) {
        snprintf(why, sizeof why, "attribution.kind is %s, not \"precision\" or \"defect\"",
                 kind ? json_type_word(kind) : "missing");
    } else if (!(precision = strcmp(json_string_value(kind), "precision") == 0) &&
               strcmp(json_string_value(kind), "defect") != 0) {
        snprintf(why, sizeof why, "attribution.kind is \"%.40s\", not \"precision\" or \"defect\"",
                 json_string_value(kind));
    } else if (text && !json_is_string(text)) {
        snprintf(why, sizeof why, "attribution.text is %s, not a string", json_type_word(text));
    } else if (!(a->declared = attr_model(j, "declared", why, sizeof why))) {
        /* why says it */
    } else if (precision) {
        double mv;
        if ((a->within = attr_model(j, "within", why, sizeof why)) == NULL) {
            /* why says it */
        } else if (kvf_json_to_double(margin, &mv) || !(mv >= 0 && mv <= 1)) {
            /* A model that accepts the finding leaves every element within its allowance. */
            if (!margin || !json_is_number(margin))
                snprintf(why, sizeof why, "attribution.margin is %s, not a number in [0, 1]",
                         margin ? json_type_word(margin) : "missing");
            else
                snprintf(why, sizeof why,
                         "attribution.margin is %g, not in [0, 1] (a model that accepts the "
                         "finding leaves every margin at most 1)",
                         json_number_value(margin));
        } else {
            a->margin = mv;
        }
    } else if ((within && !json_is_null(within)) || (margin && !json_is_null(margin))) {
        snprintf(why, sizeof why,
                 "a defect's attribution.within and attribution.margin must be null (no model "
                 "accepts a defect)");
    }
    if (why[0]) {
        free(a->declared);
        free(a->within);
        memset(a, 0, sizeof *a);
        a->kind = KVF__ATTR_MALFORMED;
        size_t n = strlen(path) + strlen(why) + 40;
        if (!(a->error = malloc(n))) return -1;
        snprintf(a->error, n, "malformed finding report %s: %s", path, why);
        return 0;
    }
    a->kind = precision ? KVF__ATTR_PRECISION : KVF__ATTR_DEFECT;
    if (text && !(a->text = strdup(json_string_value(text)))) return -1;
    return 0;
}

/* What the finding's .json says, read leniently: the campaign owns that format, the report
 * only shows kernel, rule and a one-line detail when the file has them as strings, and its
 * attribution (which decides whether the finding is a defect) when it has one. Returns -1
 * only when memory ran out. */
static int read_finding_json(kvf__rfinding *f, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || st.st_size > (1 << 20)) return 0;
    char *data;
    size_t size;
    if (kvf_read_file(path, &data, &size)) return 0;
    int rc = 0;
    /* Numbers as reals: the report carries 64-bit seeds past int64, which jansson's integers
     * refuse, and only the strings matter here. */
    json_t *root = json_loadb(data, size, JSON_DECODE_INT_AS_REAL, NULL);
    if (root) {
        f->kernel = json_member_string(root, "kernel");
        f->rule = json_member_string(root, "rule");
        static const char *const detail_keys[] = {"detail", "message", "summary", "reason"};
        for (size_t i = 0; i < 4 && !f->detail; i++)
            f->detail = json_member_string(root, detail_keys[i]);
        rc = read_attribution(&f->attr, root, path);
        json_decref(root);
    }
    free(data);
    return rc;
}

static int cmp_finding(const void *a, const void *b) {
    const kvf__rfinding *x = a, *y = b;
    int c = strcmp(x->cls, y->cls);
    return c ? c : strcmp(x->stem, y->stem);
}

static int add_finding_dir(kvf__rmodel *m, const char *dir) {
    for (size_t i = 0; i < m->nfinding_dirs; i++)
        if (strcmp(m->finding_dirs[i], dir) == 0) return 0;
    char **nd = realloc(m->finding_dirs, (m->nfinding_dirs + 1) * sizeof *nd);
    if (!nd) return -1;
    m->finding_dirs = nd;
    char **nn = realloc(m->finding_dir_notes, (m->nfinding_dirs + 1) * sizeof *nn);
    if (!nn) return -1;
    m->finding_dir_notes = nn;
    if (!(m->finding_dirs[m->nfinding_dirs] = strdup(dir))) return -1;
    m->finding_dir_notes[m->nfinding_dirs++] = NULL;
    return 0;
}

/* Lists <class>-<hash>.kvfz / .json pairs. Returns -1 only on OOM; an unreadable directory is
 * noted (and reported as an error by the caller when the user named it). */
static int scan_findings(kvf__rmodel *m, size_t di) {
    const char *dir = m->finding_dirs[di];
    DIR *d = opendir(dir);
    if (!d) {
        char note[PATH_MAX + 64];
        snprintf(note, sizeof note, "cannot open findings directory %s: %s", dir, strerror(errno));
        m->finding_dir_notes[di] = strdup(note);
        return m->finding_dir_notes[di] ? 0 : -1;
    }
    struct dirent *e;
    size_t first = m->nfindings;
    while ((e = readdir(d))) {
        const char *name = e->d_name;
        size_t n = strlen(name);
        int is_kvfz = n > 5 && strcmp(name + n - 5, ".kvfz") == 0;
        int is_json = n > 5 && strcmp(name + n - 5, ".json") == 0;
        if (name[0] == '.' || strstr(name, ".tmp.") || (!is_kvfz && !is_json)) continue;
        size_t stem_len = n - 5;
        const char *dash = NULL;
        for (size_t i = 0; i < stem_len; i++)
            if (name[i] == '-') dash = name + i;
        if (!dash || dash == name || !is_hex_word(dash + 1, (size_t)(name + stem_len - dash - 1)))
            continue;
        kvf__rfinding *f = NULL;
        for (size_t i = first; i < m->nfindings; i++)
            if (strlen(m->findings[i].stem) == stem_len &&
                strncmp(m->findings[i].stem, name, stem_len) == 0)
                f = &m->findings[i];
        if (!f) {
            kvf__rfinding *nf = realloc(m->findings, (m->nfindings + 1) * sizeof *nf);
            if (!nf) goto oom;
            m->findings = nf;
            f = &m->findings[m->nfindings++];
            memset(f, 0, sizeof *f);
            f->dir = m->finding_dirs[di];
            f->stem = strndup(name, stem_len);
            f->cls = strndup(name, (size_t)(dash - name));
            f->hash = strndup(dash + 1, (size_t)(name + stem_len - dash - 1));
            if (!f->stem || !f->cls || !f->hash) goto oom;
        }
        size_t plen = strlen(dir) + n + 2;
        char *full = malloc(plen);
        if (!full) goto oom;
        snprintf(full, plen, "%s/%s", dir, name);
        if (is_kvfz) {
            f->kvfz = kvf__report_link(m, full);
        } else {
            f->json = kvf__report_link(m, full);
            if (read_finding_json(f, full)) {
                free(full);
                goto oom;
            }
        }
        free(full);
    }
    closedir(d);
    if (m->nfindings > first)
        qsort(m->findings + first, m->nfindings - first, sizeof *m->findings, cmp_finding);
    return 0;
oom:
    closedir(d);
    return -1;
}

int kvf__report_model_build(kvf__rmodel *m, const kvf_report_input *inputs, size_t n,
                            const kvf_report_opts *opts, kvf_error *err) {
    memset(m, 0, sizeof *m);
    m->inputs = inputs;
    m->ninputs = n;
    m->title = opts->title ? opts->title : "kvfuzz error report";
    m->out_dir = opts->out_dir;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(m->generated, sizeof m->generated, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char path[PATH_MAX];

    if (opts->out_dir) {
        if (strlen(opts->out_dir) + 40 >= sizeof path)
            return kvf_error_set(err, KVF_EIO, "the output path %s is too long", opts->out_dir);
        if (mkdir(opts->out_dir, 0755) != 0 && errno != EEXIST)
            return kvf_error_set(err, KVF_EIO, "cannot create %s: %s", opts->out_dir,
                                 strerror(errno));
        char abs[PATH_MAX];
        if (!realpath(opts->out_dir, abs))
            return kvf_error_set(err, KVF_EIO, "cannot open %s: %s", opts->out_dir,
                                 strerror(errno));
        struct stat st;
        if (stat(abs, &st) != 0 || !S_ISDIR(st.st_mode))
            return kvf_error_set(err, KVF_EIO, "%s is not a directory", opts->out_dir);
        if (!(m->out_abs = strdup(abs))) return kvf_error_set(err, KVF_ENOMEM, "out of memory");
    }
    if (!(m->labels = calloc(n, sizeof *m->labels))) goto oom;
    for (size_t i = 0; i < n; i++)
        if (!(m->labels[i] = input_label(&inputs[i], i))) goto oom;
    /* Two inputs with the same label (stats.json from two directories) get numbered. */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(m->labels[i], m->labels[j]) == 0) {
                char buf[256];
                snprintf(buf, sizeof buf, "%s#%zu", m->labels[i], i + 1);
                char *d = strdup(buf);
                if (!d) goto oom;
                free(m->labels[i]);
                m->labels[i] = d;
                break;
            }
    if (build_series(m)) goto oom;

    if (opts->findings_dir) {
        if (add_finding_dir(m, opts->findings_dir)) goto oom;
    } else {
        for (size_t i = 0; i < n; i++)
            if (inputs[i].stats->findings_dir && add_finding_dir(m, inputs[i].stats->findings_dir))
                goto oom;
    }
    for (size_t i = 0; i < m->nfinding_dirs; i++)
        if (scan_findings(m, i)) goto oom;
    if (opts->findings_dir && m->finding_dir_notes[0])
        return kvf_error_set(err, KVF_EIO, "%s", m->finding_dir_notes[0]);
    /* The groups over the directories that could be read (the others are noted above). */
    const char **readable = calloc(m->nfinding_dirs ? m->nfinding_dirs : 1, sizeof *readable);
    if (!readable) goto oom;
    for (size_t i = 0; i < m->nfinding_dirs; i++)
        readable[i] = m->finding_dir_notes[i] ? NULL : m->finding_dirs[i];
    int grc = kvf_groups_scan(&m->groups, readable, m->nfinding_dirs, err);
    free(readable);
    return grc;
oom:
    return kvf_error_set(err, KVF_ENOMEM, "out of memory building the report");
}
