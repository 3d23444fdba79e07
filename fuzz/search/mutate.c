/* Structure-aware mutation of case specs (mutate.h). Every move edits the recipe the way a
 * person hunting one of the bug classes of docs/bug-classes.md would: lengths to the page and tile
 * edges, aliased and high page ids, special bf16 values placed in used slots, unused tail slots
 * and unreferenced pages. kvf_spec_fit then pulls the spec back inside the small-case budget. */
#include "kvfuzz/mutate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The address space a high-ids pool must stay inside (kvf_limits_default's max_pool_bytes).
 * Which of its pages the generator writes is the pool rule of kvfuzz/cost.h. */
#define MAX_POOL_BYTES ((int64_t)8 << 30)

static const char *const mutation_names[KVF_MUT_COUNT] = {
    "batch",  "seq-remove", "seq-duplicate", "seq-length",    "seq-pages", "last-len", "page-size",
    "shape",  "table",      "spare",         "table-entry",   "dist",      "value",    "poison",
    "logits", "sm-scale",   "seed",          "drop-override", "explicit",  "layout",   "quant"};

const char *kvf_mutation_name(kvf_mutation m) {
    return (unsigned)m < KVF_MUT_COUNT ? mutation_names[m] : "unknown";
}

void kvf_mutate_limits_default(kvf_mutate_limits *lim) {
    lim->max_batch = 4;
    lim->max_pages = 8;
    lim->max_page_size = 256;
    lim->max_head_dim = 256;
    lim->max_group = 16;
    lim->max_kv_heads = 8;
    lim->max_work = (int64_t)1 << 17;
    lim->max_pool_elems = (int64_t)1 << 15;
    lim->max_overrides = 16;
    lim->allow_overflow = 1;
    lim->allow_high_ids = 1;
    lim->allow_nonfinite = 0;
    lim->allow_layouts = 1;
    lim->allow_quant = 1;
    lim->kv_dtypes = KVF_KV_DTYPES_ALL;
}

/* Whether lim lets a case hold FP8 caches, and whether it asks for them in every case. */
static int quant_allowed(const kvf_mutate_limits *lim) {
    return lim->allow_quant && (kvf_kv_dtypes_norm(lim->kv_dtypes) & KVF_KV_DTYPES_FP8);
}
static int quant_required(const kvf_mutate_limits *lim) {
    return quant_allowed(lim) && !(kvf_kv_dtypes_norm(lim->kv_dtypes) & KVF_KV_DTYPES_BF16);
}

static uint64_t below(kvf_prng *rng, uint64_t n) {
    return n ? kvf_prng_below(rng, n) : 0;
}

/* The cost model (kvf_spec_work, kvf_spec_pool_elems, kvf_spec_tokens) is core's,
 * kvfuzz/cost.h: the fitting below holds a spec to the same estimates the campaign and the
 * harnesses read. */

void kvf_mutate_random_opts(kvf_random_opts *o, const kvf_mutate_limits *lim) {
    kvf_random_opts_default(o);
    o->max_batch = lim->max_batch;
    o->max_pages = lim->max_pages;
    o->max_work = lim->max_work;
    o->max_tokens = (int32_t)(lim->max_work < INT32_MAX ? lim->max_work : INT32_MAX);
    o->allow_overflow = lim->allow_overflow;
    o->allow_high_ids = lim->allow_high_ids;
    o->layouts = lim->allow_layouts;
    o->quant = lim->allow_quant;
    o->kv_dtypes = kvf_kv_dtypes_norm(lim->kv_dtypes);
}

/* ---- overrides ------------------------------------------------------------------------------ */

static void drop_override(kvf_spec *s, uint32_t i) {
    memmove(&s->overrides[i], &s->overrides[i + 1],
            (s->num_overrides - i - 1) * sizeof *s->overrides);
    s->num_overrides--;
}

static int add_override(kvf_spec *s, uint8_t target, uint64_t index, uint32_t value) {
    kvf_override *n = realloc(s->overrides, (s->num_overrides + 1) * sizeof *n);
    if (!n) return KVF_ENOMEM;
    s->overrides = n;
    s->overrides[s->num_overrides++] = (kvf_override){target, index, value};
    return 0;
}

static void drop_explicit(kvf_spec *s) {
    if (!s->has_explicit) return;
    free(s->explicit_tensors.kv_indices);
    free(s->explicit_tensors.q);
    free(s->explicit_tensors.k_cache);
    free(s->explicit_tensors.v_cache);
    memset(&s->explicit_tensors, 0, sizeof s->explicit_tensors);
    s->has_explicit = 0;
}

/* Removing sequence b shifts the flat indices of table-entry, last-length and q overrides
 * that point past it; those pointing into it go. k/v overrides index the pool and stay. */
static void remove_sequence(kvf_spec *s, uint32_t b) {
    kvf_recipe *rp = &s->recipe;
    int64_t first = 0;
    for (uint32_t i = 0; i < b; i++)
        first += rp->num_pages[i];
    int64_t n = rp->num_pages[b], qrow = (int64_t)rp->num_qo_heads * rp->head_dim;
    for (uint32_t i = s->num_overrides; i-- > 0;) {
        kvf_override *o = &s->overrides[i];
        int64_t lo, width;
        if (o->target == KVF_OVERRIDE_TABLE_ENTRY)
            lo = first, width = n;
        else if (o->target == KVF_OVERRIDE_LAST_LEN)
            lo = b, width = 1;
        else if (o->target == KVF_OVERRIDE_Q)
            lo = (int64_t)b * qrow, width = qrow;
        else
            continue;
        if (o->index >= (uint64_t)lo && o->index < (uint64_t)(lo + width))
            drop_override(s, i);
        else if (o->index >= (uint64_t)(lo + width))
            o->index -= (uint64_t)width;
    }
    memmove(&rp->num_pages[b], &rp->num_pages[b + 1], (rp->batch_size - b - 1) * sizeof(uint16_t));
    memmove(&rp->last_page_len[b], &rp->last_page_len[b + 1],
            (rp->batch_size - b - 1) * sizeof(uint16_t));
    rp->batch_size--;
}

