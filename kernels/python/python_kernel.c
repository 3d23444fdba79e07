/* Python kernels (python_kernel.h): the descriptor, the persistent Python worker and the
 * shared-memory protocol it speaks (kvfuzz_worker.py documents the other side).
 *
 * Why a separate process: a Python interpreter, torch and a CUDA context cannot be embedded in
 * kvfuzz's worker without taking over its signals, threads and memory. The worker process is
 * started by create() in the process that runs the kernel and dies with it (PR_SET_PDEATHSIG),
 * so kvfuzz's per-launch deadline also ends a hung Python kernel.
 *
 * Why the mirroring: the Python function works on copies of the host's buffers. Whatever it
 * did to a copy (an output element left poisoned, a guard byte overwritten, an input changed)
 * is done to the host's buffer, so the buffer host's checks report it with their own finding
 * classes. The output copies have guard bytes of the host's size (KVF_HOST_GUARD_BYTES, the
 * buffer host's contract in kernel_host.h) on both sides; a changed guard byte is written into
 * the host's guard at the same distance from the output.
 *
 * Why supports() goes through a Python process of its own: kvfuzz asks supports() of every
 * shape it generates, in the process that made the kernel (generator threads, no worker
 * there), and the buffer host asks it again before each launch, in the process running the
 * kernel. The first asks a probe (kvfuzz_worker.py probe) started with the kernel; the second
 * asks that process's own Python worker, which is at hand; any other process starts a probe for
 * the question. An exception in supports() lets the case through, and the worker, which asks
 * supports() again before each launch, turns it into the launch's error: a kernel-error
 * finding, as a plugin's failing supports() would be. */
#define _GNU_SOURCE /* memfd_create, close_range */

#include "python_kernel.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvfuzz/kernel_host.h"
#include "solution.h"

#ifndef KVF_PYTHON_WORKER_SOURCE
#define KVF_PYTHON_WORKER_SOURCE ""
#endif

#define REQUEST_MAGIC "KVFQ"
#define REPLY_MAGIC "KVFA"
#define REQUEST_SIZE 148 /* struct "<4sIQiiiiiqqfi8Qqqq" of kvfuzz_worker.py */
#define SUPPORTS_MAGIC "KVFS"
#define SUPPORTS_SIZE 60 /* "<4siiiiiqqqqf" */
#define REPLY_SIZE 12    /* "<4sII" */
#define STATUS_OK 0
#define STATUS_EXCEPTION 1
#define STATUS_INTERNAL 2
#define CHECK_EXIT_NOTFOUND 3
#define CHECK_EXIT_INVALID 4
#define ALIGN 256
/* A pool up to this size per cache is sent whole, so the kernel sees the page ids and the
 * poisoned unreferenced pages the case has; a larger one (cases with page ids past 2^31
 * elements) is sent as its referenced pages, renumbered. */
#define FULL_POOL_BYTES ((size_t)256 << 20)
#define CHECK_TIMEOUT_S 300
#define START_TIMEOUT_S 300
/* A supports() slower than this is taken for hung: its probe is stopped and shapes are no
 * longer filtered before they run (a launch then meets the hang under its own deadline). */
#define SUPPORTS_TIMEOUT_S 60
/* How long `python3 -c "import torch"` may take when choosing the interpreter: a cold import
 * of torch from a slow disk takes seconds, never a minute. */
#define TORCH_PROBE_TIMEOUT_S 60
#define CHECK_OK_TAG "KVFUZZ-OK\t" /* the check's line for a usable kernel */

/* ---- the kernel and its configuration -------------------------------------------------- */

typedef struct pystate pystate;

typedef struct pyk {
    kvf_kernel kernel; /* first: kvf__python_kernel_free casts back */
    kvf_plugin_kernel desc;
    char *name, *description;
    char *python, *worker;
    char *target[5]; /* worker argv naming the function: module NAME FN | solution DIR FILE FN
                        NARGS */
    int ntarget;
    kvf__solution solution; /* zeroed for python:MODULE:FUNCTION */
    char *precision;        /* fn.kvfuzz_precision; NULL when absent (f32) */
    int has_supports;       /* fn.kvfuzz_supports exists */
    /* The supports() probe of the process that made the kernel (`owner`): one Python process,
     * one question at a time under probe_mu. A forked process never touches these (the mutex
     * may have been held by another thread at the fork, the socket closed since). */
    pid_t owner;
    pthread_mutex_t probe_mu;
    pid_t probe_pid;
    int probe_sock;
    int probe_dead; /* it died or hung: shapes are no longer filtered */
    /* The state whose Python worker answers supports() in a process other than the owner (a
     * campaign's kernel worker). Used only by the thread running that state, as the buffer
     * host asks supports() right before each launch. */
    pystate *live;
    pid_t live_pid;
} pyk;

struct pystate {
    const pyk *cfg;
    pid_t pid;
    int sock, memfd;
    uint8_t *arena;
    size_t arena_size;
    int32_t *pages; /* compact mode: the referenced page ids, sorted */
    size_t pages_cap;
    char device[16];
    char facts[96];
};

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Copies src into dst[n], cut short where it does not fit (messages are one line anyway). */
static void copy_str(char *dst, size_t n, const char *src) {
    size_t len = strlen(src);
    if (len >= n) len = n - 1;
    memcpy(dst, src, len);
    dst[len] = 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- finding programs and the worker script ------------------------------------------- */

static char *search_path(const char *prog) {
    if (strchr(prog, '/')) return access(prog, X_OK) == 0 ? dup_str(prog) : NULL;
    const char *path = getenv("PATH");
    if (!path) return NULL;
    char buf[PATH_MAX];
    for (const char *p = path; *p;) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > 0 && (size_t)snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, prog) < sizeof buf &&
            access(buf, X_OK) == 0)
            return dup_str(buf);
        p += n + (end ? 1 : 0);
    }
    return NULL;
}

