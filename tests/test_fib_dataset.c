/* The FlashInfer-Bench dataset an export builds (kvfuzz/fib_dataset.h): definitions per shape,
 * solution records and their unique names, workload uuids, trace evaluations, and the files
 * written into a new folder and moved into place. */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "kvfuzz/fib_dataset.h"
#include "kvfuzz/file.h"

static kvf_fib_dataset ds; /* large: not on the stack */

static void built_case(const char *preset, kvf_spec *s, kvf_case *c) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(s, preset, 1, &err), &err);
    CHECK_OK(kvf_case_build(c, s, &lim, &err), &err);
}

static int exists(const char *dir, const char *rel) {
    char path[1024];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    return stat(path, &sb) == 0;
}

static void test_definitions(void) {
    memset(&ds, 0, sizeof ds);
    kvf_spec s1, s2;
    kvf_case c1, c2;
    built_case("seed-h20kv4", &s1, &c1);
    built_case("page1", &s2, &c2);
    kvf_fib_def *a = kvf_fib_dataset_def_for(&ds, &c1), *b = kvf_fib_dataset_def_for(&ds, &c2);
    CHECK(a && b && a != b);
    CHECK(kvf_fib_dataset_def_for(&ds, &c1) == a);
    CHECK_STR_EQ(a->name, "gqa_paged_decode_h20_kv4_d128_ps64");
    CHECK(a->hq == 20 && a->hk == 4 && a->d == 128 && a->s == 64);
    CHECK_INT_EQ(ds.ndefs, 2);
    kvf_fib_trace_file *t = kvf_fib_dataset_trace_file_for(a, "kvfuzz");
    CHECK(t && kvf_fib_dataset_trace_file_for(a, "kvfuzz") == t);
    CHECK(kvf_fib_dataset_trace_file_for(a, "ann") != t);
    kvf_fib_dataset_free(&ds);
    kvf_case_free(&c1), kvf_case_free(&c2);
    kvf_spec_free(&s1), kvf_spec_free(&s2);
}

/* kvfuzz-<kernel>-<shape>, a plugin's folders left out; a FIB solution's own name and author;
 * a name taken gets the shape, then a number. */
static void test_solution_names(void) {
    memset(&ds, 0, sizeof ds);
    kvf_spec s;
    kvf_case c;
    built_case("seed-h20kv4", &s, &c);
    kvf_fib_def *d = kvf_fib_dataset_def_for(&ds, &c);
    int ids[4];
    kvf_fib_kernel_ref a = {&ids[0], "cpu-ref", NULL, 0, NULL};
    const kvf_fib_solution *r = kvf_fib_dataset_solution_for(&ds, &a, d);
    CHECK_STR_EQ(r->name, "kvfuzz-cpu-ref-h20_kv4_d128_ps64");
    CHECK_STR_EQ(r->author, "kvfuzz");
    CHECK(kvf_fib_dataset_solution_for(&ds, &a, d) == r);
    kvf_fib_kernel_ref same_name = {&ids[1], "cpu-ref", NULL, 0, NULL};
    CHECK_STR_EQ(kvf_fib_dataset_solution_for(&ds, &same_name, d)->name,
                 "kvfuzz-cpu-ref-h20_kv4_d128_ps64-h20_kv4_d128_ps64");
    kvf_fib_kernel_ref third = {&ids[2], "cpu-ref", NULL, 0, NULL};
    CHECK_STR_EQ(kvf_fib_dataset_solution_for(&ds, &third, d)->name,
                 "kvfuzz-cpu-ref-h20_kv4_d128_ps64-h20_kv4_d128_ps64-2");
    kvf_fib_kernel_ref plugin = {&ids[3], "/opt/k/libmy.so:fast v2", "/opt/k/libmy.so", 1, NULL};
    CHECK_STR_EQ(kvf_fib_dataset_solution_for(&ds, &plugin, d)->name,
                 "kvfuzz-libmy.so-fast-v2-h20_kv4_d128_ps64");
    json_t *own = json_pack("{s:s, s:s}", "name", "my sol", "author", "Ann B");
    kvf_fib_kernel_ref fib = {own, "sol.json", NULL, 1, own};
    const kvf_fib_solution *f = kvf_fib_dataset_solution_for(&ds, &fib, d);
    CHECK_STR_EQ(f->name, "my-sol");
    CHECK_STR_EQ(f->author, "Ann-B");
    json_decref(own);
    kvf_fib_dataset_free(&ds);
    kvf_case_free(&c);
    kvf_spec_free(&s);
}

