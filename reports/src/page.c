/* index.html: one self-contained page. Every chart is inline SVG drawn in C (charts.c,
 * heatmaps.c, on the primitives of svg.c), so the page needs no script to be read and nothing
 * from the network. One small inline script checks the page itself (each chart's mark count
 * against its data-marks attribute, and any script error) and writes the verdict into
 * #kvf-status, which the browser test reads.
 *
 * This file lays the page out: head, style and scripts, the verdict banner, the inputs, then
 * the tables (tables.c) and charts in order. */
#include <inttypes.h>
#include <string.h>

#include "charts.h"
#include "escape.h"
#include "report_internal.h"
#include "tables.h"

/* ------------------------------------------------------------------------------------------ */
/* The verdict and the inputs                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* A run spread over several GPUs: the rate of each, and why one retired. */
static void source_devices(FILE *f, const kvf__source *src) {
    for (size_t k = 0; k < src->ndevices; k++) {
        const kvf_stats_device *d = &src->devices[k];
        fprintf(f, "%s device %d: %" PRId64 " cases (%.1f/s)", k ? ";" : " (", d->ordinal, d->cases,
                d->seconds > 0 ? (double)d->cases / d->seconds : 0.0);
        if (d->crashes || d->hangs || d->kernel_errors)
            fprintf(f, ", %" PRId64 " crash(es), %" PRId64 " hang(s), %" PRId64 " kernel error(s)",
                    d->crashes, d->hangs, d->kernel_errors);
        if (d->retired) {
            fprintf(f, ", <span class=\"bad\">retired after %.1f s</span>", d->seconds);
            if (d->why[0]) {
                fputs(": ", f);
                kvf__html_escape(f, d->why);
            }
        }
        if (k + 1 == src->ndevices) fputs(")", f);
    }
}

/* Each input file with the runs merged into it, where and when they ran. */
static void input_list(FILE *f, const kvf__rmodel *m) {
    fputs("<ul class=\"note\">", f);
    for (size_t i = 0; i < m->ninputs; i++) {
        const kvf_stats *st = m->inputs[i].stats;
        fputs("<li><b>", f);
        kvf__html_escape(f, m->labels[i]);
        fputs("</b>: <code>", f);
        kvf__html_escape(f, m->inputs[i].path ? m->inputs[i].path : "(in memory)");
        fprintf(f, "</code>, %zu run(s) merged", st->nsources);
        for (size_t s = 0; s < st->nsources && s < 3; s++) {
            fputs(s ? "; " : ": ", f);
            kvf__html_escape(f, st->sources[s].command ? st->sources[s].command : "?");
            fputs(" on ", f);
            kvf__html_escape(f, st->sources[s].host ? st->sources[s].host : "?");
            fputs(", last written ", f);
            kvf__html_escape(f, st->sources[s].written ? st->sources[s].written : "?");
            source_devices(f, &st->sources[s]);
        }
        if (st->nsources > 3) fputs("; ...", f);
        if (st->incomplete) fputs(" <span class=\"bad\">incomplete: memory ran out</span>", f);
        fputs("</li>\n", f);
    }
    fputs("</ul>\n", f);
}

