/* Unit tests of the report writer (reports/src/report.c, with the model of model.c and the page
 * of page.c): all three files, the documented summary.json keys, errors.csv, the page's charts
 * and links, the embedded cases, write errors, the terminal summary, and no page from empty
 * statistics. */
#include <sys/stat.h>

#include "reports_fixtures.h"

#define CHECK_KEY(root, path)                                                                      \
    do {                                                                                           \
        if (!jpath((root), (path))) CHECK_FAIL_AT("summary.json has no %s", (path));               \
    } while (0)

/* index.html: every chart has a data-marks count, the self-check, no network. */
static void check_index_html(const char *out) {
    char p[700], *text;
    size_t size;
    snprintf(p, sizeof p, "%s/index.html", out);
    CHECK(kvf_read_file(p, &text, &size) == 0);
    int charts = count_substr(text, "<svg class=\"chart\"");
    char expect[64];
    snprintf(expect, sizeof expect, "data-charts=\"%d\"", charts);
    CHECK(charts >= 10); /* ulp, density, cdf, 3 margins, 4 heatmaps, lse */
    CHECK_STR_CONTAINS(text, expect);
    CHECK_INT_EQ(count_substr(text, "data-marks=\""), charts);
    CHECK_STR_CONTAINS(text, "id=\"kvf-status\"");
    /* The verdict comes first: a crash is a failure whatever the element statistics say. */
    CHECK_STR_CONTAINS(text, "id=\"kvf-verdict\" class=\"verdict vfail\" data-verdict=\"fail\"");
    CHECK(strstr(text, "kvf-verdict") < strstr(text, "sec-figures"));
    CHECK_STR_CONTAINS(text, "id=\"sec-out-of-model\"");
    CHECK_STR_CONTAINS(text, "test &lt;report&gt;");
    CHECK_STR_CONTAINS(text, "o off by &lt;3&gt;");
    CHECK_STR_CONTAINS(text, "href=\"../findings/o-tolerance-0123abcd4567ef89.json\"");
    CHECK_STR_CONTAINS(text, "data-failure=\"defect\"");
    CHECK_STR_CONTAINS(text, "data-attribution=\"none\">defect (not attributed)</td>");
    CHECK_INT_EQ(count_substr(text, " src="), 0);
    CHECK_INT_EQ(count_substr(text, "href=\"http"), 0);
    CHECK_INT_EQ(count_substr(text, "url("), 0);
    free(text);
}

/* The report's refusals, and its terminal summary. */
static void check_errors_and_summary(kvf_report_input *in, const kvf_report_opts *ro,
                                     const char *out, const char *fdir) {
    char p[700];
    kvf_error err = {0};
    /* Errors: an output path that is a file, a findings directory that does not exist. */
    snprintf(p, sizeof p, "%s/o-tolerance-0123abcd4567ef89.kvfz", fdir);
    kvf_report_opts bad = {p, NULL, NULL, NULL};
    CHECK_INT_EQ(kvf_report_write(in, 2, &bad, NULL, &err), KVF_EIO);
    CHECK_STR_CONTAINS(err.msg, "o-tolerance-0123abcd4567ef89.kvfz");
    snprintf(p, sizeof p, "%s/no-findings-here", tmp_dir());
    kvf_report_opts bad2 = {out, p, NULL, NULL};
    CHECK_INT_EQ(kvf_report_write(in, 2, &bad2, NULL, &err), KVF_EIO);
    CHECK_STR_CONTAINS(err.msg, "no-findings-here");
    CHECK_INT_EQ(kvf_report_write(in, 0, ro, NULL, &err), KVF_EINVAL);

    /* Terminal summary: one line per series and rule, with the findings line. */
    char *term = NULL;
    size_t tsize = 0;
    FILE *tf = open_memstream(&term, &tsize);
    kvf_report_opts tro = {NULL, fdir, NULL, tf};
    CHECK_OK(kvf_report_write(in, 2, &tro, NULL, &err), &err);
    fclose(tf);
    CHECK_STR_CONTAINS(term, "verdict: FAIL\n");
    CHECK_STR_CONTAINS(term, "FAILS: run errors");
    CHECK(strstr(term, "verdict: FAIL") < strstr(term, "3 series from 2 stats file(s)"));
    CHECK_STR_CONTAINS(term, "3 series from 2 stats file(s)");
    CHECK_STR_CONTAINS(term, "second:cpu-ref");
    /* A finding from before attribution: the lines read as they did, and it is a defect. */
    CHECK_STR_CONTAINS(term, "findings: 1 (1 o-tolerance) in ");
    CHECK_STR_CONTAINS(term, "1 crash");
    free(term);
}

