/* `kvfuzz bench`'s host side (kvfuzz/bench_workload.h), on the CPU: the presets and custom
 * workloads, --heads and --head-dim, the host case a workload is timed on, the roofline's bytes,
 * the agreement check, the timing statistics, a row's check word and JSON, and which kernels
 * bench accepts. */
#include "check.h"
#include "kvfuzz/bench_workload.h"
#include "kvfuzz/bf16.h"

static void test_presets(void) {
    kvf_bench_workloads w;
    kvf_error err = {0};
    CHECK_OK(kvf_bench_workloads_make(&w, NULL, -1, -1, 1, &err), &err);
    CHECK_INT_EQ(w.count, 1);
    CHECK_STR_EQ(w.items[0].name, "seed");
    CHECK_INT_EQ(w.items[0].batch, 1);
    CHECK_INT_EQ(w.items[0].lens[0], 50 * 64 + 2); /* corpus/seeds/00-seed-h20kv4.kvfz */
    kvf_bench_workloads_free(&w);
    CHECK_INT_EQ(w.count, 0);

    CHECK_OK(kvf_bench_workloads_make(&w, "sweep", -1, -1, 1, &err), &err);
    CHECK_INT_EQ(w.count, 12);
    CHECK_STR_EQ(w.items[0].name, "b1-l512");
    CHECK_STR_EQ(w.items[5].name, "b8-l32768");
    CHECK_STR_EQ(w.items[11].name, "b128-l32768");
    CHECK_INT_EQ(w.items[11].batch, 128);
    CHECK_INT_EQ(w.items[11].lens[127], 32768);
    CHECK_INT_EQ(kvf_bench_workload_max_len(&w.items[4]), 4096);
    kvf_bench_workloads_free(&w);

    CHECK_OK(kvf_bench_workloads_make(&w, "seed", 3, 7, 1, &err), &err);
    CHECK_INT_EQ(w.count, 1); /* --batch/--len: the custom workload only */
    CHECK_STR_EQ(w.items[0].name, "b3-l7");
    CHECK(w.items[0].lens[0] == 7 && w.items[0].lens[2] == 7);
    kvf_bench_workloads_free(&w);

    CHECK_INT_EQ(kvf_bench_workloads_make(&w, "huge", -1, -1, 1, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "unknown preset \"huge\"");
    CHECK_INT_EQ(w.count, 0);
    CHECK(kvf_bench_preset_known("mixed") && !kvf_bench_preset_known("Mixed"));
}

/* mixed: 64 lengths log-uniform in [1, 16384] from the seed, sequences 5 and 40 empty. */
static void test_mixed(void) {
    kvf_bench_workloads a, b, c;
    kvf_error err = {0};
    CHECK_OK(kvf_bench_workloads_make(&a, "mixed", -1, -1, 1, &err), &err);
    CHECK_OK(kvf_bench_workloads_make(&b, "mixed", -1, -1, 1, &err), &err);
    CHECK_OK(kvf_bench_workloads_make(&c, "mixed", -1, -1, 2, &err), &err);
    CHECK_INT_EQ(a.items[0].batch, 64);
    CHECK(a.items[0].lens[5] == 0 && a.items[0].lens[40] == 0);
    int empty = 0, long_ones = 0;
    for (int i = 0; i < 64; i++) {
        CHECK(a.items[0].lens[i] >= 0 && a.items[0].lens[i] <= 16384);
        empty += a.items[0].lens[i] == 0;
        long_ones += a.items[0].lens[i] >= 1024;
    }
    CHECK_INT_EQ(empty, 2);
    CHECK(long_ones > 5); /* log-uniform: about a quarter are at least 2^10 */
    CHECK(memcmp(a.items[0].lens, b.items[0].lens, 64 * sizeof(int32_t)) == 0);
    CHECK(memcmp(a.items[0].lens, c.items[0].lens, 64 * sizeof(int32_t)) != 0);
    kvf_bench_workloads_free(&a);
    kvf_bench_workloads_free(&b);
    kvf_bench_workloads_free(&c);
}

static void test_parse_shape(void) {
    int32_t hq = 0, hk = 0, d = 0;
    CHECK(kvf_bench_parse_heads("20:4", &hq, &hk) == 0 && hq == 20 && hk == 4);
    CHECK(kvf_bench_parse_heads("16:1", &hq, &hk) == 0 && hq == 16 && hk == 1);
    CHECK_INT_EQ(kvf_bench_parse_heads("32:1", &hq, &hk), -1); /* a group of 32 */
    CHECK_INT_EQ(kvf_bench_parse_heads("3:2", &hq, &hk), -1);  /* 2 does not divide 3 */
    CHECK_INT_EQ(kvf_bench_parse_heads("0:1", &hq, &hk), -1);
    CHECK_INT_EQ(kvf_bench_parse_heads("2048:1024", &hq, &hk), -1);
    CHECK_INT_EQ(kvf_bench_parse_heads("20", &hq, &hk), -1);
    CHECK_INT_EQ(kvf_bench_parse_heads("20:4x", &hq, &hk), -1);
    CHECK_INT_EQ(kvf_bench_parse_heads("000000000000000000000000000000000020:4", &hq, &hk), -1);
    CHECK(kvf_bench_parse_head_dim("256", &d) == 0 && d == 256);
    CHECK_INT_EQ(kvf_bench_parse_head_dim("100", &d), -1);
    CHECK_INT_EQ(kvf_bench_parse_head_dim("512", &d), -1);
    CHECK_INT_EQ(kvf_bench_parse_head_dim("0x80", &d), -1);
}

static kvf_bench_workload workload(const char *name, int32_t batch, int32_t *lens) {
    kvf_bench_workload w = {{0}, batch, lens};
    snprintf(w.name, sizeof w.name, "%s", name);
    return w;
}

/* The case: lengths into pages, a shuffled table over a pool of one page more, q in [-1, 1]. */
static void test_case_build(void) {
    int32_t lens[4] = {0, 5, 64, 65};
    kvf_bench_workload w = workload("t", 4, lens);
    kvf_bench_shape sh = {8, 2, 128, 64, 0, 0};
    kvf_case c, again, other;
    kvf_error err = {0};
    CHECK_OK(kvf_bench_case_build(&c, &w, &sh, 7, 1, &err), &err);
    const int32_t indptr[5] = {0, 0, 1, 2, 4}, last[4] = {0, 5, 64, 1};
    CHECK(memcmp(c.kv_indptr, indptr, sizeof indptr) == 0);
    CHECK(memcmp(c.kv_last_page_len, last, sizeof last) == 0);
    CHECK_INT_EQ(c.num_pages, 5);
    CHECK_INT_EQ(kvf_case_total_tokens(&c), 134);
    CHECK(c.k_cache == NULL && c.v_cache == NULL);
    CHECK_DBL_EQ(c.sm_scale, (float)(1.0 / sqrt(128.0)));
    int seen[5] = {0};
    for (int i = 0; i < 4; i++) {
        CHECK(c.kv_indices[i] >= 0 && c.kv_indices[i] < 5);
        if (c.kv_indices[i] >= 0 && c.kv_indices[i] < 5) CHECK(!seen[c.kv_indices[i]]++);
    }
    double lo = 1, hi = -1;
    for (int64_t i = 0; i < kvf_case_q_elems(&c); i++) {
        float x = kvf_bf16_to_f32(c.q[i]);
        lo = x < lo ? x : lo, hi = x > hi ? x : hi;
    }
    CHECK(lo >= -1 && hi <= 1 && lo < -0.9 && hi > 0.9);
    /* The same seed gives the same case; the first workload's table is seeded apart. */
    CHECK_OK(kvf_bench_case_build(&again, &w, &sh, 7, 1, &err), &err);
    CHECK(memcmp(c.q, again.q, (size_t)kvf_case_q_elems(&c) * 2) == 0);
    CHECK(memcmp(c.kv_indices, again.kv_indices, 4 * sizeof(int32_t)) == 0);
    int32_t big[1] = {64 * 40};
    kvf_bench_workload wb = workload("b", 1, big);
    kvf_case_free(&c);
    kvf_case_free(&again);
    CHECK_OK(kvf_bench_case_build(&c, &wb, &sh, 7, 1, &err), &err);
    CHECK_OK(kvf_bench_case_build(&other, &wb, &sh, 7, 0, &err), &err);
    CHECK(memcmp(c.kv_indices, other.kv_indices, 40 * sizeof(int32_t)) != 0);
    CHECK(memcmp(c.q, other.q, (size_t)kvf_case_q_elems(&c) * 2) == 0);
    kvf_case_free(&c);
    kvf_case_free(&other);
}

static void test_case_too_many_pages(void) {
    int32_t *lens = malloc(65535 * sizeof *lens);
    for (int i = 0; i < 65535; i++)
        lens[i] = 1 << 20;
    kvf_bench_workload w = workload("b65535-l1048576", 65535, lens);
    kvf_bench_shape sh = {20, 4, 128, 1, 0, 0};
    kvf_case c;
    kvf_error err = {0};
    CHECK_INT_EQ(kvf_bench_case_build(&c, &w, &sh, 1, 1, &err), KVF_ELIMIT);
    CHECK_STR_EQ(err.msg, "workload b65535-l1048576 needs more than 2^31-1 pages.");
    CHECK(c.kv_indptr == NULL && c.q == NULL);
    free(lens);
}

/* q, the K and V rows read, o and lse: by hand for Hq 4, Hk 2, D 64, lengths 3 and 0. */
static void test_bytes(void) {
    int32_t lens[2] = {3, 0};
    kvf_bench_workload w = workload("t", 2, lens);
    kvf_bench_shape sh = {4, 2, 64, 16, 0, 0};
    kvf_case c;
    kvf_error err = {0};
    CHECK_OK(kvf_bench_case_build(&c, &w, &sh, 1, 0, &err), &err);
    CHECK_INT_EQ(kvf_bench_bytes(&c), 1024 + 3 * 2 * 64 * 2 * 2 + 1024 + 2 * 4 * 4);
    CHECK_DBL_EQ(kvf_bench_gbps(2000000, 1000.0), 2.0);
    kvf_case_free(&c);
    /* FP8 caches: one byte an element, plus the scales the kernel reads (per tensor: the two
     * scalars; per token: a k and a v scale per row read). */
    kvf_bench_shape s8 = {4, 2, 64, 16, KVF_KV_E4M3, KVF_SCALE_TENSOR};
    CHECK_OK(kvf_bench_case_build(&c, &w, &s8, 1, 0, &err), &err);
    CHECK_INT_EQ(c.quant.k_dtype, KVF_KV_E4M3);
    CHECK_INT_EQ(c.quant.v_dtype, KVF_KV_E4M3);
    CHECK(c.k_scale && c.v_scale && c.k_scale[0] > 0 && c.v_scale[0] > 0);
    CHECK_INT_EQ(kvf_bench_bytes(&c), 1024 + 3 * 2 * 64 * 2 + 8 + 1024 + 2 * 4 * 4);
    kvf_case_free(&c);
    s8.kv_dtype = KVF_KV_E5M2, s8.scale_gran = KVF_SCALE_TOKEN;
    CHECK_OK(kvf_bench_case_build(&c, &w, &s8, 1, 0, &err), &err);
    CHECK_INT_EQ(kvf_case_scale_count(&c), c.num_pages * 16 * 2);
    for (int64_t i = 0; i < kvf_case_scale_count(&c); i++)
        CHECK(c.k_scale[i] > 0 && c.v_scale[i] > 0);
    CHECK_INT_EQ(kvf_bench_bytes(&c), 1024 + 3 * 2 * 64 * 2 + 3 * 2 * 8 + 1024 + 2 * 4 * 4);
    kvf_case_free(&c);
}

static void test_compare(void) {
    int32_t lens[1] = {3};
    kvf_bench_workload w = workload("t", 1, lens);
    kvf_bench_shape sh = {1, 1, 64, 16, 0, 0};
    kvf_case c;
    kvf_error err = {0};
    CHECK_OK(kvf_bench_case_build(&c, &w, &sh, 1, 0, &err), &err);
    kvf_bf16 o[64], ref[64];
    float lse[1] = {2.0f}, lse_ref[1] = {2.0f};
    for (int i = 0; i < 64; i++)
        o[i] = ref[i] = kvf_f32_to_bf16_rne(1.0f);
    kvf_bench_result r;
    kvf_bench_compare(&c, o, lse, ref, lse_ref, &r);
    CHECK(r.agree && r.max_abs_o == 0 && r.max_abs_lse == 0);
    o[3] = kvf_f32_to_bf16_rne(1.0078125f); /* 2^-7: within 1e-2 relative */
    kvf_bench_compare(&c, o, lse, ref, lse_ref, &r);
    CHECK(r.agree);
    CHECK_DBL_EQ(r.max_abs_o, 0.0078125);
    o[3] = kvf_f32_to_bf16_rne(1.5f);
    kvf_bench_compare(&c, o, lse, ref, lse_ref, &r);
    CHECK(!r.agree);
    CHECK_DBL_EQ(r.max_abs_o, 0.5);
    o[3] = ref[3];
    lse[0] = 2.01f;
    kvf_bench_compare(&c, o, lse, ref, lse_ref, &r);
    CHECK(!r.agree); /* lse: 1e-3 */
    lse[0] = lse_ref[0] = -INFINITY;
    kvf_bench_compare(&c, o, lse, ref, lse_ref, &r);
    CHECK(r.agree); /* both empty */
    lse_ref[0] = INFINITY;
    kvf_bench_compare(&c, o, lse, ref, lse_ref, &r);
    CHECK(!r.agree);
    lse_ref[0] = -INFINITY;
    o[0] = 0x7fc0; /* NaN */
    kvf_bench_compare(&c, o, lse, ref, lse_ref, &r);
    CHECK(!r.agree);
    kvf_case_free(&c);
}

static void test_statistics(void) {
    float odd[3] = {0.003f, 0.001f, 0.002f}, even[4] = {0.004f, 0.001f, 0.003f, 0.002f};
    double med, mn;
    kvf_bench_median_min(odd, 3, &med, &mn);
    CHECK(fabs(med - 2.0) < 1e-6 && fabs(mn - 1.0) < 1e-6);
    kvf_bench_median_min(even, 4, &med, &mn);
    CHECK(fabs(med - 2.5) < 1e-6 && fabs(mn - 1.0) < 1e-6);
    kvf_bench_result r = {0};
    kvf_bench_result_timed(&r, 10.0, 8.0, 5.0, 1000000);
    CHECK_DBL_EQ(r.gbps, 100.0);
    CHECK_DBL_EQ(r.fraction, 0.5);
    CHECK_DBL_EQ(r.min_us, 8.0);
}

static void test_check_word(void) {
    kvf_bench_result r = {0};
    r.agree = 1;
    CHECK_STR_EQ(kvf_bench_result_check(&r), "ok");
    CHECK(!kvf_bench_result_fails(&r));
    r.agree = 0;
    CHECK_STR_EQ(kvf_bench_result_check(&r), "MISMATCH");
    CHECK(kvf_bench_result_fails(&r));
    r.status = KVF_EUNSUPPORTED;
    CHECK_STR_EQ(kvf_bench_result_check(&r), "unsupported");
    CHECK(!kvf_bench_result_fails(&r));
    r.status = KVF_EOOBWRITE;
    CHECK_STR_EQ(kvf_bench_result_check(&r), "EOOBWRITE");
    CHECK(kvf_bench_result_fails(&r));
}

/* A timed row has its numbers, an untimed one none (null differences) and its error. */
static void test_json(void) {
    int32_t lens[2] = {100, 7};
    kvf_bench_workload w = workload("b2", 2, lens);
    kvf_bench_shape sh = {20, 4, 128, 64, 0, 0};
    kvf_bench_device dev = {"GPU", 132, 50 << 20};
    json_t *results = NULL;
    json_t *root = kvf_bench_json_root("2024-01-02", &dev, 50, 5, 256u << 20, &results);
    CHECK(root && results && json_object_get(root, "results") == results);
    CHECK_STR_EQ(json_string_value(json_object_get(root, "gpu")), "GPU");
    CHECK_INT_EQ(json_integer_value(json_object_get(root, "flush_bytes")), 256 << 20);
    kvf_bench_result ok = {.kernel = "cuda", .agree = 1}, bad = {.kernel = "p.so:k"};
    snprintf(ok.plan, sizeof ok.plan, "splits 4");
    kvf_bench_result_timed(&ok, 10.0, 9.0, 5.0, 1000);
    bad.status = KVF_EUNWRITTEN;
    snprintf(bad.why, sizeof bad.why, "left 3 elements unwritten");
    json_t *a = kvf_bench_json_row(&w, &sh, &ok, 107, 1000, 5.0);
    json_t *b = kvf_bench_json_row(&w, &sh, &bad, 107, 1000, 5.0);
    CHECK(a && b);
    CHECK_INT_EQ(json_integer_value(json_object_get(a, "max_len")), 100);
    CHECK_INT_EQ(json_integer_value(json_object_get(a, "tokens")), 107);
    CHECK_DBL_EQ(json_real_value(json_object_get(a, "median_us")), 10.0);
    CHECK_DBL_EQ(json_real_value(json_object_get(a, "fraction_of_roofline")), 0.5);
    CHECK_DBL_EQ(json_real_value(json_object_get(a, "roofline_gb_per_s")), 0.2);
    CHECK_STR_EQ(json_string_value(json_object_get(a, "check")), "ok");
    CHECK(json_object_get(a, "error") == NULL);
    CHECK(json_object_get(b, "median_us") == NULL);
    CHECK(json_is_null(json_object_get(b, "max_abs_diff_o")));
    CHECK_STR_EQ(json_string_value(json_object_get(b, "check")), "EUNWRITTEN");
    CHECK_STR_EQ(json_string_value(json_object_get(b, "error")), "left 3 elements unwritten");
    CHECK(kvf_json_push(results, a) == 0 && kvf_json_push(results, b) == 0);
    CHECK_INT_EQ(json_array_size(json_object_get(root, "results")), 2);
    json_decref(root);
}

/* Only CUDA kernels: a CPU kernel named alone is refused, the list keeps what it had. */
static void test_kernels(void) {
    kvf_kernel_list list = {0};
    kvf_error err = {0};
    CHECK_INT_EQ(kvf_bench_add_kernels(&list, "cpu-ref", &err), KVF_EINVAL);
    CHECK_STR_EQ(err.msg, "cpu-ref is not a CUDA kernel");
    CHECK_INT_EQ(list.count, 0);
    CHECK(kvf_bench_add_kernels(&list, "no-such-kernel", &err) < 0);
    char longer[KVF_BENCH_KERNELS_MAX + 8];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = 0;
    CHECK_INT_EQ(kvf_bench_add_kernels(&list, longer, &err), KVF_EINVAL);
    const int cuda = kvf_kernel_find("cuda") != NULL;
    CHECK_OK(kvf_bench_default_kernels(&list, &err), &err);
    CHECK_INT_EQ(list.count, cuda ? 2 : 0);
    if (cuda) {
        CHECK_OK(kvf_bench_add_kernels(&list, "cuda,cuda-naive", &err), &err);
        CHECK_INT_EQ(list.count, 4);
        CHECK_OK(kvf_bench_default_kernels(&list, &err), &err); /* not empty: unchanged */
        CHECK_INT_EQ(list.count, 4);
    }
    kvf_kernel_list_free(&list);
}

static const check_test tests[] = {
    {"presets", test_presets},
    {"mixed", test_mixed},
    {"parse_shape", test_parse_shape},
    {"case_build", test_case_build},
    {"case_too_many_pages", test_case_too_many_pages},
    {"bytes", test_bytes},
    {"compare", test_compare},
    {"statistics", test_statistics},
    {"check_word", test_check_word},
    {"json", test_json},
    {"kernels", test_kernels},
    {NULL, NULL},
};

CHECK_MAIN(tests)
