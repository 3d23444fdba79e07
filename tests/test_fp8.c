/* Unit tests of the FP8 conversions (core/src/fp8.c): decoding against the formats' published
 * values, the bf16 image as a one-to-one map, and quantization against a brute-force nearest
 * value over every finite byte for every bf16 input. Run one test by name: test_fp8 NAME. */
#include "check.h"

#include "kvfuzz/fp8.h"

static void decodes_known_values(void) {
    CHECK_DBL_EQ(kvf_fp8_to_f32(0x38, KVF_KV_E4M3), 1.0);
    CHECK_DBL_EQ(kvf_fp8_to_f32(0x7E, KVF_KV_E4M3), 448.0);
    CHECK_DBL_EQ(kvf_fp8_to_f32(0xFE, KVF_KV_E4M3), -448.0);
    CHECK_DBL_EQ(kvf_fp8_to_f32(0x08, KVF_KV_E4M3), ldexp(1, -6));
    CHECK_DBL_EQ(kvf_fp8_to_f32(0x01, KVF_KV_E4M3), ldexp(1, -9));
    CHECK_DBL_EQ(kvf_fp8_to_f32(0x07, KVF_KV_E4M3), 7 * ldexp(1, -9));
    CHECK(isnan(kvf_fp8_to_f32(0x7F, KVF_KV_E4M3)) && isnan(kvf_fp8_to_f32(0xFF, KVF_KV_E4M3)));
    CHECK_DBL_EQ(kvf_fp8_to_f32(0x78, KVF_KV_E4M3), 256.0); /* S.1111.000 is a number */
    CHECK_DBL_EQ(kvf_fp8_to_f32(0x3C, KVF_KV_E5M2), 1.0);
    CHECK_DBL_EQ(kvf_fp8_to_f32(0x7B, KVF_KV_E5M2), 57344.0);
    CHECK_DBL_EQ(kvf_fp8_to_f32(0x01, KVF_KV_E5M2), ldexp(1, -16));
    CHECK_DBL_EQ(kvf_fp8_to_f32(0x04, KVF_KV_E5M2), ldexp(1, -14));
    CHECK(isinf(kvf_fp8_to_f32(0x7C, KVF_KV_E5M2)) && kvf_fp8_to_f32(0xFC, KVF_KV_E5M2) < 0);
    for (int x = 0x7D; x <= 0x7F; x++)
        CHECK(isnan(kvf_fp8_to_f32((uint8_t)x, KVF_KV_E5M2)));
    CHECK_DBL_EQ(kvf_fp8_max(KVF_KV_E4M3), 448.0);
    CHECK_DBL_EQ(kvf_fp8_max(KVF_KV_E5M2), 57344.0);
    CHECK(kvf_kv_dtype_parse("float8_e4m3fn") == KVF_KV_E4M3);
    CHECK(kvf_kv_dtype_parse("e5m2") == KVF_KV_E5M2);
    CHECK(kvf_kv_dtype_parse("e4m3fnuz") == -1);
}

/* Every byte has an image, the images are distinct, and each goes back to its byte; the image
 * of a number is its value. */
static void bf16_images_are_one_to_one(void) {
    for (int dt = KVF_KV_E4M3; dt <= KVF_KV_E5M2; dt++) {
        kvf_bf16 seen[256];
        for (int x = 0; x < 256; x++) {
            kvf_bf16 b = kvf_fp8_to_bf16((uint8_t)x, dt);
            float v = kvf_fp8_to_f32((uint8_t)x, dt);
            if (!isnan(v))
                CHECK_DBL_EQ(kvf_bf16_to_f32(b), v);
            else
                CHECK(kvf_bf16_is_nan(b));
            uint8_t back = 0;
            CHECK(kvf_fp8_from_bf16_exact(b, dt, &back));
            CHECK_HEX_EQ(back, x);
            for (int y = 0; y < x; y++)
                if (seen[y] == b)
                    CHECK_FAIL_AT("%s bytes 0x%02x and 0x%02x share image 0x%04x",
                                  kvf_kv_dtype_name(dt), y, x, b);
            seen[x] = b;
        }
    }
}

/* Images of nothing: values between FP8 values, below the smallest subnormal, past the
 * largest, bf16 NaNs that no byte names, infinity in e4m3. */
