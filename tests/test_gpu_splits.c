/* GPU tests, split-KV plans and their merges: merges of more splits than the merge kernel weighs
 * in one round, and split CTAs beyond one wave ordered longest first, judged by the MPFR oracle
 * under `strict` and rerun for the same bits. Skips (exit 77) when no usable CUDA device is
 * present. */
#include "gpu_fixtures.h"

/* ---- merges of many splits --------------------------------------------------------------- */

/* One tile per split (KVF_CUDA_CHUNK_TILES=1) gives a long sequence more splits than the merge
 * kernel weighs in one round (8 warps x 8 splits, merge.cuh), next to a single-split and an
 * empty sequence, for groups 1, 8 and 16 and every head dim. One state runs every shape twice
 * in turn, so each plan and workspace is reused after a different shape: each run is judged by
 * the oracle under strict, and the two runs of a shape must agree bit for bit (a merge that read
 * partial states left by the previous shape would not). */
typedef struct merge_shape {
    uint8_t hq, hk;
    uint16_t d, s;
    uint16_t pages[3]; /* per sequence; 0 is an empty sequence */
} merge_shape;

/* A case of the seed preset's values with the given shape and pages per sequence (0: empty),
 * last pages filled to 1 + (seed + b) % s slots. */
static int batch_case(kvf_case *c, kvf_spec *spec, int hq, int hk, int d, int s, int batch,
                      const uint16_t *pages, uint64_t seed, kvf_error *err) {
    memset(c, 0, sizeof *c);
    if (kvf_spec_preset(spec, "seed-h20kv4", seed, err)) return -1;
    kvf_recipe *r = &spec->recipe;
    r->num_qo_heads = hq, r->num_kv_heads = hk, r->head_dim = d, r->page_size = s;
    r->sm_scale = 1.0f / sqrtf((float)d);
    free(r->num_pages);
    free(r->last_page_len);
    r->batch_size = batch;
    r->num_pages = calloc((size_t)batch, sizeof *r->num_pages);
    r->last_page_len = calloc((size_t)batch, sizeof *r->last_page_len);
    if (!r->num_pages || !r->last_page_len) return -1;
    for (int b = 0; b < batch; b++) {
        r->num_pages[b] = pages[b];
        r->last_page_len[b] = pages[b] ? (uint16_t)(1 + (seed + (uint64_t)b) % s) : 0;
    }
    kvf_limits lim;
    kvf_limits_default(&lim);
    return kvf_case_build(c, spec, &lim, err);
}

static int merge_case(kvf_case *c, kvf_spec *spec, const merge_shape *m, uint64_t seed,
                      kvf_error *err) {
    return batch_case(c, spec, m->hq, m->hk, m->d, m->s, 3, m->pages, seed, err);
}

static void test_merge_many_splits(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    static const merge_shape shapes[] = {
        {20, 4, 128, 64, {150, 1, 0}}, /* the seed shape: 150 splits, three merge rounds */
        {16, 1, 64, 16, {0, 40, 2}},   /* group 16, D 64: 10 tiles of 4 pages */
        {2, 2, 256, 32, {70, 0, 1}},   /* group 1, D 256: tiles of 32 tokens */
        {32, 2, 256, 64, {1, 66, 3}},  /* group 16, D 256 */
        {8, 1, 128, 128, {3, 33, 0}},  /* pages of two tiles */
    };
    const int n_shapes = (int)(sizeof shapes / sizeof shapes[0]);
    setenv("KVF_CUDA_CHUNK_TILES", "1", 1);
    const kvf_kernel *kern = kvf_kernel_find("cuda");
    CHECK(kern != NULL);
    kvf_error err = {0};
    void *st = NULL;
    if (kern) CHECK_OK(kvf_kernel_create(kern, &st, &err), &err);
    kvf_rule strict;
    CHECK_OK(kvf_rule_parse(&strict, "strict", &err), &err);
    const kvf_oracle_opts oo = oracle_on_every_core();
    kvf_case cs[sizeof shapes / sizeof shapes[0]];
    kvf_spec specs[sizeof shapes / sizeof shapes[0]];
    kvf_oracle_result orcs[sizeof shapes / sizeof shapes[0]];
    run_outputs first[sizeof shapes / sizeof shapes[0]];
    memset(orcs, 0, sizeof orcs);
    /* Every case and its oracle result first, so that the runs follow each other on one plan. */
    int built = 0;
    const int failures_before = check_failures;
    for (; st && built < n_shapes && check_failures == failures_before; built++) {
        CHECK_OK(merge_case(&cs[built], &specs[built], &shapes[built], 40 + (uint64_t)built, &err),
                 &err);
        if (check_failures == failures_before)
            CHECK_OK(kvf_oracle_run(&orcs[built], &cs[built], &oo, &err), &err);
        first[built] = outputs_for(&cs[built]);
    }
    for (int round = 0; round < 2 && built == n_shapes && check_failures == failures_before;
         round++) {
        for (int i = 0; i < n_shapes; i++) {
            run_outputs out = round == 0 ? first[i] : outputs_for(&cs[i]);
            CHECK_OK(kvf_kernel_run(kern, st, &cs[i], out.o, out.lse, &err), &err);
            kvf_verdict v;
            CHECK_OK(kvf_judge(&v, &strict, &cs[i], &orcs[i], out.o, out.lse, &err), &err);
            if (!v.pass)
                CHECK_FAIL_AT("shape %d (Hq %d, Hk %d, D %d, S %d), run %d fails strict: %s, %lld "
                              "o and %lld lse violations",
                              i, shapes[i].hq, shapes[i].hk, shapes[i].d, shapes[i].s, round + 1,
                              kvf_finding_class_name(v.finding), (long long)v.o.violations,
                              (long long)v.lse.violations);
            if (round == 1) {
                if (!outputs_same_bits(&first[i], &out))
                    CHECK_FAIL_AT("shape %d gives different bits on its second run", i);
                outputs_free(&out);
            }
        }
    }
    printf("  %d shapes, up to 150 splits of one sequence, each run twice on one state\n",
           n_shapes);
    for (int i = 0; i < built; i++) {
        outputs_free(&first[i]);
        kvf_oracle_result_free(&orcs[i]);
        kvf_case_free(&cs[i]);
        kvf_spec_free(&specs[i]);
    }
    if (st) kvf_kernel_destroy(kern, st);
    unsetenv("KVF_CUDA_CHUNK_TILES");
}

