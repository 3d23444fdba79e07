/* Python kernels (kernels/python), the reference: the torch reference decode passes the seed
 * corpus and generated cases under `strict` on kvfuzz's CPU buffer host (kernel_host.h), a pool
 * too large to copy whole goes as its referenced pages, the Triton example passes where torch
 * sees a GPU, and a reference reading FP8 caches passes FP8 cases where torch has float8 dtypes
 * (2.1 or later). Each test skips, with the reason, where no python3 imports torch.
 *
 * Environment: KVF_PYTHON_CASES sets the generated case count (default 60). */
#include <dirent.h>

#include "python_fixtures.h"

/* Every seed case, then `random` generated ones over every strategy; returns the cases judged. */
static int judge_corpus(const kvf_kernel *k, int random) {
    kvf_host *h = create(k);
    if (!h) return 0;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/corpus/seeds", source_dir());
    DIR *dp = opendir(dir);
    CHECK(dp != NULL);
    int cases = 0, passed = 0, declined = 0;
    for (struct dirent *e; dp && (e = readdir(dp));) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 5, ".kvfz") != 0) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        kvf_case c;
        if (load_case(path, &c)) continue;
        /* A seed the kernel declines (FP8 caches for a bf16-only kernel) is skipped, as replay
         * counts it unsupported; a bf16 seed must run. */
        kvf_plugin_shape shape;
        kvf_kernel_shape(&c, &shape);
        char why[256];
        if (kvf_kernel_supports(k, &shape, why, sizeof why) == 0) {
            if (kvf_kv_quant_is_plain(&c.quant))
                CHECK_FAIL_AT("%s: %s declines a bf16 seed: %s", e->d_name, k->name, why);
            kvf_case_free(&c);
            declined++;
            continue;
        }
        passed += judge_one(k, h, &c, e->d_name);
        kvf_case_free(&c);
        cases++;
    }
    if (dp) closedir(dp);
    CHECK(cases >= 17);
    if (declined) printf("%s: %d FP8 seed(s) declined (bf16 caches only)\n", k->name, declined);
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_random_opts ro;
    kvf_random_opts_default(&ro);
    ro.max_work = 1 << 17;
    for (int i = 0; i < random; i++) {
        kvf_spec sp;
        kvf_case c;
        kvf_error err = {0};
        char what[64];
        snprintf(what, sizeof what, "random seed %d", i);
        if (kvf_spec_random(&sp, (uint64_t)i, &ro, &err) == 0) {
            if (kvf_case_build(&c, &sp, &lim, &err) == 0) {
                passed += judge_one(k, h, &c, what);
                kvf_case_free(&c);
                cases++;
            }
            kvf_spec_free(&sp);
        }
    }
    char facts[128];
    kvf_host_describe(h, facts, sizeof facts);
    printf("%s: %d of %d cases pass strict (%s)\n", k->name, passed, cases, facts);
    kvf_host_destroy(h);
    return cases;
}

static int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

/* The reference on the seeds and on generated cases (KVF_PYTHON_CASES of them, default 60). */
static void test_torch_reference_passes(void) {
    NEED_TORCH();
    char spec[1024];
    spec_for(spec, sizeof spec, "examples/python/torch_decode.py", "decode");
    kvf_kernel *k = make(spec);
    if (!k) return;
    CHECK(k->desc && k->desc->device == KVF_PLUGIN_DEVICE_CPU);
    CHECK_STR_CONTAINS(k->description, "torch_decode.decode");
    CHECK(judge_corpus(k, env_int("KVF_PYTHON_CASES", 60)) >= 17);
    kvf__python_kernel_free(k);
}

/* A pool too large to copy whole goes as its referenced pages, renumbered: still correct. */
static void test_large_pool_sends_referenced_pages(void) {
    NEED_TORCH();
    char spec[1024], path[1024];
    spec_for(spec, sizeof spec, "examples/python/torch_decode.py", "decode");
    snprintf(path, sizeof path, "%s/corpus/fuzz_case/12-table-high-ids-past-2p31-elements.kvfz",
             source_dir());
    kvf_kernel *k = make(spec);
    kvf_host *h = k ? create(k) : NULL;
    kvf_case c;
    if (h && load_case(path, &c) == 0) {
        CHECK(c.num_pages > 500000);
        CHECK(judge_one(k, h, &c, "12-table-high-ids-past-2p31-elements"));
        char facts[128];
        kvf_host_describe(h, facts, sizeof facts);
        CHECK_STR_CONTAINS(facts, "pool=referenced");
        kvf_case_free(&c);
    }
    kvf_host_destroy(h);
    kvf__python_kernel_free(k);
}

