/* Python kernels (kernels/python), a worker that misbehaves: a Python exception is a kernel error
 * carrying its last line; a Python worker that dies takes the process running the kernel with
 * it, by the same signal or exit status; an output left unwritten, a write past the output and an
 * input changed in place reach the host's buffers, where the buffer host's checks see them; a
 * function gets the case's layout as strided views; an FP8 case sends the function its bytes
 * and scales. The kernels (tests/python/bad_kernels.py, tests/python/fp8_kernels.py) run on
 * kvfuzz's CPU buffer host (kernel_host.h). Each test skips, with the reason, where no python3
 * imports torch, but for the FP8 one, which needs python3 only (tests/python/arena_worker.py
 * stands in for the worker's launch, tests/python/stub_torch for torch). */
#include <signal.h>
#include <sys/wait.h>

#include "kvfuzz/fp8.h"
#include "python_fixtures.h"

static void test_exception_is_kernel_error(void) {
    NEED_TORCH();
    char spec[1024];
    spec_for(spec, sizeof spec, "tests/python/bad_kernels.py", "raises");
    kvf_kernel *k = make(spec);
    kvf_host *h = k ? create(k) : NULL;
    kvf_case c;
    if (!h || seed_case(&c)) goto out;
    host_run r;
    run_case(h, &c, &r);
    CHECK_INT_EQ(r.rc, KVF_EKERNEL);
    CHECK_STR_CONTAINS(r.err.msg, "ValueError: planted failure in the Python kernel");
    host_run_free(&r);
    /* The worker lives on: the next launch is served. */
    run_case(h, &c, &r);
    CHECK_INT_EQ(r.rc, KVF_EKERNEL);
    host_run_free(&r);
    kvf_case_free(&c);
out:
    kvf_host_destroy(h);
    kvf__python_kernel_free(k);
}

/* Runs fn's kernel on the seed case in a child process; returns its wait status. */
static int run_in_child(const char *fn) {
    char spec[1024];
    spec_for(spec, sizeof spec, "tests/python/bad_kernels.py", fn);
    kvf_kernel *k = make(spec);
    if (!k) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        kvf_host *h = NULL;
        kvf_case c;
        if (kvf_host_create(k->desc, &h, NULL) || seed_case(&c)) _exit(90);
        host_run r;
        run_case(h, &c, &r);
        _exit(91); /* not reached: the Python worker died during the launch */
    }
    int status = 0;
    waitpid(pid, &status, 0);
    kvf__python_kernel_free(k);
    return status;
}

static void test_dead_worker_kills_the_runner(void) {
    NEED_TORCH();
    int st = run_in_child("segfaults");
    CHECK(WIFSIGNALED(st));
    if (WIFSIGNALED(st)) CHECK_INT_EQ(WTERMSIG(st), SIGSEGV);
    st = run_in_child("exits");
    CHECK(WIFEXITED(st));
    if (WIFEXITED(st)) CHECK_INT_EQ(WEXITSTATUS(st), 7);
}

/* FUNCTION's violation reaches the host's buffers: its check gives CODE and WORDS. */
static void expect_violation(const kvf_case *c, const char *fn, int code, const char *words) {
    char spec[1024];
    spec_for(spec, sizeof spec, "tests/python/bad_kernels.py", fn);
    kvf_kernel *k = make(spec);
    kvf_host *h = k ? create(k) : NULL;
    if (h) {
        host_run r;
        run_case(h, c, &r);
        CHECK_INT_EQ(r.rc, code);
        CHECK_STR_CONTAINS(r.err.msg, words);
        host_run_free(&r);
    }
    kvf_host_destroy(h);
    kvf__python_kernel_free(k);
}

