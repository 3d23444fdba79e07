/* The kernel worker process (runner.h).
 *
 * Protocol over one AF_UNIX stream socket, host byte order (both ends are the same binary):
 *   worker -> parent, once: ready  {magic, rc, msglen} msg
 *   parent -> worker:       case   {magic, seq, shape...} indptr, indices, last_page_len, q,
 *                                  resident page ids, then each resident page's k and v
 *   worker -> parent:       result {magic, rc, seq, n_o, n_lse, kernel_s, msglen, exiting}
 *                                  msg, o (n_o bf16), lse (n_lse f32); msg is the error for a
 *                                  failed run and the kernel's plan facts for one that worked
 * The case travels as tensors (only the pages that hold data) rather than as .kvfz bytes to be
 * expanded again: copying a small case costs microseconds, generating it a fraction of a
 * millisecond, and the worker is on the critical path of every launch. */
#include "kvfuzz/runner.h"
#include "kvfuzz/env.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define MAGIC_READY 0x4B565244u  /* "KVRD" */
#define MAGIC_CASE 0x4B565243u   /* "KVRC" */
#define MAGIC_RESULT 0x4B565252u /* "KVRR" */

typedef struct ready_msg {
    uint32_t magic;
    int32_t rc;
    uint32_t msglen;
} ready_msg;

typedef struct case_msg {
    uint32_t magic;
    int32_t num_qo_heads, num_kv_heads, head_dim, page_size, batch_size;
    float sm_scale;
    uint32_t pad;
    uint64_t seq;
    int64_t num_pages, entries, num_resident;
} case_msg;

typedef struct result_msg {
    uint32_t magic;
    int32_t rc;
    uint64_t seq;
    uint64_t n_o, n_lse;
    double kernel_s;
    uint32_t msglen;
    uint32_t exiting;
} result_msg;

#define MAX_INFLIGHT KVF_RUNNER_MAX_INFLIGHT

/* One launch: the serialized case (kept until its result is in, so a launch lost with a dead
 * worker can be sent again) and its result as it arrives. */
typedef struct launch {
    uint8_t *req;
    size_t req_size, req_sent, req_cap;
    int64_t n_o, n_lse;
    double start; /* when the worker began it; 0 while it waits behind another */
    result_msg hdr;
    size_t hdr_got;
    uint8_t *payload; /* msg, o, lse */
    size_t payload_size, payload_got, payload_cap;
    kvf_run_result res; /* in-process mode: the finished result */
} launch;

