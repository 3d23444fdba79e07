/* Unit test of the sharded statistics of a multi-threaded run (reports/src/stats_sink.c,
 * kvfuzz/stats_sink.h). */
#include <pthread.h>

#include "kvfuzz/stats_sink.h"
#include "reports_fixtures.h"

/* The sink of a multi-threaded run: two threads judging through the sink's scopes (each case
 * judged once, elements counted as the judge computes them) give exactly the statistics of one
 * object that judged everything, and the file on disk holds them after finish. */
typedef struct sink_worker {
    kvf_stats_sink *sink;
    int thread, first;
} sink_worker;

static void *sink_worker_main(void *arg) {
    sink_worker *w = arg;
    kvf_rule rules[3];
    for (int r = 0; r < 3; r++)
        kvf_rule_parse(&rules[r], RULES[r], NULL);
    for (int i = w->first; i < NJUDGED; i += 2) {
        judged *j = &J[i];
        kvf_stats_case ref = {j->path, j->kvfz, j->kvfz_size};
        kvf_stats_sink_case_begin(w->sink, w->thread, "k", rules, 3, &j->c, &ref);
        for (int r = 0; r < 3; r++) {
            kvf_stats_scope *sc = kvf_stats_sink_rule_begin(w->sink, w->thread, r);
            kvf_verdict v;
            int rc = kvf_judge_observe(&v, &rules[r], &j->c, &j->orc, j->o, j->lse,
                                       sc ? kvf_stats_observe_element : NULL, sc, NULL);
            kvf_stats_sink_rule_end(w->sink, w->thread, sc, rc ? NULL : &v);
        }
    }
    return NULL;
}

static void test_stats_sink(void) {
    judged_all();
    kvf_error err = {0};
    kvf_stats *want = stats_new(5);
    for (int i = 0; i < NJUDGED; i++)
        judged_observe(want, "k", &J[i]);
    char path[512];
    tmp_path(path, sizeof path, "sink.json");
    kvf_stats_opts so;
    kvf_stats_opts_default(&so);
    so.worst_n = 5;
    so.flush_interval_s = 0; /* drain and rewrite at every case: the hardest schedule */
    kvf_stats_sink *sink = NULL;
    CHECK_OK(kvf_stats_sink_create(&sink, &so, path, 2, &err), &err);
    if (!sink) return;
    pthread_t t[2];
    sink_worker w[2] = {{sink, 0, 0}, {sink, 1, 1}};
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, sink_worker_main, &w[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK_OK(kvf_stats_sink_finish(sink, &err), &err);
    CHECK(kvf_stats_equal(kvf_stats_sink_stats(sink), want));
    kvf_stats *back = NULL;
    CHECK_OK(kvf_stats_read(&back, path, &err), &err);
    CHECK(back && kvf_stats_equal(back, want));
    kvf_stats_free(back);
    kvf_stats_sink_free(sink);
    kvf_stats_free(want);
    /* A path that cannot be written fails at creation, before any work. */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no-such-dir/s.json", tmp_dir());
    CHECK_INT_EQ(kvf_stats_sink_create(&sink, &so, bad, 2, &err), KVF_EIO);
    CHECK(sink == NULL);
}

static const check_test tests[] = {
    {"stats_sink", test_stats_sink},
    {NULL, NULL},
};

CHECK_MAIN(tests)
