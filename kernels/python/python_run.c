/* One run of a Python kernel (python_internal.h): the case's buffers copied into the shared
 * memory arena the worker maps (the whole pool, or past FULL_POOL_BYTES its referenced pages
 * renumbered), one request over the socket, and what the function did to every copy (outputs,
 * guard bytes, inputs) mirrored back onto the host's buffers, so that the buffer host's checks
 * judge it (python_kernel.c says why).
 *
 * A function named by module gets the host's layout (docs/plugins.md, "Layouts"): the arena
 * holds each buffer as the host laid it out, padding and its poison included, and the worker
 * builds strided views with the host's strides. A FlashInfer-Bench solution gets dense copies,
 * as FlashInfer-Bench gives it contiguous tensors.
 *
 * An FP8 cache (docs/plugins.md, "FP8 caches") goes as the bytes the host packed, one per
 * element at the same strides, so the function reads what a compiled kernel reads; its scales
 * go after the outputs: 1 or Hk of each, or per page slot and KV head for the pages sent. */
#define _GNU_SOURCE

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kvfuzz/kernel_host.h"
#include "kvfuzz/kv_quant.h"
#include "python_internal.h"

#define ALIGN 256
/* A pool up to this size per cache is sent whole, so the kernel sees the page ids and the
 * poisoned unreferenced pages the case has; a larger one (cases with page ids past 2^31
 * elements) is sent as its referenced pages, renumbered. */
#define FULL_POOL_BYTES ((size_t)256 << 20)

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

/* The sizes of one run and which pages go: the whole pool, or the referenced ones renumbered
 * (st->pages). */
typedef struct run_dims {
    int32_t B, hq, hk, D, S;
    int64_t n_entries, n_o, n_lse;
    size_t row; /* bytes of a bf16 row of q or o */
    /* The caches: dtype (kvfuzz/fp8.h), bytes per element and per (slot, head) row, and bytes
     * per page in the arena (the page stride's bytes when strided). */
    int kd, vd;
    size_t kb, vb, krow, vrow, k_page_bytes, v_page_bytes;
    int full;  /* the whole pool goes */
    size_t np; /* pages sent */
    /* The scales: granularity (kvfuzz/kv_quant.h) and how many of each go (1, Hk, or np x S x
     * Hk for the pages sent; 0 without scales). */
    int gran;
    int64_t n_scale;
    /* The arena's strides, in elements: the host's (strided), else dense. Each buffer in the
     * arena spans its extent, from its first element to the end of its last: q_ext, o_ext and
     * lse_ext elements, and the page bytes above per page. */
    int strided;
    kvf_strides s;
    int64_t q_ext, o_ext, lse_ext;
} run_dims;

/* Elements from a [B][H][D] view's first element to the end of its last (0 when empty). */
static int64_t extent3(int32_t B, int32_t H, int32_t D, int64_t sb, int64_t sh) {
    return B > 0 && H > 0 ? (int64_t)(B - 1) * sb + (int64_t)(H - 1) * sh + D : 0;
}

/* The arena's strides: the host's for a function named by module, dense for a solution. */
static void arena_strides(const pystate *st, const kvf_plugin_args *a, run_dims *d) {
    d->strided = strcmp(st->cfg->target[0], "solution") != 0;
    kvf_strides *s = &d->s;
    if (d->strided) {
        *s = (kvf_strides){a->q_stride_batch, a->q_stride_head,    a->o_stride_batch,
                           a->o_stride_head,  a->lse_stride_batch, a->kv_stride_page,
                           a->kv_stride_slot, a->kv_stride_head};
    } else {
        const int64_t D = d->D;
        *s = (kvf_strides){d->hq * D, D, d->hq * D, D, d->hq, (int64_t)d->S * d->hk * D,
                           d->hk * D, D};
    }
    d->q_ext = extent3(d->B, d->hq, d->D, s->q_batch, s->q_head);
    d->o_ext = extent3(d->B, d->hq, d->D, s->o_batch, s->o_head);
    d->lse_ext = extent3(d->B, 1, d->hq, s->lse_batch, 0);
    d->k_page_bytes = (size_t)s->kv_page * d->kb;
    d->v_page_bytes = (size_t)s->kv_page * d->vb;
}

