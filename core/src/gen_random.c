/* Random recipes (kvf_spec_random) over the whole strategy space, and the edge-length picker
 * they share with the mutator (fuzz/search/mutate.c), so that "the lengths where bugs live" are
 * defined once.
 *
 * Every choice comes from one stream (KVF__STREAM_PICK of the seed), one draw per statement:
 * a seed must mean the same recipe on every compiler, and the golden hashes of
 * tests/test_gen_hash.c hold the recipes of many seeds to their recorded bits. A new choice is
 * drawn after all the old ones, so every earlier field keeps its value for the same seed. */
#include <math.h>
#include <string.h>

#include "gen_internal.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/spec.h"

/* Uniform in [0, n); 0 without a draw when n is 0 (an empty range has one answer). */
static uint64_t below(kvf_prng *r, uint64_t n) {
    return n ? kvf_prng_below(r, n) : 0;
}

int64_t kvf_edge_length_pick(kvf_prng *rng, const uint8_t *menu, uint32_t n, int32_t page_size,
                             int64_t max_len) {
    const int64_t s = page_size;
    int64_t len;
    switch (menu[below(rng, n)]) {
    case KVF_EDGE_EMPTY:
        len = 0;
        break;
    case KVF_EDGE_ONE:
        len = 1;
        break;
    case KVF_EDGE_PAGE_BELOW:
        len = s - 1;
        break;
    case KVF_EDGE_PAGE:
        len = s;
        break;
    case KVF_EDGE_PAGE_ABOVE:
        len = s + 1;
        break;
    case KVF_EDGE_TWO_PAGES:
        len = 2 * s - 1 + (int64_t)below(rng, 3);
        break;
    case KVF_EDGE_TILE:
        len = 32 * (1 + (int64_t)below(rng, 8));
        len += (int64_t)below(rng, 3) - 1; /* separate statements: draws happen in one order */
        break;
    case KVF_EDGE_MAX:
        len = max_len;
        break;
    case KVF_EDGE_MAX_BELOW:
        len = max_len - 1;
        break;
    case KVF_EDGE_ANY:
    default:
        len = 1 + (int64_t)below(rng, (uint64_t)max_len);
        break;
    }
    if (len > max_len) len = max_len;
    return len < 0 ? 0 : len;
}

void kvf_random_opts_default(kvf_random_opts *o) {
    o->max_batch = 4;
    o->max_pages = 8;
    o->max_tokens = 2048;
    o->max_work = (int64_t)1 << 21;
    o->allow_overflow = 1;
    o->allow_high_ids = 1;
    o->expansion = KVF_EXPANSION_DEFAULT;
    o->layouts = 1;
    o->quant = 0; /* FP8 caches only for callers that ask (their kernels read them) */
    o->kv_dtypes = KVF_KV_DTYPES_ALL;
}

/* A padding: mostly 0 or a multiple of 8 elements, now and then an odd amount. */
static uint32_t draw_pad(kvf_prng *r) {
    static const uint32_t pads[] = {0, 0, 0, 8, 8, 16, 64, 1, 3};
    return pads[kvf_prng_below(r, sizeof pads / sizeof pads[0])];
}

int64_t kvf_recipe_max_page_pad(const kvf_recipe *rp) {
    if (rp->page_id_base > 0) return 0;
    /* A pool without high ids holds at most twice the entries plus the spares (the scattered
     * table); the other paddings add at most 4 x KVF_LAYOUT_MAX_PAD to a page. */
    const int64_t pool = 2 * kvf_recipe_entries(rp) + rp->spare_pages + 1;
    const int64_t room = ((int64_t)256 << 20) / 2 / pool - kvf_recipe_page_elems(rp) -
                         4 * (int64_t)KVF_LAYOUT_MAX_PAD;
    if (room <= 0) return 0;
    return room < (int64_t)KVF_LAYOUT_MAX_PAGE_PAD ? room : (int64_t)KVF_LAYOUT_MAX_PAGE_PAD;
}