/* ---- value pickers -------------------------------------------------------------------------- */

/* Lengths where bugs live (kvf_edge_length_pick): empty, one token, the page edges, two pages,
 * the 32-token tile edges, the longest allowed and one less; a quarter anywhere. */
static const uint8_t mutation_lengths[] = {KVF_EDGE_EMPTY, KVF_EDGE_ONE,        KVF_EDGE_PAGE_BELOW,
                                           KVF_EDGE_PAGE,  KVF_EDGE_PAGE_ABOVE, KVF_EDGE_TWO_PAGES,
                                           KVF_EDGE_TILE,  KVF_EDGE_MAX,        KVF_EDGE_MAX_BELOW,
                                           KVF_EDGE_ANY,   KVF_EDGE_ANY,        KVF_EDGE_ANY};

static int64_t pick_length(kvf_prng *rng, int32_t s, int32_t max_pages) {
    return kvf_edge_length_pick(rng, mutation_lengths, sizeof mutation_lengths, s,
                                (int64_t)s * max_pages);
}

/* bf16 patterns kernels mishandle: signed zeros, infinities, NaN payloads of both signs, the
 * largest finite value, the smallest normal and subnormal, one, and large powers of two. */
static const kvf_bf16 special_bf16[] = {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81,
                                        0x7F7F, 0xFF7F, 0x0080, 0x8080, 0x0001, 0x8001, 0x3F80,
                                        0xBF80, 0x4780, 0x4B00, 0x5F80, 0x2000, 0x477F};

/* finite_only: referenced positions take finite values unless the limits allow otherwise (the
 * input domain is finite by default, docs/design.md §4; NaN and inf belong in unused slots). */
static kvf_bf16 pick_special(kvf_prng *rng, kvf_bf16 current, int finite_only) {
    for (;;) {
        kvf_bf16 v;
        switch (below(rng, 4)) {
        case 0:
            v = (kvf_bf16)(current ^ 0x8000u);
            break; /* sign flip */
        case 1:
            v = (kvf_bf16)(current ^ 1u);
            break; /* one ulp */
        default:
            v = special_bf16[below(rng, sizeof special_bf16 / sizeof special_bf16[0])];
            break;
        }
        if (!finite_only || kvf_bf16_is_finite(v)) return v;
    }
}

static float pick_sm_scale(kvf_prng *rng, const kvf_recipe *rp) {
    float inv_sqrt = (float)(1.0 / sqrt((double)rp->head_dim));
    switch (below(rng, 10)) {
    case 0:
        return inv_sqrt;
    case 1:
        return 1.0f;
    case 2:
        return (float)ldexp(1.0, (int)below(rng, 41) - 20);
    case 3:
        return 0.0f;
    case 4:
        return -inv_sqrt;
    case 5:
        return (float)ldexp(1.0, -126 + (int)below(rng, 8));
    case 6:
        return (float)ldexp(1.0, 20 + (int)below(rng, 40));
    case 7:
        return nextafterf(rp->sm_scale, below(rng, 2) ? INFINITY : -INFINITY);
    default:
        return (float)(0.01 + 2.0 * kvf_prng_unit(rng));
    }
}

/* Whether a page-table kind takes its ids from page_id_base (kvfuzz/strategies.def). */
static int uses_high_ids(int table) {
    return (kvf_strategy_flags(KVF_FAMILY_TABLE, table) & KVF_STRATEGY_HIGH_IDS) != 0;
}

/* page_id_base near the edges where offsets overflow: page * page_elems past 2^31 or 2^32
 * elements, ids past 65535, clamped so the pool stays inside the 8 GiB address space. */
static uint32_t pick_page_id_base(kvf_prng *rng, const kvf_recipe *rp) {
    int64_t e = kvf_recipe_page_elems(rp), entries = kvf_recipe_entries(rp);
    int64_t max_base = MAX_POOL_BYTES / (2 * e) - 3 * entries - rp->spare_pages - 2;
    int64_t base;
    switch (below(rng, 5)) {
    case 0:
        base = ((int64_t)1 << 31) / e - (int64_t)below(rng, 4);
        break;
    case 1:
        base = ((int64_t)1 << 32) / e - (int64_t)below(rng, 4);
        break;
    case 2:
        base = 65536 - (int64_t)below(rng, 3);
        break;
    case 3:
        base = KVF_FULL_POOL_BYTES / (2 * e) + 1 + (int64_t)below(rng, 64);
        break;
    default:
        base = (int64_t)below(rng, (uint64_t)(max_base > 1 ? max_base : 1));
        break;
    }
    if (base > max_base) base = max_base - (int64_t)below(rng, 16);
    if (base > INT32_MAX / 2) base = INT32_MAX / 2;
    return (uint32_t)(base > 0 ? base : 0);
}

/* ---- moves that need the expanded case ------------------------------------------------------ */

static int mutate_table_entry(kvf_spec *s, kvf_prng *rng, const kvf_case *c) {
    int64_t entries = c->kv_indptr[c->batch_size];
    if (entries == 0 || c->num_pages == 0) return 1;
    int64_t i;
    int32_t b = (int32_t)below(rng, (uint64_t)c->batch_size);
    int32_t n = c->kv_indptr[b + 1] - c->kv_indptr[b];
    if (n > 0 && below(rng, 2))
        i = c->kv_indptr[b] + (below(rng, 2) ? n - 1 : 0); /* first or last page of a sequence */
    else
        i = (int64_t)below(rng, (uint64_t)entries);
    int64_t value;
    switch (below(rng, 5)) {
    case 0: /* alias another entry, usually of another sequence (sharing across requests) */
    case 1:
        value = c->kv_indices[below(rng, (uint64_t)entries)];
        break;
    case 2: /* the highest id in the pool */
        value = c->num_pages - 1;
        break;
    case 3: /* a neighbour of the current page: where an off-by-one lands */
        value = c->kv_indices[i] + (below(rng, 2) ? 1 : -1);
        if (value < 0 || value >= c->num_pages) value = c->kv_indices[i];
        break;
    default: /* any page, usually an unreferenced (spare or gap) one */
        value = (int64_t)below(rng, (uint64_t)c->num_pages);
        break;
    }
    return add_override(s, KVF_OVERRIDE_TABLE_ENTRY, (uint64_t)i, (uint32_t)value) ? -1 : 0;
}