/* Where each part lies in the arena: q | k pages | v pages | indptr | indices | last | guard o
 * guard | guard lse guard | k_scale | v_scale, each part 256-byte aligned; `end` is the arena's
 * size. */
typedef struct arena_layout {
    size_t q, k, v, ip, ix, last, o, lse, ks, vs, end;
} arena_layout;

/* Scales of each cache in the arena: per-slot scales for the pages sent only. */
static void set_scale_count(run_dims *d) {
    d->n_scale = d->gran == KVF_SCALE_TOKEN    ? (int64_t)d->np * d->S * d->hk
                 : d->gran == KVF_SCALE_HEAD   ? d->hk
                 : d->gran == KVF_SCALE_TENSOR ? 1
                                               : 0;
}

/* The run's sizes and its list of pages (st->pages, sorted and unique, when not the whole
 * pool). KVF_PLUGIN_NOMEM when the list cannot grow. */
static int plan_run(pystate *st, const kvf_plugin_args *a, run_dims *d, char *msg,
                    size_t msg_size) {
    const kvf_plugin_shape *sh = a->shape;
    d->B = sh->batch_size, d->hq = sh->num_qo_heads, d->hk = sh->num_kv_heads;
    d->D = sh->head_dim, d->S = sh->page_size;
    const int64_t P = sh->num_pages;
    d->n_entries = d->B > 0 ? a->kv_indptr[d->B] : 0;
    d->row = (size_t)d->D * 2;
    d->kd = sh->k_dtype, d->vd = sh->v_dtype, d->gran = sh->scale_granularity;
    d->kb = (size_t)kvf_kv_dtype_bytes(d->kd), d->vb = (size_t)kvf_kv_dtype_bytes(d->vd);
    d->krow = (size_t)d->D * d->kb, d->vrow = (size_t)d->D * d->vb;
    d->n_o = (int64_t)d->B * d->hq * d->D, d->n_lse = (int64_t)d->B * d->hq;
    arena_strides(st, a, d);
    const size_t page_bytes = d->k_page_bytes > d->v_page_bytes ? d->k_page_bytes : d->v_page_bytes;
    d->full = (uint64_t)P * page_bytes <= FULL_POOL_BYTES;
    d->np = (size_t)P;
    if (d->full) return set_scale_count(d), 0;
    const int64_t n_entries = d->n_entries;
    if ((size_t)n_entries > st->pages_cap) {
        int32_t *p = realloc(st->pages, (size_t)n_entries * sizeof *p);
        if (!p) return snprintf(msg, msg_size, "out of memory"), KVF_PLUGIN_NOMEM;
        st->pages = p;
        st->pages_cap = (size_t)n_entries;
    }
    if (n_entries) memcpy(st->pages, a->kv_indices, (size_t)n_entries * sizeof *st->pages);
    qsort(st->pages, (size_t)n_entries, sizeof *st->pages, cmp_i32);
    size_t np = 0;
    for (int64_t i = 0; i < n_entries; i++)
        if (np == 0 || st->pages[np - 1] != st->pages[i]) st->pages[np++] = st->pages[i];
    d->np = np;
    set_scale_count(d);
    return 0;
}

static arena_layout lay_out(const run_dims *d) {
    const size_t G = KVF_HOST_GUARD_BYTES;
    arena_layout o;
    size_t off = 0;
    o.q = off, off = align_up(off + (size_t)d->q_ext * 2);
    o.k = off, off = align_up(off + d->np * d->k_page_bytes);
    o.v = off, off = align_up(off + d->np * d->v_page_bytes);
    o.ip = off, off = align_up(off + (size_t)(d->B + 1) * 4);
    o.ix = off, off = align_up(off + (size_t)d->n_entries * 4);
    o.last = off, off = align_up(off + (size_t)d->B * 4);
    o.o = off, off = align_up(off + 2 * G + (size_t)d->o_ext * 2);
    o.lse = off, off = align_up(off + 2 * G + (size_t)d->lse_ext * 4);
    o.ks = off, off = align_up(off + (size_t)d->n_scale * 4);
    o.vs = off, off = align_up(off + (size_t)d->n_scale * 4);
    o.end = off;
    return o;
}

