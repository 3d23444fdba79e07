/* Unit tests of the bf16/f32 helpers (core/src/bf16.c): round-to-nearest-even against MPFR
 * over an exhaustive class and against an integer reference over all 2^32 floats; truncation;
 * ulp sizes and ordered ulp distances on hand cases. Run one test by name: test_bf16 NAME. */
#include "check.h"

#include <float.h>
#include <mpfr.h>

#include "kvfuzz/bf16.h"
#include "kvfuzz/oracle.h"

/* Low halves that exercise every rounding situation: exact, just above/below the midpoint,
 * the midpoint itself (ties to even both ways through the high half's parity), the largest
 * and smallest remainders, and a few arbitrary ones. */
static const uint32_t low_halves[] = {0x0000u, 0x0001u, 0x0002u, 0x1234u, 0x3FFFu, 0x4000u,
                                      0x7FFEu, 0x7FFFu, 0x8000u, 0x8001u, 0x8002u, 0xBFFFu,
                                      0xC000u, 0xEDCBu, 0xFFFEu, 0xFFFFu};

/* MPFR's documented emulation of a binary format (precision 8, exponents [-132, 128] in MPFR's
 * convention, i.e. bf16 with subnormals down to 2^-133): round in a wide range, then
 * mpfr_check_range and mpfr_subnormalize with the format's range. A route independent of the
 * oracle's own rounding helper. */
static kvf_bf16 mpfr_emulated_bf16(float f) {
    mpfr_exp_t old_min = mpfr_get_emin(), old_max = mpfr_get_emax();
    mpfr_t y;
    mpfr_init2(y, 8);
    int inex = mpfr_set_flt(y, f, MPFR_RNDN);
    mpfr_set_emin(-132);
    mpfr_set_emax(128);
    inex = mpfr_check_range(y, inex, MPFR_RNDN);
    mpfr_subnormalize(y, inex, MPFR_RNDN);
    float r = mpfr_get_flt(y, MPFR_RNDN); /* exact: y has <= 8 bits and is a float */
    mpfr_set_emin(old_min);
    mpfr_set_emax(old_max);
    mpfr_clear(y);
    if (r == 0) return (kvf_bf16)(signbit(f) ? 0x8000u : 0x0000u);
    return (kvf_bf16)(kvf_f32_bits(r) >> 16);
}

/* Every high half (all signs, exponents, including 0 and 255, every stored mantissa of bf16)
 * times every low half above: 2^16 * 16 floats, each rounded by the fast path, by the oracle's
 * MPFR rounding of the same value as a double, and by MPFR's subnormal emulation. NaNs must stay
 * NaN with their sign, quieted, payload's high bits kept. */
static void test_rne_vs_mpfr_class(void) {
    long checked = 0;
    for (uint32_t hi = 0; hi <= 0xFFFFu; hi++) {
        for (size_t i = 0; i < sizeof low_halves / sizeof low_halves[0]; i++) {
            uint32_t u = (hi << 16) | low_halves[i];
            float f = kvf_f32_from_bits(u);
            kvf_bf16 fast = kvf_f32_to_bf16_rne(f);
            if (isnan(f)) {
                if (fast != (kvf_bf16)((u >> 16) | 0x0040u))
                    CHECK_FAIL_AT("NaN 0x%08x -> 0x%04x", u, fast);
                if (!kvf_bf16_is_nan(kvf_oracle_round_bf16((double)f)) ||
                    (kvf_oracle_round_bf16((double)f) >> 15) != (u >> 31))
                    CHECK_FAIL_AT("oracle NaN 0x%08x", u);
                continue;
            }
            kvf_bf16 ora = kvf_oracle_round_bf16((double)f);
            kvf_bf16 emu = mpfr_emulated_bf16(f);
            if (fast != ora || fast != emu) {
                CHECK_FAIL_AT("0x%08x (%a): fast 0x%04x, oracle 0x%04x, mpfr emulation 0x%04x", u,
                              (double)f, fast, ora, emu);
                if (check_failures > 20) return;
            }
            checked++;
        }
    }
    printf("checked %ld non-NaN floats three ways\n", checked);
}

