/* Where Python kernels run (python_internal.h, python_kernel.h): the interpreter, chosen once
 * per process among the candidates by whether it imports torch (kvf__python_choose), and the
 * worker script kvfuzz_worker.py. */
#define _GNU_SOURCE

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "python_internal.h"

/* The source tree's worker script (kernels/CMakeLists.txt defines it for this file). */
#ifndef KVF_PYTHON_WORKER_SOURCE
#define KVF_PYTHON_WORKER_SOURCE ""
#endif

/* How long `python3 -c "import torch"` may take when choosing the interpreter: a cold import
 * of torch from a slow disk takes seconds, never a minute. */
#define TORCH_PROBE_TIMEOUT_S 60

/* ---- finding programs and the worker script ---------------------------------------------- */

static char *search_path(const char *prog) {
    if (strchr(prog, '/')) return access(prog, X_OK) == 0 ? kvf__py_dup_str(prog) : NULL;
    const char *path = getenv("PATH");
    if (!path) return NULL;
    char buf[PATH_MAX];
    for (const char *p = path; *p;) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > 0 && (size_t)snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, prog) < sizeof buf &&
            access(buf, X_OK) == 0)
            return kvf__py_dup_str(buf);
        p += n + (end ? 1 : 0);
    }
    return NULL;
}

/* KVF_PYTHON_WORKER, else installed beside the executable (bin/../share/kvfuzz/python), else
 * the source tree's copy (a build run from its build folder). */
int kvf__py_find_worker(char **out, kvf_error *err) {
    const char *env = getenv("KVF_PYTHON_WORKER");
    if (env && *env) {
        if (access(env, R_OK) != 0)
            return kvf_error_set(err, KVF_ENOTFOUND,
                                 "KVF_PYTHON_WORKER names %s, which cannot be read", env);
        return (*out = kvf__py_dup_str(env)) ? 0 : kvf_error_set(err, KVF_ENOMEM, "out of memory");
    }
    char exe[PATH_MAX], buf[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(buf, sizeof buf, "%s/../share/kvfuzz/python/kvfuzz_worker.py", exe);
        if (access(buf, R_OK) == 0)
            return (*out = kvf__py_dup_str(buf)) ? 0
                                                 : kvf_error_set(err, KVF_ENOMEM, "out of memory");
    }
    if (*KVF_PYTHON_WORKER_SOURCE && access(KVF_PYTHON_WORKER_SOURCE, R_OK) == 0)
        return (*out = kvf__py_dup_str(KVF_PYTHON_WORKER_SOURCE))
                   ? 0
                   : kvf_error_set(err, KVF_ENOMEM, "out of memory");
    return kvf_error_set(err, KVF_ENOTFOUND,
                         "the Python worker script kvfuzz_worker.py is not installed beside "
                         "kvfuzz (share/kvfuzz/python); set KVF_PYTHON_WORKER");
}

/* ---- choosing the interpreter ------------------------------------------------------- */

/* Whether `python` imports torch: one short-lived `python -c "import torch"`, its output
 * discarded, killed past TORCH_PROBE_TIMEOUT_S (a hung import counts as no torch). */
static int imports_torch(const char *python) {
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (devnull < 0) return 0;
    char *argv[] = {(char *)python, "-c", "import torch", NULL};
    fflush(NULL);
    pid_t pid = kvf__py_spawn(argv, NULL, 0, devnull);
    close(devnull);
    if (pid < 0) return 0;
    int status = kvf__py_reap(pid, TORCH_PROBE_TIMEOUT_S);
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
            cands[1] = kvf__py_dup_str("/usr/bin/python3");
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
    else if (!(*python = kvf__py_dup_str(kvf__choice)))
        rc = kvf_error_set(err, KVF_ENOMEM, "out of memory");
    if (torch) *torch = kvf__choice_torch;
    pthread_mutex_unlock(&kvf__choice_mu);
    return rc;
}

/* Prints the default interpreter's choice on stderr, the first time a kernel loads under it in
 * this process (a load error says which interpreter failed in its own sentence). */
void kvf__py_announce_choice(const char *python, int torch) {
    pthread_mutex_lock(&kvf__choice_mu);
    int first = !kvf__choice_announced;
    kvf__choice_announced = 1;
    pthread_mutex_unlock(&kvf__choice_mu);
    if (first)
        fprintf(stderr, "kvfuzz: python kernels run under %s (%s)\n", python,
                torch ? "imports torch" : "no python3 kvfuzz tried imports torch");
}
