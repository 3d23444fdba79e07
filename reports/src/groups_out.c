/* The finding groups in the report (report_internal.h): summary.json's "groups" array, the
 * page's first table and the terminal's list, all from the model's kvf_groups (groups.c). Each
 * group is shown with what reproduces it: its smallest case and the replay and minimize
 * commands, so that a reader can go from a row to a run without reading the findings. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "escape.h"
#include "kvfuzz/json_io.h"
#include "report_internal.h"

/* A shell word: kept as is when it holds only safe characters, else in single quotes. */
static void shell_word(char *buf, size_t size, const char *s) {
    int safe = *s != '\0';
    for (const char *p = s; *p && safe; p++)
        safe = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
               strchr("-_./:=+,@%", *p) != NULL;
    if (safe) {
        snprintf(buf, size, "%s", s);
        return;
    }
    size_t n = 0;
    if (n + 1 < size) buf[n++] = '\'';
    for (const char *p = s; *p && n + 5 < size; p++) {
        if (*p == '\'') {
            memcpy(buf + n, "'\\''", 4);
            n += 4;
        } else {
            buf[n++] = *p;
        }
    }
    if (n + 1 < size) buf[n++] = '\'';
    buf[n < size ? n : size - 1] = '\0';
}

/* `kvfuzz replay` of the group's smallest case, and `kvfuzz minimize` of its first finding's
 * case into <finding>.min.kvfz beside it: the file the campaign writes (docs/fuzzing.md). */
static void group_commands(const kvf_groups *gs, const kvf_group *g, char *replay, size_t rsize,
                           char *minimize, size_t msize) {
    const kvf_group_finding *f = &gs->findings[g->smallest];
    const char *cs = kvf_group_case(gs, g);
    char k[1200] = "", r[256] = "", c[1200] = "", src[1200] = "", out[1200] = "";
    if (g->kernel) shell_word(k, sizeof k, g->kernel);
    if (g->rule) shell_word(r, sizeof r, g->rule);
    if (cs) shell_word(c, sizeof c, cs);
    if (f->kvfz) shell_word(src, sizeof src, f->kvfz);
    char *minp = f->kvfz ? malloc(strlen(f->kvfz) + 8) : NULL;
    if (minp) {
        snprintf(minp, strlen(f->kvfz) + 8, "%.*s.min.kvfz", (int)(strlen(f->kvfz) - 5), f->kvfz);
        shell_word(out, sizeof out, minp);
        free(minp);
    }
    replay[0] = minimize[0] = '\0';
    /* A minimized case has no report beside it to name its relation: the command does. */
    const kvf_group_finding *first = &gs->findings[g->first];
    char rel[600] = "", rname[256] = "", rseed[256] = "";
    if (first->relation && first->relation_seed) {
        shell_word(rname, sizeof rname, first->relation);
        shell_word(rseed, sizeof rseed, first->relation_seed);
        snprintf(rel, sizeof rel, " --relations %s --relation-seed %s", rname, rseed);
    }
    if (cs && g->kernel)
        snprintf(replay, rsize, "kvfuzz replay --kernel %s%s%s%s %s", k, g->rule ? " --rule " : "",
                 r, rel, c);
    if (f->kvfz && g->kernel)
        snprintf(minimize, msize, "kvfuzz minimize %s -o %s --kernel %s%s%s", src, out, k,
                 g->rule ? " --rule " : "", r);
}

static void utc_text(time_t t, char *buf, size_t size) {
    struct tm tm;
    if (t <= 0 || !gmtime_r(&t, &tm) || !strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, size, "?");
}

/* "lse b0 h3 (L 0): kernel -5e+04, rounded -inf, exact -inf" */
static void element_text(const kvf_group_element *e, char *buf, size_t size) {
    char a[32], r[32], x[32];
    kvf__fmt_num(a, sizeof a, e->kernel);
    kvf__fmt_num(r, sizeof r, e->rounded);
    kvf__fmt_num(x, sizeof x, e->exact);
    if (e->is_lse)
        snprintf(buf, size,
                 "lse b%" PRId64 " h%" PRId64 " (L %" PRId64 "): kernel %s, rounded %s, exact %s",
                 e->b, e->h, e->seq_len, a, r, x);
    else
        snprintf(buf, size,
                 "o b%" PRId64 " h%" PRId64 " d%" PRId64 " (L %" PRId64
                 "): kernel %s, rounded %s, exact %s",
                 e->b, e->h, e->d, e->seq_len, a, r, x);
}

