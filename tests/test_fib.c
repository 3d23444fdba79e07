/* The interop module (interop/, docs/fib.md): the safetensors writer's layout and the reader's
 * checks, the case file's origin section, and FIB definition parsing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kvfuzz/fib.h"
#include "kvfuzz/safetensors.h"
#include "kvfuzz/spec.h"

/* A file from a header text and data bytes, the size prefix computed here. */
static size_t make_file(uint8_t *buf, const char *header, const void *data, size_t n) {
    uint64_t h = strlen(header);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)(h >> (8 * i));
    memcpy(buf + 8, header, h);
    if (n) memcpy(buf + 8 + h, data, n);
    return 8 + h + n;
}

static void test_writer_layout_and_round_trip(void) {
    uint16_t q[6] = {0x3f80, 0xbf80, 0x8000, 0x0001, 0x7f7f, 0x0000};
    int32_t ids[3] = {5, -1, 7};
    float scale = 0.125f;
    kvf_st_out t[3] = {{"q", KVF_ST_BF16, 3, {1, 2, 3}, q},
                       {"kv_indices", KVF_ST_I32, 1, {3}, ids},
                       {"sm_scale", KVF_ST_F32, 0, {0}, &scale}};
    const char *mk[1] = {"kvfuzz.random_seed"}, *mv[1] = {"42"};
    uint8_t *buf;
    size_t n;
    kvf_error err = {0};
    CHECK_OK(kvf_st_encode(t, 3, mk, mv, 1, &buf, &n, &err), &err);
    uint64_t h = 0;
    for (int i = 7; i >= 0; i--)
        h = (h << 8) | buf[i];
    CHECK_INT_EQ(h % 8, 0);                 /* the data section starts aligned */
    CHECK_INT_EQ(n, 8 + h + 12 + 12 + 4);   /* nothing but the header and the tensors */
    CHECK(memcmp(buf + 8 + h, q, 12) == 0); /* tensors in the order given, back to back */
    CHECK(memcmp(buf + 8 + h + 12, ids, 12) == 0);
    kvf_st_file f;
    CHECK_OK(kvf_st_parse(&f, buf, n, "test", &err), &err);
    CHECK_INT_EQ(f.count, 3);
    const kvf_st_tensor *tq = kvf_st_find(&f, "q"), *ts = kvf_st_find(&f, "sm_scale");
    CHECK(tq && tq->dtype == KVF_ST_BF16 && tq->rank == 3 && tq->shape[2] == 3 && tq->elems == 6);
    CHECK(ts && ts->rank == 0 && ts->elems == 1 && memcmp(ts->data, &scale, 4) == 0);
    CHECK(kvf_st_meta(&f, "kvfuzz.random_seed") &&
          strcmp(kvf_st_meta(&f, "kvfuzz.random_seed"), "42") == 0);
    CHECK(kvf_st_find(&f, "__metadata__") == NULL);
    kvf_st_free(&f);
    free(buf);
    /* A name the header reserves cannot be a tensor. */
    kvf_st_out meta = {"__metadata__", KVF_ST_U8, 1, {1}, q};
    CHECK(kvf_st_encode(&meta, 1, NULL, NULL, 0, &buf, &n, &err) == KVF_EFORMAT);
}