static void test_buffer_violations_reach_the_host(void) {
    NEED_TORCH();
    kvf_case c;
    if (seed_case(&c)) return;
    expect_violation(&c, "writes_nothing", KVF_EUNWRITTEN, "b 0 h 0 d 0");
    /* bf16 1.0 is 0x3F80, written right after o: its low byte first. */
    expect_violation(&c, "writes_past_output", KVF_EOOBWRITE, "0xa5 became 0x80");
    expect_violation(&c, "scales_q_in_place", KVF_EINPUTMOD, "input q");
    kvf_case_free(&c);
}

/* A function named by module gets the case's layout as strided views over the host's padded
 * buffers: the torch reference gives the dense layout's bits through them, and a function that
 * takes its tensors for contiguous reads and writes the padding. */
static void test_strided_views_reach_the_function(void) {
    NEED_TORCH();
    kvf_case c;
    if (seed_case(&c)) return;
    char spec[1024];
    spec_for(spec, sizeof spec, "examples/python/torch_decode.py", "decode");
    kvf_kernel *ref = make(spec);
    spec_for(spec, sizeof spec, "tests/python/bad_kernels.py", "ignores_strides");
    kvf_kernel *bad = make(spec);
    kvf_host *hr = ref ? create(ref) : NULL, *hb = bad ? create(bad) : NULL;
    if (hr && hb) {
        host_run dense, laid, wrong;
        run_case(hr, &c, &dense);
        CHECK_INT_EQ(dense.rc, 0);
        /* The ignoring function is right on the dense layout. */
        run_case(hb, &c, &wrong);
        CHECK_INT_EQ(wrong.rc, 0);
        if (!dense.rc && !wrong.rc)
            CHECK(memcmp(dense.o, wrong.o, (size_t)kvf_case_o_elems(&c) * 2) == 0);
        host_run_free(&wrong);
        c.layout = (kvf_layout){.kv_order = KVF_LAYOUT_HND,
                                .q_head_pad = 8,
                                .q_batch_pad = 3,
                                .o_head_pad = 16,
                                .o_batch_pad = 5,
                                .lse_batch_pad = 7,
                                .kv_row_pad = 8,
                                .kv_mid_pad = 2,
                                .kv_page_pad = 100,
                                .view_offset = 16};
        run_case(hr, &c, &laid);
        CHECK_INT_EQ(laid.rc, 0);
        if (!dense.rc && !laid.rc) {
            CHECK(memcmp(dense.o, laid.o, (size_t)kvf_case_o_elems(&c) * 2) == 0);
            CHECK(memcmp(dense.lse, laid.lse, (size_t)kvf_case_lse_elems(&c) * 4) == 0);
        }
        CHECK(judge_one(ref, hr, &c, "the reference on an HND padded layout"));
        run_case(hb, &c, &wrong);
        /* Its writes land in the outputs' padding: the host's padding check names them. */
        CHECK_INT_EQ(wrong.rc, KVF_EOOBWRITE);
        host_run_free(&wrong);
        host_run_free(&laid);
        host_run_free(&dense);
    }
    kvf_host_destroy(hr);
    kvf_host_destroy(hb);
    kvf__python_kernel_free(ref);
    kvf__python_kernel_free(bad);
    kvf_case_free(&c);
}

/* ---- what an FP8 case sends the worker (tests/python/arena_worker.py) ------------------------ */

static const char *const dump_files[] = {"q.bin",         "k_cache.bin",    "v_cache.bin",
                                         "kv_indptr.bin", "kv_indices.bin", "kv_last_page_len.bin",
                                         "output.bin",    "lse.bin",        "k_scale.bin",
                                         "v_scale.bin",   "tensors.txt",    "poke"};

static void dump_clear(const char *dir) {
    char path[1200];
    for (size_t i = 0; i < sizeof dump_files / sizeof dump_files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, dump_files[i]);
        unlink(path);
    }
}

/* A file of the dump, malloc'd into *n bytes (NULL, 0 when absent). */
static uint8_t *dump_read(const char *dir, const char *file, size_t *n) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc((size_t)size + 1);
    *n = fread(data, 1, (size_t)size, f);
    data[*n] = 0;
    fclose(f);
    return data;
}