static void non_images_are_refused(void) {
    uint8_t x;
    CHECK(!kvf_fp8_from_bf16_exact(0x3F88, KVF_KV_E4M3, &x)); /* 1.0625: 4 mantissa bits */
    CHECK(kvf_fp8_from_bf16_exact(0x3F90, KVF_KV_E4M3, &x));  /* 1.125 */
    CHECK(!kvf_fp8_from_bf16_exact(0x3F90, KVF_KV_E5M2, &x)); /* 1.125 needs 3 bits */
    CHECK(!kvf_fp8_from_bf16_exact(0x3A80, KVF_KV_E4M3, &x)); /* 2^-10 */
    CHECK(!kvf_fp8_from_bf16_exact(0x43F0, KVF_KV_E4M3, &x)); /* 480 */
    CHECK(!kvf_fp8_from_bf16_exact(KVF_BF16_POS_INF, KVF_KV_E4M3, &x));
    CHECK(kvf_fp8_from_bf16_exact(KVF_BF16_POS_INF, KVF_KV_E5M2, &x) && x == 0x7C);
    CHECK(!kvf_fp8_from_bf16_exact(0x7F81, KVF_KV_E4M3, &x)); /* signalling NaN */
    CHECK(!kvf_fp8_from_bf16_exact(0x7FC0, KVF_KV_E5M2, &x)); /* names no e5m2 NaN byte */
    CHECK(!kvf_fp8_from_bf16_exact(0x7FC1, KVF_KV_E4M3, &x)); /* e4m3 has one NaN per sign */
}

/* The nearest finite value to a, ties to the even byte, saturating at the largest: by scanning
 * every finite byte of the format. */
static uint8_t brute_nearest(double a, int dt) {
    if (a >= kvf_fp8_max(dt)) return dt == KVF_KV_E4M3 ? 0x7E : 0x7B;
    int best = -1;
    double bestd = INFINITY;
    for (int x = 0; x < 0x80; x++) {
        double v = kvf_fp8_to_f32((uint8_t)x, dt);
        if (!isfinite(v)) continue;
        double dist = fabs(v - a);
        if (dist < bestd || (dist == bestd && !(x & 1))) {
            bestd = dist;
            best = x;
        }
    }
    return (uint8_t)best;
}

static void quantizes_to_nearest_even_saturating(void) {
    for (int dt = KVF_KV_E4M3; dt <= KVF_KV_E5M2; dt++) {
        for (uint32_t h = 0; h < 0x10000u; h++) {
            kvf_bf16 b = (kvf_bf16)h;
            float f = kvf_bf16_to_f32(b);
            uint8_t got = kvf_fp8_from_f32(f, dt);
            if (isnan(f)) {
                CHECK(isnan(kvf_fp8_to_f32(got, dt)));
                continue;
            }
            uint8_t want;
            if (isinf(f))
                want = dt == KVF_KV_E5M2 ? 0x7C : 0x7F;
            else
                want = brute_nearest(fabs((double)f), dt);
            want |= (uint8_t)(signbit(f) ? 0x80 : 0);
            if (got != want) {
                CHECK_FAIL_AT("%s of %a: 0x%02x, want 0x%02x", kvf_kv_dtype_name(dt), f, got, want);
                return;
            }
        }
    }
}

/* The midpoints between neighbours, f32 only (bf16 has too few bits for some): even wins. */
static void f32_midpoints_tie_to_even(void) {
    for (int dt = KVF_KV_E4M3; dt <= KVF_KV_E5M2; dt++) {
        for (int x = 0; x < 0x7E; x++) {
            double lo = kvf_fp8_to_f32((uint8_t)x, dt), hi = kvf_fp8_to_f32((uint8_t)(x + 1), dt);
            if (!isfinite(hi)) continue;
            float mid = (float)((lo + hi) / 2); /* exact: 5 significant bits */
            uint8_t want = (uint8_t)((x & 1) ? x + 1 : x);
            CHECK_HEX_EQ(kvf_fp8_from_f32(mid, dt), want);
            CHECK_HEX_EQ(kvf_fp8_from_f32(nextafterf(mid, 0), dt), x);
            CHECK_HEX_EQ(kvf_fp8_from_f32(nextafterf(mid, INFINITY), dt), x + 1);
        }
    }
}

static const check_test tests[] = {
    {"decodes_known_values", decodes_known_values},
    {"bf16_images_are_one_to_one", bf16_images_are_one_to_one},
    {"non_images_are_refused", non_images_are_refused},
    {"quantizes_to_nearest_even_saturating", quantizes_to_nearest_even_saturating},
    {"f32_midpoints_tie_to_even", f32_midpoints_tie_to_even},
    {NULL, NULL},
};

CHECK_MAIN(tests)
