/* Unit tests for the minimizer (fuzz/search/minimize.c): it shrinks the case of a finding that a
 * bounded campaign gives for the planted bug and keeps its class. */
#include "fuzz_fixtures.h"

/* A bounded campaign finds the planted bug; the minimizer shrinks its case and keeps its class;
 * a production kernel gives nothing in the same budget. */
static void campaign_finds_and_minimizes_planted_bug(void) {
    char dir[512], findings[600];
    make_tmp(dir, sizeof dir);
    snprintf(findings, sizeof findings, "%s/findings", dir);
    FILE *log = fopen("/dev/null", "w");
    kvf_campaign_opts o;
    kvf_campaign_opts_default(&o);
    o.kernel = kvf_fuzz_kernel_find("test-planted");
    o.max_runs = 150;
    o.jobs = 2;
    o.seed = 7;
    o.findings_dir = findings;
    o.log = log;
    kvf_campaign_stats st;
    kvf_error err = {0};
    CHECK_OK(kvf_campaign_run(&o, &st, &err), &err);
    CHECK_INT_EQ(st.cases, 150);
    CHECK(st.finding_hits > 0);
    CHECK(st.findings_new > 0);
    /* Each new finding's case and report, and the campaign's hit counts (hits-*.counts). */
    CHECK_INT_EQ(count_files(findings, NULL, NULL), 2 * st.findings_new + 1);
    CHECK_INT_EQ(count_files(findings, "hits-", NULL), 1);

    /* Minimize the first accuracy finding: the slot read past a last page holds the host's NaN
     * poison, so it shows as nonfinite (or as o-tolerance where the generator's data got
     * there first). */
    DIR *d = opendir(findings);
    char path[1024] = "";
    kvf_finding_class target = KVF_FINDING_NONE;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if ((strncmp(e->d_name, "o-tolerance-", 12) == 0 ||
             strncmp(e->d_name, "nonfinite-", 10) == 0) &&
            strstr(e->d_name, ".kvfz")) {
            /* Prefer a nonfinite one: the slot it reads is poison, so one sequence shows it.
             * An o-tolerance one read a slot another sequence of a shared page uses, and
             * needs that sequence too. */
            if (target == KVF_FINDING_NONFINITE) continue;
            snprintf(path, sizeof path, "%s/%s", findings, e->d_name);
            target = e->d_name[0] == 'o' ? KVF_FINDING_O_TOLERANCE : KVF_FINDING_NONFINITE;
        }
    if (d) closedir(d);
    CHECK(path[0] != 0);
    if (path[0]) {
        /* An accuracy finding says whether FlashInfer-Bench's rule (fib) catches it. */
        char jpath[1100];
        snprintf(jpath, sizeof jpath, "%.*s.json", (int)(strlen(path) - 5), path);
        json_error_t je;
        json_t *rep = json_load_file(jpath, 0, &je);
        CHECK(rep != NULL);
        CHECK(json_is_boolean(json_object_get(rep, "fib_catches")));
        CHECK(json_is_object(json_object_get(rep, "campaign")));
        json_decref(rep);
    }
    if (path[0]) {
        kvf_limits cl = case_limits();
        kvf_spec s;
        CHECK_OK(kvf_case_load(path, &s, NULL, &cl, &err), &err);
        int64_t tokens_before = kvf_spec_tokens(&s);
        kvf_minimize_opts mo;
        kvf_minimize_opts_default(&mo);
        mo.kernel = o.kernel;
        mo.target = target;
        mo.jobs = 2;
        kvf_outcome out;
        kvf_minimize_stats ms;
        CHECK_OK(kvf_minimize(&s, &mo, &out, &ms, &err), &err);
        CHECK_INT_EQ(out.finding, target);
        CHECK(kvf_spec_tokens(&s) <= tokens_before);
        CHECK(s.recipe.batch_size <= (target == KVF_FINDING_NONFINITE ? 1 : 2));
        CHECK(ms.accepted > 0);
        /* The minimized case replays to the same class. */
        kvf_outcome again;
        CHECK_OK(kvf_minimize_evaluate(&s, &mo, &again, &err), &err);
        CHECK_INT_EQ(again.finding, target);
        kvf_spec_free(&s);
    }

    /* The production kernel: same budget, nothing. */
    o.kernel = kvf_fuzz_kernel_find("cpu-splitkv");
    o.max_runs = 100;
    CHECK_OK(kvf_campaign_run(&o, &st, &err), &err);
    CHECK_INT_EQ(st.finding_hits, 0);
    fclose(log);
    rm_tree(dir);
}

static const check_test tests[] = {
    {"campaign_finds_and_minimizes_planted_bug", campaign_finds_and_minimizes_planted_bug},
    {NULL, NULL},
};

CHECK_MAIN(tests)
