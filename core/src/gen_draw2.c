/* Expansion 2's value draws (docs/case-format.md, "Expansion 2").
 *
 * Why a second set of draws exists: expansion 1 (gen_draw1.c) spends most of its time in the serial
 * xoshiro256** chain of one stream per purpose, four steps per normal value and two per NaN.
 * Its bits are fixed by every version 1 file, so the speed could only come from a new
 * expansion, named by the file's version byte. This one draws the same laws from fewer and
 * cheaper bits: four lanes stepped together (independent chains the compiler vectorizes or
 * interleaves), one 64-bit word per normal value (four 16-bit uniforms), two uniforms per word,
 * eight filler or NaN values per word, 64 infinities per word, and Lemire's bounded draws
 * instead of a division. Only IEEE-exact operations turn words into values (integer
 * arithmetic, int to float conversion of exactly representable integers, products rounded to
 * nearest, round to nearest even into bf16), and no product is followed by an addition in one
 * expression, so no contraction into FMA could change a bit (and core/CMakeLists.txt compiles this
 * file with -ffp-contract=off); the same words give the same values on every machine
 * (tests/test_gen_hash.c pins them). Each distribution fills with the function its line of
 * kvfuzz/strategies.def names (fill2), through tables built from that file. */
#include "gen_draw2.h"

#include <string.h>

#include "kvfuzz/prng.h"

/* On x86-64 with GCC or clang, the entry points that fill many values are also compiled for
 * AVX2 (a target attribute on a second copy), and each call takes that copy when the processor
 * has AVX2: twice the lanes per instruction. The copy runs the same integer operations and the
 * same IEEE products (-ffp-contract=off, and no FMA in the target), so it gives the same bits
 * (tests/test_gen_hash.c; KVF_D2_NO_CLONES builds without it, to check that). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(KVF_D2_NO_CLONES)
#define AVX2_COPIES 1
#define AVX2_TARGET __attribute__((target("avx2")))
static int have_avx2(void) {
    return __builtin_cpu_supports("avx2");
}
#endif

/* The helpers of the entry points are inlined into each copy (so that they, too, are compiled
 * for its target). */
#if defined(__GNUC__)
#define HOT static inline __attribute__((always_inline))
#else
#define HOT static inline
#endif

void kvf__d2_seed(kvf__d2 *st, uint64_t seed, uint64_t purpose) {
    for (int l = 0; l < KVF__D2_LANES; l++) {
        kvf_prng lane;
        kvf_prng_seed_stream(&lane, seed, 256 * purpose + (uint64_t)l);
        for (int k = 0; k < 4; k++)
            st->s[k][l] = lane.s[k];
    }
    st->pos = KVF__D2_BUF;
}

/* The next KVF__D2_BUF words: xoshiro256** on every lane, the lanes side by side, the
 * multiplications by 5 and 9 as shifts and adds. With GCC or clang the lanes are one vector
 * (vector extensions: plain integer vector instructions, two registers per state word on
 * SSE2, one on AVX2); elsewhere the same operations run lane by lane. Integer operations
 * only, so both give the same words (KVF_D2_SCALAR forces the lane loop, to check that). */
#if defined(__GNUC__) && KVF__D2_LANES == 4 && !defined(KVF_D2_SCALAR)
typedef uint64_t lanes_t __attribute__((vector_size(32)));