/* The most slots of page `page` any sequence reads (0: unreferenced). */
static int32_t page_used_slots(const kvf_case *c, int64_t page) {
    int32_t used = 0;
    for (int32_t b = 0; b < c->batch_size; b++)
        for (int32_t i = c->kv_indptr[b]; i < c->kv_indptr[b + 1]; i++) {
            if (c->kv_indices[i] != page) continue;
            int32_t n = i == c->kv_indptr[b + 1] - 1 ? c->kv_last_page_len[b] : c->page_size;
            if (n > used) used = n;
        }
    return used;
}

static int mutate_value(kvf_spec *s, kvf_prng *rng, const kvf_case *c, int allow_nonfinite) {
    uint64_t which = below(rng, 3);
    int64_t q_elems = kvf_case_q_elems(c);
    if (which == 0 || c->num_pages == 0) {
        if (q_elems == 0) return 1;
        int64_t idx = (int64_t)below(rng, (uint64_t)q_elems);
        kvf_bf16 v = pick_special(rng, c->q[idx], !allow_nonfinite);
        return add_override(s, KVF_OVERRIDE_Q, (uint64_t)idx, v) ? -1 : 0;
    }
    const kvf_bf16 *cache = which == 1 ? c->k_cache : c->v_cache;
    int64_t pe = kvf_case_page_elems(c), offset = -1;
    int tail = 0;
    int32_t hd = c->num_kv_heads * c->head_dim;
    switch (below(rng, 4)) {
    case 0:
    case 1: { /* a used slot of a non-empty sequence */
        int32_t b = (int32_t)below(rng, (uint64_t)c->batch_size);
        int64_t len = c->batch_size ? kvf_case_seq_len(c, b) : 0;
        if (len == 0) break;
        int64_t t = below(rng, 2) ? len - 1 : (int64_t)below(rng, (uint64_t)len);
        /* One draw per statement: argument evaluation order differs between compilers, and a
         * seed must mean the same mutation everywhere. */
        int32_t g = (int32_t)below(rng, (uint64_t)c->num_kv_heads);
        int32_t dim = (int32_t)below(rng, (uint64_t)c->head_dim);
        offset = kvf_case_kv_offset(c, b, t, g, dim);
        break;
    }
    case 2: { /* an unused slot of a last page: read only by a kernel that reads past the end */
        int32_t b = (int32_t)below(rng, (uint64_t)c->batch_size);
        if (c->batch_size == 0 || c->kv_indptr[b + 1] == c->kv_indptr[b]) break;
        int32_t last = c->kv_last_page_len[b];
        if (last >= c->page_size) break;
        int64_t page = c->kv_indices[c->kv_indptr[b + 1] - 1];
        int32_t slot = last + (int32_t)below(rng, (uint64_t)(c->page_size - last));
        offset = page * pe + (int64_t)slot * hd + (int64_t)below(rng, (uint64_t)hd);
        tail = 1;
        break;
    }
    default: { /* some page of the pool, often an unreferenced one */
        int64_t page = (int64_t)below(rng, (uint64_t)c->num_pages);
        offset = page * pe + (int64_t)below(rng, (uint64_t)pe);
        break;
    }
    }
    if (offset < 0) return 1;
    /* A slot no sequence reads may take anything; a page shared with a longer sequence makes
     * the "tail" slot a used one, and used ones stay finite. */
    if (tail && (offset % pe) / hd < page_used_slots(c, offset / pe)) tail = 0;
    kvf_bf16 v = pick_special(rng, cache[offset], !allow_nonfinite && !tail);
    uint8_t target = which == 1 ? KVF_OVERRIDE_K : KVF_OVERRIDE_V;
    return add_override(s, target, (uint64_t)offset, v) ? -1 : 0;
}

/* A bf16 value as an element of a cache of dtype dt: itself for bf16, else the image of its
 * nearest FP8 byte (an explicit FP8 cache holds images only, docs/case-format.md). */
static kvf_bf16 as_cache_value(kvf_bf16 v, int dt) {
    if (!kvf_kv_dtype_is_fp8(dt)) return v;
    return kvf_fp8_to_bf16(kvf_fp8_from_f32(kvf_bf16_to_f32(v), dt), dt);
}

static int mutate_explicit(kvf_spec *s, kvf_prng *rng, int allow_nonfinite) {
    kvf_explicit *ex = &s->explicit_tensors;
    const kvf_recipe *rp = &s->recipe;
    int64_t entries = kvf_recipe_entries(rp);
    int64_t q_elems = (int64_t)rp->batch_size * rp->num_qo_heads * rp->head_dim;
    int64_t pool_elems = ex->num_pages * kvf_recipe_page_elems(rp);
    switch (below(rng, 4)) {
    case 0:
        if (entries == 0 || ex->num_pages == 0) return 1;
        uint64_t at = below(rng, (uint64_t)entries);
        ex->kv_indices[at] = (int32_t)below(rng, (uint64_t)ex->num_pages);
        return 0;
    case 1: {
        if (q_elems == 0) return 1;
        uint64_t i = below(rng, (uint64_t)q_elems);
        ex->q[i] = pick_special(rng, ex->q[i], !allow_nonfinite);
        return 0;
    }
    default: {
        if (pool_elems == 0) return 1;
        const int is_v = (int)below(rng, 2);
        kvf_bf16 *t = is_v ? ex->v_cache : ex->k_cache;
        uint64_t i = below(rng, (uint64_t)pool_elems);
        t[i] = as_cache_value(pick_special(rng, t[i], !allow_nonfinite),
                              is_v ? s->quant.kv.v_dtype : s->quant.kv.k_dtype);
        return 0;
    }
    }
}

/* ---- the moves ------------------------------------------------------------------------------ */