/* Integer reference written from the definition: keep the high half, look at the dropped low
 * half, go up past the midpoint or at it when the kept half is odd. Carries out of the mantissa
 * are the step to the next binade (or to inf), which the bit layout gives for free. */
static kvf_bf16 ref_rne_bits(uint32_t u) {
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) return (kvf_bf16)((u >> 16) | 0x40u);
    uint32_t kept = u >> 16, dropped = u & 0xFFFFu;
    if (dropped > 0x8000u || (dropped == 0x8000u && (kept & 1u))) kept++;
    return (kvf_bf16)kept;
}

/* All 2^32 bit patterns against the integer reference (a few seconds). */
static void test_rne_full_sweep(void) {
    uint64_t mismatches = 0;
    uint32_t first = 0;
    uint32_t u = 0;
    do {
        kvf_bf16 got = kvf_f32_to_bf16_rne(kvf_f32_from_bits(u));
        if (got != ref_rne_bits(u)) {
            if (!mismatches) first = u;
            mismatches++;
        }
    } while (++u != 0);
    if (mismatches)
        CHECK_FAIL_AT("%llu mismatches, first at 0x%08x: got 0x%04x want 0x%04x",
                      (unsigned long long)mismatches, first,
                      kvf_f32_to_bf16_rne(kvf_f32_from_bits(first)), ref_rne_bits(first));
}

static void test_trunc_class(void) {
    for (uint32_t hi = 0; hi <= 0xFFFFu; hi++)
        for (size_t i = 0; i < sizeof low_halves / sizeof low_halves[0]; i++) {
            uint32_t u = (hi << 16) | low_halves[i];
            float f = kvf_f32_from_bits(u);
            kvf_bf16 want = isnan(f) ? (kvf_bf16)(hi | 0x40u) : (kvf_bf16)hi;
            if (kvf_f32_to_bf16_trunc(f) != want) {
                CHECK_FAIL_AT("trunc 0x%08x -> 0x%04x, want 0x%04x", u, kvf_f32_to_bf16_trunc(f),
                              want);
                return;
            }
        }
}

static void test_rne_hand_cases(void) {
    CHECK_HEX_EQ(kvf_f32_to_bf16_rne(1.0f), 0x3F80u);
    CHECK_HEX_EQ(kvf_f32_to_bf16_rne(1.0f + 0x1p-8f), 0x3F80u);            /* tie, down to even */
    CHECK_HEX_EQ(kvf_f32_to_bf16_rne(1.0f + 3 * 0x1p-8f), 0x3F82u);        /* tie, up to even */
    CHECK_HEX_EQ(kvf_f32_to_bf16_rne(1.0f + 0x1p-8f + 0x1p-23f), 0x3F81u); /* just above */
    CHECK_HEX_EQ(kvf_f32_to_bf16_rne(FLT_MAX), KVF_BF16_POS_INF);          /* overflow */
    CHECK_HEX_EQ(kvf_f32_to_bf16_rne(-FLT_MAX), KVF_BF16_NEG_INF);
    CHECK_HEX_EQ(kvf_f32_to_bf16_rne(0x1.fep127f), KVF_BF16_MAX);
    CHECK_HEX_EQ(kvf_f32_to_bf16_rne(-0.0f), 0x8000u);
    CHECK_HEX_EQ(kvf_f32_to_bf16_rne(0x1p-149f), 0x0000u); /* f32 subnormal below bf16's */
    CHECK_HEX_EQ(kvf_f32_to_bf16_rne(0x1p-133f), 0x0001u);
    CHECK_HEX_EQ(kvf_f32_to_bf16_rne(0x1.8p-133f), 0x0002u);  /* tie 3 * 2^-134, to even */
    CHECK_HEX_EQ(kvf_f32_to_bf16_rne(0x1p-134f), 0x0000u);    /* tie to 0 */
    CHECK_HEX_EQ(kvf_f32_to_bf16_rne(0x1.fep-127f), 0x0080u); /* rounds up into the normals */
}

