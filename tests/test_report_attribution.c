/* Unit tests of the report's precision attribution of findings (reports/src/model.c reads each
 * finding's attribution; report.c and tables.c write it): findings whose attribution is a
 * precision model, a defect, absent, null or malformed, and the verdict sentences, summary.json
 * members and table cells that follow from it. */
#include <sys/stat.h>

#include "reports_fixtures.h"

/* ------------------------------------------------------------------------------------------ */
/* Precision attribution of findings                                                           */
/* ------------------------------------------------------------------------------------------ */

/* A finding report as the fuzzer writes it (fuzz/trial/finding_json.c), with `attribution` as
 * the raw JSON of that member, or NULL for a report from before attribution (no member). */
static void write_finding(const char *dir, const char *stem, const char *rule,
                          const char *attribution) {
    char p[700], text[1200];
    snprintf(p, sizeof p, "%s/%s.kvfz", dir, stem);
    write_text(p, "KVFZ");
    snprintf(p, sizeof p, "%s/%s.json", dir, stem);
    if (attribution)
        snprintf(text, sizeof text,
                 "{\"class\": \"o-tolerance\", \"kernel\": \"k\", \"rule\": \"%s\", "
                 "\"attribution\": %s, \"message\": \"\"}",
                 rule, attribution);
    else
        snprintf(text, sizeof text,
                 "{\"class\": \"o-tolerance\", \"kernel\": \"k\", \"rule\": \"%s\", "
                 "\"message\": \"\"}",
                 rule);
    write_text(p, text);
}

/* "precision" attributions of the fuzzer's shape. */
#define ATTR_PREC(declared, within, margin)                                                        \
    "{\"kind\": \"precision\", \"declared\": \"" declared "\", \"within\": \"" within              \
    "\", \"margin\": " margin ", \"text\": \"fails " declared "; within " within "\"}"
#define ATTR_DEFECT(declared)                                                                      \
    "{\"kind\": \"defect\", \"declared\": \"" declared                                             \
    "\", \"within\": null, \"margin\": null, \"text\": \"fails " declared                          \
    "; no precision model explains it\"}"

/* Statistics of kernel "k" judged (and failing) under one rule, recording `dir` as the run's
 * findings directory, as a campaign does. */
static kvf_stats *failing_stats(const char *dir, const char *rule_text) {
    judged_all();
    kvf_error err = {0};
    kvf_stats *s = NULL;
    kvf_stats_opts so;
    kvf_stats_opts_default(&so);
    so.worst_n = 4;
    so.command = "test_reports";
    so.findings_dir = dir;
    CHECK_OK(kvf_stats_create(&s, &so, &err), &err);
    kvf_rule rule;
    CHECK_OK(kvf_rule_parse(&rule, rule_text, &err), &err);
    kvf_stats_case ref = {J[0].path, J[0].kvfz, J[0].kvfz_size};
    CHECK_OK(kvf_stats_count_run(s, "k", KVF_STATS_RAN, &err), &err);
    kvf_verdict v;
    CHECK_OK(kvf_stats_judge(s, "k", &ref, &v, &rule, &J[0].c, &J[0].orc, J[0].o, J[0].lse, &err),
             &err);
    CHECK(!v.pass); /* J[0] is damaged */
    return s;
}

/* Writes the report of one stats input into out (and the terminal summary into *term) and
 * returns the page; summary.json is parsed into *summary. */
static char *attribution_report(kvf_stats *s, const char *out, char **term, json_t **summary) {
    kvf_error err = {0};
    size_t tsize = 0;
    *term = NULL;
    FILE *tf = open_memstream(term, &tsize);
    kvf_report_input in = {s, "stats.json", NULL};
    kvf_report_opts ro = {out, NULL, NULL, tf};
    CHECK_OK(kvf_report_write(&in, 1, &ro, NULL, &err), &err);
    fclose(tf);
    char p[700], *text = NULL, msg[200];
    size_t size;
    snprintf(p, sizeof p, "%s/summary.json", out);
    CHECK(kvf_read_file(p, &text, &size) == 0);
    *summary = text ? kvf_json_parse_text(text, size, msg, sizeof msg) : NULL;
    CHECK(*summary != NULL);
    free(text);
    text = NULL;
    snprintf(p, sizeof p, "%s/index.html", out);
    CHECK(kvf_read_file(p, &text, &size) == 0);
    return text;
}

