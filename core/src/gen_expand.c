/* Expansion: a spec into a case (docs/case-format.md describes each strategy). Lays out the page
 * table, draws q and the used slots of every referenced page, writes poison or filler where no
 * sequence reads, imposes the logit pattern, applies the overrides and validates; explicit
 * tensors are copied instead of drawn.
 *
 * Every random draw comes from a stream keyed by the recipe seed and a purpose
 * (gen_internal.h), and only IEEE-exact arithmetic turns draws into values, so a .kvfz file
 * means the same bits on every machine. A recipe names its expansion: expansion 1
 * (gen_draw1.c, one kvf_prng per purpose) or expansion 2 (gen_draw2.c: the same laws from
 * fewer, vectorized draws); the page table, the pool's layout and the logit patterns below are
 * shared, only the draws differ. Which unreferenced pages are written follows the pool rule of
 * kvfuzz/cost.h, which the cost estimates read too.
 *
 * The page tables' layouts and the logit patterns' key functions below are the ones their lines
 * of kvfuzz/strategies.def name, reached through tables built from that file. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "case_internal.h"
#include "gen_draw1.h"
#include "gen_draw2.h"
#include "gen_internal.h"
#include "gen_quant.h"
#include "kvfuzz/cost.h"
#include "kvfuzz/fp8.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/spec.h"

/* ---- one stream of either expansion ---------------------------------------------------- */

typedef struct gstream {
    int v2; /* expansion 2: d; else p */
    kvf_prng p;
    kvf__d2 d;
} gstream;

static void gs_seed(gstream *g, const kvf_recipe *rp, uint64_t purpose) {
    g->v2 = rp->expansion == KVF_EXPANSION_2;
    if (g->v2)
        kvf__d2_seed(&g->d, rp->seed, purpose);
    else
        kvf_prng_seed_stream(&g->p, rp->seed, purpose);
}

/* Uniform in [0, n); n < 2^32 for expansion 2 (every caller's n is a pool, a length or a row). */
static uint64_t gs_below(gstream *g, uint64_t n) {
    return g->v2 ? kvf__d2_below(&g->d, (uint32_t)n) : kvf_prng_below(&g->p, n);
}

static int gs_bit(gstream *g) {
    return (int)((g->v2 ? kvf__d2_word(&g->d) : kvf_prng_next(&g->p)) & 1);
}

static void gs_fill_rows(kvf_bf16 *dst, int64_t rows, int32_t row_len, const kvf_dist *d,
                         gstream *g) {
    if (g->v2)
        kvf__d2_fill(dst, rows, row_len, d, &g->d);
    else
        kvf__d1_fill_rows(dst, rows, row_len, d, &g->p);
}

/* Poison (nan or inf set) or filler for n slots of both caches. */
static void gs_unused(kvf_bf16 *kp, kvf_bf16 *vp, int64_t n, gstream *g, int nan, int inf) {
    if (!g->v2) {
        if (nan || inf) {
            kvf__d1_poison_pair(kp, vp, n, &g->p, nan, inf);
        } else {
            kvf__d1_filler(kp, n, &g->p);
            kvf__d1_filler(vp, n, &g->p);
        }
    } else if (nan || inf) {
        kvf__d2_poison(kp, n, nan, &g->d);
        kvf__d2_poison(vp, n, nan, &g->d);
    } else {
        kvf__d2_filler(kp, n, &g->d);
        kvf__d2_filler(vp, n, &g->d);
    }
}

/* ---- page tables: one layout per KVF_PAGE_TABLE line ----------------------------------------
 * Each writes the `entries` ids of the table and the pool size, drawing from the table stream. */

typedef int (*layout_fn)(const kvf_recipe *rp, int64_t entries, int32_t *ids, int64_t *pool,
                         gstream *rng, const kvf_limits *lim, kvf_error *err);

static int kvf__layout_contiguous(const kvf_recipe *rp, int64_t entries, int32_t *ids,
                                  int64_t *pool, gstream *rng, const kvf_limits *lim,
                                  kvf_error *err) {
    (void)rng, (void)lim, (void)err;
    *pool = entries + rp->spare_pages;
    for (int64_t i = 0; i < entries; i++)
        ids[i] = (int32_t)i;
    return 0;
}

