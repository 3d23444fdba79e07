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

/* The worker runs a reader thread, one thread per lane (or one for all lanes, when the kernel's
 * runs overlap: pipeline_main) and, with several lanes, a writer thread. The reader receives
 * each case (allocates its pools, takes its pages off the socket) into a queue while the lanes
 * run earlier ones: receiving a case costs about as much host time as a small launch. Each lane
 * owns one kernel state; lanes take cases in order and run them at once. A lane leaves its result
 * in the slot of its case and takes the next case at once; the writer answers strictly in order, so
 * the parent collects launches in the order it sent them and one slow case holds up the answers
 * behind it but not the lanes. A case flagged KVF__CASE_ALONE starts only once every case before it
 * has been answered, and nothing starts until it has been answered: a crash then is that case's. */

/* ThreadSanitizer cannot follow a thread started in the child of a multi-threaded process (the
 * campaign forks its workers from a dispatcher thread): under it the worker has one lane, which
 * receives each case itself and answers it before the next. */
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

/* Cases received and not yet answered: the parent keeps at most KVF_RUNNER_MAX_INFLIGHT
 * unanswered, so neither ring fills; if one did, the reader would wait. */
#define RING (KVF_RUNNER_MAX_INFLIGHT + 2)

/* One case's answer, in the slot of its ticket. Its buffers stay with the slot (grown, never
 * shrunk: allocations past malloc's mmap threshold would map and unmap memory every launch). */
typedef struct answer {
    int posted; /* the lane is done with it */
    int end;    /* the end of the stream, not a case */
    int32_t rc;
    int exiting, alone;
    uint64_t seq;
    kvf_error err;
    char plan[KVF_RUN_PLAN_MAX];
    int64_t n_o, n_lse;
    double kernel_s;
    kvf_bf16 *o;
    float *lse;
    size_t o_cap, lse_cap;
    /* A case whose memory the writer releases once the answer is sent (holds set), so that
     * unmapping its pools stays off the path of the thread that drives the lanes. */
    kvf__received_case held;
    int holds;
} answer;

typedef struct worker {
    int fd;
    const kvf_runner_opts *opts;
    const kvf_kernel *k;
    pthread_mutex_t mu;
    pthread_cond_t changed;
    kvf__received_case pending[RING]; /* FIFO of received cases */
    int head, count;
    answer answers[RING];              /* by ticket % ring */
    int ring;                          /* answer slots in use: the parent's largest window, + 2 */
    int running;                       /* lanes running a case */
    int alone_open;                    /* a KVF__CASE_ALONE case is taken and not yet answered */
    uint64_t next_ticket, next_answer; /* tickets are taken in receive order */
    int ended;                         /* the end of the stream was taken */
    int lanes;
    /* Answers go out from a writer thread, so that lanes never wait for their turn; with one
     * lane the lane answers each case before it takes the next, as then a crash is always the
     * case the parent waits for (several lanes re-run a failure alone instead). */
    int writer;
    /* KVF_WORKER_TIMING, added under mu. */
    int report_timing;
    double next_report;
    int64_t cases;
    double wait_case_s, run_s, reply_s, writer_wait_s;
    double submit_s, collect_s; /* pipeline_main's time in the two phases */
    double reader_wait_parent_s, reader_receive_s, reader_wait_slot_s;
} worker;

typedef struct lane {
    worker *w;
    void *state;
} lane;

static void push_pending(worker *w, const kvf__received_case *rc) {
    w->pending[(w->head + w->count) % RING] = *rc;
    w->count++;
}

