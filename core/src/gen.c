/* The deterministic generator: expands a recipe into tensors (docs/case-format.md describes
 * each strategy), applies overrides, validates; plus presets and random recipes.
 *
 * Every random draw comes from streams keyed by the recipe seed and a purpose, and only
 * IEEE-exact arithmetic turns draws into values, so a .kvfz file means the same bits on every
 * machine. A recipe names its expansion: expansion 1 (the draws in this file, one kvf_prng per
 * purpose) or expansion 2 (gen_draw2.c: the same laws from fewer, vectorized draws); the page
 * table, the pool's layout and the logit patterns are shared, only the draws differ. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "case_internal.h"
#include "gen_draw2.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/spec.h"

int kvf_recipe_check(const kvf_recipe *rp, const kvf_limits *lim, kvf_error *err);

enum { STREAM_TABLE = 1, STREAM_Q, STREAM_K, STREAM_V, STREAM_POISON, STREAM_LOGITS, STREAM_PICK };

/* Above this pool size only the pages next to referenced ones are written (poisoned), so
 * high-id pools stay sparse; below it every unreferenced page is written. */
#define FULL_POISON_POOL_BYTES ((int64_t)64 << 20)

static const char *const table_names[KVF_TABLE_COUNT] = {"contiguous",    "shuffled", "reversed",
                                                         "shared-prefix", "high-ids", "scattered"};
static const char *const dist_names[KVF_DIST_COUNT] = {"normal",      "uniform", "log-uniform",
                                                       "constant",    "one-hot", "subnormal",
                                                       "signed-zero", "special"};
static const char *const logit_names[KVF_LOGITS_COUNT] = {
    "natural", "equal", "near-tie", "spike", "very-negative", "huge", "beyond-f32", "ascending"};

const char *kvf_table_name(int k) {
    return k >= 0 && k < KVF_TABLE_COUNT ? table_names[k] : "?";
}
const char *kvf_dist_name(int k) {
    return k >= 0 && k < KVF_DIST_COUNT ? dist_names[k] : "?";
}
const char *kvf_logits_name(int k) {
    return k >= 0 && k < KVF_LOGITS_COUNT ? logit_names[k] : "?";
}

/* kvf_f32_to_bf16_rne((float)x), inlined: the generator converts one value per element. The
 * same operations on the same bits (tests/test_gen_hash.c pins the result). */
