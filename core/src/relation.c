/* Invariance relations (kvfuzz/relation.h, docs/invariance.md): deriving the second case of a
 * relation and comparing the two runs' bits. */
#include "kvfuzz/relation.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/prng.h"

#define KVF__PROMISED_DEFAULT 1
#define KVF__PROMISED_DECLARED 0

static const char *const relation_names[KVF_RELATION_COUNT] = {
#define KVF_RELATION(id, name, promised, doc) name,
#include "kvfuzz/relations.def"
#undef KVF_RELATION
};
static const char *const relation_docs[KVF_RELATION_COUNT] = {
#define KVF_RELATION(id, name, promised, doc) doc,
#include "kvfuzz/relations.def"
#undef KVF_RELATION
};
static const int relation_default[KVF_RELATION_COUNT] = {
#define KVF_RELATION(id, name, promised, doc) KVF__PROMISED_##promised,
#include "kvfuzz/relations.def"
#undef KVF_RELATION
};

const char *kvf_relation_name(kvf_relation r) {
    return (unsigned)r < KVF_RELATION_COUNT ? relation_names[r] : "?";
}

const char *kvf_relation_doc(kvf_relation r) {
    return (unsigned)r < KVF_RELATION_COUNT ? relation_docs[r] : "?";
}

int kvf_relation_is_replay(kvf_relation r) {
    return r == KVF_RELATION_GRAPH_REPLAY;
}

int kvf_relation_parse(const char *name) {
    for (int r = 0; r < KVF_RELATION_COUNT; r++)
        if (strcmp(name, relation_names[r]) == 0) return r;
    return -1;
}

unsigned kvf_relation_default_promises(void) {
    unsigned m = 0;
    for (int r = 0; r < KVF_RELATION_COUNT; r++)
        if (relation_default[r]) m |= KVF_RELATION_BIT(r);
    return m;
}

int kvf_relation_set_parse(const char *text, const char *what, unsigned base, unsigned *mask,
                           kvf_error *err) {
    unsigned m = base;
    for (const char *w = text ? text : ""; *w;) {
        const char *end = strchr(w, ',');
        const size_t n = end ? (size_t)(end - w) : strlen(w);
        const int minus = n > 0 && w[0] == '-';
        char name[64];
        int r = -1;
        if (n - minus < sizeof name) {
            memcpy(name, w + minus, n - minus);
            name[n - minus] = 0;
            r = strcmp(name, "all") == 0 ? KVF_RELATION_COUNT : kvf_relation_parse(name);
        }
        if (r < 0) {
            char known[256];
            kvf_relation_mask_text(KVF_RELATION_ALL, known, sizeof known);
            return kvf_error_set(
                err, KVF_EINVAL,
                "\"%.*s\" in the %s \"%.80s\" is not a relation (known: %s, or all; "
                "each may follow '-')",
                (int)(n < 64 ? n : 64), w, what, text, known);
        }
        const unsigned bits = r == KVF_RELATION_COUNT ? KVF_RELATION_ALL : KVF_RELATION_BIT(r);
        m = minus ? m & ~bits : m | bits;
        w += n + (end != NULL);
    }
    *mask = m;
    return 0;
}

int kvf_relation_promises_parse(const char *text, unsigned *mask, kvf_error *err) {
    return kvf_relation_set_parse(text, "promises", kvf_relation_default_promises(), mask, err);
}

void kvf_relation_mask_text(unsigned mask, char *buf, size_t size) {
    size_t used = 0;
    if (size) buf[0] = 0;
    for (int r = 0; r < KVF_RELATION_COUNT; r++)
        if (mask & KVF_RELATION_BIT(r)) {
            int n = snprintf(buf + used, used < size ? size - used : 0, "%s%s", used ? "," : "",
                             relation_names[r]);
            if (n > 0) used += (size_t)n;
        }
    if (!mask) snprintf(buf, size, "none");
}

void kvf_relation_pair_free(kvf_relation_pair *p) {
    if (!p) return;
    kvf_case_free(&p->derived);
    free(p->seq_of);
    free(p->head_of);
    free(p->excluded);
    memset(p, 0, sizeof *p);
}

/* ---- shared steps ---------------------------------------------------------------------------- */