static int kvf__layout_reversed(const kvf_recipe *rp, int64_t entries, int32_t *ids, int64_t *pool,
                                gstream *rng, const kvf_limits *lim, kvf_error *err) {
    (void)rng, (void)lim, (void)err;
    *pool = entries + rp->spare_pages;
    for (int64_t i = 0; i < entries; i++)
        ids[i] = (int32_t)(*pool - 1 - i);
    return 0;
}

/* The first `entries` ids of a random permutation of [0, pool) (partial Fisher-Yates). */
static int shuffle_ids(int64_t entries, int32_t *ids, int64_t pool, gstream *rng,
                       const kvf_limits *lim, kvf_error *err) {
    if (pool > lim->max_table_entries * 4 + 65536 || pool > INT32_MAX)
        return kvf_error_set(err, KVF_ELIMIT, "the page pool of %lld pages is too large to shuffle",
                             (long long)pool);
    int32_t *perm = malloc((size_t)(pool ? pool : 1) * sizeof *perm);
    if (!perm) return kvf_error_set(err, KVF_ENOMEM, "could not allocate the page permutation");
    for (int64_t i = 0; i < pool; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = 0; i < entries; i++) {
        int64_t j = i + (int64_t)gs_below(rng, (uint64_t)(pool - i));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
        ids[i] = perm[i];
    }
    free(perm);
    return 0;
}

static int kvf__layout_shuffled(const kvf_recipe *rp, int64_t entries, int32_t *ids, int64_t *pool,
                                gstream *rng, const kvf_limits *lim, kvf_error *err) {
    *pool = entries + rp->spare_pages;
    return shuffle_ids(entries, ids, *pool, rng, lim, err);
}

static int kvf__layout_scattered(const kvf_recipe *rp, int64_t entries, int32_t *ids, int64_t *pool,
                                 gstream *rng, const kvf_limits *lim, kvf_error *err) {
    *pool = 2 * entries + rp->spare_pages + 1;
    return shuffle_ids(entries, ids, *pool, rng, lim, err);
}

/* Every non-empty sequence starts with the same `prefix` pages (the shortest sequence's pages
 * but one, at least one), then owns the rest. */
static int kvf__layout_shared_prefix(const kvf_recipe *rp, int64_t entries, int32_t *ids,
                                     int64_t *pool, gstream *rng, const kvf_limits *lim,
                                     kvf_error *err) {
    (void)entries, (void)rng, (void)lim, (void)err;
    int64_t shortest = -1, next = 0, pos = 0;
    for (uint32_t b = 0; b < rp->batch_size; b++)
        if (rp->num_pages[b] && (shortest < 0 || rp->num_pages[b] < shortest))
            shortest = rp->num_pages[b];
    int64_t prefix = shortest > 1 ? shortest - 1 : (shortest == 1 ? 1 : 0);
    next = prefix;
    for (uint32_t b = 0; b < rp->batch_size; b++)
        for (int64_t p = 0; p < rp->num_pages[b]; p++)
            ids[pos++] = (int32_t)(p < prefix ? p : next++);
    *pool = next + rp->spare_pages;
    return 0;
}

static int kvf__layout_high_ids(const kvf_recipe *rp, int64_t entries, int32_t *ids, int64_t *pool,
                                gstream *rng, const kvf_limits *lim, kvf_error *err) {
    (void)lim;
    int64_t spare = rp->spare_pages;
    int64_t stride = 1 + (int64_t)gs_below(rng, 3);
    int64_t last = (int64_t)rp->page_id_base + (entries ? (entries - 1) * stride : 0);
    if (last > INT32_MAX - 1 - spare)
        return kvf_error_set(
            err, KVF_EINVAL,
            "high-ids table from page_id_base %u runs past the int32 page-id range",
            rp->page_id_base);
    for (int64_t i = 0; i < entries; i++)
        ids[i] = (int32_t)(rp->page_id_base + i * stride);
    *pool = (entries ? last + 1 : rp->page_id_base) + spare;
    return 0;
}

