/* Unit test of random recipes (core/src/gen_random.c, kvf_spec_random): 400 small recipes
 * round-trip through the codec, build the same case, and together draw every page-table
 * strategy, logit pattern, distribution, GQA group, poison bit and an empty sequence. Both
 * expansions; the recipes' bits are pinned by tests/test_gen_hash.c. A dtype set
 * (kvf_random_opts.kv_dtypes) keeps quantized recipes within it, and the full set draws the
 * quantized recipes recorded before the set existed. */
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

/* FNV-1a of each recipe's encoding, in order. */
static void digest_spec(uint64_t *h, const kvf_spec *s) {
    uint8_t *bytes;
    size_t n;
    encode_or_fail(s, &bytes, &n);
    for (size_t i = 0; i < n; i++) {
        *h ^= bytes[i];
        *h *= 0x100000001B3ull;
    }
    free(bytes);
}

/* The quantized recipes of seeds 1..400 under the default options with quant on, recorded from
 * the generator before it took a dtype set: every set holding all dtypes (and 0, its stand-in)
 * draws them bit for bit as before. */
static void test_every_dtype_draws_as_before(void) {
    static const unsigned sets[] = {KVF_KV_DTYPES_ALL, 0};
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        kvf_random_opts o;
        kvf_random_opts_default(&o);
        o.quant = 1;
        o.kv_dtypes = sets[k];
        uint64_t h = 0xCBF29CE484222325ull;
        int quantized = 0;
        for (uint64_t seed = 1; seed <= 400; seed++) {
            kvf_spec s;
            kvf_error err = {0};
            CHECK_OK(kvf_spec_random(&s, seed, &o, &err), &err);
            quantized += !kvf_quant_recipe_is_plain(&s.quant);
            digest_spec(&h, &s);
            kvf_spec_free(&s);
        }
        CHECK_INT_EQ(quantized, 84);
        CHECK_HEX_EQ(h, 0xca2c98e4dacac3d1ull);
    }
}

/* A dtype set without bf16 quantizes every recipe, both caches in the set, and the recipes
 * build; a recipe the full set quantizes is the same recipe under fp8 (the same draw). The set
 * {bf16} quantizes none. */
static void test_fp8_sets_quantize_every_recipe(void) {
    kvf_limits lim = limits();
    static const unsigned sets[] = {KVF_KV_DTYPES_FP8, 1u << KVF_KV_E4M3, 1u << KVF_KV_E5M2,
                                    KVF_KV_DTYPES_BF16};
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        kvf_random_opts o = small_random_opts(), all = small_random_opts();
        o.quant = all.quant = 1;
        o.kv_dtypes = sets[k];
        int dtypes_seen[KVF_KV_DTYPE_COUNT] = {0}, same = 0;
        for (uint64_t seed = 0; seed < 200; seed++) {
            kvf_spec s, a;
            kvf_error err = {0};
            CHECK_OK(kvf_spec_random(&s, seed, &o, &err), &err);
            CHECK_OK(kvf_spec_random(&a, seed, &all, &err), &err);
            const kvf_kv_quant *q = &s.quant.kv;
            if (sets[k] == KVF_KV_DTYPES_BF16) {
                CHECK(kvf_quant_recipe_is_plain(&s.quant));
            } else if (!kvf_kv_dtypes_has(sets[k], q->k_dtype) ||
                       !kvf_kv_dtypes_has(sets[k], q->v_dtype) ||
                       !kvf_kv_dtype_is_fp8(q->k_dtype) || !kvf_kv_dtype_is_fp8(q->v_dtype)) {
                CHECK_FAIL_AT("set %s seed %llu: caches k %s v %s", kvf_kv_dtypes_name(sets[k]),
                              (unsigned long long)seed, kvf_kv_dtype_name(q->k_dtype),
                              kvf_kv_dtype_name(q->v_dtype));
            }
            dtypes_seen[q->k_dtype]++;
            dtypes_seen[q->v_dtype]++;
            if (sets[k] == KVF_KV_DTYPES_FP8 && !kvf_quant_recipe_is_plain(&a.quant)) {
                CHECK(kvf_spec_equal(&s, &a));
                same++;
            }
            kvf_case c;
            int rc = kvf_case_build(&c, &s, &lim, &err);
            if (rc)
                CHECK_FAIL_AT("set %s seed %llu does not build: %s", kvf_kv_dtypes_name(sets[k]),
                              (unsigned long long)seed, err.msg);
            else
                kvf_case_free(&c);
            kvf_spec_free(&s);
            kvf_spec_free(&a);
        }
        if (sets[k] == KVF_KV_DTYPES_FP8) {
            CHECK(dtypes_seen[KVF_KV_E4M3] > 0 && dtypes_seen[KVF_KV_E5M2] > 0);
            CHECK(same >= 20);
        }
    }
}

static void test_dtype_set_names(void) {
    CHECK_INT_EQ(kvf_kv_dtypes_parse("any"), (int)KVF_KV_DTYPES_ALL);
    CHECK_INT_EQ(kvf_kv_dtypes_parse("bf16"), (int)KVF_KV_DTYPES_BF16);
    CHECK_INT_EQ(kvf_kv_dtypes_parse("fp8"), (int)KVF_KV_DTYPES_FP8);
    CHECK_INT_EQ(kvf_kv_dtypes_parse("e4m3"), 1 << KVF_KV_E4M3);
    CHECK_INT_EQ(kvf_kv_dtypes_parse("e5m2"), 1 << KVF_KV_E5M2);
    CHECK_INT_EQ(kvf_kv_dtypes_parse("FP8"), -1);
    CHECK_INT_EQ(kvf_kv_dtypes_parse(""), -1);
    CHECK_INT_EQ(kvf_kv_dtypes_parse(NULL), -1);
    static const char *const names[] = {"any", "bf16", "fp8", "e4m3", "e5m2"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        CHECK(strcmp(kvf_kv_dtypes_name((unsigned)kvf_kv_dtypes_parse(names[i])), names[i]) == 0);
    CHECK(strcmp(kvf_kv_dtypes_name(0), "any") == 0);
}

static const check_test tests[] = {
    {"random_round_trip_and_coverage", test_random_round_trip_and_coverage_e1},
    {"random_round_trip_and_coverage_expansion2", test_random_round_trip_and_coverage_e2},
    {"every_dtype_draws_as_before", test_every_dtype_draws_as_before},
    {"fp8_sets_quantize_every_recipe", test_fp8_sets_quantize_every_recipe},
    {"dtype_set_names", test_dtype_set_names},
    {NULL, NULL},
};

CHECK_MAIN(tests)