/* The derived case's arrays, with c's shape, batch and table size, and a pool of num_pages. */
static int alloc_like(kvf_relation_pair *p, const kvf_case *c, int32_t batch, int64_t entries,
                      int64_t num_pages, const kvf_limits *lim, kvf_error *err) {
    int rc = kvf_case_alloc(&p->derived, c->num_qo_heads, c->num_kv_heads, c->head_dim,
                            c->page_size, batch, entries, num_pages, lim, err);
    if (rc) return rc;
    p->derived.sm_scale = c->sm_scale;
    p->derived.layout = c->layout; /* the same buffers' layout on both sides */
    /* The same dtypes and scales: tensor and per-head scales copied (derive_heads permutes
     * them), per-token ones moved with their pages (copy_page). */
    if ((rc = kvf_case_set_quant(&p->derived, &c->quant, lim, err))) return rc;
    if (c->quant.granularity == KVF_SCALE_TENSOR || c->quant.granularity == KVF_SCALE_HEAD) {
        memcpy(p->derived.k_scale, c->k_scale, c->scale_bytes);
        memcpy(p->derived.v_scale, c->v_scale, c->scale_bytes);
    }
    p->seq_of = malloc((size_t)(c->batch_size ? c->batch_size : 1) * sizeof *p->seq_of);
    p->head_of = malloc((size_t)c->num_qo_heads * sizeof *p->head_of);
    if (!p->seq_of || !p->head_of)
        return kvf_error_set(err, KVF_ENOMEM, "could not allocate the relation's maps");
    for (int32_t b = 0; b < c->batch_size; b++)
        p->seq_of[b] = b < batch ? b : -1;
    for (int32_t h = 0; h < c->num_qo_heads; h++)
        p->head_of[h] = h;
    return 0;
}

/* The derived case keeps c's sequences: its indptr and last-page lengths, and with `indices`
 * its page ids, with `q` its queries. */
static void copy_table(kvf_case *d, const kvf_case *c, int indices, int q) {
    memcpy(d->kv_indptr, c->kv_indptr, (size_t)(c->batch_size + 1) * sizeof *d->kv_indptr);
    memcpy(d->kv_last_page_len, c->kv_last_page_len,
           (size_t)c->batch_size * sizeof *d->kv_last_page_len);
    if (indices)
        memcpy(d->kv_indices, c->kv_indices,
               (size_t)c->kv_indptr[c->batch_size] * sizeof *d->kv_indices);
    if (q) memcpy(d->q, c->q, (size_t)kvf_case_q_elems(c) * sizeof *d->q);
}

static void copy_page(kvf_case *dst, int64_t to, const kvf_case *src, int64_t from) {
    const int64_t n = kvf_case_page_elems(src);
    memcpy(dst->k_cache + to * n, src->k_cache + from * n, (size_t)n * sizeof *dst->k_cache);
    memcpy(dst->v_cache + to * n, src->v_cache + from * n, (size_t)n * sizeof *dst->v_cache);
    if (src->quant.granularity == KVF_SCALE_TOKEN) { /* the page's slot scales go with it */
        const int64_t ns = (int64_t)src->page_size * src->num_kv_heads;
        memcpy(dst->k_scale + to * ns, src->k_scale + from * ns, (size_t)ns * sizeof(float));
        memcpy(dst->v_scale + to * ns, src->v_scale + from * ns, (size_t)ns * sizeof(float));
    }
}