static const layout_fn layouts[KVF_TABLE_COUNT] = {
#define KVF_PAGE_TABLE(id, name, layout, pool, flags, doc) [KVF_TABLE_##id] = layout,
#include "kvfuzz/strategies.def"
};

/* Builds the page table and pool size; returns the ids in c->kv_indices. The recipe is checked
 * (kvf_recipe_check): its table kind is one of the table's. */
static int lay_out_table(const kvf_recipe *rp, int64_t entries, int64_t *pool_out, int32_t *ids,
                         const kvf_limits *lim, kvf_error *err) {
    gstream rng;
    gs_seed(&rng, rp, KVF__STREAM_TABLE);
    *pool_out = 0;
    return layouts[rp->table](rp, entries, ids, pool_out, &rng, lim, err);
}

/* Scales every used k row (or q) by 2^e, saturating nothing: only exact power-of-two steps. */
static void scale_bf16(kvf_bf16 *x, int64_t n, int e) {
    /* A bf16 times 2^e with |e| <= 127 stays far inside double's range, so the product by the
     * exact power of two is exact: the value ldexp gives, without a call per element. When the
     * input and the result are normal bf16 values the product is exact in bf16 too, and its
     * bits are the input's with e added to the exponent field: the same bits, without the
     * conversions. */
    const double p2 = ldexp(1.0, e);
    for (int64_t i = 0; i < n; i++) {
        const int32_t f = (x[i] >> 7) & 0xFF;
        if (f >= 1 && f <= 254 && f + e >= 1 && f + e <= 254)
            x[i] = (kvf_bf16)(x[i] + (e << 7));
        else if (kvf_bf16_is_finite(x[i]))
            x[i] = kvf__to_bf16((double)kvf_bf16_to_f32(x[i]) * p2);
    }
}

static int64_t page_slot_offset(const kvf_case *c, int64_t page, int32_t slot) {
    return (page * c->page_size + slot) * c->num_kv_heads * c->head_dim;
}

/* Token t's key for the ascending pattern, all kv heads. For kv head kh, with q the first q
 * head of its group: k_i = sign(q_i) * a_i on the coordinates where q_i != 0 (0 elsewhere), so
 * that every product q_i k_i is positive. Step t increments one a_i (round robin over those
 * coordinates) to the next bf16 value above it, so the exact logit q.k grows strictly at every
 * token: a per-token online softmax meets a new maximum, and rescales, at every step. a_i
 * starts at 2^(k scale - 6), which keeps N(0,1)-scale logits spanning a few units up to 2^14
 * tokens per coordinate; it stops at the largest finite bf16. */
static void ascending_key(kvf_bf16 *k, const kvf_bf16 *qb, int32_t hk, int32_t g, int32_t d,
                          int64_t t, int log2_scale) {
    int e = log2_scale - 6;
    if (e < -126) e = -126;
    if (e > 127) e = 127;
    const int64_t start = (int64_t)(e + 127) << 7; /* bits of +2^e */
    for (int32_t kh = 0; kh < hk; kh++) {
        const kvf_bf16 *q = qb + (int64_t)kh * g * d;
        int64_t nz = 0;
        for (int32_t i = 0; i < d; i++)
            nz += kvf_bf16_to_f32(q[i]) != 0.0f;
        int64_t rank = 0;
        for (int32_t i = 0; i < d; i++) {
            float qv = kvf_bf16_to_f32(q[i]);
            kvf_bf16 *ki = &k[(int64_t)kh * d + i];
            if (!(qv != 0.0f) || !kvf_bf16_is_finite(q[i])) {
                *ki = 0;
                continue;
            }
            /* Increments this coordinate has received by step t: steps j = 1..t increment
             * rank (j - 1) mod nz. */
            int64_t n = (t + nz - 1 - rank) / nz;
            int64_t bits = start + n;
            if (bits > 0x7F7F) bits = 0x7F7F;
            *ki = (kvf_bf16)(bits | (qv < 0 ? 0x8000 : 0));
            rank++;
        }
    }
}

