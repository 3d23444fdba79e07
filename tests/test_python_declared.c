/* Python kernels (kernels/python), what a function declares: fn.kvfuzz_precision,
 * fn.kvfuzz_supports and the FP8 caches it reads (fn.kvfuzz_kv_dtypes,
 * fn.kvfuzz_scale_granularities), well and badly (tests/python/declared_kernels.py,
 * tests/python/fp8_kernels.py). Loading kernels and asking their supports() runs anywhere
 * python3 does, with tests/python/stub_torch standing in for torch; running the shapes a
 * supports() accepts skips, with the reason, where no python3 imports torch. */
#include <sys/wait.h>

#include "kvfuzz/relation.h"
#include "python_fixtures.h"

/* fn.kvfuzz_precision reaches kvf_kernel.precision (NULL when absent); a malformed one is a load
 * error of one sentence; a solution's function is not asked. */
static void test_precision_attribute(void) {
    char py[1024], spec[1024];
    NEED_PYTHON(py);
    saved_env env;
    use_stub_torch(&env, py);
    spec_for(spec, sizeof spec, "tests/python/declared_kernels.py", "precise");
    kvf_kernel *k = make(spec);
    CHECK(k && k->precision && strcmp(k->precision, "bf16-partials+ftz") == 0);
    /* its promises: the defaults, batch invariance added and v-scaling withdrawn */
    CHECK(k && k->promises && strcmp(k->promises, "batch-invariance,-v-scaling") == 0);
    if (k)
        CHECK_INT_EQ(kvf_kernel_promises(k),
                     (kvf_relation_default_promises() | KVF_RELATION_BIT(KVF_RELATION_BATCH)) &
                         ~KVF_RELATION_BIT(KVF_RELATION_V_SCALING));
    kvf__python_kernel_free(k);
    spec_for(spec, sizeof spec, "examples/python/torch_decode.py", "decode");
    k = make(spec);
    CHECK(k && k->precision && strcmp(k->precision, "f32") == 0);
    kvf__python_kernel_free(k);
    spec_for(spec, sizeof spec, "tests/python/bad_kernels.py", "raises");
    k = make(spec);
    CHECK(k && k->precision == NULL);
    kvf__python_kernel_free(k);

    static const char *const bad[][2] = {
        {"precision_not_a_string", "kvfuzz_precision is 16 of type int, not a string"},
        {"precision_too_long", "kvfuzz_precision is 66 characters long, more than the 63"},
        {"precision_bad_character", "kvfuzz_precision 'BF16_P' has the character 'B'"},
        {"precision_empty", "kvfuzz_precision is empty"},
        {"supports_not_callable", "kvfuzz_supports is 3 of type int, not a function"},
        {"promises_not_a_string", "kvfuzz_promises is ['batch-invariance'] of type list"},
        {"promises_bad_character", "kvfuzz_promises 'Batch' is not relation names"},
        {"promises_unknown", "\"graph-safety\" in the promises"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        spec_for(spec, sizeof spec, "tests/python/declared_kernels.py", bad[i][0]);
        expect_make_error(spec, KVF_EINVAL, bad[i][1]);
    }

    /* A solution whose source is torch_decode.py, which declares f32: not read. */
    char dir[] = "/tmp/kvfuzz-test-precision-XXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/solution.json", dir);
    write_solution(path, "python", "main.py::decode", "main.py",
                   "gqa_paged_decode_h20_kv4_d128_ps64");
    k = make(path);
    CHECK(k && k->precision == NULL);
    kvf__python_kernel_free(k);
    unlink(path);
    rmdir(dir);
    env_restore(&env);
}

static kvf_plugin_shape seed_shape(void) {
    kvf_plugin_shape sh = {.struct_size = sizeof sh};
    sh.num_qo_heads = 20, sh.num_kv_heads = 4, sh.head_dim = 128, sh.page_size = 64;
    sh.batch_size = 3, sh.num_pages = 60, sh.num_entries = 51, sh.total_tokens = 3202;
    sh.max_seq_len = 2000, sh.sm_scale = 0.125f;
    return sh;
}

/* fn.kvfuzz_supports: a declined shape is unsupported with the function's reason, in the
 * process that made the kernel (its probe), in a process running it (its worker) and in any
 * other (a probe for the question); the function gets the whole shape. */