struct kvf_runner {
    kvf_runner_opts opts;
    pid_t pid;
    atomic_int live_pid; /* pid for kvf_runner_interrupt from another thread; 0 when none */
    int fd;
    int64_t starts;
    uint64_t seq;
    launch q[MAX_INFLIGHT]; /* FIFO: q[head] runs, the ones behind wait in the worker's reader
                               and in the socket */
    int head, count;
    /* in-process mode */
    void *state;
    int created;
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int send_all(int fd, const void *data, size_t size) {
    const uint8_t *p = data;
    while (size) {
        ssize_t w = send(fd, p, size, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        size -= (size_t)w;
    }
    return 0;
}

/* 0 done, -1 end of stream or error, -2 deadline passed. deadline < 0: wait forever. */
static int recv_all(int fd, void *data, size_t size, double deadline) {
    uint8_t *p = data;
    while (size) {
        if (deadline >= 0) {
            /* Past the deadline, data already waiting still counts: the caller may simply
             * have come back late. */
            double left = deadline - now_s();
            struct pollfd pfd = {fd, POLLIN, 0};
            int pr = poll(&pfd, 1, left > 0 ? (int)(left * 1000) + 1 : 0);
            if (pr < 0 && errno == EINTR) continue;
            if (pr < 0) return -1;
            if (pr == 0) return -2;
        }
        ssize_t got = recv(fd, p, size, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        p += got;
        size -= (size_t)got;
    }
    return 0;
}

static int grow(void **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    void *nb = realloc(*buf, need);
    if (!nb) return -1;
    *buf = nb;
    *cap = need;
    return 0;
}

/* Sends (sending != 0) or receives exactly the bytes the iovecs describe, blocking, at most
 * IOV_MAX iovecs per call; short transfers resume where they stopped. 0 done, -1 end of stream
 * or error. The iovecs are consumed. */
static int transfer_iov(int fd, struct iovec *iov, int n, int sending) {
    const long most = sysconf(_SC_IOV_MAX) > 0 ? sysconf(_SC_IOV_MAX) : 16;
    while (n > 0) {
        if (iov->iov_len == 0) {
            iov++, n--;
            continue;
        }
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = iov;
        mh.msg_iovlen = (size_t)(n < most ? n : most);
        ssize_t done = sending ? sendmsg(fd, &mh, MSG_NOSIGNAL) : recvmsg(fd, &mh, MSG_WAITALL);
        if (done < 0 && errno == EINTR) continue;
        if (done < 0 || (done == 0 && !sending)) return -1;
        while (done > 0) {
            size_t take = (size_t)done < iov->iov_len ? (size_t)done : iov->iov_len;
            iov->iov_base = (uint8_t *)iov->iov_base + take;
            iov->iov_len -= take;
            done -= (ssize_t)take;
            if (iov->iov_len == 0) iov++, n--;
        }
    }
    return 0;
}

/* ---- the worker ----------------------------------------------------------------------------- */

static void worker_reply(int fd, int32_t rc, uint64_t seq, const kvf_error *err, const char *plan,
                         int64_t n_o, int64_t n_lse, const kvf_bf16 *o, const float *lse,
                         double kernel_s, int exiting) {
    result_msg m = {MAGIC_RESULT, rc, seq, 0, 0, kernel_s, 0, (uint32_t)exiting};
    const char *text = rc == 0 ? (plan ? plan : "") : err->msg;
    m.msglen = (uint32_t)strlen(text);
    if (rc == 0) {
        m.n_o = (uint64_t)n_o;
        m.n_lse = (uint64_t)n_lse;
    }
    /* One sendmsg for the four parts. */
    struct iovec iov[4] = {{&m, sizeof m},
                           {(void *)text, m.msglen},
                           {(void *)o, m.n_o * sizeof *o},
                           {(void *)lse, m.n_lse * sizeof *lse}};
    if (transfer_iov(fd, iov, 4, 1)) _exit(3);
}

/* The worker runs two threads. A reader receives the next case (allocates its pools, takes its
 * pages off the socket) while the kernel thread runs the current one: receiving a case costs
 * about as much host time as a small launch, and done one after the other they left the device
 * idle for half of every case. The parent keeps the next case in the socket, so the reader
 * always has work; the kernel thread still runs and answers cases strictly in order, so the
 * parent's bookkeeping (the head launch is the running one) is unchanged. */

enum { CASE_NONE, CASE_READY, CASE_END, CASE_UNHOLDABLE };

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

typedef struct received_case {
    int kind; /* CASE_*: a case to run, the end of the stream, or a case that could not be held */
    uint64_t seq;
    kvf_case c;
    kvf_error err;                   /* CASE_UNHOLDABLE: why */
    double wait_parent_s, receive_s; /* KVF_WORKER_TIMING: blocked on the socket, then taking
                                        the case in */
} received_case;

typedef struct worker_pipe {
    int fd;
    const kvf_runner_opts *opts;
    pthread_mutex_t mu;
    pthread_cond_t changed;
    received_case next; /* handed from the reader to the kernel thread; kind CASE_NONE: empty */
    kvf_case finished;  /* a case the kernel thread is done with, for the reader to free */
    int have_finished;
    /* KVF_WORKER_TIMING: where the reader's time went, added under mu as each case is posted. */
    double reader_wait_parent_s, reader_receive_s, reader_wait_slot_s;
} worker_pipe;

/* Receives one case into rc (kind CASE_READY), or sets kind CASE_END (stream closed or not a
 * case) or CASE_UNHOLDABLE. Exits the process on a message that contradicts itself. */
static void receive_case(worker_pipe *wp, received_case *rc) {
    const int fd = wp->fd;
    case_msg m;
    memset(rc, 0, sizeof *rc);
    rc->kind = CASE_END;
    const double t0 = now_s();
    const int got = recv_all(fd, &m, sizeof m, -1);
    const double t1 = now_s();
    rc->wait_parent_s = t1 - t0;
    if (got || m.magic != MAGIC_CASE) return;
    rc->seq = m.seq;
    kvf_case *c = &rc->c;
    /* Fresh pools for every case (mapped lazily, zero until written), so nothing a kernel
     * does to its input can reach the next case. */
    if (kvf_case_alloc(c, m.num_qo_heads, m.num_kv_heads, m.head_dim, m.page_size, m.batch_size,
                       m.entries, m.num_pages, &wp->opts->limits, &rc->err)) {
        rc->kind = CASE_UNHOLDABLE;
        return;
    }
    c->sm_scale = m.sm_scale;
    const int64_t pe = kvf_case_page_elems(c);
    /* The rest of the message in two vectored reads straight into place: the tables, q and the
     * resident page ids, then every page (a recv per array and per page was a large part of
     * the worker's time per case). */
    const size_t page_bytes = (size_t)pe * sizeof(kvf_bf16);
    int64_t *resident = malloc((size_t)(m.num_resident + 1) * sizeof *resident);
    struct iovec *iov = malloc((size_t)(2 * m.num_resident + 5) * sizeof *iov);
    if (!resident || !iov) _exit(4);
    struct iovec head[5] = {
        {c->kv_indptr, ((size_t)m.batch_size + 1) * sizeof *c->kv_indptr},
        {c->kv_indices, (size_t)m.entries * sizeof *c->kv_indices},
        {c->kv_last_page_len, (size_t)m.batch_size * sizeof *c->kv_last_page_len},
        {c->q, (size_t)kvf_case_q_elems(c) * sizeof *c->q},
        {resident, (size_t)m.num_resident * sizeof *resident}};
    memcpy(iov, head, sizeof head);
    int bad = transfer_iov(fd, iov, 5, 0);
    for (int64_t i = 0; !bad && i < m.num_resident; i++) {
        if (resident[i] < 0 || resident[i] >= c->num_pages) _exit(5);
        iov[2 * i] = (struct iovec){c->k_cache + resident[i] * pe, page_bytes};
        iov[2 * i + 1] = (struct iovec){c->v_cache + resident[i] * pe, page_bytes};
    }
    if (!bad) bad = transfer_iov(fd, iov, (int)(2 * m.num_resident), 0);
    free(iov);
    if (!bad && kvf_case_set_resident(c, resident, m.num_resident, NULL)) _exit(4);
    free(resident);
    rc->receive_s = now_s() - t1;
    if (bad) {
        kvf_case_free(c);
        return;
    }
    rc->kind = CASE_READY;
}

static void *reader_main(void *arg) {
    worker_pipe *wp = arg;
    for (;;) {
        received_case rc;
        receive_case(wp, &rc);
        const double t0 = now_s();
        pthread_mutex_lock(&wp->mu);
        while (wp->next.kind != CASE_NONE) {
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
        wp->reader_wait_slot_s += now_s() - t0;
        pthread_cond_broadcast(&wp->changed);
        /* Posted first, freed after: the kernel thread may be waiting for this case. */
        kvf_case done;
        const int have_done = wp->have_finished;
        if (have_done) done = wp->finished, wp->have_finished = 0;
        pthread_mutex_unlock(&wp->mu);
        if (have_done) kvf_case_free(&done);
        if (rc.kind != CASE_READY) return NULL;
    }
}

static void worker_main(int fd, const kvf_runner_opts *opts, pid_t parent) {
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
    ready_msg ready = {MAGIC_READY, rc, rc ? (uint32_t)strlen(err.msg) : 0};
    if (send_all(fd, &ready, sizeof ready) || (ready.msglen && send_all(fd, err.msg, ready.msglen)))
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
    double wait_case_s = 0, run_s = 0, reply_s = 0, next_report = now_s() + 5;
    int64_t cases = 0;
    for (;;) {
        received_case cur;
        const double t_wait = now_s();
        if (WORKER_READER_THREAD) {
            pthread_mutex_lock(&wp.mu);
            while (wp.next.kind == CASE_NONE)
                pthread_cond_wait(&wp.changed, &wp.mu);
            cur = wp.next;
            wp.next.kind = CASE_NONE;
            pthread_cond_broadcast(&wp.changed);
            pthread_mutex_unlock(&wp.mu);
        } else {
            receive_case(&wp, &cur);
            wp.reader_wait_parent_s += cur.wait_parent_s;
            wp.reader_receive_s += cur.receive_s;
        }
        wait_case_s += now_s() - t_wait;
        if (cur.kind == CASE_END) break;
        if (cur.kind == CASE_UNHOLDABLE) {
            /* The parent built this very case; failing here means the worker is unwell. */
            kvf_error e2;
            kvf_error_set(&e2, KVF_EIO, "the worker could not hold the case: %s", cur.err.msg);
            worker_reply(fd, KVF_EIO, cur.seq, &e2, NULL, 0, 0, NULL, NULL, 0, 1);
            break;
        }
        kvf_case *c = &cur.c;
        int64_t n_o = kvf_case_o_elems(c), n_lse = kvf_case_lse_elems(c);
        if (grow((void **)&out_o, &out_o_cap, (size_t)(n_o + 1) * sizeof *out_o) ||
            grow((void **)&out_lse, &out_lse_cap, (size_t)(n_lse + 1) * sizeof *out_lse))
            _exit(4);
        kvf_error_clear(&err);
        double t0 = now_s();
        rc = kvf_kernel_run(k, state, c, out_o, out_lse, &err);
        double t1 = now_s();
        /* After an error other than "unsupported" the kernel's state (a CUDA context with a
         * sticky error) is not trusted: answer, then let a fresh worker take over. */
        int exiting = rc != 0 && rc != KVF_EUNSUPPORTED;
        char plan[KVF_RUN_PLAN_MAX] = "";
        if (rc == 0) kvf_kernel_describe(k, state, plan, sizeof plan);
        worker_reply(fd, rc, cur.seq, &err, plan, n_o, n_lse, out_o, out_lse, t1 - t0, exiting);
        run_s += t1 - t0;
        reply_s += now_s() - t1;
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

/* ---- the parent side ------------------------------------------------------------------------
 *
 * Up to MAX_INFLIGHT launches are in flight: while the worker runs one, its reader takes in the
 * next and the one after waits in the socket, so neither the worker's receiving nor this side's
 * turnaround between a result and the next send stands between two launches. The parent end
 * of the socket is non-blocking and every wait is a poll() on both directions, so the parent
 * keeps draining a result while it sends and neither side can block the other. */

/* The i-th launch in flight, 0 being the one the worker runs (the head). */
static launch *at(kvf_runner *r, int i) {
    return &r->q[(r->head + i) % MAX_INFLIGHT];
}

static launch *head(kvf_runner *r) {
    return at(r, 0);
}

static int fully_sent(const launch *l) {
    return l->req_sent == l->req_size;
}

/* The first launch behind the head not yet sent whole (the stream is in order, so it is the
 * next to go out), or NULL. */
static launch *first_unsent_behind_head(kvf_runner *r) {
    for (int i = 1; i < r->count; i++)
        if (!fully_sent(at(r, i))) return at(r, i);
    return NULL;
}

static void launch_reset_result(launch *l) {
    l->hdr_got = 0;
    l->payload_size = l->payload_got = 0;
    memset(&l->res, 0, sizeof l->res);
}

static void reap(kvf_runner *r, int *signal_out, int *exit_out) {
    if (r->pid <= 0) return;
    /* Cleared before the wait so no other thread can signal a recycled pid. */
    atomic_store(&r->live_pid, 0);
    int status = 0;
    /* The worker closed its socket or was killed: it is exiting. Give it two seconds, then
     * make sure. */
    double until = now_s() + 2.0;
    pid_t got;
    while ((got = waitpid(r->pid, &status, WNOHANG)) == 0 && now_s() < until) {
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
        worker_main(sv[1], &r->opts, parent);
        _exit(0);
    }
    close(sv[1]);
    r->pid = pid;
    atomic_store(&r->live_pid, (int)pid);
    r->fd = sv[0];
    r->starts++;
    ready_msg ready;
    double deadline = now_s() + r->opts.start_deadline_s;
    int rc = recv_all(r->fd, &ready, sizeof ready, deadline);
    if (rc == -2) kill(r->pid, SIGKILL);
    if (rc || ready.magic != MAGIC_READY) {
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
        recv_all(r->fd, msg, n, deadline);
        reap(r, NULL, NULL);
        return kvf_error_set(err, KVF_EDEVICE, "kernel %s could not start: %s",
                             r->opts.kernel->name, msg);
    }
    fcntl(r->fd, F_SETFL, fcntl(r->fd, F_GETFL) | O_NONBLOCK);
    return 0;
}

int kvf_runner_create(kvf_runner **out, const kvf_runner_opts *opts, kvf_error *err) {
    kvf_runner *r = calloc(1, sizeof *r);
    if (!r) return kvf_error_set(err, KVF_ENOMEM, "out of memory for the kernel runner");
    r->opts = *opts;
    if (r->opts.deadline_s <= 0) r->opts.deadline_s = 10;
    if (r->opts.start_deadline_s <= 0) r->opts.start_deadline_s = 120;
    r->fd = -1;
    *out = r;
    return 0;
}

void kvf_runner_interrupt(kvf_runner *r) {
    int pid = atomic_load(&r->live_pid);
    if (pid > 0) kill((pid_t)pid, SIGKILL);
}

void kvf_runner_abort(kvf_runner *r) {
    if (r->pid > 0) {
        kill(r->pid, SIGKILL);
        reap(r, NULL, NULL);
    }
    r->head = r->count = 0;
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
    for (int i = 0; i < MAX_INFLIGHT; i++) {
        free(r->q[i].req);
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

/* The case as one message: header, table, q, resident page ids, then the k and v of each
 * resident page. Only pages that hold data travel; the rest reads as zero on both sides. */
static int serialize_case(launch *l, const kvf_case *c, uint64_t seq) {
    int64_t entries = c->kv_indptr[c->batch_size], pe = kvf_case_page_elems(c);
    size_t parts[6] = {sizeof(case_msg),
                       ((size_t)c->batch_size + 1) * sizeof *c->kv_indptr,
                       (size_t)entries * sizeof *c->kv_indices,
                       (size_t)c->batch_size * sizeof *c->kv_last_page_len,
                       (size_t)kvf_case_q_elems(c) * sizeof *c->q,
                       (size_t)c->num_resident_pages * sizeof(int64_t)};
    size_t page_bytes = (size_t)pe * sizeof(kvf_bf16);
    size_t total = 2 * page_bytes * (size_t)c->num_resident_pages;
    for (int i = 0; i < 6; i++)
        total += parts[i];
    /* Grown, never shrunk: a realloc per launch of a buffer past malloc's mmap threshold maps
     * and unmaps memory each time, and unmapping in this many-threaded process interrupts
     * every core that runs one of its threads. */
    if (total > l->req_cap && grow((void **)&l->req, &l->req_cap, total + total / 2 + 1)) return -1;
    uint8_t *buf = l->req;
    case_msg m = {MAGIC_CASE,   c->num_qo_heads, c->num_kv_heads, c->head_dim,
                  c->page_size, c->batch_size,   c->sm_scale,     0,
                  seq,          c->num_pages,    entries,         c->num_resident_pages};
    const void *src[6] = {&m,   c->kv_indptr,     c->kv_indices, c->kv_last_page_len,
                          c->q, c->resident_pages};
    size_t off = 0;
    for (int i = 0; i < 6; i++) {
        memcpy(buf + off, src[i], parts[i]);
        off += parts[i];
    }
    for (int64_t i = 0; i < c->num_resident_pages; i++) {
        int64_t p = c->resident_pages[i];
        memcpy(buf + off, c->k_cache + p * pe, page_bytes);
        memcpy(buf + off + page_bytes, c->v_cache + p * pe, page_bytes);
        off += 2 * page_bytes;
    }
    l->req_size = total;
    l->req_sent = 0;
    return 0;
}

/* Reads what has arrived of the head launch's result. 1 when it is complete, 0 when more is
 * to come, -1 when the worker is gone (end of stream or a malformed reply). */
static int read_progress(kvf_runner *r) {
    launch *l = head(r);
    for (;;) {
        uint8_t *dst;
        size_t want;
        if (l->hdr_got < sizeof l->hdr) {
            dst = (uint8_t *)&l->hdr + l->hdr_got;
            want = sizeof l->hdr - l->hdr_got;
        } else {
            if (l->payload_size == 0) {
                if (l->hdr.magic != MAGIC_RESULT) return -1;
                if (l->hdr.rc == 0 &&
                    (l->hdr.n_o != (uint64_t)l->n_o || l->hdr.n_lse != (uint64_t)l->n_lse))
                    return -1;
                l->payload_size =
                    l->hdr.msglen + l->hdr.n_o * sizeof(kvf_bf16) + l->hdr.n_lse * sizeof(float);
                if (l->payload_size == 0) return 1;
                if (grow((void **)&l->payload, &l->payload_cap, l->payload_size)) return -1;
            }
            if (l->payload_got == l->payload_size) return 1;
            dst = l->payload + l->payload_got;
            want = l->payload_size - l->payload_got;
        }
        ssize_t got = recv(r->fd, dst, want, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (got <= 0) return -1;
        if (l->hdr_got < sizeof l->hdr)
            l->hdr_got += (size_t)got;
        else
            l->payload_got += (size_t)got;
    }
}

static int head_complete(kvf_runner *r) {
    const launch *l = head(r);
    return l->hdr_got == sizeof l->hdr && l->hdr.magic == MAGIC_RESULT &&
           l->payload_got ==
               l->hdr.msglen + l->hdr.n_o * sizeof(kvf_bf16) + l->hdr.n_lse * sizeof(float);
}

/* Sends the rest of launch l. While the socket is full (the worker busy with the head), reads
 * the head's result as it comes. Returns 0 when l is sent, 1 when stop_on_head and the head's
 * result is complete (l not yet sent), -1 when the worker is gone, -2 when the launch the
 * worker is running passes its deadline. */
static int send_launch(kvf_runner *r, launch *l, int stop_on_head) {
    while (l->req_sent < l->req_size) {
        ssize_t w = send(r->fd, l->req + l->req_sent, l->req_size - l->req_sent, MSG_NOSIGNAL);
        if (w > 0) {
            l->req_sent += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        launch *h = head(r);
        int behind = h != l && !head_complete(r);
        if (stop_on_head && h != l && !behind) return 1;
        /* With the head's result in, the worker has moved on to the launch behind it. */
        launch *running = h == l || behind ? h : at(r, 1);
        if (running->start <= 0) running->start = now_s();
        double left = running->start + r->opts.deadline_s - now_s();
        struct pollfd pfd = {r->fd, (short)(POLLOUT | (behind ? POLLIN : 0)), 0};
        int pr = poll(&pfd, 1, left > 0 ? (int)(left * 1000) + 1 : 0);
        if (pr < 0 && errno == EINTR) continue;
        if (pr < 0) return -1;
        if (pr == 0) return -2;
        if ((pfd.revents & (POLLERR | POLLHUP)) && !(pfd.revents & POLLIN)) return -1;
        if (behind && (pfd.revents & POLLIN)) {
            int p = read_progress(r);
            if (p < 0) return -1;
            if (p == 1) at(r, 1)->start = now_s(); /* the worker moves on */
        }
    }
    return 0;
}

/* Sends every launch in flight not yet sent whole, in order (the stream is in order, so each
 * goes out whole before the next). 0, or send_launch's failure for the first that did not. */
static int send_pending(kvf_runner *r) {
    for (int i = 0; i < r->count; i++) {
        if (fully_sent(at(r, i))) continue;
        int rc = send_launch(r, at(r, i), 0);
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
        l->req_sent = 0;
        l->start = i == 0 ? now_s() : 0;
    }
    if (send_launch(r, head(r), 0) != 0) return -1;
    (void)send_pending(r); /* a failure behind the head is the head's, found at its collect */
    return 0;
}

int kvf_runner_submit(kvf_runner *r, const kvf_case *c, kvf_error *err) {
    if (r->count == MAX_INFLIGHT)
        return kvf_error_set(err, KVF_EINVAL, "%d launches are already in flight", MAX_INFLIGHT);
    launch *l = at(r, r->count);
    launch_reset_result(l);
    l->n_o = kvf_case_o_elems(c);
    l->n_lse = kvf_case_lse_elems(c);
    l->start = 0;
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
        size_t need = (size_t)(l->n_o + 1) * sizeof(kvf_bf16) + (size_t)(l->n_lse + 1) * 4;
        if (grow((void **)&l->payload, &l->payload_cap, need))
            return kvf_error_set(err, KVF_ENOMEM, "out of memory for kernel outputs");
        kvf_bf16 *o = (kvf_bf16 *)l->payload;
        float *lse = (float *)(l->payload + (size_t)(l->n_o + 1) * sizeof(kvf_bf16));
        double t0 = now_s();
        int rc = kvf_kernel_run(r->opts.kernel, r->state, c, o, lse, &e);
        res->kernel_s = now_s() - t0;
        res->status = kvf_run_status_from_code(rc);
        if (rc) snprintf(res->message, sizeof res->message, "%s", e.msg);
        if (!rc) kvf_kernel_describe(r->opts.kernel, r->state, res->plan, sizeof res->plan);
        r->count++;
        return 0;
    }
    if (serialize_case(l, c, ++r->seq))
        return kvf_error_set(err, KVF_ENOMEM, "out of memory for a case message");
    if (r->count == 0 && r->pid <= 0) {
        int rc = start_worker(r, err);
        if (rc) return rc;
    }
    r->count++;
    if (r->count == 1) {
        l->start = now_s();
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
    /* Behind a running launch. A failure here is the head's, and is reported when it is
     * collected (which then sends the launches behind it to a fresh worker). */
    (void)send_pending(r);
    return 0;
}

/* The head launch failed and took the worker with it: the ones behind it were never run. */
static void settle_tail(kvf_runner *r) {
    if (r->count == 0) return;
    kvf_error e = {0};
    if (restart_and_resend(r, &e)) {
        for (int i = 0; i < r->count; i++) {
            launch *l = at(r, i);
            l->res.status = KVF_RUN_KERNEL_ERROR;
            snprintf(l->res.message, sizeof l->res.message, "no worker to run the case: %.300s",
                     e.msg);
            l->hdr.magic = 0; /* marks "failed before it ran" for collect */
            l->hdr_got = 0;
            l->start = -1;
        }
    }
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
                memcpy(lse, l->payload + (size_t)(l->n_o + 1) * sizeof(kvf_bf16),
                       (size_t)l->n_lse * sizeof *lse);
        }
        r->head = (r->head + 1) % MAX_INFLIGHT;
        r->count--;
        return;
    }
    if (l->start < 0) { /* could not be restarted after the previous launch's failure */
        *res = l->res;
        r->head = (r->head + 1) % MAX_INFLIGHT;
        r->count--;
        return;
    }
    int state = 0; /* 1 complete, -1 worker gone, -2 past the deadline */
    if (l->req_sent < l->req_size) {
        int sr = send_launch(r, l, 0);
        if (sr < 0) state = sr;
    }
    while (state == 0) {
        int p = read_progress(r);
        if (p == 1) state = 1;
        if (p < 0) state = -1;
        if (state) break;
        launch *t = first_unsent_behind_head(r);
        if (t) {
            int sr = send_launch(r, t, 1); /* keeps reading the head's result meanwhile */
            if (sr < 0) state = sr;
            continue;
        }
        double left = l->start + r->opts.deadline_s - now_s();
        struct pollfd pfd = {r->fd, POLLIN, 0};
        /* Past the deadline, data already waiting still counts: the caller may simply have
         * come back late. */
        int pr = poll(&pfd, 1, left > 0 ? (int)(left * 1000) + 1 : 0);
        if (pr < 0 && errno == EINTR) continue;
        if (pr < 0) state = -1;
        if (pr == 0) state = -2;
    }
    r->head = (r->head + 1) % MAX_INFLIGHT;
    r->count--;
    if (state == -2) {
        kill(r->pid, SIGKILL);
        reap(r, NULL, NULL);
        res->status = KVF_RUN_HANG;
        snprintf(res->message, sizeof res->message,
                 "the launch did not finish within its %.3g s deadline; the worker was killed",
                 r->opts.deadline_s);
        settle_tail(r);
        return;
    }
    if (state == -1) {
        reap(r, &res->signal, &res->exit_code);
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
    /* The worker moves on to the launch behind this one now. */
    if (r->count > 0 && head(r)->start == 0) head(r)->start = now_s();
    const result_msg *m = &l->hdr;
    res->kernel_s = m->kernel_s;
    if (m->rc == 0) {
        res->status = KVF_RUN_OK;
        uint32_t n = m->msglen < sizeof res->plan - 1 ? m->msglen : (uint32_t)sizeof res->plan - 1;
        memcpy(res->plan, l->payload, n);
        res->plan[n] = 0;
        const uint8_t *data = l->payload + m->msglen;
        if (m->n_o) memcpy(o, data, (size_t)m->n_o * sizeof *o);
        if (m->n_lse) memcpy(lse, data + m->n_o * sizeof(kvf_bf16), (size_t)m->n_lse * sizeof *lse);
    } else {
        res->status = kvf_run_status_from_code(m->rc);
        uint32_t n =
            m->msglen < sizeof res->message - 1 ? m->msglen : (uint32_t)sizeof res->message - 1;
        memcpy(res->message, l->payload, n);
        res->message[n] = 0;
    }
    if (m->exiting) {
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
