/* Unit tests for the campaign (fuzz/engine/campaign.c): crash confirmation, default jobs,
 * lifecycle, stopping on findings, reach to long and wide cases, corpus reload and the shape
 * set. */
#include "fuzz_fixtures.h"

/* A worker killed from outside (here: the first time each case runs) is not a finding: each crash
 * is re-run, runs cleanly, and is counted as unconfirmed; a real crash is still filed. */
static void campaign_confirms_crashes(void) {
    char dir[] = "/tmp/kvf-test-flaky-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char seen[256], findings[256];
    snprintf(seen, sizeof seen, "%s/seen", dir);
    snprintf(findings, sizeof findings, "%s/findings", dir);
    CHECK(mkdir(seen, 0700) == 0);
    setenv("KVF_TEST_FLAKY_DIR", seen, 1);
    FILE *log = tmpfile();
    kvf_campaign_opts o;
    kvf_campaign_opts_default(&o);
    o.kernel = kvf_fuzz_kernel_find("test-flaky");
    o.max_runs = 20;
    o.jobs = 1;
    o.seed = 3;
    o.findings_dir = findings;
    o.log = log;
    kvf_campaign_stats st;
    kvf_error err = {0};
    CHECK_OK(kvf_campaign_run(&o, &st, &err), &err);
    CHECK_INT_EQ(st.by_class[KVF_FINDING_CRASH], 0);
    CHECK(st.crashes_unconfirmed >= 5);
    CHECK_INT_EQ(st.crashes, 0); /* unconfirmed crashes are not counted as crashes */
    CHECK_INT_EQ(st.findings_new, 0);
    unsetenv("KVF_TEST_FLAKY_DIR");
    rm_tree(seen);
    /* A kernel that crashes every time on a trigger is still filed. */
    o.kernel = kvf_fuzz_kernel_find("test-crash");
    o.max_runs = 60;
    CHECK_OK(kvf_campaign_run(&o, &st, &err), &err);
    CHECK(st.by_class[KVF_FINDING_CRASH] > 0);
    CHECK_INT_EQ(st.crashes_unconfirmed, 0);
    CHECK_INT_EQ(st.crashes, st.by_class[KVF_FINDING_CRASH]); /* each confirmed crash counted */
    CHECK_INT_EQ(st.hangs, 0);
    fclose(log);
    rm_tree(dir);
}

/* The oracle pool leaves a quarter of the cores, at most 4, to the threads that set the pace,
 * except when there is no kernel; never fewer than one thread. */
static void default_jobs(void) {
    kvf_campaign_opts o;
    kvf_campaign_opts_default(&o);
    const long cores[] = {0, 1, 2, 3, 4, 8, 16, 64, 1000};
    const int with_kernel[] = {1, 1, 2, 3, 3, 6, 12, 60, KVF_CAMPAIGN_MAX_JOBS - 4};
    const int oracle_only[] = {1, 1, 2, 3, 4, 8, 16, 64, KVF_CAMPAIGN_MAX_JOBS};
    for (size_t i = 0; i < sizeof cores / sizeof cores[0]; i++) {
        o.oracle_only = 0;
        CHECK_INT_EQ(kvf_campaign_default_jobs(&o, cores[i]), with_kernel[i]);
        o.oracle_only = 1;
        CHECK_INT_EQ(kvf_campaign_default_jobs(&o, cores[i]), oracle_only[i]);
    }
}

/* init / start / wait / free as separate steps; free without wait stops the threads. */
static void campaign_lifecycle(void) {
    FILE *log = fopen("/dev/null", "w");
    kvf_campaign_opts o;
    kvf_campaign_opts_default(&o);
    o.kernel = kvf_fuzz_kernel_find("cpu-ref");
    o.max_runs = 30;
    o.jobs = 1;
    o.log = log;
    kvf_campaign_stats st;
    kvf_error err = {0};
    kvf_campaign *cp = NULL;
    CHECK_OK(kvf_campaign_init(&cp, &o, &st, &err), &err);
    CHECK_OK(kvf_campaign_start(cp, &err), &err);
    CHECK_OK(kvf_campaign_wait(cp, &err), &err);
    kvf_campaign_free(cp);
    CHECK_INT_EQ(st.cases, 30);
    CHECK_INT_EQ(st.judged, 30);
    /* The oracle threads' busy time holds the oracle's and is all in once wait returns. */
    CHECK(st.oracle_s > 0 && st.judge_s >= st.oracle_s);
    /* Every case has a row at least; the MPFR rows are some of them. */
    CHECK(st.oracle_rows >= 30 && st.oracle_mpfr_rows >= 0 &&
          st.oracle_mpfr_rows <= st.oracle_rows);
    /* Started, never waited for: free stops it. */
    o.max_runs = 0;
    CHECK_OK(kvf_campaign_init(&cp, &o, &st, &err), &err);
    CHECK_OK(kvf_campaign_start(cp, &err), &err);
    kvf_campaign_free(cp);
    /* A failed init still leaves something to free. */
    o.kernel = NULL;
    CHECK(kvf_campaign_init(&cp, &o, &st, &err) == KVF_EINVAL);
    kvf_campaign_free(cp);
    fclose(log);
}

