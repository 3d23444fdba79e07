/* The kernel runner's parent side (runner.h): the launches in flight, the worker's start and
 * restart, deadlines. The worker process is worker.c; what travels between them, wire.c. */
#include "kvfuzz/runner.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "wire.h"
#include "worker.h"

/* The ring of launches: room for the largest window. */
#define RING KVF_RUNNER_MAX_INFLIGHT
/* Past a deadline, how long the worker may deliver nothing before the launch counts as hung
 * (the caller may have come back late, with results queued in the worker). */
#define LATE_GRACE_S 0.5

/* One launch: the case's message (its pages read from the caller's case, which stays alive
 * until the launch is collected, so a launch lost with a dead worker can be sent again) and
 * its result as it arrives. */
typedef struct launch {
    kvf__case_message req;
    int64_t n_o, n_lse;
    double start; /* when the worker can have begun it at the latest; 0 while it cannot */
    int alone;    /* sent flagged KVF__CASE_ALONE */
    int rerun;    /* being run again alone after a failure beside other launches */
    int done;     /* its whole result is in */
    kvf__result_msg hdr;
    size_t hdr_got;
    uint8_t *payload; /* msg, o, lse */
    size_t payload_size, payload_got, payload_cap;
    kvf_run_result res; /* in-process mode: the finished result */
} launch;

struct kvf_runner {
    kvf_runner_opts opts;
    pid_t pid;
    atomic_int live_pid; /* pid for kvf_runner_interrupt from another thread; 0 when none */
    /* Set by kvf_runner_interrupt: the launches in flight are not run again (no fresh worker
     * for them, no re-run alone), so that shutdown waits for no worker's start. */
    atomic_int interrupted;
    int fd;
    int64_t starts;
    uint64_t seq;
    double idle_s;                 /* blocked in poll() on the worker (kvf_runner_idle_s) */
    char cuda_visible_devices[64]; /* for the worker's environment; "" inherits */
    launch q[RING];                /* FIFO, oldest (the head, collected next) first */
    int head, count;
    int ring;  /* slots used: the largest window this runner can have, for opts.lanes */
    int lanes; /* the running worker's; 1 when none runs */
    /* After a failure beside other launches: the launches run again alone not yet collected,
     * whether one of them failed alone, and how many launches after them still go alone (the
     * campaign's confirming re-run of a crash is submitted right after it is collected). */
    int rerun_open, rerun_failed, alone_left;
    int64_t reruns, unrepeated;
    /* in-process mode */
    void *state;
    int created;
};

/* ---- the parent side ------------------------------------------------------------------------
 *
 * Up to KVF_RUNNER_WINDOW(lanes) launches are in flight: while the worker's lanes run theirs, its
 * reader takes in the next and the rest wait in the socket, so neither the worker's receiving
 * nor this side's turnaround between a result and the next send stands between two launches. The
 * parent end of the socket is non-blocking, every wait is a poll() on both directions, and every
 * result that arrives is read at once (whichever launch it belongs to), so neither side can
 * block the other however large the cases and results. */

/* Where lse starts in an in-process launch's payload: after o and its spare element, rounded up
 * to 16 bytes, so that a kernel stores its floats aligned (o's bf16 count is usually even). */
static size_t lse_offset(int64_t n_o) {
    return ((size_t)(n_o + 1) * sizeof(kvf_bf16) + 15) & ~(size_t)15;
}

/* The i-th launch in flight, 0 being the oldest (the head). */
static launch *at(kvf_runner *r, int i) {
    return &r->q[(r->head + i) % r->ring];
}

static launch *head(kvf_runner *r) {
    return at(r, 0);
}

static int fully_sent(const launch *l) {
    return l->req.sent == l->req.size;
}

/* The first launch in flight not yet sent whole (the stream is in order, so it is the next to
 * go out), or NULL. */
static launch *first_unsent(kvf_runner *r) {
    for (int i = 0; i < r->count; i++)
        if (!fully_sent(at(r, i))) return at(r, i);
    return NULL;
}

/* The oldest launch whose result is not all in: the one whose deadline counts. */
static launch *first_unanswered(kvf_runner *r) {
    for (int i = 0; i < r->count; i++)
        if (!at(r, i)->done) return at(r, i);
    return NULL;
}

static void launch_reset_result(launch *l) {
    l->hdr_got = 0;
    l->payload_size = l->payload_got = 0;
    l->done = 0;
    memset(&l->res, 0, sizeof l->res);
}

