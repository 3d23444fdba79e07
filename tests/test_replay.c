/* Unit tests of replay (fuzz/trial/replay.c, replay_inputs.c; kvfuzz/replay.h): a session of
 * three kernels over case files (a correct kernel passes, a planted bug fails with its
 * attribution, a crash is a failed run, a file that is no case is a bad input) with its tally,
 * the judge hooks and the canonical bytes; a kernel that cannot start named; a statistics path
 * that would replace a case or its report; and the kernel the findings' reports record. */
#include "fuzz_fixtures.h"

#include <jansson.h>

#include "kvfuzz/replay.h"

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void save_preset(const char *path, const char *preset) {
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, preset, 1, &err), &err);
    CHECK_OK(kvf_spec_save(&s, path, &err), &err);
    kvf_spec_free(&s);
}

/* Rules strict, strict, fib for each of n kernels: the second strict repeats the first. */
static void rules_for(kvf_rule *rules, size_t n) {
    const char *names[3] = {"strict", "strict", "fib"};
    for (size_t k = 0; k < n; k++)
        for (int j = 0; j < 3; j++)
            CHECK(kvf_rule_parse(&rules[k * KVF_MAX_RULES + (size_t)j], names[j], NULL) == 0);
}

typedef struct hook_count {
    int begins, ends, elements;
} hook_count;

static void *count_begin(void *ctx, int rule) {
    hook_count *h = ctx;
    h->begins++;
    return rule == 0 ? h : NULL; /* only the first rule's elements are observed */
}

static void count_element(void *ctx, const kvf_element_error *e) {
    (void)e;
    ((hook_count *)ctx)->elements++;
}

static void count_end(void *ctx, void *scope, const kvf_verdict *v) {
    (void)scope, (void)v;
    ((hook_count *)ctx)->ends++;
}

