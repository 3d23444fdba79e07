/* GPU tests, graph replay (docs/invariance.md): cuda-naive, whose launch depends only on the
 * shape, gives its eager bits when run() is captured in a CUDA graph on a shorter batch and
 * replayed after plan(); the mutant cuda-naive/mut=baked-max-seq-len agrees with cuda-naive
 * eagerly and breaks the relation; the split kernel's replays run; a replay across shape
 * classes is refused. Skips (exit 77) when no usable CUDA device is present. */
#include "gpu_fixtures.h"

#include "kvfuzz/relation.h"

typedef struct graph_tally {
    long cases, held, broken;
} graph_tally;

/* Eager run of c, then the graph-replay relation's run; counts whether the bits agree. */
static void relate_once(const kvf_kernel *k, void *st, const kvf_case *c, uint64_t seed,
                        const kvf_kernel *eager_ref, void *ref_st, graph_tally *t) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_relation_pair p;
    kvf_error err = {0};
    if (kvf_relation_derive(&p, KVF_RELATION_GRAPH_REPLAY, c, seed, &lim, &err)) return;
    run_outputs eager = outputs_for(c), replayed = outputs_for(c), ref = outputs_for(c);
    CHECK_OK(kvf_kernel_run(k, st, c, eager.o, eager.lse, &err), &err);
    if (eager_ref) { /* the mutant is right when run eagerly */
        CHECK_OK(kvf_kernel_run(eager_ref, ref_st, c, ref.o, ref.lse, &err), &err);
        if (!outputs_same_bits(&eager, &ref))
            CHECK_FAIL_AT("%s differs from %s on an eager run (seed 0x%llx)", k->name,
                          eager_ref->name, (unsigned long long)seed);
    }
    CHECK_OK(kvf_kernel_graph_replay(k, st, &p.derived, c, replayed.o, replayed.lse, &err), &err);
    kvf_relation_diff first;
    t->cases++;
    if (kvf_relation_compare(&p, c, eager.o, eager.lse, replayed.o, replayed.lse, &first) == 0)
        t->held++;
    else
        t->broken++;
    /* The state still runs eagerly after a replay, with the same bits. */
    run_outputs again = outputs_for(c);
    CHECK_OK(kvf_kernel_run(k, st, c, again.o, again.lse, &err), &err);
    CHECK(outputs_same_bits(&eager, &again));
    outputs_free(&again);
    outputs_free(&eager);
    outputs_free(&replayed);
    outputs_free(&ref);
    kvf_relation_pair_free(&p);
}

static void run_kernel(const char *name, const char *ref_name, graph_tally *t) {
    const kvf_kernel *k = kvf_kernel_find(name);
    const kvf_kernel *ref = ref_name ? kvf_kernel_find(ref_name) : NULL;
    CHECK(k != NULL);
    if (!k) return;
    kvf_error err = {0};
    void *st = NULL, *ref_st = NULL;
    CHECK_OK(kvf_kernel_create(k, &st, &err), &err);
    if (ref) CHECK_OK(kvf_kernel_create(ref, &ref_st, &err), &err);
    kvf_random_opts ro;
    random_opts(&ro);
    kvf_limits lim;
    kvf_limits_default(&lim);
    long n = env_long("KVF_GPU_CASES", GPU_CASES_DEFAULT, 1, 100000000) / 20;
    if (n < 8) n = 8;
    for (long i = 0; st && i < n; i++) {
        kvf_spec spec;
        kvf_case c;
        memset(&c, 0, sizeof c);
        const uint64_t seed = GPU_SEED_BASE + 0x200000 + (uint64_t)i;
        if (kvf_spec_random(&spec, seed, &ro, &err) || kvf_case_build(&c, &spec, &lim, &err)) {
            CHECK_FAIL_AT("seed 0x%llx does not build: %s", (unsigned long long)seed, err.msg);
            kvf_spec_free(&spec);
            continue;
        }
        relate_once(k, st, &c, seed, ref, ref_st, t);
        kvf_case_free(&c);
        kvf_spec_free(&spec);
    }
    kvf_kernel_destroy(k, st);
    if (ref) kvf_kernel_destroy(ref, ref_st);
    printf("  %s: %ld replays, %ld held, %ld broken\n", name, t->cases, t->held, t->broken);
}

static void test_naive_holds_graph_replay(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    graph_tally t = {0};
    run_kernel("cuda-naive", NULL, &t);
    CHECK(t.cases >= 4);
    CHECK_INT_EQ(t.broken, 0);
    CHECK(kvf_kernel_promises(kvf_kernel_find("cuda-naive")) &
          KVF_RELATION_BIT(KVF_RELATION_GRAPH_REPLAY));
}

static void test_baked_mutant_breaks_graph_replay(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    graph_tally t = {0};
    run_kernel("cuda-naive/mut=baked-max-seq-len", "cuda-naive", &t);
    CHECK(t.cases >= 4);
    CHECK(t.broken > 0);
}

/* The split kernel (a property, not a promise): plan() after a captured run() leaves the graph
 * the schedule its launch was captured with and takes new buffers, so every replay runs (no CUDA
 * API error: an event recorded under the capture was once waited on), reads in bounds, and
 * gives the eager bits where the schedule did not change; the state then runs eagerly with its
 * own bits. */
static void test_split_replay_runs(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    graph_tally t = {0};
    run_kernel("cuda", NULL, &t);
    CHECK(t.cases >= 4);
    CHECK(t.held > 0);
}

/* A replay needs the capture's shape class: another batch size is refused, not run. */
static void test_replay_refuses_another_class(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    const kvf_kernel *k = kvf_kernel_find("cuda-naive");
    kvf_error err = {0};
    void *st = NULL;
    CHECK_OK(kvf_kernel_create(k, &st, &err), &err);
    kvf_random_opts ro;
    random_opts(&ro);
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_case a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    int have = 0;
    for (uint64_t seed = GPU_SEED_BASE; seed < GPU_SEED_BASE + 64 && have < 2; seed++) {
        kvf_spec spec;
        kvf_case c;
        memset(&c, 0, sizeof c);
        if (kvf_spec_random(&spec, seed, &ro, &err) == 0 &&
            kvf_case_build(&c, &spec, &lim, &err) == 0 &&
            (have == 0 || c.batch_size != a.batch_size)) {
            if (have++ == 0)
                a = c;
            else
                b = c;
        } else {
            kvf_case_free(&c);
        }
        kvf_spec_free(&spec);
    }
    CHECK_INT_EQ(have, 2);
    if (have == 2 && st) {
        run_outputs out = outputs_for(&b);
        CHECK_INT_EQ(kvf_kernel_graph_replay(k, st, &a, &b, out.o, out.lse, &err), KVF_EINVAL);
        CHECK(strstr(err.msg, "shape class") != NULL);
        outputs_free(&out);
    }
    kvf_case_free(&a);
    kvf_case_free(&b);
    kvf_kernel_destroy(k, st);
}

static const check_test tests[] = {
    {"naive_holds_graph_replay", test_naive_holds_graph_replay},
    {"baked_mutant_breaks_graph_replay", test_baked_mutant_breaks_graph_replay},
    {"split_replay_runs", test_split_replay_runs},
    {"replay_refuses_another_class", test_replay_refuses_another_class},
    {NULL, NULL},
};

CHECK_MAIN(tests)
