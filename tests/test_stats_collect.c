/* Unit tests of collecting into the statistics (reports/src/stats.c, stats_collect.c,
 * stats_pending.c): histogram bucketing at its edges, zero, infinity and NaN counted apart, the
 * coordinate classes, per-scope pending counts equal to counting element by element, and
 * kvf_stats_judge giving the judge's verdict. */
#include <float.h>

#include "kvfuzz/prng.h"
#include "reports_fixtures.h"

/* Counts are gathered per scope before they reach the statistics (reports/src/stats_pending.c).
 * Thousands of random elements, enough to evict table slots and change rows, head-dim indices
 * past the case's head_dim, non-finite values, both outputs, in and out of the model, counted
 * in one scope must give exactly the statistics that one scope per element gives. */
static void test_pending_matches_single(void) {
    kvf_stats *batched = stats_new(4), *single = stats_new(4);
    kvf_case c;
    small_case(&c);
    kvf_rule rule;
    kvf_rule_default(&rule);
    kvf_error err = {0};
    kvf_prng rng;
    kvf_prng_seed(&rng, 77);
    kvf_stats_scope all, one;
    CHECK_OK(kvf_stats_begin(&all, batched, "k", &rule, &c, NULL, &err), &err);
    for (int i = 0; i < 20000; i++) {
        const uint64_t r = kvf_prng_next(&rng);
        const int lse = (r & 7) == 0;
        /* Runs of a row, as the judge gives them, broken now and then. */
        const int row = (i / 37 + (int)((r >> 3) & 1)) % 6;
        kvf_element_error e = elem(lse ? KVF_OUTPUT_LSE : KVF_OUTPUT_O, row % 3, row / 3,
                                   lse ? -1 : (int)((r >> 4) % 7), 0, 0, 0);
        const double mag =
            ldexp(1.0 + (double)((r >> 8) & 1023) / 1024, (int)((r >> 18) % 120) - 90);
        e.abs_error = (r >> 25) % 11 == 0 ? 0 : mag;
        e.rel_error = e.abs_error / 3;
        e.exact_value = (r >> 29) % 13 == 0 ? 0 : ldexp(1.5, (int)((r >> 33) % 40) - 20);
        e.kernel_value = e.exact_value + e.abs_error;
        e.rounded_value = e.exact_value;
        e.ulps = (r >> 39) % 9 == 0 ? -1 : (int64_t)((r >> 42) % 5000);
        e.margin = (double)((r >> 44) % 300) / 100;
        e.excess_margin = e.margin / 2;
        e.fails = e.margin > 1;
        e.out_of_model = (r >> 53) % 10 == 0;
        if ((r >> 57) % 17 == 0) e.kernel_value = (r >> 61) & 1 ? NAN : INFINITY;
        kvf_stats_observe_element(&all, &e);
        CHECK_OK(kvf_stats_begin(&one, single, "k", &rule, &c, NULL, &err), &err);
        kvf_stats_observe_element(&one, &e);
        kvf_stats_end(&one);
    }
    /* A known density cell: abs 0.75 (octave -1) against |exact| 3 (octave 1). */
    kvf_element_error known = elem(KVF_OUTPUT_LSE, 2, 0, -1, 0.75, 1, 0.5);
    known.exact_value = -3;
    kvf_stats_observe_element(&all, &known);
    CHECK_OK(kvf_stats_begin(&one, single, "k", &rule, &c, NULL, &err), &err);
    kvf_stats_observe_element(&one, &known);
    kvf_stats_end(&one);
    kvf_stats_end(&all);
    CHECK(kvf_stats_equal(batched, single));
    char path[512];
    tmp_path(path, sizeof path, "pending.json");
    CHECK_OK(kvf_stats_write(batched, path, &err), &err);
    char *text;
    size_t size;
    CHECK(kvf_read_file(path, &text, &size) == 0);
    CHECK_STR_CONTAINS(text, "[-1, 1, 1]");
    free(text);
    kvf_stats_free(batched);
    kvf_stats_free(single);
    kvf_case_free(&c);
}

/* ------------------------------------------------------------------------------------------ */
/* Buckets                                                                                     */
/* ------------------------------------------------------------------------------------------ */