/* ---- logit patterns: one per KVF_LOGIT_PATTERN line ------------------------------------------
 * A pattern rewrites the key of every token of every sequence (its key function, token after
 * token, drawing from the logits stream), then scales q and every written k page by 2^scale. */

typedef struct logit_ctx {
    const kvf_recipe *rp;
    const kvf_bf16 *base; /* one row of Hk x D values of the k distribution: the equal key */
    int64_t row;          /* Hk x D: one slot, all kv heads */
    int32_t hk, g, d;
    int big_e; /* spike magnitude relative to the k scale */
    gstream *rng;
} logit_ctx;

/* Token t's key k, for the sequence whose q is qb and whose special token is `special`. */
typedef void (*key_fn)(kvf_bf16 *k, const kvf_bf16 *qb, int64_t t, int64_t special,
                       const logit_ctx *x);

static void kvf__key_equal(kvf_bf16 *k, const kvf_bf16 *qb, int64_t t, int64_t special,
                           const logit_ctx *x) {
    (void)qb, (void)t, (void)special;
    memcpy(k, x->base, (size_t)x->row * sizeof *k);
}

static void kvf__key_near_tie(kvf_bf16 *k, const kvf_bf16 *qb, int64_t t, int64_t special,
                              const logit_ctx *x) {
    (void)qb, (void)t, (void)special;
    memcpy(k, x->base, (size_t)x->row * sizeof *k);
    for (int n = 0; n < 2; n++) {
        int64_t i = (int64_t)gs_below(x->rng, (uint64_t)x->row);
        if (kvf_bf16_is_finite(k[i]) && (k[i] & 0x7FFF) != 0x7F7F)
            k[i] = (kvf_bf16)(k[i] + gs_bit(x->rng));
    }
}

/* Aligns (sign 1) or anti-aligns (sign -1) the key with the first q head of each group, so that
 * head's logit is large with a known sign. */
static void aligned_key(kvf_bf16 *k, const kvf_bf16 *qb, double sign, const logit_ctx *x) {
    for (int32_t kh = 0; kh < x->hk; kh++)
        for (int32_t i = 0; i < x->d; i++) {
            float qv = kvf_bf16_to_f32(qb[(int64_t)kh * x->g * x->d + i]);
            double s = (qv > 0) ? sign : (qv < 0 ? -sign : 0.0);
            k[(int64_t)kh * x->d + i] = kvf__to_bf16(ldexp(s, x->big_e));
        }
}

static void kvf__key_spike(kvf_bf16 *k, const kvf_bf16 *qb, int64_t t, int64_t special,
                           const logit_ctx *x) {
    if (t == special) aligned_key(k, qb, 1.0, x);
}

static void kvf__key_very_negative(kvf_bf16 *k, const kvf_bf16 *qb, int64_t t, int64_t special,
                                   const logit_ctx *x) {
    if (t != special) aligned_key(k, qb, -1.0, x);
}

static void kvf__key_ascending(kvf_bf16 *k, const kvf_bf16 *qb, int64_t t, int64_t special,
                               const logit_ctx *x) {
    (void)special;
    ascending_key(k, qb, x->hk, x->g, x->d, t, x->rp->k.log2_scale);
}

static const struct {
    key_fn key;
    int scale;
} patterns[KVF_LOGITS_COUNT] = {
#define KVF_LOGIT_PATTERN(id, name, key, scale, flags, doc) [KVF_LOGITS_##id] = {key, scale},
#include "kvfuzz/strategies.def"
};

/* Every used slot's key, token after token: the equal key drawn first, then per non-empty
 * sequence its special token, then what the key function draws. */
