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

/* The worker runs a reader thread and one thread per lane. The reader receives each case
 * (allocates its pools, takes its pages off the socket) into a queue while the lanes run
 * earlier ones: receiving a case costs about as much host time as a small launch. Each lane owns
 * one kernel state; lanes take cases in order, run them at once (small CUDA cases then overlap
 * on the device instead of each paying a whole launch-copy-synchronize round trip in turn), and
 * answer strictly in order, so the parent collects launches in the order it sent them. A case
 * flagged KVF__CASE_ALONE starts only when no lane is busy, and no case starts beside it. */

/* ThreadSanitizer cannot follow a thread started in the child of a multi-threaded process (the
 * campaign forks its workers from a dispatcher thread): under it the worker has one lane and
 * receives each case itself, between launches. */
#if defined(__SANITIZE_THREAD__)
#define WORKER_THREADS 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WORKER_THREADS 0
#endif
#endif
#ifndef WORKER_THREADS
#define WORKER_THREADS 1
#endif

/* Cases received and not yet taken by a lane: the parent keeps at most lanes + 2 launches
 * unanswered, so this never fills; if it did, the reader would wait. */
#define PENDING_CAP (KVF_RUNNER_MAX_LANES + 4)

typedef struct worker {
    int fd;
    const kvf_runner_opts *opts;
    const kvf_kernel *k;
    pthread_mutex_t mu;
    pthread_cond_t changed;
    kvf__received_case pending[PENDING_CAP]; /* FIFO of received cases */
    int head, count;
    int busy;                          /* lanes running a case or waiting to answer */
    int alone_running;                 /* a KVF__CASE_ALONE case is running */
    uint64_t next_ticket, next_answer; /* answer order: tickets are taken in receive order */
    int ended;                         /* the stream ended: lanes leave once it is their turn */
    int lanes;
    /* KVF_WORKER_TIMING, added under mu. */
    int report_timing;
    double next_report;
    int64_t cases;
    double wait_case_s, run_s, reply_s;
    double reader_wait_parent_s, reader_receive_s, reader_wait_slot_s;
} worker;

typedef struct lane {
    worker *w;
    void *state;
    kvf_bf16 *out_o; /* reused from case to case: allocations past malloc's mmap threshold */
    float *out_lse;  /* would map and unmap memory for every launch */
    size_t out_o_cap, out_lse_cap;
} lane;

static void push_pending(worker *w, const kvf__received_case *rc) {
    w->pending[(w->head + w->count) % PENDING_CAP] = *rc;
    w->count++;
}

static void *reader_main(void *arg) {
    worker *w = arg;
    for (;;) {
        kvf__received_case rc;
        kvf__wire_receive_case(w->fd, &w->opts->limits, &rc);
        const double t0 = kvf__wire_now_s();
        pthread_mutex_lock(&w->mu);
        while (w->count == PENDING_CAP)
            pthread_cond_wait(&w->changed, &w->mu);
        push_pending(w, &rc);
        w->reader_wait_parent_s += rc.wait_parent_s;
        w->reader_receive_s += rc.receive_s;
        w->reader_wait_slot_s += kvf__wire_now_s() - t0;
        pthread_cond_broadcast(&w->changed);
        pthread_mutex_unlock(&w->mu);
        if (rc.kind != KVF__CASE_READY) return NULL;
    }
}

/* Takes the next case for a lane, in order, with its answer ticket; under mu. Without threads
 * the lane receives it here. Returns 0 when a case (or the end of the stream) was taken, -1
 * when another lane has already taken the end. */