/* --max-findings: the campaign stops once that many signatures are found. */
static void campaign_stops_on_finding(void) {
    char dir[512], findings[600];
    make_tmp(dir, sizeof dir);
    snprintf(findings, sizeof findings, "%s/findings", dir);
    FILE *log = fopen("/dev/null", "w");
    kvf_campaign_opts o;
    kvf_campaign_opts_default(&o);
    o.kernel = kvf_fuzz_kernel_find("test-planted");
    o.max_runs = 20000;
    o.max_findings = 1;
    o.jobs = 2;
    o.seed = 7;
    o.findings_dir = findings;
    o.log = log;
    kvf_campaign_stats st;
    kvf_error err = {0};
    CHECK_OK(kvf_campaign_run(&o, &st, &err), &err);
    CHECK(st.findings_new >= 1);
    /* What was in flight when it stopped may add a few signatures, not hundreds of cases. */
    CHECK(st.cases < 2000);
    fclose(log);
    rm_tree(dir);
}

/* Reach: the share of the oracle work asked for goes to large cases, which reach 32,768-token
 * sequences and batches of 64 and more; with large_share 0 nothing is past the small budget. */
static void campaign_reaches_long_and_wide(void) {
    FILE *log = fopen("/dev/null", "w");
    kvf_campaign_opts o;
    kvf_campaign_opts_default(&o);
    o.kernel = kvf_fuzz_kernel_find("cpu-splitkv");
    o.oracle_only = 1;   /* what is generated is the point, not the kernel */
    o.large_share = 0.9; /* many large cases in a short run, */
    o.large.max_work = o.large.max_pool_elems = (int64_t)1 << 21; /* cheaper ones */
    o.max_runs = 60;
    o.jobs = 2;
    o.generators = 1;
    o.seed = 11;
    o.log = log;
    kvf_campaign_stats st;
    kvf_error err = {0};
    CHECK_OK(kvf_campaign_run(&o, &st, &err), &err);
    CHECK(st.large_cases > 0);
    CHECK(st.longest_seq >= 32768);
    CHECK(st.largest_batch >= 64);
    double share = st.work_large / (st.work_large + st.work_small);
    CHECK(share > 0.8 && share < 0.97); /* the share asked for, give or take one large case */
    o.large_share = 0;
    o.max_runs = 300;
    CHECK_OK(kvf_campaign_run(&o, &st, &err), &err);
    CHECK_INT_EQ(st.large_cases, 0);
    CHECK(st.longest_seq <= 8 * 256);
    CHECK(st.largest_batch <= 4);
    fclose(log);
}

/* The shapes the judge met, for the shape set's test. */
typedef struct shapes_seen {
    pthread_mutex_t mu;
    uint64_t key[512];
    int n;
} shapes_seen;

static int note_shape(void *ctx, int thread, const kvf_spec *spec, const kvf_case *c,
                      kvf_judge_hooks *hooks) {
    (void)thread, (void)spec, (void)hooks;
    shapes_seen *s = ctx;
    const uint64_t key = (uint64_t)c->num_qo_heads << 48 | (uint64_t)c->num_kv_heads << 32 |
                         (uint64_t)c->head_dim << 16 | (uint64_t)c->page_size;
    pthread_mutex_lock(&s->mu);
    int i = 0;
    while (i < s->n && s->key[i] != key)
        i++;
    if (i == s->n && s->n < 512) s->key[s->n++] = key;
    pthread_mutex_unlock(&s->mu);
    return 1; /* judged without hooks */
}

