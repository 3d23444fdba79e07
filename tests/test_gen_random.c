/* Unit test of random recipes (core/src/gen_random.c, kvf_spec_random): 400 small recipes
 * round-trip through the codec, build the same case, and together draw every page-table
 * strategy, logit pattern, distribution, GQA group, poison bit and an empty sequence. Both
 * expansions; the recipes' bits are pinned by tests/test_gen_hash.c. */
#include "spec_fixtures.h"

static void test_random_round_trip_and_coverage(void) {
    kvf_limits lim = limits();
    kvf_random_opts o = small_random_opts();
    int tables[KVF_TABLE_COUNT] = {0}, logits[KVF_LOGITS_COUNT] = {0}, dists[KVF_DIST_COUNT] = {0};
    int groups[17] = {0}, poison_bits[4] = {0}, empty = 0;
    for (uint64_t seed = 0; seed < 400; seed++) {
        kvf_spec s, d;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_random(&s, seed, &o, &err), &err);
        uint8_t *bytes;
        size_t n;
        encode_or_fail(&s, &bytes, &n);
        CHECK_OK(kvf_spec_decode(&d, bytes, n, &lim, &err), &err);
        CHECK(kvf_spec_equal(&s, &d));
        kvf_case c1, c2;
        int rc = kvf_case_build(&c1, &s, &lim, &err);
        if (rc) {
            CHECK_FAIL_AT("seed %llu does not build: %s", (unsigned long long)seed, err.msg);
        } else {
            CHECK_OK(kvf_case_build(&c2, &d, &lim, &err), &err);
            CHECK(cases_equal(&c1, &c2));
            for (int32_t b = 0; b < c1.batch_size; b++)
                empty += kvf_case_seq_len(&c1, b) == 0;
            kvf_case_free(&c1);
            kvf_case_free(&c2);
        }
        tables[s.recipe.table]++;
        logits[s.recipe.logits]++;
        dists[s.recipe.q.kind]++;
        dists[s.recipe.v.kind]++;
        groups[s.recipe.num_qo_heads / s.recipe.num_kv_heads]++;
        for (int b = 0; b < 4; b++)
            poison_bits[b] += (s.recipe.poison >> b) & 1;
        free(bytes);
        kvf_spec_free(&s);
        kvf_spec_free(&d);
    }
    for (int i = 0; i < KVF_TABLE_COUNT; i++)
        if (!tables[i]) CHECK_FAIL_AT("table %s never drawn", kvf_table_name(i));
    for (int i = 0; i < KVF_LOGITS_COUNT; i++)
        if (!logits[i]) CHECK_FAIL_AT("logit pattern %s never drawn", kvf_logits_name(i));
    for (int i = 0; i < KVF_DIST_COUNT; i++)
        if (!dists[i]) CHECK_FAIL_AT("distribution %s never drawn", kvf_dist_name(i));
    for (int g = 1; g <= 16; g++)
        if (!groups[g]) CHECK_FAIL_AT("GQA group %d never drawn", g);
    for (int b = 0; b < 4; b++)
        CHECK(poison_bits[b] > 0);
    CHECK(empty > 0);
}

BOTH_EXPANSIONS(test_random_round_trip_and_coverage)

static const check_test tests[] = {
    {"random_round_trip_and_coverage", test_random_round_trip_and_coverage_e1},
    {"random_round_trip_and_coverage_expansion2", test_random_round_trip_and_coverage_e2},
    {NULL, NULL},
};

CHECK_MAIN(tests)
