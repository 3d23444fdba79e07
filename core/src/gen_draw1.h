/* Expansion 1's value draws (docs/case-format.md, "Expansion"), internal to the generator: the
 * expansion (gen_expand.c) calls them for every recipe whose expansion is 1. Each takes one
 * kvf_prng stream per purpose (gen_internal.h) and makes exactly the draws, in the order, that
 * version 1 files mean; expansion 2's draws are gen_draw2.h.
 *
 * Ownership: the caller owns the stream and the destination. Nothing here fails. */
#ifndef KVFUZZ_GEN_DRAW1_H
#define KVFUZZ_GEN_DRAW1_H

#include <stdint.h>

#include "kvfuzz/bf16.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/spec.h"

/* `rows` rows of `row_len` values of distribution d: each row draws its one-hot spike position,
 * then its elements in order. */
void kvf__d1_fill_rows(kvf_bf16 *dst, int64_t rows, int32_t row_len, const kvf_dist *d,
                       kvf_prng *rng);

/* n filler values for slots no sequence reads: finite, never zero, +-[0.5, 1), four per draw. */
void kvf__d1_filler(kvf_bf16 *dst, int64_t n, kvf_prng *rng);

/* Poison for n slots of both caches, k then v per element from one stream: NaN with varied
 * payloads and signs when `nan`, else +-inf when `inf`, else nothing is written. */
void kvf__d1_poison_pair(kvf_bf16 *kp, kvf_bf16 *vp, int64_t n, kvf_prng *rng, int nan, int inf);

#endif