/* Moves that change the table's shape or the value layout make explicit tensors meaningless. */
static int changes_structure(int m) {
    switch (m) {
    case KVF_MUT_TABLE_ENTRY:
    case KVF_MUT_VALUE:
    case KVF_MUT_SM_SCALE:
    case KVF_MUT_DROP_OVERRIDE:
    case KVF_MUT_LAYOUT:
    case KVF_MUT_EXPLICIT:
    case KVF_MUT_LAST_LEN:
        return 0;
    default:
        return 1;
    }
}

/* Moves that take more than a few lines; each returns 0 applied or 1 not applicable. */

/* One sequence's page count: one more or less, the most, one, or any. */
static int move_seq_pages(kvf_recipe *rp, kvf_prng *rng, const kvf_mutate_limits *lim, int32_t S) {
    if (rp->batch_size == 0) return 1;
    uint32_t b = (uint32_t)below(rng, rp->batch_size);
    int64_t n = rp->num_pages[b];
    switch (below(rng, 5)) {
    case 0:
        n = n + 1;
        break;
    case 1:
        n = n - 1;
        break;
    case 2:
        n = lim->max_pages;
        break;
    case 3:
        n = 1;
        break;
    default:
        n = (int64_t)below(rng, (uint64_t)lim->max_pages + 1);
        break;
    }
    if (n < 0) n = 0;
    rp->num_pages[b] = (uint16_t)n;
    if (n == 0)
        rp->last_page_len[b] = 0;
    else if (rp->last_page_len[b] == 0)
        rp->last_page_len[b] = (uint16_t)(1 + below(rng, (uint64_t)S));
    return 0;
}

/* One sequence's last-page length: 1, S - 1, S or any. */
static int move_last_len(kvf_recipe *rp, kvf_prng *rng, int32_t S) {
    if (rp->batch_size == 0) return 1;
    uint32_t b = (uint32_t)below(rng, rp->batch_size);
    if (rp->num_pages[b] == 0) return 1;
    static const int kind_count = 4;
    switch (below(rng, (uint64_t)kind_count)) {
    case 0:
        rp->last_page_len[b] = 1;
        break;
    case 1:
        rp->last_page_len[b] = (uint16_t)(S > 1 ? S - 1 : 1);
        break;
    case 2:
        rp->last_page_len[b] = (uint16_t)S;
        break;
    default:
        rp->last_page_len[b] = (uint16_t)(1 + below(rng, (uint64_t)S));
        break;
    }
    return 0;
}

/* The page size, from a list of edge sizes, the lengths kept where they fit. */
static int move_page_size(kvf_recipe *rp, kvf_prng *rng, const kvf_mutate_limits *lim, int32_t S) {
    static const uint16_t sizes[] = {1,  2,  3,  4,  7,  8,  15,  16, 17,
                                     31, 32, 33, 63, 64, 65, 128, 256};
    uint16_t ns = sizes[below(rng, sizeof sizes / sizeof sizes[0])];
    if (ns > lim->max_page_size || ns == S) return 1;
    int64_t lens[65536 / 16];
    uint32_t nb = rp->batch_size < 4096 ? rp->batch_size : 4096;
    for (uint32_t b = 0; b < nb; b++)
        lens[b] = kvf_recipe_seq_len(rp, b);
    rp->page_size = ns;
    for (uint32_t b = 0; b < nb; b++)
        kvf_recipe_set_seq_len(rp, b, lens[b]);
    return 0;
}

/* Hk, the group Hq / Hk or D, within the limits. */
static int move_shape(kvf_recipe *rp, kvf_prng *rng, const kvf_mutate_limits *lim) {
    static const uint8_t kv[] = {1, 2, 4, 8};
    static const uint8_t groups[] = {1, 2, 3, 4, 5, 5, 6, 7, 7, 8, 16};
    static const uint16_t dims[] = {64, 128, 128, 256, 32, 16, 8, 1, 96};
    int hk = rp->num_kv_heads, g = rp->num_qo_heads / rp->num_kv_heads, d = rp->head_dim;
    switch (below(rng, 3)) {
    case 0:
        hk = kv[below(rng, sizeof kv)];
        break;
    case 1:
        g = below(rng, 4) ? groups[below(rng, sizeof groups)]
                          : 1 + (int)below(rng, (uint64_t)lim->max_group);
        break;
    default: /* mostly the sizes real models use; sometimes odd ones */
        d = dims[below(rng, 5) ? below(rng, 4) : below(rng, sizeof dims / sizeof dims[0])];
        break;
    }
    if (hk > lim->max_kv_heads) hk = lim->max_kv_heads;
    if (g > lim->max_group) g = lim->max_group;
    if (d > lim->max_head_dim) d = lim->max_head_dim;
    if (hk * g > 255) g = 255 / hk;
    rp->num_kv_heads = (uint8_t)hk;
    rp->num_qo_heads = (uint8_t)(hk * g);
    rp->head_dim = (uint16_t)d;
    return 0;
}

/* One of the q, k and v distributions: its kind, scale or parameter. */
static int move_dist(kvf_recipe *rp, kvf_prng *rng) {
    kvf_dist *d = below(rng, 3) == 0 ? &rp->q : below(rng, 2) ? &rp->k : &rp->v;
    int is_v = d == &rp->v;
    switch (below(rng, 4)) {
    case 0:
        d->kind = (uint8_t)below(rng, KVF_DIST_COUNT);
        break;
    case 1:
        d->log2_scale = (int8_t)(d->log2_scale + (below(rng, 2) ? 1 : -1));
        break;
    case 2:
        /* q and k scales far from 0 push logits past 5e4 or f32; v scales are free. */
        d->log2_scale = (int8_t)(is_v ? (int)below(rng, 81) - 40 : (int)below(rng, 25) - 12);
        break;
    default:
        d->param = (uint8_t)below(rng, 64);
        break;
    }
    if (d->log2_scale < -126) d->log2_scale = -126;
    return 0;
}

