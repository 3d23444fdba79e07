/* The kernel worker process (worker.h). */
#include "worker.h"
#include "kvfuzz/env.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "wire.h"

/* The worker runs two threads. A reader receives the next case (allocates its pools, takes its
 * pages off the socket) while the kernel thread runs the current one: receiving a case costs
 * about as much host time as a small launch, and done one after the other they left the device
 * idle for half of every case. The parent keeps the next case in the socket, so the reader
 * always has work; the kernel thread still runs and answers cases strictly in order, so the
 * parent's bookkeeping (the head launch is the running one) is unchanged. */

/* ThreadSanitizer cannot follow a thread started in the child of a multi-threaded process (the
 * campaign forks its workers from a dispatcher thread): under it the worker receives each case
 * itself, between launches. */
#if defined(__SANITIZE_THREAD__)
#define WORKER_READER_THREAD 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WORKER_READER_THREAD 0
#endif
#endif
#ifndef WORKER_READER_THREAD
#define WORKER_READER_THREAD 1
#endif

typedef struct worker_pipe {
    int fd;
    const kvf_runner_opts *opts;
    pthread_mutex_t mu;
    pthread_cond_t changed;
    kvf__received_case
        next;          /* handed from the reader to the kernel thread; kind KVF__CASE_NONE: empty */
    kvf_case finished; /* a case the kernel thread is done with, for the reader to free */
    int have_finished;
    /* KVF_WORKER_TIMING: where the reader's time went, added under mu as each case is posted. */
    double reader_wait_parent_s, reader_receive_s, reader_wait_slot_s;
} worker_pipe;

/* Receives one case into rc, with the reader's timing. */
static void receive_case(worker_pipe *wp, kvf__received_case *rc) {
    kvf__wire_receive_case(wp->fd, &wp->opts->limits, rc);
}

static void *reader_main(void *arg) {
    worker_pipe *wp = arg;
    for (;;) {
        kvf__received_case rc;
        receive_case(wp, &rc);
        const double t0 = kvf__wire_now_s();
        pthread_mutex_lock(&wp->mu);
        while (wp->next.kind != KVF__CASE_NONE) {
            if (wp->have_finished) { /* free the kernel thread's last case while we wait */
                kvf_case done = wp->finished;
                wp->have_finished = 0;
                pthread_mutex_unlock(&wp->mu);
                kvf_case_free(&done);
                pthread_mutex_lock(&wp->mu);
                continue;
            }
            pthread_cond_wait(&wp->changed, &wp->mu);
        }
        wp->next = rc;
        wp->reader_wait_parent_s += rc.wait_parent_s;
        wp->reader_receive_s += rc.receive_s;
        wp->reader_wait_slot_s += kvf__wire_now_s() - t0;
        pthread_cond_broadcast(&wp->changed);
        /* Posted first, freed after: the kernel thread may be waiting for this case. */
        kvf_case done;
        const int have_done = wp->have_finished;
        if (have_done) done = wp->finished, wp->have_finished = 0;
        pthread_mutex_unlock(&wp->mu);
        if (have_done) kvf_case_free(&done);
        if (rc.kind != KVF__CASE_READY) return NULL;
    }
}