static void session(void) {
    char dir[256], seed[512], mixed[512], bad[512];
    make_tmp(dir, sizeof dir);
    snprintf(seed, sizeof seed, "%s/seed.kvfz", dir);
    snprintf(mixed, sizeof mixed, "%s/mixed.kvfz", dir);
    snprintf(bad, sizeof bad, "%s/bad.kvfz", dir);
    save_preset(seed, "seed-h20kv4");
    save_preset(mixed, "mixed-lengths");
    write_file(bad, "garbage");

    const kvf_kernel *kernels[3] = {kvf_kernel_find("cpu-ref"),
                                    kvf_fuzz_kernel_find("test-planted"),
                                    kvf_fuzz_kernel_find("test-crash")};
    CHECK(kernels[0] && kernels[1] && kernels[2]);
    static kvf_rule rules[3 * KVF_MAX_RULES];
    rules_for(rules, 3);
    kvf_replay_opts o = {.kernels = kernels,
                         .nkernels = 3,
                         .rules = rules,
                         .nrules = 3,
                         .deadline_s = 30,
                         .oracle_threads = 1,
                         .oracle_path = KVF_ORACLE_FAST,
                         .keep_bytes = 1};
    o.limits = case_limits();
    static kvf_replay r;
    static kvf_replay_result res;
    kvf_error err = {0};
    size_t failed = 99;
    CHECK_OK(kvf_replay_start(&r, &o, &failed, &err), &err);
    CHECK_INT_EQ(failed, 3);

    kvf_replay_case rc;
    CHECK_INT_EQ(kvf_replay_case_open(&r, &rc, bad, &err), KVF_REPLAY_CASE_BAD_INPUT);
    CHECK(strcmp(rc.name, "bad.kvfz") == 0);
    CHECK_STR_CONTAINS(err.msg, "KVFZ");
    kvf_replay_case_close(&rc);

    CHECK_INT_EQ(kvf_replay_case_open(&r, &rc, seed, &err), KVF_REPLAY_CASE_READY);
    /* The canonical bytes decode to the case's spec. */
    kvf_spec back, want;
    CHECK(rc.kvfz != NULL);
    CHECK_OK(kvf_spec_decode(&back, rc.kvfz, rc.kvfz_size, &o.limits, &err), &err);
    CHECK_OK(kvf_spec_preset(&want, "seed-h20kv4", 1, &err), &err);
    CHECK(kvf_spec_equal(&back, &want));
    kvf_spec_free(&back);
    kvf_spec_free(&want);

    /* cpu-ref: passes every rule; the hooks see each rule begin and end. */
    CHECK_INT_EQ(kvf_replay_run(&r, &rc, 0, &res), KVF_REPLAY_RAN);
    hook_count hc = {0};
    kvf_judge_hooks hooks = {
        .begin = count_begin, .element = count_element, .end = count_end, .ctx = &hc};
    CHECK_OK(kvf_replay_judge(&r, &rc, 0, &hooks, &res), &err);
    CHECK_INT_EQ(res.failed, 0);
    CHECK_INT_EQ(hc.begins, 3);
    CHECK(hc.elements > 0);
    for (int j = 0; j < 3; j++) {
        CHECK_INT_EQ(res.status[j], KVF_VERDICT_PASS);
        CHECK_INT_EQ(res.attr[j].kind, KVF_ATTRIB_NONE);
    }
    CHECK_INT_EQ(res.repeats[0], 0);
    CHECK_INT_EQ(res.repeats[1], 1);
    CHECK_INT_EQ(res.repeats[2], 0);

    /* test-planted: NaN in its output fails every rule, and strict's failure is attributed. */
    CHECK_INT_EQ(kvf_replay_run(&r, &rc, 1, &res), KVF_REPLAY_RAN);
    CHECK_OK(kvf_replay_judge(&r, &rc, 1, NULL, &res), &err);
    CHECK_INT_EQ(res.failed, 1);
    CHECK_INT_EQ(res.status[0], KVF_VERDICT_FAIL);
    CHECK_INT_EQ(res.out.verdicts[0].finding, KVF_FINDING_NONFINITE);
    CHECK_INT_EQ(res.attr[0].kind, KVF_ATTRIB_DEFECT);
    CHECK_STR_CONTAINS(res.attr[0].text, "no precision model explains it");
    CHECK(res.attr_error[0][0] == 0);
    kvf_replay_case_close(&rc);

    /* test-crash crashes on mixed lengths: a failed run with its class, nothing to judge. */
    CHECK_INT_EQ(kvf_replay_case_open(&r, &rc, mixed, &err), KVF_REPLAY_CASE_READY);
    CHECK_INT_EQ(kvf_replay_run(&r, &rc, 2, &res), KVF_REPLAY_RUN_FAILED);
    CHECK_INT_EQ(res.run_class, KVF_FINDING_CRASH);
    CHECK_STR_CONTAINS(res.run.message, "signal");
    kvf_replay_case_close(&rc);
    kvf_replay_stop(&r);
    CHECK(r.runners == NULL);

    CHECK_INT_EQ(r.t.cases_ok, 2);
    CHECK_INT_EQ(r.t.bad_inputs, 1);
    CHECK_INT_EQ(r.t.not_judged, 0);
    CHECK_INT_EQ(r.t.runs, 3);
    CHECK_INT_EQ(r.t.failed_runs, 2);
    CHECK_INT_EQ(r.t.unsupported, 0);
    CHECK_INT_EQ(kvf_replay_clean_runs(&r.t), 1);
    rm_tree(dir);
}

static void kernel_cannot_start(void) {
    const kvf_kernel *kernels[2] = {kvf_kernel_find("cpu-ref"),
                                    kvf_fuzz_kernel_find("test-nostart")};
    static kvf_rule rules[2 * KVF_MAX_RULES];
    rules_for(rules, 2);
    kvf_replay_opts o = {
        .kernels = kernels, .nkernels = 2, .rules = rules, .nrules = 3, .deadline_s = 30};
    o.limits = case_limits();
    static kvf_replay r;
    kvf_error err = {0};
    size_t failed = 0;
    CHECK(kvf_replay_start(&r, &o, &failed, &err) != 0);
    CHECK_INT_EQ(failed, 1);
    CHECK_STR_CONTAINS(err.msg, "create() fails on purpose");
    kvf_replay_stop(&r);
}

