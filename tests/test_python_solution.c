/* Python kernels (kernels/python), FlashInfer-Bench solutions: the solution JSON's errors, each
 * one sentence; definitions read from a dataset's layout (a signature in another order, no
 * kv_last_page_len, the eight-argument call); and solutions that load and run, which skip, with
 * the reason, where no python3 imports torch. */
#include <jansson.h>

#include "python_fixtures.h"

/* A FlashInfer-Bench definition: const axes, the inputs named in order, outputs output, lse. */
static void write_definition(const char *path, const char *name, const char *inputs, int hq, int hk,
                             int d, int ps) {
    FILE *f = fopen(path, "w");
    fprintf(f,
            "{\"name\": \"%s\", \"op_type\": \"gqa_paged\",\n"
            " \"axes\": {\"batch_size\": {\"type\": \"var\"},\n"
            "   \"num_qo_heads\": {\"type\": \"const\", \"value\": %d},\n"
            "   \"num_kv_heads\": {\"type\": \"const\", \"value\": %d},\n"
            "   \"head_dim\": {\"type\": \"const\", \"value\": %d},\n"
            "   \"page_size\": {\"type\": \"const\", \"value\": %d}},\n"
            " \"inputs\": {",
            name, hq, hk, d, ps);
    char list[512];
    snprintf(list, sizeof list, "%s", inputs);
    int first = 1;
    for (char *t = strtok(list, ", "); t; t = strtok(NULL, ", "), first = 0)
        fprintf(f, "%s\"%s\": {\"dtype\": \"bfloat16\"}", first ? "" : ", ", t);
    fputs("},\n \"outputs\": {\"output\": {\"dtype\": \"bfloat16\"}, \"lse\": {\"dtype\": "
          "\"float32\"}},\n \"reference\": \"\"}\n",
          f);
    fclose(f);
}

/* A dataset's folders under root: definitions/ (with gqa_paged/ when op_folder), solutions/. */
static void dataset_folders(const char *root, int op_folder) {
    char path[512];
    snprintf(path, sizeof path, "%s/definitions", root);
    mkdir(path, 0700);
    if (op_folder) {
        snprintf(path, sizeof path, "%s/definitions/gqa_paged", root);
        mkdir(path, 0700);
    }
    snprintf(path, sizeof path, "%s/solutions", root);
    mkdir(path, 0700);
}

/* Removes those folders (emptied by the test) and root; a folder not made is skipped. */
static void dataset_remove(const char *root) {
    static const char *const sub[] = {"definitions/gqa_paged", "definitions", "solutions"};
    char path[512];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", root, sub[i]);
        rmdir(path);
    }
    rmdir(root);
}

#define INPUTS_9 "q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale"
#define INPUTS_8 "q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale"

/* Definitions found in a dataset's layout are read: their signature is checked, their const
 * axes fix the shapes, and one without kv_last_page_len gets the eight-argument call. */
static void test_solution_definitions(void) {
    /* "[set]" in the folder's name: it is found as itself, not as a glob character class. */
    char root[] = "/tmp/kvfuzz-test-data[set]-XXXXXX", def[512], sol[512];
    CHECK(mkdtemp(root) != NULL);
    dataset_folders(root, 1);
    snprintf(sol, sizeof sol, "%s/solutions/s.json", root);

    /* A signature in another order. */
    snprintf(def, sizeof def, "%s/definitions/gqa_paged/gqa_paged_decode_x.json", root);
    write_definition(def, "gqa_paged_decode_x",
                     "q, k_cache, v_cache, kv_indices, kv_indptr, kv_last_page_len, sm_scale", 20,
                     4, 128, 64);
    write_solution(sol, "python", "main.py::decode", "main.py", "gqa_paged_decode_x");
    expect_make_error(sol, KVF_EINVAL, "takes (q, k_cache, v_cache, kv_indices, kv_indptr");
    /* No kv_last_page_len with pages of 64 tokens. */
    write_definition(def, "gqa_paged_decode_x", INPUTS_8, 20, 4, 128, 64);
    expect_make_error(sol, KVF_EINVAL, "has no kv_last_page_len input");
    /* A file that defines something else. */
    write_definition(def, "gqa_paged_decode_y", INPUTS_9, 20, 4, 128, 64);
    expect_make_error(sol, KVF_EINVAL, "defines gqa_paged_decode_y, not gqa_paged_decode_x");

    NEED_TORCH();
    /* The const axes fix the shape though the name says nothing. */
    write_definition(def, "gqa_paged_decode_x", INPUTS_9, 20, 4, 128, 64);
    kvf_kernel *k = make(sol);
    if (k) {
        char why[256] = "";
        kvf_plugin_shape sh = {.struct_size = sizeof sh};
        sh.num_qo_heads = 20, sh.num_kv_heads = 4, sh.head_dim = 128, sh.page_size = 64;
        CHECK_INT_EQ(k->desc->supports(k->desc, &sh, why, sizeof why), 1);
        sh.page_size = 16;
        CHECK_INT_EQ(k->desc->supports(k->desc, &sh, why, sizeof why), 0);
        CHECK_STR_CONTAINS(why, "fixes page size at 64, not 16");
    }
    kvf__python_kernel_free(k);

    /* Eight arguments for one-token pages, checked against the function's signature. */
    write_definition(def, "gqa_paged_decode_x", INPUTS_8, 8, 8, 64, 1);
    write_solution(sol, "python", "torch_decode.py::decode", "torch_decode.py",
                   "gqa_paged_decode_x");
    expect_make_error(sol, KVF_EINVAL, "cannot take kvfuzz's eight arguments");
    write_solution_with(sol, "python", "main.py::run", "torch_decode.py", "gqa_paged_decode_x",
                        "import torch\n"
                        "from torch_decode import decode\n"
                        "def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale, output, "
                        "lse):\n"
                        "    last = torch.ones(q.shape[0], dtype=torch.int32, device=q.device)\n"
                        "    decode(q, k_cache, v_cache, kv_indptr, kv_indices, last, sm_scale, "
                        "output, lse)\n");
    k = make(sol);
    kvf_host *h = k ? create(k) : NULL;
    kvf_case c;
    char seed[1024];
    snprintf(seed, sizeof seed, "%s/corpus/seeds/08-page1.kvfz", source_dir());
    if (h && load_case(seed, &c) == 0) {
        CHECK(judge_one(k, h, &c, "08-page1 through an eight-argument solution"));
        kvf_case_free(&c);
    }
    kvf_host_destroy(h);
    kvf__python_kernel_free(k);
    unlink(sol);
    unlink(def);
    dataset_remove(root);
}