void kvf__worker_main(int fd, const kvf_runner_opts *opts, pid_t parent) {
    /* Ctrl-C reaches the whole process group; the parent decides when the worker stops. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    if (getppid() != parent) _exit(0);

    const kvf_kernel *k = opts->kernel;
    void *state = NULL;
    kvf_error err = {0};
    int rc = kvf_kernel_create(k, &state, &err);
    kvf__ready_msg ready = {KVF__MAGIC_READY, rc, rc ? (uint32_t)strlen(err.msg) : 0};
    if (kvf__wire_send_all(fd, &ready, sizeof ready) ||
        (ready.msglen && kvf__wire_send_all(fd, err.msg, ready.msglen)))
        _exit(3);
    if (rc) _exit(0);

    worker_pipe wp;
    memset(&wp, 0, sizeof wp);
    wp.fd = fd;
    wp.opts = opts;
    pthread_mutex_init(&wp.mu, NULL);
    pthread_cond_init(&wp.changed, NULL);
    if (WORKER_READER_THREAD) {
        pthread_t reader;
        if (pthread_create(&reader, NULL, reader_main, &wp) != 0) _exit(4);
        pthread_detach(reader); /* the process ends with _exit, wherever the reader is */
    }

    /* Buffers reused from case to case: allocations past malloc's mmap threshold would map
     * and unmap memory for every launch. */
    size_t out_o_cap = 0, out_lse_cap = 0;
    kvf_bf16 *out_o = NULL;
    float *out_lse = NULL;
    int report_timing = 0; /* kvfuzz/env.h; the command validated it at its start */
    kvf_env_flag("KVF_WORKER_TIMING", &report_timing, NULL);
    double wait_case_s = 0, run_s = 0, reply_s = 0, next_report = kvf__wire_now_s() + 5;
    int64_t cases = 0;
    for (;;) {
        kvf__received_case cur;
        const double t_wait = kvf__wire_now_s();
        if (WORKER_READER_THREAD) {
            pthread_mutex_lock(&wp.mu);
            while (wp.next.kind == KVF__CASE_NONE)
                pthread_cond_wait(&wp.changed, &wp.mu);
            cur = wp.next;
            wp.next.kind = KVF__CASE_NONE;
            pthread_cond_broadcast(&wp.changed);
            pthread_mutex_unlock(&wp.mu);
        } else {
            receive_case(&wp, &cur);
            wp.reader_wait_parent_s += cur.wait_parent_s;
            wp.reader_receive_s += cur.receive_s;
        }
        wait_case_s += kvf__wire_now_s() - t_wait;
        if (cur.kind == KVF__CASE_END) break;
        if (cur.kind == KVF__CASE_UNHOLDABLE) {
            /* The parent built this very case; failing here means the worker is unwell. */
            kvf_error e2;
            kvf_error_set(&e2, KVF_EIO, "the worker could not hold the case: %s", cur.err.msg);
            kvf__wire_reply(fd, KVF_EIO, cur.seq, &e2, NULL, 0, 0, NULL, NULL, 0, 1);
            break;
        }
        kvf_case *c = &cur.c;
        int64_t n_o = kvf_case_o_elems(c), n_lse = kvf_case_lse_elems(c);
        if (kvf__wire_grow((void **)&out_o, &out_o_cap, (size_t)(n_o + 1) * sizeof *out_o) ||
            kvf__wire_grow((void **)&out_lse, &out_lse_cap, (size_t)(n_lse + 1) * sizeof *out_lse))
            _exit(4);
        kvf_error_clear(&err);
        double t0 = kvf__wire_now_s();
        rc = kvf_kernel_run(k, state, c, out_o, out_lse, &err);
        double t1 = kvf__wire_now_s();
        /* After an error other than "unsupported" the kernel's state (a CUDA context with a
         * sticky error) is not trusted: answer, then let a fresh worker take over. */
        int exiting = rc != 0 && rc != KVF_EUNSUPPORTED;
        char plan[KVF_RUN_PLAN_MAX] = "";
        if (rc == 0) kvf_kernel_describe(k, state, plan, sizeof plan);
        kvf__wire_reply(fd, rc, cur.seq, &err, plan, n_o, n_lse, out_o, out_lse, t1 - t0, exiting);
        run_s += t1 - t0;
        reply_s += kvf__wire_now_s() - t1;
        cases++;
        if (report_timing && t1 >= next_report) {
            /* Every 5 s, totals so far: the worker may be killed at any moment, so there is
             * no report at exit. */
            next_report = t1 + 5;
            pthread_mutex_lock(&wp.mu);
            const double parent_s = wp.reader_wait_parent_s, receive_s = wp.reader_receive_s,
                         slot_s = wp.reader_wait_slot_s;
            pthread_mutex_unlock(&wp.mu);
            fprintf(stderr,
                    "kvfuzz worker %d: %lld cases; kernel thread: waiting for a case %.2f s, run "
                    "%.2f s, replying %.2f s; reader: waiting for the parent %.2f s, receiving "
                    "%.2f s, waiting for the kernel thread %.2f s\n",
                    (int)getpid(), (long long)cases, wait_case_s, run_s, reply_s, parent_s,
                    receive_s, slot_s);
        }
        if (exiting) _exit(0);
        /* Unmapping the pools is the reader's job, off the path between two launches; if it
         * has not taken the last one yet, this one is freed here. */
        pthread_mutex_lock(&wp.mu);
        int handed = WORKER_READER_THREAD && !wp.have_finished;
        if (handed) {
            wp.finished = *c;
            wp.have_finished = 1;
            pthread_cond_broadcast(&wp.changed);
        }
        pthread_mutex_unlock(&wp.mu);
        if (!handed) kvf_case_free(c);
    }
    kvf_kernel_destroy(k, state);
    free(out_o);
    free(out_lse);
    _exit(0);
}