static void test_supports_declines_shapes(void) {
    char py[1024], spec[1024], why[256];
    NEED_PYTHON(py);
    saved_env env;
    use_stub_torch(&env, py);
    spec_for(spec, sizeof spec, "tests/python/declared_kernels.py", "small_head_dims");
    kvf_kernel *k = make(spec);
    if (k) {
        CHECK(k->precision == NULL);
        kvf_plugin_shape sh = seed_shape();
        CHECK_INT_EQ(k->desc->supports(k->desc, &sh, why, sizeof why), 1);
        sh.head_dim = 100;
        CHECK_INT_EQ(k->desc->supports(k->desc, &sh, why, sizeof why), 0);
        CHECK_STR_CONTAINS(why, "head_dim 100 is not a multiple of 8");
        sh.head_dim = 192;
        CHECK_INT_EQ(kvf_kernel_supports(k, &sh, why, sizeof why), 0);
        CHECK_STR_CONTAINS(why, "head_dim 192 is over 128");
    }
    kvf__python_kernel_free(k);

    spec_for(spec, sizeof spec, "tests/python/declared_kernels.py", "declines_with_shape");
    k = make(spec);
    if (k) {
        kvf_plugin_shape sh = seed_shape();
        CHECK_INT_EQ(k->desc->supports(k->desc, &sh, why, sizeof why), 0);
        static const char *const fields[] = {
            "batch_size=3",   "device=cpu",     "head_dim=128",     "max_seq_len=2000",
            "num_entries=51", "num_kv_heads=4", "num_pages=60",     "num_qo_heads=20",
            "page_size=64",   "sm_scale=0.125", "total_tokens=3202"};
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
            CHECK_STR_CONTAINS(why, fields[i]);
    }
    kvf__python_kernel_free(k);

    /* The layout: a shape without strides is dense NHD; a padded HND one says so. */
    spec_for(spec, sizeof spec, "tests/python/declared_kernels.py", "declines_with_layout");
    k = make(spec);
    if (k) {
        kvf_plugin_shape sh = seed_shape();
        CHECK_INT_EQ(k->desc->supports(k->desc, &sh, why, sizeof why), 0);
        static const char *const dense[] = {
            "q_stride_batch=2560 q_stride_head=128 o_stride_batch=2560 o_stride_head=128 "
            "lse_stride_batch=20 kv_stride_page=32768 kv_stride_slot=512 kv_stride_head=128 "
            "kv_layout=NHD dense=True"};
        CHECK_STR_CONTAINS(why, dense[0]);
        sh.q_stride_batch = 3000, sh.q_stride_head = 136, sh.o_stride_batch = 2560;
        sh.o_stride_head = 128, sh.lse_stride_batch = 21, sh.kv_stride_page = 40000;
        sh.kv_stride_slot = 128, sh.kv_stride_head = 8192;
        CHECK_INT_EQ(kvf_kernel_supports(k, &sh, why, sizeof why), 0);
        CHECK_STR_CONTAINS(why, "q_stride_batch=3000 q_stride_head=136 ");
        CHECK_STR_CONTAINS(why, "lse_stride_batch=21 kv_stride_page=40000 kv_stride_slot=128 "
                                "kv_stride_head=8192 kv_layout=HND dense=False");
    }
    kvf__python_kernel_free(k);

    spec_for(spec, sizeof spec, "tests/python/declared_kernels.py", "declines_all");
    k = make(spec);
    kvf_host *h = k ? create(k) : NULL;
    kvf_case c;
    if (h && seed_case(&c) == 0) {
        host_run r;
        run_case(h, &c, &r);
        CHECK_INT_EQ(r.rc, KVF_EUNSUPPORTED);
        CHECK_STR_CONTAINS(r.err.msg, "this kernel declines every shape");
        host_run_free(&r);
        /* A forked process: asked with no worker there (a probe for the question), then with
         * the worker it starts (which answers). Its exit status has a bit for each miss. */
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            int miss = 0;
            kvf_plugin_shape sh = seed_shape();
            char w[256] = "";
            if (k->desc->supports(k->desc, &sh, w, sizeof w) != 0 ||
                !strstr(w, "declines every shape"))
                miss |= 1;
            kvf_host *h2 = NULL;
            if (kvf_host_create(k->desc, &h2, NULL) != 0) _exit(90);
            host_run r2;
            run_case(h2, &c, &r2);
            if (r2.rc != KVF_EUNSUPPORTED || !strstr(r2.err.msg, "declines every shape")) miss |= 2;
            kvf_host_destroy(h2);
            _exit(miss);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status));
        if (WIFEXITED(status)) CHECK_INT_EQ(WEXITSTATUS(status), 0);
        kvf_case_free(&c);
    }
    kvf_host_destroy(h);
    kvf__python_kernel_free(k);
    env_restore(&env);
}

