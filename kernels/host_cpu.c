/* The CPU buffer host (kernel_host.h): host buffers for KVF_PLUGIN_DEVICE_CPU descriptors, and
 * kvf_host_* dispatch to the CUDA host for device descriptors.
 *
 * Each buffer is one allocation laid out as [guard | data | guard]. The page pools are mapped
 * fresh per case (lazily zero) and every page the kernel may touch is written: resident pages
 * as the case holds them with unused slots poisoned, every other page poisoned whole while the
 * pool is at most KVF_HOST_POISON_POOL_BYTES (past that, only the pages next to referenced ones
 * are poisoned: an off-by-one page read still shows, and a huge sparse pool costs no more than
 * its resident pages). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kvfuzz/kernel.h"
#include "kvfuzz/kernel_host.h"

#define KVF_HOST_MAX_PAGES ((int64_t)1 << 31)
#define G KVF_HOST_GUARD_BYTES

typedef struct guarded {
    uint8_t *base; /* [G guard][size bytes][G guard] */
    size_t size, cap;
} guarded;

typedef struct cpu_host {
    const kvf_plugin_kernel *desc;
    void *state;
    guarded q, indptr, indices, last, o, lse, ws;
} cpu_host;

struct kvf_host {
    int cuda;
    void *impl; /* cpu_host or the CUDA host */
};

static void *data_of(guarded *g) {
    return g->base + G;
}

