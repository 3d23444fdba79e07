/* The CPU buffer host (kernel_host.h): host buffers for KVF_PLUGIN_DEVICE_CPU descriptors,
 * reached through the dispatcher (host.c) as kvf__cpu_host_* (host_internal.h).
 *
 * Each buffer is one allocation laid out as [guard | data | guard]. The page pools are mapped
 * fresh per case (lazily zero; pools poisoned whole reuse one mapping, laid out as a fresh one)
 * and every page the kernel may touch is written: resident pages
 * as the case holds them with unused slots poisoned, every other page poisoned whole while the
 * pool is at most KVF_HOST_POISON_POOL_BYTES (past that, only the pages next to referenced ones
 * are poisoned: an off-by-one page read still shows, and a huge sparse pool costs no more than
 * its resident pages). The case's layout (host_layout.h) sets the strides, the padding and the
 * views' offsets into their allocations; q's image is kept to check the input against. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kvfuzz/fp8.h"
#include "kvfuzz/kernel.h"
#include "host_internal.h"

#define KVF_HOST_MAX_PAGES ((int64_t)1 << 31)
#define G KVF_HOST_GUARD_BYTES

typedef struct guarded {
    uint8_t *base; /* [G guard][size bytes][G guard] */
    size_t size, cap;
} guarded;

typedef struct cpu_host {
    const kvf_plugin_kernel *desc;
    void *state;
    guarded q, indptr, indices, last, o, lse, ws, k_scale, v_scale;
    kvf_bf16 *q_image; /* what q's buffer must hold: the case's q in the layout */
    size_t q_image_cap;
    /* Where the K and V pools of cases poisoned whole (at most KVF_HOST_POISON_POOL_BYTES
     * each) live, kept between runs: every byte of such a pool is written for each case, so a
     * fresh mapping per case (two system calls and a fault per OS page) buys nothing. Each is
     * one mapping of KVF_HOST_POISON_POOL_BYTES followed by an inaccessible OS page; a pool is
     * placed at its end (whole_at), so what follows it is what follows a fresh mapping of its
     * size: zeros to the OS page's end, then no memory at all. */
    uint8_t *whole[2];
    size_t os_page;
} cpu_host;

/* The mapping behind whole[i]: KVF_HOST_POISON_POOL_BYTES, then one PROT_NONE OS page. */
static uint8_t *whole_map(size_t os_page) {
    const size_t n = KVF_HOST_POISON_POOL_BYTES + os_page;
    void *p =
        mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return NULL;
    if (mprotect((uint8_t *)p + KVF_HOST_POISON_POOL_BYTES, os_page, PROT_NONE) != 0) {
        munmap(p, n);
        return NULL;
    }
    return p;
}

/* A pool of `bytes` (at most KVF_HOST_POISON_POOL_BYTES) at the end of mapping i: its start
 * is OS-page aligned, as a fresh mapping's, and the bytes after it up to the guard page are
 * zeroed, as in a fresh mapping. */
static kvf_bf16 *whole_at(cpu_host *h, int i, size_t bytes) {
    if (!h->whole[i] && !(h->whole[i] = whole_map(h->os_page))) return NULL;
    const size_t span = (bytes + h->os_page - 1) / h->os_page * h->os_page;
    uint8_t *start = h->whole[i] + KVF_HOST_POISON_POOL_BYTES - span;
    memset(start + bytes, 0, span - bytes);
    return (kvf_bf16 *)start;
}

static void *data_of(guarded *g) {
    return g->base + G;
}

/* Sizes the buffer for `size` bytes (grown, never shrunk) and writes both guards. */
static int guarded_prepare(guarded *g, size_t size, kvf_error *err) {
    if (size > SIZE_MAX / 2 - 2 * G)
        return kvf_error_set(err, KVF_ENOMEM, "a %zu-byte kernel buffer is past any memory", size);
    if (size + 2 * G > g->cap) {
        size_t cap = size + 2 * G;
        void *p = NULL;
        if (posix_memalign(&p, 256, cap) != 0)
            return kvf_error_set(err, KVF_ENOMEM, "out of memory for a %zu-byte kernel buffer",
                                 size);
        free(g->base);
        g->base = p;
        g->cap = cap;
    }
    g->size = size;
    kvf__host_fill_guard(g->base, G);
    kvf__host_fill_guard(g->base + G + size, G);
    return 0;
}

