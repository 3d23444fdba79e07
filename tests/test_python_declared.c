/* Python kernels (kernels/python), what a function declares: fn.kvfuzz_precision and
 * fn.kvfuzz_supports, well and badly (tests/python/declared_kernels.py). Loading kernels and
 * asking their supports() runs anywhere python3 does, with tests/python/stub_torch standing in
 * for torch; running the shapes a supports() accepts skips, with the reason, where no python3
 * imports torch. */
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

static const check_test tests[] = {
    {"precision_attribute", test_precision_attribute},
    {"supports_declines_shapes", test_supports_declines_shapes},
    {"supports_exception_is_kernel_error", test_supports_exception_is_kernel_error},
    {"supports_accepted_shapes_run", test_supports_accepted_shapes_run},
    {NULL, NULL},
};

CHECK_MAIN(tests)