static void stats_clash(void) {
    char dir[256], a[512], aj[512], b[512], s[512], other[512];
    make_tmp(dir, sizeof dir);
    snprintf(a, sizeof a, "%s/a.kvfz", dir);
    snprintf(aj, sizeof aj, "%s/a.json", dir);
    snprintf(b, sizeof b, "%s/b.kvfz", dir);
    snprintf(s, sizeof s, "%s/stats.json", dir);
    snprintf(other, sizeof other, "%s/other.json", dir);
    write_file(a, "a");
    write_file(aj, "{}");
    write_file(b, "b");
    write_file(other, "{}");
    char *paths[2] = {a, b};
    int report = -1;
    CHECK_INT_EQ(kvf_replay_stats_clash(aj, paths, 2, &report), 0);
    CHECK_INT_EQ(report, 1);
    CHECK_INT_EQ(kvf_replay_stats_clash(b, paths, 2, &report), 1);
    CHECK_INT_EQ(report, 0);
    /* The same file under another name (a hard link) is the case itself. */
    CHECK(link(b, s) == 0);
    CHECK_INT_EQ(kvf_replay_stats_clash(s, paths, 2, &report), 1);
    CHECK_INT_EQ(report, 0);
    CHECK_INT_EQ(kvf_replay_stats_clash(other, paths, 2, &report), -1);
    snprintf(s, sizeof s, "%s/missing.json", dir);
    CHECK_INT_EQ(kvf_replay_stats_clash(s, paths, 2, &report), -1);
    CHECK_INT_EQ(kvf_replay_stats_clash(NULL, paths, 2, &report), -1);
    rm_tree(dir);
}

/* Reads <name>.json beside <name>.kvfz, as kvfuzz's finding reports lie; a report named
 * "broken" cannot be read. */
static int read_beside(const char *case_path, json_t **report, kvf_error *err) {
    char path[600];
    size_t len = strlen(case_path);
    snprintf(path, sizeof path, "%.*s.json", (int)(len - 5), case_path);
    *report = NULL;
    if (strstr(case_path, "broken")) return kvf_error_set(err, KVF_EFORMAT, "broken");
    if (access(path, F_OK) != 0) return 0;
    *report = json_load_file(path, 0, NULL);
    return *report ? 0 : kvf_error_set(err, KVF_EFORMAT, "not JSON");
}

static void recorded(void) {
    char dir[256], p[4][512];
    make_tmp(dir, sizeof dir);
    const char *names[4] = {"x", "y", "z", "broken"};
    for (int i = 0; i < 4; i++)
        snprintf(p[i], sizeof p[i], "%s/%s.kvfz", dir, names[i]);
    char json[600];
    snprintf(json, sizeof json, "%s/x.json", dir);
    write_file(json, "{\"kernel\": \"cpu-splitkv\"}");
    snprintf(json, sizeof json, "%s/y.json", dir);
    write_file(json, "{\"kernel\": \"cpu-splitkv\", \"rule\": \"strict:bf16-p\"}");
    char *xy[2] = {p[0], p[1]}, *xz[2] = {p[0], p[2]}, *xb[2] = {p[0], p[3]};
    char kernel[64], rule[64];
    CHECK_INT_EQ(kvf_replay_recorded(xy, 2, read_beside, kernel, sizeof kernel, rule, sizeof rule),
                 1);
    CHECK(strcmp(kernel, "cpu-splitkv") == 0);
    CHECK(strcmp(rule, "strict:bf16-p") == 0); /* the first report that names one */
    /* A case without a report, a report that cannot be read, no cases, a name too long: no
     * record. */
    CHECK_INT_EQ(kvf_replay_recorded(xz, 2, read_beside, kernel, sizeof kernel, rule, sizeof rule),
                 0);
    CHECK_INT_EQ(kvf_replay_recorded(xb, 2, read_beside, kernel, sizeof kernel, rule, sizeof rule),
                 0);
    CHECK_INT_EQ(kvf_replay_recorded(xy, 0, read_beside, kernel, sizeof kernel, rule, sizeof rule),
                 0);
    CHECK_INT_EQ(kvf_replay_recorded(xy, 2, read_beside, kernel, 5, rule, sizeof rule), 0);
    /* Two kernels: no record. */
    snprintf(json, sizeof json, "%s/z.json", dir);
    write_file(json, "{\"kernel\": \"cpu-ref\"}");
    CHECK_INT_EQ(kvf_replay_recorded(xz, 2, read_beside, kernel, sizeof kernel, rule, sizeof rule),
                 0);
    rm_tree(dir);
}

static const check_test tests[] = {
    {"session", session},
    {"kernel_cannot_start", kernel_cannot_start},
    {"stats_clash", stats_clash},
    {"recorded", recorded},
    {NULL, NULL},
};

CHECK_MAIN(tests)