/* KVF_PYTHON_WORKER, else installed beside the executable (bin/../share/kvfuzz/python), else
 * the source tree's copy (a build run from its build folder). */
static int find_worker(char **out, kvf_error *err) {
    const char *env = getenv("KVF_PYTHON_WORKER");
    if (env && *env) {
        if (access(env, R_OK) != 0)
            return kvf_error_set(err, KVF_ENOTFOUND,
                                 "KVF_PYTHON_WORKER names %s, which cannot be read", env);
        return (*out = dup_str(env)) ? 0 : kvf_error_set(err, KVF_ENOMEM, "out of memory");
    }
    char exe[PATH_MAX], buf[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(buf, sizeof buf, "%s/../share/kvfuzz/python/kvfuzz_worker.py", exe);
        if (access(buf, R_OK) == 0)
            return (*out = dup_str(buf)) ? 0 : kvf_error_set(err, KVF_ENOMEM, "out of memory");
    }
    if (*KVF_PYTHON_WORKER_SOURCE && access(KVF_PYTHON_WORKER_SOURCE, R_OK) == 0)
        return (*out = dup_str(KVF_PYTHON_WORKER_SOURCE))
                   ? 0
                   : kvf_error_set(err, KVF_ENOMEM, "out of memory");
    return kvf_error_set(err, KVF_ENOTFOUND,
                         "the Python worker script kvfuzz_worker.py is not installed beside "
                         "kvfuzz (share/kvfuzz/python); set KVF_PYTHON_WORKER");
}

/* ---- starting Python ------------------------------------------------------------------- */

/* Forks and execs `argv` with keep[0..nkeep) as fds 3, 4, ... and every other fd above 2
 * closed; stdout and stderr go to out_fd (stdout to stderr when out_fd < 0, since a kernel
 * must never print on kvfuzz's stdout). The child gets SIGKILL when the thread that forked it
 * ends, which in kvfuzz is the worker process's main thread. Only async-signal-safe calls
 * between fork and exec: the caller may have threads. */
static pid_t spawn(char *const argv[], const int *keep, int nkeep, int out_fd) {
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
static int reap(pid_t pid, double seconds) {
    int status = 0;
    double until = now_s() + seconds;
    for (;;) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid) return status;
        if (got < 0 && errno != EINTR) return -1;
        if (now_s() >= until) break;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return status;
}

/* ---- choosing the interpreter ------------------------------------------------------- */

/* Whether `python` imports torch: one short-lived `python -c "import torch"`, its output
 * discarded, killed past TORCH_PROBE_TIMEOUT_S (a hung import counts as no torch). */
