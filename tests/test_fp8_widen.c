/* The split kernel's two FP8 widenings (kernels/cuda/fp8.cuh) on the device against the host's
 * decoding (kvfuzz/fp8.h), for every byte in every position of a word and every pair of
 * adjacent bytes, e4m3 and e5m2: the conversion path gives every byte's value (NaN for NaN,
 * e5m2's infinities, both zeros, the subnormals); fp8x4_special flags exactly the words holding
 * a byte the fast path does not widen; on every other word the fast path gives the same bits as
 * the conversion path. Skips (exit 77) without a CUDA device. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "fp8_widen_probe.h"
#include "kvfuzz/fp8.h"

enum { kWords = 2 * 65536 };

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Whether the byte's widened f32 bits are its value: the same bits, or NaN for NaN. */
static int widened_is(uint32_t bits, uint8_t byte, int dtype) {
    const float want = kvf_fp8_to_f32(byte, dtype);
    float got;
    memcpy(&got, &bits, 4);
    if (isnan(want)) return isnan(got) && signbit(got) == signbit(want);
    return bits == f32_bits(want);
}

static int byte_special(uint8_t b, int dtype) {
    return dtype == KVF_KV_E4M3 ? (b & 0x7F) == 0x7F : (b & 0x7C) == 0x7C;
}

static void run_dtype(int dtype, uint32_t *w, uint32_t *out, uint32_t *special, int *skip) {
    /* Every 16-bit pattern in the low half, and (its image under an odd multiplier, a
     * bijection) in the high half; then the halves swapped. */
    for (uint32_t i = 0; i < 65536; i++) {
        const uint32_t other = (i * 40503u + 12345u) & 0xFFFFu;
        w[i] = i | other << 16;
        w[65536 + i] = other | i << 16;
    }
    char why[256];
    if (kvf_test_fp8_widen(w, kWords, dtype == KVF_KV_E5M2, out, special, why, sizeof why) != 0) {
        printf("no usable CUDA device: %s\n", why);
        *skip = 1;
        return;
    }
    long bad_conv = 0, bad_special = 0, bad_fast = 0, fast_words = 0;
    for (int i = 0; i < kWords; i++) {
        const uint32_t *o = out + (size_t)i * 12;
        int any = 0;
        for (int k = 0; k < 4; k++) {
            const uint8_t b = (uint8_t)(w[i] >> (8 * k));
            any |= byte_special(b, dtype);
            const uint32_t bf = (o[k >> 1] >> (16 * (k & 1))) & 0xFFFFu;
            if (!widened_is(o[4 + k], b, dtype) || !widened_is(bf << 16, b, dtype)) {
                if (bad_conv++ < 5)
                    printf("dtype %d byte 0x%02x: conversion gives f32 0x%08x, bf16 0x%04x\n",
                           dtype, b, o[4 + k], bf);
            }
        }
        if ((special[i] != 0) != any && bad_special++ < 5)
            printf("dtype %d word 0x%08x: special %08x, expected %d\n", dtype, w[i], special[i],
                   any);
        if (any) continue;
        fast_words++;
        if (memcmp(o, o + 2, 8) != 0 || memcmp(o + 4, o + 8, 16) != 0) {
            if (bad_fast++ < 5)
                printf("dtype %d word 0x%08x: fast bf16 %08x %08x, conversion %08x %08x\n", dtype,
                       w[i], o[2], o[3], o[0], o[1]);
        }
    }
    printf("dtype %s: %d words, %ld through the fast path\n",
           dtype == KVF_KV_E4M3 ? "e4m3" : "e5m2", kWords, fast_words);
    CHECK_INT_EQ(bad_conv, 0);
    CHECK_INT_EQ(bad_special, 0);
    CHECK_INT_EQ(bad_fast, 0);
    CHECK(fast_words > kWords / 2);
}

static void every_byte(void) {
    uint32_t *w = malloc(kWords * 4), *out = malloc((size_t)kWords * 48),
             *special = malloc(kWords * 4);
    if (!w || !out || !special) {
        CHECK_FAIL_AT("out of memory");
    } else {
        int skip = 0;
        run_dtype(KVF_KV_E4M3, w, out, special, &skip);
        if (!skip) run_dtype(KVF_KV_E5M2, w, out, special, &skip);
        if (skip) CHECK_SKIP("no usable CUDA device");
    }
    free(w), free(out), free(special);
}

static const check_test tests[] = {{"every_byte", every_byte}, {NULL, NULL}};
CHECK_MAIN(tests)
