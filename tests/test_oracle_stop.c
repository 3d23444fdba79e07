/* Unit test of the oracle's stop request (kvf_oracle_request_stop, kvf_oracle_clear_stop;
 * oracle/src/oracle.c): a long run on either path returns within a second of CPU, the request
 * holds until cleared; also with every row streamed. */
#include <pthread.h>
#include <time.h>

#include "oracle_hand.h"

/* A stop request interrupts a long oracle run within a second, on either path, and holds until
 * cleared; a cleared oracle runs normally again. The case is one sequence of 2^19 tokens read
 * by 128 q heads of one kv group (seconds of work on the fast path, far more on MPFR's). */
typedef struct stop_run {
    const kvf_case *c;
    int path, rc;
    kvf_error err;
    double end_s, end_cpu_s;
} stop_run;

static double mono_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double process_cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *stop_run_main(void *arg) {
    stop_run *r = arg;
    kvf_oracle_opts o;
    kvf_oracle_opts_default(&o);
    o.path = r->path;
    o.threads = 1;
    kvf_oracle_result res;
    r->rc = kvf_oracle_run(&res, r->c, &o, &r->err);
    r->end_s = mono_s();
    r->end_cpu_s = process_cpu_s();
    if (r->rc == 0) kvf_oracle_result_free(&res);
    kvf_oracle_thread_done();
    return NULL;
}

static void test_stop_request_interrupts_within_a_second(void) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_spec s;
    memset(&s, 0, sizeof s);
    kvf_recipe *rp = &s.recipe;
    rp->num_qo_heads = 128;
    rp->num_kv_heads = 1;
    rp->head_dim = 32;
    rp->page_size = 1024;
    rp->sm_scale = 0.35f;
    rp->seed = 5;
    rp->logits = KVF_LOGITS_NEAR_TIE;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_set_batch(&s, 1, &err), &err);
    rp->num_pages[0] = 512;
    rp->last_page_len[0] = 1024;
    kvf_case c;
    CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
    kvf_spec_free(&s);
    static const int paths[] = {KVF_ORACLE_MPFR, KVF_ORACLE_FAST};
    static const double after_s[] = {0.3, 1.2};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) {
            kvf_oracle_clear_stop();
            stop_run r = {&c, paths[i], 0, {0}, 0, 0};
            pthread_t tid;
            CHECK(pthread_create(&tid, NULL, stop_run_main, &r) == 0);
            struct timespec nap = {0, (long)(after_s[k] * 1e9)};
            if (after_s[k] >= 1) nap.tv_sec = 1, nap.tv_nsec = (long)((after_s[k] - 1) * 1e9);
            nanosleep(&nap, NULL);
            double asked = mono_s(), asked_cpu = process_cpu_s();
            kvf_oracle_request_stop();
            pthread_join(tid, NULL);
            printf("%s path, stop after %.1f s: returned %.3f s after the request, %.3f s of CPU "
                   "(rc %d)\n",
                   kvf_oracle_path_name(paths[i]), after_s[k], r.end_s - asked,
                   r.end_cpu_s - asked_cpu, r.rc);
            CHECK_INT_EQ(r.rc, KVF_EINTR);
            CHECK_STR_CONTAINS(r.err.msg, "stopped by request");
            /* CPU time (the joining thread sleeps) measures the oracle, not the machine's load;
             * wall time gets slack for a loaded test machine. */
            CHECK(r.end_cpu_s - asked_cpu < 0.5);
            CHECK(r.end_s - asked < 3.0);
            CHECK(kvf_oracle_stop_requested());
        }
    /* The request holds until cleared; afterwards a small case runs normally. */
    kvf_oracle_result res;
    kvf_case one;
    const int64_t len1[1] = {1};
    CHECK_OK(build(&one, 1, 1, 2, 1, 1, len1, 0), &err);
    CHECK_INT_EQ(kvf_oracle_run(&res, &one, NULL, &err), KVF_EINTR);
    kvf_oracle_clear_stop();
    CHECK_OK(kvf_oracle_run(&res, &one, NULL, &err), &err);
    kvf_oracle_result_free(&res);
    kvf_case_free(&one);
    kvf_case_free(&c);
}

/* Every hand case of this file again with every row streamed one token per block
 * (run_streamed, tests/oracle_hand.h). */
static void test_streamed_rows(void) {
    void (*const fns[])(void) = {
        test_stop_request_interrupts_within_a_second,
    };
    run_streamed(fns, sizeof fns / sizeof fns[0]);
}

static const check_test tests[] = {
    {"stop_request_interrupts_within_a_second", test_stop_request_interrupts_within_a_second},
    {"streamed_rows", test_streamed_rows},
    {NULL, NULL},
};

CHECK_MAIN(tests)
