// The CUDA buffer host's inputs (host_cuda_internal.cuh): loading a case onto the device. The
// pools (sizing, the pages a case reads, re-poisoning the pages the last case wrote, uploads in
// batches when they exceed the stage), the layout of h_up and d_io with the images the prepare
// kernel copies in place, each slot's plan, and the arguments of run() and the check kernels.
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "device_buffer.cuh"
#include "host_cuda_internal.cuh"

namespace kvf_cuda_host {

// ---- the pools -------------------------------------------------------------------------------

static int pools_fill(Host *h, kvf_error *err) {
    const int64_t vecs = (int64_t)(h->pool_cap / 16);
    for (int which = 0; which < 2; ++which) {
        KVF_CUDA_TRY(launch_fill((uint4 *)(which ? h->d_v : h->d_k), vecs, h->pool_word, h->stream),
                     "Launching the pool poison kernel");
    }
    return 0;
}

// Sizes both pools for `pool` bytes each (a fresh allocation is not clean).
int pools_reserve(Host *h, size_t pool, kvf_error *err) {
    if (pool <= h->pool_cap) return 0;
    if (h->d_k) cudaFree(h->d_k);
    if (h->d_v) cudaFree(h->d_v);
    h->d_k = h->d_v = NULL;
    h->pool_cap = 0;
    h->pool_clean = 0;
    KVF_CUDA_TRY(cudaMalloc(&h->d_k, pool), "Allocating the device K pool");
    KVF_CUDA_TRY(cudaMalloc(&h->d_v, pool), "Allocating the device V pool");
    h->pool_cap = pool;
    return 0;
}

// The self-check of KVF_CUDA_VERIFY_POOL: once the prepare kernel has written the case's pages,
// every byte of both pools outside them must be poison. Scans the whole allocation, so tests
// only.
int pools_verify(Host *h, kvf_error *err) {
    const int64_t P = h->num_pages;
    unsigned char *mask = (unsigned char *)calloc((size_t)P + 1, 1);
    if (!mask) return kvf_error_set(err, KVF_ENOMEM, "out of host memory for the pool check");
    for (int64_t i = 0; i < h->num_read_pages; ++i)
        mask[h->pages[i]] = 1;
    unsigned char *d_mask = NULL;
    unsigned long long *d_count = NULL, count[2] = {0, 0};
    cudaError_t e = cudaMalloc(&d_mask, (size_t)P + 1);
    if (e == cudaSuccess) e = cudaMalloc(&d_count, sizeof count);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(d_mask, mask, (size_t)P + 1, cudaMemcpyHostToDevice, h->stream);
    if (e == cudaSuccess) e = cudaMemsetAsync(d_count, 0, sizeof count, h->stream);
    const int64_t vecs = (int64_t)(h->pool_cap / 16), page_vec = (int64_t)(h->page_bytes / 16);
    for (int which = 0; which < 2 && e == cudaSuccess; ++which) {
        e = launch_count_unpoisoned((const uint4 *)(which ? h->d_v : h->d_k), vecs, page_vec,
                                    d_mask, P, h->pool_word, d_count + which, h->stream);
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(count, d_count, sizeof count, cudaMemcpyDeviceToHost, h->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(h->stream);
    free(mask);
    if (d_mask) cudaFree(d_mask);
    if (d_count) cudaFree(d_count);
    if (e != cudaSuccess) return kvf__cuda_fail(err, e, "Checking the pool poison");
    if (count[0] || count[1])
        return kvf_error_set(err, KVF_EDEVICE,
                             "the device pools hold %llu (K) and %llu (V) 16-byte vectors that "
                             "are not poison outside the pages the case reads",
                             count[0], count[1]);
    return 0;
}

namespace {
struct PageUse {
    int64_t page;
    int32_t used;
};
} // namespace

static int cmp_page_use(const void *a, const void *b) {
    const int64_t x = ((const PageUse *)a)->page, y = ((const PageUse *)b)->page;
    return (x > y) - (x < y);
}

// The pages the case reads and how many leading slots of each (the rule of
// kvf__host_used_slots: a page that is one sequence's last and another's inner page is read
// whole), ascending. Sorting the table's entries costs O(E log E) and nothing per pool page:
// kvf__host_used_slots' array of P entries would be up to 2^26 of them (an 8 GiB pool of
// 128-byte pages) for every case with page ids past 65535, a sixth of a campaign.
int read_pages(Host *h, const kvf_case *c, kvf_error *err) {
    h->num_read_pages = 0;
    const int64_t entries = c->kv_indptr[c->batch_size];
    if (entries == 0) return 0;
    if ((size_t)entries > h->pages_cap) {
        free(h->pages);
        free(h->page_used);
        free(h->page_sort);
        h->pages = (int64_t *)malloc((size_t)entries * sizeof *h->pages);
        h->page_used = (int32_t *)malloc((size_t)entries * sizeof *h->page_used);
        h->page_sort = malloc((size_t)entries * sizeof(PageUse));
        h->pages_cap = h->pages && h->page_used && h->page_sort ? (size_t)entries : 0;
        if (!h->pages_cap)
            return kvf_error_set(err, KVF_ENOMEM, "out of host memory for the page list");
    }
    PageUse *u = (PageUse *)h->page_sort;
    for (int32_t b = 0; b < c->batch_size; ++b) {
        const int32_t beg = c->kv_indptr[b], end = c->kv_indptr[b + 1];
        for (int32_t e = beg; e < end; ++e) {
            u[e].page = c->kv_indices[e];
            u[e].used = e == end - 1 ? c->kv_last_page_len[b] : c->page_size;
        }
    }
    qsort(u, (size_t)entries, sizeof *u, cmp_page_use);
    int64_t n = 0;
    for (int64_t i = 0; i < entries; ++i) {
        if (n > 0 && h->pages[n - 1] == u[i].page) {
            if (u[i].used > h->page_used[n - 1]) h->page_used[n - 1] = u[i].used;
            continue;
        }
        h->pages[n] = u[i].page;
        h->page_used[n++] = u[i].used;
    }
    h->num_read_pages = n;
    return 0;
}

// The pages the pools hold from the last case (`written`) that the loaded case does not read,
// into dst: what the prepare kernel re-poisons. Both lists ascend, so one merge pass.
static int64_t pages_no_longer_read(const Host *h, int64_t *dst) {
    int64_t n = 0, j = 0;
    for (int64_t i = 0; i < h->n_written; ++i) {
        const int64_t p = h->written[i];
        while (j < h->num_read_pages && h->pages[j] < p)
            ++j;
        if (j < h->num_read_pages && h->pages[j] == p) continue;
        dst[n++] = p;
    }
    return n;
}

// Whether the loaded case's pages go up in batches before the run (more than one stage of
// them) rather than through the prepare kernel. Sets n_poison (-1: the pages of `written` that
// this case does not read, counted by write_lists; all of them when their geometry differs,
// since their bytes may then overlap this case's pages) and n_scatter, and returns the pages
// the stage holds. Needs pools_reserve first: a fresh allocation is poisoned whole, so nothing
// is re-poisoned.
static int64_t plan_pages(Host *h, int *staged) {
    const int64_t per_batch = (int64_t)(h->stage_bytes / (2 * h->page_bytes));
    *staged = h->num_read_pages > per_batch;
    h->n_scatter = *staged ? 0 : h->num_read_pages;
    h->poison_page_bytes = h->written_page_bytes;
    if (!h->pool_clean)
        h->n_poison = 0;
    else if (*staged || h->written_page_bytes != h->page_bytes)
        h->n_poison = h->n_written;
    else
        h->n_poison = -1;
    return *staged ? per_batch : h->num_read_pages;
}

// Page p of cache `which` (0 K, 1 V) as the pool holds it, page_bytes bytes into dst: the
// case's page image, bf16, or packed to the cache's FP8 bytes through the host's scratch
// (reserved by load_case).
void page_bytes_of(const Host *h, const kvf_case *c, int which, int64_t p, int32_t used,
                   unsigned char *dst) {
    kvf__host_layout hl; // dense: load_case takes no other
    kvf__host_layout_of(c, &hl);
    const kvf_bf16 *cache = which ? c->v_cache : c->k_cache;
    if (!h->fp8) {
        kvf__host_page_image(c, &hl, cache, p, used, (kvf_bf16 *)dst);
        return;
    }
    kvf__host_page_image(c, &hl, cache, p, used, h->img);
    kvf__host_fp8_pack(dst, h->img, (int64_t)h->page_bytes,
                       which ? c->quant.v_dtype : c->quant.k_dtype);
}

// The images of the n pages the case reads from its i-th on into `stage`: their K images, then
// their V images (the layout the scatter kernels read).
static void write_page_images(const Host *h, const kvf_case *c, int64_t i0, int64_t n,
                              unsigned char *stage) {
    for (int64_t i = 0; i < n; ++i) {
        const int64_t p = h->pages[i0 + i];
        const int32_t used = h->page_used[i0 + i];
        page_bytes_of(h, c, 0, p, used, stage + (size_t)i * h->page_bytes);
        page_bytes_of(h, c, 1, p, used, stage + (size_t)(n + i) * h->page_bytes);
    }
}

// The pages in batches through d_stage, before the run: re-poisons the listed pages of
// `written` (in their own geometry), then writes each batch, waiting for the previous batch's
// copy before refilling the stage. The lists are in h_up already (write_lists).
static int upload_staged(Host *h, const kvf_case *c, kvf_error *err) {
    const Layout &L = h->L;
    unsigned char *io = (unsigned char *)h->d_io, *up = (unsigned char *)h->h_up;
    const size_t poison_b = (size_t)h->n_poison * sizeof(int64_t);
    int rc =
        kvf__cuda_dev_grow(&h->d_stage, &h->stage_cap, poison_b > L.stage_b ? poison_b : L.stage_b,
                           "Allocating device staging", err);
    if (rc) return rc;
    KVF_CUDA_TRY(cudaMemcpyAsync(io + L.dev_ids_at, up + L.ids_at,
                                 (size_t)h->num_read_pages * sizeof(int64_t),
                                 cudaMemcpyHostToDevice, h->stream),
                 "Uploading the page list");
    if (h->n_poison > 0) {
        KVF_CUDA_TRY(cudaMemcpyAsync(h->d_stage, up + L.poison_at, poison_b, cudaMemcpyHostToDevice,
                                     h->stream),
                     "Uploading the page list");
        const int64_t page_vec = (int64_t)(h->poison_page_bytes / 16);
        KVF_CUDA_TRY(launch_poison_pages((const int64_t *)h->d_stage, h->n_poison, page_vec,
                                         (uint4 *)h->d_k, (uint4 *)h->d_v, h->pool_word, h->stream),
                     "Launching the page poison kernel");
    }
    h->n_poison = 0;
    const int64_t per_batch = (int64_t)(L.stage_b / (2 * h->page_bytes));
    const int64_t page_vec = (int64_t)(h->page_bytes / 16);
    unsigned char *stage = up + L.stage_at;
    for (int64_t i0 = 0; i0 < h->num_read_pages; i0 += per_batch) {
        const int64_t left = h->num_read_pages - i0, n = left < per_batch ? left : per_batch;
        if (i0 > 0) KVF_CUDA_TRY(cudaStreamSynchronize(h->stream), "Uploading pages");
        write_page_images(h, c, i0, n, stage);
        KVF_CUDA_TRY(cudaMemcpyAsync(h->d_stage, stage, (size_t)(2 * n) * h->page_bytes,
                                     cudaMemcpyHostToDevice, h->stream),
                     "Uploading pages");
        KVF_CUDA_TRY(launch_scatter_pages((const uint4 *)h->d_stage,
                                          (const int64_t *)(io + L.dev_ids_at) + i0, n, page_vec,
                                          (uint4 *)h->d_k, (uint4 *)h->d_v, h->stream),
                     "Launching the page scatter kernel");
    }
    return 0;
}

// Remembers the loaded case's pages as what the pools hold once it runs (the next case
// re-poisons them).
static int note_written(Host *h, kvf_error *err) {
    const int64_t n = h->num_read_pages;
    if ((size_t)n > h->written_cap) {
        int64_t *w = (int64_t *)realloc(h->written, (size_t)n * sizeof *w);
        if (!w) return kvf_error_set(err, KVF_ENOMEM, "out of host memory for the page list");
        h->written = w;
        h->written_cap = (size_t)n;
    }
    if (n) memcpy(h->written, h->pages, (size_t)n * sizeof *h->written);
    h->n_written = n;
    h->written_page_bytes = h->page_bytes;
    return 0;
}

// ---- layout and images -------------------------------------------------------------------

// Lays out h_up and d_io for the shape, the slots' workspaces, poison_slots page ids to
// re-poison (at most), the pages the case reads and a stage of stage_pages pages (none when
// they go up in batches first); sizes every buffer.
int layout(Host *h, const kvf_case *c, int64_t poison_slots, int64_t stage_pages, kvf_error *err) {
    Layout &L = h->L;
    memset(&L, 0, sizeof L);
    const int64_t B = c->batch_size;
    L.q_b = (size_t)kvf_case_q_elems(c) * 2;
    L.ip_b = (size_t)(B + 1) * 4;
    L.ix_b = (size_t)c->kv_indptr[B] * 4;
    L.ll_b = (size_t)B * 4;
    L.q = kG;
    L.ip = piece_bytes(L.q_b) + kG;
    L.ix = L.ip - kG + piece_bytes(L.ip_b) + kG;
    // Under graph replay both cases get the table room of the longer one: same addresses.
    const size_t ix_room =
        L.ix_b > (size_t)h->floor_entries * 4 ? L.ix_b : (size_t)h->floor_entries * 4;
    L.ll = L.ix - kG + piece_bytes(ix_room) + kG;
    // The scales (FP8 caches): guarded inputs like the rest, so a write to them is found.
    L.ks_b = c->quant.granularity && c->k_scale ? c->scale_bytes : 0;
    L.vs_b = c->quant.granularity && c->v_scale ? c->scale_bytes : 0;
    L.ks = L.ll - kG + piece_bytes(L.ll_b) + kG;
    L.vs = L.ks - kG + piece_bytes(L.ks_b) + kG;
    L.in_b = L.vs - kG + piece_bytes(L.vs_b);
    const int64_t ids =
        h->num_read_pages > h->floor_read_pages ? h->num_read_pages : h->floor_read_pages;
    const size_t ids_b = align256((size_t)ids * sizeof(int64_t));
    L.poison_at = L.in_b;
    L.ids_at = L.poison_at + align256((size_t)poison_slots * sizeof(int64_t));
    L.stage_at = L.ids_at + ids_b;
    L.stage_b = (size_t)(2 * stage_pages) * h->page_bytes;
    L.image_b = L.stage_at + L.stage_b;
    L.dev_ids_at = L.in_b;
    L.res_at = L.dev_ids_at + ids_b;
    L.out_at = L.res_at + kResBytes;
    L.o_b = (size_t)kvf_case_o_elems(c) * 2;
    L.lse_b = (size_t)kvf_case_lse_elems(c) * 4;
    L.o = kG;
    L.lse = piece_bytes(L.o_b) + kG;
    L.out_b = L.lse - kG + piece_bytes(L.lse_b);
    L.ws_at = L.out_at + L.out_b;
    L.ws_bytes = h->floor_ws;
    for (int i = 0; i < h->n; ++i)
        if (h->slots[i].rc == 0 && h->slots[i].ws_bytes > L.ws_bytes)
            L.ws_bytes = h->slots[i].ws_bytes;
    L.ws_region = piece_bytes(L.ws_bytes);
    L.total = L.ws_at + L.ws_region;
    int rc = kvf__cuda_dev_grow(&h->d_io, &h->io_cap, L.total,
                                "Allocating device inputs and outputs", err);
    if (!rc)
        rc = kvf__cuda_mapped_grow(&h->h_up, &h->d_up, &h->up_cap, L.image_b,
                                   "Allocating pinned inputs", err);
    if (!rc)
        rc = kvf__cuda_mapped_grow(&h->h_down, &h->d_down, &h->down_cap, kResBytes + L.out_b,
                                   "Allocating pinned outputs", err);
    return rc;
}

// h_up's image of `in`: guards and padding KVF_HOST_GUARD_BYTE. It also stays what `in` must
// hold after the run, for locating a changed byte.
void build_images(Host *h, const kvf_case *c) {
    const Layout &L = h->L;
    unsigned char *up = (unsigned char *)h->h_up;
    kvf__host_fill_guard(up, L.in_b);
    if (L.q_b) memcpy(up + L.q, c->q, L.q_b);
    memcpy(up + L.ip, c->kv_indptr, L.ip_b);
    if (L.ix_b) memcpy(up + L.ix, c->kv_indices, L.ix_b);
    if (L.ll_b) memcpy(up + L.ll, c->kv_last_page_len, L.ll_b);
    if (L.ks_b) memcpy(up + L.ks, c->k_scale, L.ks_b);
    if (L.vs_b) memcpy(up + L.vs, c->v_scale, L.vs_b);
}

// h_up's lists (the pages to re-poison, n_poison of them from here on; the pages read) and, for
// a case that goes up with the run, the stage: every page's K image, then every V image.
void write_lists(Host *h, const kvf_case *c, int staged) {
    const Layout &L = h->L;
    unsigned char *up = (unsigned char *)h->h_up;
    int64_t *poison = (int64_t *)(up + L.poison_at);
    if (h->n_poison < 0)
        h->n_poison = pages_no_longer_read(h, poison);
    else if (h->n_poison > 0)
        memcpy(poison, h->written, (size_t)h->n_poison * sizeof *poison);
    if (h->num_read_pages)
        memcpy(up + L.ids_at, h->pages, (size_t)h->num_read_pages * sizeof(int64_t));
    if (staged) return;
    write_page_images(h, c, 0, h->num_read_pages, up + L.stage_at);
}

// supports() and plan() of every slot for the loaded shape and table; sizes their workspaces.
void plan_slots(Host *h, const kvf_case *c) {
    for (int i = 0; i < h->n; ++i) {
        Slot *s = &h->slots[i];
        const kvf_plugin_kernel *d = s->desc;
        kvf_error_clear(&s->why);
        s->ws_bytes = 0;
        s->rc = kvf__host_supports(d, &h->shape, &s->why);
        if (!s->rc && d->plan) {
            char msg[KVF_ERROR_MSG_MAX] = {0};
            const kvf_plugin_index index = {c->kv_indptr, c->kv_indices, c->kv_last_page_len};
            const int st = d->plan(s->state, &h->shape, &index, msg, sizeof msg - 1);
            s->rc = kvf__host_status(d, st, msg, "plan", &s->why);
        }
        if (!s->rc)
            s->rc = kvf__host_workspace_bytes(d, s->state, &h->shape, &s->ws_bytes, &s->why);
    }
}

void fill_args(Host *h, const Slot *s, kvf_plugin_args *a) {
    const Layout &L = h->L;
    unsigned char *io = (unsigned char *)h->d_io;
    kvf__host_layout hl; // dense: load_case takes no other
    kvf__host_layout_of(h->c, &hl);
    kvf__host_layout_args(&hl, h->c, &h->shape, a);
    a->q = (const uint16_t *)(io + L.q);
    a->k_cache = (const uint16_t *)h->d_k;
    a->v_cache = (const uint16_t *)h->d_v;
    a->kv_indptr = (const int32_t *)(io + L.ip);
    a->kv_indices = (const int32_t *)(io + L.ix);
    a->kv_last_page_len = (const int32_t *)(io + L.ll);
    a->k_scale = L.ks_b ? (const float *)(io + L.ks) : NULL;
    a->v_scale = L.vs_b ? (const float *)(io + L.vs) : NULL;
    a->o = (uint16_t *)(io + L.out_at + L.o);
    a->lse = (float *)(io + L.out_at + L.lse);
    // A captured run keeps the workspace it was given: under graph replay it gets the whole
    // region laid out for both cases.
    const size_t ws = h->graph_phase == kEager ? s->ws_bytes : L.ws_bytes;
    a->workspace = ws ? io + L.ws_at + kG : NULL;
    a->workspace_bytes = ws;
    a->stream = h->stream;
}

CheckParams check_params(Host *h) {
    const Layout &L = h->L;
    unsigned char *io = (unsigned char *)h->d_io, *up = (unsigned char *)h->d_up;
    CheckParams p;
    memset(&p, 0, sizeof p);
    p.k = (uint4 *)h->d_k, p.v = (uint4 *)h->d_v;
    p.page_vec = (int64_t)(h->page_bytes / 16);
    // The pages the case reads: where the prepare kernel writes them, and what the checksums
    // cover in a pool too large to cover whole.
    p.ids = (const int64_t *)(io + L.dev_ids_at);
    p.n_ids = h->num_read_pages;
    const size_t pool = (size_t)h->num_pages * h->page_bytes;
    if (pool > 0 && pool <= kWholePoolCheckBytes) p.whole_vecs = (int64_t)(pool / 16);
    p.up_in = (const uint4 *)up;
    p.up_ids = (const int64_t *)(up + L.ids_at);
    p.poison = (const int64_t *)(up + L.poison_at);
    p.n_poison = h->n_poison;
    p.poison_vec = (int64_t)(h->poison_page_bytes / 16);
    p.poison_word = h->pool_word;
    p.stage = (const uint4 *)(up + L.stage_at);
    p.n_scatter = h->n_scatter;
    p.in = (const uint4 *)io;
    p.in_vecs = (int64_t)(L.in_b / 16);
    p.out = io + L.out_at, p.out_b = L.out_b;
    p.o_at = L.o, p.o_b = L.o_b, p.lse_at = L.lse, p.lse_b = L.lse_b;
    p.ws = io + L.ws_at, p.ws_bytes = L.ws_bytes, p.ws_region = L.ws_region;
    p.res = (CheckResult *)(io + L.res_at);
    p.down = (unsigned char *)h->d_down;
    return p;
}

// ---- loading a case ------------------------------------------------------------------------

// The element size of the case's caches: page_bytes, fp8, the image scratch, and the pools'
// poison. Pools filled with the other poison are filled again (pool_clean cleared): a campaign
// that alternates bf16 and FP8 cases pays a pool fill at each switch, which is cheap for the
// pools of small cases and rare for large ones.
int set_elements(Host *h, const kvf_case *c, kvf_error *err) {
    const int kf = kvf_kv_dtype_is_fp8(c->quant.k_dtype),
              vf = kvf_kv_dtype_is_fp8(c->quant.v_dtype);
    if (kf != vf)
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "the CUDA buffer host lays out K and V caches of one element size, "
                             "not a bf16 cache beside an FP8 one");
    h->fp8 = kf;
    const int64_t pe = kvf_case_page_elems(c);
    h->page_bytes = (size_t)pe * (kf ? 1 : 2);
    const uint32_t word = kf ? kPoisonWordFp8 : kPoisonWord;
    if (word != h->pool_word) h->pool_clean = 0;
    h->pool_word = word;
    if (kf && (size_t)pe > h->img_cap) {
        kvf_bf16 *img = (kvf_bf16 *)realloc(h->img, (size_t)pe * sizeof *img);
        if (!img) return kvf_error_set(err, KVF_ENOMEM, "out of host memory for a page image");
        h->img = img;
        h->img_cap = (size_t)pe;
    }
    return 0;
}

// Everything of one host case before the run: validation, plans, layout, images, pages.
int load_case(Host *h, const kvf_case *c, kvf_error *err) {
    h->loaded = 0;
    h->c = c;
    h->pools_known = 1;
    int rc = kvf__host_check_case(c, err);
    if (rc) return rc;
    if (!kvf_layout_is_dense(&c->layout)) {
        char text[160];
        kvf_layout_text(&c->layout, text, sizeof text);
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "the CUDA buffer host lays out dense buffers only (this case's "
                             "layout: %s)",
                             text);
    }
    if (c->kv_indptr[c->batch_size] > 0 && (!c->k_cache || !c->v_cache))
        return kvf_error_set(err, KVF_EINVAL, "the case has no k_cache or v_cache");
    kvf_kernel_shape(c, &h->shape);
    plan_slots(h, c);
    host_mark(h->t, kPlan);
    if (h->n == 1 && h->slots[0].rc) {
        if (err) *err = h->slots[0].why;
        return h->slots[0].rc;
    }
    rc = set_elements(h, c, err);
    if (rc) return rc;
    h->num_pages = c->num_pages;
    rc = read_pages(h, c, err);
    if (rc) return rc;
    // Without a pool the case reads no page, and the pools stay as they are.
    const size_t pool = (size_t)c->num_pages * h->page_bytes;
    int staged = 0;
    int64_t stage_pages = 0;
    h->n_poison = h->n_scatter = 0;
    if (pool > 0) {
        // The copies move 16-byte vectors; every bf16 page of 8 * k elements is a multiple of 16.
        if (h->page_bytes % 16 != 0)
            return kvf_error_set(err, KVF_EUNSUPPORTED,
                                 "a page of %zu bytes is not a multiple of 16 bytes",
                                 h->page_bytes);
        if (h->num_read_pages > 0 && 2 * h->page_bytes > h->stage_bytes)
            return kvf_error_set(err, KVF_EUNSUPPORTED,
                                 "a page of %zu bytes and its V page exceed the %zu-byte staging "
                                 "buffer",
                                 h->page_bytes, h->stage_bytes);
        rc = pools_reserve(h, pool, err);
        if (rc) return rc;
        stage_pages = plan_pages(h, &staged);
    }
    rc = layout(h, c, h->n_poison < 0 ? h->n_written : h->n_poison, stage_pages, err);
    if (rc) return rc;
    build_images(h, c);
    write_lists(h, c, staged);
    host_mark(h->t, kImages);
    if (pool > 0) {
        // From here the pools change (in the prepare kernel when not staged): a failure leaves
        // them unknown.
        h->pool_touched = 1;
        if (!h->pool_clean) rc = pools_fill(h, err);
        if (!rc && staged) rc = upload_staged(h, c, err);
        if (!rc) rc = note_written(h, err);
        if (rc) return rc;
        h->pool_clean = 1;
    }
    host_mark(h->t, kPools);
    h->loaded = 1;
    return 0;
}

} // namespace kvf_cuda_host
