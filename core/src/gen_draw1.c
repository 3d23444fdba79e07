/* Expansion 1's value draws (docs/case-format.md, "Expansion"): one kvf_prng stream per
 * purpose, one or more draws per element, turned into values by IEEE-exact arithmetic only.
 * Every version 1 file means these bits, so the draws and their order are frozen; the block
 * loops below only compute the same values faster (tests/test_gen_hash.c pins them). Each
 * distribution fills its rows with the function its line of kvfuzz/strategies.def names
 * (fill1), through a table built from that file. */
#include "gen_draw1.h"

#include <math.h>
#include <string.h>

#include "gen_internal.h"

/* ---- one value at a time ------------------------------------------------------------------
 * One value of a distribution, for the kinds without a block loop below: `index_in_row` counts
 * elements within a row, `spike_at` is the row's one-hot spike. */

static inline kvf_bf16 log_uniform_one(kvf_prng *rng, const kvf_dist *d, double scale,
                                       int32_t index_in_row, int32_t spike_at) {
    (void)index_in_row, (void)spike_at;
    int span = d->param ? d->param : 20;
    int e = (int)kvf_prng_below(rng, 2u * (unsigned)span + 1) - span;
    double m = 1.0 + kvf_prng_unit(rng);
    /* m 2^e exactly (|e| <= 255, far inside double's range), as ldexp gives it. */
    uint64_t pb = (uint64_t)(e + 1023) << 52;
    double p2;
    memcpy(&p2, &pb, sizeof p2);
    double x = (m * p2) * scale;
    return kvf__to_bf16((kvf_prng_next(rng) & 1) ? -x : x);
}

static inline kvf_bf16 one_hot_one(kvf_prng *rng, const kvf_dist *d, double scale,
                                   int32_t index_in_row, int32_t spike_at) {
    if (index_in_row == spike_at) return kvf__to_bf16(scale);
    if (d->param && kvf_prng_below(rng, 256) < d->param) return kvf__to_bf16(scale);
    return 0;
}

static inline kvf_bf16 subnormal_one(kvf_prng *rng, const kvf_dist *d, double scale,
                                     int32_t index_in_row, int32_t spike_at) {
    (void)d, (void)scale, (void)index_in_row, (void)spike_at;
    /* bf16 subnormals are 0x0001..0x007F; mix them with the smallest normals. */
    kvf_bf16 bits = (kvf_bf16)(1 + kvf_prng_below(rng, 0x00FF));
    return (kvf_bf16)(bits | ((kvf_prng_next(rng) & 1) ? 0x8000u : 0));
}

static inline kvf_bf16 signed_zero_one(kvf_prng *rng, const kvf_dist *d, double scale,
                                       int32_t index_in_row, int32_t spike_at) {
    (void)d, (void)index_in_row, (void)spike_at;
    uint64_t r = kvf_prng_below(rng, 8);
    if (r < 3) return 0x0000;
    if (r < 6) return 0x8000;
    return kvf__to_bf16(kvf_prng_normal(rng) * scale);
}

static inline kvf_bf16 special_one(kvf_prng *rng, const kvf_dist *d, double scale,
                                   int32_t index_in_row, int32_t spike_at) {
    (void)d, (void)index_in_row, (void)spike_at;
    uint64_t r = kvf_prng_below(rng, 64);
    static const kvf_bf16 extremes[] = {0x7F7F, 0xFF7F, 0x0080, 0x8080, 0x0000, 0x8000, 0x0001};
    if (r < sizeof extremes / sizeof extremes[0]) return extremes[r];
    return kvf__to_bf16(kvf_prng_normal(rng) * scale);
}

/* ---- draws in blocks ---------------------------------------------------------------------
 * One stream's outputs are a serial chain, but turning them into values is not: the hot loops
 * first draw a block of raw outputs in a tight loop (the state in registers), then convert the
 * block element by element. Every element still gets exactly the draws, in the order, and
 * the value that one-at-a-time code gives it: kvf__to_bf16(kvf_prng_normal(rng) * scale) for a
 * normal value, kvf__to_bf16((2.0 * kvf_prng_unit(rng) - 1.0) * scale) for a uniform one, the
 * tail loop of kvf__d1_filler for filler. */