static void test_bucket_edges(void) {
    CHECK_INT_EQ(kvf_stats_bucket(1.0), 0);
    CHECK_INT_EQ(kvf_stats_bucket(2.0), 4);
    CHECK_INT_EQ(kvf_stats_bucket(nextafter(2.0, 0)), 3);
    CHECK_INT_EQ(kvf_stats_bucket(0.5), -4);
    CHECK_INT_EQ(kvf_stats_bucket(nextafter(0.5, 0)), -5);
    CHECK_INT_EQ(kvf_stats_bucket(3.0), 6); /* log2 3 = 1.585: quarter 6 */
    /* The quarter edges are the doubles nearest 2^(j/4): at the edge, and one below it. */
    const double edges[3] = {0x1.306fe0a31b715p+0, 0x1.6a09e667f3bcdp+0, 0x1.ae89f995ad3adp+0};
    for (int j = 0; j < 3; j++) {
        CHECK_INT_EQ(kvf_stats_bucket(edges[j]), j + 1);
        CHECK_INT_EQ(kvf_stats_bucket(nextafter(edges[j], 0)), j);
        CHECK_INT_EQ(kvf_stats_bucket(ldexp(edges[j], -100)), -400 + j + 1);
        CHECK_INT_EQ(kvf_stats_bucket(ldexp(nextafter(edges[j], 0), 37)), 148 + j);
    }
    /* Extremes: the smallest subnormal and the largest double. */
    CHECK_INT_EQ(kvf_stats_bucket(4.9406564584124654e-324), -4296);
    CHECK_INT_EQ(kvf_stats_bucket(DBL_MAX), 4095);
    CHECK_INT_EQ(kvf_stats_bucket(DBL_MIN), -4088);
    /* Lower edges invert the bucketing over the normal range, negative indices included. */
    for (int32_t i = -4088; i < 4096; i++) {
        double lo = kvf_stats_bucket_lo(i);
        if (kvf_stats_bucket(lo) != i) {
            CHECK_FAIL_AT("bucket(bucket_lo(%d) = %a) = %d", (int)i, lo, (int)kvf_stats_bucket(lo));
            break;
        }
        if (kvf_stats_bucket(nextafter(lo, 0)) != i - 1) {
            CHECK_FAIL_AT("the value below bucket_lo(%d) is not in bucket %d", (int)i, (int)i - 1);
            break;
        }
    }
    CHECK_DBL_EQ(kvf_stats_bucket_lo(-1), 0.5 * edges[2]);
    CHECK_DBL_EQ(kvf_stats_bucket_lo(-8), 0.25);
}

/* Zero, infinity and NaN are counted apart; integer ULP distances bucket exactly. */
static void test_special_values(void) {
    kvf_stats *s = stats_new(4);
    kvf_case c;
    small_case(&c);
    kvf_rule rule;
    kvf_rule_default(&rule);
    kvf_stats_scope sc;
    kvf_error err = {0};
    CHECK_OK(kvf_stats_begin(&sc, s, "k", &rule, &c, NULL, &err), &err);
    kvf_element_error e[5] = {
        elem(KVF_OUTPUT_O, 1, 0, 0, 0, 0, 0), elem(KVF_OUTPUT_O, 1, 0, 1, 0.25, 1, 0.5),
        elem(KVF_OUTPUT_O, 1, 0, 2, INFINITY, 3, INFINITY),
        elem(KVF_OUTPUT_O, 1, 1, 3, NAN, -1, INFINITY), elem(KVF_OUTPUT_O, 2, 1, 3, 0.75, 4, 2)};
    e[2].kernel_value = INFINITY;
    e[3].kernel_value = NAN;
    for (int i = 0; i < 5; i++)
        kvf_stats_observe_element(&sc, &e[i]);
    kvf_stats_end(&sc);
    char path[512];
    tmp_path(path, sizeof path, "special.json");
    CHECK_OK(kvf_stats_write(s, path, &err), &err);
    char *text;
    size_t size;
    CHECK(kvf_read_file(path, &text, &size) == 0);
    /* abs: one zero, one inf, one NaN, buckets -8 (0.25) and floor(4 log2 .75) = -2. */
    CHECK_STR_CONTAINS(text, "\"abs\": {\"total\": 5, \"zero\": 1, \"inf\": 1, \"nan\": 1, "
                             "\"buckets\": [[-8, 1], [-2, 1]]}");
    /* ulp: 0, 1 (bucket 0), 3 (bucket 6), -1 (nan), 4 (bucket 8). */
    CHECK_STR_CONTAINS(text, "\"ulp\": {\"total\": 5, \"zero\": 1, \"inf\": 0, \"nan\": 1, "
                             "\"buckets\": [[0, 1], [6, 1], [8, 1]]}");
    CHECK_STR_CONTAINS(text, "\"margin\": {\"total\": 5, \"zero\": 1, \"inf\": 2, \"nan\": 0");
    /* Max abs and rel only over finite pairs; max ulps ignores the NaN (-1). */
    CHECK_STR_CONTAINS(text, "\"max_abs\": 0.75, ");
    CHECK_STR_CONTAINS(text, "\"max_ulps\": 4, \"max_margin\": \"Infinity\"");
    /* A NaN/inf mismatch has no distance: null, never a number. */
    CHECK_STR_CONTAINS(text, "\"ulps\": null");
    CHECK_STR_CONTAINS(text, "\"nonfinite\": 2");
    free(text);
    kvf_stats *back = NULL;
    CHECK_OK(kvf_stats_read(&back, path, &err), &err);
    CHECK(back && kvf_stats_equal(s, back));
    kvf_stats_free(back);
    kvf_stats_free(s);
    kvf_case_free(&c);
}

