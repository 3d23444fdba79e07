/* Python kernels (python_kernel.h): the descriptor and building a kernel. The persistent
 * Python worker and the shared-memory protocol it speaks (kvfuzz_worker.py documents the other
 * side) live beside this file: python_internal.h lists the files.
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
#define _GNU_SOURCE /* memfd_create, pipe2 */

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
#include <sys/wait.h>
#include <unistd.h>

#include "kvfuzz/kv_quant.h"
#include "kvfuzz/relation.h"
#include "python_internal.h"

#define CHECK_EXIT_NOTFOUND 3
#define CHECK_EXIT_INVALID 4
#define CHECK_TIMEOUT_S 300
#define CHECK_OK_TAG "KVFUZZ-OK\t" /* the check's line for a usable kernel */

/* ---- the check of a kernel being built ---------------------------------------------------- */

/* A malloc'd copy of the n bytes at s (n > 0), else NULL: an empty field is an absent
 * attribute. Sets *oom when out of memory. */
static char *field_dup(const char *s, size_t n, int *oom) {
    if (n == 0) return NULL;
    char *out = strndup(s, n);
    if (!out) *oom = 1;
    return out;
}

/* Reads the check's verdict for a usable kernel, "KVFUZZ-OK<TAB>precision<TAB>supports<TAB>
 * promises<TAB>kv_dtypes<TAB>scale_granularities<TAB>description", from the last line that
 * carries the tag (a module may print on import, before or, through its own exit handlers,
 * after it). Returns 0 when there is one. */
static int read_verdict(pyk *k, const char *out, char *line, size_t line_size) {
    const char *hit = NULL;
    for (const char *p = out; (p = strstr(p, CHECK_OK_TAG)); p++)
        if (p == out || p[-1] == '\n') hit = p;
    if (!hit) return -1;
    const char *end = strchr(hit, '\n');
    if (!end) end = hit + strlen(hit);
    /* The five fields before the description, each ended by a tab. */
    const char *field[5], *p = hit + strlen(CHECK_OK_TAG);
    size_t len[5];
    for (int i = 0; i < 5; i++) {
        const char *tab = memchr(p, '\t', (size_t)(end - p));
        if (!tab) return -1;
        field[i] = p, len[i] = (size_t)(tab - p);
        p = tab + 1;
    }
    int oom = 0;
    k->precision = field_dup(field[0], len[0], &oom);
    k->has_supports = len[1] == 1 && field[1][0] == '1';
    k->promises = field_dup(field[2], len[2], &oom);
    k->kv_dtypes = field_dup(field[3], len[3], &oom);
    k->scale_granularities = field_dup(field[4], len[4], &oom);
    if (oom) return -1;
    size_t n = (size_t)(end - p);
    if (n >= line_size) n = line_size - 1;
    memcpy(line, p, n);
    line[n] = 0;
    return 0;
}

/* The mask of names in `list` (joined by ','; NULL: none) as `parse` gives their codes, into
 * *mask (1u << code each). KVF_EINVAL naming the function's attribute for a name it does not
 * know: the worker checks the names first, so this is a worker and a kvfuzz of different
 * versions. */
static int parse_mask(const pyk *k, const char *attr, const char *list, int (*parse)(const char *),
                      uint32_t *mask, kvf_error *err) {
    *mask = 0;
    for (const char *p = list; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)n, p);
        const int code = n < sizeof name ? parse(name) : -1;
        if (code < 0 || code >= 32)
            return kvf_error_set(err, KVF_EINVAL,
                                 "%s.%s names %.*s, which this kvfuzz does not know", k->name, attr,
                                 (int)n, p);
        *mask |= 1u << code;
        p += n + (comma ? 1 : 0);
    }
    return 0;
}

/* Runs the worker's check mode: imports torch and the target in a short-lived process, and
 * learns the function's precision model, whether it has a supports(), its promises and the
 * caches it reads. */