/* The dense copies of q, the pages and the outputs' poison (a solution's arena). */
static void write_dense(const pystate *st, const kvf_plugin_args *a, const run_dims *d,
                        const arena_layout *o) {
    const size_t G = KVF_HOST_GUARD_BYTES, row = d->row;
    const int32_t B = d->B, hq = d->hq, hk = d->hk, S = d->S;
    const uint8_t *K = (const uint8_t *)a->k_cache, *V = (const uint8_t *)a->v_cache;
    uint8_t *A = st->arena;
    for (int32_t b = 0; b < B; b++)
        for (int32_t h = 0; h < hq; h++)
            memcpy(A + o->q + ((size_t)b * hq + h) * row,
                   a->q + b * a->q_stride_batch + h * a->q_stride_head, row);
    for (size_t i = 0; i < d->np; i++) {
        const int64_t p = d->full ? (int64_t)i : st->pages[i];
        for (int32_t s = 0; s < S; s++)
            for (int32_t g = 0; g < hk; g++) {
                const size_t src =
                    (size_t)(p * a->kv_stride_page + s * a->kv_stride_slot + g * a->kv_stride_head);
                const size_t at = (size_t)s * hk + g;
                memcpy(A + o->k + i * d->k_page_bytes + at * d->krow, K + src * d->kb, d->krow);
                memcpy(A + o->v + i * d->v_page_bytes + at * d->vrow, V + src * d->vb, d->vrow);
            }
    }
    fill_guard(A + o->o);
    poison(A + o->o + G, d->n_o, 2, KVF_HOST_POISON_O); /* little-endian: the low half */
    fill_guard(A + o->o + G + (size_t)d->n_o * 2);
    fill_guard(A + o->lse);
    poison(A + o->lse + G, d->n_lse, 4, KVF_HOST_POISON_LSE);
    fill_guard(A + o->lse + G + (size_t)d->n_lse * 4);
}

/* The scales between the host and the arena: into the arena (`in`), else a changed scale back
 * onto the host's (the scales are inputs: the host's check finds the change). Per-slot scales
 * go for the pages sent, in their order. */
static void copy_scales(const pystate *st, const kvf_plugin_args *a, const run_dims *d,
                        const arena_layout *o, int in) {
    if (!d->n_scale) return;
    float *host[2] = {(float *)a->k_scale, (float *)a->v_scale};
    const size_t at[2] = {o->ks, o->vs};
    const int per_page = d->gran == KVF_SCALE_TOKEN && !d->full;
    const size_t n = per_page ? (size_t)d->S * d->hk : (size_t)d->n_scale;
    for (int w = 0; w < 2; w++)
        for (size_t i = 0; i < (per_page ? d->np : 1); i++) {
            float *h = host[w] + (per_page ? (size_t)st->pages[i] * n : 0);
            uint8_t *copy = st->arena + at[w] + i * n * 4;
            if (in)
                memcpy(copy, h, n * 4);
            else if (memcmp(h, copy, n * 4))
                memcpy(h, copy, n * 4);
        }
}

/* Copies the host's buffers into the arena (the pages sent, renumbered indices in compact
 * mode) and writes the output copies' guards. */
