/* Python kernels (kernels/python): the torch reference decode passes the seed corpus under
 * `strict`; a Python exception is a kernel error carrying its last line; a Python worker that
 * dies takes the process running the kernel with it, by the same signal or exit status; an
 * output left unwritten, a write past the output and an input changed in place reach the
 * host's buffers, where the buffer host's checks see them; every load failure is one sentence.
 * The kernels run on kvfuzz's CPU buffer host (kernel_host.h). Tests that run a kernel skip, with
 * the reason, where no python3 imports torch. Those that only load kernels and ask their
 * supports() (the default interpreter's choice, kvfuzz_precision, kvfuzz_supports) run anywhere
 * python3 does, with tests/python/stub_torch standing in for torch. */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/kernel_host.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/spec.h"
#include "python_kernel.h"

static const char *source_dir(void) {
    const char *s = getenv("KVF_SOURCE_DIR");
    return s ? s : ".";
}

/* The interpreter kernels run under (KVF_PYTHON, else kvfuzz's choice), into py[n]; 0 when
 * there is none. */
static int kernel_python(char *py, size_t n) {
    char *chosen = NULL;
    if (kvf__python_choose(&chosen, NULL, NULL)) return 0;
    snprintf(py, n, "%s", chosen);
    free(chosen);
    return 1;
}

/* The interpreter the kernel would use, asked whether it has torch. */
static int torch_missing(void) {
    char py[1024], cmd[1200];
    if (!kernel_python(py, sizeof py)) return 1;
    snprintf(cmd, sizeof cmd, "'%s' -c 'import torch' >/dev/null 2>&1", py);
    return system(cmd) != 0;
}

#define NEED_TORCH()                                                                               \
    do {                                                                                           \
        if (torch_missing()) CHECK_SKIP("python3 cannot import torch (Debian: python3-torch)");    \
    } while (0)

static void spec_for(char *buf, size_t n, const char *file, const char *fn) {
    snprintf(buf, n, "python:%s/%s:%s", source_dir(), file, fn);
}

/* ---- running on the CPU buffer host ---------------------------------------------------- */

typedef struct host_run {
    int rc;
    kvf_error err;
    kvf_bf16 *o;
    float *lse;
} host_run;

static void host_run_free(host_run *r) {
    free(r->o);
    free(r->lse);
}

static void run_case(kvf_host *h, const kvf_case *c, host_run *r) {
    memset(r, 0, sizeof *r);
    r->o = malloc((size_t)(kvf_case_o_elems(c) + 1) * sizeof *r->o);
    r->lse = malloc((size_t)(kvf_case_lse_elems(c) + 1) * sizeof *r->lse);
    r->rc = kvf_host_run(h, c, r->o, r->lse, &r->err);
}

static int load_case(const char *path, kvf_case *c) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_spec spec;
    kvf_error err = {0};
    int rc = kvf_case_load(path, &spec, c, &lim, &err);
    if (rc) {
        CHECK_FAIL_AT("%s does not load: %s", path, err.msg);
        return rc;
    }
    kvf_spec_free(&spec);
    return 0;
}

static int seed_case(kvf_case *c) {
    char path[1024];
    snprintf(path, sizeof path, "%s/corpus/seeds/01-mixed-lengths.kvfz", source_dir());
    return load_case(path, c);
}

static kvf_kernel *make(const char *spec) {
    kvf_kernel *k = NULL;
    kvf_error err = {0};
    CHECK_OK(kvf__python_kernel_make(spec, &k, &err), &err);
    return k;
}

static kvf_host *create(const kvf_kernel *k) {
    kvf_host *h = NULL;
    kvf_error err = {0};
    CHECK_OK(kvf_host_create(k->desc, &h, &err), &err);
    return h;
}

/* ---- tests -------------------------------------------------------------------------------- */

/* Runs one case and judges it: 1 when it passes strict (violations on overflow rows aside, as
 * replay counts them) with every element written and no guard touched. */
static int judge_one(const kvf_kernel *k, kvf_host *h, kvf_case *c, const char *what) {
    kvf_rule strict;
    kvf_rule_parse(&strict, "strict", NULL);
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    kvf_oracle_result orc;
    kvf_error err = {0};
    if (kvf_oracle_run(&orc, c, &oo, &err)) {
        CHECK_FAIL_AT("%s: the oracle failed: %s", what, err.msg);
        return 0;
    }
    int before = check_failures;
    host_run r;
    run_case(h, c, &r);
    if (r.rc) {
        CHECK_FAIL_AT("%s: %s failed: %s", what, k->name, r.err.msg);
    } else {
        kvf_verdict v;
        CHECK_OK(kvf_judge(&v, &strict, c, &orc, r.o, r.lse, &err), &err);
        if (!v.pass && v.finding != KVF_FINDING_OVERFLOW)
            CHECK_FAIL_AT("%s: %s fails strict (%s, max ulps %lld)", what, k->name,
                          kvf_finding_class_name(v.finding), (long long)v.o.max_ulps);
    }
    host_run_free(&r);
    kvf_oracle_result_free(&orc);
    return check_failures == before;
}