/* An exception in supports() accepts the shape, and the launch reports it: a kernel error with
 * the exception's line, launch after launch. */
static void test_supports_exception_is_kernel_error(void) {
    char py[1024], spec[1024], why[256] = "";
    NEED_PYTHON(py);
    saved_env env;
    use_stub_torch(&env, py);
    spec_for(spec, sizeof spec, "tests/python/declared_kernels.py", "supports_raises");
    kvf_kernel *k = make(spec);
    kvf_host *h = k ? create(k) : NULL;
    kvf_case c;
    if (h && seed_case(&c) == 0) {
        kvf_plugin_shape sh = seed_shape();
        CHECK_INT_EQ(k->desc->supports(k->desc, &sh, why, sizeof why), 1);
        for (int i = 0; i < 2; i++) {
            host_run r;
            run_case(h, &c, &r);
            CHECK_INT_EQ(r.rc, KVF_EKERNEL);
            CHECK_STR_CONTAINS(r.err.msg, "declared_kernels.supports_raises.kvfuzz_supports raised "
                                          "ValueError: planted failure in supports");
            host_run_free(&r);
        }
        kvf_case_free(&c);
    }
    kvf_host_destroy(h);
    kvf__python_kernel_free(k);
    env_restore(&env);
}

/* With torch: a kernel with a supports() runs the shapes it accepts and passes strict. */
static void test_supports_accepted_shapes_run(void) {
    NEED_TORCH();
    char spec[1024];
    spec_for(spec, sizeof spec, "tests/python/declared_kernels.py", "small_head_dims");
    kvf_kernel *k = make(spec);
    kvf_host *h = k ? create(k) : NULL;
    kvf_case c;
    if (h && seed_case(&c) == 0) {
        CHECK(judge_one(k, h, &c, "01-mixed-lengths through small_head_dims"));
        kvf_case_free(&c);
    }
    kvf_host_destroy(h);
    kvf__python_kernel_free(k);
}

/* ---- FP8 caches (tests/python/fp8_kernels.py) -------------------------------------------------
 */

/* fn.kvfuzz_kv_dtypes and fn.kvfuzz_scale_granularities reach the descriptor's masks, which
 * gate every case before supports(): a kernel gets the dtypes and granularities it names and no
 * other, its supports() sees the caches of the shape, and campaigns draw FP8 caches for it. */