static void write_arena(const pystate *st, const kvf_plugin_args *a, const run_dims *d,
                        const arena_layout *o) {
    const size_t G = KVF_HOST_GUARD_BYTES;
    const int32_t B = d->B;
    uint8_t *A = st->arena;
    if (d->strided) {
        /* Each buffer as the host laid it out, its padding's poison included. */
        memcpy(A + o->q, a->q, (size_t)d->q_ext * 2);
        const uint8_t *K = (const uint8_t *)a->k_cache, *V = (const uint8_t *)a->v_cache;
        for (size_t i = 0; i < d->np; i++) {
            const size_t p = (size_t)(d->full ? (int64_t)i : st->pages[i]);
            memcpy(A + o->k + i * d->k_page_bytes, K + p * d->k_page_bytes, d->k_page_bytes);
            memcpy(A + o->v + i * d->v_page_bytes, V + p * d->v_page_bytes, d->v_page_bytes);
        }
        fill_guard(A + o->o);
        memcpy(A + o->o + G, a->o, (size_t)d->o_ext * 2);
        fill_guard(A + o->o + G + (size_t)d->o_ext * 2);
        fill_guard(A + o->lse);
        memcpy(A + o->lse + G, a->lse, (size_t)d->lse_ext * 4);
        fill_guard(A + o->lse + G + (size_t)d->lse_ext * 4);
    } else {
        write_dense(st, a, d, o);
    }
    memcpy(A + o->ip, a->kv_indptr, (size_t)(B + 1) * 4);
    int32_t *ix = (int32_t *)(A + o->ix);
    for (int64_t i = 0; i < d->n_entries; i++)
        ix[i] = d->full ? a->kv_indices[i] : compact_id(st, d->np, a->kv_indices[i]);
    if (B) memcpy(A + o->last, a->kv_last_page_len, (size_t)B * 4);
    copy_scales(st, a, d, o, 1);
}

/* Sends the request for the arena's run and waits for the worker's reply into r; a worker gone
 * meanwhile ends this process (kvf__py_die_like_worker). */
static void call_worker(pystate *st, const kvf_plugin_args *a, const run_dims *d,
                        const arena_layout *o, reply *r) {
    const kvf_plugin_shape *sh = a->shape;
    uint8_t req[REQUEST_SIZE], *p = req;
    memcpy(p, REQUEST_MAGIC, 4), p += 4;
    kvf__py_put32(&p, 0);
    kvf__py_put64(&p, st->arena_size);
    kvf__py_put32(&p, (uint32_t)d->hq), kvf__py_put32(&p, (uint32_t)d->hk);
    kvf__py_put32(&p, (uint32_t)d->D);
    kvf__py_put32(&p, (uint32_t)d->S), kvf__py_put32(&p, (uint32_t)d->B);
    kvf__py_put64(&p, d->np), kvf__py_put64(&p, (uint64_t)d->n_entries);
    memcpy(p, &a->sm_scale, 4), p += 4;
    kvf__py_put32(&p, (uint32_t)KVF_HOST_GUARD_BYTES);
    const size_t offs[8] = {o->q, o->k, o->v, o->ip, o->ix, o->last, o->o, o->lse};
    for (int i = 0; i < 8; i++)
        kvf__py_put64(&p, offs[i]);
    /* The shape as supports() saw it (the pool sent may be renumbered). */
    kvf__py_put64(&p, (uint64_t)sh->num_pages), kvf__py_put64(&p, (uint64_t)sh->total_tokens);
    kvf__py_put64(&p, (uint64_t)sh->max_seq_len);
    /* The arena's strides (elements): the host's layout, or dense for a solution. */
    const int64_t strides[8] = {d->s.q_batch,   d->s.q_head,  d->s.o_batch, d->s.o_head,
                                d->s.lse_batch, d->s.kv_page, d->s.kv_slot, d->s.kv_head};
    for (int i = 0; i < 8; i++)
        kvf__py_put64(&p, (uint64_t)strides[i]);
    /* The caches' dtypes, the scales' granularity, where the scales lie and how many. */
    kvf__py_put32(&p, (uint32_t)d->kd), kvf__py_put32(&p, (uint32_t)d->vd);
    kvf__py_put32(&p, (uint32_t)d->gran);
    kvf__py_put64(&p, o->ks), kvf__py_put64(&p, o->vs), kvf__py_put64(&p, (uint64_t)d->n_scale);
    if (kvf__py_send_all(st->sock, req, sizeof req) || kvf__py_recv_reply(st->sock, r, -1))
        kvf__py_die_like_worker(st);
}