/* Resident pages, then the full check of the derived case. */
static int finish(kvf_relation_pair *p, const kvf_limits *lim, kvf_error *err) {
    int rc = kvf_case_set_resident(&p->derived, NULL, 0, err);
    return rc ? rc : kvf_case_validate(&p->derived, lim, err);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* ---- placement ------------------------------------------------------------------------------- */

/* The first page id whose element offset (id x page stride) passes INT32_MAX. */
/* Elements from one page to the next in the kernels' buffers: the layout's page stride (a
 * padded page record reaches the int32 edge at a low page id). */
static int64_t page_stride(const kvf_case *c) {
    kvf_strides s;
    kvf_layout_strides(&c->layout, c->num_qo_heads, c->num_kv_heads, c->head_dim, c->page_size, &s);
    return s.kv_page;
}

static int64_t int32_edge_page(const kvf_case *c) {
    return ((int64_t)1 << 31) / page_stride(c) + 1;
}

/* Where the u referenced pages go: ids base.. in a pool of *pool pages. High placements
 * straddle page id 65,536 or the int32 edge of the element offset, as far as the limits let
 * the pool grow; otherwise (or when they cannot) the pages are shuffled in a small pool. */
static int64_t choose_base(const kvf_case *c, int64_t u, kvf_prng *rng, const kvf_limits *lim,
                           int64_t *pool) {
    const int64_t page_bytes = page_stride(c) * (int64_t)sizeof(kvf_bf16);
    int64_t cap = lim->max_pool_bytes / page_bytes;
    if (cap > lim->max_pool_pages) cap = lim->max_pool_pages;
    /* Per-token scales grow with the pool (KVF_CASE_MAX_SCALES per cache). */
    if (c->quant.granularity == KVF_SCALE_TOKEN) {
        const int64_t scap = KVF_CASE_MAX_SCALES / ((int64_t)c->page_size * c->num_kv_heads);
        if (cap > scap) cap = scap;
    }
    if (cap > INT32_MAX) cap = INT32_MAX;
    const uint64_t mode = kvf_prng_below(rng, 3);
    if (mode > 0) {
        int64_t target = mode == 1 ? 65536 : int32_edge_page(c);
        int64_t base = target - u / 2;
        if (base + u + 1 > cap) base = cap - u - 1;
        if (base > 2 * u) {
            *pool = base + u + 1;
            return base;
        }
    }
    *pool = u + (int64_t)kvf_prng_below(rng, (uint64_t)u + 1);
    return 0;
}

static int derive_placement(kvf_relation_pair *p, const kvf_case *c, kvf_prng *rng,
                            const kvf_limits *lim, kvf_error *err) {
    const int64_t entries = c->kv_indptr[c->batch_size];
    if (entries == 0)
        return kvf_error_set(err, KVF_EUNSUPPORTED, "the case references no page to move");
    int32_t *ids = malloc((size_t)entries * sizeof *ids);
    if (!ids) return kvf_error_set(err, KVF_ENOMEM, "could not allocate the page list");
    memcpy(ids, c->kv_indices, (size_t)entries * sizeof *ids);
    qsort(ids, (size_t)entries, sizeof *ids, cmp_i32);
    int64_t u = 0;
    for (int64_t i = 0; i < entries; i++)
        if (i == 0 || ids[i] != ids[u - 1]) ids[u++] = ids[i];
    int64_t pool = 0;
    const int64_t base = choose_base(c, u, rng, lim, &pool);
    /* new id of the i-th referenced page: base + perm[i], perm a permutation of the free slots */
    int64_t span = pool - base;
    int32_t *perm = malloc((size_t)span * sizeof *perm);
    int rc = perm ? alloc_like(p, c, c->batch_size, entries, pool, lim, err)
                  : kvf_error_set(err, KVF_ENOMEM, "could not allocate the page map");
    if (!rc) {
        for (int64_t i = 0; i < span; i++)
            perm[i] = (int32_t)i;
        for (int64_t i = 0; i < u; i++) { /* partial Fisher-Yates */
            int64_t j = i + (int64_t)kvf_prng_below(rng, (uint64_t)(span - i));
            int32_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        kvf_case *d = &p->derived;
        copy_table(d, c, 0, 1);
        for (int64_t i = 0; i < entries; i++) {
            const int32_t *at = bsearch(&c->kv_indices[i], ids, (size_t)u, sizeof *ids, cmp_i32);
            d->kv_indices[i] = (int32_t)(base + perm[at - ids]);
        }
        for (int64_t i = 0; i < u; i++)
            copy_page(d, base + perm[i], c, ids[i]);
        snprintf(p->what, sizeof p->what, "%lld referenced page(s) moved to ids %lld..%lld",
                 (long long)u, (long long)base, (long long)(pool - 1));
        rc = finish(p, lim, err);
    }
    free(perm);
    free(ids);
    return rc;
}

/* ---- head permutation ------------------------------------------------------------------------ */

static int derive_heads(kvf_relation_pair *p, const kvf_case *c, kvf_prng *rng,
                        const kvf_limits *lim, kvf_error *err) {
    const int32_t hk = c->num_kv_heads, g = c->num_qo_heads / hk, dim = c->head_dim;
    if (hk < 2) return kvf_error_set(err, KVF_EUNSUPPORTED, "one KV head has no permutation");
    int32_t perm[1024];
    if (hk > (int32_t)(sizeof perm / sizeof perm[0]))
        return kvf_error_set(err, KVF_EUNSUPPORTED, "more KV heads than the relation permutes");
    for (int32_t i = 0; i < hk; i++)
        perm[i] = i;
    for (int32_t i = hk - 1; i > 0; i--) {
        int32_t j = (int32_t)kvf_prng_below(rng, (uint64_t)i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    if (perm[0] == 0 && perm[1] == 1) perm[0] = 1, perm[1] = 0; /* never only the identity */
    const int64_t entries = c->kv_indptr[c->batch_size];
    int rc = alloc_like(p, c, c->batch_size, entries, c->num_pages, lim, err);
    if (rc) return rc;
    kvf_case *d = &p->derived;
    copy_table(d, c, 1, 0);
    for (int32_t h = 0; h < c->num_qo_heads; h++)
        p->head_of[h] = perm[h / g] * g + h % g;
    for (int32_t b = 0; b < c->batch_size; b++)
        for (int32_t h = 0; h < c->num_qo_heads; h++)
            memcpy(d->q + ((int64_t)b * c->num_qo_heads + p->head_of[h]) * dim,
                   c->q + ((int64_t)b * c->num_qo_heads + h) * dim, (size_t)dim * sizeof *d->q);
    /* Every resident page (poisoned unreferenced ones too) with its heads permuted. */
    for (int64_t i = 0; i < c->num_resident_pages; i++) {
        const int64_t page = c->resident_pages[i];
        for (int64_t s = 0; s < c->page_size; s++)
            for (int32_t kh = 0; kh < hk; kh++) {
                const int64_t from = ((page * c->page_size + s) * hk + kh) * dim;
                const int64_t to = ((page * c->page_size + s) * hk + perm[kh]) * dim;
                memcpy(d->k_cache + to, c->k_cache + from, (size_t)dim * sizeof *d->k_cache);
                memcpy(d->v_cache + to, c->v_cache + from, (size_t)dim * sizeof *d->v_cache);
                if (c->quant.granularity == KVF_SCALE_TOKEN) { /* each slot's scales too */
                    const int64_t fs = (page * c->page_size + s) * hk;
                    d->k_scale[fs + perm[kh]] = c->k_scale[fs + kh];
                    d->v_scale[fs + perm[kh]] = c->v_scale[fs + kh];
                }
            }
    }
    if (c->quant.granularity == KVF_SCALE_HEAD)
        for (int32_t kh = 0; kh < hk; kh++) {
            d->k_scale[perm[kh]] = c->k_scale[kh];
            d->v_scale[perm[kh]] = c->v_scale[kh];
        }
    snprintf(p->what, sizeof p->what, "%d KV heads permuted with their query groups", hk);
    rc = kvf_case_set_resident(d, c->resident_pages, c->num_resident_pages, err);
    return rc ? rc : kvf_case_validate(d, lim, err);
}

/* ---- batch ----------------------------------------------------------------------------------- */

/* B > 1: one sequence alone. B = 1: the sequence beside a shorter one sharing its first pages,
 * before or after it. */
static int derive_batch(kvf_relation_pair *p, const kvf_case *c, kvf_prng *rng,
                        const kvf_limits *lim, kvf_error *err) {
    const int32_t hq = c->num_qo_heads, dim = c->head_dim;
    const int32_t b0 = (int32_t)kvf_prng_below(rng, (uint64_t)c->batch_size);
    const int32_t n0 = c->kv_indptr[b0 + 1] - c->kv_indptr[b0];
    const int alone = c->batch_size > 1;
    const int32_t n1 = n0 > 1 ? n0 / 2 : n0; /* the companion's pages (B = 1) */
    const int32_t pos = alone ? 0 : (int32_t)kvf_prng_below(rng, 2);
    int rc = alloc_like(p, c, alone ? 1 : 2, alone ? n0 : (int64_t)n0 + n1, c->num_pages, lim, err);
    if (rc) return rc;
    kvf_case *d = &p->derived;
    for (int32_t b = 0; b < c->batch_size; b++)
        p->seq_of[b] = b == b0 ? pos : -1;
    const int32_t *pages = c->kv_indices + c->kv_indptr[b0];
    const int32_t len[2] = {alone || pos == 0 ? n0 : n1, alone || pos == 0 ? n1 : n0};
    d->kv_indptr[0] = 0;
    for (int32_t s = 0; s < d->batch_size; s++) {
        d->kv_indptr[s + 1] = d->kv_indptr[s] + len[s];
        memcpy(d->kv_indices + d->kv_indptr[s], pages, (size_t)len[s] * sizeof *pages);
        const int whole = s != pos;
        d->kv_last_page_len[s] =
            whole && len[s] > 0 && len[s] < n0 ? c->page_size : c->kv_last_page_len[b0];
        memcpy(d->q + (int64_t)s * hq * dim, c->q + (int64_t)b0 * hq * dim,
               (size_t)hq * dim * sizeof *d->q);
    }
    for (int32_t i = 0; i < n0; i++)
        copy_page(d, pages[i], c, pages[i]);
    if (alone)
        snprintf(p->what, sizeof p->what, "sequence %d of %d run alone", b0, c->batch_size);
    else
        snprintf(p->what, sizeof p->what, "the sequence run %s a shorter one sharing its pages",
                 pos ? "after" : "before");
    return finish(p, lim, err);
}

/* ---- graph replay ---------------------------------------------------------------------------- */

/* The case a CUDA graph is captured on before it is replayed on c (kvf_kernel_graph_replay):
 * the same batch, shape, pool and queries, each non-empty sequence cut to a shorter prefix of
 * its tokens (0 to length - 1, its first pages), so the capture's longest sequence, its token
 * count and its table are all smaller than the replay's. What a launch took from the host at
 * capture (a grid sized by the lengths, max_seq_len in an argument) is then stale at replay. */
static int derive_graph(kvf_relation_pair *p, const kvf_case *c, kvf_prng *rng,
                        const kvf_limits *lim, kvf_error *err) {
    const int32_t B = c->batch_size, S = c->page_size;
    int64_t *len = malloc((size_t)B * sizeof *len);
    if (!len) return kvf_error_set(err, KVF_ENOMEM, "could not allocate the cut lengths");
    int64_t entries = 0, tokens = 0, kept = 0;
    for (int32_t b = 0; b < B; b++) {
        const int64_t n = kvf_case_seq_len(c, b);
        len[b] = n > 0 ? (int64_t)kvf_prng_below(rng, (uint64_t)n) : 0;
        entries += (len[b] + S - 1) / S;
        tokens += n;
        kept += len[b];
    }
    int rc = tokens == 0 ? kvf_error_set(err, KVF_EUNSUPPORTED, "no sequence has a token to cut")
                         : alloc_like(p, c, B, entries, c->num_pages, lim, err);
    if (rc) {
        free(len);
        return rc;
    }
    kvf_case *d = &p->derived;
    memcpy(d->q, c->q, (size_t)kvf_case_q_elems(c) * sizeof *d->q);
    d->kv_indptr[0] = 0;
    for (int32_t b = 0; b < B; b++) {
        const int32_t pages = (int32_t)((len[b] + S - 1) / S);
        const int32_t *from = c->kv_indices + c->kv_indptr[b];
        d->kv_indptr[b + 1] = d->kv_indptr[b] + pages;
        memcpy(d->kv_indices + d->kv_indptr[b], from, (size_t)pages * sizeof *from);
        d->kv_last_page_len[b] = pages > 0 ? (int32_t)(len[b] - (int64_t)(pages - 1) * S) : 0;
        for (int32_t i = 0; i < pages; i++)
            copy_page(d, from[i], c, from[i]);
    }
    free(len);
    snprintf(p->what, sizeof p->what,
             "run() captured in a CUDA graph on the batch cut to %lld of its %lld tokens, then "
             "planned and replayed on the case",
             (long long)kept, (long long)tokens);
    return finish(p, lim, err);
}

/* ---- v scaling ------------------------------------------------------------------------------- */

#define KVF__SCALING_MAX_WORK ((int64_t)1 << 26) /* logit terms the exclusion may compute */

/* bf16 x 2^k where that is exact and normal (or zero, inf, NaN); 0 when it is not. */
static int scale_exact(kvf_bf16 x, int k, kvf_bf16 *out) {
    if (!kvf_bf16_is_finite(x) || (x & 0x7FFF) == 0) {
        *out = x;
        return 1;
    }
    if ((x & 0x7F80) == 0) return 0; /* subnormal: flushed by some kernels, not by others */
    const float y = ldexpf(kvf_bf16_to_f32(x), k);
    if (!(fabsf(y) >= 0x1p-126f) || !(fabsf(y) <= kvf_bf16_to_f32(KVF_BF16_MAX))) return 0;
    *out = kvf_f32_to_bf16_rne(y);
    return 1;
}

/* Whether every valid v of c scales exactly by 2^k, with L x max|v| x 2^k far from f32's top. */
static int v_scales(const kvf_case *c, int k) {
    const int32_t hk = c->num_kv_heads, dim = c->head_dim;
    for (int32_t b = 0; b < c->batch_size; b++) {
        const int64_t len = kvf_case_seq_len(c, b);
        for (int64_t t = 0; t < len; t++)
            for (int32_t kh = 0; kh < hk; kh++) {
                const kvf_bf16 *v = c->v_cache + kvf_case_kv_offset(c, b, t, kh, 0);
                for (int32_t d = 0; d < dim; d++) {
                    kvf_bf16 y;
                    if (!scale_exact(v[d], k, &y)) return 0;
                    if (kvf_bf16_is_finite(y) &&
                        fabs(kvf_bf16_to_f32(y)) * (double)(len + 1) > 0x1p100)
                        return 0;
                }
            }
    }
    return 1;
}

/* The same for scaled caches: every value scale a sequence reads times 2^k a normal f32 (so
 * the product is exact and no kernel flushes it), with L x max|v_scale v| x 2^k far from f32's
 * top. A tensor or per-head scale is read for every row, an empty sequence's too (a kernel may
 * multiply its zero output by it), so each of those stays finite as well: an infinite value
 * scale would put the derived case outside the input model, where 0 x inf is NaN. */
static int v_scale_scales(const kvf_case *c, int k) {
    if (c->quant.granularity == KVF_SCALE_TENSOR || c->quant.granularity == KVF_SCALE_HEAD)
        for (int64_t i = 0; i < kvf_case_scale_count(c); i++) {
            const double vs = fabs(ldexp((double)c->v_scale[i], k));
            if (vs != 0 && !(vs >= 0x1p-126 && vs <= 0x1p127)) return 0;
        }
    for (int32_t b = 0; b < c->batch_size; b++) {
        const int64_t len = kvf_case_seq_len(c, b);
        for (int64_t t = 0; t < len; t++)
            for (int32_t kh = 0; kh < c->num_kv_heads; kh++) {
                const double vs = ldexp((double)kvf_case_v_scale(c, b, t, kh), k);
                if (!(vs >= 0x1p-126 && vs <= 0x1p127)) return 0;
                const kvf_bf16 *v = c->v_cache + kvf_case_kv_offset(c, b, t, kh, 0);
                for (int32_t d = 0; d < c->head_dim; d++)
                    if (kvf_bf16_is_finite(v[d]) &&
                        fabs(kvf_bf16_to_f32(v[d])) * vs * (double)(len + 1) > 0x1p100)
                        return 0;
            }
    }
    return 1;
}

/* Marks the o elements with a term p_t |v_td| (p relative to the row's largest) below
 * 2^(|k| - 60), or with a non-finite logit: there a product or quotient may round in the
 * subnormal range on one side and not the other (sums that land there are exact). Without
 * memory for the logits, every element is marked: nothing compared is safer than a guess. */
static void mark_excluded(kvf_relation_pair *p, const kvf_case *c, int k) {
    const int32_t hq = c->num_qo_heads, hk = c->num_kv_heads, g = hq / hk, dim = c->head_dim;
    const double floor_term = ldexp(1.0, abs(k) - 60);
    const int64_t longest = kvf_case_max_seq_len(c);
    double *s = malloc((size_t)(longest > 0 ? longest : 1) * sizeof *s);
    for (int32_t b = 0; b < c->batch_size; b++) {
        const int64_t len = kvf_case_seq_len(c, b);
        for (int32_t h = 0; h < hq; h++) {
            uint8_t *ex = p->excluded + ((int64_t)b * hq + h) * dim;
            const kvf_bf16 *q = c->q + ((int64_t)b * hq + h) * dim;
            double m = -INFINITY;
            int bad = s == NULL;
            for (int64_t t = 0; t < len && !bad; t++) {
                const kvf_bf16 *kk = c->k_cache + kvf_case_kv_offset(c, b, t, h / g, 0);
                double dot = 0;
                for (int32_t d = 0; d < dim; d++)
                    dot += (double)kvf_bf16_to_f32(q[d]) * kvf_bf16_to_f32(kk[d]);
                s[t] = dot * (double)kvf_case_k_scale(c, b, t, h / g) * c->sm_scale;
                bad = !isfinite(s[t]);
                if (s[t] > m) m = s[t];
            }
            for (int64_t t = 0; t < len && !bad; t++) {
                const kvf_bf16 *v = c->v_cache + kvf_case_kv_offset(c, b, t, h / g, 0);
                /* A term with its value scale (a kernel may form p v_scale first) */
                const double pt = exp(s[t] - m) * (double)kvf_case_v_scale(c, b, t, h / g);
                for (int32_t d = 0; d < dim; d++) {
                    const double term = pt * fabs(kvf_bf16_to_f32(v[d]));
                    if (term != 0 && term < floor_term) ex[d] = 1;
                }
            }
            for (int32_t d = 0; d < dim; d++) {
                if (bad) ex[d] = 1;
                p->num_excluded += ex[d];
            }
        }
    }
    free(s);
}

static int derive_scaling(kvf_relation_pair *p, const kvf_case *c, kvf_prng *rng,
                          const kvf_limits *lim, kvf_error *err) {
    /* 2^k times an FP8 value is rarely one: with scales, the value scales are multiplied
     * instead (exact for normal f32 results); FP8 caches without scales are not scaled. */
    const int scaled = c->quant.granularity != KVF_SCALE_NONE;
    if (!scaled && kvf_kv_dtype_is_fp8(c->quant.v_dtype))
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "v-scaling scales an FP8 v cache through its scales, and this one "
                             "has none");
    if (kvf_case_total_tokens(c) * c->num_qo_heads * c->head_dim > KVF__SCALING_MAX_WORK)
        return kvf_error_set(err, KVF_EUNSUPPORTED, "the case is too large for v-scaling");
    int k = 1 + (int)kvf_prng_below(rng, 3);
    if (kvf_prng_below(rng, 2)) k = -k;
    if (!(scaled ? v_scale_scales(c, k) : v_scales(c, k))) k = -k;
    if (!(scaled ? v_scale_scales(c, k) : v_scales(c, k)))
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "v holds values that 2^%d does not scale exactly", abs(k));
    const int64_t entries = c->kv_indptr[c->batch_size];
    int rc = alloc_like(p, c, c->batch_size, entries, c->num_pages, lim, err);
    if (rc) return rc;
    p->shift = k;
    p->excluded = calloc((size_t)kvf_case_o_elems(c) + 1, 1);
    if (!p->excluded) return kvf_error_set(err, KVF_ENOMEM, "could not allocate the v-scaling map");
    kvf_case *d = &p->derived;
    copy_table(d, c, 1, 1);
    for (int64_t i = 0; i < c->num_resident_pages; i++)
        copy_page(d, c->resident_pages[i], c, c->resident_pages[i]);
    /* v of every referenced page, tail slots included (a kernel must not read them); a page
     * referenced twice is scaled from the original again, to the same bits */
    const int64_t pe = kvf_case_page_elems(c);
    if (scaled) { /* the value scales, every one (zeros of unused slots stay zero) */
        for (int64_t i = 0; i < kvf_case_scale_count(c); i++)
            d->v_scale[i] = ldexpf(c->v_scale[i], k);
    }
    for (int64_t i = 0; i < entries && !scaled; i++) {
        kvf_bf16 *v = d->v_cache + (int64_t)c->kv_indices[i] * pe;
        const kvf_bf16 *src = c->v_cache + (int64_t)c->kv_indices[i] * pe;
        for (int64_t e = 0; e < pe; e++)
            if (!scale_exact(src[e], k, &v[e]))
                v[e] = kvf_f32_to_bf16_rne(ldexpf(kvf_bf16_to_f32(src[e]), k));
    }
    mark_excluded(p, c, k);
    snprintf(p->what, sizeof p->what, "v scaled by 2^%d (%lld o element(s) too near underflow)", k,
             (long long)p->num_excluded);
    rc = kvf_case_set_resident(d, c->resident_pages, c->num_resident_pages, err);
    return rc ? rc : kvf_case_validate(d, lim, err);
}

/* ---- deriving and comparing ------------------------------------------------------------------ */

int kvf_relation_derive(kvf_relation_pair *p, kvf_relation r, const kvf_case *c, uint64_t seed,
                        const kvf_limits *lim, kvf_error *err) {
    memset(p, 0, sizeof *p);
    p->relation = r;
    p->seed = seed;
    if (c->batch_size < 1)
        return kvf_error_set(err, KVF_EUNSUPPORTED, "an empty batch has nothing to relate");
    kvf_prng rng;
    kvf_prng_seed_stream(&rng, seed, (uint64_t)r);
    int rc;
    switch (r) {
    case KVF_RELATION_PLACEMENT:
        rc = derive_placement(p, c, &rng, lim, err);
        break;
    case KVF_RELATION_HEAD_PERMUTATION:
        rc = derive_heads(p, c, &rng, lim, err);
        break;
    case KVF_RELATION_V_SCALING:
        rc = derive_scaling(p, c, &rng, lim, err);
        break;
    case KVF_RELATION_BATCH:
        rc = derive_batch(p, c, &rng, lim, err);
        break;
    case KVF_RELATION_GRAPH_REPLAY:
        rc = derive_graph(p, c, &rng, lim, err);
        break;
    default:
        rc = kvf_error_set(err, KVF_EINVAL, "unknown relation %d", (int)r);
    }
    if (rc) {
        kvf_relation_pair_free(p);
        p->relation = r;
        p->seed = seed;
    }
    return rc;
}

static int same_o(kvf_bf16 want, kvf_bf16 got) {
    return want == got || (kvf_bf16_is_nan(want) && kvf_bf16_is_nan(got));
}

static int same_lse(float want, float got) {
    return kvf_f32_bits(want) == kvf_f32_bits(got) || (isnan(want) && isnan(got));
}

static void note(kvf_relation_diff *f, int lse, int32_t b, int32_t h, int32_t d, uint32_t bits,
                 uint32_t derived_bits) {
    if (f->count++ > 0) return;
    f->lse = lse;
    f->b = b, f->h = h, f->d = d;
    f->bits = bits;
    f->derived_bits = derived_bits;
}

int64_t kvf_relation_compare(const kvf_relation_pair *p, const kvf_case *c, const kvf_bf16 *o,
                             const float *lse, const kvf_bf16 *o2, const float *lse2,
                             kvf_relation_diff *first) {
    kvf_relation_diff f;
    memset(&f, 0, sizeof f);
    const int32_t hq = c->num_qo_heads, dim = c->head_dim;
    for (int32_t b = 0; b < c->batch_size; b++) {
        const int32_t b2 = p->seq_of ? p->seq_of[b] : b;
        if (b2 < 0) continue;
        for (int32_t h = 0; h < hq; h++) {
            const int32_t h2 = p->head_of ? p->head_of[h] : h;
            const int64_t row = (int64_t)b * hq + h, row2 = (int64_t)b2 * hq + h2;
            for (int32_t d = 0; d < dim; d++) {
                const kvf_bf16 a = o[row * dim + d], a2 = o2[row2 * dim + d];
                kvf_bf16 want = a;
                if (p->excluded && p->excluded[row * dim + d]) continue;
                if (p->shift && !scale_exact(a, p->shift, &want)) continue;
                f.compared++;
                if (!same_o(want, a2)) note(&f, 0, b, h, d, a, a2);
            }
            f.compared++;
            if (!same_lse(lse[row], lse2[row2]))
                note(&f, 1, b, h, dim, kvf_f32_bits(lse[row]), kvf_f32_bits(lse2[row2]));
        }
    }
    if (first) *first = f;
    return f.count;
}