static void check_json_str(const json_t *root, const char *path, const char *want) {
    const json_t *v = jpath(root, path);
    if (!json_is_string(v) || strcmp(json_string_value(v), want) != 0)
        CHECK_FAIL_AT("summary.json %s is not \"%s\"", path, want);
}

static void check_json_int(const json_t *root, const char *path, json_int_t want) {
    const json_t *v = jpath(root, path);
    if (!json_is_integer(v) || json_integer_value(v) != want)
        CHECK_FAIL_AT("summary.json %s is not %lld", path, (long long)want);
}

/* Every failing signature within a looser model than the declared one: the report still
 * fails (the kernel fails what it declared) but says plainly that no defect was found, names
 * the models, and the declared model appears where the rule names show it. */
static void test_report_attribution_precision(void) {
    char dir[600], out[600];
    snprintf(dir, sizeof dir, "%s/attr-precision", tmp_dir());
    snprintf(out, sizeof out, "%s/attr-precision-report", tmp_dir());
    mkdir(dir, 0755);
    write_finding(dir, "o-tolerance-00000000000000a1", "strict:bf16-p",
                  ATTR_PREC("bf16-p", "bf16-p+bf16-partials", "0.475"));
    write_finding(dir, "o-tolerance-00000000000000a2", "strict:bf16-p",
                  ATTR_PREC("bf16-p", "bf16-partials+bf16-p", "0.9996"));
    write_finding(dir, "o-tolerance-00000000000000a3", "strict:bf16-p",
                  ATTR_PREC("bf16-p", "bf16-p-rsum", "0.25"));
    kvf_stats *s = failing_stats(dir, "strict:bf16-p");
    char *term;
    json_t *sum;
    char *html = attribution_report(s, out, &term, &sum);
    if (!html || !term || !sum) goto done;

    /* Terminal: the verdict line, then the rule's sentence (models most frequent first; the
     * second finding's model is read in canonical order). */
    CHECK_STR_CONTAINS(term, "verdict: FAIL: no defect found, but the precision is below what "
                             "was declared (bf16-p): all 3 failing signatures lie within a looser "
                             "precision model (bf16-p+bf16-partials: 2, bf16-p-rsum: 1)\n");
    CHECK_STR_CONTAINS(term, "  k  strict:bf16-p  FAILS: 1 finding in 3 signatures, all within a "
                             "looser precision model than declared (bf16-p+bf16-partials: 2, "
                             "bf16-p-rsum: 1): no defect found under this rule, but the kernel's "
                             "precision is below the declared bf16-p\n");
    CHECK_STR_CONTAINS(term, "precision model judged by strict and fa (declared): bf16-p\n");
    CHECK_STR_CONTAINS(term, "findings: 3 (3 o-tolerance; 0 defects, 3 within a looser precision "
                             "model) in ");

    /* summary.json: the verdict word is unchanged, failure says which kind. */
    check_json_str(sum, "verdict", "fail");
    check_json_str(sum, "failure", "precision");
    CHECK_STR_CONTAINS(json_string_value(jpath(sum, "verdict_detail")), "no defect found");
    check_json_str(sum, "series.0.precision", "bf16-p");
    check_json_int(sum, "series.0.rules.strict:bf16-p.attribution.precision", 3);
    check_json_int(sum, "series.0.rules.strict:bf16-p.attribution.defect", 0);
    check_json_int(sum, "series.0.rules.strict:bf16-p.attribution.within.bf16-p+bf16-partials", 2);
    check_json_str(sum, "series.0.rules.strict:bf16-p.attribution.declared", "bf16-p");
    check_json_str(sum, "findings.files.0.attribution.kind", "precision");
    check_json_str(sum, "findings.files.1.attribution.within", "bf16-p+bf16-partials");
    check_json_str(sum, "findings.files.0.attribution.declared", "bf16-p");
    CHECK(json_is_number(jpath(sum, "findings.files.0.attribution.margin")));
    CHECK(json_is_null(jpath(sum, "findings.files.0.attribution_error")));
    check_json_int(sum, "findings.by_attribution.precision", 3);

    /* The page: the banner, the declared model beside the rule names, the column. */
    CHECK_STR_CONTAINS(html, "data-verdict=\"fail\" data-failure=\"precision\"><h2>Verdict: FAIL");
    CHECK_STR_CONTAINS(html, "<p class=\"vdetail\">no defect found, but the precision is below");
    CHECK_STR_CONTAINS(html, "id=\"kvf-precision\"");
    CHECK_STR_CONTAINS(html, "<b>bf16-p</b> for every series");
    CHECK_STR_CONTAINS(html, "<th>rule</th><th>attribution</th><th>detail</th>");
    CHECK_STR_CONTAINS(html, "data-attribution=\"precision\" title=\"fails bf16-p; within "
                             "bf16-p+bf16-partials\">precision: within bf16-p+bf16-partials "
                             "(margin 0.475)</td>");
    /* A margin below 1 is cut, never rounded up to the limit (kvf_margin_text). */
    CHECK_STR_CONTAINS(html, "precision: within bf16-p+bf16-partials (margin 0.999)</td>");
    CHECK_STR_CONTAINS(html, "precision: within bf16-p-rsum (margin 0.250)</td>");
    CHECK_INT_EQ(count_substr(html, "data-attribution=\"precision\""), 3);
done:
    free(html);
    free(term);
    json_decref(sum);
    kvf_stats_free(s);
}