static inline kvf_bf16 to_bf16(double x) {
    uint32_t u = kvf_f32_bits((float)x);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu))
        return (kvf_bf16)((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (kvf_bf16)(u >> 16);
}

/* One value of a distribution. `slot` counts elements within a row (for one-hot spikes). */
static kvf_bf16 draw(kvf_prng *rng, const kvf_dist *d, double scale, int32_t index_in_row,
                     int32_t spike_at) {
    switch (d->kind) {
    case KVF_DIST_NORMAL:
        return to_bf16(kvf_prng_normal(rng) * scale);
    case KVF_DIST_UNIFORM:
        return to_bf16((2.0 * kvf_prng_unit(rng) - 1.0) * scale);
    case KVF_DIST_LOG_UNIFORM: {
        int span = d->param ? d->param : 20;
        int e = (int)kvf_prng_below(rng, 2u * (unsigned)span + 1) - span;
        double m = 1.0 + kvf_prng_unit(rng);
        /* m 2^e exactly (|e| <= 255, far inside double's range), as ldexp gives it. */
        uint64_t pb = (uint64_t)(e + 1023) << 52;
        double p2;
        memcpy(&p2, &pb, sizeof p2);
        double x = (m * p2) * scale;
        return to_bf16((kvf_prng_next(rng) & 1) ? -x : x);
    }
    case KVF_DIST_CONSTANT:
        return to_bf16(scale);
    case KVF_DIST_ONE_HOT:
        if (index_in_row == spike_at) return to_bf16(scale);
        if (d->param && kvf_prng_below(rng, 256) < d->param) return to_bf16(scale);
        return 0;
    case KVF_DIST_SUBNORMAL: {
        /* bf16 subnormals are 0x0001..0x007F; mix them with the smallest normals. */
        kvf_bf16 bits = (kvf_bf16)(1 + kvf_prng_below(rng, 0x00FF));
        return (kvf_bf16)(bits | ((kvf_prng_next(rng) & 1) ? 0x8000u : 0));
    }
    case KVF_DIST_SIGNED_ZERO: {
        uint64_t r = kvf_prng_below(rng, 8);
        if (r < 3) return 0x0000;
        if (r < 6) return 0x8000;
        return to_bf16(kvf_prng_normal(rng) * scale);
    }
    case KVF_DIST_SPECIAL:
    default: {
        uint64_t r = kvf_prng_below(rng, 64);
        static const kvf_bf16 extremes[] = {0x7F7F, 0xFF7F, 0x0080, 0x8080, 0x0000, 0x8000, 0x0001};
        if (r < sizeof extremes / sizeof extremes[0]) return extremes[r];
        return to_bf16(kvf_prng_normal(rng) * scale);
    }
    }
}

/* ---- draws in blocks ---------------------------------------------------------------------
 * One stream's outputs are a serial chain, but turning them into values is not: the hot loops
 * first draw a block of raw outputs in a tight loop (the state in registers), then convert the
 * block element by element. Every element still gets exactly the draws, in the order, and
 * the value that the one-at-a-time code (draw(), fill_filler) gives it. */
#define BLOCK 256

static void draw_block(kvf_prng *rng, uint64_t *out, int n) {
    kvf_prng st = *rng;
    for (int i = 0; i < n; i++)
        out[i] = kvf_prng_next(&st);
    *rng = st;
}

/* bf16 of a finite double: to_bf16 without the NaN test ((float) of a finite double is finite
 * or an infinity, whose mantissa bits are 0). */
static inline kvf_bf16 to_bf16_finite(double x) {
    uint32_t u = kvf_f32_bits((float)x);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (kvf_bf16)(u >> 16);
}

/* kvf_prng_normal(rng) * scale for scale = 2^k from four raw draws, with the powers of two
 * taken out: the uniforms are U_i 2^-53 with integers U_i < 2^53, and scaling by a power of
 * two commutes with every rounding here (no result comes near double's underflow or overflow:
 * the smallest nonzero |E c| 2^(k-53) is above 2^-180), so
 *   RN(RN(RN(RN(s - 2) c) 2^k)) with s = ((u1 + u2) + u3) + u4
 * equals RN(RN(S - 2^54) c) 2^(k-53) with S = ((U1 + U2) + U3) + U4 summed in double: the same
 * double, in fewer operations. */
static inline kvf_bf16 normal_of(const uint64_t *x, double scale_2m53) {
    /* x >> 11 < 2^53: through int64_t the conversion is one exact signed instruction. */
    double s = (double)(int64_t)(x[0] >> 11) + (double)(int64_t)(x[1] >> 11);
    s = s + (double)(int64_t)(x[2] >> 11);
    s = s + (double)(int64_t)(x[3] >> 11);
    return to_bf16_finite(((s - 0x1p54) * 1.7320508075688772) * scale_2m53);
}

static void fill_normal(kvf_bf16 *dst, int64_t n, double scale, kvf_prng *rng) {
    uint64_t x[4 * (BLOCK / 4)];
    const double scale_2m53 = scale * 0x1p-53; /* exact: scale is 2^k, k >= -126 */
    for (int64_t i = 0; i < n;) {
        int m = n - i < BLOCK / 4 ? (int)(n - i) : BLOCK / 4;
        draw_block(rng, x, 4 * m);
        for (int j = 0; j < m; j++)
            dst[i + j] = normal_of(x + 4 * j, scale_2m53);
        i += m;
    }
}

static void fill_uniform(kvf_bf16 *dst, int64_t n, double scale, kvf_prng *rng) {
    uint64_t x[BLOCK];
    for (int64_t i = 0; i < n;) {
        int m = n - i < BLOCK ? (int)(n - i) : BLOCK;
        draw_block(rng, x, m);
        for (int j = 0; j < m; j++)
            dst[i + j] =
                to_bf16_finite((2.0 * ((double)(int64_t)(x[j] >> 11) * 0x1p-53) - 1.0) * scale);
        i += m;
    }
}

/* The spike position of a row: kvf_prng_below(rng, n) with its rejection limit computed once
 * per call of fill_rows instead of once per row (the same draws and the same result). */
static inline uint64_t below_limit(uint64_t n) {
    return UINT64_MAX - UINT64_MAX % n;
}
static inline uint64_t below_with(kvf_prng *rng, uint64_t n, uint64_t limit) {
    uint64_t x;
    do {
        x = kvf_prng_next(rng);
    } while (x >= limit);
    return x % n;
}

/* Rows of a distribution: each row draws its spike position, then its elements in order, as
 * draw() defines them. The common kinds have their own loops (the kind tested once per call,
 * not per element); they make the same draws in the same order and the same arithmetic, so the
 * bits are draw()'s. */
static void fill_rows(kvf_bf16 *dst, int64_t rows, int32_t row_len, const kvf_dist *d,
                      kvf_prng *rng) {
    const double scale = ldexp(1.0, d->log2_scale);
    const uint64_t n = (uint64_t)row_len, limit = below_limit(n);
    for (int64_t r = 0; r < rows; r++) {
        int32_t spike = (int32_t)below_with(rng, n, limit);
        kvf_bf16 *row = dst + r * row_len;
        switch (d->kind) {
        case KVF_DIST_NORMAL:
            fill_normal(row, row_len, scale, rng);
            break;
        case KVF_DIST_UNIFORM:
            fill_uniform(row, row_len, scale, rng);
            break;
        case KVF_DIST_CONSTANT: {
            const kvf_bf16 c = to_bf16(scale);
            for (int32_t i = 0; i < row_len; i++)
                row[i] = c;
            break;
        }
        default:
            for (int32_t i = 0; i < row_len; i++)
                row[i] = draw(rng, d, scale, i, spike);
            break;
        }
    }
}

/* Values for slots no sequence reads, when they are not poisoned: finite, never zero, in
 * +-[0.5, 1), so a kernel that reads them changes its answer. Four values per draw because
 * these regions can be most of a pool. */
static void fill_filler(kvf_bf16 *dst, int64_t n, kvf_prng *rng) {
    int64_t i = 0;
    uint64_t x[BLOCK];
    for (; n - i >= 4 * BLOCK; i += 4 * BLOCK) {
        draw_block(rng, x, BLOCK);
        for (int j = 0; j < BLOCK; j++) {
            uint64_t r = x[j];
            kvf_bf16 *d = dst + i + 4 * j;
            d[0] = (kvf_bf16)((r & 0x807Fu) | 0x3F00u);
            d[1] = (kvf_bf16)(((r >> 16) & 0x807Fu) | 0x3F00u);
            d[2] = (kvf_bf16)(((r >> 32) & 0x807Fu) | 0x3F00u);
            d[3] = (kvf_bf16)(((r >> 48) & 0x807Fu) | 0x3F00u);
        }
    }
    for (; i + 4 <= n; i += 4) {
        uint64_t r = kvf_prng_next(rng);
        dst[i] = (kvf_bf16)((r & 0x807Fu) | 0x3F00u);
        dst[i + 1] = (kvf_bf16)(((r >> 16) & 0x807Fu) | 0x3F00u);
        dst[i + 2] = (kvf_bf16)(((r >> 32) & 0x807Fu) | 0x3F00u);
        dst[i + 3] = (kvf_bf16)(((r >> 48) & 0x807Fu) | 0x3F00u);
    }
    if (i < n) {
        uint64_t r = kvf_prng_next(rng);
        for (; i < n; i++, r >>= 16)
            dst[i] = (kvf_bf16)((r & 0x807Fu) | 0x3F00u);
    }
}

static inline kvf_bf16 poison_value(kvf_prng *rng, int nan, int inf) {
    if (nan) {
        /* Varied NaN payloads and signs: a kernel must not depend on one NaN pattern. */
        kvf_bf16 payload = (kvf_bf16)(1 + kvf_prng_below(rng, 0x7F));
        return (kvf_bf16)(0x7F80u | payload | ((kvf_prng_next(rng) & 1) ? 0x8000u : 0));
    }
    if (inf) return (kvf_prng_next(rng) & 1) ? KVF_BF16_NEG_INF : KVF_BF16_POS_INF;
    return 0;
}

/* Poison for n slots of both caches, k then v per element from one stream, as poison_value
 * draws them; the kind is tested once (NaN wins over inf). */
static void poison_pair(kvf_bf16 *kp, kvf_bf16 *vp, int64_t n, kvf_prng *rng, int nan, int inf) {
    if (nan) {
        for (int64_t e = 0; e < n; e++) {
            kp[e] = poison_value(rng, 1, 0);
            vp[e] = poison_value(rng, 1, 0);
        }
    } else if (inf) {
        for (int64_t e = 0; e < n; e++) {
            kp[e] = poison_value(rng, 0, 1);
            vp[e] = poison_value(rng, 0, 1);
        }
    }
}

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
        fill_rows(dst, rows, row_len, d, &g->p);
}