void kvf_recipe_draw_layout(kvf_layout *l, const kvf_recipe *rp, kvf_prng *r) {
    memset(l, 0, sizeof *l);
    l->kv_order = (uint8_t)kvf_prng_below(r, 2);
    l->q_head_pad = draw_pad(r), l->q_batch_pad = draw_pad(r);
    l->o_head_pad = draw_pad(r), l->o_batch_pad = draw_pad(r);
    l->lse_batch_pad = kvf_prng_below(r, 2) ? 0 : 1 + (uint32_t)kvf_prng_below(r, 7);
    /* A high-ids pool is sized near the case limits at the dense page size: its pages keep it. */
    const int high = rp->page_id_base > 0;
    l->kv_row_pad = high ? 0 : draw_pad(r);
    l->kv_mid_pad = high ? 0 : draw_pad(r);
    l->kv_page_pad = high ? 0 : draw_pad(r);
    l->view_offset = kvf_prng_below(r, 2) ? 0 : 8u * (1 + (uint32_t)kvf_prng_below(r, 4));
    /* A packed page record: K or V is a small part of a page many times its size. Only for
     * tables whose pool is at most twice the entries plus the spares (no high ids). */
    if (!high && kvf_prng_below(r, 4) == 0) {
        const int64_t k = 1 + (int64_t)kvf_prng_below(r, 31);
        const int64_t pad = kvf_recipe_page_elems(rp) * k;
        if (pad <= kvf_recipe_max_page_pad(rp)) l->kv_page_pad = (uint32_t)pad;
    }
    if (kvf_layout_is_dense(l)) l->kv_order = KVF_LAYOUT_HND; /* never the dense one */
}

/* A random recipe's lengths: the page edges and tile edges, the rest anywhere up to max. */
static const uint8_t recipe_lengths[] = {KVF_EDGE_EMPTY, KVF_EDGE_ONE,        KVF_EDGE_PAGE_BELOW,
                                         KVF_EDGE_PAGE,  KVF_EDGE_PAGE_ABOVE, KVF_EDGE_TILE,
                                         KVF_EDGE_ANY,   KVF_EDGE_ANY};

static uint64_t pick(kvf_prng *r, uint64_t n) {
    return kvf_prng_below(r, n);
}

/* Sequence lengths within the token and work budgets, drawn sequence by sequence. */
static void pick_lengths(kvf_recipe *rp, kvf_prng *r, const kvf_random_opts *o) {
    const int64_t page = rp->page_size;
    int64_t budget = o->max_tokens;
    int64_t work_tokens = o->max_work / ((int64_t)rp->num_qo_heads * rp->head_dim);
    if (budget > work_tokens) budget = work_tokens;
    for (uint32_t b = 0; b < rp->batch_size; b++) {
        int64_t len = kvf_edge_length_pick(r, recipe_lengths, sizeof recipe_lengths, (int32_t)page,
                                           (int64_t)o->max_pages * page);
        if (len > budget) len = budget;
        if (len < 0) len = 0;
        budget -= len;
        kvf_recipe_set_seq_len(rp, b, len);
    }
}

/* page_id_base of a high-ids table: past the 2^31-element mark when the 8 GiB pool allows,
 * else as high as fits. */
static void pick_page_id_base(kvf_recipe *rp, kvf_prng *r) {
    int64_t page_elems = kvf_recipe_page_elems(rp);
    int64_t entries = kvf_recipe_entries(rp);
    int64_t max_base = ((int64_t)8 << 30) / (page_elems * 2) - 3 * entries - 8;
    int64_t overflow_at = ((int64_t)1 << 31) / page_elems;
    int64_t base = overflow_at - (int64_t)pick(r, 4);
    if (base > max_base) base = max_base - (int64_t)pick(r, 16);
    rp->page_id_base = (uint32_t)(base > 0 ? base : 0);
}

/* How many kinds of a family the uniform draw covers: those before its first LATE_ONLY line
 * (kvfuzz/strategies.def), so that a kind added later changes no seed's draws. */
static uint64_t uniform_kinds(int family) {
    return (uint64_t)kvf_strategy_first(family, KVF_STRATEGY_LATE_ONLY);
}