/* ---- CTAs beyond one wave ---------------------------------------------------------------- */

/* Sequences of different lengths whose split CTAs overflow one wave, at the plan's own chunk:
 * the plan orders their items longest first and each CTA writes its partial state to its
 * sequence's merge row (kernels/cuda/split_plan.h). 48 sequences of the seed shape, shortest
 * first, 1 to 142 pages, two of them empty; judged by the oracle under strict, and a second run
 * on the same state must give the same bits. Its 960 rows of at most 3 splits go through the
 * merge that gives each row a warp (merge.cuh); merge_many_splits's through the other. */
static void test_longest_first_batch(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    uint16_t pages[48];
    for (int b = 0; b < 48; b++)
        pages[b] = (uint16_t)(b == 7 || b == 30 ? 0 : 3 * b + 1);
    const kvf_kernel *kern = kvf_kernel_find("cuda");
    CHECK(kern != NULL);
    if (!kern) return;
    kvf_error err = {0};
    void *st = NULL;
    CHECK_OK(kvf_kernel_create(kern, &st, &err), &err);
    kvf_spec spec;
    kvf_case c;
    kvf_oracle_result orc;
    memset(&orc, 0, sizeof orc);
    kvf_rule strict;
    CHECK_OK(kvf_rule_parse(&strict, "strict", &err), &err);
    const kvf_oracle_opts oo = oracle_on_every_core();
    CHECK_OK(batch_case(&c, &spec, 20, 4, 128, 64, 48, pages, 77, &err), &err);
    CHECK_OK(kvf_oracle_run(&orc, &c, &oo, &err), &err);
    run_outputs out[2] = {outputs_for(&c), outputs_for(&c)};
    for (int r = 0; st && r < 2; r++) {
        CHECK_OK(kvf_kernel_run(kern, st, &c, out[r].o, out[r].lse, &err), &err);
        kvf_verdict v;
        CHECK_OK(kvf_judge(&v, &strict, &c, &orc, out[r].o, out[r].lse, &err), &err);
        if (!v.pass)
            CHECK_FAIL_AT("run %d fails strict: %s, %lld o and %lld lse violations", r + 1,
                          kvf_finding_class_name(v.finding), (long long)v.o.violations,
                          (long long)v.lse.violations);
    }
    if (!outputs_same_bits(&out[0], &out[1])) CHECK_FAIL_AT("the second run gives other bits");
    char facts[256] = "";
    if (st) kvf_kernel_describe(kern, st, facts, sizeof facts);
    printf("  48 sequences of 0 to 142 pages: %s\n", facts);
    outputs_free(&out[0]);
    outputs_free(&out[1]);
    kvf_oracle_result_free(&orc);
    kvf_case_free(&c);
    kvf_spec_free(&spec);
    if (st) kvf_kernel_destroy(kern, st);
}

static const check_test tests[] = {
    {"merge_many_splits", test_merge_many_splits},
    {"longest_first_batch", test_longest_first_batch},
    {NULL, NULL},
};

CHECK_MAIN(tests)
