/* Unit tests of merging statistics (reports/src/stats_merge.c): merging is associative and
 * commutative and equal to one object that saw everything, through memory and through files;
 * shards of one run keep the run's one provenance record. */
#include "reports_fixtures.h"

/* merge(a, b) == one object that saw a's and b's elements, and merging is associative and
 * commutative, with a worst list short enough (3) that truncation matters. */
static void test_merge(void) {
    judged_all();
    kvf_error err = {0};
    kvf_stats *all = stats_new(3), *part[NJUDGED];
    for (int i = 0; i < NJUDGED; i++) {
        part[i] = stats_new(3);
        /* Two kernels, so groups exist in some parts and not others. */
        judged_observe(part[i], i % 2 ? "kernel-b" : "kernel-a", &J[i]);
        judged_observe(all, i % 2 ? "kernel-b" : "kernel-a", &J[i]);
    }
    CHECK(kvf_stats_elements(all) > 1000);
    /* ((0 + 1) + 2) + 3 */
    kvf_stats *left = stats_new(3);
    for (int i = 0; i < NJUDGED; i++)
        CHECK_OK(kvf_stats_merge(left, part[i], &err), &err);
    CHECK(kvf_stats_equal(left, all));
    /* 0 + (1 + (2 + 3)), built right to left */
    kvf_stats *right = stats_new(3);
    CHECK_OK(kvf_stats_merge(right, part[3], &err), &err);
    for (int i = NJUDGED - 2; i >= 0; i--) {
        kvf_stats *t = stats_new(3);
        CHECK_OK(kvf_stats_merge(t, part[i], &err), &err);
        CHECK_OK(kvf_stats_merge(t, right, &err), &err);
        kvf_stats_free(right);
        right = t;
    }
    CHECK(kvf_stats_equal(right, all));
    /* (3 + 1) + (2 + 0): another order and grouping */
    kvf_stats *x = stats_new(3), *y = stats_new(3);
    CHECK_OK(kvf_stats_merge(x, part[3], &err), &err);
    CHECK_OK(kvf_stats_merge(x, part[1], &err), &err);
    CHECK_OK(kvf_stats_merge(y, part[2], &err), &err);
    CHECK_OK(kvf_stats_merge(y, part[0], &err), &err);
    CHECK_OK(kvf_stats_merge(x, y, &err), &err);
    CHECK(kvf_stats_equal(x, all));
    /* Merging through files gives the same. */
    char pa[512], pb[512];
    tmp_path(pa, sizeof pa, "merge-a.json");
    tmp_path(pb, sizeof pb, "merge-b.json");
    CHECK_OK(kvf_stats_write(left, pa, &err), &err);
    CHECK_OK(kvf_stats_write(part[0], pb, &err), &err);
    kvf_stats *ra = NULL, *rb = NULL;
    CHECK_OK(kvf_stats_read(&ra, pa, &err), &err);
    CHECK_OK(kvf_stats_read(&rb, pb, &err), &err);
    CHECK(ra && kvf_stats_equal(ra, all));
    CHECK_OK(kvf_stats_merge(ra, rb, &err), &err);
    CHECK_OK(kvf_stats_merge(all, part[0], &err), &err);
    CHECK(kvf_stats_equal(ra, all));
    /* A different stats object is not equal. */
    CHECK(!kvf_stats_equal(ra, part[0]));
    CHECK_INT_EQ(kvf_stats_merge(all, all, &err), KVF_EINVAL);
    kvf_stats_free(ra);
    kvf_stats_free(rb);
    kvf_stats_free(x);
    kvf_stats_free(y);
    kvf_stats_free(left);
    kvf_stats_free(right);
    kvf_stats_free(all);
    for (int i = 0; i < NJUDGED; i++)
        kvf_stats_free(part[i]);
}

/* Shards of one run (the campaign's per-thread statistics) merge into the same statistics as
 * kvf_stats_merge, but the file keeps the run's one provenance record; plain merging keeps
 * every source's. */
static void test_merge_shard(void) {
    judged_all();
    kvf_error err = {0};
    kvf_stats *all = stats_new(3), *run = stats_new(3), *merged = stats_new(3);
    for (int i = 0; i < NJUDGED; i++) {
        kvf_stats *shard = stats_new(3);
        judged_observe(shard, "kernel-a", &J[i]);
        judged_observe(all, "kernel-a", &J[i]);
        CHECK_OK(kvf_stats_merge_shard(run, shard, &err), &err);
        CHECK_OK(kvf_stats_merge(merged, shard, &err), &err);
        kvf_stats_free(shard);
    }
    CHECK(kvf_stats_equal(run, all));
    CHECK(kvf_stats_equal(merged, all));
    char pr[512], pm[512];
    tmp_path(pr, sizeof pr, "shards.json");
    tmp_path(pm, sizeof pm, "merged.json");
    CHECK_OK(kvf_stats_write(run, pr, &err), &err);
    CHECK_OK(kvf_stats_write(merged, pm, &err), &err);
    char *tr = NULL, *tm = NULL;
    size_t size;
    CHECK(kvf_read_file(pr, &tr, &size) == 0);
    CHECK(kvf_read_file(pm, &tm, &size) == 0);
    if (tr && tm) {
        CHECK_INT_EQ(count_substr(tr, "\"command\": "), 1);
        CHECK_INT_EQ(count_substr(tm, "\"command\": "), 1 + NJUDGED);
    }
    free(tr);
    free(tm);
    CHECK_INT_EQ(kvf_stats_merge_shard(run, run, &err), KVF_EINVAL);
    kvf_stats_free(all);
    kvf_stats_free(run);
    kvf_stats_free(merged);
}

static const check_test tests[] = {
    {"merge", test_merge},
    {"merge_shard", test_merge_shard},
    {NULL, NULL},
};

CHECK_MAIN(tests)