static void test_ulp_sizes(void) {
    CHECK_DBL_EQ(kvf_bf16_ulp(1.0), 0x1p-7);
    CHECK_DBL_EQ(kvf_bf16_ulp(1.99), 0x1p-7);
    CHECK_DBL_EQ(kvf_bf16_ulp(2.0), 0x1p-6);
    CHECK_DBL_EQ(kvf_bf16_ulp(-3.0), 0x1p-6);
    CHECK_DBL_EQ(kvf_bf16_ulp(0.0), 0x1p-133);
    CHECK_DBL_EQ(kvf_bf16_ulp(0x1p-126), 0x1p-133);
    CHECK_DBL_EQ(kvf_bf16_ulp(0x1p-130), 0x1p-133); /* subnormal spacing */
    CHECK_DBL_EQ(kvf_bf16_ulp(0x1p127), 0x1p120);
    CHECK_DBL_EQ(kvf_bf16_ulp(1e300), 0x1p120); /* past the range: the largest binade's */
    CHECK_DBL_EQ(kvf_f32_ulp(1.0), 0x1p-23);
    CHECK_DBL_EQ(kvf_f32_ulp(0.75), 0x1p-24);
    CHECK_DBL_EQ(kvf_f32_ulp(0.0), 0x1p-149);
    CHECK_DBL_EQ(kvf_f32_ulp(0x1p-140), 0x1p-149);
    CHECK_DBL_EQ(kvf_f32_ulp(FLT_MAX), 0x1p104);
    CHECK_DBL_EQ(kvf_f32_ulp(-0x1p-126), 0x1p-149);
}

static void test_ulp_distances(void) {
    CHECK_INT_EQ(kvf_bf16_ulp_distance(0x3F80u, 0x3F81u), 1);
    CHECK_INT_EQ(kvf_bf16_ulp_distance(0x3F81u, 0x3F80u), 1);
    CHECK_INT_EQ(kvf_bf16_ulp_distance(0x3F7Fu, 0x3F80u), 1); /* across a binade */
    CHECK_INT_EQ(kvf_bf16_ulp_distance(0x0000u, 0x8000u), 0); /* -0 == +0 */
    CHECK_INT_EQ(kvf_bf16_ulp_distance(0x0001u, 0x8001u), 2);
    CHECK_INT_EQ(kvf_bf16_ulp_distance(KVF_BF16_MAX, KVF_BF16_POS_INF), 1);
    CHECK_INT_EQ(kvf_bf16_ulp_distance(KVF_BF16_NEG_INF, KVF_BF16_POS_INF), 2 * 0x7F80);
    CHECK_INT_EQ(kvf_bf16_ulp_distance(KVF_BF16_QNAN, 0xFFC1u), 0);
    CHECK_INT_EQ(kvf_bf16_ulp_distance(KVF_BF16_QNAN, 0x3F80u), -1);
    CHECK_INT_EQ(kvf_bf16_ulp_distance(0x3F80u, 0xBF80u), 2 * 0x3F80);
    CHECK_INT_EQ(kvf_f32_ulp_distance(1.0f, nextafterf(1.0f, 2.0f)), 1);
    CHECK_INT_EQ(kvf_f32_ulp_distance(0.0f, -0.0f), 0);
    CHECK_INT_EQ(kvf_f32_ulp_distance(0x1p-149f, -0x1p-149f), 2);
    CHECK_INT_EQ(kvf_f32_ulp_distance(FLT_MAX, INFINITY), 1);
    CHECK_INT_EQ(kvf_f32_ulp_distance(-INFINITY, INFINITY), 2 * (int64_t)0x7F800000);
    CHECK_INT_EQ(kvf_f32_ulp_distance(NAN, NAN), 0);
    CHECK_INT_EQ(kvf_f32_ulp_distance(NAN, 1.0f), -1);
    CHECK_INT_EQ(kvf_f32_ulp_distance(1.0f, 2.0f), 1 << 23);
}

static const check_test tests[] = {
    {"rne_hand_cases", test_rne_hand_cases},
    {"rne_vs_mpfr_class", test_rne_vs_mpfr_class},
    {"rne_full_sweep", test_rne_full_sweep},
    {"trunc_class", test_trunc_class},
    {"ulp_sizes", test_ulp_sizes},
    {"ulp_distances", test_ulp_distances},
    {NULL, NULL},
};

CHECK_MAIN(tests)
