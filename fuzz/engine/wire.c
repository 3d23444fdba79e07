/* The wire protocol (wire.h): whole transfers over the worker socket, and the case and
 * result messages. */
#include "wire.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

double kvf__wire_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int kvf__wire_send_all(int fd, const void *data, size_t size) {
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
int kvf__wire_recv_all(int fd, void *data, size_t size, double deadline) {
    uint8_t *p = data;
    while (size) {
        if (deadline >= 0) {
            /* Past the deadline, data already waiting still counts: the caller may simply
             * have come back late. */
            double left = deadline - kvf__wire_now_s();
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

int kvf__wire_grow(void **buf, size_t *cap, size_t need) {
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
int kvf__wire_transfer_iov(int fd, struct iovec *iov, int n, int sending) {
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

int kvf__wire_case_message(kvf__case_message *msg, const kvf_case *c, uint64_t seq) {
    int64_t entries = c->kv_indptr[c->batch_size], pe = kvf_case_page_elems(c);
    size_t parts[6] = {sizeof(kvf__case_msg),
                       ((size_t)c->batch_size + 1) * sizeof *c->kv_indptr,
                       (size_t)entries * sizeof *c->kv_indices,
                       (size_t)c->batch_size * sizeof *c->kv_last_page_len,
                       (size_t)kvf_case_q_elems(c) * sizeof *c->q,
                       (size_t)c->num_resident_pages * sizeof(int64_t)};
    size_t head = 0;
    for (int i = 0; i < 6; i++)
        head += parts[i];
    /* Scales follow the pages: per-token ones for the resident pages only, in their order;
     * per-head and tensor ones whole. */
    const int per_token = c->quant.granularity == KVF_SCALE_TOKEN;
    const size_t nscale_iov =
        per_token ? 2 * (size_t)c->num_resident_pages : (c->quant.granularity ? 2 : 0);
    const size_t niov = 1 + 2 * (size_t)c->num_resident_pages + nscale_iov;
    /* Grown, never shrunk: a realloc per launch of a buffer past malloc's mmap threshold maps
     * and unmaps memory each time, and unmapping in this many-threaded process interrupts
     * every core that runs one of its threads. */
    if ((head > msg->head_cap &&
         kvf__wire_grow((void **)&msg->head, &msg->head_cap, head + head / 2 + 1)) ||
        (niov * sizeof *msg->iov > msg->iov_bytes &&
         kvf__wire_grow((void **)&msg->iov, &msg->iov_bytes,
                        (niov + niov / 2 + 1) * sizeof *msg->iov)))
        return -1;
    kvf__case_msg m = {KVF__MAGIC_CASE,
                       c->num_qo_heads,
                       c->num_kv_heads,
                       c->head_dim,
                       c->page_size,
                       c->batch_size,
                       c->sm_scale,
                       0,
                       seq,
                       c->num_pages,
                       entries,
                       c->num_resident_pages,
                       0,
                       c->layout,
                       c->quant};
    const void *src[6] = {&m,   c->kv_indptr,     c->kv_indices, c->kv_last_page_len,
                          c->q, c->resident_pages};
    size_t off = 0;
    for (int i = 0; i < 6; i++) {
        memcpy(msg->head + off, src[i], parts[i]);
        off += parts[i];
    }
    /* The pages go out from the case itself: no copy on this side but the socket's. */
    const size_t page_bytes = (size_t)pe * sizeof(kvf_bf16);
    msg->iov[0] = (struct iovec){msg->head, head};
    for (int64_t i = 0; i < c->num_resident_pages; i++) {
        int64_t p = c->resident_pages[i];
        msg->iov[1 + 2 * i] = (struct iovec){(void *)(c->k_cache + p * pe), page_bytes};
        msg->iov[2 + 2 * i] = (struct iovec){(void *)(c->v_cache + p * pe), page_bytes};
    }
    size_t scale_total = 0;
    struct iovec *sc = msg->iov + 1 + 2 * c->num_resident_pages;
    if (per_token) {
        const int64_t ps = (int64_t)c->page_size * c->num_kv_heads;
        const size_t bytes = (size_t)ps * sizeof(float);
        for (int64_t i = 0; i < c->num_resident_pages; i++) {
            int64_t p = c->resident_pages[i];
            sc[2 * i] = (struct iovec){(void *)(c->k_scale + p * ps), bytes};
            sc[2 * i + 1] = (struct iovec){(void *)(c->v_scale + p * ps), bytes};
            scale_total += 2 * bytes;
        }
    } else if (c->quant.granularity) {
        sc[0] = (struct iovec){(void *)c->k_scale, c->scale_bytes};
        sc[1] = (struct iovec){(void *)c->v_scale, c->scale_bytes};
        scale_total = 2 * c->scale_bytes;
    }
    msg->niov = niov;
    msg->size = head + 2 * page_bytes * (size_t)c->num_resident_pages + scale_total;
    msg->sent = msg->cur = msg->cur_off = 0;
    return 0;
}

void kvf__wire_case_rewind(kvf__case_message *msg) {
    msg->sent = msg->cur = msg->cur_off = 0;
}

ssize_t kvf__wire_case_send_some(int fd, kvf__case_message *msg) {
    const long most = sysconf(_SC_IOV_MAX) > 0 ? sysconf(_SC_IOV_MAX) : 16;
    while (msg->cur < msg->niov && msg->iov[msg->cur].iov_len == msg->cur_off)
        msg->cur++, msg->cur_off = 0;
    if (msg->cur >= msg->niov) return 0;
    /* The first iovec starts part way; it is restored after the call, so that a resend can
     * start over. */
    struct iovec *first = &msg->iov[msg->cur];
    const struct iovec saved = *first;
    first->iov_base = (uint8_t *)first->iov_base + msg->cur_off;
    first->iov_len -= msg->cur_off;
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = first;
    const size_t left = msg->niov - msg->cur;
    mh.msg_iovlen = left < (size_t)most ? left : (size_t)most;
    ssize_t done = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    *first = saved;
    if (done <= 0) return done;
    msg->sent += (size_t)done;
    size_t adv = (size_t)done;
    while (adv > 0) {
        size_t room = msg->iov[msg->cur].iov_len - msg->cur_off;
        if (adv < room) {
            msg->cur_off += adv;
            break;
        }
        adv -= room;
        msg->cur++;
        msg->cur_off = 0;
    }
    return done;
}

void kvf__wire_case_free(kvf__case_message *msg) {
    free(msg->head);
    free(msg->iov);
    memset(msg, 0, sizeof *msg);
}

void kvf__wire_case_add_flags(uint8_t *msg, uint32_t flags) {
    kvf__case_msg m;
    memcpy(&m, msg, sizeof m);
    m.flags |= flags;
    memcpy(msg, &m, sizeof m);
}

void kvf__wire_case_set_graph(uint8_t *msg, uint64_t seed) {
    kvf__case_msg m;
    memcpy(&m, msg, sizeof m);
    m.flags |= KVF__CASE_GRAPH | KVF__CASE_ALONE;
    m.graph_seed = seed;
    memcpy(msg, &m, sizeof m);
}

void kvf__wire_receive_case(int fd, const kvf_limits *limits, kvf__received_case *rc) {
    kvf__case_msg m;
    memset(rc, 0, sizeof *rc);
    rc->kind = KVF__CASE_END;
    const double t0 = kvf__wire_now_s();
    const int got = kvf__wire_recv_all(fd, &m, sizeof m, -1);
    const double t1 = kvf__wire_now_s();
    rc->wait_parent_s = t1 - t0;
    if (got || m.magic != KVF__MAGIC_CASE) return;
    rc->seq = m.seq;
    rc->flags = m.flags;
    rc->graph_seed = m.graph_seed;
    kvf_case *c = &rc->c;
    /* Fresh pools for every case (mapped lazily, zero until written), so nothing a kernel
     * does to its input can reach the next case. */
    if (kvf_case_alloc(c, m.num_qo_heads, m.num_kv_heads, m.head_dim, m.page_size, m.batch_size,
                       m.entries, m.num_pages, limits, &rc->err)) {
        rc->kind = KVF__CASE_UNHOLDABLE;
        return;
    }
    c->sm_scale = m.sm_scale;
    c->layout = m.layout;
    if (kvf_case_set_quant(c, &m.quant, limits, &rc->err)) {
        kvf_case_free(c);
        rc->kind = KVF__CASE_UNHOLDABLE;
        return;
    }
    const int per_token = m.quant.granularity == KVF_SCALE_TOKEN;
    const int64_t pe = kvf_case_page_elems(c);
    /* The rest of the message in two vectored reads straight into place: the tables, q and the
     * resident page ids, then every page (a recv per array and per page was a large part of
     * the worker's time per case). */
    const size_t page_bytes = (size_t)pe * sizeof(kvf_bf16);
    int64_t *resident = malloc((size_t)(m.num_resident + 1) * sizeof *resident);
    struct iovec *iov = malloc((size_t)(4 * m.num_resident + 5) * sizeof *iov);
    if (!resident || !iov) _exit(4);
    struct iovec head[5] = {
        {c->kv_indptr, ((size_t)m.batch_size + 1) * sizeof *c->kv_indptr},
        {c->kv_indices, (size_t)m.entries * sizeof *c->kv_indices},
        {c->kv_last_page_len, (size_t)m.batch_size * sizeof *c->kv_last_page_len},
        {c->q, (size_t)kvf_case_q_elems(c) * sizeof *c->q},
        {resident, (size_t)m.num_resident * sizeof *resident}};
    memcpy(iov, head, sizeof head);
    int bad = kvf__wire_transfer_iov(fd, iov, 5, 0);
    for (int64_t i = 0; !bad && i < m.num_resident; i++) {
        if (resident[i] < 0 || resident[i] >= c->num_pages) _exit(5);
        iov[2 * i] = (struct iovec){c->k_cache + resident[i] * pe, page_bytes};
        iov[2 * i + 1] = (struct iovec){c->v_cache + resident[i] * pe, page_bytes};
    }
    if (!bad) bad = kvf__wire_transfer_iov(fd, iov, (int)(2 * m.num_resident), 0);
    if (!bad && per_token) {
        const int64_t ps = (int64_t)c->page_size * c->num_kv_heads;
        for (int64_t i = 0; i < m.num_resident; i++) {
            iov[2 * i] = (struct iovec){c->k_scale + resident[i] * ps, (size_t)ps * sizeof(float)};
            iov[2 * i + 1] =
                (struct iovec){c->v_scale + resident[i] * ps, (size_t)ps * sizeof(float)};
        }
        bad = kvf__wire_transfer_iov(fd, iov, (int)(2 * m.num_resident), 0);
    } else if (!bad && m.quant.granularity) {
        iov[0] = (struct iovec){c->k_scale, c->scale_bytes};
        iov[1] = (struct iovec){c->v_scale, c->scale_bytes};
        bad = kvf__wire_transfer_iov(fd, iov, 2, 0);
    }
    free(iov);
    if (!bad && kvf_case_set_resident(c, resident, m.num_resident, NULL)) _exit(4);
    free(resident);
    rc->receive_s = kvf__wire_now_s() - t1;
    if (bad) {
        kvf_case_free(c);
        return;
    }
    rc->kind = KVF__CASE_READY;
}

void kvf__wire_reply(int fd, int32_t rc, uint64_t seq, const kvf_error *err, const char *plan,
                     int64_t n_o, int64_t n_lse, const kvf_bf16 *o, const float *lse,
                     double kernel_s, int exiting) {
    kvf__result_msg m = {KVF__MAGIC_RESULT, rc, seq, 0, 0, kernel_s, 0, (uint32_t)exiting};
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
    if (kvf__wire_transfer_iov(fd, iov, 4, 1)) _exit(3);
}