/* The outputs, poison and all, then their guards, onto the host's buffers. A changed guard byte
 * is written into the host's guard at the same place when the host's output is dense. A
 * strided output (a padded layout) has the host's padding next to its rows instead: a write
 * past an end lands as a zero in the element before the first row or after the last, where
 * the host's padding and guard checks find it, so either way the finding is an
 * out-of-bounds write. */
static int read_outputs(const pystate *st, const kvf_plugin_args *a, const run_dims *d,
                        const arena_layout *ao, char *msg, size_t msg_size) {
    const size_t G = KVF_HOST_GUARD_BYTES, row = d->row;
    const int32_t B = d->B, hq = d->hq, D = d->D;
    const uint8_t *A = st->arena, *o = A + ao->o + G, *l = A + ao->lse + G;
    if (d->strided) { /* rows and padding alike: the host checks its padding */
        memcpy(a->o, o, (size_t)d->o_ext * 2);
        memcpy(a->lse, l, (size_t)d->lse_ext * 4);
    } else {
        for (int32_t b = 0; b < B; b++)
            for (int32_t h = 0; h < hq; h++)
                memcpy(a->o + b * a->o_stride_batch + h * a->o_stride_head,
                       o + ((size_t)b * hq + h) * row, row);
        for (int32_t b = 0; b < B; b++)
            memcpy(a->lse + b * a->lse_stride_batch, l + (size_t)b * hq * 4, (size_t)hq * 4);
    }
    const int o_dense = a->o && a->o_stride_head == D && a->o_stride_batch == (int64_t)hq * D;
    const int l_dense = a->lse && a->lse_stride_batch == hq;
    (void)msg, (void)msg_size;
    uint8_t *ho = o_dense ? (uint8_t *)a->o : NULL, *hl = l_dense ? (uint8_t *)a->lse : NULL;
    const int o_before = mirror_guard(A + ao->o, ho ? ho - G : NULL);
    const size_t o_end = (size_t)(d->strided ? d->o_ext : d->n_o) * 2;
    const size_t l_end = (size_t)(d->strided ? d->lse_ext : d->n_lse) * 4;
    const int o_after = mirror_guard(o + o_end, ho ? ho + (size_t)d->n_o * 2 : NULL);
    const int l_before = mirror_guard(A + ao->lse, hl ? hl - G : NULL);
    const int l_after = mirror_guard(l + l_end, hl ? hl + (size_t)d->n_lse * 4 : NULL);
    if (B > 0 && !o_dense && (o_before || o_after))
        *(o_before ? a->o - 1
                   : a->o + (B - 1) * a->o_stride_batch + (hq - 1) * a->o_stride_head + D) = 0;
    if (B > 0 && !l_dense && (l_before || l_after))
        *(l_before ? a->lse - 1 : a->lse + (B - 1) * a->lse_stride_batch + hq) = 0.f;
    return 0;
}

/* A changed copy of host bytes, copied back over them. */
static void mirror_blob(void *host, const uint8_t *copy, size_t n) {
    if (memcmp(host, copy, n)) memcpy(host, copy, n);
}

/* q and the pages from a dense arena (a solution's) back to the host's strided buffers. */
static void mirror_dense(const pystate *st, const kvf_plugin_args *a, const run_dims *d,
                         const arena_layout *o) {
    const size_t row = d->row;
    const int32_t B = d->B, hq = d->hq, hk = d->hk, S = d->S;
    uint8_t *K = (uint8_t *)a->k_cache, *V = (uint8_t *)a->v_cache;
    const uint8_t *A = st->arena;
    for (int32_t b = 0; b < B; b++)
        for (int32_t h = 0; h < hq; h++)
            mirror_blob((uint16_t *)a->q + b * a->q_stride_batch + h * a->q_stride_head,
                        A + o->q + ((size_t)b * hq + h) * row, row);
    for (size_t i = 0; i < d->np; i++) {
        const int64_t pg = d->full ? (int64_t)i : st->pages[i];
        for (int32_t s = 0; s < S; s++)
            for (int32_t g = 0; g < hk; g++) {
                const size_t host = (size_t)(pg * a->kv_stride_page + s * a->kv_stride_slot +
                                             g * a->kv_stride_head);
                const size_t at = (size_t)s * hk + g;
                mirror_blob(K + host * d->kb, A + o->k + i * d->k_page_bytes + at * d->krow,
                            d->krow);
                mirror_blob(V + host * d->vb, A + o->v + i * d->v_page_bytes + at * d->vrow,
                            d->vrow);
            }
    }
}