static void test_reader_refuses(void) {
    static const struct {
        const char *header;
        size_t data;
        const char *want;
    } bad[] = {
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 3,
         "1 data bytes follow"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
         "\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}",
         2, "not JSON"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2],\"x\":1}}", 2,
         "has members besides"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1,
         "has rank 9"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0,
         "is not a non-negative integer"},
        {"{\"a\":{\"dtype\":\"I32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
         "is I32 of shape with 3 elements but its data_offsets hold 8 bytes"},
        {"{\"a\":{\"dtype\":\"I64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
         "with over "},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,0]}}", 2,
         "end before they begin"},
        {"[1, 2]", 0, "does not start with a JSON object"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "metadata value of \"k\" is not a string"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
         "\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
         1, "overlap"},
    };
    uint8_t buf[512], zeros[16] = {0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t n = make_file(buf, bad[i].header, zeros, bad[i].data);
        kvf_st_file f;
        kvf_error err = {0};
        int rc = kvf_st_parse(&f, buf, n, "test", &err);
        CHECK(rc != 0);
        CHECK_STR_CONTAINS(err.msg, bad[i].want);
        CHECK(strchr(err.msg, '\n') == NULL);
    }
    /* The size prefix itself: short, past the file, over 100 MB. */
    kvf_st_file f;
    kvf_error err = {0};
    CHECK(kvf_st_parse(&f, buf, 5, "test", &err) == KVF_EFORMAT);
    size_t n = make_file(buf, "{}", NULL, 0);
    buf[0] = 200;
    CHECK(kvf_st_parse(&f, buf, n, "test", &err) == KVF_EFORMAT);
    CHECK_STR_CONTAINS(err.msg, "claims 200 bytes");
    memset(buf, 0, 8);
    buf[0] = 0x01, buf[1] = 0xe1, buf[2] = 0xf5, buf[3] = 0x05; /* 100000001 */
    CHECK(kvf_st_parse(&f, buf, n, "test", &err) == KVF_ELIMIT);
    CHECK_STR_CONTAINS(err.msg, "over the limit of 100 MB");
    /* A header padded with spaces, as writers do, and an empty file are fine. */
    n = make_file(buf, "{}      ", NULL, 0);
    CHECK_OK(kvf_st_parse(&f, buf, n, "test", &err), &err);
    CHECK_INT_EQ(f.count, 0);
    kvf_st_free(&f);
}

static void small_spec(kvf_spec *s) {
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(s, "seed-h20kv4", 1, &err), &err);
}

static void test_origin_section_round_trip(void) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_spec s, d;
    kvf_error err = {0};
    small_spec(&s);
    uint8_t *plain, *with;
    size_t np, nw;
    CHECK_OK(kvf_spec_encode(&s, &plain, &np, &err), &err);
    s.has_origin = 1;
    snprintf(s.origin.definition, sizeof s.origin.definition, "gqa_paged_decode_h20_kv4_d128_ps64");
    snprintf(s.origin.workload_uuid, sizeof s.origin.workload_uuid, "6120f144-b973-4bd9");
    s.origin.random_inputs = KVF_ORIGIN_RANDOM_Q | KVF_ORIGIN_RANDOM_V;
    s.origin.random_seed = 0x0123456789abcdefull;
    CHECK_OK(kvf_spec_encode(&s, &with, &nw, &err), &err);
    /* The origin is a section after the rest: the bytes before it are the plain file's. */
    CHECK_INT_EQ(nw, np + 1 + 34 + 1 + 18 + 1 + 3 + 8);
    CHECK_HEX_EQ(with[5], 0x04);
    CHECK(memcmp(with + 6, plain + 6, np - 6) == 0);
    CHECK_OK(kvf_spec_decode(&d, with, nw, &lim, &err), &err);
    CHECK(d.has_origin && strcmp(d.origin.definition, s.origin.definition) == 0 &&
          strcmp(d.origin.workload_uuid, s.origin.workload_uuid) == 0 &&
          d.origin.random_inputs == s.origin.random_inputs &&
          d.origin.random_seed == s.origin.random_seed);
    CHECK(kvf_spec_equal(&s, &d));
    kvf_spec c;
    CHECK_OK(kvf_spec_copy(&c, &d, &err), &err);
    CHECK(kvf_spec_equal(&c, &d));
    kvf_spec_free(&c);
    kvf_spec_free(&d);
    /* Malformed origins: each refused by name. */
    static const struct {
        size_t at;
        uint8_t value;
        const char *want;
    } bad[] = {
        {0, 0, "the origin's definition name"}, /* length 0 */
        {0, 200, "outside [1, 128]"},           /* length past the limit */
        {1, '/', "outside [A-Za-z0-9_.-]"},     /* a path separator */
        {5, 0, "outside [A-Za-z0-9_.-]"}, /* a NUL inside: a shorter name would not re-encode */
        {35, 0x08, "random-input flags 0x08"},  /* an undefined bit */
        {36, 1, "the origin's reserved bytes"}, /* reserved */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t *b = malloc(nw);
        memcpy(b, with, nw);
        size_t at = np + bad[i].at;
        if (bad[i].at >= 35) at += 19; /* past the uuid */
        b[at] = bad[i].value;
        CHECK(kvf_spec_decode(&d, b, nw, &lim, &err) == KVF_EFORMAT);
        CHECK_STR_CONTAINS(err.msg, bad[i].want);
        free(b);
    }
    CHECK(kvf_spec_decode(&d, with, nw - 1, &lim, &err) == KVF_EFORMAT); /* truncated */
    /* The encoder refuses what the decoder would. */
    snprintf(s.origin.workload_uuid, sizeof s.origin.workload_uuid, "a b");
    uint8_t *x;
    size_t nx;
    CHECK(kvf_spec_encode(&s, &x, &nx, &err) == KVF_EINVAL);
    free(plain);
    free(with);
    kvf_spec_free(&s);
}