static void test_solution_json(void) {
    char dir[] = "/tmp/kvfuzz-test-solution-XXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/solution.json", dir);

    write_solution(path, "cuda", "main.py::decode", "main.py",
                   "gqa_paged_decode_h20_kv4_d128_ps64");
    expect_make_error(path, KVF_EINVAL, "is written in cuda");
    write_solution(path, "python", NULL, "main.py", "gqa_paged_decode_h20_kv4_d128_ps64");
    expect_make_error(path, KVF_EINVAL, "has no entry point");
    write_solution(path, "python", "main.py::decode", "other.py",
                   "gqa_paged_decode_h20_kv4_d128_ps64");
    expect_make_error(path, KVF_EINVAL, "has no source file main.py");
    write_solution(path, "python", "main.py::decode", "../main.py",
                   "gqa_paged_decode_h20_kv4_d128_ps64");
    expect_make_error(path, KVF_EINVAL, "leaves its folder");
    write_solution(path, "python", "main.py::decode", "main.py", "rmsnorm_h4096");
    expect_make_error(path, KVF_EINVAL, "not a gqa_paged_decode definition");
    FILE *f = fopen(path, "w");
    fputs("{\"name\": \"broken\",", f);
    fclose(f);
    expect_make_error(path, KVF_EINVAL, "is not JSON");
    expect_make_error("/nonexistent/solution.json", KVF_ENOTFOUND, "cannot read solution");
    /* A FIFO, as the solution or as its definition, is refused at once (opening one waited
     * for a writer forever). */
    char fifo[300];
    snprintf(fifo, sizeof fifo, "%s/fifo.json", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    expect_make_error(fifo, KVF_EINVAL, "fifo.json is a FIFO, not a regular file");
    unlink(fifo);
    snprintf(fifo, sizeof fifo, "%s/gqa_paged_decode_h20_kv4_d128_ps64.json", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    write_solution(path, "python", "main.py::decode", "main.py",
                   "gqa_paged_decode_h20_kv4_d128_ps64");
    expect_make_error(path, KVF_EINVAL, "ps64.json is a FIFO, not a regular file");
    unlink(fifo);

    NEED_TORCH();
    write_solution(path, "python", "pkg/main.py::decode", "pkg/main.py",
                   "gqa_paged_decode_h20_kv4_d128_ps64");
    kvf_kernel *k = make(path);
    if (!k) goto out;
    CHECK(strcmp(k->name, "torch-reference") == 0);
    CHECK_STR_CONTAINS(k->description, "gqa_paged_decode_h20_kv4_d128_ps64");
    /* The definition fixes the shape: the seed's is supported, a head dim of 64 is not. */
    kvf_case c;
    char seed[1024], why[256] = "";
    snprintf(seed, sizeof seed, "%s/corpus/seeds/00-seed-h20kv4.kvfz", source_dir());
    if (load_case(seed, &c)) goto out;
    kvf_plugin_shape sh = {.struct_size = sizeof sh};
    sh.num_qo_heads = 20, sh.num_kv_heads = 4, sh.head_dim = 128, sh.page_size = 64;
    CHECK_INT_EQ(k->desc->supports(k->desc, &sh, why, sizeof why), 1);
    sh.head_dim = 64;
    CHECK_INT_EQ(k->desc->supports(k->desc, &sh, why, sizeof why), 0);
    CHECK_STR_CONTAINS(why, "head dim at 128, not 64");
    kvf_host *h = create(k);
    if (h) {
        host_run r;
        run_case(h, &c, &r);
        CHECK_OK(r.rc, &r.err);
        host_run_free(&r);
        kvf_host_destroy(h);
    }
    kvf_case_free(&c);
out:
    kvf__python_kernel_free(k);
    unlink(path);
    rmdir(dir);
}

/* A solution of an FP8 definition (docs/fib.md: both caches float8, one f32 scale each after
 * sm_scale): its function takes the eleven arguments in the definition's order; it declares the
 * definition's dtype with tensor scales, and its supports() takes exactly those caches (the gate
 * lets bf16 through to every kernel). A torch without float8 dtypes refuses it at load; an FP8
 * definition without the scales, or with caches of two dtypes, is a load error. */
static void test_fp8_solution(void) {
    char py[1024];
    NEED_PYTHON(py);
    char root[] = "/tmp/kvfuzz-test-fp8-XXXXXX", def[512], sol[512], src[1024];
    CHECK(mkdtemp(root) != NULL);
    const char *name = "gqa_paged_decode_h20_kv4_d128_ps64_fp8_e4m3";
    dataset_folders(root, 0);
    snprintf(def, sizeof def, "%s/definitions/%s.json", root, name);
    snprintf(sol, sizeof sol, "%s/solutions/s.json", root);
    snprintf(src, sizeof src, "%s/fib/definitions/gqa_paged/%s.json", source_dir(), name);
    json_error_t je;
    json_t *d = json_load_file(src, 0, &je);
    CHECK(d != NULL);
    if (!d) return;
    CHECK_INT_EQ(json_dump_file(d, def, 0), 0);
    write_solution_with(sol, "python", "main.py::run", "torch_decode.py", name,
                        "def run(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, "
                        "sm_scale, k_scale, v_scale, output, lse):\n"
                        "    pass\n");
    saved_env env;
    use_stub_torch(&env, py);
    expect_make_error(sol, KVF_ENOTFOUND,
                      "definition has e4m3 caches but torch 0+kvfuzz.stub under ");
    setenv("KVF_STUB_TORCH_FLOAT8", "1", 1);
    kvf_kernel *k = make(sol);
    CHECK(k && kvf_kernel_takes_quant(k));
    if (k) {
        char why[256] = "";
        kvf_plugin_shape sh = {.struct_size = sizeof sh};
        sh.num_qo_heads = 20, sh.num_kv_heads = 4, sh.head_dim = 128, sh.page_size = 64;
        sh.k_dtype = sh.v_dtype = KVF_KV_E4M3, sh.scale_granularity = KVF_SCALE_TENSOR;
        CHECK_INT_EQ(k->desc->supports(k->desc, &sh, why, sizeof why), 1);
        sh.k_dtype = sh.v_dtype = KVF_KV_BF16, sh.scale_granularity = KVF_SCALE_NONE;
        CHECK_INT_EQ(k->desc->supports(k->desc, &sh, why, sizeof why), 0);
        CHECK_STR_CONTAINS(why, "takes e4m3 caches with tensor scales, not k bf16 and v bf16");
        sh.k_dtype = sh.v_dtype = KVF_KV_E4M3, sh.scale_granularity = KVF_SCALE_HEAD;
        CHECK_INT_EQ(k->desc->supports(k->desc, &sh, why, sizeof why), 0);
        sh.v_dtype = KVF_KV_E5M2, sh.scale_granularity = KVF_SCALE_TENSOR;
        CHECK_INT_EQ(k->desc->supports(k->desc, &sh, why, sizeof why), 0);
    }
    kvf__python_kernel_free(k);
    env_restore(&env);
    /* The same caches without their scales, then with two dtypes. */
    json_t *in = json_object_get(d, "inputs");
    json_object_del(in, "k_scale");
    json_object_del(in, "v_scale");
    CHECK_INT_EQ(json_dump_file(d, def, 0), 0);
    expect_make_error(sol, KVF_EINVAL, "has e4m3 caches without k_scale and v_scale");
    json_decref(d);
    d = json_load_file(src, 0, &je);
    json_object_set_new(json_object_get(json_object_get(d, "inputs"), "v_cache"), "dtype",
                        json_string("float8_e5m2"));
    CHECK_INT_EQ(json_dump_file(d, def, 0), 0);
    expect_make_error(sol, KVF_EINVAL, "gives k_cache and v_cache different dtypes");
    json_decref(d);
    unlink(sol);
    unlink(def);
    dataset_remove(root);
}

static const check_test tests[] = {
    {"fp8_solution", test_fp8_solution},
    {"solution_json", test_solution_json},
    {"solution_definitions", test_solution_definitions},
    {NULL, NULL},
};

CHECK_MAIN(tests)