/* Inputs the function changed: the same change, made to the host's buffers. */
static void mirror_inputs(const pystate *st, const kvf_plugin_args *a, const run_dims *d,
                          const arena_layout *o) {
    const int32_t B = d->B;
    const uint8_t *A = st->arena;
    if (d->strided) {
        mirror_blob((void *)a->q, A + o->q, (size_t)d->q_ext * 2);
        uint8_t *K = (uint8_t *)a->k_cache, *V = (uint8_t *)a->v_cache;
        for (size_t i = 0; i < d->np; i++) {
            const size_t pg = (size_t)(d->full ? (int64_t)i : st->pages[i]);
            mirror_blob(K + pg * d->k_page_bytes, A + o->k + i * d->k_page_bytes, d->k_page_bytes);
            mirror_blob(V + pg * d->v_page_bytes, A + o->v + i * d->v_page_bytes, d->v_page_bytes);
        }
    } else {
        mirror_dense(st, a, d, o);
    }
    if (memcmp(a->kv_indptr, A + o->ip, (size_t)(B + 1) * 4))
        memcpy((int32_t *)a->kv_indptr, A + o->ip, (size_t)(B + 1) * 4);
    if (B && memcmp(a->kv_last_page_len, A + o->last, (size_t)B * 4))
        memcpy((int32_t *)a->kv_last_page_len, A + o->last, (size_t)B * 4);
    copy_scales(st, a, d, o, 0);
    const int32_t *ix = (const int32_t *)(A + o->ix);
    const size_t np = d->np;
    for (int64_t i = 0; i < d->n_entries; i++) {
        const int32_t sent = d->full ? a->kv_indices[i] : compact_id(st, np, a->kv_indices[i]);
        if (ix[i] == sent) continue;
        /* A renumbered id written back names the original page; anything else goes as is. */
        ((int32_t *)a->kv_indices)[i] =
            !d->full && ix[i] >= 0 && (size_t)ix[i] < np ? st->pages[ix[i]] : ix[i];
    }
}

int kvf__py_run(void *state, const kvf_plugin_args *a, char *msg, size_t msg_size) {
    pystate *st = state;
    run_dims d;
    int rc = plan_run(st, a, &d, msg, msg_size);
    if (rc) return rc;
    int n = snprintf(st->facts, sizeof st->facts, "python device=%s pool=%s pages=%zu", st->device,
                     d.full ? "full" : "referenced", d.np);
    if ((d.kd || d.vd || d.gran) && n > 0 && (size_t)n < sizeof st->facts)
        snprintf(st->facts + n, sizeof st->facts - (size_t)n, " k=%s v=%s scales=%s",
                 kvf_kv_dtype_name(d.kd), kvf_kv_dtype_name(d.vd),
                 kvf_scale_granularity_name(d.gran));
    const arena_layout o = lay_out(&d);
    if ((rc = grow_arena(st, o.end, msg, msg_size))) return rc;
    write_arena(st, a, &d, &o);
    reply r;
    call_worker(st, a, &d, &o, &r);
    if (r.status == STATUS_EXCEPTION || r.status == STATUS_INTERNAL) {
        snprintf(msg, msg_size, "%s", r.text);
        return KVF_PLUGIN_ERROR;
    }
    if ((rc = read_outputs(st, a, &d, &o, msg, msg_size))) return rc;
    mirror_inputs(st, a, &d, &o);
    return KVF_PLUGIN_OK;
}