/* Sequence 0 is empty (seqlen class 0, no slot class), sequence 1 has 70 tokens (seqlen bucket
 * 1 + floor(log2 70) = 7, last slot 5 of a 64-page), sequence 2 is one full page (bucket 7,
 * slot 63). */
static void test_coordinate_classes(void) {
    kvf_stats *s = stats_new(4);
    kvf_case c;
    small_case(&c);
    kvf_rule rule;
    kvf_rule_default(&rule);
    kvf_stats_scope sc;
    kvf_error err = {0};
    CHECK_OK(kvf_stats_begin(&sc, s, "k", &rule, &c, NULL, &err), &err);
    kvf_element_error e0 = elem(KVF_OUTPUT_LSE, 0, 1, -1, 0, 0, 0);
    kvf_element_error e1 = elem(KVF_OUTPUT_O, 1, 0, 2, 0.5, 3, 0.25);
    kvf_element_error e2 = elem(KVF_OUTPUT_O, 2, 1, 3, 0.5, 1, 0.5);
    kvf_stats_observe_element(&sc, &e0);
    kvf_stats_observe_element(&sc, &e1);
    kvf_stats_observe_element(&sc, &e2);
    kvf_stats_end(&sc);
    char path[512];
    tmp_path(path, sizeof path, "classes.json");
    CHECK_OK(kvf_stats_write(s, path, &err), &err);
    char *text;
    size_t size;
    CHECK(kvf_read_file(path, &text, &size) == 0);
    /* o: heads 0 and 1, dims 2 and 3, seqlen bucket 7 twice, slots (64, 5) and (64, 63).
     * bits_sum = round(1024 log2(4)) = 2048 for 3 ulps, 1024 for 1 ulp. */
    CHECK_STR_CONTAINS(text, "\"by_head\": [[0, 1, 0, 0, 1, 2048, 3, 0.5, 0.25], "
                             "[1, 1, 0, 0, 1, 1024, 1, 0.5, 0.5]]");
    CHECK_STR_CONTAINS(text, "\"by_dim\": [[2, 1, 0, 0, 1, 2048, 3, 0.5, 0.25], "
                             "[3, 1, 0, 0, 1, 1024, 1, 0.5, 0.5]]");
    CHECK_STR_CONTAINS(text, "\"by_seqlen\": [[7, 2, 0, 0, 2, 3072, 3, 0.5, 0.5]]");
    CHECK_STR_CONTAINS(text, "\"by_slot\": [[64, 5, 1, 0, 0, 1, 2048, 3, 0.5, 0.25], "
                             "[64, 63, 1, 0, 0, 1, 1024, 1, 0.5, 0.5]]");
    /* lse of the empty sequence: seqlen class 0, no dim, no slot. */
    CHECK_STR_CONTAINS(text, "\"by_dim\": [], \"by_seqlen\": [[0, 1, 0, 0, 1, 0, 0, 0.0, 0.0]], "
                             "\"by_slot\": []");
    free(text);
    kvf_stats_free(s);
    kvf_case_free(&c);
}

/* kvf_stats_judge gives the verdict kvf_judge gives, and counts it. */
static void test_judge_wrapper(void) {
    judged_all();
    kvf_error err = {0};
    kvf_stats *s = stats_new(8);
    kvf_rule rule;
    kvf_rule_parse(&rule, "ulp:0", &err);
    kvf_verdict a, b;
    kvf_stats_case ref = {J[0].path, J[0].kvfz, J[0].kvfz_size};
    CHECK_OK(kvf_judge(&a, &rule, &J[0].c, &J[0].orc, J[0].o, J[0].lse, &err), &err);
    CHECK_OK(kvf_stats_judge(s, "k", &ref, &b, &rule, &J[0].c, &J[0].orc, J[0].o, J[0].lse, &err),
             &err);
    CHECK_INT_EQ(a.pass, b.pass);
    CHECK_INT_EQ(a.finding, b.finding);
    CHECK_INT_EQ(a.o.violations, b.o.violations);
    CHECK_OK(
        kvf_stats_judge(NULL, "k", &ref, &b, &rule, &J[0].c, &J[0].orc, J[0].o, J[0].lse, &err),
        &err);
    CHECK_INT_EQ(a.o.max_ulps, b.o.max_ulps);
    CHECK_INT_EQ(kvf_stats_elements(s), kvf_case_o_elems(&J[0].c) + kvf_case_lse_elems(&J[0].c));
    CHECK_INT_EQ(kvf_stats_count_run(s, "k", 42, &err), KVF_EINVAL);
    kvf_stats_free(s);
}

static const check_test tests[] = {
    {"bucket_edges", test_bucket_edges},
    {"special_values", test_special_values},
    {"pending_matches_single", test_pending_matches_single},
    {"coordinate_classes", test_coordinate_classes},
    {"judge_wrapper", test_judge_wrapper},
    {NULL, NULL},
};

CHECK_MAIN(tests)