/* The definition shipped under fib/definitions/gqa_paged/NAME.json (when KVF_SOURCE_DIR names
 * the checkout) is `text`, byte for byte. */
static void check_shipped_definition(const char *name, const char *text) {
    const char *srcdir = getenv("KVF_SOURCE_DIR");
    if (!srcdir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/fib/definitions/gqa_paged/%s.json", srcdir, name);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f) return;
    static char shipped[65536];
    size_t n = fread(shipped, 1, sizeof shipped - 1, f);
    fclose(f);
    shipped[n] = 0;
    CHECK(strcmp(shipped, text) == 0);
}

static void test_definition_parse(void) {
    char *text = kvf_fib_definition_json(20, 4, 128, 64, KVF_KV_BF16);
    CHECK(text != NULL);
    if (!text) return;
    kvf_fib_definition d;
    kvf_error err = {0};
    CHECK_OK(kvf_fib_definition_parse(&d, text, strlen(text), "generated", &err), &err);
    CHECK(strcmp(d.name, "gqa_paged_decode_h20_kv4_d128_ps64") == 0);
    CHECK(strcmp(d.op_type, "gqa_paged") == 0);
    CHECK(d.num_qo_heads == 20 && d.num_kv_heads == 4 && d.head_dim == 128 && d.page_size == 64);
    CHECK(d.has_last_page_len);
    /* The shipped seed definition is the generated one. */
    check_shipped_definition(d.name, text);
    /* A dtype kvfuzz does not run, with its name. */
    char *p = strstr(text, "\"dtype\": \"bfloat16\"");
    CHECK(p != NULL);
    if (p) {
        memcpy(p + 10, "float16\", ", 10);
        CHECK(kvf_fib_definition_parse(&d, text, strlen(text), "edited", &err) == KVF_EINVAL);
        CHECK_STR_CONTAINS(err.msg, "q is float16; kvfuzz runs gqa_paged_decode with bfloat16 q");
    }
    free(text);
}

/* A gqa_paged_decode_h4_kv2_d8_ps4 definition whose num_qo_heads and batch_size axes are the
 * JSON given, the others as FIB's own writer leaves them (save_json_file, exclude_unset: no
 * "type"). */
static int parse_with_axes(const char *qo_heads, const char *batch, kvf_fib_definition *d,
                           kvf_error *err) {
    static const char *const tensors =
        "\"inputs\": {\"q\": {\"shape\": [\"batch_size\", \"num_qo_heads\", \"head_dim\"], "
        "\"dtype\": \"bfloat16\"}, \"k_cache\": {\"shape\": [\"num_pages\", \"page_size\", "
        "\"num_kv_heads\", \"head_dim\"], \"dtype\": \"bfloat16\"}, \"v_cache\": {\"shape\": "
        "[\"num_pages\", \"page_size\", \"num_kv_heads\", \"head_dim\"], \"dtype\": \"bfloat16\"}, "
        "\"kv_indptr\": {\"shape\": [\"len_indptr\"], \"dtype\": \"int32\"}, \"kv_indices\": "
        "{\"shape\": [\"num_kv_indices\"], \"dtype\": \"int32\"}, \"kv_last_page_len\": "
        "{\"shape\": [\"batch_size\"], \"dtype\": \"int32\"}, \"sm_scale\": {\"shape\": null, "
        "\"dtype\": \"float32\"}}, \"outputs\": {\"output\": {\"shape\": [\"batch_size\", "
        "\"num_qo_heads\", \"head_dim\"], \"dtype\": \"bfloat16\"}, \"lse\": {\"shape\": "
        "[\"batch_size\", \"num_qo_heads\"], \"dtype\": \"float32\"}}";
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"gqa_paged_decode_h4_kv2_d8_ps4\", \"op_type\": \"gqa_paged\", "
             "\"axes\": {\"batch_size\": %s, \"num_qo_heads\": %s, \"num_kv_heads\": "
             "{\"value\": 2}, \"head_dim\": {\"value\": 8}, \"num_pages\": {}, \"page_size\": "
             "{\"value\": 4}, \"len_indptr\": {}, \"num_kv_indices\": {}}, %s, \"reference\": "
             "\"def run():\\n    pass\\n\"}",
             batch, qo_heads, tensors);
    return kvf_fib_definition_parse(d, text, strlen(text), "test", err);
}