/* The Triton example, where torch sees a GPU (KVF_PYTHON_DEVICE left at its default). */
static void test_triton_on_gpu(void) {
    NEED_TORCH();
    char py[1024], cmd[1400];
    kernel_python(py, sizeof py);
    snprintf(cmd, sizeof cmd,
             "'%s' -c 'import sys, torch, triton; sys.exit(0 if torch.cuda.is_available() else 1)' "
             ">/dev/null 2>&1",
             py);
    if (system(cmd) != 0) CHECK_SKIP("python3 has no triton or torch sees no GPU");
    char spec[1024];
    spec_for(spec, sizeof spec, "examples/python/triton_decode.py", "decode");
    kvf_kernel *k = make(spec);
    if (!k) return;
    CHECK_STR_CONTAINS(k->description, "on cuda");
    CHECK(judge_corpus(k, env_int("KVF_PYTHON_CASES", 60)) >= 17);
    kvf__python_kernel_free(k);
}

/* Whether the interpreter kernels run under has a torch with float8 dtypes (2.1 or later); when
 * not, why, into why[n]. */
static int torch_has_float8(char *why, size_t n) {
    char py[1024], cmd[1400];
    if (!kernel_python(py, sizeof py)) return snprintf(why, n, "no python3"), 0;
    snprintf(cmd, sizeof cmd,
             "'%s' -c 'import sys, torch; sys.exit(0 if hasattr(torch, \"float8_e4m3fn\") else 1)' "
             ">/dev/null 2>&1",
             py);
    if (system(cmd) == 0) return 1;
    snprintf(why, n, "the torch of %s has no float8 dtypes (FP8 tensors need torch 2.1 or later)",
             py);
    return 0;
}

/* A PyTorch reference that dequantizes FP8 caches (tests/python/fp8_kernels.py: value times
 * scale in f32, then torch_decode's numerics) passes strict on FP8 cases of every dtype pair and
 * granularity, laid out or dense, and on caches mixing bf16 and FP8: the bytes and scales it
 * gets as torch.float8_e4m3fn / float8_e5m2 tensors and k_scale= / v_scale= are the case's.
 * Needs a torch with float8 dtypes (2.1 or later); skips, saying so, elsewhere. */
static void test_fp8_reference_passes(void) {
    NEED_TORCH();
    char why[1200];
    if (!torch_has_float8(why, sizeof why)) CHECK_SKIP("%s", why);
    char spec[1024];
    spec_for(spec, sizeof spec, "tests/python/fp8_kernels.py", "reference");
    kvf_kernel *k = make(spec);
    kvf_host *h = k ? create(k) : NULL;
    if (!h) goto out;
    CHECK(kvf_kernel_takes_quant(k));
    static const int kinds[][3] = {
        {KVF_KV_E4M3, KVF_KV_E4M3, KVF_SCALE_TENSOR}, {KVF_KV_E5M2, KVF_KV_E5M2, KVF_SCALE_TENSOR},
        {KVF_KV_E4M3, KVF_KV_E4M3, KVF_SCALE_HEAD},   {KVF_KV_E5M2, KVF_KV_E4M3, KVF_SCALE_HEAD},
        {KVF_KV_E4M3, KVF_KV_E5M2, KVF_SCALE_TOKEN},  {KVF_KV_E5M2, KVF_KV_E5M2, KVF_SCALE_TOKEN},
        {KVF_KV_E4M3, KVF_KV_E4M3, KVF_SCALE_NONE},   {KVF_KV_BF16, KVF_KV_E5M2, KVF_SCALE_NONE},
    };
    const int n = env_int("KVF_PYTHON_CASES", 60);
    int cases = 0, passed = 0;
    for (int i = 0; i < n; i++) {
        const int *kind = kinds[i % 8];
        kvf_case c;
        if (fp8_case(1000 + 61 * (uint64_t)i, 1 << 16, kind[0], kind[1], kind[2], i / 8 % 2, &c))
            continue;
        char what[96];
        snprintf(what, sizeof what, "case %d (k %s v %s scales %s%s)", i,
                 kvf_kv_dtype_name(kind[0]), kvf_kv_dtype_name(kind[1]),
                 kvf_scale_granularity_name(kind[2]), i / 8 % 2 ? ", laid out" : "");
        passed += judge_one(k, h, &c, what);
        cases++;
        kvf_case_free(&c);
    }
    char facts[128];
    kvf_host_describe(h, facts, sizeof facts);
    printf("%s: %d of %d FP8 cases pass strict (%s)\n", k->name, passed, cases, facts);
    CHECK(cases >= n * 3 / 4);
out:
    kvf_host_destroy(h);
    kvf__python_kernel_free(k);
}

static const check_test tests[] = {
    {"torch_reference_passes", test_torch_reference_passes},
    {"large_pool_sends_referenced_pages", test_large_pool_sends_referenced_pages},
    {"triton_on_gpu", test_triton_on_gpu},
    {"fp8_reference_passes", test_fp8_reference_passes},
    {NULL, NULL},
};

CHECK_MAIN(tests)
