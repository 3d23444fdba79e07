/* Unit tests of the .kvfz codec (core/src/spec_codec.c), on well-formed specs: the version byte
 * names the expansion and both versions round-trip canonically, every preset and a spec with
 * explicit tensors round-trip (decode(encode(s)) == s, encode(decode(b)) == b) and rebuild the
 * same case, and an explicit pool counts against the memory budget at decode. Malformed input:
 * tests/test_spec_malformed.c. */
#include "explicit_fixture.h"
#include "spec_fixtures.h"

/* ---- expansions ---------------------------------------------------------------------------- */

/* The version byte names the expansion: version 1 and version 2 files of one recipe differ in
 * that byte only, both round-trip canonically, expand to different values from the same
 * recipe, and version 3 is refused with one sentence. */
static void test_versions_round_trip(void) {
    kvf_limits lim = limits();
    kvf_error err = {0};
    kvf_spec s;
    CHECK_OK(kvf_spec_preset(&s, "mixed-lengths", 5, &err), &err);
    CHECK_INT_EQ(s.recipe.expansion, KVF_EXPANSION_DEFAULT);
    uint8_t *b[3] = {NULL, NULL, NULL};
    size_t n[3] = {0, 0, 0};
    kvf_case c[3];
    for (int e = 1; e <= 2; e++) {
        s.recipe.expansion = (uint8_t)e;
        encode_or_fail(&s, &b[e], &n[e]);
        CHECK_INT_EQ(b[e][OFF_VERSION], e);
        kvf_spec d;
        CHECK_OK(kvf_spec_decode(&d, b[e], n[e], &lim, &err), &err);
        CHECK_INT_EQ(d.recipe.expansion, e);
        CHECK(kvf_spec_equal(&s, &d));
        uint8_t *again;
        size_t n2;
        encode_or_fail(&d, &again, &n2);
        CHECK(n2 == n[e] && memcmp(again, b[e], n2) == 0);
        free(again);
        CHECK_OK(kvf_case_build(&c[e], &d, &lim, &err), &err);
        kvf_spec_free(&d);
    }
    CHECK(n[1] == n[2] && memcmp(b[1], b[2], OFF_VERSION) == 0 &&
          memcmp(b[1] + OFF_VERSION + 1, b[2] + OFF_VERSION + 1, n[1] - OFF_VERSION - 1) == 0);
    /* Same shape and table layout strategy, other values. */
    CHECK_INT_EQ(c[1].num_pages, c[2].num_pages);
    CHECK(memcmp(c[1].q, c[2].q, (size_t)kvf_case_q_elems(&c[1]) * 2) != 0);
    CHECK(!cases_equal(&c[1], &c[2]));
    /* A recipe filled in by hand (expansion 0) is a version 1 recipe. */
    s.recipe.expansion = 0;
    uint8_t *zero;
    size_t nz;
    encode_or_fail(&s, &zero, &nz);
    CHECK(nz == n[1] && memcmp(zero, b[1], nz) == 0);
    kvf_case c0;
    CHECK_OK(kvf_case_build(&c0, &s, &lim, &err), &err);
    CHECK(cases_equal(&c0, &c[1]));
    kvf_case_free(&c0);
    free(zero);
    /* An unknown expansion in a recipe is refused by name, and version 3 by the decoder. */
    s.recipe.expansion = 3;
    CHECK_INT_EQ(kvf_case_build(&c0, &s, &lim, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "expansion 3");
    b[2][OFF_VERSION] = 3;
    kvf_spec d;
    kvf_error e3 = {0};
    CHECK_INT_EQ(kvf_spec_decode(&d, b[2], n[2], &lim, &e3), KVF_EFORMAT);
    CHECK_STR_CONTAINS(e3.msg, "format version 3 is not supported");
    CHECK(strchr(e3.msg, '\n') == NULL);
    /* Random recipes: expansion 2 unless asked otherwise; the other fields do not depend on it. */
    kvf_random_opts o;
    kvf_random_opts_default(&o);
    kvf_spec r1, r2;
    CHECK_OK(kvf_spec_random(&r1, 42, &o, &err), &err);
    CHECK_INT_EQ(r1.recipe.expansion, KVF_EXPANSION_2);
    o.expansion = KVF_EXPANSION_1;
    CHECK_OK(kvf_spec_random(&r2, 42, &o, &err), &err);
    CHECK_INT_EQ(r2.recipe.expansion, KVF_EXPANSION_1);
    r2.recipe.expansion = KVF_EXPANSION_2;
    CHECK(kvf_spec_equal(&r1, &r2));
    kvf_spec_free(&r1);
    kvf_spec_free(&r2);
    for (int e = 1; e <= 2; e++) {
        kvf_case_free(&c[e]);
        free(b[e]);
    }
    kvf_spec_free(&s);
}

static void test_preset_round_trip(void) {
    kvf_limits lim = limits();
    for (size_t i = 0; i < kvf_preset_count(); i++) {
        kvf_spec s, d;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_preset(&s, kvf_preset_name(i), 7, &err), &err);
        s.recipe.expansion = (uint8_t)g_expansion;
        CHECK_INT_EQ(s.recipe.expansion, g_expansion);
        uint8_t *bytes, *again;
        size_t n, n2;
        encode_or_fail(&s, &bytes, &n);
        CHECK_OK(kvf_spec_decode(&d, bytes, n, &lim, &err), &err);
        CHECK(kvf_spec_equal(&s, &d));
        encode_or_fail(&d, &again, &n2);
        CHECK(n == n2 && memcmp(bytes, again, n) == 0);
        kvf_case c1, c2;
        CHECK_OK(kvf_case_build(&c1, &s, &lim, &err), &err);
        CHECK_OK(kvf_case_build(&c2, &d, &lim, &err), &err);
        if (!cases_equal(&c1, &c2))
            CHECK_FAIL_AT("preset %s: rebuilt case differs", kvf_preset_name(i));
        kvf_case_free(&c1);
        kvf_case_free(&c2);
        free(bytes);
        free(again);
        kvf_spec_free(&s);
        kvf_spec_free(&d);
    }
}