/* The group's classes: "nonfinite 2, o-tolerance 1". */
static void classes_text(const kvf_groups *gs, size_t gi, char *buf, size_t size) {
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < gs->nfindings; i++) {
        const kvf_group_finding *f = &gs->findings[i];
        if (f->group != gi) continue;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = gs->findings[j].group == gi && strcmp(gs->findings[j].cls, f->cls) == 0;
        if (seen) continue;
        size_t c = 0;
        for (size_t j = i; j < gs->nfindings; j++)
            c += gs->findings[j].group == gi && strcmp(gs->findings[j].cls, f->cls) == 0;
        int k = snprintf(buf + n, n < size ? size - n : 0, "%s%s %zu", n ? ", " : "", f->cls, c);
        if (k > 0) n = n + (size_t)k < size ? n + (size_t)k : size;
    }
}

static json_t *element_json(const kvf_group_element *e) {
    return json_pack("{s:s, s:I, s:I, s:o, s:I, s:o, s:o, s:o, s:o, s:o}", "output",
                     e->is_lse ? "lse" : "o", "b", (json_int_t)e->b, "h", (json_int_t)e->h, "d",
                     e->is_lse ? json_null() : json_integer(e->d), "seq_len",
                     (json_int_t)e->seq_len, "kernel", kvf_json_number(e->kernel), "rounded",
                     kvf_json_number(e->rounded), "exact", kvf_json_number(e->exact), "margin",
                     kvf_json_number(e->margin), "excess_margin",
                     kvf_json_number(e->excess_margin));
}

static json_t *group_json(const kvf__rmodel *m, size_t gi) {
    const kvf_groups *gs = &m->groups;
    const kvf_group *g = &gs->groups[gi];
    const kvf_group_finding *first = &gs->findings[g->first];
    char seen[32], verdict[256], fib[64], shape[256], replay[4096], minimize[4096];
    utc_text(g->first_seen, seen, sizeof seen);
    kvf_group_verdict_text(gs, g, verdict, sizeof verdict);
    kvf_group_fib_text(g, fib, sizeof fib);
    const char *cs = kvf_group_case(gs, g);
    kvf_group_case_shape(cs, shape, sizeof shape);
    group_commands(gs, g, replay, sizeof replay, minimize, sizeof minimize);
    char *link = cs ? kvf__report_link(m, cs) : NULL;
    json_t *j = json_object(), *members = json_array(), *classes = json_object();
    int bad = !j || !members || !classes;
    for (size_t i = 0; !bad && i < gs->nfindings; i++) {
        const kvf_group_finding *f = &gs->findings[i];
        if (f->group != gi) continue;
        json_t *prev = json_object_get(classes, f->cls);
        bad = kvf_json_push(members, json_string(f->stem)) ||
              kvf_json_set(classes, f->cls, json_integer(prev ? json_integer_value(prev) + 1 : 1));
    }
    const kvf_group_finding *sm = &gs->findings[g->smallest];
    bad =
        bad || kvf_json_set(j, "id", json_string(g->id)) ||
        kvf_json_set(j, "key", json_string(g->key)) ||
        kvf_json_set(j, "kernel", json_string(g->kernel_short)) ||
        kvf_json_set(j, "kernel_path",
                     kvf_json_string_or_null(g->kernel_path[0] ? g->kernel_path : NULL)) ||
        kvf_json_set(j, "kernel_full", kvf_json_string_or_null(g->kernel)) ||
        kvf_json_set(j, "findings", json_integer((json_int_t)g->count)) ||
        kvf_json_set(j, "cases", g->cases > 0 ? json_integer((json_int_t)g->cases) : json_null()) ||
        kvf_json_set(j, "classes", json_incref(classes) ? classes : NULL) ||
        kvf_json_set(j, "members", json_incref(members) ? members : NULL) ||
        kvf_json_set(j, "first_seen", json_string(seen)) ||
        kvf_json_set(j, "worst",
                     g->worst == (size_t)-1 ? json_null()
                                            : element_json(&gs->findings[g->worst].element)) ||
        kvf_json_set(j, "precision", json_boolean(g->precision)) ||
        kvf_json_set(j, "attribution", json_string(verdict)) ||
        kvf_json_set(j, "attribution_text", kvf_json_string_or_null(first->attr_text)) ||
        kvf_json_set(j, "fib", json_string(fib)) ||
        kvf_json_set(j, "fib_catches", json_integer((json_int_t)g->fib_yes)) ||
        kvf_json_set(j, "fib_misses", json_integer((json_int_t)g->fib_no)) ||
        kvf_json_set(j, "case", kvf_json_string_or_null(link)) ||
        kvf_json_set(j, "case_path", kvf_json_string_or_null(cs)) ||
        kvf_json_set(j, "case_minimized",
                     json_boolean(cs && sm->min && strcmp(cs, sm->min) == 0)) ||
        kvf_json_set(j, "case_bytes", json_integer(sm->case_bytes)) ||
        kvf_json_set(j, "shape", json_string(shape)) ||
        kvf_json_set(j, "replay", kvf_json_string_or_null(replay[0] ? replay : NULL)) ||
        kvf_json_set(j, "minimize", kvf_json_string_or_null(minimize[0] ? minimize : NULL));
    json_decref(members);
    json_decref(classes);
    free(link);
    if (bad) {
        json_decref(j);
        return NULL;
    }
    return j;
}