static void rewrite_keys(kvf_case *c, const kvf_recipe *rp, key_fn key) {
    gstream rng;
    gs_seed(&rng, rp, KVF__STREAM_LOGITS);
    logit_ctx x = {.rp = rp, .hk = c->num_kv_heads, .d = c->head_dim, .rng = &rng};
    x.g = c->num_qo_heads / x.hk;
    x.row = (int64_t)x.hk * x.d;
    x.big_e = rp->k.log2_scale + 10;
    kvf_bf16 *base = malloc((size_t)x.row * sizeof *base);
    if (!base) return;
    gs_fill_rows(base, 1, (int32_t)x.row, &rp->k, &rng);
    x.base = base;
    for (int32_t b = 0; b < c->batch_size; b++) {
        int64_t len = kvf_case_seq_len(c, b);
        if (len == 0) continue;
        int64_t special = (int64_t)gs_below(&rng, (uint64_t)len);
        const kvf_bf16 *qb = c->q + (int64_t)b * c->num_qo_heads * x.d;
        for (int64_t t = 0; t < len; t++) {
            int64_t page = c->kv_indices[c->kv_indptr[b] + t / c->page_size];
            key(c->k_cache + page_slot_offset(c, page, (int32_t)(t % c->page_size)), qb, t, special,
                &x);
        }
    }
    free(base);
}

/* Applies the logit pattern to k (used slots of referenced pages) and, for the scaled ones, to
 * q and every written k page. */
static void shape_logits(kvf_case *c, const kvf_recipe *rp) {
    const key_fn key = patterns[rp->logits].key;
    const int e = patterns[rp->logits].scale;
    if (key) rewrite_keys(c, rp, key);
    if (e) {
        scale_bf16(c->q, kvf_case_q_elems(c), e);
        for (int64_t i = 0; i < c->num_resident_pages; i++) {
            int64_t page = c->resident_pages[i];
            scale_bf16(c->k_cache + page * kvf_case_page_elems(c), kvf_case_page_elems(c), e);
        }
    }
}

static int apply_overrides(kvf_case *c, const kvf_spec *s, int64_t **extra, int64_t *num_extra,
                           kvf_error *err) {
    int64_t entries = c->kv_indptr[c->batch_size];
    int64_t pool_elems = c->num_pages * kvf_case_page_elems(c);
    for (uint32_t i = 0; i < s->num_overrides; i++) {
        const kvf_override *o = &s->overrides[i];
        switch (o->target) {
        case KVF_OVERRIDE_TABLE_ENTRY:
            if (o->index >= (uint64_t)entries)
                return kvf_error_set(
                    err, KVF_EINVAL,
                    "override %u sets kv_indices[%llu] but the table has %lld entries", i,
                    (unsigned long long)o->index, (long long)entries);
            c->kv_indices[o->index] = (int32_t)o->value;
            break;
        case KVF_OVERRIDE_LAST_LEN:
            if (o->index >= (uint64_t)c->batch_size)
                return kvf_error_set(
                    err, KVF_EINVAL,
                    "override %u sets kv_last_page_len[%llu] but the batch has %d sequences", i,
                    (unsigned long long)o->index, c->batch_size);
            c->kv_last_page_len[o->index] = (int32_t)o->value;
            break;
        case KVF_OVERRIDE_Q:
            if (o->index >= (uint64_t)kvf_case_q_elems(c))
                return kvf_error_set(err, KVF_EINVAL,
                                     "override %u sets q[%llu] but q has %lld elements", i,
                                     (unsigned long long)o->index, (long long)kvf_case_q_elems(c));
            c->q[o->index] = (kvf_bf16)o->value;
            break;
        case KVF_OVERRIDE_K:
        case KVF_OVERRIDE_V: {
            if (o->index >= (uint64_t)pool_elems)
                return kvf_error_set(
                    err, KVF_EINVAL,
                    "override %u sets %s_cache[%llu] but the pool has %lld elements", i,
                    o->target == KVF_OVERRIDE_K ? "k" : "v", (unsigned long long)o->index,
                    (long long)pool_elems);
            /* Every element of an FP8 cache is an FP8 value's image, read or not: a slot no
             * sequence reads is still copied into the kernel's FP8 buffer, and a value with no
             * FP8 byte would be rounded on the way (docs/case-format.md, "Quantization"). */
            const int dt = o->target == KVF_OVERRIDE_K ? c->quant.k_dtype : c->quant.v_dtype;
            uint8_t byte;
            if (kvf_kv_dtype_is_fp8(dt) && !kvf_fp8_from_bf16_exact((kvf_bf16)o->value, dt, &byte))
                return kvf_error_set(err, KVF_EINVAL,
                                     "override %u sets %s_cache[%llu] to bf16 0x%04x, which is not "
                                     "an %s value",
                                     i, o->target == KVF_OVERRIDE_K ? "k" : "v",
                                     (unsigned long long)o->index, o->value, kvf_kv_dtype_name(dt));
            (o->target == KVF_OVERRIDE_K ? c->k_cache : c->v_cache)[o->index] = (kvf_bf16)o->value;
            int64_t *grown = realloc(*extra, (size_t)(*num_extra + 1) * sizeof **extra);
            if (!grown) return kvf_error_set(err, KVF_ENOMEM, "out of memory applying overrides");
            *extra = grown;
            (*extra)[(*num_extra)++] = (int64_t)(o->index / (uint64_t)kvf_case_page_elems(c));
            break;
        }
        default:
            return kvf_error_set(err, KVF_EINVAL, "override %u has unknown target %u", i,
                                 o->target);
        }
    }
    return 0;
}