static void test_uuids(void) {
    memset(&ds, 0, sizeof ds);
    kvf_spec s;
    kvf_case c;
    built_case("seed-h20kv4", &s, &c);
    char u[KVF_ORIGIN_NAME_MAX + 1];
    kvf_fib_dataset_pick_uuid(&ds, &s, "o-tolerance-12ab.kvfz", 1, u, sizeof u);
    CHECK_STR_EQ(u, "o-tolerance-12ab");
    kvf_fib_dataset_pick_uuid(&ds, &s, "o-tolerance-12ab.kvfz", 1, u, sizeof u);
    CHECK_STR_EQ(u, "o-tolerance-12ab-2");
    kvf_fib_dataset_pick_uuid(&ds, &s, "a b.kvfz", 1, u, sizeof u);
    CHECK_STR_EQ(u, "a-b");
    kvf_fib_dataset_pick_uuid(&ds, &s, ".kvfz", 1, u, sizeof u);
    CHECK_STR_EQ(u, "finding");
    s.has_origin = 1;
    snprintf(s.origin.workload_uuid, sizeof s.origin.workload_uuid, "6120f144");
    kvf_fib_dataset_pick_uuid(&ds, &s, "x.kvfz", 0, u, sizeof u);
    CHECK_STR_EQ(u, "6120f144"); /* a case as imported keeps its workload's uuid */
    kvf_fib_dataset_pick_uuid(&ds, &s, "x.kvfz", 1, u, sizeof u);
    CHECK_STR_EQ(u, "x"); /* a finding is a workload of its own */
    CHECK_INT_EQ(ds.nuuids, 6);
    kvf_fib_dataset_free(&ds);
    kvf_case_free(&c);
    kvf_spec_free(&s);
}

/* PASSED with performance, INCORRECT_NUMERICAL without, kvfuzz's extra under correctness; a
 * run without outputs TIMEOUT or RUNTIME_ERROR with the extra, or the message, as its log. */
static void test_evaluation(void) {
    kvf_spec s;
    kvf_case c;
    built_case("seed-h20kv4", &s, &c);
    const int64_t no = kvf_case_o_elems(&c), nl = kvf_case_lse_elems(&c);
    kvf_bf16 *o = calloc((size_t)no, sizeof *o), *ref = calloc((size_t)no, sizeof *ref);
    float *lse = calloc((size_t)nl, sizeof *lse), *ref_lse = calloc((size_t)nl, sizeof *lse);
    kvf_fib_trace_run run = {KVF_FIB_RUN_OK, "", &c, o, ref, lse, ref_lse};
    json_t *e = kvf_fib_trace_evaluation(&run, json_pack("{s:s}", "class", "none"));
    CHECK_STR_EQ(json_string_value(json_object_get(e, "status")), "PASSED");
    CHECK(json_object_get(e, "performance") != NULL);
    json_t *extra =
        json_object_get(json_object_get(json_object_get(e, "correctness"), "extra"), "kvfuzz");
    CHECK_STR_EQ(json_string_value(json_object_get(extra, "class")), "none");
    json_decref(e);
    o[5] = kvf_f32_to_bf16_rne(1.0f);
    e = kvf_fib_trace_evaluation(&run, NULL);
    CHECK_STR_EQ(json_string_value(json_object_get(e, "status")), "INCORRECT_NUMERICAL");
    CHECK(json_object_get(e, "performance") == NULL);
    json_t *corr = json_object_get(e, "correctness");
    CHECK(json_real_value(json_object_get(corr, "max_absolute_error")) == 1.0);
    json_decref(e);
    kvf_fib_trace_run hang = {
        KVF_FIB_RUN_TIMEOUT, "passed its deadline", &c, NULL, NULL, NULL, NULL};
    e = kvf_fib_trace_evaluation(&hang, json_pack("{s:s}", "class", "hang"));
    CHECK_STR_EQ(json_string_value(json_object_get(e, "status")), "TIMEOUT");
    CHECK_STR_EQ(json_string_value(json_object_get(e, "log")), "{\"class\":\"hang\"}");
    CHECK(json_object_get(e, "correctness") == NULL);
    json_decref(e);
    hang.end = KVF_FIB_RUN_ERROR;
    e = kvf_fib_trace_evaluation(&hang, NULL);
    CHECK_STR_EQ(json_string_value(json_object_get(e, "status")), "RUNTIME_ERROR");
    CHECK_STR_EQ(json_string_value(json_object_get(e, "log")), "passed its deadline");
    json_decref(e);
    free(o), free(ref), free(lse), free(ref_lse);
    kvf_case_free(&c);
    kvf_spec_free(&s);
}