/* The answer first: one banner for the whole report and one line per series and rule. */
static void verdict_banner(FILE *f, const kvf__rmodel *m) {
    char detail[1024];
    kvf__failure failure = kvf__report_overall(m, detail, sizeof detail);
    static const char *const failure_names[] = {"none", "defect", "precision"};
    int fails = failure != KVF__FAILURE_NONE;
    /* A kernel whose every failure lies within a looser precision model still fails what it
     * declared (the same FAIL and data-verdict); data-failure and the line under the heading
     * say that no defect was found. */
    fprintf(f,
            "<section id=\"kvf-verdict\" class=\"verdict %s\" data-verdict=\"%s\" "
            "data-failure=\"%s\"><h2>Verdict: %s</h2>\n",
            fails ? "vfail" : "vpass", fails ? "fail" : "pass", failure_names[failure],
            fails ? "FAIL" : "PASS");
    if (detail[0]) {
        fputs("<p class=\"vdetail\">", f);
        kvf__html_escape(f, detail);
        fputs("</p>\n", f);
    }
    fputs("<ul>\n", f);
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__rseries *s = &m->series[i];
        for (size_t g = 0; g < s->ngroups; g++) {
            kvf_verdict_counts vc;
            kvf__report_verdict(m, s, s->groups[g], &vc);
            char sentence[1024], notes[1024];
            kvf__report_sentence(m, s, s->groups[g], sentence, sizeof sentence);
            kvf_verdict_counts_notes(&vc, "", notes, sizeof notes);
            fprintf(f, "<li data-series=\"%zu\" data-rule-verdict=\"%s\"><b>", i,
                    kvf_verdict_counts_failed(&vc) ? "fail" : "pass");
            kvf__html_escape(f, s->name);
            fputs("</b> under <b>", f);
            kvf__html_escape(f, s->groups[g]->rule);
            fputs("</b>: ", f);
            kvf__html_escape(f, sentence);
            /* One line per benign failure kind (the notes end each line with '\n'). */
            for (char *line = notes, *nl; *line; line = nl + 1) {
                nl = strchr(line, '\n');
                if (!nl) break;
                *nl = '\0';
                fputs("<br><span class=\"dim\">", f);
                kvf__html_escape(f, line);
                fputs("</span>", f);
            }
            fputs("</li>\n", f);
        }
        if (kvf__rseries_run_errors(s)) {
            fputs("<li data-rule-verdict=\"fail\"><b>", f);
            kvf__html_escape(f, s->name);
            fprintf(f,
                    "</b>: FAILS: %" PRId64 " run error(s) (kernel errors, crashes, hangs, "
                    "nondeterminism)</li>\n",
                    kvf__rseries_run_errors(s));
        }
    }
    fputs("</ul></section>\n", f);
}

/* The model strict and fa judged each series under (the kernel's declared model, or
 * --precision), which the rule names above carry when it is not f32. */
static void precision_note(FILE *f, const kvf__rmodel *m) {
    char shared[256];
    int models = kvf__report_precision_shared(m, shared, sizeof shared);
    if (!models) return;
    fputs("<p class=\"note\" id=\"kvf-precision\">Precision model judged by strict and fa "
          "(declared by the kernel, or given with --precision; a rule name carries it when it is "
          "not f32, as in strict:bf16-p):",
          f);
    if (models == 1) {
        fputs(" <b>", f);
        kvf__html_escape(f, shared);
        fputs("</b> for every series", f);
    } else {
        const char *sep = " ";
        for (size_t i = 0; i < m->nseries; i++) {
            char p[256];
            kvf__rseries_precision(&m->series[i], p, sizeof p);
            if (!p[0]) continue;
            fputs(sep, f);
            kvf__html_escape(f, m->series[i].name);
            fputs(" <b>", f);
            kvf__html_escape(f, p);
            fputs("</b>", f);
            sep = "; ";
        }
    }
    fputs(". Findings that fail it but lie within a looser model are attributed to that model "
          "(precision below what was declared), the others are defects.</p>\n",
          f);
}

/* ------------------------------------------------------------------------------------------ */
/* The page                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static const char CSS[] =
    "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;"
    "max-width:1000px;color:#222;padding:0 12px}\n"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px "
    "solid #ddd}h3{font-size:15px;margin:18px 0 2px}\n"
    ".note{color:#555;margin:2px 0 8px;font-size:13px}.dim{color:#888;font-size:12px}\n"
    "table{border-collapse:collapse;font-size:12.5px;margin:6px 0}"
    ".tw{overflow-x:auto;max-width:100%}.tw table{font-size:11.5px}"
    "td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}"
    "th{background:#f4f4f4}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".bad{color:#b00020;font-weight:600}\n"
    ".verdict{border:2px solid;border-radius:6px;padding:4px 14px;margin:12px 0}"
    ".verdict h2{border:0;margin:6px 0}.vpass{border-color:#2e933c;background:#eef8ef}"
    ".vfail{border-color:#b00020;background:#fdeef0}.vdetail{margin:2px 0 6px;font-weight:600}"
    ".prec{color:#8a5a00}\n"
    ".sw{display:inline-block;width:10px;height:10px;margin-right:6px;border-radius:2px}\n"
    "svg.chart{display:block;max-width:100%;height:auto}"
    "svg text{font:11px system-ui,sans-serif;fill:#333}svg text.axis{font-size:12px}"
    "svg text.vert{writing-mode:vertical-rl;transform-box:fill-box;transform-origin:center;"
    "transform:rotate(180deg)}svg text.nodata{font-size:14px;fill:#888}\n"
    "svg .plot{fill:#f6f6f6}svg .grid{stroke:#e2e2e2}svg .limit{stroke:#b00020;"
    "stroke-dasharray:5 3;stroke-width:1.5}svg .ref{stroke:#333;stroke-dasharray:4 3}"
    "svg .cdf{fill:none;stroke-width:2}svg rect.mark:hover{stroke:#000}\n"
    "#kvf-status{display:none}#kvf-errors{color:#b00020}\n";

/* Records script errors into the page itself, where a headless browser's --dump-dom sees them;
 * defined first so that it catches errors in everything after it. */
