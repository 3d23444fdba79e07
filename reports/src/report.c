/* `kvfuzz report`'s engine: gathers the inputs into series, finds the findings, and writes
 * summary.json, errors.csv, the embedded cases and (through html.c) index.html, plus the
 * terminal summary. Every file is written atomically so a report being regenerated next to a
 * browser never shows half a page. */
#include "report_internal.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "json.h"

/* Distinguishable on white and for the common colour-vision deficiencies, in order of use. */
static const char *const PALETTE[] = {"#3b6fb6", "#d1495b", "#2e933c", "#e09f3e",
                                      "#7b4f9d", "#00798c", "#8c564b", "#5c5c5c"};
#define NPALETTE (sizeof PALETTE / sizeof PALETTE[0])

/* ------------------------------------------------------------------------------------------ */
/* Small helpers                                                                               */
/* ------------------------------------------------------------------------------------------ */

void html_escape(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&#39;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

void fmt_num(char *buf, size_t size, double x) {
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

/* "strict" (the default rule) first, the others by name. */
static int cmp_rule(const void *a, const void *b) {
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int xs = strcmp(x, "strict") == 0, ys = strcmp(y, "strict") == 0;
    if (xs != ys) return ys - xs;
    return strcmp(x, y);
}

static int cmp_group_rule(const void *a, const void *b) {
    const kvf_group *x = *(const kvf_group *const *)a, *y = *(const kvf_group *const *)b;
    return cmp_rule(&x->rule, &y->rule);
}

const kvf_group *rseries_group(const rseries *s, const char *rule) {
    for (size_t i = 0; i < s->ngroups; i++)
        if (strcmp(s->groups[i]->rule, rule) == 0) return s->groups[i];
    return NULL;
}

/* A path from directory `from` to `to`, both absolute and normalised (realpath). */
void report_verdict(const rmodel *m, const rseries *s, const kvf_group *g,
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
    /* Each finding file is one signature (docs/fuzzing.md, Findings). */
    out->signatures = m->nfinding_dirs ? 0 : -1;
    for (size_t i = 0; i < m->nfindings; i++)
        if (m->findings[i].kernel && m->findings[i].rule &&
            strcmp(m->findings[i].kernel, s->kernel) == 0 &&
            strcmp(m->findings[i].rule, g->rule) == 0)
            out->signatures++;
}

int64_t rseries_run_errors(const rseries *s) {
    const kvf_kernel_runs *r = s->runs;
    return r ? r->errors[KVF_FINDING_KERNEL_ERROR] + r->errors[KVF_FINDING_CRASH] +
                   r->errors[KVF_FINDING_HANG] + r->errors[KVF_FINDING_NONDETERMINISM]
             : 0;
}

int report_series_fails(const rmodel *m, const rseries *s) {
    (void)m;
    if (rseries_run_errors(s)) return 1;
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

char *report_link(const rmodel *m, const char *file) {
    char abs[PATH_MAX];
    if (!file || !realpath(file, abs)) return NULL;
    if (!m->out_abs) return strdup(abs);
    return relative_path(m->out_abs, abs);
}

char *report_case_link(const rmodel *m, const kvf_case_info *ci) {
    if (!ci) return NULL;
    if (ci->hex && ci->has_hash) {
        char buf[64];
        snprintf(buf, sizeof buf, "cases/%016" PRIx64 ".kvfz", ci->hash);
        return strdup(buf);
    }
    return report_link(m, ci->path);
}

/* ------------------------------------------------------------------------------------------ */
/* The model                                                                                   */
/* ------------------------------------------------------------------------------------------ */

static void model_free(rmodel *m) {
    for (size_t i = 0; i < m->ninputs && m->labels; i++)
        free(m->labels[i]);
    free(m->labels);
    for (size_t i = 0; i < m->nseries; i++)
        free(m->series[i].groups);
    free(m->series);
    free(m->rules);
    for (size_t i = 0; i < m->nfindings; i++) {
        rfinding *f = &m->findings[i];
        free(f->stem);
        free(f->cls);
        free(f->hash);
        free(f->kvfz);
        free(f->json);
        free(f->kernel);
        free(f->rule);
        free(f->detail);
    }
    free(m->findings);
    for (size_t i = 0; i < m->nfinding_dirs; i++) {
        free(m->finding_dirs[i]);
        free(m->finding_dir_notes[i]);
    }
    free(m->finding_dirs);
    free(m->finding_dir_notes);
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
static const kvf_group *pick_primary(const kvf_group *const *groups, size_t n) {
    const kvf_group *best = NULL;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(groups[i]->rule, "strict") == 0) return groups[i];
        if (!best || groups[i]->out[0].elements > best->out[0].elements) best = groups[i];
    }
    return best;
}

static int build_series(rmodel *m) {
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
            rseries *s = &m->series[m->nseries++];
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
        rseries *s = &m->series[i];
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

static char *json_member_string(const kvf_json *root, const char *key) {
    const kvf_json *v = kvf_json_get(root, key);
    return v && v->type == KVF_JSON_STRING ? strdup(v->string) : NULL;
}

/* What the finding's .json says, read leniently: the campaign owns that format, the report
 * only shows kernel, rule and a one-line detail when the file has them as strings. */
static void read_finding_json(rfinding *f, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || st.st_size > (1 << 20)) return;
    char *data;
    size_t size;
    if (kvf_read_file(path, &data, &size)) return;
    kvf_json root;
    char msg[160];
    if (kvf_json_parse(&root, data, size, msg, sizeof msg) == 0) {
        f->kernel = json_member_string(&root, "kernel");
        f->rule = json_member_string(&root, "rule");
        static const char *const detail_keys[] = {"detail", "message", "summary", "reason"};
        for (size_t i = 0; i < 4 && !f->detail; i++)
            f->detail = json_member_string(&root, detail_keys[i]);
        kvf_json_free(&root);
    }
    free(data);
}

static int cmp_finding(const void *a, const void *b) {
    const rfinding *x = a, *y = b;
    int c = strcmp(x->cls, y->cls);
    return c ? c : strcmp(x->stem, y->stem);
}

static int add_finding_dir(rmodel *m, const char *dir) {
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
static int scan_findings(rmodel *m, size_t di) {
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
        rfinding *f = NULL;
        for (size_t i = first; i < m->nfindings; i++)
            if (strlen(m->findings[i].stem) == stem_len &&
                strncmp(m->findings[i].stem, name, stem_len) == 0)
                f = &m->findings[i];
        if (!f) {
            rfinding *nf = realloc(m->findings, (m->nfindings + 1) * sizeof *nf);
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
            f->kvfz = report_link(m, full);
        } else {
            f->json = report_link(m, full);
            read_finding_json(f, full);
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

/* ------------------------------------------------------------------------------------------ */
/* summary.json                                                                                */
/* ------------------------------------------------------------------------------------------ */

static void write_figures(FILE *f, const kvf_outstats *o) {
    fprintf(f, "{\"elements\": %" PRId64 ", \"violations\": %" PRId64 ", \"nonfinite\": %" PRId64,
            o->elements, o->violations, o->nonfinite);
    fputs(", \"max_abs\": ", f);
    kvf_json_write_double(f, o->max_abs);
    fputs(", \"max_rel\": ", f);
    kvf_json_write_double(f, o->max_rel);
    fprintf(f, ", \"max_ulps\": %" PRId64, o->max_ulps);
    static const double qs[3] = {0.5, 0.99, 0.999};
    static const char *const qn[3] = {"ulps_p50", "ulps_p99", "ulps_p999"};
    for (int i = 0; i < 3; i++) {
        int64_t q = kvf_outstats_ulp_quantile(o, qs[i]);
        fprintf(f, ", \"%s\": ", qn[i]);
        if (q < 0)
            fputs("null", f);
        else
            fprintf(f, "%" PRId64, q);
    }
    double mb = kvf_outstats_mean_bits(o);
    fputs(", \"mean_bits\": ", f);
    if (isnan(mb))
        fputs("null", f);
    else
        fprintf(f, "%.4f", mb);
    fputs(", \"max_margin\": ", f);
    kvf_json_write_double(f, o->max_margin);
    fputs(", \"max_excess_margin\": ", f);
    kvf_json_write_double(f, o->max_excess);
    fputc('}', f);
}

static int fill_summary(FILE *f, void *ctx) {
    const rmodel *m = ctx;
    fprintf(f, "{\"format\": \"%s\", \"version\": %d, \"generated\": \"%s\", \"title\": ",
            KVF_REPORT_SUMMARY_FORMAT, KVF_REPORT_SUMMARY_VERSION, m->generated);
    kvf_json_write_string(f, m->title);
    fputs(",\n \"inputs\": [", f);
    for (size_t i = 0; i < m->ninputs; i++) {
        const kvf_stats *st = m->inputs[i].stats;
        fputs(i ? ",\n   {\"path\": " : "{\"path\": ", f);
        kvf_json_write_string(f, m->inputs[i].path);
        fputs(", \"label\": ", f);
        kvf_json_write_string(f, m->labels[i]);
        fprintf(f,
                ", \"incomplete\": %s, \"require_overflow\": %s, \"runs_merged\": %zu, "
                "\"findings_dir\": ",
                st->incomplete ? "true" : "false", st->require_overflow ? "true" : "false",
                st->nsources);
        kvf_json_write_string(f, st->findings_dir);
        fputc('}', f);
    }
    fputs("],\n \"rules\": [", f);
    for (size_t r = 0; r < m->nrules; r++) {
        if (r) fputs(", ", f);
        kvf_json_write_string(f, m->rules[r]);
    }
    int fails = 0;
    for (size_t i = 0; i < m->nseries; i++)
        fails |= report_series_fails(m, &m->series[i]);
    fprintf(f, "],\n \"verdict\": \"%s\",\n \"series\": [", fails ? "fail" : "pass");
    for (size_t i = 0; i < m->nseries; i++) {
        const rseries *s = &m->series[i];
        fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", f);
        kvf_json_write_string(f, s->name);
        fprintf(f, ", \"input\": %zu, \"kernel\": ", s->input);
        kvf_json_write_string(f, s->kernel);
        fputs(", \"primary_rule\": ", f);
        kvf_json_write_string(f, s->primary ? s->primary->rule : NULL);
        fprintf(f, ", \"verdict\": \"%s\"", report_series_fails(m, s) ? "fail" : "pass");
        const kvf_kernel_runs *kr = s->runs;
        fprintf(f,
                ", \"runs\": {\"ran\": %" PRId64 ", \"unsupported\": %" PRId64
                ", \"kernel-error\": %" PRId64 ", \"crash\": %" PRId64 ", \"hang\": %" PRId64
                ", \"nondeterminism\": %" PRId64 "},\n   \"rules\": {",
                kr ? kr->ran : 0, kr ? kr->unsupported : 0,
                kr ? kr->errors[KVF_FINDING_KERNEL_ERROR] : 0,
                kr ? kr->errors[KVF_FINDING_CRASH] : 0, kr ? kr->errors[KVF_FINDING_HANG] : 0,
                kr ? kr->errors[KVF_FINDING_NONDETERMINISM] : 0);
        for (size_t g = 0; g < s->ngroups; g++) {
            const kvf_group *gr = s->groups[g];
            fputs(g ? ",\n     " : "\n     ", f);
            kvf_json_write_string(f, gr->rule);
            kvf_verdict_counts vc;
            report_verdict(m, s, gr, &vc);
            char sentence[512];
            kvf_verdict_counts_sentence(&vc, sentence, sizeof sentence);
            fprintf(f,
                    ": {\"cases\": %" PRId64 ", \"passed\": %" PRId64 ", \"failed\": %" PRId64
                    ", \"out_of_model\": %" PRId64 ", \"rule_rejects_rounded\": %" PRId64,
                    gr->cases, gr->passed, kvf_verdict_counts_failed(&vc), gr->out_of_model,
                    gr->rejects_rounded);
            fputs(", \"signatures\": ", f);
            if (vc.signatures < 0)
                fputs("null", f);
            else
                fprintf(f, "%ld", vc.signatures);
            fputs(", \"verdict\": ", f);
            kvf_json_write_string(f, sentence);
            fputs(", \"findings\": {", f);
            for (int c = 1; c < KVF_FINDING_CLASS_COUNT; c++)
                fprintf(f, "%s\"%s\": %" PRId64, c > 1 ? ", " : "",
                        kvf_finding_class_name((kvf_finding_class)c), gr->findings[c]);
            fputs("},\n       \"o\": ", f);
            write_figures(f, &gr->out[0]);
            fputs(",\n       \"lse\": ", f);
            write_figures(f, &gr->out[1]);
            fputs(",\n       \"out_of_model_rows\": {\"o\": ", f);
            write_figures(f, &gr->oom[0]);
            fputs(", \"lse\": ", f);
            write_figures(f, &gr->oom[1]);
            fputs("}}", f);
        }
        fputs("}}", f);
    }
    fputs("],\n \"findings\": {\"dirs\": [", f);
    for (size_t i = 0; i < m->nfinding_dirs; i++) {
        if (i) fputs(", ", f);
        kvf_json_write_string(f, m->finding_dirs[i]);
    }
    fprintf(f, "], \"count\": %zu, \"by_class\": {", m->nfindings);
    size_t printed = 0;
    for (size_t i = 0; i < m->nfindings; i++) {
        if (i && strcmp(m->findings[i].cls, m->findings[i - 1].cls) == 0) continue;
        size_t n = 0;
        for (size_t j = 0; j < m->nfindings; j++)
            n += strcmp(m->findings[j].cls, m->findings[i].cls) == 0;
        fputs(printed++ ? ", " : "", f);
        kvf_json_write_string(f, m->findings[i].cls);
        fprintf(f, ": %zu", n);
    }
    fputs("}, \"files\": [", f);
    for (size_t i = 0; i < m->nfindings; i++) {
        const rfinding *fd = &m->findings[i];
        fputs(i ? ",\n   {\"name\": " : "\n   {\"name\": ", f);
        kvf_json_write_string(f, fd->stem);
        fputs(", \"class\": ", f);
        kvf_json_write_string(f, fd->cls);
        fputs(", \"hash\": ", f);
        kvf_json_write_string(f, fd->hash);
        fputs(", \"kvfz\": ", f);
        kvf_json_write_string(f, fd->kvfz);
        fputs(", \"json\": ", f);
        kvf_json_write_string(f, fd->json);
        fputs(", \"kernel\": ", f);
        kvf_json_write_string(f, fd->kernel);
        fputs(", \"rule\": ", f);
        kvf_json_write_string(f, fd->rule);
        fputc('}', f);
    }
    fputs("]},\n \"files\": {\"summary\": \"summary.json\", \"errors_csv\": \"errors.csv\", "
          "\"html\": \"index.html\", \"cases_dir\": \"cases\"}}\n",
          f);
    return ferror(f) ? -1 : 0;
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
    const rmodel *m = ctx;
    fputs("series,kernel,rule,output,rank,case_hash,case_path,case_link,b,h,d,seq_len,page_size,"
          "kernel_value,rounded_value,exact_value,kernel_bits,rounded_bits,abs_error,rel_error,"
          "ulps,allowed,margin,excess_margin,fails,out_of_model\n",
          f);
    for (size_t i = 0; i < m->nseries; i++) {
        const rseries *s = &m->series[i];
        for (size_t g = 0; g < s->ngroups; g++)
            for (int k = 0; k < 4; k++) {
                int out = k % 2;
                const kvf_outstats *o = k < 2 ? &s->groups[g]->out[out] : &s->groups[g]->oom[out];
                for (int w = 0; w < o->worst_count; w++) {
                    const kvf_worst *wr = &o->worst[w];
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
                    char *link = report_case_link(m, wr->ci);
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
    for (size_t i = 0; hex[i] && hex[i + 1]; i += 2) {
        int hi = hex[i] <= '9' ? hex[i] - '0' : hex[i] - 'a' + 10;
        int lo = hex[i + 1] <= '9' ? hex[i + 1] - '0' : hex[i + 1] - 'a' + 10;
        fputc(hi << 4 | lo, f);
    }
    return ferror(f) ? -1 : 0;
}

static int write_cases(const rmodel *m, const char *dir, kvf_error *err) {
    int made_dir = 0;
    for (size_t i = 0; i < m->nseries; i++)
        for (size_t g = 0; g < m->series[i].ngroups; g++)
            for (int out = 0; out < 2; out++) {
                const kvf_outstats *o = &m->series[i].groups[g]->out[out];
                for (int w = 0; w < o->worst_count; w++) {
                    const kvf_case_info *ci = o->worst[w].ci;
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
static void print_terminal(FILE *t, const rmodel *m) {
    int fails = 0;
    for (size_t i = 0; i < m->nseries; i++)
        fails |= report_series_fails(m, &m->series[i]);
    fprintf(t, "verdict: %s\n", fails ? "FAIL" : "PASS");
    for (size_t i = 0; i < m->nseries; i++) {
        const rseries *s = &m->series[i];
        for (size_t g = 0; g < s->ngroups; g++) {
            kvf_verdict_counts vc;
            report_verdict(m, s, s->groups[g], &vc);
            vc.kernel = s->name;
            kvf_verdict_counts_print(t, &vc, "  ");
        }
        if (rseries_run_errors(s)) {
            const kvf_kernel_runs *r = s->runs;
            fprintf(t,
                    "  %s  FAILS: run errors: %" PRId64 " kernel-error, %" PRId64 " crash, %" PRId64
                    " hang, %" PRId64 " nondeterminism\n",
                    s->name, r->errors[KVF_FINDING_KERNEL_ERROR], r->errors[KVF_FINDING_CRASH],
                    r->errors[KVF_FINDING_HANG], r->errors[KVF_FINDING_NONDETERMINISM]);
        }
    }
    for (size_t i = 0; i < m->ninputs; i++)
        if (m->inputs[i].stats->require_overflow)
            fprintf(t,
                    "  %s: --require-overflow: failures out of the input model count as "
                    "kernel failures\n",
                    m->labels[i]);
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
        const rseries *s = &m->series[i];
        for (size_t g = 0; g < s->ngroups; g++) {
            const kvf_group *gr = s->groups[g];
            const kvf_outstats *o = &gr->out[0], *l = &gr->out[1];
            kvf_verdict_counts vc;
            report_verdict(m, s, gr, &vc);
            char abs[24], margin[24], excess[24], bits[16], p99[24];
            fmt_num(abs, sizeof abs, o->max_abs);
            fmt_num(margin, sizeof margin, fmax(o->max_margin, l->max_margin));
            fmt_num(excess, sizeof excess, fmax(o->max_excess, l->max_excess));
            double mb = kvf_outstats_mean_bits(o);
            snprintf(bits, sizeof bits, isnan(mb) ? "-" : "%.2f", mb);
            int64_t q = kvf_outstats_ulp_quantile(o, 0.99);
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
        fprintf(t, "%s in", m->nfindings ? ")" : "");
        for (size_t i = 0; i < m->nfinding_dirs; i++)
            fprintf(t, " %s", m->finding_dirs[i]);
        fputc('\n', t);
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
    return report_write_html(f, ctx);
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
    rmodel m;
    memset(&m, 0, sizeof m);
    m.inputs = inputs;
    m.ninputs = n;
    m.title = opts->title ? opts->title : "kvfuzz error report";
    m.out_dir = opts->out_dir;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(m.generated, sizeof m.generated, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int rc = 0;
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
        if (!(m.out_abs = strdup(abs))) return kvf_error_set(err, KVF_ENOMEM, "out of memory");
    }
    if (!(m.labels = calloc(n, sizeof *m.labels))) goto oom;
    for (size_t i = 0; i < n; i++)
        if (!(m.labels[i] = input_label(&inputs[i], i))) goto oom;
    /* Two inputs with the same label (stats.json from two directories) get numbered. */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(m.labels[i], m.labels[j]) == 0) {
                char buf[256];
                snprintf(buf, sizeof buf, "%s#%zu", m.labels[i], i + 1);
                char *d = strdup(buf);
                if (!d) goto oom;
                free(m.labels[i]);
                m.labels[i] = d;
                break;
            }
    if (build_series(&m)) goto oom;

    if (opts->findings_dir) {
        if (add_finding_dir(&m, opts->findings_dir)) goto oom;
    } else {
        for (size_t i = 0; i < n; i++)
            if (inputs[i].stats->findings_dir && add_finding_dir(&m, inputs[i].stats->findings_dir))
                goto oom;
    }
    for (size_t i = 0; i < m.nfinding_dirs; i++)
        if (scan_findings(&m, i)) goto oom;
    if (opts->findings_dir && m.finding_dir_notes[0]) {
        rc = kvf_error_set(err, KVF_EIO, "%s", m.finding_dir_notes[0]);
        goto done;
    }

    long html_bytes = 0;
    if (opts->out_dir) {
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
    if (rc) goto done;
    if (opts->terminal) print_terminal(opts->terminal, &m);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (result) {
        result->series = m.nseries;
        result->findings = m.nfindings;
        result->html_bytes = html_bytes;
        result->seconds =
            (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    }
done:
    model_free(&m);
    return rc;
oom:
    model_free(&m);
    return kvf_error_set(err, KVF_ENOMEM, "out of memory building the report");
}