static int imports_torch(const char *python) {
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (devnull < 0) return 0;
    char *argv[] = {(char *)python, "-c", "import torch", NULL};
    fflush(NULL);
    pid_t pid = spawn(argv, NULL, 0, devnull);
    close(devnull);
    if (pid < 0) return 0;
    int status = reap(pid, TORCH_PROBE_TIMEOUT_S);
    return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The default interpreter, chosen once per process (per PATH and PYTHONPATH, which decide what
 * the candidates find): the first of python3 on the PATH and /usr/bin/python3 that imports
 * torch. The PATH's comes first because a virtual environment or conda python3 holding torch
 * (and Triton) is put first on the PATH on purpose, while /usr/bin/python3 has torch where
 * Debian's python3-torch is installed. When neither imports torch the PATH's python3 (else
 * /usr/bin/python3) is used all the same, and its check says what is missing. */
static pthread_mutex_t kvf__choice_mu = PTHREAD_MUTEX_INITIALIZER;
static char *kvf__choice;         /* the interpreter chosen, NULL before the first choice */
static char *kvf__choice_key;     /* "PATH\nPYTHONPATH" it was chosen under */
static int kvf__choice_torch;     /* whether it imports torch */
static int kvf__choice_announced; /* the choice was printed (once per process) */

static char *choice_key(void) {
    const char *path = getenv("PATH"), *pp = getenv("PYTHONPATH");
    size_t n = strlen(path ? path : "") + strlen(pp ? pp : "") + 2;
    char *key = malloc(n);
    if (key) snprintf(key, n, "%s\n%s", path ? path : "", pp ? pp : "");
    return key;
}

static int same_file(const char *a, const char *b) {
    char ra[PATH_MAX], rb[PATH_MAX];
    return realpath(a, ra) && realpath(b, rb) && strcmp(ra, rb) == 0;
}

int kvf__python_choose(char **python, int *torch, kvf_error *err) {
    *python = NULL;
    if (torch) *torch = -1;
    const char *env = getenv("KVF_PYTHON");
    if (env && *env) {
        if (!(*python = search_path(env)))
            return kvf_error_set(err, KVF_ENOTFOUND,
                                 "KVF_PYTHON names %s, which is not an executable", env);
        return 0;
    }
    char *key = choice_key();
    if (!key) return kvf_error_set(err, KVF_ENOMEM, "out of memory");
    pthread_mutex_lock(&kvf__choice_mu);
    if (!kvf__choice || strcmp(kvf__choice_key, key) != 0) {
        char *cands[2] = {search_path("python3"), NULL};
        if (access("/usr/bin/python3", X_OK) == 0 &&
            !(cands[0] && same_file(cands[0], "/usr/bin/python3")))
            cands[1] = dup_str("/usr/bin/python3");
        int pick = -1, has = 0;
        for (int i = 0; i < 2 && pick < 0; i++)
            if (cands[i] && imports_torch(cands[i])) pick = i, has = 1;
        if (pick < 0) pick = cands[0] ? 0 : 1;
        free(kvf__choice);
        free(kvf__choice_key);
        kvf__choice = cands[pick];
        cands[pick] = NULL;
        kvf__choice_key = key;
        key = NULL;
        kvf__choice_torch = has;
        free(cands[0]);
        free(cands[1]);
    }
    free(key);
    int rc = 0;
    if (!kvf__choice)
        rc = kvf_error_set(err, KVF_ENOTFOUND,
                           "no python3 found (none on the PATH, no /usr/bin/python3; set "
                           "KVF_PYTHON)");
    else if (!(*python = dup_str(kvf__choice)))
        rc = kvf_error_set(err, KVF_ENOMEM, "out of memory");
    if (torch) *torch = kvf__choice_torch;
    pthread_mutex_unlock(&kvf__choice_mu);
    return rc;
}

/* Prints the default interpreter's choice on stderr, the first time a kernel loads under it in
 * this process (a load error says which interpreter failed in its own sentence). */
static void announce_choice(const char *python, int torch) {
    pthread_mutex_lock(&kvf__choice_mu);
    int first = !kvf__choice_announced;
    kvf__choice_announced = 1;
    pthread_mutex_unlock(&kvf__choice_mu);
    if (first)
        fprintf(stderr, "kvfuzz: python kernels run under %s (%s)\n", python,
                torch ? "imports torch" : "no python3 kvfuzz tried imports torch");
}

/* Reads the check's verdict for a usable kernel, "KVFUZZ-OK<TAB>precision<TAB>supports<TAB>
 * description", from the last line that carries the tag (a module may print on import, before
 * or, through its own exit handlers, after it). Returns 0 when there is one. */
static int read_verdict(pyk *k, const char *out, char *line, size_t line_size) {
    const char *hit = NULL;
    for (const char *p = out; (p = strstr(p, CHECK_OK_TAG)); p++)
        if (p == out || p[-1] == '\n') hit = p;
    if (!hit) return -1;
    const char *prec = hit + strlen(CHECK_OK_TAG), *tab1 = strchr(prec, '\t');
    const char *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL,
               *end = tab2 ? strchr(tab2, '\n') : NULL;
    if (!tab2) return -1;
    if (!end) end = tab2 + strlen(tab2);
    if (tab1 > prec && !(k->precision = strndup(prec, (size_t)(tab1 - prec)))) return -1;
    k->has_supports = tab1[1] == '1';
    size_t n = (size_t)(end - tab2 - 1);
    if (n >= line_size) n = line_size - 1;
    memcpy(line, tab2 + 1, n);
    line[n] = 0;
    return 0;
}

/* Runs the worker's check mode: imports torch and the target in a short-lived process, and
 * learns the function's precision model and whether it has a supports(). */
static int run_check(pyk *k, char *line, size_t line_size, kvf_error *err) {
    char *argv[10] = {k->python, k->worker, "check", k->python};
    int argc = 4;
    for (int i = 0; i < k->ntarget; i++)
        argv[argc++] = k->target[i];
    argv[argc] = NULL;
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0)
        return kvf_error_set(err, KVF_EIO, "cannot create a pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = spawn(argv, NULL, 0, pfd[1]);
    close(pfd[1]);
    if (pid < 0) {
        close(pfd[0]);
        return kvf_error_set(err, KVF_EIO, "cannot start %s: %s", k->python, strerror(errno));
    }
    char out[8192];
    size_t got = 0;
    double until = now_s() + CHECK_TIMEOUT_S;
    int timed_out = 0;
    for (;;) {
        struct pollfd p = {pfd[0], POLLIN, 0};
        double left = until - now_s();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        int pr = poll(&p, 1, (int)(left * 1000) + 1);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) continue;
        char buf[4096];
        ssize_t n = read(pfd[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        /* Keep the tail: the verdict is the last line. */
        if (got + (size_t)n > sizeof out - 1) {
            size_t drop = got + (size_t)n - (sizeof out - 1);
            if (drop > got) drop = got;
            memmove(out, out + drop, got - drop);
            got -= drop;
        }
        size_t take = (size_t)n < sizeof out - 1 - got ? (size_t)n : sizeof out - 1 - got;
        memcpy(out + got, buf, take);
        got += take;
    }
    close(pfd[0]);
    if (timed_out) kill(pid, SIGKILL);
    int status = reap(pid, timed_out ? 0 : CHECK_TIMEOUT_S);
    out[got] = 0;
    while (got > 0 && (out[got - 1] == '\n' || out[got - 1] == '\r' || out[got - 1] == ' '))
        out[--got] = 0;
    const char *last = strrchr(out, '\n');
    last = last ? last + 1 : out;
    copy_str(line, line_size, last);
    if (timed_out)
        return kvf_error_set(err, KVF_EINVAL, "loading the Python kernel took over %d s",
                             CHECK_TIMEOUT_S);
    if (status >= 0 && WIFEXITED(status)) {
        int code = WEXITSTATUS(status);
        if (code == 0) {
            if (read_verdict(k, out, line, line_size) == 0) return 0;
            return kvf_error_set(err, KVF_EIO,
                                 "the Python check of %s exited without its verdict line%s%s",
                                 k->name, *line ? ": " : "", line);
        }
        if (code == CHECK_EXIT_NOTFOUND) return kvf_error_set(err, KVF_ENOTFOUND, "%s", line);
        if (code == CHECK_EXIT_INVALID) return kvf_error_set(err, KVF_EINVAL, "%s", line);
        if (code == 127 && !*line)
            return kvf_error_set(err, KVF_ENOTFOUND, "%s could not be started", k->python);
        return kvf_error_set(err, KVF_EINVAL,
                             "%s ended with status %d while loading the kernel%s%s", k->python,
                             code, *line ? ": " : "", line);
    }
    if (status >= 0 && WIFSIGNALED(status))
        return kvf_error_set(err, KVF_EINVAL,
                             "%s was killed by signal %d (%s) while loading the kernel", k->python,
                             WTERMSIG(status), strsignal(WTERMSIG(status)));
    return kvf_error_set(err, KVF_EIO, "lost track of the Python check process");
}

/* ---- the socket protocol ----------------------------------------------------------------- */

static void put32(uint8_t **p, uint32_t v) {
    memcpy(*p, &v, 4);
    *p += 4;
}

static void put64(uint8_t **p, uint64_t v) {
    memcpy(*p, &v, 8);
    *p += 8;
}

static int send_all(int fd, const void *data, size_t n) {
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
            double left = deadline - now_s();
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

typedef struct reply {
    uint32_t status;
    char text[KVF_ERROR_MSG_MAX];
} reply;

static int recv_reply(int fd, reply *r, double deadline) {
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
    copy_str(r->text, sizeof r->text, body);
    return 0;
}

/* The Python worker is gone in the middle of a launch: end this process the same way, so the
 * runner files a crash finding with the Python process's signal or exit status. */
static void die_like_worker(pystate *st) {
    int status = reap(st->pid, 2.0);
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
static int start_python(const pyk *k, const char *mode, int memfd, pid_t *pid, int *sock,
                        char *ready, size_t ready_size, char *msg, size_t msg_size) {
    *pid = 0;
    *sock = -1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(msg, msg_size, "cannot create the Python worker's socket: %s", strerror(errno));
        return -1;
    }
    char *argv[12] = {k->python, k->worker, (char *)mode, k->python, "3"};
    int argc = 5;
    if (memfd >= 0) argv[argc++] = "4";
    for (int i = 0; i < k->ntarget; i++)
        argv[argc++] = k->target[i];
    argv[argc] = NULL;
    const int keep[2] = {sv[1], memfd};
    fflush(NULL);
    pid_t p = spawn(argv, keep, memfd >= 0 ? 2 : 1, -1);
    close(sv[1]);
    if (p < 0) {
        close(sv[0]);
        snprintf(msg, msg_size, "cannot start the Python worker: %s", strerror(errno));
        return -1;
    }
    reply r;
    int rc = recv_reply(sv[0], &r, now_s() + START_TIMEOUT_S);
    if (rc == 0 && r.status == STATUS_OK) {
        *pid = p;
        *sock = sv[0];
        snprintf(ready, ready_size, "%s", r.text);
        return 0;
    }
    close(sv[0]); /* a worker still loading reads end of stream later and exits */
    int status = reap(p, rc == -2 ? 0 : 2.0);
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
static void stop_python(pid_t pid, int sock) {
    if (sock >= 0) close(sock);
    if (pid > 0) reap(pid, 2.0);
}

/* Asks a worker's or probe's supports() about a shape: 0 with its reply in r, -1 when the
 * process is gone, -2 past the deadline (< 0: none). */
static int ask_python(int sock, const kvf_plugin_shape *sh, double deadline, reply *r) {
    uint8_t req[SUPPORTS_SIZE], *p = req;
    memcpy(p, SUPPORTS_MAGIC, 4), p += 4;
    put32(&p, (uint32_t)sh->num_qo_heads), put32(&p, (uint32_t)sh->num_kv_heads);
    put32(&p, (uint32_t)sh->head_dim), put32(&p, (uint32_t)sh->page_size);
    put32(&p, (uint32_t)sh->batch_size);
    put64(&p, (uint64_t)sh->num_pages), put64(&p, (uint64_t)sh->num_entries);
    put64(&p, (uint64_t)sh->total_tokens), put64(&p, (uint64_t)sh->max_seq_len);
    memcpy(p, &sh->sm_scale, 4);
    if (send_all(sock, req, sizeof req)) return -1;
    return recv_reply(sock, r, deadline);
}

/* The answer in a supports reply: 1 accepted, 0 declined (the reason into why). An exception
 * accepts: the launch asks again and reports it as the kernel's error. */
static int supports_answer(const reply *r, char *why, size_t why_size) {
    if (r->status != STATUS_OK || r->text[0] != '0') return 1;
    if (why && why_size)
        snprintf(why, why_size, "%s", r->text[1] ? r->text + 1 : "kvfuzz_supports returned false");
    return 0;
}

/* supports() in the process that made the kernel: its probe, one question at a time. */
static int owner_supports(pyk *k, const kvf_plugin_shape *sh, char *why, size_t why_size) {
    int yes = 1;
    pthread_mutex_lock(&k->probe_mu);
    if (!k->probe_dead && k->probe_sock >= 0) {
        reply r;
        int rc = ask_python(k->probe_sock, sh, now_s() + SUPPORTS_TIMEOUT_S, &r);
        if (rc == 0) {
            yes = supports_answer(&r, why, why_size);
        } else {
            /* Generation goes on unfiltered; a launch meets the same hang or crash in the
             * kernel's worker, where it is a finding. */
            if (rc == -2) kill(k->probe_pid, SIGKILL);
            stop_python(k->probe_pid, k->probe_sock);
            k->probe_pid = 0;
            k->probe_sock = -1;
            k->probe_dead = 1;
            if (rc == -2)
                fprintf(stderr,
                        "kvfuzz: the kvfuzz_supports of %s did not answer within %d s; shapes "
                        "are no longer filtered before they run\n",
                        k->name, SUPPORTS_TIMEOUT_S);
            else
                fprintf(stderr,
                        "kvfuzz: the Python process answering the kvfuzz_supports of %s ended; "
                        "shapes are no longer filtered before they run\n",
                        k->name);
        }
    }
    pthread_mutex_unlock(&k->probe_mu);
    return yes;
}

/* ---- the descriptor ---------------------------------------------------------------------- */

static int py_supports(const kvf_plugin_kernel *self, const kvf_plugin_shape *shape, char *why,
                       size_t why_size) {
    pyk *k = self->user; /* the probe and the live state are per-process bookkeeping */
    const kvf__solution *s = &k->solution;
    const char *what = NULL;
    int32_t have = 0, want = 0;
    if (s->num_qo_heads && shape->num_qo_heads != s->num_qo_heads)
        what = "query heads", have = shape->num_qo_heads, want = s->num_qo_heads;
    else if (s->num_kv_heads && shape->num_kv_heads != s->num_kv_heads)
        what = "KV heads", have = shape->num_kv_heads, want = s->num_kv_heads;
    else if (s->head_dim && shape->head_dim != s->head_dim)
        what = "head dim", have = shape->head_dim, want = s->head_dim;
    else if (s->page_size && shape->page_size != s->page_size)
        what = "page size", have = shape->page_size, want = s->page_size;
    if (what) {
        if (why && why_size)
            snprintf(why, why_size, "definition %s fixes %s at %d, not %d", s->definition, what,
                     want, have);
        return 0;
    }
    if (!k->has_supports) return 1;
    const pid_t self_pid = getpid();
    if (self_pid == k->owner) return owner_supports(k, shape, why, why_size);
    if (k->live && k->live_pid == self_pid) {
        /* The buffer host asks right before a launch: the worker that will run it answers. */
        reply r;
        if (ask_python(k->live->sock, shape, -1, &r)) die_like_worker(k->live);
        return supports_answer(&r, why, why_size);
    }
    /* Another process with no worker of its own: a probe for this one question. */
    pid_t pid;
    int sock;
    char ready[KVF_ERROR_MSG_MAX], msg[KVF_ERROR_MSG_MAX];
    if (start_python(k, "probe", -1, &pid, &sock, ready, sizeof ready, msg, sizeof msg)) return 1;
    reply r;
    int rc = ask_python(sock, shape, now_s() + SUPPORTS_TIMEOUT_S, &r);
    if (rc == -2) kill(pid, SIGKILL);
    stop_python(pid, sock);
    return rc ? 1 : supports_answer(&r, why, why_size);
}

static void py_destroy(void *state) {
    pystate *st = state;
    if (!st) return;
    pyk *k = (pyk *)st->cfg;
    if (k->live == st && k->live_pid == getpid()) k->live = NULL;
    stop_python(st->pid, st->sock); /* the worker reads end of stream and exits */
    if (st->arena) munmap(st->arena, st->arena_size);
    if (st->memfd >= 0) close(st->memfd);
    free(st->pages);
    free(st);
}

static int py_create(const kvf_plugin_kernel *self, void **state, char *msg, size_t msg_size) {
    pyk *k = self->user;
    pystate *st = calloc(1, sizeof *st);
    if (!st) return snprintf(msg, msg_size, "out of memory"), KVF_PLUGIN_NOMEM;
    st->cfg = k;
    st->sock = -1;
    st->memfd = memfd_create("kvfuzz-python", MFD_CLOEXEC);
    if (st->memfd < 0) {
        snprintf(msg, msg_size, "cannot create the Python worker's shared memory: %s",
                 strerror(errno));
        py_destroy(st);
        return KVF_PLUGIN_ERROR;
    }
    char ready[KVF_ERROR_MSG_MAX];
    if (start_python(k, "serve", st->memfd, &st->pid, &st->sock, ready, sizeof ready, msg,
                     msg_size)) {
        py_destroy(st);
        return KVF_PLUGIN_ERROR;
    }
    /* The ready line ends with "on cpu" or "on cuda". */
    const char *on = strrchr(ready, ' ');
    snprintf(st->device, sizeof st->device, "%s", on ? on + 1 : "?");
    if (k->has_supports && (!k->live || k->live_pid != getpid())) {
        k->live = st;
        k->live_pid = getpid();
    }
    *state = st;
    return KVF_PLUGIN_OK;
}

static size_t align_up(size_t n) {
    return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

static int grow_arena(pystate *st, size_t need, char *msg, size_t msg_size) {
    if (need <= st->arena_size) return 0;
    size_t size = st->arena_size ? st->arena_size : (size_t)1 << 20;
    while (size < need)
        size *= 2;
    if (st->arena) munmap(st->arena, st->arena_size);
    st->arena = NULL;
    st->arena_size = 0;
    if (ftruncate(st->memfd, (off_t)size) != 0) {
        snprintf(msg, msg_size, "cannot grow the Python worker's shared memory to %zu bytes: %s",
                 size, strerror(errno));
        return KVF_PLUGIN_NOMEM;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, st->memfd, 0);
    if (p == MAP_FAILED) {
        snprintf(msg, msg_size, "cannot map %zu bytes of shared memory: %s", size, strerror(errno));
        return KVF_PLUGIN_NOMEM;
    }
    st->arena = p;
    st->arena_size = size;
    return 0;
}

/* The buffer host's poison and guard patterns (kernel_host.h), in the output copies. */
static void fill_guard(uint8_t *p) {
    memset(p, KVF_HOST_GUARD_BYTE, KVF_HOST_GUARD_BYTES);
}

static void poison(uint8_t *p, int64_t n, size_t size, uint32_t bits) {
    for (int64_t i = 0; i < n; i++)
        memcpy(p + (size_t)i * size, &bits, size);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Position of page id p among the sorted referenced pages. */
static int32_t compact_id(const pystate *st, size_t n, int32_t p) {
    const int32_t *hit = bsearch(&p, st->pages, n, sizeof *st->pages, cmp_i32);
    return hit ? (int32_t)(hit - st->pages) : -1;
}

/* Mirrors the changed bytes of one guard into the host's guard (NULL when the host's output is
 * not contiguous, so its guard's place is unknown: the caller reports the write instead).
 * Returns 1 when a byte changed. */
static int mirror_guard(const uint8_t *copy, uint8_t *host) {
    int changed = 0;
    for (size_t i = 0; i < KVF_HOST_GUARD_BYTES; i++)
        if (copy[i] != KVF_HOST_GUARD_BYTE) {
            changed = 1;
            if (host) host[i] = copy[i];
        }
    return changed;
}

static int py_run(void *state, const kvf_plugin_args *a, char *msg, size_t msg_size) {
    pystate *st = state;
    const kvf_plugin_shape *sh = a->shape;
    const int32_t B = sh->batch_size, hq = sh->num_qo_heads, hk = sh->num_kv_heads,
                  D = sh->head_dim, S = sh->page_size;
    const int64_t P = sh->num_pages, n_entries = B > 0 ? a->kv_indptr[B] : 0;
    const size_t row = (size_t)D * 2, page_bytes = (size_t)S * hk * row;
    const int64_t n_o = (int64_t)B * hq * D, n_lse = (int64_t)B * hq;
    const size_t G = KVF_HOST_GUARD_BYTES;

    /* Which pages go: the whole pool, or the referenced ones renumbered. */
    const int full = (uint64_t)P * page_bytes <= FULL_POOL_BYTES;
    size_t np = (size_t)P;
    if (!full) {
        if ((size_t)n_entries > st->pages_cap) {
            int32_t *p = realloc(st->pages, (size_t)n_entries * sizeof *p);
            if (!p) return snprintf(msg, msg_size, "out of memory"), KVF_PLUGIN_NOMEM;
            st->pages = p;
            st->pages_cap = (size_t)n_entries;
        }
        if (n_entries) memcpy(st->pages, a->kv_indices, (size_t)n_entries * sizeof *st->pages);
        qsort(st->pages, (size_t)n_entries, sizeof *st->pages, cmp_i32);
        np = 0;
        for (int64_t i = 0; i < n_entries; i++)
            if (np == 0 || st->pages[np - 1] != st->pages[i]) st->pages[np++] = st->pages[i];
    }
    snprintf(st->facts, sizeof st->facts, "python device=%s pool=%s pages=%zu", st->device,
             full ? "full" : "referenced", np);

    /* The arena: q | k pages | v pages | indptr | indices | last | guard o guard | guard lse
     * guard, each part 256-byte aligned. */
    size_t off = 0, o_q, o_k, o_v, o_ip, o_ix, o_last, o_o, o_lse;
    o_q = off, off = align_up(off + (size_t)n_o * 2);
    o_k = off, off = align_up(off + np * page_bytes);
    o_v = off, off = align_up(off + np * page_bytes);
    o_ip = off, off = align_up(off + (size_t)(B + 1) * 4);
    o_ix = off, off = align_up(off + (size_t)n_entries * 4);
    o_last = off, off = align_up(off + (size_t)B * 4);
    o_o = off, off = align_up(off + 2 * G + (size_t)n_o * 2);
    o_lse = off, off = align_up(off + 2 * G + (size_t)n_lse * 4);
    int rc = grow_arena(st, off, msg, msg_size);
    if (rc) return rc;
    uint8_t *A = st->arena;

    for (int32_t b = 0; b < B; b++)
        for (int32_t h = 0; h < hq; h++)
            memcpy(A + o_q + ((size_t)b * hq + h) * row,
                   a->q + b * a->q_stride_batch + h * a->q_stride_head, row);
    for (size_t i = 0; i < np; i++) {
        const int64_t p = full ? (int64_t)i : st->pages[i];
        for (int32_t s = 0; s < S; s++)
            for (int32_t g = 0; g < hk; g++) {
                const int64_t src =
                    p * a->kv_stride_page + s * a->kv_stride_slot + g * a->kv_stride_head;
                const size_t dst = i * page_bytes + ((size_t)s * hk + g) * row;
                memcpy(A + o_k + dst, a->k_cache + src, row);
                memcpy(A + o_v + dst, a->v_cache + src, row);
            }
    }
    memcpy(A + o_ip, a->kv_indptr, (size_t)(B + 1) * 4);
    int32_t *ix = (int32_t *)(A + o_ix);
    for (int64_t i = 0; i < n_entries; i++)
        ix[i] = full ? a->kv_indices[i] : compact_id(st, np, a->kv_indices[i]);
    if (B) memcpy(A + o_last, a->kv_last_page_len, (size_t)B * 4);
    fill_guard(A + o_o);
    poison(A + o_o + G, n_o, 2, KVF_HOST_POISON_O); /* little-endian: the low half */
    fill_guard(A + o_o + G + (size_t)n_o * 2);
    fill_guard(A + o_lse);
    poison(A + o_lse + G, n_lse, 4, KVF_HOST_POISON_LSE);
    fill_guard(A + o_lse + G + (size_t)n_lse * 4);

    uint8_t req[REQUEST_SIZE], *p = req;
    memcpy(p, REQUEST_MAGIC, 4), p += 4;
    put32(&p, 0);
    put64(&p, st->arena_size);
    put32(&p, (uint32_t)hq), put32(&p, (uint32_t)hk), put32(&p, (uint32_t)D);
    put32(&p, (uint32_t)S), put32(&p, (uint32_t)B);
    put64(&p, np), put64(&p, (uint64_t)n_entries);
    memcpy(p, &a->sm_scale, 4), p += 4;
    put32(&p, (uint32_t)G);
    const size_t offs[8] = {o_q, o_k, o_v, o_ip, o_ix, o_last, o_o, o_lse};
    for (int i = 0; i < 8; i++)
        put64(&p, offs[i]);
    /* The shape as supports() saw it (the pool sent may be renumbered). */
    put64(&p, (uint64_t)sh->num_pages), put64(&p, (uint64_t)sh->total_tokens);
    put64(&p, (uint64_t)sh->max_seq_len);
    reply r;
    if (send_all(st->sock, req, sizeof req) || recv_reply(st->sock, &r, -1)) die_like_worker(st);
    if (r.status == STATUS_EXCEPTION || r.status == STATUS_INTERNAL) {
        snprintf(msg, msg_size, "%s", r.text);
        return KVF_PLUGIN_ERROR;
    }

    /* Outputs, poison and all, then their guards. */
    const uint8_t *o = A + o_o + G, *l = A + o_lse + G;
    for (int32_t b = 0; b < B; b++)
        for (int32_t h = 0; h < hq; h++)
            memcpy(a->o + b * a->o_stride_batch + h * a->o_stride_head,
                   o + ((size_t)b * hq + h) * row, row);
    for (int32_t b = 0; b < B; b++)
        memcpy(a->lse + b * a->lse_stride_batch, l + (size_t)b * hq * 4, (size_t)hq * 4);
    const int o_dense = a->o && a->o_stride_head == D && a->o_stride_batch == (int64_t)hq * D;
    const int l_dense = a->lse && a->lse_stride_batch == hq;
    int oob = 0;
    uint8_t *ho = o_dense ? (uint8_t *)a->o : NULL, *hl = l_dense ? (uint8_t *)a->lse : NULL;
    oob |= mirror_guard(A + o_o, ho ? ho - G : NULL);
    oob |= mirror_guard(o + (size_t)n_o * 2, ho ? ho + (size_t)n_o * 2 : NULL);
    const int o_oob = oob;
    oob |= mirror_guard(A + o_lse, hl ? hl - G : NULL);
    oob |= mirror_guard(l + (size_t)n_lse * 4, hl ? hl + (size_t)n_lse * 4 : NULL);
    if (oob && !(o_dense && l_dense)) {
        snprintf(msg, msg_size,
                 "out-of-bounds write: the Python kernel changed the guard bytes "
                 "around %s",
                 o_oob ? "output" : "lse");
        return KVF_PLUGIN_ERROR;
    }

    /* Inputs the function changed: the same change, made to the host's buffers. */
    for (int32_t b = 0; b < B; b++)
        for (int32_t h = 0; h < hq; h++) {
            uint16_t *dst = (uint16_t *)a->q + b * a->q_stride_batch + h * a->q_stride_head;
            const uint8_t *src = A + o_q + ((size_t)b * hq + h) * row;
            if (memcmp(dst, src, row)) memcpy(dst, src, row);
        }
    for (size_t i = 0; i < np; i++) {
        const int64_t pg = full ? (int64_t)i : st->pages[i];
        for (int32_t s = 0; s < S; s++)
            for (int32_t g = 0; g < hk; g++) {
                const int64_t at =
                    pg * a->kv_stride_page + s * a->kv_stride_slot + g * a->kv_stride_head;
                const size_t src = i * page_bytes + ((size_t)s * hk + g) * row;
                if (memcmp(a->k_cache + at, A + o_k + src, row))
                    memcpy((uint16_t *)a->k_cache + at, A + o_k + src, row);
                if (memcmp(a->v_cache + at, A + o_v + src, row))
                    memcpy((uint16_t *)a->v_cache + at, A + o_v + src, row);
            }
    }
    if (memcmp(a->kv_indptr, A + o_ip, (size_t)(B + 1) * 4))
        memcpy((int32_t *)a->kv_indptr, A + o_ip, (size_t)(B + 1) * 4);
    if (B && memcmp(a->kv_last_page_len, A + o_last, (size_t)B * 4))
        memcpy((int32_t *)a->kv_last_page_len, A + o_last, (size_t)B * 4);
    for (int64_t i = 0; i < n_entries; i++) {
        const int32_t sent = full ? a->kv_indices[i] : compact_id(st, np, a->kv_indices[i]);
        if (ix[i] == sent) continue;
        /* A renumbered id written back names the original page; anything else goes as is. */
        ((int32_t *)a->kv_indices)[i] =
            !full && ix[i] >= 0 && (size_t)ix[i] < np ? st->pages[ix[i]] : ix[i];
    }
    return KVF_PLUGIN_OK;
}

static void py_describe(void *state, char *buf, size_t buf_size) {
    const pystate *st = state;
    snprintf(buf, buf_size, "%s", st ? st->facts : "");
}

/* ---- building the kernel ------------------------------------------------------------------ */

int kvf__python_kernel_spec(const char *spec) {
    size_t n = strlen(spec);
    return strncmp(spec, "python:", 7) == 0 || (n > 5 && strcmp(spec + n - 5, ".json") == 0);
}

void kvf__python_kernel_free(kvf_kernel *kernel) {
    pyk *k = (pyk *)kernel;
    if (!k) return;
    free(k->name);
    free(k->description);
    free(k->python);
    free(k->worker);
    for (int i = 0; i < k->ntarget; i++)
        free(k->target[i]);
    kvf__solution_free(&k->solution);
    free(k->precision);
    /* Only the process that made the kernel owns its probe: in a forked copy the socket's
     * number may name something else by now. */
    if (k->owner == getpid()) stop_python(k->probe_pid, k->probe_sock);
    pthread_mutex_destroy(&k->probe_mu);
    free(k);
}

static int set_target(pyk *k, const char *const *argv, int n) {
    for (int i = 0; i < n; i++)
        if (!(k->target[k->ntarget++] = dup_str(argv[i]))) return -1;
    return 0;
}

int kvf__python_kernel_make(const char *spec, kvf_kernel **out, kvf_error *err) {
    *out = NULL;
    pyk *k = calloc(1, sizeof *k);
    if (!k) return kvf_error_set(err, KVF_ENOMEM, "out of memory");
    pthread_mutex_init(&k->probe_mu, NULL);
    k->owner = getpid();
    k->probe_sock = -1;
    int rc = 0;
    if (strncmp(spec, "python:", 7) == 0) {
        const char *mod = spec + 7, *colon = strrchr(mod, ':');
        if (!colon || colon == mod || !colon[1]) {
            rc = kvf_error_set(err, KVF_EINVAL, "kernel %s is not python:MODULE:FUNCTION", spec);
            goto fail;
        }
        char module[PATH_MAX];
        snprintf(module, sizeof module, "%.*s", (int)(colon - mod), mod);
        const char *argv[3] = {"module", module, colon + 1};
        if (set_target(k, argv, 3) || !(k->name = dup_str(spec))) goto nomem;
    } else if (kvf__python_kernel_spec(spec)) {
        if ((rc = kvf__solution_load(spec, &k->solution, err))) goto fail;
        const kvf__solution *s = &k->solution;
        const char *argv[5] = {"solution", s->dir, s->entry_file, s->function,
                               s->num_args == 8 ? "8" : "9"};
        if (set_target(k, argv, 5) || !(k->name = dup_str(s->name))) goto nomem;
    } else {
        rc =
            kvf_error_set(err, KVF_EINVAL,
                          "kernel %s is neither python:MODULE:FUNCTION nor a solution .json", spec);
        goto fail;
    }
    int torch = -1; /* -1: KVF_PYTHON named the interpreter */
    if ((rc = kvf__python_choose(&k->python, &torch, err)) || (rc = find_worker(&k->worker, err)))
        goto fail;
    char line[KVF_ERROR_MSG_MAX];
    if ((rc = run_check(k, line, sizeof line, err))) {
        if (torch == 0 && rc == KVF_ENOTFOUND && err && strstr(err->msg, "cannot import torch")) {
            char said[KVF_ERROR_MSG_MAX];
            snprintf(said, sizeof said, "%s", err->msg);
            rc = kvf_error_set(err, rc,
                               "%s; no python3 kvfuzz tried (the PATH's, /usr/bin/python3) "
                               "imports torch, so set KVF_PYTHON to one that does",
                               said);
        }
        goto fail;
    }
    /* Probed now, from the thread loading the kernel (the process's main thread, for the
     * command line), which the probe's death signal is tied to: a generator thread that
     * asked first could end before the campaign does. */
    if (k->has_supports) {
        char ready[KVF_ERROR_MSG_MAX], msg[KVF_ERROR_MSG_MAX];
        if (start_python(k, "probe", -1, &k->probe_pid, &k->probe_sock, ready, sizeof ready, msg,
                         sizeof msg)) {
            rc = kvf_error_set(err, KVF_EINVAL, "the supports() process of %s did not start: %s",
                               k->name, msg);
            goto fail;
        }
    }
    char desc[2 * KVF_ERROR_MSG_MAX];
    if (k->solution.name)
        snprintf(desc, sizeof desc, "FlashInfer-Bench %s solution for %s: %s", k->solution.language,
                 k->solution.definition, line);
    else
        snprintf(desc, sizeof desc, "Python kernel %s", line);
    if (!(k->description = dup_str(desc))) goto nomem;

    k->desc.struct_size = sizeof k->desc;
    k->desc.name = k->name;
    k->desc.description = k->description;
    k->desc.device = KVF_PLUGIN_DEVICE_CPU;
    k->desc.role = KVF_PLUGIN_ROLE_UNDER_TEST;
    k->desc.user = k;
    k->desc.supports = py_supports;
    k->desc.create = py_create;
    k->desc.destroy = py_destroy;
    k->desc.run = py_run;
    k->desc.describe = py_describe;
    k->kernel.name = k->name;
    k->kernel.description = k->description;
    k->kernel.device = KVF_DEVICE_CPU;
    k->kernel.desc = &k->desc;
    k->kernel.role = KVF_PLUGIN_ROLE_UNDER_TEST;
    k->kernel.release = kvf__python_kernel_free;
    k->kernel.precision = k->precision;
    if (torch >= 0) announce_choice(k->python, torch);
    *out = &k->kernel;
    return 0;
nomem:
    rc = kvf_error_set(err, KVF_ENOMEM, "out of memory");
fail:
    kvf__python_kernel_free(&k->kernel);
    return rc;
}