/* Large caches are lazily mapped (case.c): every OS page the generator writes would fault on its
 * first store. Populating the ascending runs of pages about to be written first costs one call
 * per run instead of one fault per OS page. Only a hint: a kernel without MADV_POPULATE_WRITE
 * (or a refusal) leaves the faults to happen as before. */
static void prefault(const kvf_case *c, const int64_t *pages, int64_t n) {
#ifdef MADV_POPULATE_WRITE
    if (c->pool_bytes <= KVF_CASE_HEAP_POOL_BYTES) return; /* a heap block: no mapping of its own */
    const size_t os_page = (size_t)sysconf(_SC_PAGESIZE);
    const int64_t page_bytes = kvf_case_page_elems(c) * 2;
    if (page_bytes <= 0 || os_page == 0) return;
    for (int64_t i = 0; i < n;) {
        int64_t j = i + 1;
        while (j < n && pages[j] == pages[j - 1] + 1)
            j++;
        for (int k = 0; k < 2; k++) {
            uintptr_t lo = (uintptr_t)((k ? c->v_cache : c->k_cache) + pages[i] * (page_bytes / 2));
            uintptr_t hi = lo + (uintptr_t)((j - i) * page_bytes);
            lo &= ~(uintptr_t)(os_page - 1);
            if (hi - lo >= 2 * os_page) madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
        }
        i = j;
    }
#else
    (void)c;
    (void)pages;
    (void)n;
#endif
}

/* Writes values into referenced pages (used slots get data; unused slots of last pages get
 * poison or data) and chooses + writes the unreferenced pages that are kept resident. */