HOT void refill(kvf__d2 *st) {
    lanes_t s0, s1, s2, s3;
    memcpy(&s0, st->s[0], sizeof s0);
    memcpy(&s1, st->s[1], sizeof s1);
    memcpy(&s2, st->s[2], sizeof s2);
    memcpy(&s3, st->s[3], sizeof s3);
    for (int i = 0; i < KVF__D2_BUF; i += KVF__D2_LANES) {
        lanes_t x = s1 + (s1 << 2); /* s1 * 5 */
        x = (x << 7) | (x >> 57);
        x = x + (x << 3); /* * 9 */
        memcpy(st->buf + i, &x, sizeof x);
        lanes_t t = s1 << 17;
        s2 ^= s0;
        s3 ^= s1;
        s1 ^= s2;
        s0 ^= s3;
        s2 ^= t;
        s3 = (s3 << 45) | (s3 >> 19);
    }
    memcpy(st->s[0], &s0, sizeof s0);
    memcpy(st->s[1], &s1, sizeof s1);
    memcpy(st->s[2], &s2, sizeof s2);
    memcpy(st->s[3], &s3, sizeof s3);
    st->pos = 0;
}
#else
HOT void refill(kvf__d2 *st) {
    uint64_t s0[KVF__D2_LANES], s1[KVF__D2_LANES], s2[KVF__D2_LANES], s3[KVF__D2_LANES];
    memcpy(s0, st->s[0], sizeof s0);
    memcpy(s1, st->s[1], sizeof s1);
    memcpy(s2, st->s[2], sizeof s2);
    memcpy(s3, st->s[3], sizeof s3);
    for (int i = 0; i < KVF__D2_BUF; i += KVF__D2_LANES) {
        for (int l = 0; l < KVF__D2_LANES; l++) {
            uint64_t x = s1[l] + (s1[l] << 2);
            x = (x << 7) | (x >> 57);
            st->buf[i + l] = x + (x << 3);
            uint64_t t = s1[l] << 17;
            s2[l] ^= s0[l];
            s3[l] ^= s1[l];
            s1[l] ^= s2[l];
            s0[l] ^= s3[l];
            s2[l] ^= t;
            s3[l] = (s3[l] << 45) | (s3[l] >> 19);
        }
    }
    memcpy(st->s[0], s0, sizeof s0);
    memcpy(st->s[1], s1, sizeof s1);
    memcpy(st->s[2], s2, sizeof s2);
    memcpy(st->s[3], s3, sizeof s3);
    st->pos = 0;
}
#endif

uint64_t kvf__d2_word(kvf__d2 *st) {
    if (st->pos == KVF__D2_BUF) refill(st);
    return st->buf[st->pos++];
}

/* Up to `want` (> 0) next words, contiguous; *got of them (at least 1). */
HOT const uint64_t *take(kvf__d2 *st, int64_t want, int *got) {
    if (st->pos == KVF__D2_BUF) refill(st);
    int avail = KVF__D2_BUF - st->pos;
    *got = want < avail ? (int)want : avail;
    const uint64_t *p = st->buf + st->pos;
    st->pos += *got;
    return p;
}

uint32_t kvf__d2_below(kvf__d2 *st, uint32_t n) {
    uint64_t p = (uint64_t)(uint32_t)kvf__d2_word(st) * n;
    if ((uint32_t)p < n) {
        const uint32_t t = (uint32_t)(0u - n) % n; /* 2^32 mod n: the rejected low parts */
        while ((uint32_t)p < t)
            p = (uint64_t)(uint32_t)kvf__d2_word(st) * n;
    }
    return (uint32_t)(p >> 32);
}

/* Round to nearest even into bf16 of a float that is not NaN (an infinity keeps its bits). */
static inline kvf_bf16 rne(float f) {
    uint32_t u = kvf_f32_bits(f);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (kvf_bf16)(u >> 16);
}

/* 2^k as a float, -126 <= k <= 127. */
static inline float pow2f(int k) {
    return kvf_f32_from_bits((uint32_t)(k + 127) << 23);
}