static const char JS_ERRORS[] =
    "<script>\n"
    "(function () {\n"
    "  function record(text) {\n"
    "    var li = document.createElement('li');\n"
    "    li.textContent = text;\n"
    "    (document.getElementById('kvf-errors') || document.body).appendChild(li);\n"
    "  }\n"
    "  window.onerror = function (msg, src, line) { record('error: ' + msg + ' at line ' + line); "
    "};\n"
    "  window.addEventListener('unhandledrejection', function (e) {\n"
    "    record('unhandled rejection: ' + e.reason);\n"
    "  });\n"
    "  var consoleError = console.error;\n"
    "  console.error = function () {\n"
    "    record('console.error: ' + Array.prototype.join.call(arguments, ' '));\n"
    "    consoleError.apply(console, arguments);\n"
    "  };\n"
    "})();\n"
    "</script>\n";

/* The self-check: every chart is present, has the marks its data-marks attribute promises and
 * takes up space on the page; no script error was recorded. */
static const char JS_CHECK[] =
    "<script>\n"
    "(function () {\n"
    "  var status = document.getElementById('kvf-status');\n"
    "  var charts = document.querySelectorAll('svg.chart');\n"
    "  var want = +status.getAttribute('data-charts'), bad = [], marks = 0;\n"
    "  charts.forEach(function (svg) {\n"
    "    var expected = +svg.getAttribute('data-marks');\n"
    "    var got = svg.querySelectorAll('.mark').length;\n"
    "    var box = svg.getBoundingClientRect();\n"
    "    marks += got;\n"
    "    if (got !== expected || !(box.width > 0 && box.height > 0))\n"
    "      bad.push(svg.id + ' ' + got + '/' + expected + ' marks ' +\n"
    "               Math.round(box.width) + 'x' + Math.round(box.height));\n"
    "  });\n"
    "  if (charts.length !== want) bad.push(charts.length + ' charts, expected ' + want);\n"
    "  var verdict = document.getElementById('kvf-verdict');\n"
    "  var vbox = verdict ? verdict.getBoundingClientRect() : null;\n"
    "  if (!vbox || !(vbox.height > 0) || vbox.top > charts[0].getBoundingClientRect().top)\n"
    "    bad.push('the verdict banner is missing, hidden or below the charts');\n"
    "  var errors = document.getElementById('kvf-errors').children.length;\n"
    "  var ok = bad.length === 0 && errors === 0;\n"
    "  status.setAttribute('data-state', ok ? 'ok' : 'fail');\n"
    "  status.textContent = (ok ? 'OK' : 'FAIL') + ' charts=' + charts.length + ' marks=' +\n"
    "      marks + ' errors=' + errors + ' verdict=' +\n"
    "      (verdict ? verdict.getAttribute('data-verdict') : 'none') +\n"
    "      (bad.length ? ' bad: ' + bad.join('; ') : '');\n"
    "})();\n"
    "</script>\n";