static int take_case(worker *w, kvf__received_case *out, uint64_t *ticket) {
    if (!WORKER_THREADS) {
        pthread_mutex_unlock(&w->mu);
        kvf__wire_receive_case(w->fd, &w->opts->limits, out);
        pthread_mutex_lock(&w->mu);
        w->reader_wait_parent_s += out->wait_parent_s;
        w->reader_receive_s += out->receive_s;
    } else {
        for (;;) {
            if (w->ended) return -1;
            if (w->count > 0 && !w->alone_running) {
                const kvf__received_case *front = &w->pending[w->head];
                const int alone =
                    front->kind == KVF__CASE_READY && (front->flags & KVF__CASE_ALONE);
                if (!alone || w->busy == 0) break;
            }
            pthread_cond_wait(&w->changed, &w->mu);
        }
        *out = w->pending[w->head];
        w->head = (w->head + 1) % PENDING_CAP;
        w->count--;
    }
    *ticket = w->next_ticket++;
    w->busy++;
    if (out->kind == KVF__CASE_READY && (out->flags & KVF__CASE_ALONE)) w->alone_running = 1;
    pthread_cond_broadcast(&w->changed);
    return 0;
}

/* Every 5 s, totals so far (the worker may be killed at any moment, so there is no report at
 * exit); under mu. */
static void maybe_report(worker *w, double now) {
    if (!w->report_timing || now < w->next_report) return;
    w->next_report = now + 5;
    fprintf(stderr,
            "kvfuzz worker %d: %lld cases on %d lane(s); lanes: waiting for a case %.2f s, run "
            "%.2f s, waiting for their turn and replying %.2f s (summed over lanes); reader: "
            "waiting for the parent %.2f s, receiving %.2f s, waiting for room %.2f s\n",
            (int)getpid(), (long long)w->cases, w->lanes, w->wait_case_s, w->run_s, w->reply_s,
            w->reader_wait_parent_s, w->reader_receive_s, w->reader_wait_slot_s);
}