#define BLOCK 256

static void draw_block(kvf_prng *rng, uint64_t *out, int n) {
    kvf_prng st = *rng;
    for (int i = 0; i < n; i++)
        out[i] = kvf_prng_next(&st);
    *rng = st;
}

/* bf16 of a finite double: kvf__to_bf16 without the NaN test ((float) of a finite double is finite
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
 * per call of kvf__d1_fill_rows instead of once per row (the same draws and the same result). */
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

/* ---- the rows of each distribution (KVF_VALUE_DIST's fill1) ----------------------------------
 * One row of `n` values whose spike position is already drawn. The common kinds have block
 * loops (above); the others draw value after value. */

typedef void (*row_fn)(kvf_bf16 *row, int32_t n, const kvf_dist *d, double scale, int32_t spike,
                       kvf_prng *rng);

static void kvf__d1_normal(kvf_bf16 *row, int32_t n, const kvf_dist *d, double scale, int32_t spike,
                           kvf_prng *rng) {
    (void)d, (void)spike;
    fill_normal(row, n, scale, rng);
}

static void kvf__d1_uniform(kvf_bf16 *row, int32_t n, const kvf_dist *d, double scale,
                            int32_t spike, kvf_prng *rng) {
    (void)d, (void)spike;
    fill_uniform(row, n, scale, rng);
}

static void kvf__d1_constant(kvf_bf16 *row, int32_t n, const kvf_dist *d, double scale,
                             int32_t spike, kvf_prng *rng) {
    (void)d, (void)spike, (void)rng;
    const kvf_bf16 c = kvf__to_bf16(scale);
    for (int32_t i = 0; i < n; i++)
        row[i] = c;
}

/* A row function that draws value after value with `one` (one of the *_one above). */
#define ROW_OF_ONES(fn, one)                                                                       \
    static void fn(kvf_bf16 *row, int32_t n, const kvf_dist *d, double scale, int32_t spike,       \
                   kvf_prng *rng) {                                                                \
        for (int32_t i = 0; i < n; i++)                                                            \
            row[i] = one(rng, d, scale, i, spike);                                                 \
    }
ROW_OF_ONES(kvf__d1_log_uniform, log_uniform_one)
ROW_OF_ONES(kvf__d1_one_hot, one_hot_one)
ROW_OF_ONES(kvf__d1_subnormal, subnormal_one)
ROW_OF_ONES(kvf__d1_signed_zero, signed_zero_one)
ROW_OF_ONES(kvf__d1_special, special_one)
#undef ROW_OF_ONES

static const row_fn row_fns[KVF_DIST_COUNT] = {
#define KVF_VALUE_DIST(id, name, fill1, fill2, simple, flags, doc) [KVF_DIST_##id] = fill1,
#include "kvfuzz/strategies.def"
};

/* Rows of a distribution: each row draws its spike position, then its values, as the row
 * function of the kind (chosen once per call) draws them. A kind out of the table draws as the
 * last one (special), as it always has; kvf_recipe_check keeps such kinds out. */
void kvf__d1_fill_rows(kvf_bf16 *dst, int64_t rows, int32_t row_len, const kvf_dist *d,
                       kvf_prng *rng) {
    const double scale = ldexp(1.0, d->log2_scale);
    const uint64_t n = (uint64_t)row_len, limit = below_limit(n);
    const row_fn fill = row_fns[d->kind < KVF_DIST_COUNT ? d->kind : KVF_DIST_SPECIAL];
    for (int64_t r = 0; r < rows; r++) {
        int32_t spike = (int32_t)below_with(rng, n, limit);
        fill(dst + r * row_len, row_len, d, scale, spike, rng);
    }
}

/* Values for slots no sequence reads, when they are not poisoned: finite, never zero, in
 * +-[0.5, 1), so a kernel that reads them changes its answer. Four values per draw because
 * these regions can be most of a pool. */
void kvf__d1_filler(kvf_bf16 *dst, int64_t n, kvf_prng *rng) {
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
void kvf__d1_poison_pair(kvf_bf16 *kp, kvf_bf16 *vp, int64_t n, kvf_prng *rng, int nan, int inf) {
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