/* 2^k as a double, -1022 <= k <= 1023. */
static inline double pow2d(int k) {
    uint64_t b = (uint64_t)(k + 1023) << 52;
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

/* RN_f32(sqrt(3)) * 2^-16: the Irwin-Hall sum of four uniforms on a 2^-16 grid, centred and
 * scaled to variance (1 - 2^-32), in units of its grid. */
#define NORMAL_C 0x1.bb67aep-16f

/* The normal value of one word: its four 16-bit fields u_i, uniforms (u_i + 1/2) 2^-16, summed
 * and centred: m = u_1 + u_2 + u_3 + u_4 - (2^17 - 2), an integer with |m| <= 2^17 - 2, exact as
 * a float; then RN(RN(m C) 2^k). */
static inline kvf_bf16 normal_of(uint64_t x, float p2) {
    uint64_t t = (x & 0x0000FFFF0000FFFFull) + ((x >> 16) & 0x0000FFFF0000FFFFull);
    int32_t m = (int32_t)((uint32_t)t + (uint32_t)(t >> 32)) - 131070;
    float f = (float)m * NORMAL_C;
    return rne(f * p2);
}

HOT void fill_normal(kvf_bf16 *dst, int64_t n, float p2, kvf__d2 *st) {
    for (int64_t i = 0; i < n;) {
        int got;
        const uint64_t *w = take(st, n - i, &got);
        kvf_bf16 *d = dst + i;
        for (int j = 0; j < got; j++)
            d[j] = normal_of(w[j], p2);
        i += got;
    }
}

/* The uniform value of 32 bits h: v = 2 (h >> 8) + 1 - 2^24, an odd integer, |v| < 2^24, so
 * v 2^-24 is uniform on the odd multiples of 2^-24 in (-1, 1); then RN(v 2^-24 2^k). */
static inline kvf_bf16 uniform_of(uint32_t h, float p2) {
    int32_t v = (int32_t)((h >> 8) << 1) + 1 - (1 << 24);
    float f = (float)v * 0x1p-24f;
    return rne(f * p2);
}

/* Two values per word, the low 32 bits first; an odd count leaves the last high half unused. */
HOT void fill_uniform(kvf_bf16 *dst, int64_t n, float p2, kvf__d2 *st) {
    for (int64_t i = 0; i < n;) {
        int got;
        const uint64_t *w = take(st, (n - i + 1) / 2, &got);
        kvf_bf16 *d = dst + i;
        int64_t vals = n - i < 2 * (int64_t)got ? n - i : 2 * (int64_t)got;
        int pairs = (int)(vals / 2);
        for (int j = 0; j < pairs; j++) {
            d[2 * j] = uniform_of((uint32_t)w[j], p2);
            d[2 * j + 1] = uniform_of((uint32_t)(w[j] >> 32), p2);
        }
        if (vals & 1) d[2 * pairs] = uniform_of((uint32_t)w[pairs], p2);
        i += vals;
    }
}

/* Log-uniform: one word per value. The exponent e in [-span, span] from its low 32 bits
 * (Lemire; a rejected word is replaced whole by the next), the significand 1 + f 2^-23 from
 * bits 32..54, the sign from bit 63: RN_f32(+-(2^23 + f) 2^(e + k - 23)), exact in double. */
HOT void fill_log_uniform(kvf_bf16 *dst, int64_t n, int span, int k, kvf__d2 *st) {
    const uint32_t range = 2u * (uint32_t)span + 1, t = (uint32_t)(0u - range) % range;
    for (int64_t i = 0; i < n; i++) {
        uint64_t w, p;
        do {
            w = kvf__d2_word(st);
            p = (uint64_t)(uint32_t)w * range;
        } while ((uint32_t)p < t);
        int e = (int)(p >> 32) - span;
        double x = (double)(int64_t)(0x800000u | ((w >> 32) & 0x7FFFFFu)) * pow2d(e + k - 23);
        float f = (float)x;
        dst[i] = rne((w >> 63) ? -f : f);
    }
}

/* Filler: byte b of a word gives sign (bit 7) and the top 7 significand bits of a value in
 * [0.5, 1); eight per word, the lowest byte first. */
static inline kvf_bf16 filler_of(uint32_t y) {
    return (kvf_bf16)(((y & 0x80u) << 8) | 0x3F00u | (y & 0x7Fu));
}

HOT void filler_impl(kvf_bf16 *dst, int64_t n, kvf__d2 *st) {
    for (int64_t i = 0; i < n;) {
        int got;
        const uint64_t *w = take(st, (n - i + 7) / 8, &got);
        kvf_bf16 *d = dst + i;
        int64_t m = n - i < 8 * (int64_t)got ? n - i : 8 * (int64_t)got;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* Byte b of word j is byte 8 j + b in memory: one loop over bytes vectorizes. */
        const unsigned char *y = (const unsigned char *)w;
        for (int64_t j = 0; j < m; j++)
            d[j] = filler_of(y[j]);
#else
        for (int64_t j = 0; j < m; j++)
            d[j] = filler_of((uint32_t)(w[j / 8] >> (8 * (j % 8))) & 0xFFu);
#endif
        i += m;
    }
}

/* NaN poison: byte b gives a payload (bits 0..6; 0 is rejected: the byte is skipped) and a
 * sign (bit 7). Bytes are taken in order, the lowest of a word first; the bytes of the last
 * word not needed are unused. */
static inline kvf_bf16 nan_of(uint32_t y) {
    return (kvf_bf16)(0x7F80u | (y & 0x7Fu) | ((y & 0x80u) << 8));
}

HOT void fill_nan(kvf_bf16 *dst, int64_t n, kvf__d2 *st) {
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    int64_t i = 0;
    while (i < n) {
        if (st->pos == KVF__D2_BUF) refill(st);
        /* A run of words none of whose payloads is 0 (the test is exact: a borrow starts only
         * at a zero byte) gives eight values each, converted in one loop. */
        int start = st->pos, end = start;
        const int64_t most = (n - i) / 8;
        while (end < KVF__D2_BUF && end - start < most) {
            uint64_t y = st->buf[end] & ~highs;
            if ((y - ones) & ~y & highs) break;
            end++;
        }
        if (end > start) {
            const int64_t m = 8 * (int64_t)(end - start);
            kvf_bf16 *d = dst + i;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            const unsigned char *y = (const unsigned char *)(st->buf + start);
            for (int64_t j = 0; j < m; j++)
                d[j] = nan_of(y[j]);
#else
            for (int64_t j = 0; j < m; j++)
                d[j] = nan_of((uint32_t)(st->buf[start + j / 8] >> (8 * (j % 8))) & 0xFFu);
#endif
            i += m;
            st->pos = end;
            continue;
        }
        /* A word with a rejected byte, or the last word: byte by byte. */
        uint64_t x = st->buf[st->pos++];
        for (int b = 0; b < 8 && i < n; b++, x >>= 8)
            if (x & 0x7Fu) dst[i++] = nan_of((uint32_t)x);
    }
}

/* The eight infinities of a byte's bits, bit 0 first (+inf for 0, -inf for 1). */
#define INF_(y, b) (kvf_bf16)(0x7F80u | ((((unsigned)(y) >> (b)) & 1u) << 15))
#define INF_ROW(y)                                                                                 \
    {                                                                                              \
        INF_(y, 0), INF_(y, 1), INF_(y, 2), INF_(y, 3), INF_(y, 4), INF_(y, 5), INF_(y, 6),        \
            INF_(y, 7)                                                                             \
    }
#define INF_ROW4(y) INF_ROW(y), INF_ROW((y) + 1), INF_ROW((y) + 2), INF_ROW((y) + 3)
#define INF_ROW16(y) INF_ROW4(y), INF_ROW4((y) + 4), INF_ROW4((y) + 8), INF_ROW4((y) + 12)
#define INF_ROW64(y) INF_ROW16(y), INF_ROW16((y) + 16), INF_ROW16((y) + 32), INF_ROW16((y) + 48)
static const kvf_bf16 inf_of_byte[256][8] = {INF_ROW64(0), INF_ROW64(64), INF_ROW64(128),
                                             INF_ROW64(192)};

HOT void poison_impl(kvf_bf16 *dst, int64_t n, int nan, kvf__d2 *st) {
    if (nan) {
        fill_nan(dst, n, st);
        return;
    }
    /* +-inf: bit b of a word is the sign of one value, 64 per word, the lowest bit first;
     * eight values per byte from a table. */
    for (int64_t i = 0; i < n; i += 64) {
        uint64_t x = kvf__d2_word(st);
        int m = n - i < 64 ? (int)(n - i) : 64;
        int b = 0;
        for (; b + 8 <= m; b += 8)
            memcpy(dst + i + b, inf_of_byte[(x >> b) & 0xFFu], sizeof inf_of_byte[0]);
        for (; b < m; b++)
            dst[i + b] = (kvf_bf16)(0x7F80u | (((uint32_t)(x >> b) & 1u) << 15));
    }
}

/* Subnormal kind: 16-bit fields, the lowest first; bits 0..7 give 1..255 (0 is rejected: the
 * field is skipped), bit 8 the sign: the bf16 subnormals and the smallest normals. */
HOT void fill_subnormal(kvf_bf16 *dst, int64_t n, kvf__d2 *st) {
    int64_t i = 0;
    while (i < n) {
        uint64_t x = kvf__d2_word(st);
        for (int f = 0; f < 4 && i < n; f++, x >>= 16) {
            uint32_t y = (uint32_t)x & 0xFFFFu;
            if (y & 0xFFu) dst[i++] = (kvf_bf16)((y & 0xFFu) | ((y & 0x100u) << 7));
        }
    }
}

/* ---- the fills of each distribution (KVF_VALUE_DIST's fill2) ---------------------------------
 * `rows` rows of `row_len` values of distribution d (rows matter to one-hot only). Inlined into
 * each copy of the entry point below. */

/* 2^k, exact in bf16. */
static inline kvf_bf16 scale_bits_of(const kvf_dist *d) {
    return (kvf_bf16)((d->log2_scale + 127) << 7);
}

HOT void kvf__d2_normal(kvf_bf16 *dst, int64_t rows, int32_t row_len, const kvf_dist *d,
                        kvf__d2 *st) {
    fill_normal(dst, rows * row_len, pow2f(d->log2_scale), st);
}

HOT void kvf__d2_uniform(kvf_bf16 *dst, int64_t rows, int32_t row_len, const kvf_dist *d,
                         kvf__d2 *st) {
    fill_uniform(dst, rows * row_len, pow2f(d->log2_scale), st);
}

HOT void kvf__d2_log_uniform(kvf_bf16 *dst, int64_t rows, int32_t row_len, const kvf_dist *d,
                             kvf__d2 *st) {
    fill_log_uniform(dst, rows * row_len, d->param ? d->param : 20, d->log2_scale, st);
}

HOT void kvf__d2_constant(kvf_bf16 *dst, int64_t rows, int32_t row_len, const kvf_dist *d,
                          kvf__d2 *st) {
    (void)st;
    const int64_t n = rows * row_len;
    const kvf_bf16 scale_bits = scale_bits_of(d);
    for (int64_t i = 0; i < n; i++)
        dst[i] = scale_bits;
}

/* Per row: the spike's position (one bounded draw), then, when param > 0, one byte per value
 * (eight per word): a value is another spike when its byte is below param. */
HOT void kvf__d2_one_hot(kvf_bf16 *dst, int64_t rows, int32_t row_len, const kvf_dist *d,
                         kvf__d2 *st) {
    const kvf_bf16 scale_bits = scale_bits_of(d);
    for (int64_t r = 0; r < rows; r++) {
        kvf_bf16 *row = dst + r * row_len;
        uint32_t spike = kvf__d2_below(st, (uint32_t)row_len);
        if (d->param) {
            for (int32_t i = 0; i < row_len; i += 8) {
                uint64_t x = kvf__d2_word(st);
                for (int b = 0; b < 8 && i + b < row_len; b++, x >>= 8)
                    row[i + b] = (x & 0xFFu) < d->param ? scale_bits : 0;
            }
        } else {
            memset(row, 0, (size_t)row_len * sizeof *row);
        }
        row[spike] = scale_bits;
    }
}

HOT void kvf__d2_subnormal(kvf_bf16 *dst, int64_t rows, int32_t row_len, const kvf_dist *d,
                           kvf__d2 *st) {
    (void)d;
    fill_subnormal(dst, rows * row_len, st);
}

/* One word per value: bits 0..2 pick +0 (0..2), -0 (3..5) or a normal value (6, 7) drawn from
 * the next word. */
HOT void kvf__d2_signed_zero(kvf_bf16 *dst, int64_t rows, int32_t row_len, const kvf_dist *d,
                             kvf__d2 *st) {
    const int64_t n = rows * row_len;
    const float p2 = pow2f(d->log2_scale);
    for (int64_t i = 0; i < n; i++) {
        uint32_t r = (uint32_t)kvf__d2_word(st) & 7u;
        dst[i] = r < 3 ? 0x0000 : r < 6 ? 0x8000 : normal_of(kvf__d2_word(st), p2);
    }
}

/* One word per value: bits 0..5 pick one of seven extremes (0..6) or a normal value drawn from
 * the next word. */
HOT void kvf__d2_special(kvf_bf16 *dst, int64_t rows, int32_t row_len, const kvf_dist *d,
                         kvf__d2 *st) {
    static const kvf_bf16 extremes[] = {0x7F7F, 0xFF7F, 0x0080, 0x8080, 0x0000, 0x8000, 0x0001};
    const int64_t n = rows * row_len;
    const float p2 = pow2f(d->log2_scale);
    for (int64_t i = 0; i < n; i++) {
        uint32_t r = (uint32_t)kvf__d2_word(st) & 63u;
        dst[i] = r < 7 ? extremes[r] : normal_of(kvf__d2_word(st), p2);
    }
}

/* ---- the entry points: the AVX2 copy where the processor has it ---------------------------- */

typedef void (*fill_fn)(kvf_bf16 *dst, int64_t rows, int32_t row_len, const kvf_dist *d,
                        kvf__d2 *st);

/* Each distribution's fill as a function of its own, once plain and once (AVX2_COPIES) for
 * AVX2, and a table of each, built from kvfuzz/strategies.def. */
#define KVF_VALUE_DIST(id, name, fill1, fill2, simple, flags, doc)                                 \
    static void fill2##_plain(kvf_bf16 *dst, int64_t rows, int32_t row_len, const kvf_dist *d,     \
                              kvf__d2 *st) {                                                       \
        fill2(dst, rows, row_len, d, st);                                                          \
    }
