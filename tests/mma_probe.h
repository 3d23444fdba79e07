/* The bf16 tensor-core MMA of the H200 class (mma.sync m16n8k16, fp32 accumulator), run on
 * given operands for test_mma_model.c. Problems are row-major: A [n][16][16] bf16 bits (m × k),
 * B [n][16][8] (k × n), C and D [n][16][8] f32; the caller owns every array. Returns 0, or -1
 * with a sentence in `why` (no device, a CUDA error). */
#ifndef KVFUZZ_TESTS_MMA_PROBE_H
#define KVFUZZ_TESTS_MMA_PROBE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int kvf_test_mma_bf16(const uint16_t *A, const uint16_t *B, const float *C, float *D, int n,
                      char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