/* One element as the function got it against the case's value: the FP8 byte whose image the
 * case holds, else the bf16 pattern. */
static int elem_ok(const uint8_t *have, kvf_bf16 image, int dtype) {
    if (!kvf_kv_dtype_is_fp8(dtype)) return memcmp(have, &image, 2) == 0;
    uint8_t byte;
    return kvf_fp8_from_bf16_exact(image, dtype, &byte) && *have == byte;
}

/* A launch's dump against the case: the dtypes and shapes of the tensors, q, every element and
 * scale each token reads, found through the kv_indices the function got (renumbered when only
 * the referenced pages go). */
static void check_dump(const kvf_case *c, const char *dir, const char *what) {
    const int32_t B = c->batch_size, hk = c->num_kv_heads, D = c->head_dim, S = c->page_size;
    const int kd = c->quant.k_dtype, vd = c->quant.v_dtype, gran = c->quant.granularity;
    const int64_t kb = kvf_kv_dtype_bytes(kd), vb = kvf_kv_dtype_bytes(vd);
    const int64_t page = (int64_t)S * hk * D;
    size_t nq, nk, nv, nix, nks, nvs, nt;
    uint8_t *q = dump_read(dir, "q.bin", &nq), *k = dump_read(dir, "k_cache.bin", &nk);
    uint8_t *v = dump_read(dir, "v_cache.bin", &nv), *ix8 = dump_read(dir, "kv_indices.bin", &nix);
    uint8_t *ks = dump_read(dir, "k_scale.bin", &nks), *vs = dump_read(dir, "v_scale.bin", &nvs);
    char *tensors = (char *)dump_read(dir, "tensors.txt", &nt);
    const int64_t np = (int64_t)nk / (page * kb); /* the pages sent */
    const int64_t n_scale = gran == KVF_SCALE_TOKEN  ? np * S * hk
                            : gran == KVF_SCALE_HEAD ? hk
                                                     : gran == KVF_SCALE_TENSOR;
    if (!q || !k || !v || !ix8 || !tensors || (size_t)(np * page * kb) != nk ||
        (size_t)(np * page * vb) != nv || nix != (size_t)c->kv_indptr[B] * 4 ||
        nks != (size_t)n_scale * 4 || nvs != nks || nq != (size_t)kvf_case_q_elems(c) * 2) {
        CHECK_FAIL_AT("%s: the dump has q %zu, k %zu, v %zu, indices %zu, scales %zu and %zu bytes",
                      what, nq, nk, nv, nix, nks, nvs);
        goto out;
    }
    static const char *const torch_dtype[] = {"bfloat16", "float8_e4m3fn", "float8_e5m2"};
    char line[160];
    for (int w = 0; w < 2; w++) {
        snprintf(line, sizeof line, "%s %s %lld %d %d %d\n", w ? "v_cache" : "k_cache",
                 torch_dtype[w ? vd : kd], (long long)np, S, hk, D);
        CHECK_STR_CONTAINS(tensors, line);
    }
    if (gran == KVF_SCALE_TOKEN)
        snprintf(line, sizeof line, "k_scale float32 %lld %d %d\n", (long long)np, S, hk);
    else
        snprintf(line, sizeof line, "k_scale float32 %d\n", gran == KVF_SCALE_HEAD ? hk : 1);
    if (gran)
        CHECK_STR_CONTAINS(tensors, line);
    else
        CHECK(strstr(tensors, "k_scale") == NULL && strstr(tensors, "v_scale") == NULL);
    CHECK(memcmp(q, c->q, nq) == 0);
    const int32_t *ix = (const int32_t *)ix8;
    int64_t bad = 0, seen = 0;
    for (int32_t b = 0; b < B; b++)
        for (int64_t t = 0; t < kvf_case_seq_len(c, b); t++) {
            const int64_t cp = ix[c->kv_indptr[b] + t / S], slot = t % S;
            if (cp < 0 || cp >= np) {
                bad++;
                continue;
            }
            for (int32_t g = 0; g < hk; g++) {
                const int64_t at = (cp * S + slot) * hk + g;
                for (int32_t d = 0; d < D; d++) {
                    const int64_t off = kvf_case_kv_offset(c, b, t, g, d);
                    bad += !elem_ok(k + (at * D + d) * kb, c->k_cache[off], kd);
                    bad += !elem_ok(v + (at * D + d) * vb, c->v_cache[off], vd);
                    seen += 2;
                }
                if (!gran) continue;
                const int64_t want = kvf_case_scale_index(c, b, t, g);
                const int64_t have = gran == KVF_SCALE_TOKEN ? at : gran == KVF_SCALE_HEAD ? g : 0;
                bad += memcmp(ks + have * 4, c->k_scale + want, 4) != 0;
                bad += memcmp(vs + have * 4, c->v_scale + want, 4) != 0;
            }
        }
    if (bad)
        CHECK_FAIL_AT("%s: %lld of %lld elements differ from the case's", what, (long long)bad,
                      (long long)seen);
    CHECK(seen > 0);
    printf("%s: %lld elements checked, %lld pages sent\n", what, (long long)seen, (long long)np);
out:
    free(q), free(k), free(v), free(ix8), free(ks), free(vs), free(tensors);
}