/* Poison (nan or inf set) or filler for n slots of both caches. */
static void gs_unused(kvf_bf16 *kp, kvf_bf16 *vp, int64_t n, gstream *g, int nan, int inf) {
    if (!g->v2) {
        if (nan || inf) {
            poison_pair(kp, vp, n, &g->p, nan, inf);
        } else {
            fill_filler(kp, n, &g->p);
            fill_filler(vp, n, &g->p);
        }
    } else if (nan || inf) {
        kvf__d2_poison(kp, n, nan, &g->d);
        kvf__d2_poison(vp, n, nan, &g->d);
    } else {
        kvf__d2_filler(kp, n, &g->d);
        kvf__d2_filler(vp, n, &g->d);
    }
}

/* Builds the page table and pool size; returns the ids in c->kv_indices. */
static int lay_out_table(const kvf_recipe *rp, int64_t entries, int64_t *pool_out, int32_t *ids,
                         const kvf_limits *lim, kvf_error *err) {
    gstream rng;
    gs_seed(&rng, rp, STREAM_TABLE);
    int64_t spare = rp->spare_pages;
    int64_t pool = 0;
    switch (rp->table) {
    case KVF_TABLE_CONTIGUOUS:
    case KVF_TABLE_REVERSED:
        pool = entries + spare;
        for (int64_t i = 0; i < entries; i++)
            ids[i] = (int32_t)(rp->table == KVF_TABLE_CONTIGUOUS ? i : pool - 1 - i);
        break;
    case KVF_TABLE_SHUFFLED:
    case KVF_TABLE_SCATTERED: {
        pool = rp->table == KVF_TABLE_SHUFFLED ? entries + spare : 2 * entries + spare + 1;
        if (pool > lim->max_table_entries * 4 + 65536 || pool > INT32_MAX)
            return kvf_error_set(err, KVF_ELIMIT,
                                 "the page pool of %lld pages is too large to shuffle",
                                 (long long)pool);
        int32_t *perm = malloc((size_t)(pool ? pool : 1) * sizeof *perm);
        if (!perm) return kvf_error_set(err, KVF_ENOMEM, "could not allocate the page permutation");
        for (int64_t i = 0; i < pool; i++)
            perm[i] = (int32_t)i;
        for (int64_t i = 0; i < entries; i++) { /* partial Fisher-Yates */
            int64_t j = i + (int64_t)gs_below(&rng, (uint64_t)(pool - i));
            int32_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
            ids[i] = perm[i];
        }
        free(perm);
        break;
    }
    case KVF_TABLE_SHARED_PREFIX: {
        /* Every non-empty sequence starts with the same `prefix` pages (the shortest
         * sequence's pages but one, at least one), then owns the rest. */
        int64_t shortest = -1, next = 0, pos = 0;
        for (uint32_t b = 0; b < rp->batch_size; b++)
            if (rp->num_pages[b] && (shortest < 0 || rp->num_pages[b] < shortest))
                shortest = rp->num_pages[b];
        int64_t prefix = shortest > 1 ? shortest - 1 : (shortest == 1 ? 1 : 0);
        next = prefix;
        for (uint32_t b = 0; b < rp->batch_size; b++)
            for (int64_t p = 0; p < rp->num_pages[b]; p++)
                ids[pos++] = (int32_t)(p < prefix ? p : next++);
        pool = next + spare;
        break;
    }
    case KVF_TABLE_HIGH_IDS:
    default: {
        int64_t stride = 1 + (int64_t)gs_below(&rng, 3);
        int64_t last = (int64_t)rp->page_id_base + (entries ? (entries - 1) * stride : 0);
        if (last > INT32_MAX - 1 - spare)
            return kvf_error_set(
                err, KVF_EINVAL,
                "high-ids table from page_id_base %u runs past the int32 page-id range",
                rp->page_id_base);
        for (int64_t i = 0; i < entries; i++)
            ids[i] = (int32_t)(rp->page_id_base + i * stride);
        pool = (entries ? last + 1 : rp->page_id_base) + spare;
        break;
    }
    }
    *pool_out = pool;
    return 0;
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
            x[i] = to_bf16((double)kvf_bf16_to_f32(x[i]) * p2);
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

/* Applies the logit pattern to k (used slots of referenced pages) and, for the overflow class,
 * to q. */
static void shape_logits(kvf_case *c, const kvf_recipe *rp) {
    if (rp->logits == KVF_LOGITS_NATURAL) return;
    gstream rng;
    gs_seed(&rng, rp, STREAM_LOGITS);
    const int32_t hk = c->num_kv_heads, d = c->head_dim, g = c->num_qo_heads / hk;
    const int64_t row = (int64_t)hk * d; /* one slot: all kv heads */
    kvf_bf16 *base = malloc((size_t)row * sizeof *base);
    if (!base) return;
    gs_fill_rows(base, 1, (int32_t)row, &rp->k, &rng);
    int big_e = rp->k.log2_scale + 10; /* spike magnitude relative to the k scale */
    for (int32_t b = 0; b < c->batch_size; b++) {
        int64_t len = kvf_case_seq_len(c, b);
        if (len == 0) continue;
        int64_t special = (int64_t)gs_below(&rng, (uint64_t)len);
        const kvf_bf16 *qb = c->q + (int64_t)b * c->num_qo_heads * d;
        for (int64_t t = 0; t < len; t++) {
            int64_t page = c->kv_indices[c->kv_indptr[b] + t / c->page_size];
            kvf_bf16 *k = c->k_cache + page_slot_offset(c, page, (int32_t)(t % c->page_size));
            switch (rp->logits) {
            case KVF_LOGITS_EQUAL:
                memcpy(k, base, (size_t)row * sizeof *k);
                break;
            case KVF_LOGITS_NEAR_TIE:
                memcpy(k, base, (size_t)row * sizeof *k);
                for (int n = 0; n < 2; n++) {
                    int64_t i = (int64_t)gs_below(&rng, (uint64_t)row);
                    if (kvf_bf16_is_finite(k[i]) && (k[i] & 0x7FFF) != 0x7F7F)
                        k[i] = (kvf_bf16)(k[i] + gs_bit(&rng));
                }
                break;
            case KVF_LOGITS_SPIKE:
            case KVF_LOGITS_VERY_NEGATIVE: {
                /* Align (or anti-align) the key with the first q head of each group, so that
                 * head's logit is large with a known sign. */
                int spike = (t == special);
                if (rp->logits == KVF_LOGITS_SPIKE && !spike) break;
                if (rp->logits == KVF_LOGITS_VERY_NEGATIVE && spike) break;
                double sign = rp->logits == KVF_LOGITS_SPIKE ? 1.0 : -1.0;
                for (int32_t kh = 0; kh < hk; kh++)
                    for (int32_t i = 0; i < d; i++) {
                        float qv = kvf_bf16_to_f32(qb[(int64_t)kh * g * d + i]);
                        double s = (qv > 0) ? sign : (qv < 0 ? -sign : 0.0);
                        k[(int64_t)kh * d + i] = to_bf16(ldexp(s, big_e));
                    }
                break;
            }
            case KVF_LOGITS_ASCENDING:
                ascending_key(k, qb, hk, g, d, t, rp->k.log2_scale);
                break;
            default:
                break;
            }
        }
    }
    free(base);
    if (rp->logits == KVF_LOGITS_HUGE || rp->logits == KVF_LOGITS_BEYOND_F32) {
        /* HUGE: about 2^17 (> 5e4) per logit for unit-scale data; BEYOND_F32: about 2^135. */
        int e_each = rp->logits == KVF_LOGITS_HUGE ? 9 : 68;
        scale_bf16(c->q, kvf_case_q_elems(c), e_each);
        for (int64_t i = 0; i < c->num_resident_pages; i++) {
            int64_t page = c->resident_pages[i];
            scale_bf16(c->k_cache + page * kvf_case_page_elems(c), kvf_case_page_elems(c), e_each);
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
    const int64_t entries = c->kv_indptr[c->batch_size];
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
    int full = (int64_t)c->pool_bytes <= FULL_POISON_POOL_BYTES && c->num_pages - nref <= budget;
    /* A heap pool (kvf__case_alloc left it unwritten) that is not written in full reads as
     * zero where it is not written, as a mapping would. */
    if (!full && c->pool_bytes && c->pool_bytes <= KVF_CASE_HEAP_POOL_BYTES) {
        memset(c->k_cache, 0, c->pool_bytes);
        memset(c->v_cache, 0, c->pool_bytes);
    }
    gstream rk, rv, rpois;
    gs_seed(&rk, rp, STREAM_K);
    gs_seed(&rv, rp, STREAM_V);
    gs_seed(&rpois, rp, STREAM_POISON);
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
    int64_t cap = full ? c->num_pages - nref : (budget < 64 ? budget : 64);
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
    (void)entries;
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
    int64_t entries = 0;
    for (uint32_t b = 0; b < rp->batch_size; b++)
        entries += rp->num_pages[b];
    int32_t *ids = malloc((size_t)(entries ? entries : 1) * sizeof *ids);
    if (!ids) return kvf_error_set(err, KVF_ENOMEM, "out of memory laying out the page table");
    int64_t pool = 0;
    if (s->has_explicit)
        pool = s->explicit_tensors.num_pages;
    else if ((rc = lay_out_table(rp, entries, &pool, ids, lim, err))) {
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
    for (uint32_t b = 0; b < rp->batch_size; b++) {
        out->kv_indptr[b + 1] = out->kv_indptr[b] + rp->num_pages[b];
        out->kv_last_page_len[b] = rp->last_page_len[b];
    }
    int64_t *extra = NULL, num_extra = 0;
    if (s->has_explicit) {
        build_explicit(out, s);
        free(ids);
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
        gs_seed(&rq, rp, STREAM_Q);
        gs_fill_rows(out->q, (int64_t)out->batch_size * out->num_qo_heads, out->head_dim, &rp->q,
                     &rq);
        if ((rc = fill_pool(out, rp, &extra, &num_extra, lim, err))) goto fail;
        shape_logits(out, rp);
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

/* ---- presets ---------------------------------------------------------------------------- */

typedef struct preset {
    const char *name;
    const char *description;
    void (*apply)(kvf_spec *s, uint64_t seed);
} preset;

static void base_recipe(kvf_spec *s, uint64_t seed, int hq, int hk, int d, int page) {
    kvf_recipe *rp = &s->recipe;
    rp->num_qo_heads = (uint8_t)hq;
    rp->num_kv_heads = (uint8_t)hk;
    rp->head_dim = (uint16_t)d;
    rp->page_size = (uint16_t)page;
    rp->table = KVF_TABLE_SHUFFLED;
    rp->sm_scale = (float)(1.0 / sqrt((double)d));
    rp->q = rp->k = rp->v = (kvf_dist){KVF_DIST_NORMAL, 0, 0};
    rp->seed = seed;
    rp->expansion = KVF_EXPANSION_DEFAULT;
}

static void preset_seed(kvf_spec *s, uint64_t seed) {
    base_recipe(s, seed, 20, 4, 128, 64);
    kvf_spec_set_batch(s, 1, NULL);
    s->recipe.spare_pages = 1; /* 51 pages of a 52-page pool */
    s->recipe.num_pages[0] = 51;
    s->recipe.last_page_len[0] = (uint16_t)(1 + seed % 64);
}

static void preset_batch_mixed(kvf_spec *s, uint64_t seed) {
    base_recipe(s, seed, 20, 4, 128, 64);
    kvf_spec_set_batch(s, 6, NULL);
    static const int64_t lens[6] = {1, 63, 64, 65, 0, 700};
    for (uint32_t b = 0; b < 6; b++)
        kvf_recipe_set_seq_len(&s->recipe, b, lens[b]);
    s->recipe.spare_pages = 3;
}

static void preset_empty(kvf_spec *s, uint64_t seed) {
    base_recipe(s, seed, 20, 4, 128, 64);
    kvf_spec_set_batch(s, 3, NULL);
    kvf_recipe_set_seq_len(&s->recipe, 0, 0);
    kvf_recipe_set_seq_len(&s->recipe, 1, 100);
    kvf_recipe_set_seq_len(&s->recipe, 2, 0);
    s->recipe.poison = KVF_POISON_ALL & ~(KVF_POISON_TAIL_INF | KVF_POISON_UNREF_INF);
    s->recipe.spare_pages = 2;
}

static void preset_tail_nan(kvf_spec *s, uint64_t seed) {
    preset_seed(s, seed);
    s->recipe.num_pages[0] = 4;
    s->recipe.last_page_len[0] = 5;
    s->recipe.poison = KVF_POISON_TAIL_NAN | KVF_POISON_UNREF_NAN;
    s->recipe.spare_pages = 4;
}

static void preset_high_ids(kvf_spec *s, uint64_t seed) {
    preset_seed(s, seed);
    s->recipe.table = KVF_TABLE_HIGH_IDS;
    s->recipe.num_pages[0] = 8;
    s->recipe.page_id_base = 65530; /* crosses 65536: 32-bit element offsets overflow */
    s->recipe.poison = KVF_POISON_UNREF_NAN;
}

static void preset_shared_prefix(kvf_spec *s, uint64_t seed) {
    base_recipe(s, seed, 20, 4, 128, 64);
    kvf_spec_set_batch(s, 4, NULL);
    static const int64_t lens[4] = {200, 129, 300, 64};
    for (uint32_t b = 0; b < 4; b++)
        kvf_recipe_set_seq_len(&s->recipe, b, lens[b]);
    s->recipe.table = KVF_TABLE_SHARED_PREFIX;
    s->recipe.poison = KVF_POISON_TAIL_NAN;
}

static void preset_gqa7(kvf_spec *s, uint64_t seed) {
    base_recipe(s, seed, 28, 4, 128, 16);
    kvf_spec_set_batch(s, 2, NULL);
    kvf_recipe_set_seq_len(&s->recipe, 0, 257);
    kvf_recipe_set_seq_len(&s->recipe, 1, 31);
    s->recipe.table = KVF_TABLE_REVERSED;
}

static void preset_gqa16_d256(kvf_spec *s, uint64_t seed) {
    base_recipe(s, seed, 32, 2, 256, 128);
    kvf_spec_set_batch(s, 2, NULL);
    kvf_recipe_set_seq_len(&s->recipe, 0, 129);
    kvf_recipe_set_seq_len(&s->recipe, 1, 1000);
    s->recipe.table = KVF_TABLE_SCATTERED;
}

static void preset_page1(kvf_spec *s, uint64_t seed) {
    base_recipe(s, seed, 8, 8, 64, 1);
    kvf_spec_set_batch(s, 3, NULL);
    kvf_recipe_set_seq_len(&s->recipe, 0, 1);
    kvf_recipe_set_seq_len(&s->recipe, 1, 77);
    kvf_recipe_set_seq_len(&s->recipe, 2, 5);
}

static void preset_page256(kvf_spec *s, uint64_t seed) {
    base_recipe(s, seed, 20, 4, 128, 256);
    kvf_spec_set_batch(s, 2, NULL);
    kvf_recipe_set_seq_len(&s->recipe, 0, 257);
    kvf_recipe_set_seq_len(&s->recipe, 1, 255);
    s->recipe.poison = KVF_POISON_TAIL_NAN;
}

/* The seed shape with fewer pages and a logit pattern imposed. */
static void seed_with_logits(kvf_spec *s, uint64_t seed, uint16_t pages, kvf_logit_kind logits) {
    preset_seed(s, seed);
    s->recipe.num_pages[0] = pages;
    s->recipe.logits = (uint8_t)logits;
}

static void preset_equal_logits(kvf_spec *s, uint64_t seed) {
    seed_with_logits(s, seed, 2, KVF_LOGITS_EQUAL);
}
static void preset_spike(kvf_spec *s, uint64_t seed) {
    seed_with_logits(s, seed, 6, KVF_LOGITS_SPIKE);
}
static void preset_very_negative(kvf_spec *s, uint64_t seed) {
    seed_with_logits(s, seed, 6, KVF_LOGITS_VERY_NEGATIVE);
}
static void preset_huge(kvf_spec *s, uint64_t seed) {
    seed_with_logits(s, seed, 3, KVF_LOGITS_HUGE);
}
static void preset_beyond_f32(kvf_spec *s, uint64_t seed) {
    seed_with_logits(s, seed, 2, KVF_LOGITS_BEYOND_F32);
}
static void preset_ascending(kvf_spec *s, uint64_t seed) {
    seed_with_logits(s, seed, 128, KVF_LOGITS_ASCENDING); /* 127 full pages and the last one */
}

static void preset_subnormal(kvf_spec *s, uint64_t seed) {
    preset_seed(s, seed);
    s->recipe.num_pages[0] = 2;
    s->recipe.v = (kvf_dist){KVF_DIST_SUBNORMAL, 0, 0};
    s->recipe.q = (kvf_dist){KVF_DIST_SIGNED_ZERO, 0, 0};
}

static void preset_log_uniform(kvf_spec *s, uint64_t seed) {
    preset_seed(s, seed);
    s->recipe.num_pages[0] = 5;
    s->recipe.v = (kvf_dist){KVF_DIST_LOG_UNIFORM, 0, 100};
    s->recipe.k = (kvf_dist){KVF_DIST_LOG_UNIFORM, -2, 6};
}

static void preset_long_len(kvf_spec *s, uint64_t seed, int64_t len) {
    base_recipe(s, seed, 20, 4, 128, 64);
    kvf_spec_set_batch(s, 1, NULL);
    kvf_recipe_set_seq_len(&s->recipe, 0, len);
}
static void preset_long4k(kvf_spec *s, uint64_t seed) {
    preset_long_len(s, seed, 4096);
}
static void preset_long(kvf_spec *s, uint64_t seed) {
    preset_long_len(s, seed, 32768);
}
static void preset_long128k(kvf_spec *s, uint64_t seed) {
    preset_long_len(s, seed, 131072);
}

static const preset presets[] = {
    {"seed-h20kv4",
     "FlashInfer-Bench gqa_paged_decode_h20_kv4_d128_ps64: batch 1, 51 pages of 64 from a pool of "
     "52",
     preset_seed},
    {"mixed-lengths", "seed shape, batch 6 with lengths 1, 63, 64, 65, 0, 700", preset_batch_mixed},
    {"empty-sequences", "seed shape, two empty sequences around one of 100 tokens, NaN poison",
     preset_empty},
    {"tail-nan", "seed shape, last page 5 of 64 slots used, NaN in unused slots and spare pages",
     preset_tail_nan},
    {"high-page-ids", "seed shape, page ids from 65530 upward (past 32-bit element offsets)",
     preset_high_ids},
    {"shared-prefix", "seed shape, 4 sequences sharing leading pages, NaN tails",
     preset_shared_prefix},
    {"gqa7", "group 7 (Hq 28, Hk 4), page 16, reversed page table", preset_gqa7},
    {"gqa16-d256", "group 16 (Hq 32, Hk 2), head dim 256, page 128, scattered ids",
     preset_gqa16_d256},
    {"page1", "page size 1, Hq = Hk = 8, head dim 64", preset_page1},
    {"page256", "page size 256, lengths 257 and 255, NaN tails", preset_page256},
    {"equal-logits", "seed shape, 2 pages, all keys equal: o is the mean of v",
     preset_equal_logits},
    {"spike-logit", "seed shape, one key aligned with q: one logit far above the rest",
     preset_spike},
    {"very-negative-logits", "seed shape, all keys but one anti-aligned with q",
     preset_very_negative},
    {"huge-logits", "seed shape, logits beyond +-5e4", preset_huge},
    {"beyond-f32-logits", "seed shape, logits past the f32 range (overflow class)",
     preset_beyond_f32},
    {"subnormal-values", "seed shape, subnormal v and signed-zero q", preset_subnormal},
    {"log-uniform", "seed shape, log-uniform magnitudes across the bf16 range in v",
     preset_log_uniform},
    {"ascending-logits", "seed shape, 128 pages, every logit above the previous ones",
     preset_ascending},
    {"long-4k", "seed shape, one sequence of 4096 tokens", preset_long4k},
    {"long-32k", "seed shape, one sequence of 32768 tokens", preset_long},
    {"long-128k", "seed shape, one sequence of 131072 tokens", preset_long128k},
};

size_t kvf_preset_count(void) {
    return sizeof presets / sizeof presets[0];
}
const char *kvf_preset_name(size_t i) {
    return i < kvf_preset_count() ? presets[i].name : NULL;
}
const char *kvf_preset_description(size_t i) {
    return i < kvf_preset_count() ? presets[i].description : NULL;
}

int kvf_spec_preset(kvf_spec *out, const char *name, uint64_t seed, kvf_error *err) {
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < kvf_preset_count(); i++)
        if (strcmp(presets[i].name, name) == 0) {
            presets[i].apply(out, seed);
            if (!out->recipe.num_pages) {
                kvf_spec_free(out);
                return kvf_error_set(err, KVF_ENOMEM, "out of memory building preset %s", name);
            }
            return 0;
        }
    return kvf_error_set(err, KVF_ENOTFOUND, "unknown preset \"%s\" (see kvfuzz gen --help)", name);
}

/* ---- random recipes ------------------------------------------------------------------- */

void kvf_random_opts_default(kvf_random_opts *o) {
    o->max_batch = 4;
    o->max_pages = 8;
    o->max_tokens = 2048;
    o->max_work = (int64_t)1 << 21;
    o->allow_overflow = 1;
    o->allow_high_ids = 1;
    o->expansion = KVF_EXPANSION_DEFAULT;
}

static uint64_t pick(kvf_prng *r, uint64_t n) {
    return kvf_prng_below(r, n);
}

int kvf_spec_random(kvf_spec *out, uint64_t seed, const kvf_random_opts *o, kvf_error *err) {
    memset(out, 0, sizeof *out);
    kvf_prng r;
    kvf_prng_seed_stream(&r, seed, STREAM_PICK);
    static const int kv_heads[] = {1, 2, 4, 8};
    static const int groups[] = {1, 2, 3, 4, 5, 5, 6, 7, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    static const int dims[] = {64, 128, 256};
    static const int pages[] = {1, 2, 3, 7, 16, 32, 64, 64, 128, 255, 256};
    int hk = kv_heads[pick(&r, 4)], g = groups[pick(&r, sizeof groups / sizeof groups[0])];
    int d = dims[pick(&r, 3)], page = pages[pick(&r, sizeof pages / sizeof pages[0])];
    base_recipe(out, seed, hk * g, hk, d, page);
    kvf_recipe *rp = &out->recipe;
    rp->expansion = (uint8_t)(o->expansion ? o->expansion : KVF_EXPANSION_DEFAULT);
    int batch = 1 + (int)pick(&r, (uint64_t)(o->max_batch > 0 ? o->max_batch : 1));
    if (kvf_spec_set_batch(out, (uint16_t)batch, err)) return KVF_ENOMEM;
    int64_t budget = o->max_tokens;
    int64_t work_tokens = o->max_work / ((int64_t)hk * g * d);
    if (budget > work_tokens) budget = work_tokens;
    for (int b = 0; b < batch; b++) {
        int64_t maxlen = (int64_t)o->max_pages * page;
        int64_t len;
        switch (pick(&r, 8)) { /* the lengths where bugs live: 0, 1, S-1, S, S+1, random */
        case 0:
            len = 0;
            break;
        case 1:
            len = 1;
            break;
        case 2:
            len = page - 1;
            break;
        case 3:
            len = page;
            break;
        case 4:
            len = page + 1;
            break;
        case 5:
            len = 32 * (1 + (int64_t)pick(&r, 8)) + (int64_t)pick(&r, 3) - 1;
            break;
        default:
            len = 1 + (int64_t)pick(&r, (uint64_t)maxlen);
            break;
        }
        if (len > maxlen) len = maxlen;
        if (len > budget) len = budget;
        if (len < 0) len = 0;
        budget -= len;
        kvf_recipe_set_seq_len(&out->recipe, (uint32_t)b, len);
    }
    rp->table = (uint8_t)pick(&r, KVF_TABLE_COUNT);
    if (rp->table == KVF_TABLE_HIGH_IDS && !o->allow_high_ids) rp->table = KVF_TABLE_SCATTERED;
    if (rp->table == KVF_TABLE_HIGH_IDS) {
        /* Aim past the 2^31-element mark when the 8 GiB pool allows, else as high as fits. */
        int64_t page_elems = (int64_t)page * hk * d;
        int64_t entries = 0;
        for (int b = 0; b < batch; b++)
            entries += rp->num_pages[b];
        int64_t max_base = ((int64_t)8 << 30) / (page_elems * 2) - 3 * entries - 8;
        int64_t overflow_at = ((int64_t)1 << 31) / page_elems;
        int64_t base = overflow_at - (int64_t)pick(&r, 4);
        if (base > max_base) base = max_base - (int64_t)pick(&r, 16);
        rp->page_id_base = (uint32_t)(base > 0 ? base : 0);
    }
    rp->spare_pages = (uint16_t)pick(&r, 5);
    rp->poison = (uint8_t)(pick(&r, 2) ? pick(&r, 16) : 0);
    int logit_kinds = o->allow_overflow ? KVF_LOGITS_COUNT : KVF_LOGITS_BEYOND_F32;
    rp->logits = (uint8_t)(pick(&r, 2) ? KVF_LOGITS_NATURAL : pick(&r, (uint64_t)logit_kinds));
    kvf_dist *dists[3] = {&rp->q, &rp->k, &rp->v};
    for (int i = 0; i < 3; i++) {
        kvf_dist *dd = dists[i];
        dd->kind = (uint8_t)(pick(&r, 3) ? KVF_DIST_NORMAL : pick(&r, KVF_DIST_COUNT));
        /* q and k extremes (bf16 max) would put the logits past f32: that is the overflow
         * class, drawn only through the logit pattern when allowed. */
        if (i < 2 && dd->kind == KVF_DIST_SPECIAL) dd->kind = KVF_DIST_LOG_UNIFORM;
        dd->log2_scale = (int8_t)(i < 2 ? (int)pick(&r, 9) - 4 : (int)pick(&r, 21) - 10);
        dd->param = (uint8_t)(dd->kind == KVF_DIST_LOG_UNIFORM ? 1 + pick(&r, i < 2 ? 12 : 60)
                                                               : pick(&r, 8));
    }
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
     * so that every recipe field drawn before keeps the value it had for the same seed. */
    if (rp->logits == KVF_LOGITS_NATURAL && pick(&r, 8) == 0) rp->logits = KVF_LOGITS_ASCENDING;
    return 0;
}