static int guarded_check(const guarded *g, const char *name, kvf_error *err) {
    int rc = kvf__host_check_guard(g->base, G, name, "before", err);
    if (!rc) rc = kvf__host_check_guard(g->base + G + g->size, G, name, "after", err);
    return rc;
}

static int input_copy(guarded *g, const void *src, size_t size, kvf_error *err) {
    int rc = guarded_prepare(g, size, err);
    if (!rc && size) memcpy(data_of(g), src, size);
    return rc;
}

static int input_check(guarded *g, const void *src, const char *name, kvf_error *err) {
    int rc = guarded_check(g, name, err);
    if (rc) return rc;
    const uint8_t *a = data_of(g), *b = src;
    for (size_t i = 0; i < g->size; i++)
        if (a[i] != b[i])
            return kvf_error_set(err, KVF_EINPUTMOD,
                                 "the kernel modified its input %s at byte %zu (0x%02x became "
                                 "0x%02x)",
                                 name, i, b[i], a[i]);
    return 0;
}

/* The two page pools of one case and the pages the host wrote, ascending, each with its used
 * slots (kvf__host_used_slots' rule). A list, not a map over the pool: a sparse pool has up to
 * 2^31 pages, and a per-page array or scan of it costs seconds for a case that reads a few. */
typedef struct pools {
    kvf_bf16 *k, *v; /* the allocations; the views start L.view elements in */
    size_t bytes;    /* of each */
    /* An FP8 cache's bytes (docs/plugins.md, "FP8 caches"): its bf16 pool above converted
     * element by element, poison NaN to the dtype's NaN; what the kernel gets. */
    uint8_t *k8, *v8;
    size_t bytes8;
    int mapped; /* k and v are this case's own mappings (else the host's whole_k/whole_v) */
    int64_t *pages;
    int32_t *used;
    int64_t n;
} pools;

static void pools_free(pools *p) {
    if (p->mapped && p->k) munmap(p->k, p->bytes);
    if (p->mapped && p->v) munmap(p->v, p->bytes);
    if (p->k8) munmap(p->k8, p->bytes8);
    if (p->v8) munmap(p->v8, p->bytes8);
    free(p->pages);
    free(p->used);
    memset(p, 0, sizeof *p);
}

typedef struct page_use {
    int64_t page;
    int32_t used;
} page_use;

static int cmp_page_use(const void *a, const void *b) {
    const page_use *x = a, *y = b;
    if (x->page != y->page) return (x->page > y->page) - (x->page < y->page);
    return (x->used < y->used) - (x->used > y->used); /* most used slots first */
}

/* The pages to write: every page of a pool of at most KVF_HOST_POISON_POOL_BYTES per cache,
 * else the referenced pages and their neighbours. Sorting the table's entries (with their
 * neighbours) costs O(E log E) and nothing per pool page. */
