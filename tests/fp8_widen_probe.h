/* The split kernel's FP8 widenings (kernels/cuda/fp8.cuh) run on the device over given 32-bit
 * words, for test_fp8_widen.c. For each word w[i] (four FP8 bytes, the lowest first) and dtype
 * (0: e4m3, 1: e5m2), the probe writes 12 words at out[12 i]: the conversion path's bf16x4
 * (2 words), the fast path's bf16x4 (2), the conversion path's float4 bits (4), the fast path's
 * float4 bits (4); and special[i] = fp8x4_special(w[i]). The caller owns every array. Returns 0,
 * or -1 with a sentence in `why` (no device, a CUDA error). */
#ifndef KVFUZZ_TESTS_FP8_WIDEN_PROBE_H
#define KVFUZZ_TESTS_FP8_WIDEN_PROBE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int kvf_test_fp8_widen(const uint32_t *w, int n, int e5m2, uint32_t *out, uint32_t *special,
                       char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
