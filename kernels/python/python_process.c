/* Python processes of Python kernels (python_internal.h): spawning and reaping them, the socket
 * protocol of the worker (kvfuzz_worker.py documents the other side: requests and supports
 * questions go one way, replies "<4sII" and their text the other), starting and stopping a
 * worker or a probe, and asking supports(). */
#define _GNU_SOURCE /* close_range */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "python_internal.h"

/* How long a worker or probe may take to import torch and the function and say it is ready. */
#define START_TIMEOUT_S 300

char *kvf__py_dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Copies src into dst[n], cut short where it does not fit (messages are one line anyway). */
void kvf__py_copy_str(char *dst, size_t n, const char *src) {
    size_t len = strlen(src);
    if (len >= n) len = n - 1;
    memcpy(dst, src, len);
    dst[len] = 0;
}

double kvf__py_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- starting Python ------------------------------------------------------------------- */

/* Forks and execs `argv` with keep[0..nkeep) as fds 3, 4, ... and every other fd above 2
 * closed; stdout and stderr go to out_fd (stdout to stderr when out_fd < 0, since a kernel
 * must never print on kvfuzz's stdout). The child gets SIGKILL when the thread that forked it
 * ends, which in kvfuzz is the worker process's main thread. Only async-signal-safe calls
 * between fork and exec: the caller may have threads. */
pid_t kvf__py_spawn(char *const argv[], const int *keep, int nkeep, int out_fd) {
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0) return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int high[4];
    for (int i = 0; i < nkeep; i++)
        if ((high[i] = fcntl(keep[i], F_DUPFD, 64)) < 0) _exit(127);
    for (int i = 0; i < nkeep; i++)
        if (dup2(high[i], 3 + i) < 0) _exit(127);
    if (out_fd >= 0) {
        dup2(out_fd, 1);
        dup2(out_fd, 2);
    } else {
        dup2(2, 1);
    }
    close_range(3 + nkeep, ~0u, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execv(argv[0], argv);
    _exit(127);
}

/* Waits up to `seconds` for pid to end, then kills it; returns its wait status. */
int kvf__py_reap(pid_t pid, double seconds) {
    int status = 0;
    double until = kvf__py_now_s() + seconds;
    for (;;) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid) return status;
        if (got < 0 && errno != EINTR) return -1;
        if (kvf__py_now_s() >= until) break;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return status;
}

/* ---- the socket protocol ----------------------------------------------------------------- */