static int pools_list(pools *pl, const kvf_case *c, int whole, kvf_error *err) {
    if (c->num_pages > KVF_HOST_MAX_PAGES)
        return kvf_error_set(err, KVF_ELIMIT,
                             "the page pool has %" PRId64 " pages, more than the %" PRId64
                             " the buffer host lays out",
                             c->num_pages, KVF_HOST_MAX_PAGES);
    if (whole) {
        int32_t *used = kvf__host_used_slots(c, KVF_HOST_MAX_PAGES, err);
        if (!used) return err ? err->code : KVF_ENOMEM;
        pl->pages = malloc((size_t)(c->num_pages > 0 ? c->num_pages : 1) * sizeof *pl->pages);
        if (!pl->pages) {
            free(used);
            return kvf_error_set(err, KVF_ENOMEM, "out of memory for the page list");
        }
        for (int64_t p = 0; p < c->num_pages; p++)
            pl->pages[p] = p;
        pl->used = used;
        pl->n = c->num_pages;
        return 0;
    }
    const int64_t entries = c->kv_indptr[c->batch_size];
    page_use *u = malloc((size_t)(3 * entries > 0 ? 3 * entries : 1) * sizeof *u);
    pl->pages = malloc((size_t)(3 * entries > 0 ? 3 * entries : 1) * sizeof *pl->pages);
    pl->used = malloc((size_t)(3 * entries > 0 ? 3 * entries : 1) * sizeof *pl->used);
    if (!u || !pl->pages || !pl->used) {
        free(u);
        return kvf_error_set(err, KVF_ENOMEM, "out of memory for the page list");
    }
    int64_t m = 0;
    for (int32_t b = 0; b < c->batch_size; b++) {
        const int32_t beg = c->kv_indptr[b], end = c->kv_indptr[b + 1];
        for (int32_t e = beg; e < end; e++) {
            /* A page is read up to the last page length only where it is a sequence's last;
             * shared elsewhere it is read whole. Its neighbours are written as all poison
             * unless they are referenced too. */
            const int64_t p = c->kv_indices[e];
            u[m++] = (page_use){p, e == end - 1 ? c->kv_last_page_len[b] : c->page_size};
            if (p > 0) u[m++] = (page_use){p - 1, 0};
            if (p + 1 < c->num_pages) u[m++] = (page_use){p + 1, 0};
        }
    }
    qsort(u, (size_t)m, sizeof *u, cmp_page_use);
    for (int64_t i = 0; i < m; i++) {
        if (pl->n > 0 && pl->pages[pl->n - 1] == u[i].page) continue; /* first has the most */
        pl->pages[pl->n] = u[i].page;
        pl->used[pl->n++] = u[i].used;
    }
    free(u);
    return 0;
}