static int run_check(pyk *k, char *line, size_t line_size, kvf_error *err) {
    char *argv[4 + 6 + 1] = {k->python, k->worker, "check", k->python}; /* + target + NULL */
    int argc = 4;
    for (int i = 0; i < k->ntarget; i++)
        argv[argc++] = k->target[i];
    argv[argc] = NULL;
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0)
        return kvf_error_set(err, KVF_EIO, "cannot create a pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = kvf__py_spawn(argv, NULL, 0, pfd[1]);
    close(pfd[1]);
    if (pid < 0) {
        close(pfd[0]);
        return kvf_error_set(err, KVF_EIO, "cannot start %s: %s", k->python, strerror(errno));
    }
    char out[8192];
    size_t got = 0;
    double until = kvf__py_now_s() + CHECK_TIMEOUT_S;
    int timed_out = 0;
    for (;;) {
        struct pollfd p = {pfd[0], POLLIN, 0};
        double left = until - kvf__py_now_s();
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
    int status = kvf__py_reap(pid, timed_out ? 0 : CHECK_TIMEOUT_S);
    out[got] = 0;
    while (got > 0 && (out[got - 1] == '\n' || out[got - 1] == '\r' || out[got - 1] == ' '))
        out[--got] = 0;
    const char *last = strrchr(out, '\n');
    last = last ? last + 1 : out;
    kvf__py_copy_str(line, line_size, last);
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

/* ---- the descriptor ---------------------------------------------------------------------- */

/* supports() in the process that made the kernel: its probe, one question at a time. */
static int owner_supports(pyk *k, const kvf_plugin_shape *sh, char *why, size_t why_size) {
    int yes = 1;
    pthread_mutex_lock(&k->probe_mu);
    if (!k->probe_dead && k->probe_sock >= 0) {
        reply r;
        int rc = kvf__py_ask(k->probe_sock, sh, kvf__py_now_s() + SUPPORTS_TIMEOUT_S, &r);
        if (rc == 0) {
            yes = kvf__py_supports_answer(&r, why, why_size);
        } else {
            /* Generation goes on unfiltered; a launch meets the same hang or crash in the
             * kernel's worker, where it is a finding. */
            if (rc == -2) kill(k->probe_pid, SIGKILL);
            kvf__py_stop(k->probe_pid, k->probe_sock);
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
    /* A solution takes its definition's caches only: bf16 without scales, or both caches in
     * its FP8 dtype with one scale each (the gate lets bf16 through to every kernel). */
    if (k->solution.definition) {
        const int has = shape->struct_size >= offsetof(kvf_plugin_shape, scale_granularity) +
                                                  sizeof shape->scale_granularity;
        const int32_t kd = has ? shape->k_dtype : 0, vd = has ? shape->v_dtype : 0;
        const int32_t gr = has ? shape->scale_granularity : 0, dt = s->kv_dtype;
        const int32_t want_gr = kvf_kv_dtype_is_fp8(dt) ? KVF_SCALE_TENSOR : KVF_SCALE_NONE;
        if (kd != dt || vd != dt || gr != want_gr) {
            if (why && why_size)
                snprintf(why, why_size,
                         "definition %s takes %s caches%s, not k %s and v %s with %s scales",
                         s->definition, kvf_kv_dtype_name(dt), want_gr ? " with tensor scales" : "",
                         kvf_kv_dtype_name(kd), kvf_kv_dtype_name(vd),
                         kvf_scale_granularity_name(gr));
            return 0;
        }
    }
    if (!k->has_supports) return 1;
    const pid_t self_pid = getpid();
    if (self_pid == k->owner) return owner_supports(k, shape, why, why_size);
    if (k->live && k->live_pid == self_pid) {
        /* The buffer host asks right before a launch: the worker that will run it answers. */
        reply r;
        if (kvf__py_ask(k->live->sock, shape, -1, &r)) kvf__py_die_like_worker(k->live);
        return kvf__py_supports_answer(&r, why, why_size);
    }
    /* Another process with no worker of its own: a probe for this one question. */
    pid_t pid;
    int sock;
    char ready[KVF_ERROR_MSG_MAX], msg[KVF_ERROR_MSG_MAX];
    if (kvf__py_start(k, "probe", -1, &pid, &sock, ready, sizeof ready, msg, sizeof msg)) return 1;
    reply r;
    int rc = kvf__py_ask(sock, shape, kvf__py_now_s() + SUPPORTS_TIMEOUT_S, &r);
    if (rc == -2) kill(pid, SIGKILL);
    kvf__py_stop(pid, sock);
    return rc ? 1 : kvf__py_supports_answer(&r, why, why_size);
}

static void py_destroy(void *state) {
    pystate *st = state;
    if (!st) return;
    pyk *k = (pyk *)st->cfg;
    if (k->live == st && k->live_pid == getpid()) k->live = NULL;
    kvf__py_stop(st->pid, st->sock); /* the worker reads end of stream and exits */
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
    if (kvf__py_start(k, "serve", st->memfd, &st->pid, &st->sock, ready, sizeof ready, msg,
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
    free(k->promises);
    free(k->kv_dtypes);
    free(k->scale_granularities);
    /* Only the process that made the kernel owns its probe: in a forked copy the socket's
     * number may name something else by now. */
    if (k->owner == getpid()) kvf__py_stop(k->probe_pid, k->probe_sock);
    pthread_mutex_destroy(&k->probe_mu);
    free(k);
}

static int set_target(pyk *k, const char *const *argv, int n) {
    for (int i = 0; i < n; i++)
        if (!(k->target[k->ntarget++] = kvf__py_dup_str(argv[i]))) return -1;
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
        if (set_target(k, argv, 3) || !(k->name = kvf__py_dup_str(spec))) goto nomem;
    } else if (kvf__python_kernel_spec(spec)) {
        if ((rc = kvf__solution_load(spec, &k->solution, err))) goto fail;
        const kvf__solution *s = &k->solution;
        /* An FP8 definition's function takes the scales, and the worker names its dtype. */
        static const char *const nargs[4] = {"8", "9", "10", "11"};
        const char *argv[6] = {"solution",
                               s->dir,
                               s->entry_file,
                               s->function,
                               nargs[s->num_args - 8],
                               kvf_kv_dtype_name(s->kv_dtype)};
        if (set_target(k, argv, s->num_args >= 10 ? 6 : 5) || !(k->name = kvf__py_dup_str(s->name)))
            goto nomem;
    } else {
        rc =
            kvf_error_set(err, KVF_EINVAL,
                          "kernel %s is neither python:MODULE:FUNCTION nor a solution .json", spec);
        goto fail;
    }
    int torch = -1; /* -1: KVF_PYTHON named the interpreter */
    if ((rc = kvf__python_choose(&k->python, &torch, err)) ||
        (rc = kvf__py_find_worker(&k->worker, err)))
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
    unsigned promised;
    kvf_error perr = {0};
    if (k->promises && kvf_relation_promises_parse(k->promises, &promised, &perr)) {
        rc = kvf_error_set(err, KVF_EINVAL, "%s.kvfuzz_promises: %s", k->name, perr.msg);
        goto fail;
    }
    /* The caches it reads: the descriptor's masks, which gate every case before supports(). */
    uint32_t dtypes, grans;
    if ((rc = parse_mask(k, "kvfuzz_kv_dtypes", k->kv_dtypes, kvf_kv_dtype_parse, &dtypes, err)) ||
        (rc = parse_mask(k, "kvfuzz_scale_granularities", k->scale_granularities,
                         kvf_scale_granularity_parse, &grans, err)))
        goto fail;
    /* Probed now, from the thread loading the kernel (the process's main thread, for the
     * command line), which the probe's death signal is tied to: a generator thread that
     * asked first could end before the campaign does. */
    if (k->has_supports) {
        char ready[KVF_ERROR_MSG_MAX], msg[KVF_ERROR_MSG_MAX];
        if (kvf__py_start(k, "probe", -1, &k->probe_pid, &k->probe_sock, ready, sizeof ready, msg,
                          sizeof msg)) {
            rc = kvf_error_set(err, KVF_EINVAL, "the supports() process of %s did not start: %s",
                               k->name, msg);
            goto fail;
        }
    }
    /* The check's line ends with "on cpu" or "on cuda". */
    const size_t line_len = strlen(line);
    k->on_gpu = line_len >= 8 && strcmp(line + line_len - 8, " on cuda") == 0;
    char desc[2 * KVF_ERROR_MSG_MAX];
    if (k->solution.name)
        snprintf(desc, sizeof desc, "FlashInfer-Bench %s solution for %s: %s", k->solution.language,
                 k->solution.definition, line);
    else if (dtypes & ~1u)
        snprintf(desc, sizeof desc, "Python kernel %s, FP8 caches %s with %s scales", line,
                 k->kv_dtypes, k->scale_granularities);
    else
        snprintf(desc, sizeof desc, "Python kernel %s", line);
    if (!(k->description = kvf__py_dup_str(desc))) goto nomem;

    k->desc.struct_size = sizeof k->desc;
    k->desc.name = k->name;
    k->desc.description = k->description;
    k->desc.device = KVF_PLUGIN_DEVICE_CPU;
    k->desc.role = KVF_PLUGIN_ROLE_UNDER_TEST;
    k->desc.user = k;
    k->desc.supports = py_supports;
    k->desc.create = py_create;
    k->desc.destroy = py_destroy;
    k->desc.run = kvf__py_run;
    k->desc.describe = py_describe;
    k->desc.kv_dtypes = dtypes;
    k->desc.scale_granularities = grans;
    k->kernel.name = k->name;
    k->kernel.description = k->description;
    k->kernel.device = KVF_DEVICE_CPU;
    k->kernel.desc = &k->desc;
    k->kernel.role = KVF_PLUGIN_ROLE_UNDER_TEST;
    k->kernel.release = kvf__python_kernel_free;
    k->kernel.precision = k->precision;
    k->kernel.promises = k->promises;
    if (torch >= 0) kvf__py_announce_choice(k->python, torch);
    *out = &k->kernel;
    return 0;
nomem:
    rc = kvf_error_set(err, KVF_ENOMEM, "out of memory");
fail:
    kvf__python_kernel_free(&k->kernel);
    return rc;
}

int kvf__python_kernel_on_gpu(const kvf_kernel *k) {
    return ((const pyk *)k)->on_gpu;
}