/* The shape set: with 3, every case the kernel met (fresh, mutated and large) had one of the
 * first 3 shapes, and cases that drew another shape took one of them; without it, shapes are
 * many. The default leaves it off for a kernel that does not compile per shape. */
static void campaign_shape_set(void) {
    FILE *log = fopen("/dev/null", "w");
    kvf_campaign_opts o;
    kvf_campaign_opts_default(&o);
    CHECK_INT_EQ(o.shape_set, -1);
    o.kernel = kvf_fuzz_kernel_find("cpu-ref");
    CHECK(!kvf_kernel_compiles_per_shape(o.kernel));
    o.large.max_work = o.large.max_pool_elems = (int64_t)1 << 20; /* cheaper large cases */
    o.max_runs = 400;
    o.jobs = 2;
    o.generators = 1;
    o.seed = 5;
    o.log = log;
    shapes_seen seen = {.n = 0};
    pthread_mutex_init(&seen.mu, NULL);
    o.judge_hooks = note_shape;
    o.observer_ctx = &seen;
    o.shape_set = 3;
    kvf_campaign_stats st;
    kvf_error err = {0};
    CHECK_OK(kvf_campaign_run(&o, &st, &err), &err);
    CHECK_INT_EQ(st.shape_set_size, 3);
    CHECK(st.shape_set_replaced > 100);
    CHECK(st.large_cases > 0);
    CHECK(seen.n >= 1 && seen.n <= 3);
    seen.n = 0;
    o.shape_set = -1; /* cpu-ref: off */
    CHECK_OK(kvf_campaign_run(&o, &st, &err), &err);
    CHECK_INT_EQ(st.shape_set_size, 0);
    CHECK_INT_EQ(st.shape_set_replaced, 0);
    CHECK(seen.n > 20);
    pthread_mutex_destroy(&seen.mu);
    fclose(log);
}

/* A running campaign takes in corpus files that appear in its folder (another campaign's),
 * and only those: its own new entries are not read back. */
static void campaign_reloads_corpus(void) {
    char dir[512], corpus[600];
    make_tmp(dir, sizeof dir);
    snprintf(corpus, sizeof corpus, "%s/corpus", dir);
    CHECK(mkdir(corpus, 0700) == 0);
    FILE *log = fopen("/dev/null", "w");
    kvf_campaign_opts o;
    kvf_campaign_opts_default(&o);
    o.kernel = kvf_fuzz_kernel_find("cpu-ref");
    o.time_limit_s = 2;
    o.reload_s = 0.2;
    o.jobs = 1;
    o.seed = 5;
    o.corpus_dir = corpus;
    o.log = log;
    kvf_campaign_stats st;
    kvf_error err = {0};
    kvf_campaign *cp = NULL;
    CHECK_OK(kvf_campaign_init(&cp, &o, &st, &err), &err);
    CHECK_OK(kvf_campaign_start(cp, &err), &err);
    struct timespec ts = {0, 500000000};
    nanosleep(&ts, NULL);
    /* Another campaign's entries: three small valid cases under names of their own. */
    for (int i = 0; i < 3; i++) {
        kvf_spec s = small_spec(100 + (uint64_t)i);
        char path[700];
        snprintf(path, sizeof path, "%s/other-%d.kvfz", corpus, i);
        CHECK_OK(kvf_spec_save(&s, path, &err), &err);
        kvf_spec_free(&s);
    }
    CHECK_OK(kvf_campaign_wait(cp, &err), &err);
    kvf_campaign_free(cp);
    CHECK_INT_EQ(st.corpus_reloaded, 3);
    CHECK(st.corpus_added > 0);
    fclose(log);
    rm_tree(dir);
}

static const check_test tests[] = {
    {"default_jobs", default_jobs},
    {"campaign_confirms_crashes", campaign_confirms_crashes},
    {"campaign_lifecycle", campaign_lifecycle},
    {"campaign_stops_on_finding", campaign_stops_on_finding},
    {"campaign_reaches_long_and_wide", campaign_reaches_long_and_wide},
    {"campaign_reloads_corpus", campaign_reloads_corpus},
    {"campaign_shape_set", campaign_shape_set},
    {NULL, NULL},
};

CHECK_MAIN(tests)