static int pools_build(cpu_host *h, pools *pl, const kvf_case *c, const kvf__host_layout *L,
                       kvf_error *err) {
    memset(pl, 0, sizeof *pl);
    const int64_t pe = L->page_elems;
    pl->bytes = (size_t)L->pool_elems * sizeof(kvf_bf16);
    if (pl->bytes == 0) pl->bytes = 1;
    const int whole = pl->bytes <= KVF_HOST_POISON_POOL_BYTES;
    int rc = pools_list(pl, c, whole, err);
    if (rc) {
        pools_free(pl);
        return rc;
    }
    if (whole) {
        pl->k = whole_at(h, 0, pl->bytes);
        pl->v = whole_at(h, 1, pl->bytes);
    } else {
        void *k = mmap(NULL, pl->bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        void *v = mmap(NULL, pl->bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        pl->mapped = 1;
        pl->k = k == MAP_FAILED ? NULL : k;
        pl->v = v == MAP_FAILED ? NULL : v;
    }
    if (!pl->k || !pl->v) {
        const size_t bytes = pl->bytes; /* pools_free clears it */
        pools_free(pl);
        return kvf_error_set(err, KVF_ENOMEM, "cannot map two %zu-byte page pools", bytes);
    }
    /* Only the slots some sequence reads carry the case's data; an unreferenced page is all
     * poison (a page image with no used slots), whatever the case file put there, and so is
     * what lies before the views. */
    for (int64_t i = 0; i < L->view && c->num_pages; i++)
        pl->k[i] = pl->v[i] = (kvf_bf16)KVF_HOST_POISON_INPUT;
    for (int64_t i = 0; i < pl->n; i++) {
        const int64_t p = pl->pages[i];
        kvf__host_page_image(c, L, c->k_cache, p, pl->used[i], pl->k + L->view + p * pe);
        kvf__host_page_image(c, L, c->v_cache, p, pl->used[i], pl->v + L->view + p * pe);
    }
    return 0;
}

/* The byte pools of FP8 caches, from the bf16 pools just built: the view's prefix and every
 * page written (the rest of a mapping reads as zero, +0 in both). */
static int pools_pack_fp8(pools *pl, const kvf_case *c, const kvf__host_layout *L, kvf_error *err) {
    const int dts[2] = {c->quant.k_dtype, c->quant.v_dtype};
    if (!kvf_kv_dtype_is_fp8(dts[0]) && !kvf_kv_dtype_is_fp8(dts[1])) return 0;
    pl->bytes8 = (size_t)L->pool_elems ? (size_t)L->pool_elems : 1;
    const int64_t pe = L->page_elems;
    for (int w = 0; w < 2; w++) {
        if (!kvf_kv_dtype_is_fp8(dts[w])) continue;
        void *m = mmap(NULL, pl->bytes8, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED)
            return kvf_error_set(err, KVF_ENOMEM, "cannot map a %zu-byte FP8 page pool",
                                 pl->bytes8);
        uint8_t *dst = m;
        const kvf_bf16 *src = w ? pl->v : pl->k;
        *(w ? &pl->v8 : &pl->k8) = dst;
        if (c->num_pages) kvf__host_fp8_pack(dst, src, L->view, dts[w]);
        for (int64_t i = 0; i < pl->n; i++) {
            const int64_t at = L->view + pl->pages[i] * pe;
            kvf__host_fp8_pack(dst + at, src + at, pe, dts[w]);
        }
    }
    return 0;
}

/* An FP8 page against what the host wrote: 0, or the offending element's index. */
static int64_t fp8_page_diff(const uint8_t *have, const kvf_bf16 *want, int64_t n, int dtype) {
    for (int64_t i = 0; i < n; i++)
        if (have[i] != kvf__host_fp8_byte(want[i], dtype)) return i;
    return -1;
}

/* Every page the host wrote must still hold what it wrote. Pages it did not write (only in
 * pools past KVF_HOST_POISON_POOL_BYTES) are not scanned: reading gigabytes of zero pages per
 * case would cost more than the kernel. */
static int pools_check(const pools *pl, const kvf_case *c, const kvf__host_layout *L,
                       kvf_error *err) {
    const int64_t pe = L->page_elems;
    const int dts[2] = {c->quant.k_dtype, c->quant.v_dtype};
    for (int64_t i = 0; i < L->view && c->num_pages; i++)
        for (int w = 0; w < 2; w++) {
            const uint8_t *b8 = w ? pl->v8 : pl->k8;
            const int bad =
                b8 ? b8[i] != kvf__host_fp8_byte((kvf_bf16)KVF_HOST_POISON_INPUT, dts[w])
                   : (w ? pl->v : pl->k)[i] != (kvf_bf16)KVF_HOST_POISON_INPUT;
            if (bad)
                return kvf_error_set(err, KVF_EOOBWRITE,
                                     "the kernel wrote into %s %" PRId64
                                     " elements before the view of its page pool",
                                     w ? "v_cache" : "k_cache", L->view - i);
        }
    kvf_bf16 *want = malloc((size_t)(pe > 0 ? pe : 1) * sizeof *want);
    if (!want) return kvf_error_set(err, KVF_ENOMEM, "out of memory for the input check");
    int rc = 0;
    for (int64_t j = 0; j < pl->n && !rc; j++) {
        const int64_t p = pl->pages[j];
        for (int which = 0; which < 2 && !rc; which++) {
            const kvf_bf16 *have = (which ? pl->v : pl->k) + L->view + p * pe;
            const uint8_t *have8 = which ? pl->v8 : pl->k8;
            kvf__host_page_image(c, L, which ? c->v_cache : c->k_cache, p, pl->used[j], want);
            int64_t i = 0, slot = 0, head = 0, d = 0;
            const char *name = which ? "v_cache" : "k_cache";
            if (have8) {
                /* The kernel saw bytes: the bf16 pool is the host's own scratch. */
                have8 += L->view + p * pe;
                i = fp8_page_diff(have8, want, pe, dts[which]);
                if (i < 0) continue;
                if (kvf__host_page_place(c, L, i, &slot, &head, &d))
                    rc = kvf_error_set(
                        err, KVF_EINPUTMOD,
                        "the kernel modified its input %s at page %" PRId64 " slot %" PRId64
                        " kv head %" PRId64 " d %" PRId64 " (byte 0x%02x became 0x%02x)",
                        name, p, slot, head, d, kvf__host_fp8_byte(want[i], dts[which]), have8[i]);
                else
                    rc = kvf_error_set(err, KVF_EOOBWRITE,
                                       "the kernel wrote into the padding of %s's page %" PRId64
                                       " at element %" PRId64 " (byte 0x%02x became 0x%02x)",
                                       name, p, i, kvf__host_fp8_byte(want[i], dts[which]),
                                       have8[i]);
                continue;
            }
            if (memcmp(have, want, (size_t)pe * sizeof *want) == 0) continue;
            while (have[i] == want[i])
                i++;
            if (kvf__host_page_place(c, L, i, &slot, &head, &d))
                rc = kvf_error_set(err, KVF_EINPUTMOD,
                                   "the kernel modified its input %s at page %" PRId64
                                   " slot %" PRId64 " kv head %" PRId64 " d %" PRId64
                                   " (0x%04x became 0x%04x)",
                                   name, p, slot, head, d, want[i], have[i]);
            else
                rc = kvf_error_set(err, KVF_EOOBWRITE,
                                   "the kernel wrote into the padding of %s's page %" PRId64
                                   " at element %" PRId64 " (0x%04x became 0x%04x)",
                                   name, p, i, want[i], have[i]);
        }
    }
    free(want);
    return rc;
}

int kvf__cpu_host_create(const kvf_plugin_kernel *desc, void **out, kvf_error *err) {
    cpu_host *h = calloc(1, sizeof *h);
    if (!h) return kvf_error_set(err, KVF_ENOMEM, "out of memory for the kernel host");
    h->desc = desc;
    const long os_page = sysconf(_SC_PAGESIZE);
    h->os_page = os_page > 0 ? (size_t)os_page : 4096;
    if (desc->create) {
        char msg[KVF_ERROR_MSG_MAX] = {0};
        int st = desc->create(desc, &h->state, msg, sizeof msg - 1);
        if (st != KVF_PLUGIN_OK) {
            free(h);
            return kvf__host_create_failed(desc, st, msg, err);
        }
    }
    *out = h;
    return 0;
}

void kvf__cpu_host_destroy(void *hv) {
    cpu_host *h = hv;
    if (!h) return;
    if (h->desc->destroy) h->desc->destroy(h->state);
    guarded *all[] = {&h->q,   &h->indptr, &h->indices, &h->last,   &h->o,
                      &h->lse, &h->ws,     &h->k_scale, &h->v_scale};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]->base);
    free(h->q_image);
    for (int i = 0; i < 2; i++)
        if (h->whole[i]) munmap(h->whole[i], KVF_HOST_POISON_POOL_BYTES + h->os_page);
    free(h);
}