/* Marks when each unanswered launch can have started: the worker answers in order, so a lane is
 * free for a launch once fewer than `lanes` launches before it are unanswered (and once none
 * is, for one sent alone; nothing starts behind an unanswered one sent alone). Counting from
 * here never counts less than the launch really ran. */
static void note_starts(kvf_runner *r) {
    const double now = kvf__wire_now_s();
    int ahead = 0, blocked = 0;
    for (int i = 0; i < r->count && !blocked; i++) {
        launch *l = at(r, i);
        if (l->done) continue;
        const int can = l->alone ? ahead == 0 : ahead < r->lanes;
        if (can && fully_sent(l) && l->start == 0) l->start = now;
        if (l->alone) blocked = 1;
        ahead++;
    }
}

/* The deadline of the oldest unanswered launch, in monotonic seconds (a launch still being
 * sent counts from now). */
static double next_deadline(kvf_runner *r) {
    launch *l = first_unanswered(r);
    const double start = l && l->start > 0 ? l->start : kvf__wire_now_s();
    return start + r->opts.deadline_s;
}

static void reap(kvf_runner *r, int *signal_out, int *exit_out) {
    if (r->pid <= 0) return;
    /* Cleared before the wait so no other thread can signal a recycled pid. */
    atomic_store(&r->live_pid, 0);
    int status = 0;
    /* The worker closed its socket or was killed: it is exiting. Give it two seconds, then
     * make sure. */
    double until = kvf__wire_now_s() + 2.0;
    pid_t got;
    while ((got = waitpid(r->pid, &status, WNOHANG)) == 0 && kvf__wire_now_s() < until) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    if (got == 0) {
        kill(r->pid, SIGKILL);
        waitpid(r->pid, &status, 0);
    }
    if (signal_out) *signal_out = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    if (exit_out) *exit_out = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
    r->pid = 0;
    r->lanes = 1;
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
}

static int start_worker(kvf_runner *r, kvf_error *err) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return kvf_error_set(err, KVF_EIO, "cannot create the worker socket: %s", strerror(errno));
    /* Room for a whole small case in each direction, so a send rarely waits on the worker. */
    int buf = 4 << 20;
    for (int i = 0; i < 2; i++) {
        setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
        setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    }
    fflush(NULL); /* nothing buffered may be written twice */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return kvf_error_set(err, KVF_EIO, "cannot start a worker process: %s", strerror(errno));
    }
    if (pid == 0) {
        close(sv[0]);
        /* Nothing else of the parent's: another runner's socket held here (the fork may come
         * from any dispatcher thread) hides that runner's end of stream from it or its worker. */
        if (sv[1] != 3 && dup2(sv[1], 3) != 3) _exit(127);
        sv[1] = 3;
        if (syscall(SYS_close_range, 4u, ~0u, 0u) != 0)
            for (long fd = 4, n = sysconf(_SC_OPEN_MAX); fd < n; fd++)
                close((int)fd);
        /* Before anything in the worker can initialise CUDA, which reads it once. */
        if (r->cuda_visible_devices[0] &&
            setenv("CUDA_VISIBLE_DEVICES", r->cuda_visible_devices, 1) != 0)
            _exit(127);
        kvf__worker_main(sv[1], &r->opts, parent);
        _exit(0);
    }
    close(sv[1]);
    r->pid = pid;
    atomic_store(&r->live_pid, (int)pid);
    r->fd = sv[0];
    r->starts++;
    kvf__ready_msg ready;
    double deadline = kvf__wire_now_s() + r->opts.start_deadline_s;
    int rc = kvf__wire_recv_all(r->fd, &ready, sizeof ready, deadline);
    if (rc == -2) kill(r->pid, SIGKILL);
    if (rc || ready.magic != KVF__MAGIC_READY) {
        int sig = 0, code = 0;
        reap(r, &sig, &code);
        if (rc == -2)
            return kvf_error_set(err, KVF_EDEVICE, "kernel %s did not start within %.0f s",
                                 r->opts.kernel->name, r->opts.start_deadline_s);
        return kvf_error_set(err, KVF_EDEVICE, "the worker died while starting kernel %s (%s %d)",
                             r->opts.kernel->name, sig ? "signal" : "exit status",
                             sig ? sig : code);
    }
    if (ready.rc) {
        char msg[KVF_ERROR_MSG_MAX] = {0};
        uint32_t n = ready.msglen < sizeof msg - 1 ? ready.msglen : (uint32_t)sizeof msg - 1;
        kvf__wire_recv_all(r->fd, msg, n, deadline);
        reap(r, NULL, NULL);
        return kvf_error_set(err, KVF_EDEVICE, "kernel %s could not start: %s",
                             r->opts.kernel->name, msg);
    }
    r->lanes = ready.lanes >= 1 ? (int)ready.lanes : 1;
    /* Never more than the launch ring was sized for (the worker runs at most what it was
     * asked, or KVF_RUNNER_AUTO_LANES). */
    const int most = r->opts.lanes > 0 ? r->opts.lanes : KVF_RUNNER_AUTO_LANES;
    if (r->lanes > most) r->lanes = most;
    fcntl(r->fd, F_SETFL, fcntl(r->fd, F_GETFL) | O_NONBLOCK);
    return 0;
}