/* Written into a new folder beside the destination, only definitions with workloads, then moved
 * into place; a destination that holds something is refused. */
static void test_write_and_publish(void) {
    memset(&ds, 0, sizeof ds);
    kvf_spec s1, s2;
    kvf_case c1, c2;
    built_case("seed-h20kv4", &s1, &c1);
    built_case("page1", &s2, &c2);
    kvf_fib_def *d = kvf_fib_dataset_def_for(&ds, &c1);
    CHECK(kvf_fib_dataset_def_for(&ds, &c2) != NULL); /* no workload: not written */
    kvf_fib_kernel_ref k = {&k, "cpu-ref", NULL, 0, NULL};
    const kvf_fib_solution *sol = kvf_fib_dataset_solution_for(&ds, &k, d);
    kvf_fib_trace_file *tf = kvf_fib_dataset_trace_file_for(d, sol->author);
    json_t *wl = json_pack("{s:s}", "uuid", "u1");
    kvf_fib_trace_run run = {KVF_FIB_RUN_ERROR, "boom", &c1, NULL, NULL, NULL, NULL};
    kvf_error err = {0};
    CHECK_OK(kvf_fib_dataset_add_trace(d, tf, sol, wl, kvf_fib_trace_evaluation(&run, NULL), &err),
             &err);
    CHECK_INT_EQ(json_object_size(wl), 1); /* borrowed, unchanged */
    CHECK_STR_EQ(d->workloads, "{\"definition\":\"gqa_paged_decode_h20_kv4_d128_ps64\",\"solution\""
                               ":null,\"workload\":{\"uuid\":\"u1\"},\"evaluation\":null}\n");
    CHECK_STR_CONTAINS(tf->text, "\"solution\":\"kvfuzz-cpu-ref-h20_kv4_d128_ps64\"");
    json_decref(wl);

    char root[] = "/tmp/kvfuzz-test-fib-dataset-XXXXXX", final[128], partial[160];
    CHECK(mkdtemp(root) != NULL);
    snprintf(final, sizeof final, "%s/out", root);
    CHECK(mkdir(final, 0777) == 0);
    CHECK_OK(kvf_fib_dataset_begin(final, partial, sizeof partial, &err), &err); /* empty: ok */
    size_t ndefs = 0;
    CHECK_OK(kvf_fib_dataset_write(&ds, partial, &ndefs, &err), &err);
    CHECK_INT_EQ(ndefs, 1);
    CHECK_OK(kvf_fib_dataset_publish(partial, final, &err), &err);
    CHECK(!exists(partial, "."));
    CHECK(exists(final, "definitions/gqa_paged/gqa_paged_decode_h20_kv4_d128_ps64.json"));
    CHECK(exists(final, "workloads/gqa_paged/gqa_paged_decode_h20_kv4_d128_ps64.jsonl"));
    CHECK(exists(final, "traces/kvfuzz/gqa_paged/gqa_paged_decode_h20_kv4_d128_ps64.jsonl"));
    CHECK(exists(final, "solutions/kvfuzz/gqa_paged/gqa_paged_decode_h20_kv4_d128_ps64/"
                        "kvfuzz-cpu-ref-h20_kv4_d128_ps64.json"));
    CHECK(!exists(final, "definitions/gqa_paged/gqa_paged_decode_h8_kv8_d64_ps1.json"));
    CHECK_INT_EQ(kvf_fib_dataset_begin(final, partial, sizeof partial, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "exists and is not an empty folder");
    CHECK_INT_EQ(kvf_remove_tree(root), 0);
    kvf_fib_dataset_free(&ds);
    kvf_case_free(&c1), kvf_case_free(&c2);
    kvf_spec_free(&s1), kvf_spec_free(&s2);
}

static void test_solution_record(void) {
    char dir[] = "/tmp/kvfuzz-test-fib-sol-XXXXXX", good[128], bad[128];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(good, sizeof good, "%s/s.json", dir);
    snprintf(bad, sizeof bad, "%s/t.json", dir);
    FILE *f = fopen(good, "w");
    fputs("{\"name\": \"x\", \"spec\": {}, \"sources\": []}", f);
    fclose(f);
    f = fopen(bad, "w");
    fputs("{\"name\": \"x\", \"sources\": []}", f);
    fclose(f);
    json_t *j = kvf_fib_solution_record(good);
    CHECK(json_is_object(j));
    CHECK_STR_EQ(json_string_value(json_object_get(j, "name")), "x");
    json_decref(j);
    CHECK(kvf_fib_solution_record(bad) == NULL);
    CHECK(kvf_fib_solution_record("cpu-ref") == NULL);
    CHECK(kvf_fib_solution_record(".json") == NULL);
    CHECK_INT_EQ(kvf_remove_tree(dir), 0);
}

/* FP8 findings go to kvfuzz's FP8 definition of their shape, one per dtype, beside the bf16
 * one; the definition is written from the dtype, and kvfuzz's solution record takes the two
 * scales after sm_scale, as the definition does. */
static void test_fp8_definitions(void) {
    memset(&ds, 0, sizeof ds);
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_spec s[3];
    kvf_case c[3];
    kvf_error err = {0};
    static const char *const names[3] = {"gqa_paged_decode_h20_kv4_d128_ps64",
                                         "gqa_paged_decode_h20_kv4_d128_ps64_fp8_e4m3",
                                         "gqa_paged_decode_h20_kv4_d128_ps64_fp8_e5m2"};
    kvf_fib_def *d[3];
    for (int i = 0; i < 3; i++) {
        CHECK_OK(kvf_spec_preset(&s[i], "seed-h20kv4", 1, &err), &err);
        if (i)
            s[i].quant =
                (kvf_quant_recipe){{(uint8_t)i, (uint8_t)i, KVF_SCALE_TENSOR}, 0.25f, 4.0f, 0, 0};
        CHECK_OK(kvf_case_build(&c[i], &s[i], &lim, &err), &err);
        d[i] = kvf_fib_dataset_def_for(&ds, &c[i]);
        CHECK(d[i] != NULL);
        if (!d[i]) return;
        CHECK_STR_EQ(d[i]->name, names[i]);
        CHECK_INT_EQ(d[i]->kv_dtype, i);
    }
    CHECK_INT_EQ(ds.ndefs, 3);
    kvf_fib_kernel_ref k = {&k, "cpu-ref", NULL, 0, NULL};
    const kvf_fib_solution *sol = kvf_fib_dataset_solution_for(&ds, &k, d[2]);
    CHECK_STR_EQ(sol->name, "kvfuzz-cpu-ref-h20_kv4_d128_ps64_fp8_e5m2");
    kvf_fib_trace_file *tf = kvf_fib_dataset_trace_file_for(d[2], sol->author);
    json_t *wl = json_pack("{s:s}", "uuid", "u1");
    kvf_fib_trace_run run = {KVF_FIB_RUN_ERROR, "boom", &c[2], NULL, NULL, NULL, NULL};
    CHECK_OK(
        kvf_fib_dataset_add_trace(d[2], tf, sol, wl, kvf_fib_trace_evaluation(&run, NULL), &err),
        &err);
    json_decref(wl);
    char root[] = "/tmp/kvfuzz-test-fib-dataset-XXXXXX", path[512];
    CHECK(mkdtemp(root) != NULL);
    size_t ndefs = 0;
    CHECK_OK(kvf_fib_dataset_write(&ds, root, &ndefs, &err), &err);
    CHECK_INT_EQ(ndefs, 1);
    snprintf(path, sizeof path, "%s/definitions/gqa_paged/%s.json", root, names[2]);
    json_t *def = json_load_file(path, 0, NULL);
    CHECK_STR_EQ(json_string_value(json_object_get(
                     json_object_get(json_object_get(def, "inputs"), "v_cache"), "dtype")),
                 "float8_e5m2");
    json_decref(def);
    snprintf(path, sizeof path,
             "%s/solutions/kvfuzz/gqa_paged/%s/kvfuzz-cpu-ref-h20_kv4_d128_ps64_fp8_e5m2.json",
             root, names[2]);
    json_t *rec = json_load_file(path, 0, NULL);
    const char *src = json_string_value(
        json_object_get(json_array_get(json_object_get(rec, "sources"), 0), "content"));
    CHECK_STR_CONTAINS(src, "def run(q, k_cache, v_cache, kv_indptr, kv_indices, "
                            "kv_last_page_len, sm_scale, k_scale, v_scale, output, lse):");
    json_decref(rec);
    CHECK_INT_EQ(kvf_remove_tree(root), 0);
    kvf_fib_dataset_free(&ds);
    for (int i = 0; i < 3; i++) {
        kvf_case_free(&c[i]);
        kvf_spec_free(&s[i]);
    }
}

static const check_test tests[] = {
    {"definitions", test_definitions},
    {"solution_names", test_solution_names},
    {"uuids", test_uuids},
    {"evaluation", test_evaluation},
    {"write_and_publish", test_write_and_publish},
    {"solution_record", test_solution_record},
    {"fp8_definitions", test_fp8_definitions},
    {NULL, NULL},
};

CHECK_MAIN(tests)
