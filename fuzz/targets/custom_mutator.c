/* libFuzzer's structure-aware hooks: LLVMFuzzerCustomMutator decodes the input, applies one to
 * three moves of kvf_spec_mutate (mutate.h) and encodes it again; LLVMFuzzerCustomCrossOver
 * mixes two cases. Inputs that do not decode are replaced by a fresh random case most of the
 * time (byte mutations of junk rarely become valid) and byte-mutated otherwise; a fixed share
 * of valid inputs is byte-mutated too (KVF_MUTATOR_BYTE_PERCENT), which is how the encoding's
 * own corners (overrides, explicit tensors, reserved bytes) get explored. Structured children
 * are written in the default expansion (KVF_EXPANSION_DEFAULT), whatever their parents'.
 * Compiled into libFuzzer builds only: it calls LLVMFuzzerMutate. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kvfuzz/mutate.h"
#include "kvfuzz/spec.h"

#ifndef KVF_MUTATOR_BYTE_PERCENT
#define KVF_MUTATOR_BYTE_PERCENT 10
#endif

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
size_t LLVMFuzzerCustomCrossOver(const uint8_t *d1, size_t s1, const uint8_t *d2, size_t s2,
                                 uint8_t *out, size_t max_out, unsigned int seed);

/* The decode targets link the harness, which owns the limits and takes the built case; the
 * decoder target does not, and uses the defaults. */
__attribute__((weak)) const kvf_limits *kvf_harness_case_limits(void);
__attribute__((weak)) const kvf_mutate_limits *kvf_harness_mutate_limits(void);
__attribute__((weak)) void kvf_harness_stash(const uint8_t *data, size_t size, kvf_case *c);

static void limits(const kvf_limits **cl, const kvf_mutate_limits **ml) {
    static kvf_limits dcl;
    static kvf_mutate_limits dml;
    static int init;
    if (!init) {
        kvf_limits_default(&dcl);
        kvf_mutate_limits_default(&dml);
        init = 1;
    }
    *cl = kvf_harness_case_limits ? kvf_harness_case_limits() : &dcl;
    *ml = kvf_harness_mutate_limits ? kvf_harness_mutate_limits() : &dml;
}

/* Encodes spec into out if it builds and fits; returns the size or 0. */
static size_t emit(kvf_spec *s, uint8_t *out, size_t max_size, const kvf_limits *cl,
                   const kvf_mutate_limits *ml) {
    kvf_case c;
    memset(&c, 0, sizeof c);
    /* Only overrides and explicit tensors can make a fitted spec invalid or pull NaN/inf into
     * the result; other specs go out unbuilt (the execution builds them once). The decoder
     * target wants cases the validator rejects too: no repair there. */
    int built = 0;
    if (kvf_harness_stash && (s->num_overrides || s->has_explicit)) {
        if (kvf_spec_repair(s, cl, ml->allow_nonfinite, &c, NULL)) return 0;
        built = 1;
    }
    uint8_t *bytes = NULL;
    size_t n = 0;
    if (kvf_spec_encode(s, &bytes, &n, NULL) || n > max_size) {
        kvf_case_free(&c);
        free(bytes);
        return 0;
    }
    memcpy(out, bytes, n);
    free(bytes);
    if (built) kvf_harness_stash(out, n, &c);
    return n;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
    const kvf_limits *cl;
    const kvf_mutate_limits *ml;
    limits(&cl, &ml);
    kvf_prng rng;
    kvf_prng_seed(&rng, (uint64_t)seed * 0x9E3779B97F4A7C15ull + 1);
    int bytewise = kvf_prng_below(&rng, 100) < KVF_MUTATOR_BYTE_PERCENT;
    kvf_spec s;
    if (kvf_spec_decode(&s, data, size, cl, NULL) == 0) {
        if (bytewise) {
            kvf_spec_free(&s);
            return LLVMFuzzerMutate(data, size, max_size);
        }
        /* Children are written in the default expansion, which draws the same laws several
         * times faster than expansion 1 (docs/case-format.md): a version 1 parent (the seed
         * corpus) has version 2 children. Set before the moves, which may read the values. */
        s.recipe.expansion = KVF_EXPANSION_DEFAULT;
        /* Fit first: a byte-mutated input can decode to a case far beyond the budget, and
         * some moves build the case they change. */
        kvf_spec_fit(&s, ml);
        int moves = 1 + (int)kvf_prng_below(&rng, 3);
        for (int i = 0; i < moves; i++)
            kvf_spec_mutate(&s, &rng, -1, ml, cl);
    } else {
        kvf_random_opts ro;
        kvf_mutate_random_opts(&ro, ml);
        if (bytewise || kvf_spec_random(&s, kvf_prng_next(&rng), &ro, NULL))
            return LLVMFuzzerMutate(data, size, max_size);
        kvf_spec_fit(&s, ml);
    }
    size_t n = emit(&s, data, max_size, cl, ml);
    kvf_spec_free(&s);
    return n ? n : LLVMFuzzerMutate(data, size, max_size);
}

size_t LLVMFuzzerCustomCrossOver(const uint8_t *d1, size_t s1, const uint8_t *d2, size_t s2,
                                 uint8_t *out, size_t max_out, unsigned int seed) {
    const kvf_limits *cl;
    const kvf_mutate_limits *ml;
    limits(&cl, &ml);
    kvf_spec a, b, mixed;
    if (kvf_spec_decode(&a, d1, s1, cl, NULL)) return 0;
    if (kvf_spec_decode(&b, d2, s2, cl, NULL)) {
        kvf_spec_free(&a);
        return 0;
    }
    kvf_prng rng;
    kvf_prng_seed(&rng, (uint64_t)seed * 0xD1B54A32D192ED03ull + 7);
    size_t n = 0;
    if (kvf_spec_crossover(&mixed, &a, &b, &rng, ml) == 0) {
        mixed.recipe.expansion = KVF_EXPANSION_DEFAULT; /* as the mutator's children */
        n = emit(&mixed, out, max_out, cl, ml);
        kvf_spec_free(&mixed);
    }
    kvf_spec_free(&a);
    kvf_spec_free(&b);
    return n;
}