static void test_explicit_tensors_round_trip(void) {
    kvf_limits lim = limits();
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "page1", 4, &err), &err);
    s.recipe.expansion = (uint8_t)g_expansion;
    /* Import the generated tensors as explicit ones, as a captured workload would arrive. */
    kvf_case gen;
    give_explicit_tensors(&s, &lim, &gen);
    const int64_t entries = gen.kv_indptr[gen.batch_size];
    uint8_t *bytes;
    size_t n;
    encode_or_fail(&s, &bytes, &n);
    kvf_spec d;
    CHECK_OK(kvf_spec_decode(&d, bytes, n, &lim, &err), &err);
    CHECK(kvf_spec_equal(&s, &d));
    /* The explicit pool counts against the memory budget (twice: spec and case). */
    kvf_case_cost cost;
    kvf_recipe_cost(&s.recipe, &cost);
    int64_t pool_bytes = (int64_t)gen.pool_bytes * 2 * 2;
    kvf_limits tight = lim;
    tight.max_memory_bytes = cost.memory_bytes + pool_bytes - 1;
    kvf_spec t;
    CHECK_INT_EQ(kvf_spec_decode(&t, bytes, n, &tight, &err), KVF_ELIMIT);
    CHECK_STR_CONTAINS(err.msg, "explicit pool");
    tight.max_memory_bytes = cost.memory_bytes + pool_bytes;
    CHECK_OK(kvf_spec_decode(&t, bytes, n, &tight, &err), &err);
    kvf_spec_free(&t);
    kvf_case imp;
    CHECK_OK(kvf_case_build(&imp, &d, &lim, &err), &err);
    CHECK(memcmp(imp.q, gen.q, (size_t)kvf_case_q_elems(&gen) * 2) == 0);
    CHECK(memcmp(imp.v_cache, gen.v_cache, gen.pool_bytes) == 0);
    CHECK(memcmp(imp.kv_indices, gen.kv_indices, (size_t)entries * 4) == 0);
    kvf_case_free(&imp);
    kvf_case_free(&gen);
    free(bytes);
    kvf_spec_free(&s);
    kvf_spec_free(&d);
}

