/* Unit tests for reports/: histogram bucketing at its edges, the coordinate classes, merging
 * (associative, and equal to one object that saw everything), the stats file (round trip,
 * malformed input, atomic replacement) and the report writer (all three files, expected keys,
 * findings links, errors), including findings whose precision attribution is a precision
 * model, a defect, absent, null or malformed, and the verdict sentences and table cells that
 * follow from it.
 *
 * Statistics come from the real judge on small generated cases with perturbed kernel outputs,
 * plus hand-made elements where an exact value matters. */
#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <float.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/report.h"
#include "kvfuzz/spec.h"
#include "kvfuzz/stats.h"
#include "kvfuzz/stats_sink.h"
#include "kvfuzz/file.h"
#include "kvfuzz/json_io.h"

/* ------------------------------------------------------------------------------------------ */
/* Fixtures                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static char tmp_root[256];
static pid_t tmp_owner;

/* Removes the scratch directory at exit (KVF_KEEP_TMP=1 keeps it for a look). */
static void cleanup(void) {
    if (!tmp_root[0] || getpid() != tmp_owner || getenv("KVF_KEEP_TMP")) return;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_root);
}

static const char *tmp_dir(void) {
    if (!tmp_root[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmp_root, sizeof tmp_root, "%s/kvf-test-reports-XXXXXX", base ? base : "/tmp");
        if (!mkdtemp(tmp_root)) {
            perror("mkdtemp");
            exit(2);
        }
        tmp_owner = getpid();
        atexit(cleanup);
    }
    return tmp_root;
}

static void tmp_path(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "%s/%s", tmp_dir(), name);
}

/* A judged case: spec, case, oracle, and a kernel output that is the correctly rounded answer
 * with some elements moved. */
typedef struct judged {
    kvf_spec spec;
    kvf_case c;
    kvf_oracle_result orc;
    kvf_bf16 *o;
    float *lse;
    uint8_t *kvfz;
    size_t kvfz_size;
    char path[64];
} judged;

static void judged_make(judged *j, uint64_t seed, int damage) {
    kvf_error err = {0};
    memset(j, 0, sizeof *j);
    kvf_random_opts ro;
    kvf_random_opts_default(&ro);
    ro.max_batch = 3;
    ro.max_pages = 4;
    ro.max_work = 200000;
    ro.allow_overflow = 0;
    ro.allow_high_ids = 0;
    kvf_limits lim;
    kvf_limits_default(&lim);
    CHECK_OK(kvf_spec_random(&j->spec, seed, &ro, &err), &err);
    CHECK_OK(kvf_case_build(&j->c, &j->spec, &lim, &err), &err);
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    CHECK_OK(kvf_oracle_run(&j->orc, &j->c, &oo, &err), &err);
    CHECK_OK(kvf_spec_encode(&j->spec, &j->kvfz, &j->kvfz_size, &err), &err);
    snprintf(j->path, sizeof j->path, "cases/seed-%llu.kvfz", (unsigned long long)seed);
    int64_t n = kvf_case_o_elems(&j->c), rows = kvf_case_lse_elems(&j->c);
    j->o = malloc((size_t)(n ? n : 1) * sizeof *j->o);
    j->lse = malloc((size_t)(rows ? rows : 1) * sizeof *j->lse);
    memcpy(j->o, j->orc.o_rounded, (size_t)n * sizeof *j->o);
    memcpy(j->lse, j->orc.lse_rounded, (size_t)rows * sizeof *j->lse);
    /* Damage: every 7th o element moved by (i % 5) ulps away from zero, one NaN, one lse
     * moved by 3 f32 ulps. Finite, non-zero values only, so the move is a pure ulp step. */
    for (int64_t i = 0; damage && i < n; i += 7)
        if (kvf_bf16_is_finite(j->o[i]) && (j->o[i] & 0x7FFF) && (j->o[i] & 0x7FFF) < 0x7F00)
            j->o[i] = (kvf_bf16)(j->o[i] + (i % 5));
    if (damage && n > 3) j->o[3] = KVF_BF16_QNAN;
    if (damage && rows > 0 && isfinite(j->lse[0]) && j->lse[0] != 0)
        j->lse[0] = kvf_f32_from_bits(kvf_f32_bits(j->lse[0]) + 3);
}