/* What kvfuzz sends a Python kernel for FP8 caches: the bytes the host packed (one per element, a
 * bf16 cache beside an FP8 one as its patterns), under the case's layout, and the scales as
 * [1], [Hk] or [P, S, Hk] f32 of the pages sent, read back through the worker's own launch_plan
 * (tests/python/arena_worker.py). A change the function makes to an FP8 page or to a scale is
 * input-modified. Needs python3 only: the stand-in torch claims float8 dtypes. */
static void test_fp8_arena_reaches_the_worker(void) {
    char py[1024], spec[1024], worker[1024], dir[] = "/tmp/kvfuzz-test-arena-XXXXXX";
    NEED_PYTHON(py);
    saved_env env;
    use_stub_torch(&env, py);
    setenv("KVF_STUB_TORCH_FLOAT8", "1", 1);
    snprintf(worker, sizeof worker, "%s/tests/python/arena_worker.py", source_dir());
    setenv("KVF_PYTHON_WORKER", worker, 1);
    CHECK(mkdtemp(dir) != NULL);
    setenv("KVF_TEST_ARENA_DUMP", dir, 1);
    spec_for(spec, sizeof spec, "tests/python/fp8_kernels.py", "reference");
    kvf_kernel *k = make(spec);
    kvf_host *h = k ? create(k) : NULL;
    static const int runs[][4] = {
        /* k dtype, v dtype, granularity, laid out */
        {KVF_KV_E4M3, KVF_KV_E4M3, KVF_SCALE_TENSOR, 0},
        {KVF_KV_E5M2, KVF_KV_E5M2, KVF_SCALE_HEAD, 1},
        {KVF_KV_E4M3, KVF_KV_E5M2, KVF_SCALE_TOKEN, 0},
        {KVF_KV_E5M2, KVF_KV_E4M3, KVF_SCALE_TOKEN, 1},
        {KVF_KV_BF16, KVF_KV_E4M3, KVF_SCALE_NONE, 1},
        {KVF_KV_E5M2, KVF_KV_BF16, KVF_SCALE_NONE, 0},
        {KVF_KV_BF16, KVF_KV_BF16, KVF_SCALE_NONE, 1},
    };
    for (size_t i = 0; h && i < sizeof runs / sizeof runs[0]; i++) {
        kvf_case c;
        char what[96];
        if (fp8_case(20 + 7 * i, 1 << 13, runs[i][0], runs[i][1], runs[i][2], runs[i][3], &c)) {
            CHECK_FAIL_AT("run %zu: no case", i);
            continue;
        }
        snprintf(what, sizeof what, "k %s v %s scales %s%s", kvf_kv_dtype_name(runs[i][0]),
                 kvf_kv_dtype_name(runs[i][1]), kvf_scale_granularity_name(runs[i][2]),
                 runs[i][3] ? ", laid out" : "");
        dump_clear(dir);
        host_run r;
        run_case(h, &c, &r);
        if (r.rc)
            CHECK_FAIL_AT("%s: %s", what, r.err.msg);
        else
            check_dump(&c, dir, what);
        host_run_free(&r);
        char facts[128];
        kvf_host_describe(h, facts, sizeof facts);
        if (runs[i][2]) CHECK_STR_CONTAINS(facts, "scales=");

        /* The function changes its first FP8 byte, then its first scale. */
        if (i == 0) {
            static const char *const pokes[][2] = {{"k_cache", "k_cache at page"},
                                                   {"k_scale", "input k_scale"}};
            for (int j = 0; j < 2; j++) {
                char path[1200];
                snprintf(path, sizeof path, "%s/poke", dir);
                FILE *f = fopen(path, "w");
                fprintf(f, "%s\n", pokes[j][0]);
                fclose(f);
                run_case(h, &c, &r);
                CHECK_INT_EQ(r.rc, KVF_EINPUTMOD);
                CHECK_STR_CONTAINS(r.err.msg, pokes[j][1]);
                host_run_free(&r);
                dump_clear(dir);
            }
        }
        kvf_case_free(&c);
    }

    /* A pool too large to go whole: the referenced pages, renumbered, with their scales. */
    char path[1024];
    snprintf(path, sizeof path, "%s/corpus/fuzz_case/12-table-high-ids-past-2p31-elements.kvfz",
             source_dir());
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_spec sp;
    kvf_case c;
    kvf_error err = {0};
    if (h && kvf_case_load(path, &sp, &c, &lim, &err) == 0) {
        kvf_case_free(&c);
        kvf_prng pr;
        kvf_prng_seed_stream(&pr, 5, 77);
        do
            kvf_recipe_draw_quant(&sp.quant, &sp.recipe, &pr);
        while (sp.quant.kv.granularity == KVF_SCALE_NONE);
        sp.quant.kv.k_dtype = KVF_KV_E4M3, sp.quant.kv.v_dtype = KVF_KV_E5M2;
        sp.quant.kv.granularity = KVF_SCALE_HEAD;
        CHECK_OK(kvf_case_build(&c, &sp, &lim, &err), &err);
        kvf_spec_free(&sp);
        dump_clear(dir);
        host_run r;
        run_case(h, &c, &r);
        if (r.rc)
            CHECK_FAIL_AT("the large pool: %s", r.err.msg);
        else
            check_dump(&c, dir, "the large pool");
        host_run_free(&r);
        char facts[128];
        kvf_host_describe(h, facts, sizeof facts);
        CHECK_STR_CONTAINS(facts, "pool=referenced");
        CHECK_STR_CONTAINS(facts, "k=e4m3 v=e5m2 scales=head");
        kvf_case_free(&c);
    } else if (h) {
        CHECK_FAIL_AT("%s does not load: %s", path, err.msg);
    }
    kvf_host_destroy(h);
    kvf__python_kernel_free(k);
    dump_clear(dir);
    rmdir(dir);
    unsetenv("KVF_TEST_ARENA_DUMP");
    env_restore(&env);
}

static const check_test tests[] = {
    {"exception_is_kernel_error", test_exception_is_kernel_error},
    {"dead_worker_kills_the_runner", test_dead_worker_kills_the_runner},
    {"buffer_violations_reach_the_host", test_buffer_violations_reach_the_host},
    {"strided_views_reach_the_function", test_strided_views_reach_the_function},
    {"fp8_arena_reaches_the_worker", test_fp8_arena_reaches_the_worker},
    {NULL, NULL},
};

CHECK_MAIN(tests)