/* Every seed case, then `random` generated ones over every strategy; returns the cases judged. */
static int judge_corpus(const kvf_kernel *k, int random) {
    kvf_host *h = create(k);
    if (!h) return 0;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/corpus/seeds", source_dir());
    DIR *dp = opendir(dir);
    CHECK(dp != NULL);
    int cases = 0, passed = 0;
    for (struct dirent *e; dp && (e = readdir(dp));) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 5, ".kvfz") != 0) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        kvf_case c;
        if (load_case(path, &c)) continue;
        passed += judge_one(k, h, &c, e->d_name);
        kvf_case_free(&c);
        cases++;
    }
    if (dp) closedir(dp);
    CHECK(cases >= 17);
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

static void expect_make_error(const char *spec, int code, const char *words) {
    kvf_kernel *k = NULL;
    kvf_error err = {0};
    int rc = kvf__python_kernel_make(spec, &k, &err);
    CHECK_INT_EQ(rc, code);
    CHECK(k == NULL);
    CHECK_STR_CONTAINS(err.msg, words);
    CHECK(strchr(err.msg, '\n') == NULL);
    if (rc == 0) kvf__python_kernel_free(k);
}

static void test_load_errors(void) {
    char spec[1024];
    expect_make_error("python:nofunction", KVF_EINVAL, "python:MODULE:FUNCTION");
    expect_make_error("python::decode", KVF_EINVAL, "python:MODULE:FUNCTION");
    setenv("KVF_PYTHON", "/nonexistent/python3", 1);
    spec_for(spec, sizeof spec, "examples/python/torch_decode.py", "decode");
    expect_make_error(spec, KVF_ENOTFOUND, "KVF_PYTHON names /nonexistent/python3");
    unsetenv("KVF_PYTHON");
    NEED_TORCH();
    expect_make_error("python:kvfuzz_no_such_module:decode", KVF_ENOTFOUND,
                      "no Python module kvfuzz_no_such_module");
    spec_for(spec, sizeof spec, "examples/python/torch_decode.py", "no_such_function");
    expect_make_error(spec, KVF_ENOTFOUND, "has no function no_such_function");
    spec_for(spec, sizeof spec, "tests/python/bad_kernels.py", "two_arguments");
    expect_make_error(spec, KVF_EINVAL, "cannot take kvfuzz's nine arguments");
    spec_for(spec, sizeof spec, "tests/python/bad_kernels.py", "not_a_function");
    expect_make_error(spec, KVF_EINVAL, "is not a function");
    spec_for(spec, sizeof spec, "tests/python/no_such_file.py", "decode");
    expect_make_error(spec, KVF_ENOTFOUND, "no Python file");

    /* An interpreter without torch: the same python3 with its site packages switched off. */
    char dir[] = "/tmp/kvfuzz-test-python-XXXXXX", wrapper[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(wrapper, sizeof wrapper, "%s/python3", dir);
    FILE *f = fopen(wrapper, "w");
    const char *py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    fprintf(f, "#!/bin/sh\nexec %s -S \"$@\"\n", py);
    fclose(f);
    chmod(wrapper, 0755);
    setenv("KVF_PYTHON", wrapper, 1);
    spec_for(spec, sizeof spec, "examples/python/torch_decode.py", "decode");
    expect_make_error(spec, KVF_ENOTFOUND, "cannot import torch");
    unsetenv("KVF_PYTHON");
    unlink(wrapper);
    rmdir(dir);
}

/* ---- without torch: the interpreter's choice, declared precision, supports() --------------- */

/* python3 on the PATH, else /usr/bin/python3, into py[n]: the interpreter the stand-in runs
 * under. 0 when there is none. */
static int some_python(char *py, size_t n) {
    const char *path = getenv("PATH");
    for (const char *p = path ? path : ""; *p;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len && (size_t)snprintf(py, n, "%.*s/python3", (int)len, p) < n &&
            access(py, X_OK) == 0)
            return 1;
        p += len + (end ? 1 : 0);
    }
    snprintf(py, n, "/usr/bin/python3");
    return access(py, X_OK) == 0;
}

#define NEED_PYTHON(py)                                                                            \
    do {                                                                                           \
        if (!some_python(py, sizeof py)) CHECK_SKIP("no python3 on the PATH or in /usr/bin");      \
    } while (0)