/* ---- quantization ------------------------------------------------------------------------- */

/* A quantization section round-trips canonically, follows the layout, builds into a case with
 * its dtypes and scales; the plain quantization writes no section, and a section holding it, a
 * spread on tensor scales, scales on a bf16 cache and a section beside explicit tensors are
 * refused with one sentence. */
static void test_quantization_section(void) {
    kvf_limits lim = limits();
    kvf_error err = {0};
    kvf_spec s;
    CHECK_OK(kvf_spec_preset(&s, "mixed-lengths", 5, &err), &err);
    uint8_t *plain;
    size_t nplain;
    encode_or_fail(&s, &plain, &nplain);
    s.quant = (kvf_quant_recipe){{KVF_KV_E4M3, KVF_KV_E5M2, KVF_SCALE_HEAD}, 0.75f, 3.0f, 5, 1};
    uint8_t *b;
    size_t n;
    encode_or_fail(&s, &b, &n);
    CHECK_INT_EQ(n, nplain + 16);
    CHECK_INT_EQ(b[OFF_VERSION + 1] & 0x10, 0x10);
    CHECK(memcmp(b + nplain, "\x01\x02\x02\x05\x01\0\0\0", 8) == 0);
    kvf_spec d;
    CHECK_OK(kvf_spec_decode(&d, b, n, &lim, &err), &err);
    CHECK(kvf_spec_equal(&s, &d));
    kvf_case c;
    CHECK_OK(kvf_case_build(&c, &d, &lim, &err), &err);
    CHECK_INT_EQ(c.quant.k_dtype, KVF_KV_E4M3);
    CHECK_INT_EQ(c.quant.granularity, KVF_SCALE_HEAD);
    CHECK_INT_EQ(kvf_case_scale_count(&c), c.num_kv_heads);
    for (int32_t g = 0; g < c.num_kv_heads; g++) {
        /* 0.75 times 2^[-5, 5] times [1, 2) */
        CHECK(c.k_scale[g] >= 0.75f / 32 && c.k_scale[g] < 0.75f * 64);
        CHECK(c.v_scale[g] >= 3.0f / 32 && c.v_scale[g] < 3.0f * 64);
    }
    kvf_case_free(&c);
    kvf_spec_free(&d);
    /* Refusals, each by one sentence. */
    struct {
        kvf_quant_recipe q;
        const char *words;
    } bad[] = {
        {{{0, 0, 0}, 1.0f, 1.0f, 0, 0}, "which are written as no section"},
        {{{KVF_KV_E4M3, KVF_KV_E4M3, KVF_SCALE_TENSOR}, 2.0f, 2.0f, 3, 0}, "tensor scales"},
        {{{KVF_KV_BF16, KVF_KV_E4M3, KVF_SCALE_HEAD}, 2.0f, 2.0f, 0, 0}, "both caches must be"},
        {{{KVF_KV_E4M3, KVF_KV_E4M3, KVF_SCALE_HEAD}, -2.0f, 2.0f, 0, 0}, "finite and positive"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t *x = malloc(n);
        memcpy(x, b, n);
        const kvf_quant_recipe *q = &bad[i].q;
        uint8_t *sec = x + nplain;
        sec[0] = q->kv.k_dtype, sec[1] = q->kv.v_dtype, sec[2] = q->kv.granularity;
        sec[3] = q->spread, sec[4] = q->fine;
        uint32_t kb = kvf_f32_bits(q->k_scale), vb = kvf_f32_bits(q->v_scale);
        memcpy(sec + 8, &kb, 4);
        memcpy(sec + 12, &vb, 4);
        CHECK(kvf_spec_decode(&d, x, n, &lim, &err) != 0);
        CHECK_STR_CONTAINS(err.msg, bad[i].words);
        free(x);
    }
    free(b);
    free(plain);
    kvf_spec_free(&s);
}

/* Explicit FP8 caches with tensor scales (an imported FP8 workload): the quantization section
 * beside the explicit tensors round-trips and builds into the case with its dtypes and the two
 * scales; other scales beside explicit tensors, and an explicit FP8 element that is no image of
 * a byte, are refused with one sentence. */
static void test_explicit_quantization(void) {
    kvf_limits lim = limits();
    kvf_error err = {0};
    kvf_spec s;
    CHECK_OK(kvf_spec_preset(&s, "page1", 4, &err), &err);
    s.quant = (kvf_quant_recipe){{KVF_KV_E5M2, KVF_KV_E5M2, KVF_SCALE_TENSOR}, 0.75f, 3.0f, 0, 0};
    kvf_case gen;
    give_explicit_tensors(&s, &lim, &gen);
    uint8_t *bytes;
    size_t n;
    encode_or_fail(&s, &bytes, &n);
    CHECK_INT_EQ(bytes[OFF_VERSION + 1] & 0x12, 0x12);
    kvf_spec d;
    CHECK_OK(kvf_spec_decode(&d, bytes, n, &lim, &err), &err);
    CHECK(kvf_spec_equal(&s, &d));
    kvf_case imp;
    CHECK_OK(kvf_case_build(&imp, &d, &lim, &err), &err);
    CHECK(memcmp(&imp.quant, &gen.quant, sizeof imp.quant) == 0);
    CHECK(imp.k_scale[0] == 0.75f && imp.v_scale[0] == 3.0f);
    CHECK(memcmp(imp.k_cache, gen.k_cache, gen.pool_bytes) == 0);
    kvf_case_free(&imp);
    kvf_spec_free(&d);
    /* Per-head scales beside explicit tensors: the section's byte 2 is the granularity. */
    bytes[n - 14] = KVF_SCALE_HEAD;
    CHECK(kvf_spec_decode(&d, bytes, n, &lim, &err) == KVF_EFORMAT);
    CHECK_STR_CONTAINS(err.msg, "explicit tensors can have only tensor scales");
    s.quant.kv.granularity = KVF_SCALE_HEAD;
    uint8_t *refused = NULL;
    CHECK_INT_EQ(kvf_spec_encode(&s, &refused, &n, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "explicit caches take tensor scales only");
    free(refused);
    s.quant.kv.granularity = KVF_SCALE_TENSOR;
    /* 0x3f81 (1.0078125) is a bf16 value no e5m2 byte has. */
    s.explicit_tensors.k_cache[5] = 0x3f81;
    CHECK_INT_EQ(kvf_case_build(&imp, &s, &lim, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg,
                       "explicit k_cache element 5 holds bf16 0x3f81, which is not an e5m2 "
                       "value");
    free(bytes);
    kvf_case_free(&gen);
    kvf_spec_free(&s);
}

BOTH_EXPANSIONS(test_preset_round_trip)
BOTH_EXPANSIONS(test_explicit_tensors_round_trip)

static const check_test tests[] = {
    {"versions_round_trip", test_versions_round_trip},
    {"quantization_section", test_quantization_section},
    {"explicit_quantization", test_explicit_quantization},
    {"preset_round_trip", test_preset_round_trip_e1},
    {"preset_round_trip_expansion2", test_preset_round_trip_e2},
    {"explicit_tensors_round_trip", test_explicit_tensors_round_trip_e1},
    {"explicit_tensors_round_trip_expansion2", test_explicit_tensors_round_trip_e2},
    {NULL, NULL},
};

CHECK_MAIN(tests)