static void test_fp8_declaration(void) {
    char py[1024], spec[1024], why[256];
    NEED_PYTHON(py);
    saved_env env;
    use_stub_torch(&env, py);
    setenv("KVF_STUB_TORCH_FLOAT8", "1", 1);
    spec_for(spec, sizeof spec, "tests/python/fp8_kernels.py", "reference");
    kvf_kernel *k = make(spec);
    if (k) {
        CHECK_INT_EQ(k->desc->kv_dtypes, KVF_PLUGIN_KV_E4M3 | KVF_PLUGIN_KV_E5M2);
        CHECK_INT_EQ(k->desc->scale_granularities,
                     KVF_PLUGIN_SCALE_TENSOR | KVF_PLUGIN_SCALE_HEAD | KVF_PLUGIN_SCALE_TOKEN);
        CHECK(kvf_kernel_takes_quant(k));
        CHECK(k->precision && strcmp(k->precision, "f32") == 0);
        kvf_plugin_shape sh = seed_shape();
        sh.k_dtype = KVF_KV_E5M2, sh.v_dtype = KVF_KV_E4M3, sh.scale_granularity = KVF_SCALE_TOKEN;
        CHECK_INT_EQ(kvf_kernel_supports(k, &sh, why, sizeof why), 1);
    }
    kvf__python_kernel_free(k);

    /* e4m3 with tensor scales only: the rest never reaches it. */
    spec_for(spec, sizeof spec, "tests/python/fp8_kernels.py", "e4m3_tensor");
    k = make(spec);
    if (k) {
        CHECK_INT_EQ(k->desc->kv_dtypes, KVF_PLUGIN_KV_E4M3);
        CHECK_INT_EQ(k->desc->scale_granularities, KVF_PLUGIN_SCALE_TENSOR);
        CHECK(kvf_kernel_takes_quant(k));
        kvf_plugin_shape sh = seed_shape();
        sh.k_dtype = sh.v_dtype = KVF_KV_E4M3, sh.scale_granularity = KVF_SCALE_TENSOR;
        CHECK_INT_EQ(kvf_kernel_supports(k, &sh, why, sizeof why), 1);
        sh.scale_granularity = KVF_SCALE_NONE; /* FP8 without scales: always taken with FP8 */
        CHECK_INT_EQ(kvf_kernel_supports(k, &sh, why, sizeof why), 1);
        sh.scale_granularity = KVF_SCALE_HEAD;
        CHECK_INT_EQ(kvf_kernel_supports(k, &sh, why, sizeof why), 0);
        CHECK_STR_CONTAINS(why, "not k e4m3 and v e4m3 with head scales");
        sh.v_dtype = KVF_KV_E5M2, sh.scale_granularity = KVF_SCALE_TENSOR;
        CHECK_INT_EQ(kvf_kernel_supports(k, &sh, why, sizeof why), 0);
        CHECK_STR_CONTAINS(why, "not k e4m3 and v e5m2 with tensor scales");
        /* the buffer host refuses such a case before the worker sees it */
        kvf_host *h = create(k);
        kvf_case c;
        CHECK(fp8_case(3, 1 << 14, KVF_KV_E5M2, KVF_KV_E5M2, KVF_SCALE_TENSOR, 0, &c) == 0);
        if (h && c.k_cache) {
            host_run r;
            run_case(h, &c, &r);
            CHECK_INT_EQ(r.rc, KVF_EUNSUPPORTED);
            CHECK_STR_CONTAINS(r.err.msg, "not k e5m2 and v e5m2 with tensor scales");
            host_run_free(&r);
        }
        kvf_case_free(&c);
        kvf_host_destroy(h);
    }
    kvf__python_kernel_free(k);

    /* supports() gets each cache's dtype and the granularity, by name. */
    spec_for(spec, sizeof spec, "tests/python/fp8_kernels.py", "describes_caches");
    k = make(spec);
    if (k) {
        CHECK_INT_EQ(k->desc->scale_granularities, 0xFu);
        kvf_plugin_shape sh = seed_shape();
        CHECK_INT_EQ(kvf_kernel_supports(k, &sh, why, sizeof why), 0);
        CHECK_STR_CONTAINS(why, "k_dtype=bf16 v_dtype=bf16 scale_granularity=none");
        sh.k_dtype = KVF_KV_E5M2, sh.v_dtype = KVF_KV_E4M3, sh.scale_granularity = KVF_SCALE_TOKEN;
        CHECK_INT_EQ(kvf_kernel_supports(k, &sh, why, sizeof why), 0);
        CHECK_STR_CONTAINS(why, "k_dtype=e5m2 v_dtype=e4m3 scale_granularity=token");
    }
    kvf__python_kernel_free(k);

    /* Without the attributes, or naming bf16 alone: bf16 caches only. */
    const char *const bf16[][2] = {{"tests/python/fp8_kernels.py", "bf16_only"},
                                   {"examples/python/torch_decode.py", "decode"}};
    for (int i = 0; i < 2; i++) {
        spec_for(spec, sizeof spec, bf16[i][0], bf16[i][1]);
        k = make(spec);
        if (!k) continue;
        CHECK_INT_EQ(k->desc->kv_dtypes & ~1u, 0);
        CHECK_INT_EQ(k->desc->scale_granularities, 0);
        CHECK(!kvf_kernel_takes_quant(k));
        kvf_plugin_shape sh = seed_shape();
        sh.k_dtype = sh.v_dtype = KVF_KV_E4M3, sh.scale_granularity = KVF_SCALE_TENSOR;
        CHECK_INT_EQ(kvf_kernel_supports(k, &sh, why, sizeof why), 0);
        CHECK_STR_CONTAINS(why, "takes only bf16 caches");
        kvf__python_kernel_free(k);
    }

    static const char *const bad[][2] = {
        {"dtypes_not_a_string", "kvfuzz_kv_dtypes is 8 of type int, not a string naming KV cache "
                                "dtypes such as \"e4m3,e5m2\""},
        {"dtypes_unknown", "kvfuzz_kv_dtypes names 'fp4', which is not a KV cache dtype (bf16, "
                           "e4m3, e5m2)"},
        {"scales_unknown", "kvfuzz_scale_granularities names 'channel', which is not a scale "
                           "granularity (none, tensor, head, token)"},
        {"scales_not_a_string", "kvfuzz_scale_granularities is [1] of type list"},
        {"scales_without_fp8", "names head scales but fp8_kernels.scales_without_fp8."
                               "kvfuzz_kv_dtypes names no FP8 dtype"},
        {"fp8_without_scales", "kvfuzz_kv_dtypes names e5m2 caches but fp8_kernels."
                               "fp8_without_scales.kvfuzz_scale_granularities names no scales"},
        {"no_scale_keywords", "but not the keyword arguments k_scale and v_scale"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        spec_for(spec, sizeof spec, "tests/python/fp8_kernels.py", bad[i][0]);
        expect_make_error(spec, KVF_EINVAL, bad[i][1]);
    }
    env_restore(&env);
}

/* A torch without float8 dtypes (before 2.1) cannot make FP8 tensors: a kernel declaring FP8
 * caches is a load error of one sentence, KVF_ENOTFOUND like a missing torch, never a crash at
 * its first FP8 case. First under the stand-in torch (no float8 dtypes), then under the torch
 * kernels run with: refused where it has none, loaded where it has them. */
static void test_fp8_refused_without_float8(void) {
    char py[1024], spec[1024];
    NEED_PYTHON(py);
    saved_env env;
    use_stub_torch(&env, py);
    spec_for(spec, sizeof spec, "tests/python/fp8_kernels.py", "reference");
    expect_make_error(spec, KVF_ENOTFOUND,
                      "fp8_kernels.reference declares e4m3 caches (kvfuzz_kv_dtypes) but torch "
                      "0+kvfuzz.stub under ");
    expect_make_error(spec, KVF_ENOTFOUND,
                      "has no torch.float8_e4m3fn, as FP8 tensors need torch 2.1 or later");
    /* A kernel that does not declare them loads as before. */
    spec_for(spec, sizeof spec, "tests/python/fp8_kernels.py", "bf16_only");
    kvf__python_kernel_free(make(spec));
    env_restore(&env);

    if (torch_missing()) CHECK_SKIP("python3 cannot import torch (Debian: python3-torch)");
    char tpy[1024], cmd[1400];
    kernel_python(tpy, sizeof tpy);
    snprintf(cmd, sizeof cmd,
             "'%s' -c 'import sys, torch; sys.exit(0 if hasattr(torch, \"float8_e4m3fn\") else 1)'",
             tpy);
    spec_for(spec, sizeof spec, "tests/python/fp8_kernels.py", "reference");
    if (system(cmd) == 0) {
        kvf_kernel *k = make(spec);
        CHECK(k && kvf_kernel_takes_quant(k));
        kvf__python_kernel_free(k);
    } else {
        expect_make_error(spec, KVF_ENOTFOUND,
                          "has no torch.float8_e4m3fn, as FP8 tensors need torch 2.1 or later");
    }
}

static const check_test tests[] = {
    {"precision_attribute", test_precision_attribute},
    {"supports_declines_shapes", test_supports_declines_shapes},
    {"supports_exception_is_kernel_error", test_supports_exception_is_kernel_error},
    {"supports_accepted_shapes_run", test_supports_accepted_shapes_run},
    {"fp8_declaration", test_fp8_declaration},
    {"fp8_refused_without_float8", test_fp8_refused_without_float8},
    {NULL, NULL},
};

CHECK_MAIN(tests)
