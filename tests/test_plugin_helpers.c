/* Unit tests of the plugin authors' helper header (include/kvfuzz/plugin_helpers.h): its bf16
 * conversions against kvfuzz's own (core/src/bf16.c) over every high half and rounding path,
 * and on hand cases (ties, NaN quieting, infinities, subnormals, overflow), sequence lengths
 * (empty sequences, full last pages, lengths past 2^31), and row addressing with padded
 * strides, including an offset past 2^31 elements that an int32 computation would wrap. The
 * export macro is tested where it matters, in libraries built with -fvisibility=hidden
 * (tests/plugins/many.c, and cxx_helpers.cpp as C++, in tests/plugin_many_test.sh). */
#include "check.h"

#include <sys/mman.h>

#include "kvfuzz/bf16.h"
#include "kvfuzz/plugin_helpers.h"

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void test_bf16_hand_cases(void) {
    static const struct {
        uint32_t f32;
        uint16_t bf16;
    } cases[] = {
        {0x3f800000u, 0x3f80u}, /* 1.0, exact */
        {0x3f808000u, 0x3f80u}, /* a tie with an even kept half stays */
        {0x3f818000u, 0x3f82u}, /* a tie with an odd kept half goes up to even */
        {0x3f808001u, 0x3f81u}, /* just above the midpoint goes up */
        {0x3f807fffu, 0x3f80u}, /* just below stays */
        {0xbf818000u, 0xbf82u}, /* ties by magnitude for negatives too */
        {0x7f800000u, 0x7f80u}, /* +inf */
        {0xff800000u, 0xff80u}, /* -inf */
        {0x7f7fffffu, 0x7f80u}, /* the largest finite f32 rounds to +inf */
        {0x7f7f7fffu, 0x7f7fu}, /* below the midpoint to the largest bf16 stays finite */
        {0x7f7f8000u, 0x7f80u}, /* the tie there has an odd kept half: +inf */
        {0x00000001u, 0x0000u}, /* the smallest subnormal rounds to +0 */
        {0x00008000u, 0x0000u}, /* a subnormal tie, even kept half: +0 */
        {0x00018000u, 0x0002u}, /* a subnormal tie, odd kept half: up */
        {0x00008001u, 0x0001u}, /* above the midpoint: the smallest bf16 subnormal */
        {0x007fffffu, 0x0080u}, /* the largest subnormal rounds up to the smallest normal */
        {0x80000000u, 0x8000u}, /* -0 keeps its sign */
        {0x7fc00000u, 0x7fc0u}, /* a quiet NaN stays */
        {0x7f800001u, 0x7fc0u}, /* a signalling NaN with its payload in the dropped half */
        {0xff800001u, 0xffc0u}, /* the same, negative: the sign is kept */
        {0x7fa00000u, 0x7fe0u}, /* a signalling NaN keeps the top of its payload, quieted */
        {0x7fffffffu, 0x7fffu}, /* a NaN that would carry into the sign stays a NaN */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = kvf_plugin_f32_to_bf16(from_bits(cases[i].f32));
        if (got != cases[i].bf16)
            CHECK_FAIL_AT("f32 0x%08x: got bf16 0x%04x, want 0x%04x", cases[i].f32, got,
                          cases[i].bf16);
    }
    /* bf16 -> f32 is exact: the bf16 bits are the top half. */
    CHECK_HEX_EQ(to_bits(kvf_plugin_bf16_to_f32(0x0001u)), 0x00010000u); /* subnormal */
    CHECK_DBL_EQ(kvf_plugin_bf16_to_f32(0x0001u), ldexp(1.0, -133));
    CHECK_DBL_EQ(kvf_plugin_bf16_to_f32(0x7f80u), INFINITY);
    CHECK_DBL_EQ(kvf_plugin_bf16_to_f32(0xff80u), -INFINITY);
    CHECK(isnan(kvf_plugin_bf16_to_f32(0x7fc1u)));
    CHECK_HEX_EQ(to_bits(kvf_plugin_bf16_to_f32(0x8000u)), 0x80000000u);
    CHECK_DBL_EQ(kvf_plugin_bf16_to_f32(0x3f80u), 1.0);
}

/* Every high half (sign, exponent, kept mantissa: every binade, subnormals, infinities and
 * NaNs) with low halves that take every rounding path, against kvfuzz's conversion (which
 * test_bf16 checks against MPFR over all 2^32 patterns; all of them here took 8 s), and every
 * bf16 pattern through f32 and back. */