static const char *const RULES[] = {"strict", "fib", "ulp:2"};

/* Judges j under every rule, as kernel `kernel`, into s. */
static void judged_observe(kvf_stats *s, const char *kernel, judged *j) {
    kvf_error err = {0};
    kvf_stats_case ref = {j->path, j->kvfz, j->kvfz_size};
    CHECK_OK(kvf_stats_count_run(s, kernel, KVF_STATS_RAN, &err), &err);
    for (size_t r = 0; r < sizeof RULES / sizeof RULES[0]; r++) {
        kvf_rule rule;
        kvf_verdict v;
        CHECK_OK(kvf_rule_parse(&rule, RULES[r], &err), &err);
        CHECK_OK(kvf_stats_judge(s, kernel, &ref, &v, &rule, &j->c, &j->orc, j->o, j->lse, &err),
                 &err);
    }
}

static kvf_stats *stats_new(int worst_n) {
    kvf_stats *s = NULL;
    kvf_stats_opts so;
    kvf_error err = {0};
    kvf_stats_opts_default(&so);
    so.worst_n = worst_n;
    so.command = "test_reports";
    CHECK_OK(kvf_stats_create(&s, &so, &err), &err);
    return s;
}

#define NJUDGED 4
static judged J[NJUDGED];
static int judged_ready;

static void judged_all(void) {
    if (judged_ready) return;
    for (int i = 0; i < NJUDGED; i++)
        judged_make(&J[i], 100 + (uint64_t)i, i != 1);
    judged_ready = 1;
}

/* A case by hand: B = 3 sequences of lengths 0, 70 and 64 with page size 64, Hq = 2, D = 4. */
static void small_case(kvf_case *c) {
    kvf_error err = {0};
    kvf_limits lim;
    kvf_limits_default(&lim);
    CHECK_OK(kvf_case_alloc(c, 2, 1, 4, 64, 3, 3, 3, &lim, &err), &err);
    int32_t indptr[4] = {0, 0, 2, 3}, last[3] = {0, 6, 64}, idx[3] = {0, 1, 2};
    memcpy(c->kv_indptr, indptr, sizeof indptr);
    memcpy(c->kv_last_page_len, last, sizeof last);
    memcpy(c->kv_indices, idx, sizeof idx);
}

static kvf_element_error elem(kvf_output_kind out, int b, int h, int d, double abs, int64_t ulps,
                              double margin) {
    kvf_element_error e;
    memset(&e, 0, sizeof e);
    e.output = out;
    e.b = b;
    e.h = h;
    e.d = d;
    e.kernel_value = 1 + abs;
    e.rounded_value = 1;
    e.exact_value = 1;
    e.abs_error = abs;
    e.rel_error = abs / (1 + 1e-8);
    e.ulps = ulps;
    e.margin = margin;
    e.excess_margin = margin;
    e.fails = margin > 1;
    return e;
}

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

/* ------------------------------------------------------------------------------------------ */
/* Merging                                                                                     */
/* ------------------------------------------------------------------------------------------ */

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

static int count_substr(const char *hay, const char *needle);

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

/* ------------------------------------------------------------------------------------------ */
/* The stats file                                                                              */
/* ------------------------------------------------------------------------------------------ */

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void expect_format_error(const char *name, const char *text, const char *needle) {
    char path[512];
    tmp_path(path, sizeof path, name);
    write_text(path, text);
    kvf_stats *s = (kvf_stats *)1;
    kvf_error err = {0};
    CHECK_INT_EQ(kvf_stats_read(&s, path, &err), KVF_EFORMAT);
    CHECK(s == NULL);
    CHECK_STR_CONTAINS(err.msg, "malformed stats file");
    CHECK_STR_CONTAINS(err.msg, name);
    CHECK_STR_CONTAINS(err.msg, needle);
    CHECK(strchr(err.msg, '\n') == NULL);
}