/* 0 applied, 1 not applicable here, -1 out of memory. */
static int apply(kvf_spec *s, kvf_prng *rng, int m, const kvf_mutate_limits *lim,
                 const kvf_limits *case_limits) {
    kvf_recipe *rp = &s->recipe;
    int32_t S = rp->page_size;
    if (s->has_explicit && changes_structure(m)) {
        if (below(rng, 4)) return 1; /* usually keep imported tensors; sometimes give them up */
        drop_explicit(s);
    }
    switch (m) {
    case KVF_MUT_BATCH: {
        uint32_t old = rp->batch_size;
        uint32_t nb = below(rng, 8) == 0 ? 0 : 1 + (uint32_t)below(rng, (uint64_t)lim->max_batch);
        if (nb == old) nb = old > 1 ? old - 1 : old + 1;
        if (kvf_spec_set_batch(s, (uint16_t)nb, NULL)) return -1;
        for (uint32_t b = old; b < nb; b++)
            kvf_recipe_set_seq_len(rp, b, pick_length(rng, S, lim->max_pages));
        return 0;
    }
    case KVF_MUT_SEQ_REMOVE:
        if (rp->batch_size == 0) return 1;
        remove_sequence(s, (uint32_t)below(rng, rp->batch_size));
        return 0;
    case KVF_MUT_SEQ_DUPLICATE: {
        if (rp->batch_size == 0 || rp->batch_size >= lim->max_batch) return 1;
        uint32_t from = (uint32_t)below(rng, rp->batch_size);
        int64_t len = kvf_recipe_seq_len(rp, from);
        if (kvf_spec_set_batch(s, (uint16_t)(rp->batch_size + 1), NULL)) return -1;
        kvf_recipe_set_seq_len(rp, rp->batch_size - 1u, len);
        return 0;
    }
    case KVF_MUT_SEQ_LENGTH: {
        if (rp->batch_size == 0 && kvf_spec_set_batch(s, 1, NULL)) return -1;
        uint32_t b = (uint32_t)below(rng, rp->batch_size); /* before the length: one order */
        kvf_recipe_set_seq_len(rp, b, pick_length(rng, S, lim->max_pages));
        return 0;
    }
    case KVF_MUT_SEQ_PAGES:
        return move_seq_pages(rp, rng, lim, S);
    case KVF_MUT_LAST_LEN:
        return move_last_len(rp, rng, S);
    case KVF_MUT_PAGE_SIZE:
        return move_page_size(rp, rng, lim, S);
    case KVF_MUT_SHAPE:
        return move_shape(rp, rng, lim);
    case KVF_MUT_TABLE: {
        int kind = (int)below(rng, KVF_TABLE_COUNT);
        if (uses_high_ids(kind) && !lim->allow_high_ids)
            kind = kvf_strategy_first(KVF_FAMILY_TABLE, KVF_STRATEGY_STANDIN);
        rp->table = (uint8_t)kind;
        rp->page_id_base = uses_high_ids(kind) ? pick_page_id_base(rng, rp) : 0;
        return 0;
    }
    case KVF_MUT_SPARE:
        rp->spare_pages = (uint16_t)(below(rng, 3) ? below(rng, 4) : below(rng, 17));
        return 0;
    case KVF_MUT_TABLE_ENTRY:
    case KVF_MUT_VALUE: {
        if ((int64_t)s->num_overrides >= lim->max_overrides) return 1;
        kvf_case c;
        if (kvf_case_build(&c, s, case_limits, NULL)) return 1;
        int rc = m == KVF_MUT_TABLE_ENTRY ? mutate_table_entry(s, rng, &c)
                                          : mutate_value(s, rng, &c, lim->allow_nonfinite);
        kvf_case_free(&c);
        return rc;
    }
    case KVF_MUT_DIST:
        return move_dist(rp, rng);
    case KVF_MUT_POISON:
        rp->poison ^= (uint8_t)(1u << below(rng, 4));
        return 0;
    case KVF_MUT_LOGITS: {
        /* Without overflow: the patterns listed before the first that reaches it. */
        int kinds = lim->allow_overflow
                        ? KVF_LOGITS_COUNT
                        : kvf_strategy_first(KVF_FAMILY_LOGITS, KVF_STRATEGY_OVERFLOW);
        rp->logits = (uint8_t)below(rng, (uint64_t)kinds);
        return 0;
    }
    case KVF_MUT_SM_SCALE:
        rp->sm_scale = pick_sm_scale(rng, rp);
        return 0;
    case KVF_MUT_SEED:
        rp->seed = kvf_prng_next(rng);
        return 0;
    case KVF_MUT_DROP_OVERRIDE:
        if (s->num_overrides == 0) return 1;
        drop_override(s, (uint32_t)below(rng, s->num_overrides));
        return 0;
    case KVF_MUT_LAYOUT:
        if (!lim->allow_layouts) return 1;
        /* Back to dense half the time a layout is set; otherwise a layout drawn anew. */
        if (!kvf_layout_is_dense(&s->layout) && below(rng, 2))
            memset(&s->layout, 0, sizeof s->layout);
        else
            kvf_recipe_draw_layout(&s->layout, &s->recipe, rng);
        return 0;
    case KVF_MUT_EXPLICIT:
        return s->has_explicit ? mutate_explicit(s, rng, lim->allow_nonfinite) : 1;
    case KVF_MUT_QUANT:
        if (!quant_allowed(lim) || s->has_explicit) return 1;
        /* Back to bf16 half the time the caches are quantized (where bf16 is allowed: the
         * draw is made either way, so a seed moves the same under both); otherwise drawn
         * anew. */
        if (!kvf_quant_recipe_is_plain(&s->quant) && below(rng, 2) && !quant_required(lim))
            memset(&s->quant, 0, sizeof s->quant);
        else
            kvf_recipe_draw_quant_in(&s->quant, &s->recipe, rng, lim->kv_dtypes);
        return 0;
    default:
        return 1;
    }
}