static void test_bf16_sweep(void) {
    static const uint32_t lows[] = {0x0000u, 0x0001u, 0x0002u, 0x1234u, 0x3fffu, 0x4000u,
                                    0x7ffeu, 0x7fffu, 0x8000u, 0x8001u, 0x8002u, 0xa5a5u,
                                    0xbfffu, 0xc000u, 0xfffeu, 0xffffu};
    uint64_t mismatches = 0;
    uint32_t first = 0;
    for (uint32_t high = 0; high <= 0xffffu; high++)
        for (size_t l = 0; l < sizeof lows / sizeof lows[0]; l++) {
            const uint32_t u = high << 16 | lows[l];
            const float f = from_bits(u);
            if (kvf_plugin_f32_to_bf16(f) != kvf_f32_to_bf16_rne(f)) {
                if (!mismatches) first = u;
                mismatches++;
            }
        }
    if (mismatches)
        CHECK_FAIL_AT("%llu f32 patterns convert unlike kvfuzz's, first 0x%08x: 0x%04x != 0x%04x",
                      (unsigned long long)mismatches, first,
                      kvf_plugin_f32_to_bf16(from_bits(first)),
                      kvf_f32_to_bf16_rne(from_bits(first)));
    for (uint32_t b = 0; b <= 0xffffu; b++) {
        const uint16_t back = kvf_plugin_f32_to_bf16(kvf_plugin_bf16_to_f32((uint16_t)b));
        /* A signalling NaN comes back quieted; everything else comes back as it was. */
        const int nan = (b & 0x7f80u) == 0x7f80u && (b & 0x7fu);
        const uint16_t want = nan ? (uint16_t)(b | 0x40u) : (uint16_t)b;
        if (back != want) {
            CHECK_FAIL_AT("bf16 0x%04x comes back as 0x%04x, want 0x%04x", b, back, want);
            return;
        }
    }
}

static void test_seq_len(void) {
    /* Page size 4: an empty sequence whose last-page length is junk, three pages with 2 in the
     * last, two full pages, an empty one at the end. */
    const int32_t indptr[] = {0, 0, 3, 5, 5}, indices[] = {9, 4, 7, 1, 2}, last[] = {7, 2, 4, 0};
    const int64_t want[] = {0, 10, 8, 0};
    kvf_plugin_shape shape;
    memset(&shape, 0, sizeof shape);
    shape.page_size = 4, shape.batch_size = 4, shape.num_qo_heads = 8, shape.num_kv_heads = 2;
    kvf_plugin_args a;
    memset(&a, 0, sizeof a);
    a.shape = &shape;
    a.kv_indptr = indptr, a.kv_indices = indices, a.kv_last_page_len = last;
    const kvf_plugin_index ix = {indptr, indices, last};
    for (int32_t b = 0; b < 4; b++) {
        CHECK_INT_EQ(kvf_plugin_seq_len(indptr, last, 4, b), want[b]);
        CHECK_INT_EQ(kvf_plugin_seq_len_args(&a, b), want[b]);
        CHECK_INT_EQ(kvf_plugin_seq_len_index(&ix, &shape, b), want[b]);
    }
    /* Tokens to pages: sequence 1's token 4 is the first of its second page (4), token 9 the
     * second of its third (7); sequence 2's last token is the fourth of page 2. */
    CHECK_INT_EQ(kvf_plugin_token_page(&a, 1, 0, 4), 9);
    CHECK_INT_EQ(kvf_plugin_token_page(&a, 1, 3, 4), 9);
    CHECK_INT_EQ(kvf_plugin_token_page(&a, 1, 4, 4), 4);
    CHECK_INT_EQ(kvf_plugin_token_page(&a, 1, 9, 4), 7);
    CHECK_INT_EQ(kvf_plugin_token_page(&a, 2, 7, 4), 2);
    /* GQA: 8 query heads over 2 KV heads. */
    CHECK_INT_EQ(kvf_plugin_kv_head(&shape, 0), 0);
    CHECK_INT_EQ(kvf_plugin_kv_head(&shape, 3), 0);
    CHECK_INT_EQ(kvf_plugin_kv_head(&shape, 4), 1);
    CHECK_INT_EQ(kvf_plugin_kv_head(&shape, 7), 1);
    /* A sequence longer than 2^31 tokens: the length is computed in 64 bits. */
    const int32_t big_indptr[] = {0, 2000000000}, big_last[] = {256};
    CHECK_INT_EQ(kvf_plugin_seq_len(big_indptr, big_last, 256, 0), 2000000000LL * 256);
}

