/* What the generator's files share (core-internal): the purposes that key its random streams,
 * the one conversion of a double to bf16 its values go through, and the base recipe that presets
 * (gen_presets.c) and random recipes (gen_random.c) start from. Expansion (gen_expand.c) and
 * expansion 1's draws (gen_draw1.c) use the purposes and the conversion.
 *
 * The purposes are listed once so that no two streams of one seed can share a number: a new
 * purpose takes the next one. Renumbering one changes every case of every seed (the golden
 * hashes of tests/test_gen_hash.c catch it).
 *
 * Ownership: nothing here allocates. Errors: none (kvf__base_recipe writes fields only). */
#ifndef KVFUZZ_GEN_INTERNAL_H
#define KVFUZZ_GEN_INTERNAL_H

#include <stdint.h>

#include "kvfuzz/bf16.h"
#include "kvfuzz/spec.h"

/* Stream purposes: the second argument of kvf_prng_seed_stream (expansion 1, random recipes)
 * and of kvf__d2_seed (expansion 2). */
enum {
    KVF__STREAM_TABLE = 1, /* page-table layout */
    KVF__STREAM_Q,         /* q values */
    KVF__STREAM_K,         /* k values of used slots */
    KVF__STREAM_V,         /* v values of used slots */
    KVF__STREAM_POISON,    /* unused slots and unreferenced pages: poison or filler */
    KVF__STREAM_LOGITS,    /* logit patterns imposed through k */
    KVF__STREAM_PICK,      /* kvf_spec_random's choices */
    KVF__STREAM_LAYOUT,    /* kvf_spec_random's buffer layout */
    KVF__STREAM_SCALES,    /* the scales of quantized caches (gen_quant.c) */
    KVF__STREAM_QUANT      /* kvf_spec_random's quantization recipe */
};

/* kvf_f32_to_bf16_rne((float)x), inlined: the generator converts one value per element. The
 * same operations on the same bits (tests/test_gen_hash.c pins the result). */
static inline kvf_bf16 kvf__to_bf16(double x) {
    uint32_t u = kvf_f32_bits((float)x);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu))
        return (kvf_bf16)((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (kvf_bf16)(u >> 16);
}

/* The recipe every preset and random recipe starts from: the shape given, a shuffled table,
 * N(0, 1) values for q, k and v, sm_scale 1/sqrt(d), the default expansion. Leaves the batch
 * and the other fields as they are (zero in a fresh spec). */
void kvf__base_recipe(kvf_spec *s, uint64_t seed, int hq, int hk, int d, int page);

#endif