int kvf__py_send_all(int fd, const void *data, size_t n) {
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* 0 done, -1 end of stream or error, -2 past the deadline (deadline < 0: none). */
static int recv_all(int fd, void *data, size_t n, double deadline) {
    uint8_t *p = data;
    while (n > 0) {
        if (deadline >= 0) {
            struct pollfd pf = {fd, POLLIN, 0};
            double left = deadline - kvf__py_now_s();
            if (left <= 0) return -2;
            int pr = poll(&pf, 1, (int)(left * 1000) + 1);
            if (pr < 0 && errno == EINTR) continue;
            if (pr <= 0) continue;
        }
        ssize_t r = recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int kvf__py_recv_reply(int fd, reply *r, double deadline) {
    uint8_t hdr[REPLY_SIZE];
    int rc = recv_all(fd, hdr, sizeof hdr, deadline);
    if (rc) return rc;
    if (memcmp(hdr, REPLY_MAGIC, 4) != 0) return -1;
    uint32_t len;
    memcpy(&r->status, hdr + 4, 4);
    memcpy(&len, hdr + 8, 4);
    if (len > 4096) return -1;
    char body[4097];
    if ((rc = recv_all(fd, body, len, deadline))) return rc;
    body[len] = 0;
    kvf__py_copy_str(r->text, sizeof r->text, body);
    return 0;
}

/* The Python worker is gone in the middle of a launch: end this process the same way, so the
 * runner files a crash finding with the Python process's signal or exit status. */
void kvf__py_die_like_worker(pystate *st) {
    int status = kvf__py_reap(st->pid, 2.0);
    st->pid = 0;
    const char *name = st->cfg->name;
    if (status >= 0 && WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        fprintf(stderr, "kvfuzz: the Python worker of %s was killed by signal %d (%s)\n", name, sig,
                strsignal(sig));
        signal(sig, SIG_DFL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        raise(sig);
        _exit(128 + sig);
    }
    int code = status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : 125;
    fprintf(stderr, "kvfuzz: the Python worker of %s exited with status %d during the launch\n",
            name, code);
    _exit(code);
}

/* ---- Python processes and supports() ------------------------------------------------------ */

/* Starts kvfuzz_worker.py in `mode`: "serve" with the shared memory memfd, or "probe" (memfd
 * < 0), which answers supports() only. Waits for its ready line (into ready). Returns 0 with
 * *pid and *sock set, or -1 with one sentence in msg and nothing left running. */
int kvf__py_start(const pyk *k, const char *mode, int memfd, pid_t *pid, int *sock, char *ready,
                  size_t ready_size, char *msg, size_t msg_size) {
    *pid = 0;
    *sock = -1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(msg, msg_size, "cannot create the Python worker's socket: %s", strerror(errno));
        return -1;
    }
    char *argv[6 + 6 + 1] = {k->python, k->worker, (char *)mode, k->python, "3"}; /* + target */
    int argc = 5;
    if (memfd >= 0) argv[argc++] = "4";
    for (int i = 0; i < k->ntarget; i++)
        argv[argc++] = k->target[i];
    argv[argc] = NULL;
    const int keep[2] = {sv[1], memfd};
    fflush(NULL);
    pid_t p = kvf__py_spawn(argv, keep, memfd >= 0 ? 2 : 1, -1);
    close(sv[1]);
    if (p < 0) {
        close(sv[0]);
        snprintf(msg, msg_size, "cannot start the Python worker: %s", strerror(errno));
        return -1;
    }
    reply r;
    int rc = kvf__py_recv_reply(sv[0], &r, kvf__py_now_s() + START_TIMEOUT_S);
    if (rc == 0 && r.status == STATUS_OK) {
        *pid = p;
        *sock = sv[0];
        snprintf(ready, ready_size, "%s", r.text);
        return 0;
    }
    close(sv[0]); /* a worker still loading reads end of stream later and exits */
    int status = kvf__py_reap(p, rc == -2 ? 0 : 2.0);
    if (rc == 0)
        snprintf(msg, msg_size, "%s", r.text);
    else if (rc == -2)
        snprintf(msg, msg_size, "the Python worker did not start within %d s", START_TIMEOUT_S);
    else
        snprintf(msg, msg_size, "the Python worker ended while starting (%s %d)",
                 status >= 0 && WIFSIGNALED(status) ? "signal" : "exit status",
                 status < 0            ? -1
                 : WIFSIGNALED(status) ? WTERMSIG(status)
                                       : WEXITSTATUS(status));
    return -1;
}

/* Ends a worker or probe: at end of stream it exits; reaped, killed past 2 s. */
void kvf__py_stop(pid_t pid, int sock) {
    if (sock >= 0) close(sock);
    if (pid > 0) kvf__py_reap(pid, 2.0);
}

/* Asks a worker's or probe's supports() about a shape: 0 with its reply in r, -1 when the
 * process is gone, -2 past the deadline (< 0: none). */
int kvf__py_ask(int sock, const kvf_plugin_shape *sh, double deadline, reply *r) {
    uint8_t req[SUPPORTS_SIZE], *p = req;
    memcpy(p, SUPPORTS_MAGIC, 4), p += 4;
    kvf__py_put32(&p, (uint32_t)sh->num_qo_heads), kvf__py_put32(&p, (uint32_t)sh->num_kv_heads);
    kvf__py_put32(&p, (uint32_t)sh->head_dim), kvf__py_put32(&p, (uint32_t)sh->page_size);
    kvf__py_put32(&p, (uint32_t)sh->batch_size);
    kvf__py_put64(&p, (uint64_t)sh->num_pages), kvf__py_put64(&p, (uint64_t)sh->num_entries);
    kvf__py_put64(&p, (uint64_t)sh->total_tokens), kvf__py_put64(&p, (uint64_t)sh->max_seq_len);
    memcpy(p, &sh->sm_scale, 4), p += 4;
    /* The layout's strides; a shape built without them is dense. */
    kvf_plugin_shape full = *sh;
    if (!full.q_stride_batch && !full.q_stride_head && !full.kv_stride_page &&
        !full.kv_stride_slot && !full.kv_stride_head && !full.o_stride_batch &&
        !full.o_stride_head && !full.lse_stride_batch)
        kvf_kernel_shape_dense_strides(&full);
    const int64_t strides[8] = {full.q_stride_batch, full.q_stride_head,    full.o_stride_batch,
                                full.o_stride_head,  full.lse_stride_batch, full.kv_stride_page,
                                full.kv_stride_slot, full.kv_stride_head};
    for (int i = 0; i < 8; i++)
        kvf__py_put64(&p, (uint64_t)strides[i]);
    /* The caches' dtypes and the scales' granularity: a kernel declaring FP8 caches may still
     * decline some (a dtype pair, scales per slot). */
    kvf__py_put32(&p, (uint32_t)sh->k_dtype), kvf__py_put32(&p, (uint32_t)sh->v_dtype);
    kvf__py_put32(&p, (uint32_t)sh->scale_granularity);
    if (kvf__py_send_all(sock, req, sizeof req)) return -1;
    return kvf__py_recv_reply(sock, r, deadline);
}

/* The answer in a supports reply: 1 accepted, 0 declined (the reason into why). An exception
 * accepts: the launch asks again and reports it as the kernel's error. */
int kvf__py_supports_answer(const reply *r, char *why, size_t why_size) {
    if (r->status != STATUS_OK || r->text[0] != '0') return 1;
    if (why && why_size)
        snprintf(why, why_size, "%s", r->text[1] ? r->text + 1 : "kvfuzz_supports returned false");
    return 0;
}
