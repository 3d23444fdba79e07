/* Python kernels (kernels/python), a worker that misbehaves: a Python exception is a kernel error
 * carrying its last line; a Python worker that dies takes the process running the kernel with
 * it, by the same signal or exit status; an output left unwritten, a write past the output and an
 * input changed in place reach the host's buffers, where the buffer host's checks see them; a
 * function gets the case's layout as strided views. The
 * kernels (tests/python/bad_kernels.py) run on kvfuzz's CPU buffer host (kernel_host.h). Each
 * test skips, with the reason, where no python3 imports torch. */
#include <signal.h>
#include <sys/wait.h>

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

static const check_test tests[] = {
    {"exception_is_kernel_error", test_exception_is_kernel_error},
    {"dead_worker_kills_the_runner", test_dead_worker_kills_the_runner},
    {"buffer_violations_reach_the_host", test_buffer_violations_reach_the_host},
    {"strided_views_reach_the_function", test_strided_views_reach_the_function},
    {NULL, NULL},
};

CHECK_MAIN(tests)