/* Sizes the buffer for `size` bytes (grown, never shrunk) and writes both guards. */
static int guarded_prepare(guarded *g, size_t size, kvf_error *err) {
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

/* The two page pools of one case and what each page must hold. */
typedef struct pools {
    kvf_bf16 *k, *v;
    size_t bytes; /* of each */
    int32_t *used;
    uint8_t *written; /* per page: 1 when the host wrote it (resident or poisoned) */
} pools;

static void pools_free(pools *p) {
    if (p->k) munmap(p->k, p->bytes);
    if (p->v) munmap(p->v, p->bytes);
    free(p->used);
    free(p->written);
    memset(p, 0, sizeof *p);
}

static int pools_build(pools *pl, const kvf_case *c, kvf_error *err) {
    memset(pl, 0, sizeof *pl);
    const int64_t pe = kvf_case_page_elems(c);
    const size_t page_bytes = (size_t)pe * sizeof(kvf_bf16);
    pl->bytes = (size_t)c->num_pages * page_bytes;
    if (pl->bytes == 0) pl->bytes = 1;
    pl->used = kvf__host_used_slots(c, KVF_HOST_MAX_PAGES, err);
    if (!pl->used) return err ? err->code : KVF_ENOMEM;
    pl->written = calloc((size_t)(c->num_pages > 0 ? c->num_pages : 1), 1);
    void *k = mmap(NULL, pl->bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void *v = mmap(NULL, pl->bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    pl->k = k == MAP_FAILED ? NULL : k;
    pl->v = v == MAP_FAILED ? NULL : v;
    if (!pl->written || !pl->k || !pl->v) {
        pools_free(pl);
        return kvf_error_set(err, KVF_ENOMEM, "cannot map two %zu-byte page pools", pl->bytes);
    }
    /* Only the slots some sequence reads carry the case's data; an unreferenced page is all
     * poison (a page image with no used slots), whatever the case file put there. */
    const int whole = pl->bytes <= KVF_HOST_POISON_POOL_BYTES;
    for (int64_t p = 0; p < c->num_pages; p++) {
        int near = (p > 0 && pl->used[p - 1]) || (p + 1 < c->num_pages && pl->used[p + 1]);
        if (!(whole || pl->used[p] || near)) continue;
        kvf__host_page_image(c, c->k_cache, p, pl->used[p], pl->k + p * pe);
        kvf__host_page_image(c, c->v_cache, p, pl->used[p], pl->v + p * pe);
        pl->written[p] = 1;
    }
    return 0;
}

/* Every page the host wrote must still hold what it wrote. Pages it did not write (only in
 * pools past KVF_HOST_POISON_POOL_BYTES) are not scanned: reading gigabytes of zero pages per
 * case would cost more than the kernel. */
static int pools_check(const pools *pl, const kvf_case *c, kvf_error *err) {
    const int64_t pe = kvf_case_page_elems(c);
    kvf_bf16 *want = malloc((size_t)(pe > 0 ? pe : 1) * sizeof *want);
    if (!want) return kvf_error_set(err, KVF_ENOMEM, "out of memory for the input check");
    int rc = 0;
    for (int64_t p = 0; p < c->num_pages && !rc; p++) {
        for (int which = 0; which < 2 && !rc; which++) {
            if (!pl->written[p]) continue;
            const kvf_bf16 *have = (which ? pl->v : pl->k) + p * pe;
            kvf__host_page_image(c, which ? c->v_cache : c->k_cache, p, pl->used[p], want);
            if (memcmp(have, want, (size_t)pe * sizeof *want) == 0) continue;
            int64_t i = 0;
            while (have[i] == want[i])
                i++;
            const int64_t slot = i / ((int64_t)c->num_kv_heads * c->head_dim);
            rc =
                kvf_error_set(err, KVF_EINPUTMOD,
                              "the kernel modified its input %s at page %" PRId64 " slot %" PRId64
                              " kv head %" PRId64 " d %" PRId64 " (0x%04x became 0x%04x)",
                              which ? "v_cache" : "k_cache", p, slot,
                              i / c->head_dim % c->num_kv_heads, i % c->head_dim, want[i], have[i]);
        }
    }
    free(want);
    return rc;
}

static int cpu_create(const kvf_plugin_kernel *desc, cpu_host **out, kvf_error *err) {
    cpu_host *h = calloc(1, sizeof *h);
    if (!h) return kvf_error_set(err, KVF_ENOMEM, "out of memory for the kernel host");
    h->desc = desc;
    if (desc->create) {
        char msg[KVF_ERROR_MSG_MAX] = {0};
        int st = desc->create(desc, &h->state, msg, sizeof msg - 1);
        if (st != KVF_PLUGIN_OK) {
            free(h);
            return kvf_error_set(err, st == KVF_PLUGIN_NOMEM ? KVF_ENOMEM : KVF_EKERNEL,
                                 "%s could not start: %s", desc->name,
                                 msg[0] ? msg : "create() failed without a message");
        }
    }
    *out = h;
    return 0;
}

static void cpu_destroy(cpu_host *h) {
    if (!h) return;
    if (h->desc->destroy) h->desc->destroy(h->state);
    guarded *all[] = {&h->q, &h->indptr, &h->indices, &h->last, &h->o, &h->lse, &h->ws};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]->base);
    free(h);
}

static int cpu_run(cpu_host *h, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    const kvf_plugin_kernel *d = h->desc;
    kvf_plugin_shape shape;
    kvf_kernel_shape(c, &shape);
    int rc = kvf__host_supports(d, &shape, err);
    if (rc) return rc;
    char msg[KVF_ERROR_MSG_MAX] = {0};
    if (d->plan) {
        kvf_plugin_index index = {c->kv_indptr, c->kv_indices, c->kv_last_page_len};
        rc = kvf__host_status(d, d->plan(h->state, &shape, &index, msg, sizeof msg - 1), msg,
                              "plan", err);
        if (rc) return rc;
    }
    const size_t ws_bytes = d->workspace_bytes ? d->workspace_bytes(h->state, &shape) : 0;
    const int64_t no = kvf_case_o_elems(c), nl = kvf_case_lse_elems(c);
    const size_t nq = (size_t)kvf_case_q_elems(c) * sizeof(kvf_bf16);
    const size_t nptr = ((size_t)c->batch_size + 1) * sizeof(int32_t);
    const size_t nidx = (size_t)c->kv_indptr[c->batch_size] * sizeof(int32_t);
    const size_t nlast = (size_t)c->batch_size * sizeof(int32_t);
    if ((rc = input_copy(&h->q, c->q, nq, err)) ||
        (rc = input_copy(&h->indptr, c->kv_indptr, nptr, err)) ||
        (rc = input_copy(&h->indices, c->kv_indices, nidx, err)) ||
        (rc = input_copy(&h->last, c->kv_last_page_len, nlast, err)) ||
        (rc = guarded_prepare(&h->o, (size_t)no * sizeof(kvf_bf16), err)) ||
        (rc = guarded_prepare(&h->lse, (size_t)nl * sizeof(float), err)) ||
        (rc = guarded_prepare(&h->ws, ws_bytes, err)))
        return rc;
    kvf__host_poison_o(data_of(&h->o), no);
    kvf__host_poison_lse(data_of(&h->lse), nl);
    memset(data_of(&h->ws), KVF_HOST_POISON_BYTE, ws_bytes);
    pools pl;
    if ((rc = pools_build(&pl, c, err))) return rc;

    kvf_plugin_args a;
    kvf__host_contiguous_args(c, &shape, &a);
    a.q = data_of(&h->q);
    a.k_cache = pl.k;
    a.v_cache = pl.v;
    a.kv_indptr = data_of(&h->indptr);
    a.kv_indices = data_of(&h->indices);
    a.kv_last_page_len = data_of(&h->last);
    a.o = data_of(&h->o);
    a.lse = data_of(&h->lse);
    a.workspace = ws_bytes ? data_of(&h->ws) : NULL;
    a.workspace_bytes = ws_bytes;
    rc = kvf__host_status(d, d->run(h->state, &a, msg, sizeof msg - 1), msg, "run", err);
    /* The outputs go back whatever the checks find, so a finding shows what was written. */
    if (no) memcpy(o, data_of(&h->o), (size_t)no * sizeof *o);
    if (nl) memcpy(lse, data_of(&h->lse), (size_t)nl * sizeof *lse);
    if (!rc) rc = guarded_check(&h->o, "o", err);
    if (!rc) rc = guarded_check(&h->lse, "lse", err);
    if (!rc) rc = guarded_check(&h->ws, "the workspace", err);
    if (!rc) rc = input_check(&h->q, c->q, "q", err);
    if (!rc) rc = input_check(&h->indptr, c->kv_indptr, "kv_indptr", err);
    if (!rc) rc = input_check(&h->indices, c->kv_indices, "kv_indices", err);
    if (!rc) rc = input_check(&h->last, c->kv_last_page_len, "kv_last_page_len", err);
    if (!rc) rc = pools_check(&pl, c, err);
    if (!rc) rc = kvf__host_check_outputs(c, o, lse, err);
    pools_free(&pl);
    return rc;
}

static void cpu_describe(cpu_host *h, char *buf, size_t n) {
    if (!n) return;
    buf[0] = 0;
    if (h->desc->describe) h->desc->describe(h->state, buf, n);
    buf[n - 1] = 0;
}

/* ---- dispatch ------------------------------------------------------------------------------- */

#ifndef KVF_HAVE_CUDA
/* Without CUDA no device descriptor can run; the dispatch below says so. */
int kvf__cuda_host_create(const kvf_plugin_kernel *desc, void **out, kvf_error *err) {
    (void)out;
    return kvf_error_set(err, KVF_EDEVICE, "%s is a CUDA kernel and kvfuzz was built without CUDA",
                         desc->name);
}
int kvf__cuda_host_run(void *h, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    (void)h, (void)c, (void)o, (void)lse;
    return kvf_error_set(err, KVF_EDEVICE, "kvfuzz was built without CUDA");
}
void kvf__cuda_host_describe(void *h, char *buf, size_t n) {
    (void)h;
    if (n) buf[0] = 0;
}
void kvf__cuda_host_destroy(void *h) {
    (void)h;
}
#endif

int kvf_host_create(const kvf_plugin_kernel *desc, kvf_host **out, kvf_error *err) {
    kvf_host *h = calloc(1, sizeof *h);
    if (!h) return kvf_error_set(err, KVF_ENOMEM, "out of memory for the kernel host");
    h->cuda = desc->device == KVF_PLUGIN_DEVICE_CUDA;
    int rc = h->cuda ? kvf__cuda_host_create(desc, &h->impl, err)
                     : cpu_create(desc, (cpu_host **)&h->impl, err);
    if (rc) {
        free(h);
        return rc;
    }
    *out = h;
    return 0;
}

int kvf_host_run(kvf_host *h, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    return h->cuda ? kvf__cuda_host_run(h->impl, c, o, lse, err) : cpu_run(h->impl, c, o, lse, err);
}

void kvf_host_describe(kvf_host *h, char *buf, size_t buf_size) {
    if (h->cuda)
        kvf__cuda_host_describe(h->impl, buf, buf_size);
    else
        cpu_describe(h->impl, buf, buf_size);
}

void kvf_host_destroy(kvf_host *h) {
    if (!h) return;
    if (h->cuda)
        kvf__cuda_host_destroy(h->impl);
    else
        cpu_destroy(h->impl);
    free(h);
}