int kvf_runner_create(kvf_runner **out, const kvf_runner_opts *opts, kvf_error *err) {
    kvf_runner *r = calloc(1, sizeof *r);
    if (!r) return kvf_error_set(err, KVF_ENOMEM, "out of memory for the kernel runner");
    r->opts = *opts;
    if (r->opts.deadline_s <= 0) r->opts.deadline_s = 10;
    if (r->opts.start_deadline_s <= 0) r->opts.start_deadline_s = 120;
    /* 0: the worker picks (KVF_RUNNER_AUTO_LANES or 1, runner.h); in-process runs one. */
    if (r->opts.lanes < 1) r->opts.lanes = 0;
    if (r->opts.in_process) r->opts.lanes = 1;
    if (r->opts.lanes > KVF_RUNNER_MAX_LANES) r->opts.lanes = KVF_RUNNER_MAX_LANES;
    r->ring = KVF_RUNNER_WINDOW(r->opts.lanes > 0 ? r->opts.lanes : KVF_RUNNER_AUTO_LANES);
    r->lanes = 1;
    r->fd = -1;
    *out = r;
    return 0;
}

void kvf_runner_set_device(kvf_runner *r, const char *visible) {
    snprintf(r->cuda_visible_devices, sizeof r->cuda_visible_devices, "%s", visible ? visible : "");
}

void kvf_runner_interrupt(kvf_runner *r) {
    atomic_store(&r->interrupted, 1);
    int pid = atomic_load(&r->live_pid);
    if (pid > 0) kill((pid_t)pid, SIGKILL);
}

void kvf_runner_abort(kvf_runner *r) {
    if (r->pid > 0) {
        kill(r->pid, SIGKILL);
        reap(r, NULL, NULL);
    }
    r->head = r->count = 0;
    r->rerun_open = r->alone_left = 0;
}

void kvf_runner_destroy(kvf_runner *r) {
    if (!r) return;
    if (r->pid > 0) {
        /* Closing the socket asks the worker to destroy its kernel and exit. */
        close(r->fd);
        r->fd = -1;
        reap(r, NULL, NULL);
    }
    if (r->created) kvf_kernel_destroy(r->opts.kernel, r->state);
    for (int i = 0; i < RING; i++) {
        kvf__wire_case_free(&r->q[i].req);
        free(r->q[i].payload);
    }
    free(r);
}

int kvf_runner_start(kvf_runner *r, kvf_error *err) {
    if (r->opts.in_process) {
        if (r->created) return 0;
        kvf_error e = {0};
        int rc = kvf_kernel_create(r->opts.kernel, &r->state, &e);
        if (rc)
            return kvf_error_set(err, KVF_EDEVICE, "kernel %s could not start: %s",
                                 r->opts.kernel->name, e.msg);
        r->created = 1;
        return 0;
    }
    return r->pid > 0 ? 0 : start_worker(r, err);
}

int64_t kvf_runner_starts(const kvf_runner *r) {
    return r->starts;
}

int kvf_runner_max_inflight(const kvf_runner *r) {
    const int lanes = r->pid > 0 ? r->lanes : r->opts.lanes;
    return KVF_RUNNER_WINDOW(lanes > 1 ? lanes : 1);
}

int kvf_runner_has_room(const kvf_runner *r) {
    if (r->count >= kvf_runner_max_inflight(r)) return 0;
    if (r->count < 2) return 1;
    size_t bytes = 0;
    for (int i = 0; i < r->count; i++)
        bytes += r->q[(r->head + i) % r->ring].req.size;
    return bytes < KVF_RUNNER_INFLIGHT_BYTES;
}