/* Environment variables saved to be put back. */
typedef struct saved_env {
    char *value[4];
} saved_env;

static const char *const saved_names[4] = {"PATH", "KVF_PYTHON", "PYTHONPATH",
                                           "PYTHONDONTWRITEBYTECODE"};

static void env_save(saved_env *e) {
    for (int i = 0; i < 4; i++) {
        const char *v = getenv(saved_names[i]);
        e->value[i] = v ? strdup(v) : NULL;
    }
}

static void env_restore(saved_env *e) {
    for (int i = 0; i < 4; i++) {
        if (e->value[i])
            setenv(saved_names[i], e->value[i], 1);
        else
            unsetenv(saved_names[i]);
        free(e->value[i]);
    }
}

/* Kernels load under py with tests/python/stub_torch in place of torch (no bytecode written into
 * the source tree). */
static void use_stub_torch(saved_env *e, const char *py) {
    char stub[1024];
    env_save(e);
    snprintf(stub, sizeof stub, "%s/tests/python/stub_torch", source_dir());
    setenv("KVF_PYTHON", py, 1);
    setenv("PYTHONPATH", stub, 1);
    setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
}

static void write_script(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
    chmod(path, 0755);
}

/* Without KVF_PYTHON the first of the PATH's python3 and /usr/bin/python3 that imports torch
 * runs the kernels; with none that does, the PATH's all the same; KVF_PYTHON always wins. The
 * PATH's python3 here is a wrapper: one that finds the stand-in torch, one that finds none. */
static void test_interpreter_choice(void) {
    char py[1024];
    NEED_PYTHON(py);
    saved_env env;
    env_save(&env);
    unsetenv("KVF_PYTHON");
    unsetenv("PYTHONPATH");
    setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
    char with[] = "/tmp/kvfuzz-test-with-torch-XXXXXX",
         without[] = "/tmp/kvfuzz-test-no-torch-XXXXXX";
    CHECK(mkdtemp(with) && mkdtemp(without));
    char text[4096], path[4200], want[1100], spec[1024];
    snprintf(text, sizeof text,
             "#!/bin/sh\nPYTHONPATH='%s/tests/python/stub_torch' exec '%s' \"$@\"\n", source_dir(),
             py);
    snprintf(want, sizeof want, "%s/python3", with);
    write_script(want, text);
    snprintf(text, sizeof text, "#!/bin/sh\nexec '%s' -S -E \"$@\"\n", py);
    snprintf(path, sizeof path, "%s/python3", without);
    write_script(path, text);

    char *chosen = NULL;
    int torch = -2;
    kvf_error err = {0};
    snprintf(text, sizeof text, "%s:%s", with, env.value[0] ? env.value[0] : "");
    setenv("PATH", text, 1);
    CHECK_OK(kvf__python_choose(&chosen, &torch, &err), &err);
    CHECK(chosen && strcmp(chosen, want) == 0);
    CHECK_INT_EQ(torch, 1);
    free(chosen);
    /* The kernel loads under it: the stand-in's version is in its description. */
    spec_for(spec, sizeof spec, "tests/python/declared_kernels.py", "precise");
    kvf_kernel *k = make(spec);
    if (k) CHECK_STR_CONTAINS(k->description, "with torch 0+kvfuzz.stub");
    kvf__python_kernel_free(k);

    /* No torch on the PATH's: /usr/bin/python3 where it has torch, else the PATH's anyway. */
    snprintf(text, sizeof text, "%s:%s", without, env.value[0] ? env.value[0] : "");
    setenv("PATH", text, 1);
    int usr_torch = access("/usr/bin/python3", X_OK) == 0 &&
                    system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
    CHECK_OK(kvf__python_choose(&chosen, &torch, &err), &err);
    CHECK(chosen && strcmp(chosen, usr_torch ? "/usr/bin/python3" : path) == 0);
    CHECK_INT_EQ(torch, usr_torch);
    free(chosen);
    if (!usr_torch) {
        spec_for(spec, sizeof spec, "examples/python/torch_decode.py", "decode");
        expect_make_error(spec, KVF_ENOTFOUND, "cannot import torch");
        expect_make_error(spec, KVF_ENOTFOUND, "no python3 kvfuzz tried");
    }

    /* KVF_PYTHON is taken as it is, unprobed. */
    setenv("KVF_PYTHON", path, 1);
    CHECK_OK(kvf__python_choose(&chosen, &torch, &err), &err);
    CHECK(chosen && strcmp(chosen, path) == 0);
    CHECK_INT_EQ(torch, -1);
    free(chosen);
    setenv("KVF_PYTHON", "/nonexistent/python3", 1);
    CHECK_INT_EQ(kvf__python_choose(&chosen, &torch, &err), KVF_ENOTFOUND);
    CHECK_STR_CONTAINS(err.msg, "KVF_PYTHON names /nonexistent/python3");

    env_restore(&env);
    unlink(want);
    unlink(path);
    rmdir(with);
    rmdir(without);
}

