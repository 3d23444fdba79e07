/* Python kernels' private header (python_kernel.h is the interface to the rest of kernels/),
 * shared by the files of this folder and nothing else:
 *   python_kernel.c   the descriptor (supports, create, destroy, describe) and building a kernel
 *                     (the check process, kvf__python_kernel_make / _free / _spec);
 *   python_choose.c   choosing the interpreter (kvf__python_choose) and finding the worker
 *                     script;
 *   python_process.c  Python processes: spawning and reaping them, the socket protocol of the
 *                     worker (kvfuzz_worker.py documents the other side), starting and stopping
 *                     a worker or a probe, asking supports();
 *   python_run.c      one run: the shared-memory arena, the request, and what the function did
 *                     mirrored back onto the host's buffers.
 * This header owns the kernel and its per-process state (pyk, pystate), the protocol's
 * constants and its reply, and the declarations of what one of those files defines for another
 * (kvf__py_*). Each file defines _GNU_SOURCE before any include (memfd_create, close_range,
 * pipe2). */
#ifndef KVFUZZ_PYTHON_INTERNAL_H
#define KVFUZZ_PYTHON_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "python_kernel.h"
#include "solution.h"

/* ---- the protocol (struct formats of kvfuzz_worker.py) ------------------------------------- */

#define REQUEST_MAGIC "KVFQ"
#define REPLY_MAGIC "KVFA"
#define REQUEST_SIZE 248 /* struct "<4sIQiiiiiqqfi8Qqqq8qiiiQQq" of kvfuzz_worker.py */
#define SUPPORTS_MAGIC "KVFS"
#define SUPPORTS_SIZE 136 /* "<4siiiiiqqqqf8qiii" */
#define REPLY_SIZE 12     /* "<4sII" */
#define STATUS_OK 0
#define STATUS_EXCEPTION 1
#define STATUS_INTERNAL 2
/* A supports() slower than this is taken for hung: its probe is stopped and shapes are no
 * longer filtered before they run (a launch then meets the hang under its own deadline). */
#define SUPPORTS_TIMEOUT_S 60

typedef struct reply {
    uint32_t status;
    char text[KVF_ERROR_MSG_MAX];
} reply;

/* Little-endian fields of a request, written at *p, which moves past them. */
static inline void kvf__py_put32(uint8_t **p, uint32_t v) {
    memcpy(*p, &v, 4);
    *p += 4;
}

static inline void kvf__py_put64(uint8_t **p, uint64_t v) {
    memcpy(*p, &v, 8);
    *p += 8;
}

/* ---- the kernel and its configuration -------------------------------------------------- */

typedef struct pystate pystate;

typedef struct pyk {
    kvf_kernel kernel; /* first: kvf__python_kernel_free casts back */
    kvf_plugin_kernel desc;
    char *name, *description;
    char *python, *worker;
    char *target[6]; /* worker argv naming the function: module NAME FN | solution DIR FILE FN
                        NARGS [KV_DTYPE] */
    int ntarget;
    kvf__solution solution; /* zeroed for python:MODULE:FUNCTION */
    char *precision;        /* fn.kvfuzz_precision; NULL when absent (f32) */
    char *promises;         /* fn.kvfuzz_promises; NULL when absent (the defaults) */
    /* fn.kvfuzz_kv_dtypes and fn.kvfuzz_scale_granularities as the check gave them (names
     * joined by ','), parsed into desc.kv_dtypes and desc.scale_granularities; NULL when
     * absent (bf16 caches only). */
    char *kv_dtypes, *scale_granularities;
    int has_supports; /* fn.kvfuzz_supports exists */
    int on_gpu;       /* the check's torch device was cuda */
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

/* The descriptor's state: one Python worker and the shared memory it maps. */
struct pystate {
    const pyk *cfg;
    pid_t pid;
    int sock, memfd;
    uint8_t *arena;
    size_t arena_size;
    int32_t *pages; /* compact mode: the referenced page ids, sorted */
    size_t pages_cap;
    char device[16];
    char facts[128];
};

/* ---- python_process.c ----------------------------------------------------------------------- */

/* A malloc'd copy of s (NULL when out of memory). */
char *kvf__py_dup_str(const char *s);
/* Copies src into dst[n], cut short where it does not fit (messages are one line anyway). */
void kvf__py_copy_str(char *dst, size_t n, const char *src);
/* Seconds on the monotonic clock. */
double kvf__py_now_s(void);

/* Forks and execs `argv` with keep[0..nkeep) (at most 4) as fds 3, 4, ... and every other fd
 * above 2 closed; stdout and stderr go to out_fd (stdout to stderr when out_fd < 0, since a
 * kernel must never print on kvfuzz's stdout). The child gets SIGKILL when the thread that
 * forked it ends, which in kvfuzz is the worker process's main thread. Returns the child's pid,
 * or -1 when fork fails. */
pid_t kvf__py_spawn(char *const argv[], const int *keep, int nkeep, int out_fd);
/* Waits up to `seconds` for pid to end, then kills it; returns its wait status (-1 when it
 * cannot be waited for). */
int kvf__py_reap(pid_t pid, double seconds);

/* Sends all n bytes (0, or -1 when the peer is gone). */
int kvf__py_send_all(int fd, const void *data, size_t n);
/* Reads one reply: 0 done, -1 end of stream or a malformed reply, -2 past the deadline
 * (deadline < 0: none). */
int kvf__py_recv_reply(int fd, reply *r, double deadline);
/* The Python worker is gone in the middle of a launch: ends this process the same way, so the
 * runner files a crash finding with the Python process's signal or exit status. */
void kvf__py_die_like_worker(pystate *st);

/* Starts kvfuzz_worker.py in `mode`: "serve" with the shared memory memfd, or "probe" (memfd
 * < 0), which answers supports() only. Waits for its ready line (into ready). Returns 0 with
 * *pid and *sock set, or -1 with one sentence in msg and nothing left running. */
int kvf__py_start(const pyk *k, const char *mode, int memfd, pid_t *pid, int *sock, char *ready,
                  size_t ready_size, char *msg, size_t msg_size);
/* Ends a worker or probe: at end of stream it exits; reaped, killed past 2 s. */
void kvf__py_stop(pid_t pid, int sock);
/* Asks a worker's or probe's supports() about a shape: 0 with its reply in r, -1 when the
 * process is gone, -2 past the deadline (< 0: none). */
int kvf__py_ask(int sock, const kvf_plugin_shape *sh, double deadline, reply *r);
/* The answer in a supports reply: 1 accepted, 0 declined (the reason into why). An exception
 * accepts: the launch asks again and reports it as the kernel's error. */
int kvf__py_supports_answer(const reply *r, char *why, size_t why_size);

/* ---- python_choose.c ------------------------------------------------------------------------ */

/* The worker script: KVF_PYTHON_WORKER, else installed beside the executable
 * (bin/../share/kvfuzz/python), else the source tree's copy (a build run from its build
 * folder). Into *out (the caller frees it); KVF_ENOTFOUND, KVF_ENOMEM. */
int kvf__py_find_worker(char **out, kvf_error *err);
/* Prints the default interpreter's choice on stderr, the first time a kernel loads under it in
 * this process (a load error says which interpreter failed in its own sentence). */
void kvf__py_announce_choice(const char *python, int torch);

/* ---- python_run.c --------------------------------------------------------------------------- */

/* The descriptor's run(): one launch through the worker (plugin.h's contract). */
int kvf__py_run(void *state, const kvf_plugin_args *a, char *msg, size_t msg_size);

#endif