/* Axes without "type", as FIB's pydantic models (Union[AxisConst, AxisVar], pydantic 2.13.4)
 * read them: AxisConst when "value" validates as a NonNegativeInt in lax mode (the member with
 * the most fields set), else AxisVar. Each row was checked against FIB's models. */
static void test_definition_axes_without_type(void) {
    static const struct {
        const char *axis;
        int32_t value; /* 0: not const */
    } const_rows[] = {
        {"{\"value\": 4}", 4},
        {"{\"value\": 4, \"description\": \"q heads\"}", 4},
        {"{\"type\": \"const\", \"value\": 4}", 4},
        {"{\"value\": 4.0}", 4},
        {"{\"value\": \"4\"}", 4},
        {"{\"value\": \" +4.00 \"}", 4},
        {"{\"value\": \"1_2\"}", 12},
        {"{\"value\": true}", 1},
        {"{}", 0},                                /* AxisVar */
        {"{\"value\": \"4.\"}", 0},               /* not an int to pydantic: AxisVar */
        {"{\"value\": 4.5}", 0},                  /* likewise */
        {"{\"value\": -4}", 0},                   /* ge=0 fails: AxisVar */
        {"{\"value\": \"0x4\"}", 0},              /* no hex */
        {"{\"type\": \"var\", \"value\": 4}", 0}, /* the type given wins */
    };
    kvf_error err = {0};
    kvf_fib_definition d;
    for (size_t i = 0; i < sizeof const_rows / sizeof const_rows[0]; i++) {
        int rc = parse_with_axes(const_rows[i].axis, "{}", &d, &err);
        if (const_rows[i].value) {
            CHECK_OK(rc, &err);
            CHECK_INT_EQ(d.num_qo_heads, const_rows[i].value);
        } else {
            CHECK(rc == KVF_EINVAL);
            CHECK_STR_CONTAINS(err.msg,
                               "axis num_qo_heads is not const with a value in [1, 65535]");
        }
    }
    static const struct {
        const char *axis;
        int var;
    } var_rows[] = {
        {"{}", 1},
        {"{\"description\": \"sequences\"}", 1},
        {"{\"type\": \"var\"}", 1},
        {"{\"value\": \"abc\"}", 1}, /* an AxisVar ignores what it does not know */
        {"{\"value\": null}", 1},
        {"{\"value\": 3}", 0}, /* AxisConst */
        {"{\"value\": \"3\"}", 0},
        {"{\"type\": \"const\"}", 0}, /* FIB refuses it */
        {"[]", 0},
    };
    for (size_t i = 0; i < sizeof var_rows / sizeof var_rows[0]; i++) {
        int rc = parse_with_axes("{\"value\": 4}", var_rows[i].axis, &d, &err);
        if (var_rows[i].var) {
            CHECK_OK(rc, &err);
        } else {
            CHECK(rc == KVF_EINVAL);
            CHECK_STR_CONTAINS(err.msg, "axis batch_size is not var");
        }
    }
    CHECK(parse_with_axes("{\"value\": 4}", "{\"value\": 3}", &d, &err) == KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "(FIB reads an axis with an integer value and no type as const)");
}

