/* Python kernels (kernels/python), a worker that misbehaves: a Python exception is a kernel error
 * carrying its last line; a Python worker that dies takes the process running the kernel with
 * it, by the same signal or exit status; an output left unwritten, a write past the output and an
 * input changed in place reach the host's buffers, where the buffer host's checks see them. The
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

static const check_test tests[] = {
    {"exception_is_kernel_error", test_exception_is_kernel_error},
    {"dead_worker_kills_the_runner", test_dead_worker_kills_the_runner},
    {"buffer_violations_reach_the_host", test_buffer_violations_reach_the_host},
    {NULL, NULL},
};

CHECK_MAIN(tests)