static int fill_pool(kvf_case *c, const kvf_recipe *rp, int64_t **extra, int64_t *num_extra,
                     const kvf_limits *lim, kvf_error *err) {
    const int64_t page_elems = kvf_case_page_elems(c);
    const int64_t slot_elems = (int64_t)c->num_kv_heads * c->head_dim;
    /* used[p] = most slots any sequence uses in page p (0 = unreferenced). Pages are keyed
     * through the sorted resident list so high-id pools need no P-sized array. */
    int rc = kvf_case_set_resident(c, NULL, 0, err);
    if (rc) return rc;
    int64_t nref = c->num_resident_pages;
    int32_t *used = calloc((size_t)(nref ? nref : 1), sizeof *used);
    if (!used) return kvf_error_set(err, KVF_ENOMEM, "out of memory filling the page pool");
    for (int32_t b = 0; b < c->batch_size; b++)
        for (int32_t i = c->kv_indptr[b]; i < c->kv_indptr[b + 1]; i++) {
            int32_t slots = (i == c->kv_indptr[b + 1] - 1) ? c->kv_last_page_len[b] : c->page_size;
            int64_t lo = 0, hi = nref - 1, key = c->kv_indices[i];
            while (lo < hi) { /* binary search in the sorted resident list */
                int64_t mid = (lo + hi) / 2;
                if (c->resident_pages[mid] < key)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (slots > used[lo]) used[lo] = slots;
        }
    int64_t resident_bytes = (nref * page_elems * 2) * 2 + kvf_case_q_elems(c) * 2;
    if (resident_bytes > lim->max_resident_bytes) {
        free(used);
        return kvf_error_set(err, KVF_ELIMIT,
                             "the referenced pages need %lld bytes, past the limit of %lld",
                             (long long)resident_bytes, (long long)lim->max_resident_bytes);
    }
    /* Unreferenced resident pages: all of a small pool, else the neighbours of referenced
     * pages (where an off-by-one lands). */
    int64_t budget =
        (lim->max_resident_bytes - resident_bytes) / (page_elems * 4 > 0 ? page_elems * 4 : 1);
    int full = (int64_t)c->pool_bytes <= KVF_FULL_POOL_BYTES && c->num_pages - nref <= budget;
    /* A heap pool (kvf__case_alloc left it unwritten) that is not written in full reads as
     * zero where it is not written, as a mapping would. */
    if (!full && c->pool_bytes && c->pool_bytes <= KVF_CASE_HEAP_POOL_BYTES) {
        memset(c->k_cache, 0, c->pool_bytes);
        memset(c->v_cache, 0, c->pool_bytes);
    }
    gstream rk, rv, rpois;
    gs_seed(&rk, rp, KVF__STREAM_K);
    gs_seed(&rv, rp, KVF__STREAM_V);
    gs_seed(&rpois, rp, KVF__STREAM_POISON);
    int tail_nan = rp->poison & KVF_POISON_TAIL_NAN, tail_inf = rp->poison & KVF_POISON_TAIL_INF;
    prefault(c, c->resident_pages, nref);
    for (int64_t i = 0; i < nref; i++) {
        int64_t page = c->resident_pages[i];
        kvf_bf16 *kp = c->k_cache + page * page_elems, *vp = c->v_cache + page * page_elems;
        int64_t used_elems = used[i] * slot_elems;
        gs_fill_rows(kp, used[i] * c->num_kv_heads, c->head_dim, &rp->k, &rk);
        gs_fill_rows(vp, used[i] * c->num_kv_heads, c->head_dim, &rp->v, &rv);
        gs_unused(kp + used_elems, vp + used_elems, page_elems - used_elems, &rpois, tail_nan,
                  tail_inf);
    }
    free(used);
    int unref_nan = rp->poison & KVF_POISON_UNREF_NAN,
        unref_inf = rp->poison & KVF_POISON_UNREF_INF;
    int64_t cap = full ? c->num_pages - nref
                       : (budget < KVF_POOL_NEIGHBOUR_PAGES ? budget : KVF_POOL_NEIGHBOUR_PAGES);
    int64_t *pages = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *pages);
    if (!pages) return kvf_error_set(err, KVF_ENOMEM, "out of memory choosing poisoned pages");
    int64_t n = 0, r = 0;
    if (full) {
        for (int64_t p = 0; p < c->num_pages && n < cap; p++) {
            while (r < nref && c->resident_pages[r] < p)
                r++;
            if (r < nref && c->resident_pages[r] == p) continue;
            pages[n++] = p;
        }
    } else {
        for (int64_t i = 0; i < nref && n < cap; i++)
            for (int delta = -1; delta <= 1 && n < cap; delta += 2) {
                int64_t p = c->resident_pages[i] + delta;
                if (p < 0 || p >= c->num_pages) continue;
                int taken =
                    (i + delta >= 0 && i + delta < nref && c->resident_pages[i + delta] == p) ||
                    (n > 0 && pages[n - 1] == p);
                if (!taken) pages[n++] = p;
            }
    }
    prefault(c, pages, n);
    for (int64_t i = 0; i < n; i++) {
        kvf_bf16 *kp = c->k_cache + pages[i] * page_elems, *vp = c->v_cache + pages[i] * page_elems;
        gs_unused(kp, vp, page_elems, &rpois, unref_nan, unref_inf);
    }
    *extra = pages;
    *num_extra = n;
    return 0;
}

