/* The plugin probe process (plugin_probe.h). Protocol over a socket pair, host byte order:
 *   probe -> parent, once: {int32 rc, uint32 count, uint32 msglen} msg, then count kernel
 *                          records (kvf__probe_kernel)
 *   parent -> probe:       {uint32 index, kvf_plugin_shape}
 *   probe -> parent:       {int32 answer, char why[256]} */
#include "plugin_probe.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "plugin_load.h"

#define PROBE_ANSWER_S 10 /* a supports() that takes longer is treated as a dead probe */

struct kvf__probe {
    pid_t pid;
    int fd;
    int dead;
    int refs;
    pthread_mutex_t mu;
};

typedef struct hello {
    int32_t rc;
    uint32_t count, msglen;
} hello;

typedef struct question {
    uint32_t index;
    kvf_plugin_shape shape;
} question;

typedef struct answer {
    int32_t yes;
    char why[256];
} answer;

static int write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* How long loading a library and its descriptor may take in the probe. */
enum { kProbeLoadSeconds = 60 };

/* deadline_s < 0: wait forever. -1 when the peer is gone or fails, -2 when nothing came for
 * deadline_s seconds. */
static int read_all(int fd, void *p, size_t n, int deadline_s) {
    char *c = p;
    while (n) {
        if (deadline_s >= 0) {
            struct pollfd pfd = {fd, POLLIN, 0};
            int pr = poll(&pfd, 1, deadline_s * 1000);
            if (pr < 0 && errno == EINTR) continue;
            if (pr == 0) return -2;
            if (pr < 0) return -1;
        }
        ssize_t r = recv(fd, c, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

static void probe_main(int fd, const char *path) {
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    signal(SIGINT, SIG_IGN);
    /* A plugin must not print to stdout; if it does, the text must not mix into kvfuzz's. */
    dup2(2, 1);
    kvf__plugin_lib lib;
    kvf_error err = {0};
    int rc = kvf__plugin_open(path, &lib, &err);
    hello h = {rc, rc ? 0 : lib.desc->num_kernels, rc ? (uint32_t)strlen(err.msg) : 0};
    if (write_all(fd, &h, sizeof h) || (h.msglen && write_all(fd, err.msg, h.msglen))) _exit(1);
    if (rc) _exit(0);
    for (uint32_t i = 0; i < h.count; i++) {
        const kvf_plugin_kernel *k = kvf__plugin_kernel_at(lib.desc, i);
        kvf__probe_kernel rec;
        memset(&rec, 0, sizeof rec);
        snprintf(rec.name, sizeof rec.name, "%s", k->name);
        snprintf(rec.description, sizeof rec.description, "%s",
                 k->description ? k->description : "");
        const char *precision = kvf__plugin_kernel_precision(k);
        snprintf(rec.precision, sizeof rec.precision, "%s", precision ? precision : "");
        const char *promises = kvf__plugin_kernel_promises(k);
        snprintf(rec.promises, sizeof rec.promises, "%s", promises ? promises : "");
        const char *models = kvf__plugin_kernel_models(k);
        snprintf(rec.models, sizeof rec.models, "%s", models ? models : "");
        rec.device = k->device;
        rec.role = k->role;
        if (write_all(fd, &rec, sizeof rec)) _exit(1);
    }
    for (;;) {
        question q;
        if (read_all(fd, &q, sizeof q, -1)) _exit(0);
        answer a;
        memset(&a, 0, sizeof a);
        const kvf_plugin_kernel *k = kvf__plugin_kernel_at(lib.desc, q.index);
        if (k) {
            a.yes = kvf__plugin_kernel_supports(k, &q.shape, a.why, sizeof a.why - 1);
            a.why[sizeof a.why - 1] = 0;
        }
        if (write_all(fd, &a, sizeof a)) _exit(0);
    }
}

int kvf__probe_start(const char *path, kvf__probe **out, kvf__probe_kernel **kernels,
                     uint32_t *count, kvf_error *err) {
    *out = NULL;
    *kernels = NULL;
    *count = 0;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return kvf_error_set(err, KVF_EIO, "cannot create a socket for the plugin probe: %s",
                             strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return kvf_error_set(err, KVF_EIO, "cannot start the plugin probe: %s", strerror(errno));
    }
    if (pid == 0) {
        close(sv[0]);
        probe_main(sv[1], path);
        _exit(0);
    }
    close(sv[1]);
    kvf__probe *p = calloc(1, sizeof *p);
    hello h;
    int rc = 0;
    if (!p) {
        rc = kvf_error_set(err, KVF_ENOMEM, "out of memory for the plugin probe");
    } else if ((rc = read_all(sv[0], &h, sizeof h, kProbeLoadSeconds)) != 0) {
        int status = 0;
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        if (rc == -2)
            rc = kvf_error_set(err, KVF_EINVAL,
                               "plugin %s could not be loaded: loading it and calling "
                               "kvf_plugin_v1 did not finish within %d s",
                               path, kProbeLoadSeconds);
        else
            rc = kvf_error_set(err, KVF_EINVAL,
                               "plugin %s could not be loaded: the process loading it %s %d", path,
                               WIFSIGNALED(status) ? "was killed by signal" : "exited with status",
                               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        pid = 0;
    } else if (h.rc) {
        char msg[KVF_ERROR_MSG_MAX] = {0};
        uint32_t n = h.msglen < sizeof msg - 1 ? h.msglen : (uint32_t)sizeof msg - 1;
        read_all(sv[0], msg, n, 5);
        rc = kvf_error_set(err, h.rc, "%s", msg);
    } else {
        *kernels = calloc(h.count ? h.count : 1, sizeof **kernels);
        if (!*kernels || read_all(sv[0], *kernels, h.count * sizeof **kernels, 10))
            rc = kvf_error_set(err, KVF_EIO, "plugin %s: the probe did not list its kernels", path);
        else
            *count = h.count;
    }
    if (rc) {
        free(*kernels);
        *kernels = NULL;
        free(p);
        close(sv[0]);
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
        }
        return rc;
    }
    p->pid = pid;
    p->fd = sv[0];
    p->refs = 1;
    pthread_mutex_init(&p->mu, NULL);
    *out = p;
    return 0;
}

int kvf__probe_supports(kvf__probe *p, uint32_t index, const kvf_plugin_shape *shape, char *why,
                        size_t why_size) {
    pthread_mutex_lock(&p->mu);
    int rc = KVF_EIO;
    if (!p->dead) {
        question q;
        memset(&q, 0, sizeof q);
        q.index = index;
        q.shape = *shape;
        answer a;
        if (write_all(p->fd, &q, sizeof q) == 0 &&
            read_all(p->fd, &a, sizeof a, PROBE_ANSWER_S) == 0) {
            rc = a.yes;
            a.why[sizeof a.why - 1] = 0;
            if (!a.yes && why && why_size) snprintf(why, why_size, "%s", a.why);
        } else {
            p->dead = 1;
            kill(p->pid, SIGKILL);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void kvf__probe_retain(kvf__probe *p) {
    pthread_mutex_lock(&p->mu);
    p->refs++;
    pthread_mutex_unlock(&p->mu);
}

void kvf__probe_stop(kvf__probe *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    int last = --p->refs == 0;
    pthread_mutex_unlock(&p->mu);
    if (!last) return;
    close(p->fd);
    kill(p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