/* One evaluation of a batch of one sequence, Hq 1, D 2: o, lse against ref_o, ref_lse. */
static void evaluate(const float o[2], float lse, const float ref_o[2], float ref_lse,
                     kvf_fib_evaluation *ev) {
    kvf_case c;
    memset(&c, 0, sizeof c);
    c.batch_size = 1, c.num_qo_heads = 1, c.head_dim = 2;
    kvf_bf16 ob[2], rb[2];
    for (int i = 0; i < 2; i++) {
        ob[i] = kvf_f32_to_bf16_rne(o[i]);
        rb[i] = kvf_f32_to_bf16_rne(ref_o[i]);
    }
    kvf_fib_evaluate(&c, ob, &lse, rb, &ref_lse, ev);
}

/* kvf_fib_evaluate against what FIB's DefaultEvaluator.check_correctness computes
 * (flashinfer_bench/bench/evaluators/default.py, bench/utils.py compute_error_stats): the
 * kernel's output, then its lse; an inf, else a NaN, in the kernel's tensor stops with both
 * errors inf (NaN); else float32 abs = |a - r|, rel = abs / (|r| + 1e-8), torch's max per
 * output (NaN if any), folded by Python's max(running, new), which drops a NaN. */
static void test_fib_evaluate(void) {
    const float inf = INFINITY, nan = NAN;
    kvf_fib_evaluation ev;
    const float ref[2] = {1.0f, -0.5f};
    /* Equal: PASSED, 0 and 0. */
    evaluate(ref, 3.0f, ref, 3.0f, &ev);
    CHECK(ev.passed && ev.max_absolute_error == 0 && ev.max_relative_error == 0 && !ev.stopped_at);
    /* Within: abs 0.5 but rel 0.0099 < 1e-2 passes (both must exceed). */
    evaluate(ref, 50.5f, ref, 50.0f, &ev);
    CHECK(ev.passed);
    CHECK_DBL_EQ(ev.max_absolute_error, 0.5);
    CHECK_DBL_EQ(ev.max_relative_error, (double)(0.5f / (50.0f + 1e-8f)));
    /* An lse off by a factor ln 2: INCORRECT_NUMERICAL with its maxima. */
    evaluate(ref, 3.0f * 0.6931472f, ref, 3.0f, &ev);
    CHECK(!ev.passed && !ev.stopped_at);
    CHECK_DBL_EQ(ev.max_absolute_error, (double)fabsf(3.0f * 0.6931472f - 3.0f));
    /* inf in the output: stops there, inf and inf, whatever lse is. */
    const float o_inf[2] = {inf, -0.5f};
    evaluate(o_inf, nan, ref, 3.0f, &ev);
    CHECK(!ev.passed && ev.stopped_at == 1 && isinf(ev.max_absolute_error) &&
          isinf(ev.max_relative_error));
    /* NaN in the output (no inf): NaN and NaN. */
    const float o_nan[2] = {nan, -0.5f};
    evaluate(o_nan, 3.0f, ref, 3.0f, &ev);
    CHECK(!ev.passed && ev.stopped_at == 1 && isnan(ev.max_absolute_error) &&
          isnan(ev.max_relative_error));
    /* The correct -inf lse of an empty sequence: inf and inf, INCORRECT_NUMERICAL, though the
     * kernel is right (and its output's errors are dropped). */
    const float zero[2] = {0, 0}, off[2] = {0.25f, 0};
    evaluate(off, -inf, zero, -inf, &ev);
    CHECK(!ev.passed && ev.stopped_at == 2 && isinf(ev.max_absolute_error) &&
          isinf(ev.max_relative_error));
    /* A finite lse where the reference is -inf: abs inf, rel inf/inf = NaN, which Python's
     * max drops: the relative error is the output's (here 0.0), and nothing exceeds (NaN >
     * rtol is false): PASSED with max_absolute_error inf. */
    evaluate(zero, -5e4f, zero, -inf, &ev);
    CHECK(ev.passed && isinf(ev.max_absolute_error) && ev.max_relative_error == 0.0);
    /* Likewise a finite output against a NaN reference: abs NaN, dropped. */
    const float ref_nan[2] = {nan, -0.5f};
    evaluate(ref, 3.0f, ref_nan, 3.0f, &ev);
    CHECK(ev.passed && ev.max_absolute_error == 0 && ev.max_relative_error == 0);
}

