/* The wire protocol between the campaign (parent) and its kernel worker process, over one
 * AF_UNIX stream socket, in host byte order (both ends are the same binary):
 *   worker -> parent, once: ready  {magic, rc, msglen, lanes} msg
 *   parent -> worker:       case   {magic, shape..., flags, seq, ...} indptr, indices,
 *                                  last_page_len, q,
 *                                  resident page ids, then each resident page's k and v
 *   worker -> parent:       result {magic, rc, seq, n_o, n_lse, kernel_s, msglen, exiting}
 *                                  msg, o (n_o bf16), lse (n_lse f32); msg is the error for a
 *                                  failed run and the kernel's plan facts for one that worked
 * The case travels as tensors (only the pages that hold data) rather than as .kvfz bytes to be
 * expanded again: copying a small case costs microseconds, generating it a fraction of a
 * millisecond, and the worker is on the critical path of every launch.
 *
 * Ownership: buffers grown here are the caller's (grown, never shrunk); a received case is
 * the caller's to kvf_case_free. Errors: -1 for a closed stream or a failed transfer, -2 for a
 * passed deadline; a case message that contradicts itself ends the worker process (it was
 * built by the parent, so the worker is unwell). */
#ifndef KVF_FUZZ_WIRE_H
#define KVF_FUZZ_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "kvfuzz/case.h"
#include "kvfuzz/error.h"

#define KVF__MAGIC_READY 0x4B565244u  /* "KVRD" */
#define KVF__MAGIC_CASE 0x4B565243u   /* "KVRC" */
#define KVF__MAGIC_RESULT 0x4B565252u /* "KVRR" */

typedef struct kvf__ready_msg {
    uint32_t magic;
    int32_t rc;
    uint32_t msglen;
    uint32_t lanes; /* kernel states the worker runs at once (runner.h) */
} kvf__ready_msg;

/* kvf__case_msg.flags: run this case alone, with no other case of the worker running beside
 * it (a failure seen while several ran is re-run this way to find whose it is). */
#define KVF__CASE_ALONE 1u
/* ... and: this case is the graph-replay relation's second run (kvfuzz/relation.h): the worker
 * derives the capture case from it with graph_seed and runs kvf_kernel_graph_replay. Always
 * with KVF__CASE_ALONE (the graph owns the state's buffers from capture to replay). */
#define KVF__CASE_GRAPH 2u

typedef struct kvf__case_msg {
    uint32_t magic;
    int32_t num_qo_heads, num_kv_heads, head_dim, page_size, batch_size;
    float sm_scale;
    uint32_t flags; /* KVF__CASE_* */
    uint64_t seq;
    int64_t num_pages, entries, num_resident;
    uint64_t graph_seed; /* KVF__CASE_GRAPH: the relation's seed */
    kvf_layout layout;   /* the case's buffer layout */
    kvf_kv_quant quant;  /* the caches' dtypes and scale granularity */
} kvf__case_msg;

typedef struct kvf__result_msg {
    uint32_t magic;
    int32_t rc;
    uint64_t seq;
    uint64_t n_o, n_lse;
    double kernel_s;
    uint32_t msglen;
    uint32_t exiting;
} kvf__result_msg;

double kvf__wire_now_s(void);

/* Blocking, whole: 0 done, -1 end of stream or error, -2 deadline (monotonic seconds) passed;
 * deadline < 0 waits forever. */
int kvf__wire_send_all(int fd, const void *data, size_t size);
int kvf__wire_recv_all(int fd, void *data, size_t size, double deadline);

/* Sends (sending != 0) or receives exactly the bytes the iovecs describe, blocking; the
 * iovecs are consumed. 0 done, -1 end of stream or error. */
int kvf__wire_transfer_iov(int fd, struct iovec *iov, int n, int sending);

/* Grows *buf to at least need bytes. 0, or -1 when memory ran out. */
int kvf__wire_grow(void **buf, size_t *cap, size_t need);

/* A case message ready to send: the header, tables, q and resident page ids in `head` (this
 * side's copy), then the k and v of each resident page, read in place from the case. Only
 * pages that hold data travel; the rest reads as zero on both sides. The case must stay alive
 * and unchanged while the message may still be sent (a rewind sends it again). Buffers are
 * grown, never shrunk, and freed by kvf__wire_case_free. */
typedef struct kvf__case_message {
    uint8_t *head;
    size_t head_cap;
    struct iovec *iov;      /* [niov]: head, then k and v of each resident page */
    size_t niov, iov_bytes; /* iovecs used, bytes allocated */
    size_t size, sent;      /* bytes in all, bytes sent so far */
    size_t cur, cur_off;    /* where sending resumes: iovec, byte within it */
} kvf__case_message;

/* Builds the message of case c with sequence number seq, unsent. 0, or -1 when memory ran
 * out. */
int kvf__wire_case_message(kvf__case_message *msg, const kvf_case *c, uint64_t seq);

/* Marks the whole message unsent again (a fresh worker gets it from the start). */
void kvf__wire_case_rewind(kvf__case_message *msg);

/* One non-blocking sendmsg of the rest: bytes sent (0 when none was left), or -1 with errno
 * (EAGAIN when the socket is full). */
ssize_t kvf__wire_case_send_some(int fd, kvf__case_message *msg);

void kvf__wire_case_free(kvf__case_message *msg);

/* Sets KVF__CASE_* flags in a case message's header (kvf__case_message.head). */
void kvf__wire_case_add_flags(uint8_t *msg, uint32_t flags);
/* Marks a case message as the graph-replay relation's run with its seed (and alone). */
void kvf__wire_case_set_graph(uint8_t *msg, uint64_t seed);

/* What receiving a case gave. */
enum { KVF__CASE_NONE, KVF__CASE_READY, KVF__CASE_END, KVF__CASE_UNHOLDABLE };

typedef struct kvf__received_case {
    int kind; /* a case to run, the end of the stream, or a case that could not be held */
    uint64_t seq;
    uint32_t flags;      /* KVF__CASE_* */
    uint64_t graph_seed; /* KVF__CASE_GRAPH: the relation's seed */
    kvf_case c;
    kvf_error err;                   /* KVF__CASE_UNHOLDABLE: why */
    double wait_parent_s, receive_s; /* KVF_WORKER_TIMING: blocked on the socket, then taking
                                        the case in */
} kvf__received_case;

/* Receives one case (fresh pools, built under limits) into rc. */
void kvf__wire_receive_case(int fd, const kvf_limits *limits, kvf__received_case *rc);

/* One result message; exits the process (status 3) when the parent is gone. */
void kvf__wire_reply(int fd, int32_t rc, uint64_t seq, const kvf_error *err, const char *plan,
                     int64_t n_o, int64_t n_lse, const kvf_bf16 *o, const float *lse,
                     double kernel_s, int exiting);

#endif