/* Defects beside precision: an attributed defect, a precision finding, a report from before
 * attribution, a null attribution and a malformed one. Only the precision one leaves the
 * defects; the malformed one is named in one sentence with its file. */
static void test_report_attribution_mixed(void) {
    char dir[600], out[600], p[1000];
    snprintf(dir, sizeof dir, "%s/attr-mixed", tmp_dir());
    snprintf(out, sizeof out, "%s/attr-mixed-report", tmp_dir());
    mkdir(dir, 0755);
    write_finding(dir, "o-tolerance-00000000000000b1", "strict", ATTR_DEFECT("f32"));
    write_finding(dir, "o-tolerance-00000000000000b2", "strict",
                  ATTR_PREC("f32", "bf16-partials", "0.475"));
    write_finding(dir, "o-tolerance-00000000000000b3", "strict", NULL);
    write_finding(dir, "o-tolerance-00000000000000b4", "strict", "null");
    write_finding(dir, "o-tolerance-00000000000000b5", "strict",
                  "{\"kind\": \"bogus\", \"declared\": \"f32\"}");
    kvf_stats *s = failing_stats(dir, "strict");
    char *term;
    json_t *sum;
    char *html = attribution_report(s, out, &term, &sum);
    if (!html || !term || !sum) goto done;

    CHECK_STR_CONTAINS(term, "verdict: FAIL: 4 defects (no precision model explains 1; 3 not "
                             "attributed); 1 signature within a looser precision model than "
                             "declared (bf16-partials: 1)\n");
    CHECK_STR_CONTAINS(term, "  k  strict  FAILS: 1 finding in 5 signatures: 4 defects (no "
                             "precision model explains 1; 3 not attributed); 1 signature within a "
                             "looser precision model than declared (bf16-partials: 1)\n");
    CHECK_STR_CONTAINS(term, "precision model judged by strict and fa (declared): f32\n");
    CHECK_STR_CONTAINS(term, "findings: 5 (5 o-tolerance; 4 defects, 1 within a looser precision "
                             "model) in ");
    /* The malformed member: one sentence naming the file, and the report is still written. */
    snprintf(p, sizeof p,
             "warning: malformed finding report %s/o-tolerance-00000000000000b5.json: "
             "attribution.kind is \"bogus\", not \"precision\" or \"defect\"; the finding "
             "counts as not attributed (a defect)\n",
             dir);
    CHECK_STR_CONTAINS(term, p);

    check_json_str(sum, "verdict", "fail");
    check_json_str(sum, "failure", "defect");
    check_json_int(sum, "series.0.rules.strict.attribution.signatures", 5);
    check_json_int(sum, "series.0.rules.strict.attribution.defect", 1);
    check_json_int(sum, "series.0.rules.strict.attribution.not_attributed", 3);
    check_json_int(sum, "series.0.rules.strict.attribution.precision", 1);
    check_json_str(sum, "findings.files.0.attribution.kind", "defect");
    CHECK(json_is_null(jpath(sum, "findings.files.0.attribution.within")));
    check_json_str(sum, "findings.files.1.attribution.kind", "precision");
    CHECK(json_is_null(jpath(sum, "findings.files.2.attribution")));
    CHECK(json_is_null(jpath(sum, "findings.files.3.attribution")));
    CHECK(json_is_null(jpath(sum, "findings.files.4.attribution")));
    CHECK_STR_CONTAINS(json_string_value(jpath(sum, "findings.files.4.attribution_error")),
                       "o-tolerance-00000000000000b5.json: attribution.kind");
    check_json_int(sum, "findings.by_attribution.defect", 1);
    check_json_int(sum, "findings.by_attribution.not_attributed", 3);

    CHECK_STR_CONTAINS(html, "data-verdict=\"fail\" data-failure=\"defect\"");
    CHECK_STR_CONTAINS(html, "<p class=\"vdetail\">4 defects (no precision model explains 1; 3 "
                             "not attributed); 1 signature within");
    CHECK_STR_CONTAINS(html, "data-attribution=\"defect\" title=\"fails f32; no precision model "
                             "explains it\">defect</td>");
    CHECK_STR_CONTAINS(html, ">precision: within bf16-partials (margin 0.475)</td>");
    CHECK_INT_EQ(count_substr(html, ">defect (not attributed)</td>"), 2);
    CHECK_STR_CONTAINS(html, "data-attribution=\"malformed\" title=\"malformed finding report ");
    CHECK_STR_CONTAINS(html, ">defect (attribution unreadable)</td>");
    CHECK_STR_CONTAINS(html, "<p class=\"note bad attr-error\">malformed finding report ");
done:
    free(html);
    free(term);
    json_decref(sum);
    kvf_stats_free(s);
}