static int build_explicit(kvf_case *c, const kvf_spec *s) {
    const kvf_explicit *ex = &s->explicit_tensors;
    int64_t entries = c->kv_indptr[c->batch_size];
    memcpy(c->kv_indices, ex->kv_indices, (size_t)entries * sizeof *ex->kv_indices);
    memcpy(c->q, ex->q, (size_t)kvf_case_q_elems(c) * sizeof *c->q);
    if (c->pool_bytes) {
        memcpy(c->k_cache, ex->k_cache, c->pool_bytes);
        memcpy(c->v_cache, ex->v_cache, c->pool_bytes);
    }
    return 0;
}

int kvf_case_build(kvf_case *out, const kvf_spec *s, const kvf_limits *lim, kvf_error *err) {
    memset(out, 0, sizeof *out);
    const kvf_recipe *rp = &s->recipe;
    int rc = kvf_recipe_check(rp, lim, err);
    if (rc) return rc;
    int64_t entries = kvf_recipe_entries(rp);
    int32_t *ids = malloc((size_t)(entries ? entries : 1) * sizeof *ids);
    if (!ids) return kvf_error_set(err, KVF_ENOMEM, "out of memory laying out the page table");
    int64_t pool = 0;
    if (s->has_explicit)
        pool = s->explicit_tensors.num_pages;
    else if ((rc = lay_out_table(rp, entries, &pool, ids, lim, err))) {
        free(ids);
        return rc;
    }
    /* Per-token scales grow with the pool: refused at its size, before the caches are written. */
    if (s->quant.kv.granularity == KVF_SCALE_TOKEN &&
        (rc = kvf__case_scale_limit(pool * rp->page_size * rp->num_kv_heads, lim, err))) {
        free(ids);
        return rc;
    }
    /* Explicit tensors fill the pool by copy, and fill_pool writes a small pool in full (or
     * zeroes it): neither needs it zeroed first. */
    rc = kvf__case_alloc(out, rp->num_qo_heads, rp->num_kv_heads, rp->head_dim, rp->page_size,
                         rp->batch_size, entries, pool, 0, lim, err);
    if (rc) {
        free(ids);
        return rc;
    }
    out->sm_scale = rp->sm_scale;
    out->layout = s->layout;
    for (uint32_t b = 0; b < rp->batch_size; b++) {
        out->kv_indptr[b + 1] = out->kv_indptr[b] + rp->num_pages[b];
        out->kv_last_page_len[b] = rp->last_page_len[b];
    }
    int64_t *extra = NULL, num_extra = 0;
    if (s->has_explicit) {
        build_explicit(out, s);
        free(ids);
        if ((rc = kvf__gen_quantize_explicit(out, s, lim, err))) {
            kvf_case_free(out);
            return rc;
        }
        extra = malloc((size_t)(pool ? pool : 1) * sizeof *extra);
        if (!extra) {
            kvf_case_free(out);
            return kvf_error_set(err, KVF_ENOMEM, "out of memory");
        }
        for (int64_t p = 0; p < pool; p++)
            extra[p] = p; /* every explicit page holds data */
        num_extra = pool;
    } else {
        memcpy(out->kv_indices, ids, (size_t)entries * sizeof *ids);
        free(ids);
        gstream rq;
        gs_seed(&rq, rp, KVF__STREAM_Q);
        gs_fill_rows(out->q, (int64_t)out->batch_size * out->num_qo_heads, out->head_dim, &rp->q,
                     &rq);
        if ((rc = fill_pool(out, rp, &extra, &num_extra, lim, err))) goto fail;
        shape_logits(out, rp);
        if ((rc = kvf__gen_quantize(out, s, extra, num_extra, lim, err))) goto fail;
    }
    if ((rc = apply_overrides(out, s, &extra, &num_extra, err))) goto fail;
    if ((rc = kvf_case_validate(out, lim, err))) goto fail;
    if ((rc = kvf_case_set_resident(out, extra, num_extra, err))) goto fail;
    free(extra);
    return 0;
fail:
    free(extra);
    kvf_case_free(out);
    return rc;
}