static void test_roundtrip_and_malformed(void) {
    judged_all();
    kvf_error err = {0};
    kvf_stats *s = stats_new(5);
    judged_observe(s, "k", &J[0]);
    char path[512];
    tmp_path(path, sizeof path, "roundtrip.json");
    CHECK_OK(kvf_stats_write(s, path, &err), &err);
    kvf_stats *back = NULL;
    CHECK_OK(kvf_stats_read(&back, path, &err), &err);
    CHECK(back && kvf_stats_equal(s, back));
    /* The embedded case is the case's bytes: writing back gives the same file content. */
    char path2[512];
    tmp_path(path2, sizeof path2, "roundtrip2.json");
    CHECK_OK(kvf_stats_write(back, path2, &err), &err);
    char *t1 = NULL, *t2 = NULL;
    size_t n1 = 0, n2 = 0;
    if (kvf_read_file(path, &t1, &n1) != 0 || kvf_read_file(path2, &t2, &n2) != 0) {
        CHECK_FAIL_AT("cannot read back %s or %s", path, path2);
        return;
    }
    CHECK(n1 == n2 && memcmp(t1, t2, n1) == 0);
    char hex[2 * KVF_STATS_EMBED_MAX + 1];
    for (size_t i = 0; i < J[0].kvfz_size; i++)
        sprintf(hex + 2 * i, "%02x", J[0].kvfz[i]);
    CHECK_STR_CONTAINS(t1, hex);
    free(t1);
    free(t2);
    kvf_stats_free(back);
    kvf_stats_free(s);

    /* Missing file: EIO naming the path. */
    tmp_path(path, sizeof path, "does-not-exist.json");
    CHECK_INT_EQ(kvf_stats_read(&back, path, &err), KVF_EIO);
    CHECK_STR_CONTAINS(err.msg, "cannot read");
    CHECK_STR_CONTAINS(err.msg, "does-not-exist.json");

    expect_format_error("m-empty.json", "", "invalid JSON");
    expect_format_error("m-trunc.json", "{\"format\": \"kvfuzz-stats\", \"version\": 1,",
                        "invalid JSON");
    expect_format_error("m-array.json", "[1, 2]", "top level");
    expect_format_error("m-format.json", "{\"format\": \"other\"}", "format");
    expect_format_error("m-version.json", "{\"format\": \"kvfuzz-stats\", \"version\": 3}",
                        "version 3");
    expect_format_error("m-version1.json", "{\"format\": \"kvfuzz-stats\", \"version\": 1}",
                        "version 1");
    const char *head = "{\"format\": \"kvfuzz-stats\", \"version\": 2, \"buckets_per_octave\": 4, "
                       "\"bits_scale\": 1024, \"worst_n\": 2, \"require_overflow\": false, "
                       "\"kernels\": [], \"cases\": [], ";
    const char *hist_ok = "{\"total\": 1, \"zero\": 1, \"inf\": 0, \"nan\": 0, \"buckets\": []}";
    char buf[4096];
    /* A well-formed minimal file first, then one defect at a time. */
    snprintf(buf, sizeof buf,
             "%s\"groups\": [{\"kernel\": \"k\", \"rule\": \"strict\", \"cases\": 1, \"passed\": "
             "1, \"findings\": {\"nonfinite\": 0, \"o-tolerance\": 0, \"lse-tolerance\": 0, "
             "\"overflow\": 0, \"kernel-error\": 0, \"crash\": 0, \"hang\": 0, "
             "\"nondeterminism\": 0}, \"o\": %s, \"lse\": %s}]}",
             head, "OUT", "OUT");
    char out_ok[2048];
    snprintf(out_ok, sizeof out_ok,
             "{\"elements\": 1, \"violations\": 0, \"nonfinite\": 0, \"max_abs\": 0, "
             "\"max_rel\": 0, \"max_ulps\": 0, \"max_margin\": 0, \"max_excess_margin\": 0, "
             "\"hist\": {\"abs\": %s, "
             "\"rel\": %s, \"ulp\": %s, \"margin\": %s}, \"abs_vs_exact\": [[\"zero\", 0, 1]], "
             "\"by_head\": [[0, 1, 0, 0, 1, 0, 0, 0, 0]], \"by_dim\": [], \"by_seqlen\": [], "
             "\"by_slot\": [], \"worst\": []}",
             hist_ok, hist_ok, hist_ok, hist_ok);
    const char *hist_none = "{\"total\": 0, \"zero\": 0, \"inf\": 0, \"nan\": 0, \"buckets\": []}";
    char out_none[2048];
    snprintf(out_none, sizeof out_none,
             "{\"elements\": 0, \"violations\": 0, \"nonfinite\": 0, \"max_abs\": 0, "
             "\"max_rel\": 0, \"max_ulps\": 0, \"max_margin\": \"NaN\", "
             "\"max_excess_margin\": \"-Infinity\", \"hist\": {\"abs\": %s, "
             "\"rel\": %s, \"ulp\": %s, \"margin\": %s}, \"abs_vs_exact\": [], "
             "\"by_head\": [], \"by_dim\": [], \"by_seqlen\": [], \"by_slot\": [], "
             "\"worst\": []}",
             hist_none, hist_none, hist_none, hist_none);
    char good[12288];
    snprintf(good, sizeof good,
             "%s\"groups\": [{\"kernel\": \"k\", \"rule\": \"strict\", \"cases\": 1, \"passed\": "
             "1, \"out_of_model\": 0, \"rule_rejects_rounded\": 0, "
             "\"findings\": {\"nonfinite\": 0, \"o-tolerance\": 0, \"lse-tolerance\": 0, "
             "\"overflow\": 0, \"kernel-error\": 0, \"crash\": 0, \"hang\": 0, "
             "\"nondeterminism\": 0}, \"o\": %s, \"lse\": %s, "
             "\"out_of_model_rows\": {\"o\": %s, \"lse\": %s}}]}",
             head, out_ok, out_ok, out_none, out_none);
    tmp_path(path, sizeof path, "m-good.json");
    write_text(path, good);
    CHECK_OK(kvf_stats_read(&back, path, &err), &err);
    kvf_stats_free(back);
    /* Each defect: replace one fragment of the good file. */
    struct {
        const char *name, *from, *to, *needle;
    } defects[] = {
        {"m-total.json", "{\"total\": 1, \"zero\": 1", "{\"total\": 2, \"zero\": 1", "add up"},
        {"m-bucket.json", "\"buckets\": []}", "\"buckets\": [[1]]}", "buckets[0]"},
        {"m-cell.json", "[[0, 1, 0, 0, 1, 0, 0, 0, 0]]", "[[0, 1, 0]]", "by_head[0]"},
        {"m-neg.json", "\"elements\": 1", "\"elements\": -1", "elements"},
        {"m-case.json", "\"worst\": []", "\"worst\": [{\"case\": 3}]", "cases table"},
        {"m-dens.json", "[[\"zero\", 0, 1]]", "[[\"zero\", \"x\", 1]]", "abs_vs_exact[0]"},
        {"m-worstn.json", "\"worst_n\": 2", "\"worst_n\": 0", "worst_n"},
        {"m-verdicts.json", "\"out_of_model\": 0,", "\"out_of_model\": 1,", "add up to 2"},
        {"m-reqov.json", "\"require_overflow\": false", "\"require_overflow\": 0",
         "require_overflow"},
        {"m-oom.json", "\"out_of_model_rows\": {\"o\"", "\"out_of_model_rows\": {\"x\"",
         "out_of_model_rows.o"},
        {"m-nonfinite.json", "\"max_margin\": \"NaN\"", "\"max_margin\": \"nan\"", "max_margin"},
    };
    for (size_t i = 0; i < sizeof defects / sizeof defects[0]; i++) {
        char bad[12288];
        const char *at = strstr(good, defects[i].from);
        CHECK(at != NULL);
        if (!at) continue;
        snprintf(bad, sizeof bad, "%.*s%s%s", (int)(at - good), good, defects[i].to,
                 at + strlen(defects[i].from));
        expect_format_error(defects[i].name, bad, defects[i].needle);
    }
    (void)buf;
}