/* Each way the member can be malformed gives one sentence naming the file and the problem;
 * the report is written all the same (exit codes are unchanged: findings are the campaign's). */
static void test_report_attribution_malformed(void) {
    static const struct {
        const char *member, *needle;
    } cases[] = {
        {"\"precision\"", "attribution is a string, not an object or null"},
        {"{\"declared\": \"f32\"}", "attribution.kind is missing"},
        {"{\"kind\": \"precision\", \"within\": \"bf16-p\", \"margin\": 0.5}",
         "attribution.declared is missing, not a precision model name"},
        {"{\"kind\": \"defect\", \"declared\": \"bf17-p\"}", "attribution.declared \"bf17-p\": "},
        {"{\"kind\": \"precision\", \"declared\": \"f32\", \"within\": null, \"margin\": 0.5}",
         "attribution.within is null, not a precision model name"},
        {"{\"kind\": \"precision\", \"declared\": \"f32\", \"within\": \"ftz\"}",
         "attribution.margin is missing, not a number in [0, 1]"},
        {"{\"kind\": \"precision\", \"declared\": \"f32\", \"within\": \"ftz\", \"margin\": 1.5}",
         "attribution.margin is 1.5, not in [0, 1]"},
        {"{\"kind\": \"precision\", \"declared\": \"f32\", \"within\": \"ftz\", \"margin\": "
         "\"NaN\"}",
         "attribution.margin is a string, not a number in [0, 1]"},
        {"{\"kind\": \"defect\", \"declared\": \"f32\", \"within\": \"ftz\", \"margin\": null}",
         "a defect's attribution.within and attribution.margin must be null"},
        {"{\"kind\": \"defect\", \"declared\": \"f32\", \"text\": 3}",
         "attribution.text is a number, not a string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[600], stem[64], want[900];
        snprintf(dir, sizeof dir, "%s/attr-bad-%zu", tmp_dir(), i);
        mkdir(dir, 0755);
        snprintf(stem, sizeof stem, "o-tolerance-%016zx", 0xbad0 + i);
        write_finding(dir, stem, "strict", cases[i].member);
        kvf_stats *s = failing_stats(dir, "strict");
        kvf_error err = {0};
        char *term = NULL;
        size_t tsize = 0;
        FILE *tf = open_memstream(&term, &tsize);
        kvf_report_input in = {s, "stats.json", NULL};
        kvf_report_opts ro = {NULL, NULL, NULL, tf};
        CHECK_OK(kvf_report_write(&in, 1, &ro, NULL, &err), &err);
        fclose(tf);
        snprintf(want, sizeof want, "warning: malformed finding report %s/%s.json: %s", dir, stem,
                 cases[i].needle);
        CHECK_STR_CONTAINS(term, want);
        /* One line, and the finding is a defect, not attributed. */
        const char *line = term ? strstr(term, "warning: malformed") : NULL;
        CHECK(line && strchr(line, '\n') && !strstr(strchr(line, '\n'), "warning:"));
        CHECK_STR_CONTAINS(term, "verdict: FAIL\n");
        CHECK_STR_CONTAINS(term, "FAILS: 1 finding in 1 signature\n");
        free(term);
        kvf_stats_free(s);
    }
}

static const check_test tests[] = {
    {"report_attribution_precision", test_report_attribution_precision},
    {"report_attribution_mixed", test_report_attribution_mixed},
    {"report_attribution_malformed", test_report_attribution_malformed},
    {NULL, NULL},
};

CHECK_MAIN(tests)
