/* Unit test of the oracle's answer as JSON (oracle/src/oracle_json.c, kvfuzz/oracle_json.h) on
 * a case with empty sequences: one row per (sequence, q head) in order, the empty rows' -inf lse
 * as the string "-Infinity" with the f32 bits of -inf, and every o element's bits, rounded value
 * and exact value agreeing with the oracle's result. */
#include "spec_fixtures.h"

#include "kvfuzz/oracle.h"
#include "kvfuzz/oracle_json.h"

static void test_rows(void) {
    kvf_limits lim = limits();
    kvf_error err = {0};
    kvf_spec spec;
    kvf_case c;
    CHECK_OK(kvf_spec_preset(&spec, "empty-sequences", 1, &err), &err);
    CHECK_OK(kvf_case_build(&c, &spec, &lim, &err), &err);
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    kvf_oracle_result r;
    CHECK_OK(kvf_oracle_run(&r, &c, &oo, &err), &err);
    json_t *j = kvf_oracle_json(&c, &r);
    CHECK(j != NULL);
    CHECK_INT_EQ(json_integer_value(json_object_get(j, "batch_size")), c.batch_size);
    CHECK_INT_EQ(json_integer_value(json_object_get(j, "num_qo_heads")), c.num_qo_heads);
    CHECK_INT_EQ(json_integer_value(json_object_get(j, "head_dim")), c.head_dim);
    json_t *rows = json_object_get(j, "rows");
    CHECK_INT_EQ(json_array_size(rows), (size_t)c.batch_size * (size_t)c.num_qo_heads);
    int empty = 0, full = 0;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        int32_t b = (int32_t)json_integer_value(json_object_get(row, "b"));
        int32_t h = (int32_t)json_integer_value(json_object_get(row, "h"));
        CHECK_INT_EQ((int64_t)b * c.num_qo_heads + h, (int64_t)i);
        CHECK_INT_EQ(json_integer_value(json_object_get(row, "length")), kvf_case_seq_len(&c, b));
        CHECK(json_is_false(json_object_get(row, "overflow")));
        char bits[16];
        snprintf(bits, sizeof bits, "%08x", kvf_f32_bits(r.lse_rounded[i]));
        CHECK(strcmp(json_string_value(json_object_get(row, "lse_bits")), bits) == 0);
        json_t *o = json_object_get(row, "o");
        CHECK_INT_EQ(json_array_size(o), c.head_dim);
        json_t *e = json_array_get(o, 3);
        char obits[8];
        snprintf(obits, sizeof obits, "%04x", r.o_rounded[i * (size_t)c.head_dim + 3]);
        CHECK(strcmp(json_string_value(json_array_get(e, 0)), obits) == 0);
        CHECK_DBL_EQ(json_number_value(json_array_get(e, 2)),
                     r.o_exact[i * (size_t)c.head_dim + 3]);
        if (kvf_case_seq_len(&c, b) == 0) {
            empty++;
            CHECK(strcmp(json_string_value(json_object_get(row, "lse")), "-Infinity") == 0);
            CHECK(strcmp(bits, "ff800000") == 0);
            CHECK(strcmp(obits, "0000") == 0);
        } else {
            full++;
            CHECK_DBL_EQ(json_number_value(json_object_get(row, "lse")), r.lse_rounded[i]);
            CHECK_DBL_EQ(json_number_value(json_object_get(row, "lse_exact")), r.lse_exact[i]);
        }
    }
    CHECK(empty > 0 && full > 0);
    json_decref(j);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
    kvf_spec_free(&spec);
}

static const check_test tests[] = {
    {"rows", test_rows},
    {NULL, NULL},
};

CHECK_MAIN(tests)