/* The charts in page order; *charts counts them for the self-check. -1 if any failed. */
static int error_charts(FILE *f, const kvf__rmodel *m, int *charts) {
    int rc = 0, n = 0;
    fputs("<h2>Error distributions</h2>\n<p class=\"note\">Each series is drawn from its primary "
          "rule's statistics (the error itself does not depend on the rule); all series share "
          "the axes and colour scales. Hover a mark for its numbers.</p>\n",
          f);
    rc |= kvf__hist_chart(f, m, "ulp-hist", "o: ULP distance histogram",
                          "o elements by their distance in bf16 units in the last place from the "
                          "correctly rounded value (0 = correctly rounded), log counts. Bins are "
                          "octaves labelled by their lower end; NaN counts a NaN on one side only.",
                          "ULP distance from the correctly rounded value (bf16)", NULL, 0, 2, 1, 0);
    n++;
    rc |= kvf__density_chart(f, m);
    n++;
    rc |= kvf__cdf_chart(f, m);
    n++;
    for (size_t r = 0; r < m->nrules; r++) {
        char id[96], title[160];
        snprintf(id, sizeof id, "margin-%zu", r);
        snprintf(title, sizeof title, "Rule margin histogram: %s", m->rules[r]);
        rc |=
            kvf__hist_chart(f, m, id, title,
                            "o elements by the rule's margin: its error measure divided by its "
                            "allowance for that element. Elements right of the dashed line "
                            "(margin above 1) fail the rule; 0 means no error. Octave bins, log "
                            "counts; a first bin labelled \u2264 also holds every smaller margin.",
                            "margin (error / allowance)", m->rules[r], 0, 3, 0, 1);
        n++;
    }
    rc |= kvf__class_heatmap(
        f, m, 0, KVF_CLASS_HEAD, "heat-head", "o: error by q head",
        "Mean bits of error log2(ulps + 1) of o per query head (columns) for each "
        "series (rows); black cells hold only NaN/inf mismatches. A GQA mapping "
        "bug lights up whole groups of heads.",
        "q head");
    n++;
    rc |= kvf__slot_heatmap(f, m);
    n++;
    rc |= kvf__class_heatmap(f, m, 0, KVF_CLASS_DIM, "heat-dim", "o: error by head-dim index",
                             "Mean bits of error of o per head-dim index d.", "head-dim index d");
    n++;
    rc |=
        kvf__class_heatmap(f, m, 0, KVF_CLASS_SEQLEN, "heat-seqlen", "o: error by sequence length",
                           "Mean bits of error of o per sequence-length bucket [2^(k-1), 2^k) "
                           "(labelled by its lower end; 0 = empty sequences).",
                           "sequence length (tokens, bucket lower end)");
    n++;
    rc |= kvf__hist_chart(f, m, "lse-hist", "lse: ULP distance histogram",
                          "lse elements by their distance in f32 units in the last place from the "
                          "correctly rounded base-2 lse, log counts; NaN counts a NaN on one side "
                          "only.",
                          "ULP distance from the correctly rounded value (f32)", NULL, 1, 2, 1, 0);
    n++;
    *charts = n;
    return rc;
}

int kvf__report_write_html(FILE *f, const kvf__rmodel *m) {
    int charts = 0, rc = 0;
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
          f);
    kvf__html_escape(f, m->title);
    fprintf(f, "</title>\n<style>\n%s</style>\n%s</head><body>\n<h1>", CSS, JS_ERRORS);
    kvf__html_escape(f, m->title);
    fputs("</h1>\n", f);
    verdict_banner(f, m);
    fprintf(f, "<p class=\"note\">Generated %s from %zu stats file(s), %zu series:", m->generated,
            m->ninputs, m->nseries);
    for (size_t i = 0; i < m->nseries; i++) {
        fprintf(f, " <span class=\"sw\" style=\"background:%s\"></span>", m->series[i].color);
        kvf__html_escape(f, m->series[i].name);
    }
    fputs(".</p>\n", f);
    precision_note(f, m);
    input_list(f, m);
    kvf__groups_table(f, m);
    kvf__figures_table(f, m);
    kvf__out_of_model_panel(f, m);
    rc |= error_charts(f, m, &charts);
    kvf__worst_table(f, m);
    kvf__findings_table(f, m);
    fprintf(f,
            "<p id=\"kvf-status\" data-charts=\"%d\" data-state=\"pending\">page check did not "
            "run (scripts disabled?)</p>\n<ul id=\"kvf-errors\"></ul>\n%s</body></html>\n",
            charts, JS_CHECK);
    return rc || ferror(f) ? -1 : 0;
}