int kvf_runner_lanes(const kvf_runner *r) {
    return r->lanes;
}

int64_t kvf_runner_reruns(const kvf_runner *r) {
    return r->reruns;
}

int64_t kvf_runner_unrepeated(const kvf_runner *r) {
    return r->unrepeated;
}

double kvf_runner_idle_s(const kvf_runner *r) {
    return r->idle_s;
}

/* Reads every result byte that has arrived, into the launches in order. 0 when no more is
 * waiting, -1 when the worker is gone (end of stream, a malformed reply, a result with no
 * launch to belong to). */
static int read_results(kvf_runner *r) {
    for (;;) {
        launch *l = first_unanswered(r);
        uint8_t probe;
        uint8_t *dst = &probe;
        size_t want = 1; /* nothing is expected: a byte now is a protocol error */
        if (l && l->hdr_got < sizeof l->hdr) {
            dst = (uint8_t *)&l->hdr + l->hdr_got;
            want = sizeof l->hdr - l->hdr_got;
        } else if (l) {
            if (l->payload_size == 0) {
                if (l->hdr.magic != KVF__MAGIC_RESULT) return -1;
                if (l->hdr.rc == 0 &&
                    (l->hdr.n_o != (uint64_t)l->n_o || l->hdr.n_lse != (uint64_t)l->n_lse))
                    return -1;
                l->payload_size =
                    l->hdr.msglen + l->hdr.n_o * sizeof(kvf_bf16) + l->hdr.n_lse * sizeof(float);
                if (l->payload_size > 0 &&
                    kvf__wire_grow((void **)&l->payload, &l->payload_cap, l->payload_size))
                    return -1;
            }
            if (l->payload_got == l->payload_size) {
                l->done = 1;
                note_starts(r);
                continue;
            }
            dst = l->payload + l->payload_got;
            want = l->payload_size - l->payload_got;
        }
        ssize_t got = recv(r->fd, dst, want, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (got <= 0 || !l) return -1;
        if (l->hdr_got < sizeof l->hdr)
            l->hdr_got += (size_t)got;
        else
            l->payload_got += (size_t)got;
    }
}

/* poll() on the worker's socket for at most left seconds (none when left <= 0), its time
 * counted as idle. */
static int timed_poll(kvf_runner *r, struct pollfd *pfd, double left) {
    const double t0 = kvf__wire_now_s();
    if (left <= 0) left = LATE_GRACE_S; /* past the deadline: a pause, not a moment */
    const int pr = poll(pfd, 1, (int)(left * 1000) + 1);
    r->idle_s += kvf__wire_now_s() - t0;
    return pr;
}

/* Sends the rest of launch l, reading results as they come while the socket is full. Returns 0
 * when l is sent, 1 when stop_when_head_done and the head's result is in (l not yet sent
 * whole), -1 when the worker is gone, -2 when the oldest unanswered launch passes its
 * deadline. */
static int send_launch(kvf_runner *r, launch *l, int stop_when_head_done) {
    while (!fully_sent(l)) {
        ssize_t w = kvf__wire_case_send_some(r->fd, &l->req);
        if (w > 0) {
            if (fully_sent(l)) note_starts(r);
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            /* The worker is gone; what it answered before it went is still to be read, so
             * that the launch that was running takes the blame, not one it had answered. */
            (void)read_results(r);
            return -1;
        }
        if (stop_when_head_done && head(r)->done) return 1;
        double left = next_deadline(r) - kvf__wire_now_s();
        struct pollfd pfd = {r->fd, POLLOUT | POLLIN, 0};
        int pr = timed_poll(r, &pfd, left);
        if (pr < 0 && errno == EINTR) continue;
        if (pr < 0) return -1;
        if (pr == 0) return -2;
        if ((pfd.revents & (POLLERR | POLLHUP)) && !(pfd.revents & POLLIN)) {
            (void)read_results(r);
            return -1;
        }
        if ((pfd.revents & POLLIN) && read_results(r) < 0) return -1;
    }
    return 0;
}

/* Sends every launch in flight not yet sent whole, in order (the stream is in order, so each
 * goes out whole before the next). 0, or send_launch's failure for the first that did not. */
static int send_pending(kvf_runner *r) {
    launch *l;
    while ((l = first_unsent(r))) {
        int rc = send_launch(r, l, 0);
        if (rc) return rc;
    }
    return 0;
}

/* Puts the launches a dead worker never answered back, in order, in front of a fresh worker.
 * 0, or -1 when no worker can be started or the first of them cannot be sent (they then fail
 * as kernel errors). */
static int restart_and_resend(kvf_runner *r, kvf_error *err) {
    if (r->count == 0) return 0;
    int rc = start_worker(r, err);
    if (rc) return -1;
    for (int i = 0; i < r->count; i++) {
        launch *l = at(r, i);
        launch_reset_result(l);
        kvf__wire_case_rewind(&l->req);
        l->start = 0;
    }
    if (send_launch(r, head(r), 0) != 0) {
        /* No part-sent message may stay in front of the next one. */
        if (r->pid > 0) kill(r->pid, SIGKILL);
        reap(r, NULL, NULL);
        return -1;
    }
    (void)send_pending(r); /* a failure behind the head is the head's, found at its collect */
    return 0;
}

static void mark_alone(launch *l) {
    l->alone = 1;
    kvf__wire_case_add_flags(l->req.head, KVF__CASE_ALONE);
}

/* One launch of c; graph != 0: as the graph-replay relation's run with `seed`. */
static int submit_launch(kvf_runner *r, const kvf_case *c, int graph, uint64_t seed,
                         kvf_error *err) {
    if (r->count >= kvf_runner_max_inflight(r))
        return kvf_error_set(err, KVF_EINVAL, "%d launches are already in flight", r->count);
    launch *l = at(r, r->count);
    launch_reset_result(l);
    l->n_o = kvf_case_o_elems(c);
    l->n_lse = kvf_case_lse_elems(c);
    l->start = 0;
    l->alone = l->rerun = 0;
    if (r->opts.in_process) {
        kvf_run_result *res = &l->res;
        kvf_error e = {0};
        if (!r->created) {
            int rc = kvf_kernel_create(r->opts.kernel, &r->state, &e);
            if (rc)
                return kvf_error_set(err, KVF_EDEVICE, "kernel %s could not start: %s",
                                     r->opts.kernel->name, e.msg);
            r->created = 1;
        }
        size_t need = lse_offset(l->n_o) + (size_t)(l->n_lse + 1) * 4;
        if (kvf__wire_grow((void **)&l->payload, &l->payload_cap, need))
            return kvf_error_set(err, KVF_ENOMEM, "out of memory for kernel outputs");
        kvf_bf16 *o = (kvf_bf16 *)l->payload;
        float *lse = (float *)(l->payload + lse_offset(l->n_o));
        double t0 = kvf__wire_now_s();
        int rc = graph ? kvf_kernel_graph_relation_run(r->opts.kernel, r->state, c, seed,
                                                       &r->opts.limits, o, lse, &e)
                       : kvf_kernel_run(r->opts.kernel, r->state, c, o, lse, &e);
        res->kernel_s = kvf__wire_now_s() - t0;
        res->status = kvf_run_status_from_code(rc);
        if (rc) snprintf(res->message, sizeof res->message, "%s", e.msg);
        if (!rc) kvf_kernel_describe(r->opts.kernel, r->state, res->plan, sizeof res->plan);
        r->count++;
        return 0;
    }
    if (kvf__wire_case_message(&l->req, c, ++r->seq))
        return kvf_error_set(err, KVF_ENOMEM, "out of memory for a case message");
    if (graph) {
        kvf__wire_case_set_graph(l->req.head, seed);
        l->alone = 1;
    } else if (r->rerun_open > 0 || r->alone_left > 0) {
        mark_alone(l);
        if (r->rerun_open == 0) r->alone_left--;
    }
    if (r->pid <= 0) {
        int rc = start_worker(r, err);
        if (rc) return rc;
    }
    r->count++;
    if (r->count == 1) {
        if (send_launch(r, l, 0) == -1) {
            /* The worker went away between launches (it exits after a kernel error): again
             * with a fresh one. */
            reap(r, NULL, NULL);
            if (restart_and_resend(r, err)) {
                r->count--;
                return err && err->code
                           ? err->code
                           : kvf_error_set(err, KVF_EIO, "cannot send a case to the worker");
            }
        }
        return 0;
    }
    /* Behind other launches. A failure here is an earlier launch's, and is reported when that
     * is collected (which then sends the launches behind it to a fresh worker). */
    (void)send_pending(r);
    return 0;
}

int kvf_runner_submit(kvf_runner *r, const kvf_case *c, kvf_error *err) {
    return submit_launch(r, c, 0, 0, err);
}

int kvf_runner_submit_relation(kvf_runner *r, const kvf_case *c, const kvf_relation_pair *p,
                               kvf_error *err) {
    if (kvf_relation_is_replay(p->relation)) return submit_launch(r, c, 1, p->seed, err);
    return submit_launch(r, &p->derived, 0, 0, err);
}

int kvf_runner_run_relation(kvf_runner *r, const kvf_case *c, const kvf_relation_pair *p,
                            kvf_bf16 *o, float *lse, kvf_run_result *res, kvf_error *err) {
    int rc = kvf_runner_submit_relation(r, c, p, err);
    if (rc) return rc;
    kvf_runner_collect(r, o, lse, res);
    return 0;
}

/* The head launch failed and took the worker with it: the ones behind it were never run. */
static void settle_tail(kvf_runner *r) {
    if (r->count == 0) return;
    kvf_error e = {0};
    if (atomic_load(&r->interrupted)) kvf_error_set(&e, KVF_EINTR, "the campaign was interrupted");
    if (e.code || restart_and_resend(r, &e)) {
        for (int i = 0; i < r->count; i++) {
            launch *l = at(r, i);
            l->res.status = KVF_RUN_KERNEL_ERROR;
            snprintf(l->res.message, sizeof l->res.message, "no worker to run the case: %.300s",
                     e.msg);
            l->hdr.magic = 0; /* marks "failed before it ran" for collect */
            l->hdr_got = 0;
            l->start = -1;
            l->done = 1;               /* no result of it is read ... */
            l->req.sent = l->req.size; /* ... and it is sent to no later worker */
        }
    }
}

/* A failure of the head while other launches may have run beside it: every launch in flight
 * goes to a fresh worker again, each alone. 0 when they were sent, -1 when no worker could
 * take them (the failure is then reported as it is). */
static int rerun_alone(kvf_runner *r) {
    if (r->pid > 0) kill(r->pid, SIGKILL);
    reap(r, NULL, NULL);
    r->reruns++;
    r->rerun_failed = 0;
    r->rerun_open = r->count;
    for (int i = 0; i < r->count; i++) {
        mark_alone(at(r, i));
        at(r, i)->rerun = 1;
    }
    kvf_error e = {0};
    if (restart_and_resend(r, &e) == 0) return 0;
    r->rerun_open = 0;
    return -1;
}

/* The head's collection is final: pops it and closes the books of a re-run it was part of. */
static void pop_head(kvf_runner *r, int failed) {
    launch *l = head(r);
    if (l->rerun && r->rerun_open > 0) {
        if (failed) r->rerun_failed = 1;
        if (--r->rerun_open == 0) {
            if (!r->rerun_failed) r->unrepeated++;
            r->alone_left = RING;
        }
    }
    r->head = (r->head + 1) % r->ring;
    r->count--;
}

void kvf_runner_collect(kvf_runner *r, kvf_bf16 *o, float *lse, kvf_run_result *res) {
    memset(res, 0, sizeof *res);
    if (r->count == 0) {
        res->status = KVF_RUN_KERNEL_ERROR;
        snprintf(res->message, sizeof res->message, "no launch was in flight");
        return;
    }
    launch *l = head(r);
    if (r->opts.in_process) {
        *res = l->res;
        if (res->status == KVF_RUN_OK) {
            if (l->n_o) memcpy(o, l->payload, (size_t)l->n_o * sizeof *o);
            if (l->n_lse)
                memcpy(lse, l->payload + lse_offset(l->n_o), (size_t)l->n_lse * sizeof *lse);
        }
        pop_head(r, res->status != KVF_RUN_OK);
        return;
    }
    if (l->start < 0) { /* could not be restarted after the previous launch's failure */
        *res = l->res;
        pop_head(r, 1);
        return;
    }
    int state; /* 1 complete, -1 worker gone, -2 past the deadline */
    for (;;) {
        state = 0;
        while (state == 0) {
            if (l->done) {
                state = 1;
                break;
            }
            /* A failure found while reading or sending is this launch's only if its own result
             * is not in: the worker may have died after answering it. */
            launch *t = first_unsent(r);
            if (t) {
                int sr = send_launch(r, t, t != l); /* keeps reading results meanwhile */
                if (sr < 0 && !l->done) state = sr;
                continue;
            }
            double left = next_deadline(r) - kvf__wire_now_s();
            struct pollfd pfd = {r->fd, POLLIN, 0};
            /* Past the deadline, data already waiting still counts: the caller may simply
             * have come back late. */
            int pr = timed_poll(r, &pfd, left);
            if (pr < 0 && errno == EINTR) continue;
            if ((pr < 0 || (pr > 0 && read_results(r) < 0)) && !l->done) state = -1;
            if (pr == 0) state = -2;
        }
        const int failed = state < 0 || (l->hdr.rc != 0 && l->hdr.exiting);
        /* With several lanes, whose failure it was is not known yet: everything in flight runs
         * again alone, and this launch's result is the one it gets alone. */
        if (failed && r->lanes > 1 && !l->alone && !atomic_load(&r->interrupted) &&
            rerun_alone(r) == 0)
            continue;
        break;
    }
    if (state == -2) {
        if (r->pid > 0) kill(r->pid, SIGKILL);
        reap(r, NULL, NULL);
        pop_head(r, 1);
        res->status = KVF_RUN_HANG;
        snprintf(res->message, sizeof res->message,
                 "the launch did not finish within its %.3g s deadline; the worker was killed",
                 r->opts.deadline_s);
        settle_tail(r);
        return;
    }
    if (state == -1) {
        reap(r, &res->signal, &res->exit_code);
        pop_head(r, 1);
        res->status = KVF_RUN_CRASH;
        if (res->signal)
            snprintf(res->message, sizeof res->message, "the worker was killed by signal %d (%s)",
                     res->signal, strsignal(res->signal));
        else
            snprintf(res->message, sizeof res->message,
                     "the worker exited with status %d during the launch", res->exit_code);
        settle_tail(r);
        return;
    }
    const kvf__result_msg *m = &l->hdr;
    res->kernel_s = m->kernel_s;
    if (m->rc == 0) {
        res->status = KVF_RUN_OK;
        uint32_t n = m->msglen < sizeof res->plan - 1 ? m->msglen : (uint32_t)sizeof res->plan - 1;
        if (n) memcpy(res->plan, l->payload, n);
        res->plan[n] = 0;
        const uint8_t *data = l->payload + m->msglen;
        if (m->n_o) memcpy(o, data, (size_t)m->n_o * sizeof *o);
        if (m->n_lse) memcpy(lse, data + m->n_o * sizeof(kvf_bf16), (size_t)m->n_lse * sizeof *lse);
    } else {
        res->status = kvf_run_status_from_code(m->rc);
        uint32_t n =
            m->msglen < sizeof res->message - 1 ? m->msglen : (uint32_t)sizeof res->message - 1;
        if (n) memcpy(res->message, l->payload, n);
        res->message[n] = 0;
    }
    const int exiting = m->exiting;
    pop_head(r, m->rc != 0 && exiting);
    if (exiting) {
        /* The worker leaves after a kernel error; anything sent behind it goes to a new one. */
        reap(r, NULL, NULL);
        settle_tail(r);
    }
}

int kvf_runner_run(kvf_runner *r, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_run_result *res,
                   kvf_error *err) {
    int rc = kvf_runner_submit(r, c, err);
    if (rc) return rc;
    kvf_runner_collect(r, o, lse, res);
    return 0;
}

int kvf_runner_probe_cuda(char *why, size_t why_size) {
    int p[2];
    if (pipe(p) != 0) {
        if (why && why_size) snprintf(why, why_size, "cannot create a pipe: %s", strerror(errno));
        return 0;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        char buf[512] = {0};
        int ok = kvf_cuda_available(buf + 1, sizeof buf - 1);
        buf[0] = ok ? '1' : '0';
        ssize_t w = write(p[1], buf, sizeof buf);
        (void)w;
        _exit(0);
    }
    close(p[1]);
    char buf[512] = {0};
    ssize_t got = pid > 0 ? read(p[0], buf, sizeof buf) : -1;
    close(p[0]);
    if (pid > 0) waitpid(pid, NULL, 0);
    if (got <= 0) {
        if (why && why_size) snprintf(why, why_size, "the CUDA probe process failed");
        return 0;
    }
    buf[sizeof buf - 1] = 0;
    if (buf[0] == '1') return 1;
    if (why && why_size) snprintf(why, why_size, "%s", buf + 1);
    return 0;
}