static int count_tmp_files(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    /* Temporaries are ".<name>.tmp.XXXXXX" (kvf_write_atomic). */
    while (d && (e = readdir(d)))
        if (e->d_name[0] == '.' && strncmp(e->d_name + 1, prefix, strlen(prefix)) == 0 &&
            strstr(e->d_name, ".tmp."))
            n++;
    if (d) closedir(d);
    return n;
}

/* A reader never sees a mix: while a child process keeps replacing the file with A or B (large
 * enough that a plain rewrite would be caught half-written), every read parses and equals one
 * of them. A failed write leaves the old file and no temporary behind. */
static void test_atomic_write(void) {
    judged_all();
    kvf_error err = {0};
    kvf_stats *a = stats_new(64), *b = stats_new(64);
    judged_observe(a, "k", &J[0]);
    judged_observe(b, "k", &J[2]);
    judged_observe(b, "other", &J[3]);
    char path[512];
    tmp_path(path, sizeof path, "atomic.json");
    CHECK_OK(kvf_stats_write(a, path, &err), &err);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size > 100000);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 400; i++)
            if (kvf_stats_write(i % 2 ? a : b, path, NULL)) _exit(1);
        _exit(0);
    }
    int reads = 0, seen_a = 0, seen_b = 0, bad_reads = 0;
    for (;;) {
        int status;
        int done = waitpid(pid, &status, WNOHANG) == pid;
        kvf_stats *r = NULL;
        if (kvf_stats_read(&r, path, &err) != 0) {
            if (bad_reads++ == 0) CHECK_FAIL_AT("a read during replacement failed: %s", err.msg);
        } else {
            reads++;
            if (kvf_stats_equal(r, a))
                seen_a++;
            else if (kvf_stats_equal(r, b))
                seen_b++;
            else if (bad_reads++ == 0)
                CHECK_FAIL_AT("a read saw neither the old nor the new statistics");
            kvf_stats_free(r);
        }
        if (done) {
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
            break;
        }
    }
    printf("  %d reads during 400 replacements: %d old, %d new\n", reads, seen_a, seen_b);
    CHECK(reads > 0);
    CHECK_INT_EQ(bad_reads, 0);
    CHECK_INT_EQ(count_tmp_files(tmp_dir(), "atomic.json"), 0);

    /* Unwritable target: a directory that does not exist. The error names the path. */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no-such-dir/stats.json", tmp_dir());
    CHECK_INT_EQ(kvf_stats_write(a, bad, &err), KVF_EIO);
    CHECK_STR_CONTAINS(err.msg, "cannot write");
    CHECK_STR_CONTAINS(err.msg, "no-such-dir");
    /* A path that is a directory: rename fails, the temporary is removed. */
    char dirpath[600];
    snprintf(dirpath, sizeof dirpath, "%s/a-directory", tmp_dir());
    mkdir(dirpath, 0755);
    CHECK_INT_EQ(kvf_stats_write(a, dirpath, &err), KVF_EIO);
    CHECK_INT_EQ(count_tmp_files(tmp_dir(), "a-directory"), 0);

    /* tick: an interval of 0 writes at once; an hour does not write. */
    kvf_stats *t = NULL;
    kvf_stats_opts so;
    kvf_stats_opts_default(&so);
    so.flush_interval_s = 3600;
    CHECK_OK(kvf_stats_create(&t, &so, &err), &err);
    char tick[512];
    tmp_path(tick, sizeof tick, "tick.json");
    CHECK_OK(kvf_stats_tick(t, tick, &err), &err);
    CHECK(access(tick, F_OK) != 0);
    kvf_stats_free(t);
    so.flush_interval_s = 0;
    CHECK_OK(kvf_stats_create(&t, &so, &err), &err);
    CHECK_OK(kvf_stats_tick(t, tick, &err), &err);
    CHECK(access(tick, F_OK) == 0);
    kvf_stats_free(t);
    kvf_stats_free(a);
    kvf_stats_free(b);
}