static void *reader_main(void *arg) {
    worker *w = arg;
    for (;;) {
        kvf__received_case rc;
        kvf__wire_receive_case(w->fd, &w->opts->limits, &rc);
        const double t0 = kvf__wire_now_s();
        pthread_mutex_lock(&w->mu);
        while (w->count == RING)
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

static int is_alone(const kvf__received_case *c) {
    return c->kind == KVF__CASE_READY && (c->flags & KVF__CASE_ALONE);
}

/* Takes the next case for a lane, in order, with its ticket; under mu. Without threads the
 * lane receives it here. Returns 0 when a case (or the end of the stream) was taken, -1 when
 * another lane has already taken the end, 1 when `wait` is 0 and none can be taken now. */
static int take_case(worker *w, kvf__received_case *out, uint64_t *ticket, int wait) {
    if (!WORKER_THREADS) {
        pthread_mutex_unlock(&w->mu);
        kvf__wire_receive_case(w->fd, &w->opts->limits, out);
        pthread_mutex_lock(&w->mu);
        w->reader_wait_parent_s += out->wait_parent_s;
        w->reader_receive_s += out->receive_s;
    } else {
        for (;;) {
            if (w->ended) return -1;
            if (w->count > 0 && !w->alone_open) {
                const kvf__received_case *front = &w->pending[w->head];
                if (!is_alone(front) || (w->running == 0 && w->next_answer == w->next_ticket))
                    break;
            }
            if (!wait) return 1;
            pthread_cond_wait(&w->changed, &w->mu);
        }
        *out = w->pending[w->head];
        w->head = (w->head + 1) % RING;
        w->count--;
    }
    *ticket = w->next_ticket++;
    if (out->kind == KVF__CASE_END) w->ended = 1;
    if (is_alone(out)) w->alone_open = 1;
    w->running++;
    pthread_cond_broadcast(&w->changed);
    return 0;
}

/* Every 5 s, totals so far (the worker may be killed at any moment, so there is no report at
 * exit); under mu. */
static void maybe_report(worker *w, double now) {
    if (!w->report_timing || now < w->next_report) return;
    w->next_report = now + 5;
    fprintf(stderr,
            "kvfuzz worker %d: %lld cases on %d lane(s); lanes (summed): waiting for a case "
            "%.2f s, run %.2f s (submitting %.2f s, collecting %.2f s, when one thread drives "
            "them); writer: waiting for the next answer %.2f s, replying %.2f s; reader: waiting "
            "for the parent %.2f s, receiving %.2f s, waiting for room %.2f s\n",
            (int)getpid(), (long long)w->cases, w->lanes, w->wait_case_s, w->run_s, w->submit_s,
            w->collect_s, w->writer_wait_s, w->reply_s, w->reader_wait_parent_s,
            w->reader_receive_s, w->reader_wait_slot_s);
}

/* Starts the answer of a received case (not under mu). Returns 1 when the case is to run, its
 * output buffers ready; 0 when the answer is already complete (the end of the stream, or a case
 * the worker could not hold). */
static int open_answer(kvf__received_case *cur, answer *a) {
    a->seq = cur->seq;
    a->end = cur->kind == KVF__CASE_END;
    a->alone = is_alone(cur);
    a->rc = 0;
    a->exiting = 0;
    a->plan[0] = 0;
    a->n_o = a->n_lse = 0;
    a->kernel_s = 0;
    kvf_error_clear(&a->err);
    if (a->end) return 0;
    if (cur->kind == KVF__CASE_UNHOLDABLE) {
        /* The parent built this very case; failing here means the worker is unwell. */
        a->rc = KVF_EIO;
        kvf_error_set(&a->err, KVF_EIO, "the worker could not hold the case: %s", cur->err.msg);
        a->exiting = 1;
        return 0;
    }
    const kvf_case *c = &cur->c;
    a->n_o = kvf_case_o_elems(c);
    a->n_lse = kvf_case_lse_elems(c);
    if (kvf__wire_grow((void **)&a->o, &a->o_cap, (size_t)(a->n_o + 1) * sizeof *a->o) ||
        kvf__wire_grow((void **)&a->lse, &a->lse_cap, (size_t)(a->n_lse + 1) * sizeof *a->lse))
        _exit(4);
    return 1;
}

/* Completes the answer of a case that ran and returned a->rc (not under mu). The case is freed
 * now, or by the writer once the answer is sent (`hand_over`). */
static void close_answer(const kvf_kernel *k, void *state, kvf__received_case *cur, answer *a,
                         int hand_over) {
    /* After an error other than "unsupported" the kernel's state (a CUDA context with a sticky
     * error) is not trusted: answer, then let a fresh worker take over. */
    a->exiting = a->rc != 0 && a->rc != KVF_EUNSUPPORTED;
    if (a->rc == 0) kvf_kernel_describe(k, state, a->plan, sizeof a->plan);
    if (hand_over) {
        a->held = *cur;
        a->holds = 1;
    } else {
        kvf_case_free(&cur->c); /* unmapping the pools, off the other lanes' path */
    }
}

/* The kernel's run of a received case: a plain run, or the graph-replay relation's (the capture
 * case derived again from the case and its seed, as the parent derived it). */
static int kernel_run(const worker *w, void *state, kvf__received_case *cur, answer *a) {
    if (!(cur->flags & KVF__CASE_GRAPH))
        return kvf_kernel_run(w->k, state, &cur->c, a->o, a->lse, &a->err);
    return kvf_kernel_graph_relation_run(w->k, state, &cur->c, cur->graph_seed, &w->opts->limits,
                                         a->o, a->lse, &a->err);
}

/* Runs one received case into its answer slot (not under mu). */
static void run_case(lane *ln, kvf__received_case *cur, answer *a) {
    if (!open_answer(cur, a)) return;
    const double t0 = kvf__wire_now_s();
    a->rc = kernel_run(ln->w, ln->state, cur, a);
    a->kernel_s = kvf__wire_now_s() - t0;
    close_answer(ln->w->k, ln->state, cur, a, 0);
}

/* Sends the answer whose turn it is and frees its slot. Returns 1 at the end of the stream. */
static int write_answer(worker *w, answer *a) {
    if (a->end) return 1;
    const double t0 = kvf__wire_now_s();
    kvf__wire_reply(w->fd, a->rc, a->seq, &a->err, a->plan, a->n_o, a->n_lse, a->o, a->lse,
                    a->kernel_s, a->exiting);
    if (a->exiting) _exit(0);
    if (a->holds) kvf_case_free(&a->held.c);
    a->holds = 0;
    pthread_mutex_lock(&w->mu);
    a->posted = 0;
    w->next_answer++;
    if (a->alone) w->alone_open = 0;
    w->cases++;
    w->run_s += a->kernel_s;
    const double t1 = kvf__wire_now_s();
    w->reply_s += t1 - t0;
    maybe_report(w, t1);
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static void *writer_main(void *arg) {
    worker *w = arg;
    for (;;) {
        const double t0 = kvf__wire_now_s();
        pthread_mutex_lock(&w->mu);
        answer *a = &w->answers[w->next_answer % (uint64_t)w->ring];
        while (!a->posted)
            pthread_cond_wait(&w->changed, &w->mu);
        w->writer_wait_s += kvf__wire_now_s() - t0;
        pthread_mutex_unlock(&w->mu);
        if (write_answer(w, a)) return NULL;
    }
}

/* Posts a finished answer and, without a writer, sends it; under mu, which it may drop. Returns
 * 1 when the lane is done: the end of the stream was answered, or the answer ends the worker
 * (its writer exits on it). */
static int post_answer(worker *w, answer *a) {
    a->posted = 1;
    w->running--;
    pthread_cond_broadcast(&w->changed);
    if (!w->writer) {
        pthread_mutex_unlock(&w->mu);
        const int end = write_answer(w, a);
        pthread_mutex_lock(&w->mu);
        if (end) return 1;
    }
    return a->end || a->exiting;
}

static void *lane_main(void *arg) {
    lane *ln = arg;
    worker *w = ln->w;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        kvf__received_case cur;
        uint64_t ticket;
        const double t_wait = kvf__wire_now_s();
        if (take_case(w, &cur, &ticket, 1)) break;
        w->wait_case_s += kvf__wire_now_s() - t_wait;
        answer *a = &w->answers[ticket % (uint64_t)w->ring];
        pthread_mutex_unlock(&w->mu);
        run_case(ln, &cur, a);
        pthread_mutex_lock(&w->mu);
        if (post_answer(w, a)) break;
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Lanes of a kernel whose runs overlap (kvf_kernel_overlaps: the CUDA buffer host), driven by
 * one thread: it submits the next case to a free state before it collects the oldest, so the
 * host's work on one case (loading it, queueing its calls, checking its results) overlaps the
 * device's work on the others, and no two threads contend for the driver (threads side by side
 * made each CUDA call slower; docs/performance.md, "Lanes"). Cases are collected in the order
 * they were taken, so the states are used in turn. A case is taken without waiting while
 * others are in flight: when none can be taken now, the oldest is collected instead, and an
 * answer never waits for a case the parent has not sent. */
typedef struct flight {
    kvf__received_case c;
    answer *a;
    void *state;
    int runs; /* submitted to the kernel (not the end, not an unholdable case) */
} flight;

static void pipeline_main(worker *w, lane *lanes, int n) {
    flight fl[KVF_RUNNER_MAX_LANES];
    int head = 0, inflight = 0, taking = 1;
    uint64_t taken = 0;
    double busy_until = 0; /* when the last collect ended: a lane's busy time is counted once */
    pthread_mutex_lock(&w->mu);
    for (;;) {
        if (taking && inflight < n) {
            flight *f = &fl[(head + inflight) % n];
            uint64_t ticket;
            const double t_wait = kvf__wire_now_s();
            const int got = take_case(w, &f->c, &ticket, inflight == 0);
            if (got < 0) break;
            if (got == 0) {
                w->wait_case_s += kvf__wire_now_s() - t_wait;
                f->a = &w->answers[ticket % (uint64_t)w->ring];
                f->state = lanes[taken++ % (uint64_t)n].state;
                pthread_mutex_unlock(&w->mu);
                if (f->c.kind == KVF__CASE_END) taking = 0;
                f->runs = open_answer(&f->c, f->a);
                double submit_s = 0;
                if (f->runs && (f->c.flags & KVF__CASE_GRAPH)) {
                    /* Alone, so nothing else is in flight: run it through, collect nothing. */
                    const double t0 = kvf__wire_now_s();
                    f->a->rc = kernel_run(w, f->state, &f->c, f->a);
                    f->a->kernel_s = kvf__wire_now_s() - t0;
                    close_answer(w->k, f->state, &f->c, f->a, w->writer);
                    f->runs = 0;
                } else if (f->runs) {
                    const double t0 = kvf__wire_now_s();
                    /* A failed submit's error comes back from the collect. */
                    (void)kvf_kernel_submit(w->k, f->state, &f->c.c, &f->a->err);
                    f->a->kernel_s = t0; /* the start, until the collect */
                    submit_s = kvf__wire_now_s() - t0;
                }
                pthread_mutex_lock(&w->mu);
                w->submit_s += submit_s;
                inflight++;
                continue;
            }
        }
        if (inflight == 0) break;
        flight *f = &fl[head];
        head = (head + 1) % n;
        inflight--;
        answer *a = f->a;
        if (f->runs) {
            pthread_mutex_unlock(&w->mu);
            kvf_error_clear(&a->err);
            const double t0 = kvf__wire_now_s();
            a->rc = kvf_kernel_collect(w->k, f->state, a->o, a->lse, &a->err);
            const double t1 = kvf__wire_now_s();
            a->kernel_s = t1 - (a->kernel_s > busy_until ? a->kernel_s : busy_until);
            busy_until = t1;
            close_answer(w->k, f->state, &f->c, a, w->writer);
            pthread_mutex_lock(&w->mu);
            w->collect_s += t1 - t0;
        }
        /* After an answer that ends the worker, the cases behind it go to a fresh one. */
        if (post_answer(w, a)) break;
    }
    pthread_mutex_unlock(&w->mu);
}

/* Creates up to `want` kernel states (0: the default, KVF_RUNNER_AUTO_LANES for a kernel whose
 * runs overlap, else 1): the first failure of the first is the worker's error; a later one is
 * too (a device with room for fewer states should be asked for fewer lanes), and so is a `want`
 * above the kernel's concurrent_states. */
static int create_states(const kvf_kernel *k, lane *lanes, int want, int *made, kvf_error *err) {
    *made = 0;
    int rc = kvf_kernel_create(k, &lanes[0].state, err);
    if (rc) return rc;
    *made = 1;
    const int asked = want;
    if (want == 0) want = kvf_kernel_overlaps(k, lanes[0].state) ? KVF_RUNNER_AUTO_LANES : 1;
    int n = kvf_kernel_concurrent_states(k, lanes[0].state);
    /* More lanes than the kernel can run is a bad --lanes, not a smaller campaign in silence. */
    if (asked > n)
        return kvf_error_set(err, KVF_EINVAL,
                             "--lanes %d is more than the %d state(s) kernel %s runs at once (its "
                             "concurrent_states)",
                             asked, n, k->name);
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
    /* Ctrl-C reaches the whole process group, and a batch system's SIGTERM every process of
     * the job: the parent decides when the worker stops (it ends workers with SIGKILL, and
     * PR_SET_PDEATHSIG below ends one whose parent died), so that a worker killed first does
     * not look like a kernel crash to a parent that is stopping in order. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    if (getppid() != parent) _exit(0);

    const kvf_kernel *k = opts->kernel;
    int want = opts->lanes < 1                      ? 0
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
    /* The parent's largest window (4 lanes + 2; kvf_runner_create clamped the lanes), + 2. */
    w.ring = KVF_RUNNER_WINDOW(made) + 2;
    pthread_t threads[KVF_RUNNER_MAX_LANES], writer;
    w.writer = WORKER_THREADS && made > 1;
    if (WORKER_THREADS) {
        pthread_t reader;
        if (pthread_create(&reader, NULL, reader_main, &w) != 0) _exit(4);
        pthread_detach(reader); /* the process ends with _exit, wherever the reader is */
    }
    if (w.writer && pthread_create(&writer, NULL, writer_main, &w) != 0) _exit(4);
    /* Lanes whose runs overlap are driven from this thread; others get a thread each. */
    const int threaded = !(made > 1 && kvf_kernel_overlaps(k, lanes[0].state));
    for (int i = 0; i < made; i++) {
        lanes[i].w = &w;
        if (i == 0 || !threaded) continue; /* lane 0 runs on this thread */
        if (pthread_create(&threads[i], NULL, lane_main, &lanes[i]) != 0) _exit(4);
    }
    if (threaded)
        lane_main(&lanes[0]);
    else
        pipeline_main(&w, lanes, made);
    for (int i = 1; threaded && i < made; i++)
        pthread_join(threads[i], NULL);
    if (w.writer) pthread_join(writer, NULL);
    for (int i = 0; i < made; i++)
        kvf_kernel_destroy(k, lanes[i].state);
    for (int i = 0; i < RING; i++) {
        free(w.answers[i].o);
        free(w.answers[i].lse);
        if (w.answers[i].holds) kvf_case_free(&w.answers[i].held.c);
    }
    _exit(0);
}
