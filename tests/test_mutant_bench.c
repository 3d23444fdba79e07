/* The mutant benchmark's library (kvfuzz/mutant_bench.h): the case cache, a campaign that
 * catches a mutant and one that leaves the control alone, the seed table, and a whole run's
 * result struct and JSON. Small budgets: the mutant is caught within a few generated cases. */
#include <jansson.h>

#include "check.h"
#include "kvfuzz/mutant_bench.h"
#include "kvfuzz/test_kernels.h"

#define MUTANT "cpu-splitkv/mut=trunc-store"

static void cases_init(kvf_mutant_cases *cache, uint64_t seed) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_mutant_cases_init(cache, seed, &lim, 2);
}

static int case_equal(const kvf_mutant_case *a, const kvf_mutant_case *b) {
    int64_t no = kvf_case_o_elems(&a->c), nl = kvf_case_lse_elems(&a->c);
    return a->ok && b->ok && no == kvf_case_o_elems(&b->c) && nl == kvf_case_lse_elems(&b->c) &&
           a->c.head_dim == b->c.head_dim && a->c.page_size == b->c.page_size &&
           memcmp(a->oracle.o_rounded, b->oracle.o_rounded, (size_t)no * sizeof(kvf_bf16)) == 0 &&
           memcmp(a->oracle.lse_rounded, b->oracle.lse_rounded, (size_t)nl * sizeof(float)) == 0;
}

/* The same seed gives the same cases, in any order of first use; another seed others. */
static void test_cache_same_cases(void) {
    kvf_mutant_cases a, b, c;
    cases_init(&a, 7);
    cases_init(&b, 7);
    cases_init(&c, 8);
    const kvf_mutant_case *a2 = kvf_mutant_cases_get(&a, 2);
    CHECK(a2 && a2->ok && a2->present && a2->prepare_seconds > 0);
    CHECK_INT_EQ(a.count, 3);
    for (size_t i = 0; i < 3; i++) {
        const kvf_mutant_case *x = kvf_mutant_cases_get(&a, i), *y = kvf_mutant_cases_get(&b, i);
        CHECK(x && y && case_equal(x, y));
    }
    /* Case i of seed 7 is case i - 1 of seed 8: one sequence of generator seeds. */
    CHECK(case_equal(kvf_mutant_cases_get(&a, 1), kvf_mutant_cases_get(&c, 0)));
    CHECK(!case_equal(kvf_mutant_cases_get(&a, 0), kvf_mutant_cases_get(&c, 0)));
    /* The kept prefix survives a release. */
    kvf_mutant_cases_release(&a, 0);
    CHECK(a.cases[0].present);
    kvf_mutant_cases_free(&a);
    kvf_mutant_cases_free(&b);
    kvf_mutant_cases_free(&c);
}

static void test_campaign(void) {
    const kvf_kernel *mut = kvf_kernel_find(MUTANT), *ctl = kvf_kernel_find("cpu-splitkv");
    CHECK(mut && ctl);
    if (!mut || !ctl) return;
    kvf_rule rules[KVF_DEFAULT_RULES];
    int n = kvf_rule_default_set(rules, KVF_DEFAULT_RULES);
    kvf_mutant_cases cache;
    cases_init(&cache, 1);
    kvf_mutant_detection d;
    kvf_error err = {0};
    CHECK_OK(kvf_mutant_campaign(&d, mut, &cache, &rules[0], 1, 10, &err), &err);
    CHECK(d.caught);
    CHECK_STR_EQ(d.finding, "o-tolerance");
    CHECK(d.cases >= 1 && d.cases < 40 && d.seconds > 0);
    /* The control, under both rules at once, over the same cached cases. */
    CHECK_OK(kvf_mutant_campaign(&d, ctl, &cache, rules, n, 0.3, &err), &err);
    CHECK(!d.caught);
    CHECK_STR_EQ(d.finding, "");
    CHECK(d.cases >= 1 && d.seconds >= 0.3);
    /* A kernel that cannot start is an error, not a detection. */
    CHECK(kvf_mutant_campaign(&d, kvf_fuzz_kernel_find("test-nostart"), &cache, rules, n, 1,
                              &err) != 0);
    CHECK(err.msg[0] != '\0' && !d.caught);
    kvf_mutant_cases_free(&cache);
}