json_t *kvf__groups_json(const kvf__rmodel *m) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < m->groups.ngroups; i++)
        if (kvf_json_push(a, group_json(m, i))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static void html_code(FILE *f, const char *s) {
    fputs("<code>", f);
    kvf__html_escape(f, s);
    fputs("</code>", f);
}

static void group_row(FILE *f, const kvf__rmodel *m, size_t gi) {
    const kvf_groups *gs = &m->groups;
    const kvf_group *g = &gs->groups[gi];
    const kvf_group_finding *first = &gs->findings[g->first], *sm = &gs->findings[g->smallest];
    char seen[32], verdict[256], fib[64], shape[256], classes[512], elem[320];
    char replay[4096], minimize[4096];
    utc_text(g->first_seen, seen, sizeof seen);
    kvf_group_verdict_text(gs, g, verdict, sizeof verdict);
    kvf_group_fib_text(g, fib, sizeof fib);
    const char *cs = kvf_group_case(gs, g);
    kvf_group_case_shape(cs, shape, sizeof shape);
    classes_text(gs, gi, classes, sizeof classes);
    group_commands(gs, g, replay, sizeof replay, minimize, sizeof minimize);
    fprintf(f, "<tr data-group=\"%s\"><td><code>%s</code></td><td>", g->id, g->id);
    kvf__html_escape(f, g->kernel_short);
    if (g->kernel_path[0]) {
        fputs("<br><span class=\"dim\">", f);
        kvf__html_escape(f, g->kernel_path);
        fputs("</span>", f);
    }
    fprintf(f, "</td><td class=\"n\">%zu</td><td>", g->count);
    kvf__html_escape(f, classes);
    fprintf(f, "</td><td>%s</td><td>", seen);
    if (g->worst != (size_t)-1) {
        element_text(&gs->findings[g->worst].element, elem, sizeof elem);
        kvf__html_escape(f, elem);
    } else {
        fputs("-", f);
    }
    fprintf(f, "</td><td class=\"attr%s\"", g->precision ? " prec" : "");
    if (first->attr_text) {
        fputs(" title=\"", f);
        kvf__html_escape(f, first->attr_text);
        fputs("\"", f);
    }
    fputs(">", f);
    kvf__html_escape(f, verdict);
    fputs("</td><td>", f);
    kvf__html_escape(f, fib);
    fputs("</td><td>", f);
    char *link = cs ? kvf__report_link(m, cs) : NULL;
    if (link) {
        fputs("<a href=\"", f);
        kvf__html_escape(f, link);
        fprintf(f, "\">%s</a> ", sm->min && strcmp(cs, sm->min) == 0 ? "minimized" : "case");
    }
    free(link);
    fprintf(f, "%ld bytes<br>", sm->case_bytes);
    kvf__html_escape(f, shape);
    fputs("</td><td>", f);
    if (replay[0]) html_code(f, replay);
    if (minimize[0]) {
        fputs("<br>", f);
        html_code(f, minimize);
    }
    fputs("</td></tr>\n", f);
}

void kvf__groups_table(FILE *f, const kvf__rmodel *m) {
    const kvf_groups *gs = &m->groups;
    fputs("<section id=\"sec-groups\"><h2>Defects (finding groups)</h2>\n", f);
    if (m->nfinding_dirs == 0) {
        fputs("<p class=\"note\">No findings directory, so no groups: the stats recorded none "
              "and <code>--findings DIR</code> was not given.</p></section>\n",
              f);
        return;
    }
    if (!gs->nfindings) {
        fputs("<p class=\"note\">No finding was saved: there is no defect to group.</p>"
              "</section>\n",
              f);
        return;
    }
    fprintf(f,
            "<p class=\"note\">%zu finding(s) in %zu group(s). A group is one defect: the "
            "findings of one kernel that fail the same output on the same kind of row (an "
            "empty sequence, a fully masked row, any other) with the same precision verdict, "
            "or whose minimized cases are the same bytes (docs/reports.md, \"Finding "
            "groups\"). The worst element is the in-model failing element the group is "
            "defined by; rows out of the input model never stand for a kernel's failure. The "
            "case is the group's smallest (its minimized case when one was saved).</p>\n",
            gs->nfindings, gs->ngroups);
    if (!gs->ngroups) {
        fputs("</section>\n", f);
        return;
    }
    fputs("<div class=\"tw\"><table id=\"kvf-groups\"><tr><th>group</th><th>kernel</th>"
          "<th>findings</th><th>classes</th><th>first seen (UTC)</th><th>worst in-model "
          "element</th><th>attribution</th><th>fib</th><th>smallest case</th>"
          "<th>reproduce</th></tr>\n",
          f);
    for (size_t i = 0; i < gs->ngroups; i++)
        group_row(f, m, i);
    fputs("</table></div></section>\n", f);
}

void kvf__groups_print(FILE *t, const kvf__rmodel *m) {
    if (m->nfinding_dirs > 0) kvf_groups_print(t, &m->groups);
}

void kvf_groups_print(FILE *t, const kvf_groups *gs) {
    if (gs->nfindings == 0) return; /* nothing to group: the verdict lines say so */
    fprintf(t, "groups: %zu distinct failure(s) from %zu finding(s)\n", gs->ngroups, gs->nfindings);
    for (size_t i = 0; i < gs->ngroups; i++) {
        const kvf_group *g = &gs->groups[i];
        const kvf_group_finding *sm = &gs->findings[g->smallest];
        char seen[32], verdict[256], fib[64], shape[256], classes[512], elem[320] = "-";
        char replay[4096], minimize[4096];
        utc_text(g->first_seen, seen, sizeof seen);
        kvf_group_verdict_text(gs, g, verdict, sizeof verdict);
        kvf_group_fib_text(g, fib, sizeof fib);
        const char *cs = kvf_group_case(gs, g);
        kvf_group_case_shape(cs, shape, sizeof shape);
        classes_text(gs, i, classes, sizeof classes);
        group_commands(gs, g, replay, sizeof replay, minimize, sizeof minimize);
        if (g->worst != (size_t)-1)
            element_text(&gs->findings[g->worst].element, elem, sizeof elem);
        char cases[48] = "";
        if (g->cases > 0) snprintf(cases, sizeof cases, ", %lld case(s)", (long long)g->cases);
        fprintf(t, "  group %s  %s  %zu finding(s) (%s)%s, first seen %s\n", g->id, g->kernel_short,
                g->count, classes, cases, seen);
        fprintf(t, "      %s; %s\n      worst: %s\n", verdict, fib, elem);
        fprintf(t, "      case: %s (%ld bytes%s): %s\n", cs ? cs : "-", sm->case_bytes,
                cs && sm->min && strcmp(cs, sm->min) == 0 ? ", minimized" : "", shape);
        if (replay[0]) fprintf(t, "      %s\n", replay);
        if (minimize[0]) fprintf(t, "      %s\n", minimize);
    }
}