#include "kvfuzz/strategies.def"
static const fill_fn fills_plain[KVF_DIST_COUNT] = {
#define KVF_VALUE_DIST(id, name, fill1, fill2, simple, flags, doc) [KVF_DIST_##id] = fill2##_plain,
#include "kvfuzz/strategies.def"
};

#ifdef AVX2_COPIES
#define KVF_VALUE_DIST(id, name, fill1, fill2, simple, flags, doc)                                 \
    AVX2_TARGET static void fill2##_avx2(kvf_bf16 *dst, int64_t rows, int32_t row_len,             \
                                         const kvf_dist *d, kvf__d2 *st) {                         \
        fill2(dst, rows, row_len, d, st);                                                          \
    }
#include "kvfuzz/strategies.def"
static const fill_fn fills_avx2[KVF_DIST_COUNT] = {
#define KVF_VALUE_DIST(id, name, fill1, fill2, simple, flags, doc) [KVF_DIST_##id] = fill2##_avx2,
#include "kvfuzz/strategies.def"
};

AVX2_TARGET static void filler_avx2(kvf_bf16 *dst, int64_t n, kvf__d2 *st) {
    filler_impl(dst, n, st);
}
AVX2_TARGET static void poison_avx2(kvf_bf16 *dst, int64_t n, int nan, kvf__d2 *st) {
    poison_impl(dst, n, nan, st);
}
#endif

void kvf__d2_filler(kvf_bf16 *dst, int64_t n, kvf__d2 *st) {
#ifdef AVX2_COPIES
    if (have_avx2()) {
        filler_avx2(dst, n, st);
        return;
    }
#endif
    filler_impl(dst, n, st);
}

void kvf__d2_poison(kvf_bf16 *dst, int64_t n, int nan, kvf__d2 *st) {
#ifdef AVX2_COPIES
    if (have_avx2()) {
        poison_avx2(dst, n, nan, st);
        return;
    }
#endif
    poison_impl(dst, n, nan, st);
}

/* A kind out of the table fills as the last one (special), as it always has; kvf_recipe_check
 * keeps such kinds out. */
void kvf__d2_fill(kvf_bf16 *dst, int64_t rows, int32_t row_len, const kvf_dist *d, kvf__d2 *st) {
    const int kind = d->kind < KVF_DIST_COUNT ? d->kind : KVF_DIST_SPECIAL;
#ifdef AVX2_COPIES
    if (have_avx2()) {
        fills_avx2[kind](dst, rows, row_len, d, st);
        return;
    }
#endif
    fills_plain[kind](dst, rows, row_len, d, st);
}