/* Relative frequency of each move: lengths and values most, whole-shape changes less. */
static const uint8_t move_weight[KVF_MUT_COUNT] = {
    [KVF_MUT_BATCH] = 4,      [KVF_MUT_SEQ_REMOVE] = 2,  [KVF_MUT_SEQ_DUPLICATE] = 2,
    [KVF_MUT_SEQ_LENGTH] = 8, [KVF_MUT_SEQ_PAGES] = 3,   [KVF_MUT_LAST_LEN] = 5,
    [KVF_MUT_PAGE_SIZE] = 3,  [KVF_MUT_SHAPE] = 3,       [KVF_MUT_TABLE] = 4,
    [KVF_MUT_SPARE] = 2,      [KVF_MUT_TABLE_ENTRY] = 4, [KVF_MUT_DIST] = 6,
    [KVF_MUT_VALUE] = 6,      [KVF_MUT_POISON] = 3,      [KVF_MUT_LOGITS] = 3,
    [KVF_MUT_SM_SCALE] = 3,   [KVF_MUT_SEED] = 3,        [KVF_MUT_DROP_OVERRIDE] = 2,
    [KVF_MUT_EXPLICIT] = 3,   [KVF_MUT_LAYOUT] = 2,      [KVF_MUT_QUANT] = 2};

static int pick_move(kvf_prng *rng) {
    unsigned total = 0;
    for (int i = 0; i < KVF_MUT_COUNT; i++)
        total += move_weight[i];
    unsigned r = (unsigned)below(rng, total);
    for (int i = 0; i < KVF_MUT_COUNT; i++) {
        if (r < move_weight[i]) return i;
        r -= move_weight[i];
    }
    return KVF_MUT_SEED;
}

int kvf_spec_mutate(kvf_spec *s, kvf_prng *rng, int which, const kvf_mutate_limits *lim,
                    const kvf_limits *case_limits) {
    int m = (which >= 0 && which < KVF_MUT_COUNT) ? which : pick_move(rng);
    /* A move that does not apply (no overrides to drop, no explicit tensors) yields to another;
     * the seed move always applies, so this ends. */
    for (int tries = 0; tries < 8; tries++) {
        int rc = apply(s, rng, m, lim, case_limits);
        if (rc < 0) return KVF_ENOMEM;
        if (rc == 0) {
            kvf_spec_fit(s, lim);
            return m;
        }
        m = pick_move(rng);
    }
    s->recipe.seed = kvf_prng_next(rng);
    kvf_spec_fit(s, lim);
    return KVF_MUT_SEED;
}

/* ---- fitting -------------------------------------------------------------------------------- */

/* A padded page stride keeps a pool without high ids within 256 MiB per cache, and a high-ids
 * pool keeps its pages' dense strides (as kvf_recipe_draw_layout draws them). */
static void fit_layout(kvf_spec *s, const kvf_mutate_limits *lim) {
    const kvf_recipe *rp = &s->recipe;
    kvf_layout *l = &s->layout;
    if (!lim->allow_layouts) {
        memset(l, 0, sizeof *l);
        return;
    }
    if (uses_high_ids(rp->table)) { /* its pool is sized at the dense page stride */
        l->kv_row_pad = l->kv_mid_pad = l->kv_page_pad = 0;
        return;
    }
    if ((int64_t)l->kv_page_pad > kvf_recipe_max_page_pad(rp)) l->kv_page_pad = 0;
}

/* A cache's dtype within the set, which holds an FP8 dtype: its own when the set holds it,
 * else the other cache's when that is an FP8 dtype inside the set, else the set's first FP8
 * dtype. */
static uint8_t dtype_within(int dt, int other, unsigned set) {
    if (kvf_kv_dtypes_has(set, dt)) return (uint8_t)dt;
    if (kvf_kv_dtype_is_fp8(other) && kvf_kv_dtypes_has(set, other)) return (uint8_t)other;
    return kvf_kv_dtypes_has(set, KVF_KV_E4M3) ? KVF_KV_E4M3 : KVF_KV_E5M2;
}

/* Quantized caches only where allowed and, with explicit tensors, with tensor scales only;
 * FP8 caches of the set's dtypes where the limits require them (explicit tensors excepted);
 * per-slot scales only for a pool of at most 2^20 slots and KV heads (else per head); K and V
 * overrides rounded to the caches' FP8 values, which the case must hold (kvf_case_validate). */
void kvf_spec_fit_quant(kvf_spec *s, const kvf_mutate_limits *lim) {
    kvf_quant_recipe *q = &s->quant;
    /* Explicit tensors hold the values they came with (an imported workload): their dtypes
     * stay, since other dtypes would mean other values. */
    if (quant_required(lim) && !s->has_explicit && kvf_quant_recipe_is_plain(q))
        kvf_recipe_draw_quant_seeded(q, &s->recipe, lim->kv_dtypes);
    if (quant_allowed(lim) && !s->has_explicit && !kvf_quant_recipe_is_plain(q)) {
        const int k = q->kv.k_dtype, v = q->kv.v_dtype;
        q->kv.k_dtype = dtype_within(k, v, lim->kv_dtypes);
        q->kv.v_dtype = dtype_within(v, q->kv.k_dtype, lim->kv_dtypes);
    }
    if (kvf_quant_recipe_is_plain(q)) return;
    /* Explicit tensors keep tensor scales (an imported FP8 workload; their values are images,
     * and mutate_explicit writes images); other quantizations cannot sit beside them. */
    if (!quant_allowed(lim) || (s->has_explicit && q->kv.granularity != KVF_SCALE_TENSOR)) {
        memset(q, 0, sizeof *q);
        return;
    }
    const kvf_recipe *rp = &s->recipe;
    if (q->kv.granularity == KVF_SCALE_TOKEN &&
        (uses_high_ids(rp->table) || kvf_spec_pool_elems(s) / rp->head_dim > (1 << 20)))
        q->kv.granularity = KVF_SCALE_HEAD;
    for (uint32_t i = 0; i < s->num_overrides; i++) {
        kvf_override *o = &s->overrides[i];
        int dt = o->target == KVF_OVERRIDE_K   ? q->kv.k_dtype
                 : o->target == KVF_OVERRIDE_V ? q->kv.v_dtype
                                               : KVF_KV_BF16;
        if (kvf_kv_dtype_is_fp8(dt))
            o->value =
                kvf_fp8_to_bf16(kvf_fp8_from_f32(kvf_bf16_to_f32((kvf_bf16)o->value), dt), dt);
    }
}

static uint32_t longest_sequence(const kvf_recipe *rp) {
    uint32_t best = 0;
    for (uint32_t b = 1; b < rp->batch_size; b++)
        if (kvf_recipe_seq_len(rp, b) > kvf_recipe_seq_len(rp, best)) best = b;
    return best;
}