/* Which quantizations have a FlashInfer-Bench definition: bf16, and e4m3 or e5m2 caches (the
 * same for k and v) with one scale each. Per-head and per-token scales, mixed dtypes and FP8
 * without scales are refused, each with a sentence naming what is not covered. */
static void test_quantization_coverage(void) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_spec s;
    kvf_error err = {0};
    small_spec(&s);
    kvf_case c;
    CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
    CHECK_OK(kvf_fib_check_exportable(&c, &err), &err);
    kvf_case_free(&c);
    static const struct {
        kvf_quant_recipe q;
        const char *refusal; /* NULL: exportable */
    } rows[] = {
        {{{KVF_KV_E4M3, KVF_KV_E4M3, KVF_SCALE_TENSOR}, 0.5f, 2.0f, 0, 0}, NULL},
        {{{KVF_KV_E5M2, KVF_KV_E5M2, KVF_SCALE_TENSOR}, 0.5f, 2.0f, 0, 0}, NULL},
        {{{KVF_KV_E4M3, KVF_KV_E4M3, KVF_SCALE_HEAD}, 0.5f, 2.0f, 3, 1},
         "the case's quantization (k e4m3 v e4m3 scales head) has no FlashInfer-Bench "
         "definition: its scales are per KV head, and the FP8 definitions take one scale per "
         "cache"},
        {{{KVF_KV_E5M2, KVF_KV_E5M2, KVF_SCALE_TOKEN}, 0.5f, 2.0f, 0, 0},
         "(k e5m2 v e5m2 scales token) has no FlashInfer-Bench definition: its scales are per "
         "page slot and KV head"},
        {{{KVF_KV_E4M3, KVF_KV_E5M2, KVF_SCALE_TENSOR}, 0.5f, 2.0f, 0, 0},
         "(k e4m3 v e5m2 scales tensor) has no FlashInfer-Bench definition: its caches differ in "
         "dtype, and an FP8 definition holds both in one"},
        {{{KVF_KV_E4M3, KVF_KV_E4M3, KVF_SCALE_NONE}, 1.0f, 1.0f, 0, 0},
         "(k e4m3 v e4m3 scales none) has no FlashInfer-Bench definition: its FP8 caches have no "
         "scales, and the FP8 definitions take k_scale and v_scale"},
        {{{KVF_KV_BF16, KVF_KV_E5M2, KVF_SCALE_NONE}, 1.0f, 1.0f, 0, 0},
         "(k bf16 v e5m2 scales none) has no FlashInfer-Bench definition: its caches differ"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        s.quant = rows[i].q;
        CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
        int rc = kvf_fib_check_exportable(&c, &err);
        if (rows[i].refusal) {
            CHECK_INT_EQ(rc, KVF_EINVAL);
            CHECK_STR_CONTAINS(err.msg, rows[i].refusal);
        } else {
            CHECK_OK(rc, &err);
        }
        kvf_case_free(&c);
    }
    kvf_spec_free(&s);
}