static void test_report_files(void) {
    judged_all();
    kvf_error err = {0};
    kvf_stats *s1 = stats_new(6), *s2 = stats_new(6);
    judged_observe(s1, "cpu-ref", &J[0]);
    judged_observe(s1, "cpu-ref", &J[1]);
    judged_observe(s2, "cpu-ref", &J[2]);
    judged_observe(s2, "mutant", &J[3]);
    CHECK_OK(kvf_stats_count_run(s2, "mutant", KVF_FINDING_CRASH, &err), &err);
    /* A findings directory with one finding (case + report) and a stray file. */
    char fdir[600], out[600], p[700];
    snprintf(fdir, sizeof fdir, "%s/findings", tmp_dir());
    snprintf(out, sizeof out, "%s/report", tmp_dir());
    mkdir(fdir, 0755);
    snprintf(p, sizeof p, "%s/o-tolerance-0123abcd4567ef89.kvfz", fdir);
    write_text(p, "KVFZ");
    snprintf(p, sizeof p, "%s/o-tolerance-0123abcd4567ef89.json", fdir);
    write_text(p, "{\"kernel\": \"mutant\", \"rule\": \"strict\", \"detail\": \"o off by <3>\"}");
    snprintf(p, sizeof p, "%s/stats.json", fdir);
    write_text(p, "{}");
    kvf_report_input in[2] = {{s1, "/somewhere/cpu.json", NULL}, {s2, NULL, "second"}};
    kvf_report_opts ro = {out, fdir, "test <report>", NULL};
    kvf_report_result res;
    CHECK_OK(kvf_report_write(in, 2, &ro, &res, &err), &err);
    CHECK_INT_EQ(res.series, 3); /* cpu:cpu-ref, second:cpu-ref, mutant */
    CHECK_INT_EQ(res.findings, 1);
    CHECK(res.html_bytes > 10000);

    /* summary.json: the documented keys. */
    snprintf(p, sizeof p, "%s/summary.json", out);
    char *text;
    size_t size;
    CHECK(kvf_read_file(p, &text, &size) == 0);
    char msg[200];
    json_t *root = kvf_json_parse_text(text, size, msg, sizeof msg);
    CHECK(root != NULL);
    free(text);
    if (!root) return;
    static const char *const keys[] = {"format",
                                       "version",
                                       "generated",
                                       "title",
                                       "inputs.0.path",
                                       "inputs.0.label",
                                       "inputs.1.label",
                                       "inputs.0.incomplete",
                                       "inputs.0.runs_merged",
                                       "inputs.0.findings_dir",
                                       "rules.0",
                                       "rules.2",
                                       "series.0.name",
                                       "series.0.input",
                                       "series.0.kernel",
                                       "series.0.primary_rule",
                                       "series.0.runs.ran",
                                       "series.0.runs.unsupported",
                                       "series.0.runs.crash",
                                       "series.0.rules.strict.cases",
                                       "series.0.rules.strict.passed",
                                       "series.0.rules.strict.failed",
                                       "series.0.rules.strict.findings.o-tolerance",
                                       "series.0.rules.fib.o.elements",
                                       "series.0.rules.strict.o.violations",
                                       "series.0.rules.strict.o.nonfinite",
                                       "series.0.rules.strict.o.max_abs",
                                       "series.0.rules.strict.o.max_rel",
                                       "series.0.rules.strict.o.max_ulps",
                                       "series.0.rules.strict.o.ulps_p50",
                                       "series.0.rules.strict.o.ulps_p99",
                                       "series.0.rules.strict.o.ulps_p999",
                                       "series.0.rules.strict.o.mean_bits",
                                       "series.0.rules.strict.o.max_margin",
                                       "series.0.rules.strict.o.max_excess_margin",
                                       "series.0.rules.strict.out_of_model",
                                       "series.0.rules.strict.rule_rejects_rounded",
                                       "series.0.rules.strict.verdict",
                                       "series.0.rules.strict.out_of_model_rows.o.elements",
                                       "series.0.verdict",
                                       "verdict",
                                       "inputs.0.require_overflow",
                                       "series.0.rules.ulp:2.lse.max_ulps",
                                       "findings.dirs.0",
                                       "findings.count",
                                       "findings.by_class.o-tolerance",
                                       "findings.files.0.name",
                                       "findings.files.0.class",
                                       "findings.files.0.hash",
                                       "findings.files.0.kvfz",
                                       "findings.files.0.json",
                                       "findings.files.0.kernel",
                                       "findings.files.0.rule",
                                       "files.summary",
                                       "files.errors_csv",
                                       "files.html",
                                       "files.cases_dir"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECK_KEY(root, keys[i]);
    const json_t *v = jpath(root, "format");
    CHECK(json_is_string(v) && strcmp(json_string_value(v), KVF_REPORT_SUMMARY_FORMAT) == 0);
    v = jpath(root, "rules.0");
    CHECK(json_is_string(v) && strcmp(json_string_value(v), "strict") == 0);
    v = jpath(root, "series.0.name");
    CHECK(json_is_string(v) && strcmp(json_string_value(v), "cpu:cpu-ref") == 0);
    v = jpath(root, "verdict");
    CHECK(json_is_string(v) && strcmp(json_string_value(v), "fail") == 0);
    v = jpath(root, "series.2.runs.crash");
    CHECK(json_is_integer(v) && json_integer_value(v) == 1);
    v = jpath(root, "findings.files.0.kvfz");
    CHECK(json_is_string(v) &&
          strcmp(json_string_value(v), "../findings/o-tolerance-0123abcd4567ef89.kvfz") == 0);
    /* The element counts match the statistics. */
    int64_t want = 0;
    v = jpath(root, "series.0.rules.strict.o.elements");
    want = kvf_case_o_elems(&J[0].c) + kvf_case_o_elems(&J[1].c);
    CHECK(json_is_integer(v) && json_integer_value(v) == want);
    json_decref(root);

    /* errors.csv: the header and one row per kept worst element. */
    snprintf(p, sizeof p, "%s/errors.csv", out);
    CHECK(kvf_read_file(p, &text, &size) == 0);
    static const char header[] =
        "series,kernel,rule,output,rank,case_hash,case_path,case_link,b,h,d,seq_len,page_size,"
        "kernel_value,rounded_value,exact_value,kernel_bits,rounded_bits,abs_error,rel_error,"
        "ulps,allowed,margin,excess_margin,fails,out_of_model\n";
    CHECK(strncmp(text, header, strlen(header)) == 0);
    CHECK(count_substr(text, "\n") > 3 * 3 * 2); /* 3 series x 3 rules x 2 outputs, >= 1 each */
    CHECK_STR_CONTAINS(text, "cases/");
    free(text);

    check_index_html(out);

    /* The embedded cases were written back byte for byte. */
    snprintf(p, sizeof p, "%s/cases/%016llx.kvfz", out,
             (unsigned long long)kvf_hash64(J[0].kvfz, J[0].kvfz_size));
    CHECK(kvf_read_file(p, &text, &size) == 0);
    CHECK(size == J[0].kvfz_size && memcmp(text, J[0].kvfz, size) == 0);
    free(text);

    check_errors_and_summary(in, &ro, out, fdir);
    kvf_stats_free(s1);
    kvf_stats_free(s2);
}

/* Statistics that hold no judged case (a run stopped before its first) give one sentence and
 * no page: an empty page would read as a pass. */
static void test_report_empty(void) {
    kvf_error err = {0};
    kvf_stats *s = stats_new(4);
    char out[600], p[700];
    snprintf(out, sizeof out, "%s/report-empty", tmp_dir());
    kvf_report_input in = {s, "empty.json", NULL};
    kvf_report_opts ro = {out, NULL, NULL, NULL};
    CHECK_INT_EQ(kvf_report_write(&in, 1, &ro, NULL, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "empty.json holds no judged case");
    CHECK(strchr(err.msg, '\n') == NULL);
    snprintf(p, sizeof p, "%s/index.html", out);
    CHECK(access(p, F_OK) != 0);
    kvf_stats_free(s);
}

static const check_test tests[] = {
    {"report_files", test_report_files},
    {"report_empty", test_report_empty},
    {NULL, NULL},
};

CHECK_MAIN(tests)