int kvf__cpu_host_run(void *hv, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    cpu_host *h = hv;
    const kvf_plugin_kernel *d = h->desc;
    int rc = kvf__host_check_case(c, err);
    if (rc) return rc;
    kvf_plugin_shape shape;
    kvf_kernel_shape(c, &shape);
    rc = kvf__host_supports(d, &shape, err);
    if (rc) return rc;
    char msg[KVF_ERROR_MSG_MAX] = {0};
    if (d->plan) {
        kvf_plugin_index index = {c->kv_indptr, c->kv_indices, c->kv_last_page_len};
        rc = kvf__host_status(d, d->plan(h->state, &shape, &index, msg, sizeof msg - 1), msg,
                              "plan", err);
        if (rc) return rc;
    }
    size_t ws_bytes = 0;
    rc = kvf__host_workspace_bytes(d, h->state, &shape, &ws_bytes, err);
    if (rc) return rc;
    kvf__host_layout L;
    kvf__host_layout_of(c, &L);
    const int64_t no = L.o_elems, nl = L.lse_elems;
    const size_t nq = (size_t)L.q_elems * sizeof(kvf_bf16);
    if (nq > h->q_image_cap) {
        kvf_bf16 *img = realloc(h->q_image, nq);
        if (!img) return kvf_error_set(err, KVF_ENOMEM, "out of memory for q's image");
        h->q_image = img;
        h->q_image_cap = nq;
    }
    if (nq) kvf__host_q_image(c, &L, h->q_image);
    const size_t nptr = ((size_t)c->batch_size + 1) * sizeof(int32_t);
    const size_t nidx = (size_t)c->kv_indptr[c->batch_size] * sizeof(int32_t);
    const size_t nlast = (size_t)c->batch_size * sizeof(int32_t);
    if ((rc = input_copy(&h->q, h->q_image, nq, err)) ||
        (rc = input_copy(&h->indptr, c->kv_indptr, nptr, err)) ||
        (rc = input_copy(&h->indices, c->kv_indices, nidx, err)) ||
        (rc = input_copy(&h->last, c->kv_last_page_len, nlast, err)) ||
        (rc = guarded_prepare(&h->o, (size_t)no * sizeof(kvf_bf16), err)) ||
        (rc = guarded_prepare(&h->lse, (size_t)nl * sizeof(float), err)) ||
        (rc = guarded_prepare(&h->ws, ws_bytes, err)) ||
        (rc = input_copy(&h->k_scale, c->k_scale, c->k_scale ? c->scale_bytes : 0, err)) ||
        (rc = input_copy(&h->v_scale, c->v_scale, c->v_scale ? c->scale_bytes : 0, err)))
        return rc;
    kvf__host_poison_o(data_of(&h->o), no);
    kvf__host_poison_lse(data_of(&h->lse), nl);
    memset(data_of(&h->ws), KVF_HOST_POISON_BYTE, ws_bytes);
    pools pl;
    if ((rc = pools_build(h, &pl, c, &L, err))) return rc;
    if ((rc = pools_pack_fp8(&pl, c, &L, err))) {
        pools_free(&pl);
        return rc;
    }

    kvf_plugin_args a;
    kvf__host_layout_args(&L, c, &shape, &a);
    a.q = (kvf_bf16 *)data_of(&h->q) + L.view;
    a.k_cache = pl.k8 ? (const uint16_t *)(void *)(pl.k8 + L.view) : pl.k + L.view;
    a.v_cache = pl.v8 ? (const uint16_t *)(void *)(pl.v8 + L.view) : pl.v + L.view;
    a.k_scale = c->quant.granularity ? data_of(&h->k_scale) : NULL;
    a.v_scale = c->quant.granularity ? data_of(&h->v_scale) : NULL;
    a.kv_indptr = data_of(&h->indptr);
    a.kv_indices = data_of(&h->indices);
    a.kv_last_page_len = data_of(&h->last);
    a.o = (kvf_bf16 *)data_of(&h->o) + L.view;
    a.lse = (float *)data_of(&h->lse) + L.view;
    a.workspace = ws_bytes ? data_of(&h->ws) : NULL;
    a.workspace_bytes = ws_bytes;
    rc = kvf__host_status(d, d->run(h->state, &a, msg, sizeof msg - 1), msg, "run", err);
    /* The outputs go back whatever the checks find, so a finding shows what was written. */
    kvf__host_gather_outputs(c, &L, data_of(&h->o), data_of(&h->lse), o, lse);
    if (!rc) rc = guarded_check(&h->o, "o", err);
    if (!rc) rc = guarded_check(&h->lse, "lse", err);
    if (!rc) rc = guarded_check(&h->ws, "the workspace", err);
    if (!rc) rc = kvf__host_check_output_padding(c, &L, data_of(&h->o), data_of(&h->lse), err);
    if (!rc) rc = input_check(&h->q, h->q_image, "q", err);
    if (!rc) rc = input_check(&h->indptr, c->kv_indptr, "kv_indptr", err);
    if (!rc) rc = input_check(&h->indices, c->kv_indices, "kv_indices", err);
    if (!rc) rc = input_check(&h->last, c->kv_last_page_len, "kv_last_page_len", err);
    if (!rc && c->k_scale) rc = input_check(&h->k_scale, c->k_scale, "k_scale", err);
    if (!rc && c->v_scale) rc = input_check(&h->v_scale, c->v_scale, "v_scale", err);
    if (!rc) rc = pools_check(&pl, c, &L, err);
    if (!rc) rc = kvf__host_check_outputs(c, o, lse, err);
    pools_free(&pl);
    return rc;
}

void kvf__cpu_host_describe(void *hv, char *buf, size_t n) {
    cpu_host *h = hv;
    if (!n) return;
    buf[0] = 0;
    if (h->desc->describe) h->desc->describe(h->state, buf, n);
    buf[n - 1] = 0;
}