/* The q, k and v distributions. */
static void pick_dists(kvf_recipe *rp, kvf_prng *r) {
    kvf_dist *dists[3] = {&rp->q, &rp->k, &rp->v};
    for (int i = 0; i < 3; i++) {
        kvf_dist *dd = dists[i];
        dd->kind =
            (uint8_t)(pick(r, 3) ? KVF_DIST_NORMAL : pick(r, uniform_kinds(KVF_FAMILY_DIST)));
        /* q and k extremes (bf16 max) would put the logits past f32: that is the overflow
         * class, drawn only through the logit pattern when allowed. */
        if (i < 2 && (kvf_strategy_flags(KVF_FAMILY_DIST, dd->kind) & KVF_STRATEGY_V_ONLY))
            dd->kind = (uint8_t)kvf_strategy_first(KVF_FAMILY_DIST, KVF_STRATEGY_STANDIN);
        dd->log2_scale = (int8_t)(i < 2 ? (int)pick(r, 9) - 4 : (int)pick(r, 21) - 10);
        int span = kvf_strategy_flags(KVF_FAMILY_DIST, dd->kind) & KVF_STRATEGY_SPAN;
        dd->param = (uint8_t)(span ? 1 + pick(r, i < 2 ? 12 : 60) : pick(r, 8));
    }
}

/* ---- late draws (KVF_STRATEGY_LATE, KVF_STRATEGY_LATE_ONLY) ----------------------------------
 * After every other draw, in the order of strategies.def's lines: one in eight recipes whose
 * field holds the family's first kind take the line's kind (never a kind the options rule out,
 * nor, for q and k, a V_ONLY distribution). A line without a late draw draws nothing. */

enum { LATE_DRAW = KVF_STRATEGY_LATE | KVF_STRATEGY_LATE_ONLY };

static void late_table(kvf_recipe *rp, kvf_prng *r, const kvf_random_opts *o, int kind,
                       unsigned flags) {
    int high = (flags & KVF_STRATEGY_HIGH_IDS) != 0;
    if (!(flags & LATE_DRAW) || rp->table != 0 || (high && !o->allow_high_ids) || pick(r, 8))
        return;
    rp->table = (uint8_t)kind;
    if (high) pick_page_id_base(rp, r);
}

static void late_dist(kvf_recipe *rp, kvf_prng *r, int kind, unsigned flags) {
    kvf_dist *dists[3] = {&rp->q, &rp->k, &rp->v};
    for (int i = 0; i < 3 && (flags & LATE_DRAW); i++)
        if (!(i < 2 && (flags & KVF_STRATEGY_V_ONLY)) && dists[i]->kind == 0 && pick(r, 8) == 0)
            dists[i]->kind = (uint8_t)kind;
}

static void late_logits(kvf_recipe *rp, kvf_prng *r, const kvf_random_opts *o, int kind,
                        unsigned flags) {
    if (!(flags & LATE_DRAW) || rp->logits != 0 ||
        ((flags & KVF_STRATEGY_OVERFLOW) && !o->allow_overflow) || pick(r, 8))
        return;
    rp->logits = (uint8_t)kind;
}