static void *lane_main(void *arg) {
    lane *ln = arg;
    worker *w = ln->w;
    const kvf_kernel *k = w->k;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        kvf__received_case cur;
        uint64_t ticket;
        const double t_wait = kvf__wire_now_s();
        if (w->ended || take_case(w, &cur, &ticket)) break;
        w->wait_case_s += kvf__wire_now_s() - t_wait;
        if (cur.kind == KVF__CASE_END) {
            /* Its turn comes after every case before it has been answered. */
            while (w->next_answer != ticket)
                pthread_cond_wait(&w->changed, &w->mu);
            w->ended = 1;
            pthread_cond_broadcast(&w->changed);
            break;
        }
        pthread_mutex_unlock(&w->mu);

        int32_t rc = 0;
        kvf_error err = {0};
        char plan[KVF_RUN_PLAN_MAX] = "";
        int64_t n_o = 0, n_lse = 0;
        double t0 = 0, t1 = 0;
        int exiting;
        if (cur.kind == KVF__CASE_UNHOLDABLE) {
            /* The parent built this very case; failing here means the worker is unwell. */
            rc = KVF_EIO;
            kvf_error_set(&err, KVF_EIO, "the worker could not hold the case: %s", cur.err.msg);
            exiting = 1;
        } else {
            kvf_case *c = &cur.c;
            n_o = kvf_case_o_elems(c);
            n_lse = kvf_case_lse_elems(c);
            if (kvf__wire_grow((void **)&ln->out_o, &ln->out_o_cap,
                               (size_t)(n_o + 1) * sizeof *ln->out_o) ||
                kvf__wire_grow((void **)&ln->out_lse, &ln->out_lse_cap,
                               (size_t)(n_lse + 1) * sizeof *ln->out_lse))
                _exit(4);
            t0 = kvf__wire_now_s();
            rc = kvf_kernel_run(k, ln->state, c, ln->out_o, ln->out_lse, &err);
            t1 = kvf__wire_now_s();
            /* After an error other than "unsupported" the kernel's state (a CUDA context with
             * a sticky error) is not trusted: answer, then let a fresh worker take over. */
            exiting = rc != 0 && rc != KVF_EUNSUPPORTED;
            if (rc == 0) kvf_kernel_describe(k, ln->state, plan, sizeof plan);
        }

        pthread_mutex_lock(&w->mu);
        while (w->next_answer != ticket)
            pthread_cond_wait(&w->changed, &w->mu);
        pthread_mutex_unlock(&w->mu);
        /* Only the lane whose turn it is writes to the socket. */
        kvf__wire_reply(w->fd, rc, cur.seq, &err, plan, n_o, n_lse, ln->out_o, ln->out_lse, t1 - t0,
                        exiting);
        const double t2 = kvf__wire_now_s();
        if (exiting) _exit(0);
        pthread_mutex_lock(&w->mu);
        w->next_answer++;
        w->busy--;
        if (cur.kind == KVF__CASE_READY && (cur.flags & KVF__CASE_ALONE)) w->alone_running = 0;
        w->cases++;
        w->run_s += t1 - t0;
        w->reply_s += t2 - t1;
        maybe_report(w, t2);
        pthread_cond_broadcast(&w->changed);
        pthread_mutex_unlock(&w->mu);
        /* Unmapping the pools, off the other lanes' path. */
        kvf_case_free(&cur.c);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Creates up to `want` kernel states: the first failure of the first is the worker's error;
 * a later one is too (a device with room for fewer states should be asked for fewer lanes). */
static int create_states(const kvf_kernel *k, lane *lanes, int want, int *made, kvf_error *err) {
    *made = 0;
    int rc = kvf_kernel_create(k, &lanes[0].state, err);
    if (rc) return rc;
    *made = 1;
    int n = kvf_kernel_concurrent_states(k, lanes[0].state);
    if (n > want) n = want;
    for (int i = 1; i < n; i++) {
        kvf_error e = {0};
        rc = kvf_kernel_create(k, &lanes[i].state, &e);
        if (rc)
            return kvf_error_set(err, rc,
                                 "kernel state %d of %d (--lanes) could not be created: %s", i + 1,
                                 n, e.msg);
        *made = i + 1;
    }
    return 0;
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
    int want = opts->lanes < 1                      ? 1
               : opts->lanes > KVF_RUNNER_MAX_LANES ? KVF_RUNNER_MAX_LANES
                                                    : opts->lanes;
    if (!WORKER_THREADS) want = 1;
    lane lanes[KVF_RUNNER_MAX_LANES];
    memset(lanes, 0, sizeof lanes);
    kvf_error err = {0};
    int made = 0;
    int rc = create_states(k, lanes, want, &made, &err);
    kvf__ready_msg ready = {KVF__MAGIC_READY, rc, rc ? (uint32_t)strlen(err.msg) : 0,
                            (uint32_t)made};
    if (kvf__wire_send_all(fd, &ready, sizeof ready) ||
        (ready.msglen && kvf__wire_send_all(fd, err.msg, ready.msglen)))
        _exit(3);
    if (rc) _exit(0);

    static worker w; /* lives until _exit; detached threads may still refer to it */
    memset(&w, 0, sizeof w);
    w.fd = fd;
    w.opts = opts;
    w.k = k;
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.changed, NULL);
    kvf_env_flag("KVF_WORKER_TIMING", &w.report_timing, NULL); /* validated by the command */
    w.next_report = kvf__wire_now_s() + 5;
    w.lanes = made;
    pthread_t threads[KVF_RUNNER_MAX_LANES];
    if (WORKER_THREADS) {
        pthread_t reader;
        if (pthread_create(&reader, NULL, reader_main, &w) != 0) _exit(4);
        pthread_detach(reader); /* the process ends with _exit, wherever the reader is */
    }
    for (int i = 0; i < made; i++) {
        lanes[i].w = &w;
        if (i == 0) continue; /* lane 0 runs on this thread */
        if (pthread_create(&threads[i], NULL, lane_main, &lanes[i]) != 0) _exit(4);
    }
    lane_main(&lanes[0]);
    for (int i = 1; i < made; i++)
        pthread_join(threads[i], NULL);
    for (int i = 0; i < made; i++) {
        kvf_kernel_destroy(k, lanes[i].state);
        free(lanes[i].out_o);
        free(lanes[i].out_lse);
    }
    _exit(0);
}