/* Replaces the first occurrence of `from` in text (a malloc'd string) by `to`. */
static char *replace(char *text, const char *from, const char *to) {
    char *p = text ? strstr(text, from) : NULL;
    CHECK(p != NULL);
    if (!p) return text;
    size_t n = strlen(text), a = (size_t)(p - text), f = strlen(from), t = strlen(to);
    char *out = malloc(n - f + t + 1);
    memcpy(out, text, a);
    memcpy(out + a, to, t);
    memcpy(out + a + t, p + f, n - a - f + 1);
    free(text);
    return out;
}

/* kvfuzz's FP8 definitions: named after the dtype, float8 caches, k_scale and v_scale of shape
 * [num_scales] with num_scales const 1, the reference dequantizing first; the shipped ones are
 * the generated ones; other FP8 signatures are refused by what they lack. */
static void test_fp8_definition_parse(void) {
    static const struct {
        int dtype;
        const char *name, *fib_dtype;
    } rows[] = {
        {KVF_KV_E4M3, "gqa_paged_decode_h20_kv4_d128_ps64_fp8_e4m3", "float8_e4m3fn"},
        {KVF_KV_E5M2, "gqa_paged_decode_h20_kv4_d128_ps64_fp8_e5m2", "float8_e5m2"},
    };
    kvf_error err = {0};
    kvf_fib_definition d;
    for (size_t r = 0; r < 2; r++) {
        char *text = kvf_fib_definition_json(20, 4, 128, 64, rows[r].dtype);
        CHECK(text != NULL);
        if (!text) return;
        CHECK_OK(kvf_fib_definition_parse(&d, text, strlen(text), "generated", &err), &err);
        CHECK(strcmp(d.name, rows[r].name) == 0);
        CHECK(d.kv_dtype == rows[r].dtype && d.has_last_page_len && d.page_size == 64);
        CHECK_STR_CONTAINS(text,
                           "\"num_scales\": {\n      \"type\": \"const\",\n      \"value\": 1");
        CHECK_STR_CONTAINS(text, "\"quantization:");
        CHECK_STR_CONTAINS(text, rows[r].fib_dtype);
        /* the reference, as JSON escapes it */
        CHECK_STR_CONTAINS(text, "def run(q, k_cache, v_cache, kv_indptr, kv_indices, "
                                 "kv_last_page_len, sm_scale, k_scale, v_scale):\\n"
                                 "    # k = k_scale * k_cache and v = v_scale * v_cache, each "
                                 "product rounded to float32\\n"
                                 "    k_cache = k_cache.to(torch.float32) * k_scale\\n"
                                 "    v_cache = v_cache.to(torch.float32) * v_scale\\n");
        check_shipped_definition(d.name, text);
        free(text);
    }
    /* Page size 1: no kv_last_page_len, the scales still last. */
    char *text = kvf_fib_definition_json(8, 8, 64, 1, KVF_KV_E5M2);
    CHECK_OK(kvf_fib_definition_parse(&d, text, strlen(text), "generated", &err), &err);
    CHECK(d.kv_dtype == KVF_KV_E5M2 && !d.has_last_page_len);
    CHECK(strcmp(d.name, "gqa_paged_decode_h8_kv8_d64_ps1_fp8_e5m2") == 0);
    free(text);
    CHECK(kvf_fib_definition_json(8, 8, 64, 1, KVF_KV_DTYPE_COUNT) == NULL);
    static const struct {
        const char *from, *to, *refusal;
    } bad[] = {
        /* mixed dtypes */
        {"\"dtype\": \"float8_e4m3fn\",\n      \"description\": \"paged value",
         "\"dtype\": \"float8_e5m2\",\n      \"description\": \"paged value",
         "k_cache is float8_e4m3fn and its v_cache float8_e5m2; kvfuzz's FP8 definitions hold "
         "both caches in one dtype"},
        /* FP8 caches without their scales */
        {"\"k_scale\"", "\"k_scales\"",
         "is not paged decode as kvfuzz runs it: kvfuzz imports gqa_paged_decode definitions "
         "with float8_e4m3fn caches taking (q, k_cache, v_cache, kv_indptr, kv_indices, "
         "kv_last_page_len, sm_scale, k_scale, v_scale), and this one takes (q, k_cache, "
         "v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, k_scales, v_scale)"},
        /* a scale of another dtype or shape */
        {"\"dtype\": \"float32\",\n      \"description\": \"key scale",
         "\"dtype\": \"bfloat16\",\n      \"description\": \"key scale",
         "input k_scale is bfloat16; kvfuzz runs gqa_paged_decode with float32 k_scale"},
        {"\"num_scales\"\n      ],\n      \"dtype\": \"float32\",\n      \"description\": \"value",
         "\"num_kv_heads\"\n      ],\n      \"dtype\": \"float32\",\n      \"description\": "
         "\"value",
         "input v_scale does not have the shape [num_scales] kvfuzz's FP8 gqa_paged_decode gives "
         "it"},
        /* one scale per cache */
        {"\"type\": \"const\",\n      \"value\": 1,", "\"type\": \"const\",\n      \"value\": 4,",
         "axis num_scales is not const with the value 1 (kvfuzz's FP8 definitions take one "
         "k_scale and one v_scale per cache)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        text =
            replace(kvf_fib_definition_json(20, 4, 128, 64, KVF_KV_E4M3), bad[i].from, bad[i].to);
        CHECK_INT_EQ(kvf_fib_definition_parse(&d, text, strlen(text), "edited", &err), KVF_EINVAL);
        CHECK_STR_CONTAINS(err.msg, bad[i].refusal);
        free(text);
    }
    /* bf16 caches with scales: the bf16 signature is named, and that FP8 caches add scales. */
    text = replace(kvf_fib_definition_json(20, 4, 128, 64, KVF_KV_E4M3),
                   "\"float8_e4m3fn\",\n      \"description\": \"paged key",
                   "\"bfloat16\",\n      \"description\": \"paged key");
    CHECK_INT_EQ(kvf_fib_definition_parse(&d, text, strlen(text), "edited", &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "is not paged decode: kvfuzz imports gqa_paged_decode definitions "
                                "taking (q, k_cache, v_cache, kv_indptr, kv_indices, "
                                "kv_last_page_len, sm_scale) (FP8 caches add k_scale, v_scale)");
    free(text);
}

static const check_test tests[] = {
    {"quantization_coverage", test_quantization_coverage},
    {"fp8_definition_parse", test_fp8_definition_parse},
    {"writer_layout_and_round_trip", test_writer_layout_and_round_trip},
    {"reader_refuses", test_reader_refuses},
    {"origin_section_round_trip", test_origin_section_round_trip},
    {"definition_parse", test_definition_parse},
    {"definition_axes_without_type", test_definition_axes_without_type},
    {"fib_evaluate", test_fib_evaluate},
    {NULL, NULL},
};

CHECK_MAIN(tests)
