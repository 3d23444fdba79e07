/* Unit test of a case as JSON (core/src/case_json.c, kvfuzz/case_json.h): the value summary's
 * counts, extremes and means with NaN and infinities left out (null when nothing is finite);
 * the case object's members, in order, agreeing with the case they describe; --full's tensors;
 * an imported case's origin; a seed past 2^63; a path jansson cannot hold. */
#include "spec_fixtures.h"

#include "kvfuzz/case_json.h"

static void test_value_summary(void) {
    kvf_value_summary s = {0};
    const kvf_bf16 xs[] = {0x7fc0 /* NaN */, 0x7f80 /* +inf */, 0x0000, 0x3f80 /* 1 */,
                           0xc000 /* -2 */};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++)
        kvf_value_summary_add(&s, xs[i]);
    CHECK_INT_EQ(s.count, 5);
    CHECK_INT_EQ(s.nan, 1);
    CHECK_INT_EQ(s.inf, 1);
    CHECK_INT_EQ(s.zero, 1);
    /* The first finite value sets min and max even after a NaN and an infinity. */
    CHECK_DBL_EQ(s.min, -2);
    CHECK_DBL_EQ(s.max, 1);
    json_t *j = kvf_value_summary_json(&s);
    CHECK(j != NULL);
    CHECK_DBL_EQ(json_number_value(json_object_get(j, "mean")), -1.0 / 3);
    CHECK_DBL_EQ(json_number_value(json_object_get(j, "mean_abs")), 1);
    CHECK_INT_EQ(json_integer_value(json_object_get(j, "inf")), 1);
    const char *keys[] = {"count", "nan", "inf", "zero", "min", "max", "mean", "mean_abs"};
    size_t i = 0;
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
        CHECK(i < 8 && strcmp(key, keys[i]) == 0);
        i++;
    }
    CHECK_INT_EQ(i, 8);
    json_decref(j);

    kvf_value_summary none = {0};
    kvf_value_summary_add(&none, 0xff80); /* -inf only */
    j = kvf_value_summary_json(&none);
    CHECK(json_is_null(json_object_get(j, "min")));
    CHECK(json_is_null(json_object_get(j, "max")));
    CHECK(json_is_null(json_object_get(j, "mean")));
    CHECK(json_is_null(json_object_get(j, "mean_abs")));
    CHECK_INT_EQ(json_integer_value(json_object_get(j, "count")), 1);
    json_decref(j);
}

static void build(const char *preset, uint64_t seed, int expansion, kvf_spec *spec, kvf_case *c) {
    kvf_error err = {0};
    kvf_limits lim = limits();
    CHECK_OK(kvf_spec_preset(spec, preset, seed, &err), &err);
    spec->recipe.expansion = (uint8_t)expansion;
    CHECK_OK(kvf_case_build(c, spec, &lim, &err), &err);
}