void kvf_spec_fit(kvf_spec *s, const kvf_mutate_limits *lim) {
    kvf_recipe *rp = &s->recipe;
    if (rp->batch_size > lim->max_batch) {
        drop_explicit(s);
        rp->batch_size = (uint16_t)lim->max_batch;
    }
    for (uint32_t b = 0; b < rp->batch_size; b++)
        if (rp->num_pages[b] > lim->max_pages) {
            drop_explicit(s);
            rp->num_pages[b] = (uint16_t)lim->max_pages;
        }
    if (rp->page_size > lim->max_page_size || rp->head_dim > lim->max_head_dim ||
        rp->num_kv_heads > lim->max_kv_heads ||
        rp->num_qo_heads / rp->num_kv_heads > lim->max_group) {
        drop_explicit(s);
        if (rp->page_size > lim->max_page_size) {
            for (uint32_t b = 0; b < rp->batch_size; b++)
                if (rp->last_page_len[b] > lim->max_page_size)
                    rp->last_page_len[b] = (uint16_t)lim->max_page_size;
            rp->page_size = (uint16_t)lim->max_page_size;
        }
        if (rp->head_dim > lim->max_head_dim) rp->head_dim = (uint16_t)lim->max_head_dim;
        int hk = rp->num_kv_heads, g = rp->num_qo_heads / rp->num_kv_heads;
        if (hk > lim->max_kv_heads) hk = lim->max_kv_heads;
        if (g > lim->max_group) g = lim->max_group;
        rp->num_kv_heads = (uint8_t)hk;
        rp->num_qo_heads = (uint8_t)(hk * g);
    }
    /* Work: halve the longest sequence until it fits; if the outputs alone are too many,
     * narrow the shape. Each step shrinks something, so this ends. */
    while (kvf_spec_work(s) > lim->max_work || kvf_spec_pool_elems(s) > lim->max_pool_elems) {
        drop_explicit(s);
        if (uses_high_ids(rp->table) &&
            (int64_t)(rp->page_id_base + kvf_recipe_entries(rp) + rp->spare_pages) *
                    kvf_recipe_page_elems(rp) * 2 <=
                KVF_FULL_POOL_BYTES &&
            rp->page_id_base > 0) {
            /* A small high-ids pool is written whole: move the ids up so only neighbours are. */
            int64_t base = KVF_FULL_POOL_BYTES / (2 * kvf_recipe_page_elems(rp)) + 1;
            rp->page_id_base = (uint32_t)(base < INT32_MAX / 2 ? base : INT32_MAX / 2);
            continue;
        }
        if (rp->spare_pages > 0) {
            rp->spare_pages /= 2;
            continue;
        }
        uint32_t b = longest_sequence(rp);
        int64_t len = rp->batch_size ? kvf_recipe_seq_len(rp, b) : 0;
        if (len > 1) {
            kvf_recipe_set_seq_len(rp, b, len / 2);
            continue;
        }
        if (len == 1 && kvf_spec_pool_elems(s) > lim->max_pool_elems) {
            kvf_recipe_set_seq_len(rp, b, 0);
            continue;
        }
        if (rp->num_qo_heads > rp->num_kv_heads) {
            rp->num_qo_heads = rp->num_kv_heads;
        } else if (rp->num_kv_heads > 1) {
            rp->num_kv_heads = rp->num_qo_heads = 1;
        } else if (rp->head_dim > 1) {
            rp->head_dim = (uint16_t)(rp->head_dim / 2);
        } else if (rp->page_size > 1) {
            rp->page_size = (uint16_t)(rp->page_size / 2);
            for (uint32_t i = 0; i < rp->batch_size; i++)
                if (rp->last_page_len[i] > rp->page_size) rp->last_page_len[i] = rp->page_size;
        } else if (rp->batch_size > 0) {
            rp->batch_size--;
        } else {
            break;
        }
    }
    if (!uses_high_ids(rp->table)) rp->page_id_base = 0;
    fit_layout(s, lim);
    kvf_spec_fit_quant(s, lim);
    kvf_strides st;
    kvf_layout_strides(&s->layout, rp->num_qo_heads, rp->num_kv_heads, rp->head_dim, rp->page_size,
                       &st);
    if (uses_high_ids(rp->table) && st.kv_page > 0) {
        /* Keep the pool inside the address space the case limits allow (at the layout's page
         * stride). */
        int64_t max_base =
            MAX_POOL_BYTES / (2 * st.kv_page) - 3 * kvf_recipe_entries(rp) - rp->spare_pages - 2;
        if ((int64_t)rp->page_id_base > max_base)
            rp->page_id_base = (uint32_t)(max_base > 0 ? max_base : 0);
    }
    while ((int64_t)s->num_overrides > lim->max_overrides)
        drop_override(s, s->num_overrides - 1);
}

/* ---- cross-over ----------------------------------------------------------------------------- */

int kvf_spec_crossover(kvf_spec *out, const kvf_spec *a, const kvf_spec *b, kvf_prng *rng,
                       const kvf_mutate_limits *lim) {
    if (kvf_spec_copy(out, a, NULL)) return KVF_ENOMEM;
    drop_explicit(out);
    kvf_recipe *rp = &out->recipe;
    const kvf_recipe *rb = &b->recipe;
    if (below(rng, 2)) {
        /* a's structure, b's values. */
        rp->q = rb->q;
        rp->k = rb->k;
        rp->v = rb->v;
        rp->seed = rb->seed;
        rp->logits = rb->logits;
        rp->poison = rb->poison;
        rp->sm_scale = rb->sm_scale;
    } else {
        /* a's first sequences, then b's last ones, at a's page size. */
        uint32_t keep = rp->batch_size ? (uint32_t)below(rng, rp->batch_size + 1u) : 0;
        uint32_t take = rb->batch_size ? (uint32_t)below(rng, rb->batch_size + 1u) : 0;
        if (keep > (uint32_t)lim->max_batch) keep = (uint32_t)lim->max_batch;
        if (keep + take == 0) take = rb->batch_size ? 1 : 0;
        if (keep + take > (uint32_t)lim->max_batch) take = (uint32_t)lim->max_batch - keep;
        /* Overrides of a's dropped sequences would land elsewhere; keep only pool ones. */
        for (uint32_t i = out->num_overrides; i-- > 0;)
            if (out->overrides[i].target != KVF_OVERRIDE_K &&
                out->overrides[i].target != KVF_OVERRIDE_V)
                drop_override(out, i);
        if (kvf_spec_set_batch(out, (uint16_t)(keep + take), NULL)) {
            kvf_spec_free(out);
            return KVF_ENOMEM;
        }
        for (uint32_t i = 0; i < take; i++)
            kvf_recipe_set_seq_len(rp, keep + i, kvf_recipe_seq_len(rb, rb->batch_size - take + i));
    }
    kvf_spec_fit(out, lim);
    return 0;
}