static void write_solution(const char *path, const char *language, const char *entry,
                           const char *source_path, const char *definition);

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

/* ---- FlashInfer-Bench solutions ------------------------------------------------------------ */

static char *json_quote(const char *s) {
    size_t n = strlen(s);
    char *out = malloc(6 * n + 3), *p = out;
    *p++ = '"';
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            *p++ = '\\', *p++ = (char)ch;
        else if (ch == '\n')
            *p++ = '\\', *p++ = 'n';
        else if (ch < 0x20)
            p += sprintf(p, "\\u%04x", ch);
        else
            *p++ = (char)ch;
    }
    *p++ = '"';
    *p = 0;
    return out;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    s[fread(s, 1, (size_t)n, f)] = 0;
    fclose(f);
    return s;
}

/* Writes a solution whose source `source_path` is the torch reference; with `main`, a second
 * source main.py holding that text. */
static void write_solution_with(const char *path, const char *language, const char *entry,
                                const char *source_path, const char *definition, const char *main) {
    char ref[1024];
    snprintf(ref, sizeof ref, "%s/examples/python/torch_decode.py", source_dir());
    char *src = read_text(ref), *q = json_quote(src ? src : ""), *m = json_quote(main ? main : "");
    FILE *f = fopen(path, "w");
    fprintf(f,
            "{\"name\": \"torch-reference\", \"definition\": \"%s\", \"author\": \"kvfuzz\",\n"
            " \"spec\": {\"language\": \"%s\", \"target_hardware\": [\"cpu\"],%s%s%s\n"
            "          \"dependencies\": [\"torch\"], \"destination_passing_style\": true},\n"
            " \"sources\": [{\"path\": \"%s\", \"content\": %s}%s%s%s]}\n",
            definition, language, entry ? " \"entry_point\": \"" : "", entry ? entry : "",
            entry ? "\"," : "", source_path, q,
            main ? ", {\"path\": \"main.py\", \"content\": " : "", main ? m : "", main ? "}" : "");
    fclose(f);
    free(src);
    free(q);
    free(m);
}

static void write_solution(const char *path, const char *language, const char *entry,
                           const char *source_path, const char *definition) {
    write_solution_with(path, language, entry, source_path, definition, NULL);
}

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

#define INPUTS_9 "q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale"
#define INPUTS_8 "q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale"

/* Definitions found in a dataset's layout are read: their signature is checked, their const
 * axes fix the shapes, and one without kv_last_page_len gets the eight-argument call. */
static void test_solution_definitions(void) {
    /* "[set]" in the folder's name: it is found as itself, not as a glob character class. */
    char root[] = "/tmp/kvfuzz-test-data[set]-XXXXXX", path[512], def[512], sol[512];
    CHECK(mkdtemp(root) != NULL);
    snprintf(path, sizeof path, "%s/definitions", root);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/definitions/gqa_paged", root);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/solutions", root);
    mkdir(path, 0700);
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
    snprintf(path, sizeof path, "%s/definitions/gqa_paged", root);
    rmdir(path);
    snprintf(path, sizeof path, "%s/definitions", root);
    rmdir(path);
    snprintf(path, sizeof path, "%s/solutions", root);
    rmdir(path);
    rmdir(root);
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

static const check_test tests[] = {
    {"load_errors", test_load_errors},
    {"interpreter_choice", test_interpreter_choice},
    {"precision_attribute", test_precision_attribute},
    {"supports_declines_shapes", test_supports_declines_shapes},
    {"supports_exception_is_kernel_error", test_supports_exception_is_kernel_error},
    {"supports_accepted_shapes_run", test_supports_accepted_shapes_run},
    {"solution_json", test_solution_json},
    {"solution_definitions", test_solution_definitions},
    {"torch_reference_passes", test_torch_reference_passes},
    {"large_pool_sends_referenced_pages", test_large_pool_sends_referenced_pages},
    {"triton_on_gpu", test_triton_on_gpu},
    {"exception_is_kernel_error", test_exception_is_kernel_error},
    {"dead_worker_kills_the_runner", test_dead_worker_kills_the_runner},
    {"buffer_violations_reach_the_host", test_buffer_violations_reach_the_host},
    {NULL, NULL},
};

CHECK_MAIN(tests)