static void test_case_members(void) {
    kvf_spec spec;
    kvf_case c;
    build("mixed-lengths", 3, KVF_EXPANSION_1, &spec, &c);
    json_t *j = kvf_case_json("dir/x.kvfz", &spec, &c, 0);
    CHECK(j != NULL);
    const char *order[] = {
        "file",       "format_version",   "shape",        "batch_size", "num_pages",
        "sm_scale",   "sm_scale_bits",    "total_tokens", "seq_lens",   "kv_indptr",
        "kv_indices", "kv_last_page_len", "recipe",       "overrides",  "explicit_tensors",
        "values",     "resident_pages"};
    size_t n = sizeof order / sizeof order[0], i = 0;
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
        CHECK(i < n && strcmp(key, order[i]) == 0);
        i++;
    }
    CHECK_INT_EQ(i, n);
    CHECK(strcmp(json_string_value(json_object_get(j, "file")), "dir/x.kvfz") == 0);
    CHECK_INT_EQ(json_integer_value(json_object_get(j, "format_version")), 1);
    json_t *shape = json_object_get(j, "shape");
    CHECK_INT_EQ(json_integer_value(json_object_get(shape, "group")),
                 c.num_qo_heads / c.num_kv_heads);
    json_t *lens = json_object_get(j, "seq_lens");
    CHECK_INT_EQ(json_array_size(lens), c.batch_size);
    int64_t total = 0;
    for (int32_t b = 0; b < c.batch_size; b++) {
        CHECK_INT_EQ(json_integer_value(json_array_get(lens, (size_t)b)), kvf_case_seq_len(&c, b));
        total += json_integer_value(json_array_get(lens, (size_t)b));
    }
    CHECK_INT_EQ(json_integer_value(json_object_get(j, "total_tokens")), total);
    CHECK_INT_EQ(json_array_size(json_object_get(j, "kv_indptr")), c.batch_size + 1);
    CHECK_INT_EQ(json_array_size(json_object_get(j, "kv_indices")), c.kv_indptr[c.batch_size]);
    char bits[16];
    snprintf(bits, sizeof bits, "%08x", kvf_f32_bits(c.sm_scale));
    CHECK(strcmp(json_string_value(json_object_get(j, "sm_scale_bits")), bits) == 0);
    json_t *values = json_object_get(j, "values");
    CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(values, "q"), "count")),
                 kvf_case_q_elems(&c));
    /* k and v are summarized over the tokens sequences use, one value per (token, head, dim). */
    CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(values, "k_used"), "count")),
                 total * c.num_kv_heads * c.head_dim);
    CHECK(json_object_get(j, "origin") == NULL);
    CHECK(json_object_get(j, "pages") == NULL);
    CHECK(strcmp(json_string_value(json_object_get(json_object_get(j, "recipe"), "table")),
                 kvf_table_name(spec.recipe.table)) == 0);
    json_decref(j);
    kvf_case_free(&c);
    kvf_spec_free(&spec);
}

static void test_case_full_and_origin(void) {
    kvf_spec spec;
    kvf_case c;
    build("page1", 1, KVF_EXPANSION_2, &spec, &c);
    spec.has_origin = 1;
    snprintf(spec.origin.definition, sizeof spec.origin.definition, "def");
    snprintf(spec.origin.workload_uuid, sizeof spec.origin.workload_uuid, "uuid");
    spec.origin.random_inputs = KVF_ORIGIN_RANDOM_Q | KVF_ORIGIN_RANDOM_V;
    spec.origin.random_seed = 9;
    json_t *j = kvf_case_json("p.kvfz", &spec, &c, 1);
    CHECK(j != NULL);
    CHECK_INT_EQ(json_integer_value(json_object_get(j, "format_version")), 2);
    json_t *rnd = json_object_get(json_object_get(j, "origin"), "random_inputs");
    CHECK_INT_EQ(json_array_size(rnd), 2);
    CHECK(strcmp(json_string_value(json_array_get(rnd, 0)), "q") == 0);
    CHECK(strcmp(json_string_value(json_array_get(rnd, 1)), "v_cache") == 0);
    json_t *q = json_object_get(j, "q");
    CHECK_INT_EQ(json_array_size(q), kvf_case_q_elems(&c));
    char hex[8];
    snprintf(hex, sizeof hex, "%04x", c.q[0]);
    CHECK(strcmp(json_string_value(json_array_get(q, 0)), hex) == 0);
    json_t *pages = json_object_get(j, "pages");
    CHECK_INT_EQ(json_array_size(pages), c.num_resident_pages);
    json_t *pg = json_array_get(pages, 0);
    CHECK_INT_EQ(json_integer_value(json_object_get(pg, "page")), c.resident_pages[0]);
    CHECK_INT_EQ(json_array_size(json_object_get(pg, "k")), kvf_case_page_elems(&c));
    json_decref(j);

    /* A seed past 2^63 is a real, not a wrapped integer. */
    spec.recipe.seed = UINT64_MAX;
    j = kvf_case_json("p.kvfz", &spec, &c, 0);
    json_t *seed = json_object_get(json_object_get(j, "recipe"), "seed");
    CHECK(json_is_real(seed));
    CHECK_DBL_EQ(json_real_value(seed), (double)UINT64_MAX);
    json_decref(j);

    /* A path that is not UTF-8 cannot be a JSON string: no object. */
    CHECK(kvf_case_json("bad\xff.kvfz", &spec, &c, 0) == NULL);
    kvf_case_free(&c);
    kvf_spec_free(&spec);
}

static const check_test tests[] = {
    {"value_summary", test_value_summary},
    {"case_members", test_case_members},
    {"case_full_and_origin", test_case_full_and_origin},
    {NULL, NULL},
};

CHECK_MAIN(tests)