/* ---- repair --------------------------------------------------------------------------------- */

int kvf_case_inputs_finite(const kvf_case *c) {
    for (int64_t i = 0; i < kvf_case_q_elems(c); i++)
        if (!kvf_bf16_is_finite(c->q[i])) return 0;
    for (int32_t b = 0; b < c->batch_size; b++) {
        int64_t len = kvf_case_seq_len(c, b);
        for (int64_t t = 0; t < len; t++) {
            int64_t off = kvf_case_kv_offset(c, b, t, 0, 0);
            for (int64_t i = 0; i < (int64_t)c->num_kv_heads * c->head_dim; i++)
                if (!kvf_bf16_is_finite(c->k_cache[off + i]) ||
                    !kvf_bf16_is_finite(c->v_cache[off + i]))
                    return 0;
        }
    }
    return 1;
}

static int build_fixing_overrides(kvf_spec *s, const kvf_limits *case_limits, kvf_case *out,
                                  kvf_error *err) {
    int rc = kvf_case_build(out, s, case_limits, err);
    if (rc == 0 || s->num_overrides == 0) return rc;
    /* Build without the overrides to learn the table, pool and batch they must fit. */
    kvf_case c;
    uint32_t n = s->num_overrides;
    s->num_overrides = 0;
    rc = kvf_case_build(&c, s, case_limits, err);
    s->num_overrides = n;
    if (rc) return rc;
    int64_t entries = c.kv_indptr[c.batch_size], q_elems = kvf_case_q_elems(&c);
    int64_t pool_elems = c.num_pages * kvf_case_page_elems(&c);
    for (uint32_t i = s->num_overrides; i-- > 0;) {
        kvf_override *o = &s->overrides[i];
        int keep = 1;
        switch (o->target) {
        case KVF_OVERRIDE_TABLE_ENTRY:
            keep = entries > 0 && c.num_pages > 0;
            if (keep) {
                o->index %= (uint64_t)entries;
                if ((int64_t)(int32_t)o->value < 0 || (int64_t)(int32_t)o->value >= c.num_pages)
                    o->value = (uint32_t)((uint64_t)o->value % (uint64_t)c.num_pages);
            }
            break;
        case KVF_OVERRIDE_LAST_LEN:
            keep = c.batch_size > 0;
            if (keep) {
                o->index %= (uint64_t)c.batch_size;
                int32_t b = (int32_t)o->index;
                keep = c.kv_indptr[b + 1] > c.kv_indptr[b];
                if (o->value < 1 || o->value > (uint32_t)c.page_size)
                    o->value = 1 + o->value % (uint32_t)c.page_size;
            }
            break;
        case KVF_OVERRIDE_Q:
            keep = q_elems > 0;
            if (keep) o->index %= (uint64_t)q_elems;
            o->value &= 0xFFFFu;
            break;
        case KVF_OVERRIDE_K:
        case KVF_OVERRIDE_V:
            keep = pool_elems > 0;
            if (keep) o->index %= (uint64_t)pool_elems;
            o->value &= 0xFFFFu;
            break;
        default:
            keep = 0;
        }
        if (!keep) drop_override(s, i);
    }
    kvf_case_free(&c);
    rc = kvf_case_build(out, s, case_limits, err);
    if (rc) { /* give up on the overrides rather than on the case */
        s->num_overrides = 0;
        rc = kvf_case_build(out, s, case_limits, err);
    }
    return rc;
}

int kvf_spec_repair(kvf_spec *s, const kvf_limits *case_limits, int allow_nonfinite,
                    kvf_case *built, kvf_error *err) {
    kvf_case c;
    int rc = build_fixing_overrides(s, case_limits, &c, err);
    /* A table entry pointed at a poisoned page or at another sequence's tail makes NaN/inf
     * part of the result: outside the default input domain. Undo what brought them in: page
     * redirections first, then every override, then the poison itself, then the logit
     * scaling that turns bf16 extremes into inf, then the q/k distributions. */
    for (int step = 0; rc == 0 && !allow_nonfinite && !kvf_case_inputs_finite(&c); step++) {
        kvf_case_free(&c);
        if (step == 0) {
            for (uint32_t i = s->num_overrides; i-- > 0;)
                if (s->overrides[i].target == KVF_OVERRIDE_TABLE_ENTRY ||
                    s->overrides[i].target == KVF_OVERRIDE_LAST_LEN)
                    drop_override(s, i);
        } else if (step == 1) {
            s->num_overrides = 0;
        } else if (step == 2) {
            s->recipe.poison = 0;
        } else if (step == 3 && s->recipe.logits != KVF_LOGITS_NATURAL) {
            /* huge and beyond-f32 logits scale q and k up; bf16 extremes then become inf */
            s->recipe.logits = KVF_LOGITS_NATURAL;
        } else if (step <= 4) {
            s->recipe.q = s->recipe.k = (kvf_dist){KVF_DIST_NORMAL, 0, 0};
        } else {
            return kvf_error_set(err, KVF_EINVAL, "the case reads NaN or inf inputs");
        }
        rc = kvf_case_build(&c, s, case_limits, err);
    }
    if (rc == 0) {
        if (built)
            *built = c;
        else
            kvf_case_free(&c);
    }
    return rc;
}