static void test_rows(void) {
    /* Padded strides everywhere: q [2][3][4] in rows of 6, batches of 20; o likewise with other
     * pads; lse [2][3] in rows of 5; pools [P][S=2][Hk=2][D=4] with slot 10, head 5, page 23. */
    uint16_t q[40], o[64], k[3 * 23], v[3 * 23];
    float lse[10];
    const int32_t indptr[] = {0, 2}, indices[] = {2, 0}, last[] = {1};
    kvf_plugin_shape shape;
    memset(&shape, 0, sizeof shape);
    shape.page_size = 2, shape.head_dim = 4;
    kvf_plugin_args a;
    memset(&a, 0, sizeof a);
    a.shape = &shape;
    a.q = q, a.q_stride_batch = 20, a.q_stride_head = 6;
    a.o = o, a.o_stride_batch = 30, a.o_stride_head = 9;
    a.lse = lse, a.lse_stride_batch = 5;
    a.k_cache = k, a.v_cache = v;
    a.kv_stride_page = 23, a.kv_stride_slot = 10, a.kv_stride_head = 5;
    a.kv_indptr = indptr, a.kv_indices = indices, a.kv_last_page_len = last;
    CHECK_INT_EQ(kvf_plugin_q_row(&a, 0, 0) - q, 0);
    CHECK_INT_EQ(kvf_plugin_q_row(&a, 1, 2) - q, 20 + 12);
    CHECK_INT_EQ(kvf_plugin_o_row(&a, 1, 2) - o, 30 + 18);
    CHECK_INT_EQ(kvf_plugin_lse_at(&a, 1, 2) - lse, 5 + 2);
    CHECK_INT_EQ(kvf_plugin_k_row(&a, 2, 1, 1) - k, 46 + 10 + 5);
    CHECK_INT_EQ(kvf_plugin_v_row(&a, 2, 1, 1) - v, 46 + 10 + 5);
    /* Token 0 is page 2 slot 0; token 1 page 2 slot 1; token 2 page 0 slot 0. */
    CHECK_INT_EQ(kvf_plugin_k_token(&a, 0, 0, 1, 2) - k, 46 + 5);
    CHECK_INT_EQ(kvf_plugin_k_token(&a, 0, 1, 0, 2) - k, 46 + 10);
    CHECK_INT_EQ(kvf_plugin_v_token(&a, 0, 2, 1, 2) - v, 5);
}

/* b12x PR #45: a page stride of 1,077,120 elements put page 1,994 past 2^31 elements, and an
 * int32 offset wrapped. The pool here is an address range reserved but never touched, so the
 * rows are real addresses without 4 GiB of memory. */
static void test_rows_past_int32(void) {
    const int64_t stride = 1077120, page = 1994, slot = 3, head = 1;
    const size_t bytes = (size_t)(page + 1) * (size_t)stride * sizeof(uint16_t);
    void *pool = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (pool == MAP_FAILED) {
        CHECK_SKIP("cannot reserve %zu bytes of address space", bytes);
    }
    kvf_plugin_args a;
    memset(&a, 0, sizeof a);
    a.k_cache = a.v_cache = pool;
    a.kv_stride_page = stride, a.kv_stride_slot = 1024, a.kv_stride_head = 128;
    const int64_t want = page * stride + slot * 1024 + head * 128;
    CHECK(want > INT32_MAX);
    CHECK_INT_EQ(kvf_plugin_k_row(&a, page, slot, (int32_t)head) - a.k_cache, want);
    CHECK_INT_EQ(kvf_plugin_v_row(&a, page, slot, (int32_t)head) - a.v_cache, want);
    munmap(pool, bytes);
}

static const check_test tests[] = {
    {"bf16_hand_cases", test_bf16_hand_cases},
    {"bf16_sweep", test_bf16_sweep},
    {"seq_len", test_seq_len},
    {"rows", test_rows},
    {"rows_past_int32", test_rows_past_int32},
    {NULL, NULL},
};

CHECK_MAIN(tests)