/* The seed table's judgement: the first seed files, the mutant against the control. */
static void test_seeds(void) {
    const char *src = getenv("KVF_SOURCE_DIR");
    if (!src) CHECK_SKIP("KVF_SOURCE_DIR is not set");
    char p0[1024], p1[1024];
    snprintf(p0, sizeof p0, "%s/corpus/seeds/01-mixed-lengths.kvfz", src);
    snprintf(p1, sizeof p1, "%s/corpus/seeds/no-such-file.kvfz", src);
    char *paths[2] = {p0, p1};
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    kvf_mutant_seeds s;
    kvf_error err = {0};
    CHECK_OK(kvf_mutant_seeds_load(&s, paths, 2, &lim, &oo, NULL, NULL, &err), &err);
    CHECK_INT_EQ(s.count, 2);
    CHECK_STR_EQ(s.names[0], "01-mixed-lengths.kvfz");
    CHECK(s.ok[0] && !s.ok[1]);
    kvf_rule rules[1];
    kvf_rule_default_set(rules, 1);
    int fails[2] = {-1, -1};
    CHECK_OK(kvf_mutant_seeds_judge(kvf_kernel_find("cpu-splitkv"), &s, rules, 1, fails, &err),
             &err);
    CHECK(fails[0] == 0 && fails[1] == 0);
    kvf_mutant_seeds_free(&s);
    CHECK_INT_EQ(s.count, 0);
}

static int events[3];
static void count_event(void *ctx, kvf_mutant_event ev, const kvf_mutant_result *r) {
    (void)ctx;
    CHECK((ev == KVF_MUTANT_CONTROLS_BEGIN) == (r == NULL));
    events[ev]++;
}

/* A whole run: one mutant, one control; every field of the result. */
static void test_bench_run(void) {
    kvf_mutant_entry mutants[1] = {{kvf_kernel_find(MUTANT), {0}}};
    kvf_mutant_entry controls[1] = {{kvf_kernel_find("cpu-splitkv"), {0}}};
    kvf_mutant_opts o = {0};
    o.mutants = mutants;
    o.nmutants = 1;
    o.controls = controls;
    o.ncontrols = 1;
    o.budget = 10;
    o.controls_budget = 0.3;
    o.seed = 1;
    o.threads = 2;
    kvf_limits_default(&o.limits);
    o.progress = count_event;
    kvf_mutant_bench b;
    kvf_error err = {0};
    CHECK_OK(kvf_mutant_bench_run(&b, &o, &err), &err);
    CHECK(events[KVF_MUTANT_MUTANT_DONE] == 1 && events[KVF_MUTANT_CONTROLS_BEGIN] == 1 &&
          events[KVF_MUTANT_CONTROL_DONE] == 1);
    CHECK_INT_EQ(b.nmutants, 1);
    CHECK_INT_EQ(b.ncontrols, 1);
    CHECK_INT_EQ(b.nrules, KVF_DEFAULT_RULES + 1);
    CHECK_STR_EQ(b.rules[0].name, "strict");
    CHECK_STR_EQ(b.rules[b.nrules - 1].name, "fib");
    const kvf_mutant_result *m = &b.mutants[0];
    CHECK(m->kernel == mutants[0].kernel && m->kvfuzz.caught);
    CHECK_STR_EQ(m->kvfuzz.finding, "o-tolerance");
    CHECK(m->per_rule[0].caught && m->kvfuzz.cases <= m->per_rule[0].cases);
    /* As the CPU table has it: FlashInfer-Bench-style testing misses a truncating store,
     * FlashInfer-test-style testing catches it. */
    CHECK(m->fib_bench == 0 && m->fi_tests == 1);
    CHECK(m->seed_fails != NULL);
    CHECK(!b.controls[0].kvfuzz.caught && b.controls[0].nrules == KVF_DEFAULT_RULES);
    CHECK(b.survivors == 0 && b.noisy_controls == 0 && b.rule_kills[0] == 1);
    CHECK(b.missed_fib_bench == 1 && b.missed_fi_tests == 0 && !b.start_kernel);
    char buf[32];
    kvf_mutant_seed_list(&b, m, 0, buf, sizeof buf);
    CHECK_STR_EQ(buf, "-"); /* no seed table */
    json_t *j = kvf_mutant_bench_json(&b, "cpu", 10);
    CHECK(j != NULL);
    CHECK_INT_EQ(json_integer_value(json_object_get(j, "killed")), 1);
    json_t *jm = json_array_get(json_object_get(j, "mutants"), 0);
    CHECK_STR_EQ(json_string_value(json_object_get(jm, "kernel")), MUTANT);
    CHECK(json_is_false(json_object_get(jm, "fib_bench")));
    CHECK(json_object_get(json_object_get(jm, "per_rule"), "fib") != NULL);
    json_decref(j);
    kvf_mutant_bench_free(&b);

    /* A control that cannot start ends the run and is named. */
    controls[0].kernel = kvf_fuzz_kernel_find("test-nostart");
    o.nmutants = 0;
    CHECK(kvf_mutant_bench_run(&b, &o, &err) != 0);
    CHECK(b.start_kernel && strcmp(b.start_kernel, "test-nostart") == 0);
    CHECK_INT_EQ(b.ncontrols, 0);
    kvf_mutant_bench_free(&b);
}

static const check_test tests[] = {
    {"cache_same_cases", test_cache_same_cases},
    {"campaign", test_campaign},
    {"seeds", test_seeds},
    {"bench_run", test_bench_run},
    {NULL, NULL},
};

CHECK_MAIN(tests)
