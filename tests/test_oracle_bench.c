/* The oracle benchmark (kvfuzz/oracle_bench.h) on a few small cases: the generated and loaded
 * sets, the two paths timed and compared, and the judge stage with and without hooks. */
#include <unistd.h>

#include "check.h"
#include "kvfuzz/oracle_bench.h"

static void test_generate(void) {
    kvf_oracle_bench_set a = {0}, b = {0};
    kvf_error err = {0};
    double sa = -1, sb = -1;
    CHECK_OK(kvf_oracle_bench_generate(&a, 5, 11, &sa, &err), &err);
    CHECK_OK(kvf_oracle_bench_generate(&b, 5, 11, &sb, &err), &err);
    CHECK_INT_EQ(a.n, 5);
    CHECK(a.specs != NULL && sa >= 0 && sb >= 0);
    int64_t tokens = 0, rows = 0;
    for (int64_t i = 0; i < a.n; i++) {
        tokens += kvf_case_total_tokens(&a.cases[i]);
        rows += (int64_t)a.cases[i].batch_size * a.cases[i].num_qo_heads;
        /* The same seed, the same cases. */
        CHECK(a.cases[i].batch_size == b.cases[i].batch_size &&
              a.cases[i].head_dim == b.cases[i].head_dim &&
              memcmp(a.cases[i].q, b.cases[i].q, (size_t)kvf_case_q_elems(&a.cases[i]) * 2) == 0);
    }
    CHECK_INT_EQ(a.tokens, tokens);
    CHECK_INT_EQ(a.rows, rows);
    CHECK(rows > 0);
    kvf_oracle_bench_set_free(&a);
    kvf_oracle_bench_set_free(&b);
    CHECK(a.n == 0 && a.cases == NULL);
}

/* Case files: loaded in order; a file that cannot be read is named by its index. */
static void test_load(void) {
    kvf_oracle_bench_set g = {0}, s = {0};
    kvf_error err = {0};
    double t = 0;
    CHECK_OK(kvf_oracle_bench_generate(&g, 1, 3, &t, &err), &err);
    char dir[] = "/tmp/kvfuzz-test-oracle-bench-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char good[128], missing[128];
    snprintf(good, sizeof good, "%s/one.kvfz", dir);
    snprintf(missing, sizeof missing, "%s/none.kvfz", dir);
    CHECK_OK(kvf_spec_save(&g.specs[0], good, &err), &err);
    kvf_limits lim;
    kvf_limits_default(&lim);
    char *paths[3] = {good, good, missing};
    int failed = 7;
    double build_s = 0;
    CHECK(kvf_oracle_bench_load(&s, paths, 3, &lim, &build_s, &failed, &err) < 0);
    CHECK_INT_EQ(failed, 2);
    CHECK_INT_EQ(s.n, 2);
    CHECK(s.specs == NULL && build_s >= 0);
    CHECK_INT_EQ(s.tokens, 2 * g.tokens);
    CHECK_OK(kvf_oracle_bench_load(&s, paths, 1, &lim, &build_s, &failed, &err), &err);
    CHECK_INT_EQ(failed, -1);
    CHECK_INT_EQ(s.n, 3);
    unlink(good);
    rmdir(dir);
    kvf_oracle_bench_set_free(&s);
    kvf_oracle_bench_set_free(&g);
}

/* Both paths agree bit for bit; only the fast path certifies rows, handing the rest over. */
static void test_paths(void) {
    kvf_oracle_bench_set s = {0};
    kvf_error err = {0};
    double t;
    CHECK_OK(kvf_oracle_bench_generate(&s, 4, 5, &t, &err), &err);
    kvf_oracle_bench_path pr[2] = {{-1, 0, 0}, {-1, 0, 0}};
    int64_t mismatched = 0;
    CHECK_OK(kvf_oracle_bench_paths(&s, 2, pr, &mismatched, &err), &err);
    CHECK_INT_EQ(mismatched, 0);
    CHECK(pr[0].best_s >= 0 && pr[1].best_s >= 0);
    CHECK_INT_EQ(kvf_oracle_bench_path_ids[0], KVF_ORACLE_MPFR);
    CHECK_INT_EQ(pr[0].fast_rows, 0);
    CHECK_INT_EQ(pr[1].fast_rows + pr[1].fallback_rows, s.rows);
    kvf_oracle_bench_set_free(&s);
}

typedef struct hook_count {
    int cases, rules, refuse;
} hook_count;

static void *count_begin(void *ctx, int rule) {
    ((hook_count *)ctx)->rules++;
    (void)rule;
    return NULL; /* the rule's elements are not observed */
}

static void count_end(void *ctx, void *scope, const kvf_verdict *v) {
    (void)ctx, (void)scope, (void)v;
}

static int count_hooks(void *ctx, int thread, const kvf_spec *spec, const kvf_case *c,
                       kvf_judge_hooks *hooks) {
    hook_count *hc = ctx;
    CHECK_INT_EQ(thread, 0);
    CHECK(spec != NULL && c != NULL);
    hc->cases++;
    if (hc->refuse) return -1;
    memset(hooks, 0, sizeof *hooks);
    hooks->begin = count_begin;
    hooks->end = count_end;
    hooks->ctx = hc;
    return 0;
}

/* The judge stage: cpu-splitkv's outputs under the default rules, the hooks asked once per case
 * of each hooked run and used for every rule. */
static void test_judge(void) {
    kvf_oracle_bench_set s = {0};
    kvf_oracle_bench_inputs in;
    kvf_error err = {0};
    double t, best[2] = {-2, -2};
    CHECK_OK(kvf_oracle_bench_generate(&s, 3, 9, &t, &err), &err);
    CHECK_OK(kvf_oracle_bench_inputs_make(&s, &in, &err), &err);
    CHECK_INT_EQ(in.n, 3);
    CHECK_INT_EQ(in.nrules, KVF_DEFAULT_RULES);
    CHECK(strcmp(in.kernel, "cpu-splitkv") == 0);
    hook_count hc = {0, 0, 0};
    CHECK_OK(kvf_oracle_bench_judge(&s, &in, 2, count_hooks, &hc, best, &err), &err);
    CHECK(best[0] >= 0 && best[1] >= 0);
    CHECK_INT_EQ(hc.cases, 2 * 3);
    CHECK_INT_EQ(hc.rules, 2 * 3 * KVF_DEFAULT_RULES);
    hc = (hook_count){0, 0, 1}; /* refused: judged without hooks */
    CHECK_OK(kvf_oracle_bench_judge(&s, &in, 1, count_hooks, &hc, best, &err), &err);
    CHECK(hc.cases == 3 && hc.rules == 0);
    kvf_oracle_bench_inputs_free(&in);
    CHECK(in.n == 0 && in.oracle == NULL);
    kvf_oracle_bench_set_free(&s);
}

static const check_test tests[] = {
    {"generate", test_generate}, {"load", test_load}, {"paths", test_paths},
    {"judge", test_judge},       {NULL, NULL},
};

CHECK_MAIN(tests)