/* ------------------------------------------------------------------------------------------ */
/* Reports                                                                                     */
/* ------------------------------------------------------------------------------------------ */

static const json_t *jpath(const json_t *v, const char *path) {
    char key[64];
    while (v && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        snprintf(key, sizeof key, "%.*s", (int)n, path);
        if (json_is_array(v))
            v = json_array_get(v, (size_t)atoi(key));
        else
            v = json_object_get(v, key);
        path += n + (dot != NULL);
    }
    return v;
}

#define CHECK_KEY(root, path)                                                                      \
    do {                                                                                           \
        if (!jpath((root), (path))) CHECK_FAIL_AT("summary.json has no %s", (path));               \
    } while (0)

static int count_substr(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
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

    /* index.html: every chart has a data-marks count, the self-check, no network. */
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

    /* The embedded cases were written back byte for byte. */
    snprintf(p, sizeof p, "%s/cases/%016llx.kvfz", out,
             (unsigned long long)kvf_hash64(J[0].kvfz, J[0].kvfz_size));
    CHECK(kvf_read_file(p, &text, &size) == 0);
    CHECK(size == J[0].kvfz_size && memcmp(text, J[0].kvfz, size) == 0);
    free(text);

    /* Errors: an output path that is a file, a findings directory that does not exist. */
    snprintf(p, sizeof p, "%s/o-tolerance-0123abcd4567ef89.kvfz", fdir);
    kvf_report_opts bad = {p, NULL, NULL, NULL};
    CHECK_INT_EQ(kvf_report_write(in, 2, &bad, NULL, &err), KVF_EIO);
    CHECK_STR_CONTAINS(err.msg, "o-tolerance-0123abcd4567ef89.kvfz");
    snprintf(p, sizeof p, "%s/no-findings-here", tmp_dir());
    kvf_report_opts bad2 = {out, p, NULL, NULL};
    CHECK_INT_EQ(kvf_report_write(in, 2, &bad2, NULL, &err), KVF_EIO);
    CHECK_STR_CONTAINS(err.msg, "no-findings-here");
    CHECK_INT_EQ(kvf_report_write(in, 0, &ro, NULL, &err), KVF_EINVAL);

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
    kvf_stats_free(s1);
    kvf_stats_free(s2);
}

/* ------------------------------------------------------------------------------------------ */
/* Precision attribution of findings                                                           */
/* ------------------------------------------------------------------------------------------ */

/* A finding report as the fuzzer writes it (fuzz/src/finding_json.c), with `attribution` as
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
    {"bucket_edges", test_bucket_edges},
    {"special_values", test_special_values},
    {"pending_matches_single", test_pending_matches_single},
    {"coordinate_classes", test_coordinate_classes},
    {"merge", test_merge},
    {"merge_shard", test_merge_shard},
    {"stats_sink", test_stats_sink},
    {"judge_wrapper", test_judge_wrapper},
    {"roundtrip_and_malformed", test_roundtrip_and_malformed},
    {"atomic_write", test_atomic_write},
    {"report_files", test_report_files},
    {"report_empty", test_report_empty},
    {"report_attribution_precision", test_report_attribution_precision},
    {"report_attribution_mixed", test_report_attribution_mixed},
    {"report_attribution_malformed", test_report_attribution_malformed},
    {NULL, NULL},
};

CHECK_MAIN(tests)