static void draw_late(kvf_recipe *rp, kvf_prng *r, const kvf_random_opts *o) {
#define KVF_PAGE_TABLE(id, name, layout, pool, flags, doc)                                         \
    late_table(rp, r, o, KVF_TABLE_##id, flags);
#define KVF_VALUE_DIST(id, name, fill1, fill2, simple, flags, doc)                                 \
    late_dist(rp, r, KVF_DIST_##id, flags);
#define KVF_LOGIT_PATTERN(id, name, key, scale, flags, doc)                                        \
    late_logits(rp, r, o, KVF_LOGITS_##id, flags);
#include "kvfuzz/strategies.def"
}

int kvf_spec_random(kvf_spec *out, uint64_t seed, const kvf_random_opts *o, kvf_error *err) {
    memset(out, 0, sizeof *out);
    kvf_prng r;
    kvf_prng_seed_stream(&r, seed, KVF__STREAM_PICK);
    static const int kv_heads[] = {1, 2, 4, 8};
    static const int groups[] = {1, 2, 3, 4, 5, 5, 6, 7, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    static const int dims[] = {64, 128, 256};
    static const int pages[] = {1, 2, 3, 7, 16, 32, 64, 64, 128, 255, 256};
    int hk = kv_heads[pick(&r, 4)], g = groups[pick(&r, sizeof groups / sizeof groups[0])];
    int d = dims[pick(&r, 3)], page = pages[pick(&r, sizeof pages / sizeof pages[0])];
    kvf__base_recipe(out, seed, hk * g, hk, d, page);
    kvf_recipe *rp = &out->recipe;
    rp->expansion = (uint8_t)(o->expansion ? o->expansion : KVF_EXPANSION_DEFAULT);
    int batch = 1 + (int)pick(&r, (uint64_t)(o->max_batch > 0 ? o->max_batch : 1));
    if (kvf_spec_set_batch(out, (uint16_t)batch, err)) return KVF_ENOMEM;
    pick_lengths(rp, &r, o);
    rp->table = (uint8_t)pick(&r, uniform_kinds(KVF_FAMILY_TABLE));
    if ((kvf_strategy_flags(KVF_FAMILY_TABLE, rp->table) & KVF_STRATEGY_HIGH_IDS) &&
        !o->allow_high_ids)
        rp->table = (uint8_t)kvf_strategy_first(KVF_FAMILY_TABLE, KVF_STRATEGY_STANDIN);
    if (kvf_strategy_flags(KVF_FAMILY_TABLE, rp->table) & KVF_STRATEGY_HIGH_IDS)
        pick_page_id_base(rp, &r);
    rp->spare_pages = (uint16_t)pick(&r, 5);
    rp->poison = (uint8_t)(pick(&r, 2) ? pick(&r, 16) : 0);
    uint64_t logit_kinds = uniform_kinds(KVF_FAMILY_LOGITS);
    if (!o->allow_overflow)
        logit_kinds = (uint64_t)kvf_strategy_first(KVF_FAMILY_LOGITS,
                                                   KVF_STRATEGY_OVERFLOW | KVF_STRATEGY_LATE_ONLY);
    rp->logits = (uint8_t)(pick(&r, 2) ? KVF_LOGITS_NATURAL : pick(&r, logit_kinds));
    pick_dists(rp, &r);
    switch (pick(&r, 4)) {
    case 0:
        rp->sm_scale = (float)ldexp(1.0, (int)pick(&r, 9) - 6);
        break;
    case 1:
        rp->sm_scale = (float)(0.01 + 2.0 * kvf_prng_unit(&r));
        break;
    default:
        break; /* 1/sqrt(D) */
    }
    /* The ascending pattern came after the others; it is drawn last, from natural logits only,
     * so that every recipe field drawn before keeps the value it had for the same seed. Kinds
     * added since are drawn so too, after it. */
    draw_late(rp, &r, o);
    /* The layout comes from a stream of its own, after everything else: the recipe's fields
     * and every value are those of the same seed without it. */
    if (o->layouts) {
        kvf_prng lr;
        kvf_prng_seed_stream(&lr, seed, KVF__STREAM_LAYOUT);
        if (kvf_prng_below(&lr, 4) == 0) kvf_recipe_draw_layout(&out->layout, rp, &lr);
    }
    /* Quantized caches likewise, from their own stream after the layout: one recipe in four,
     * or every one when the dtype set leaves out bf16 (kvf_recipe_draw_quant_seeded draws the
     * same). */
    const unsigned dtypes = kvf_kv_dtypes_norm(o->kv_dtypes);
    if (o->quant && (dtypes & KVF_KV_DTYPES_FP8)) {
        kvf_prng qr;
        kvf_prng_seed_stream(&qr, seed, KVF__STREAM_QUANT);
        if (kvf_prng_below(&qr, 4) == 0 || !(dtypes & KVF_KV_DTYPES_BF16))
            kvf_recipe_draw_quant_in(&out->quant, rp, &qr, dtypes);
    }
    return 0;
}
