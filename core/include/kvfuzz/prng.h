/* Deterministic pseudo-random numbers that give the same bits on every machine: integer
 * generators (SplitMix64 seeding xoshiro256**) and distributions built only from IEEE-exact
 * operations (+, *, ldexp) so no libm version difference can change a generated case.
 * State is a plain struct owned by the caller. Nothing here fails or allocates. */
#ifndef KVFUZZ_PRNG_H
#define KVFUZZ_PRNG_H

#include <stdint.h>

typedef struct kvf_prng {
    uint64_t s[4];
} kvf_prng;

void kvf_prng_seed(kvf_prng *rng, uint64_t seed);
/* Independent stream for a named purpose (e.g. "q", "k") derived from one seed. */
void kvf_prng_seed_stream(kvf_prng *rng, uint64_t seed, uint64_t stream);
/* The draws below are inline (C99 inline definitions; core/src/prng.c holds the external
 * ones): the generator makes one or more per tensor element, and inlined, a constant n in
 * kvf_prng_below becomes a multiplication. */
inline uint64_t kvf_prng_next(kvf_prng *rng) {
    /* xoshiro256** */
    uint64_t *s = rng->s;
    uint64_t x = s[1] * 5;
    uint64_t result = ((x << 7) | (x >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}

/* Uniform integer in [0, n) without modulo bias; n > 0. */
inline uint64_t kvf_prng_below(kvf_prng *rng, uint64_t n) {
    /* Rejection keeps every residue equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
        x = kvf_prng_next(rng);
    } while (x >= limit);
    return x % n;
}

/* Uniform double in [0, 1) with 53 random bits. */
inline double kvf_prng_unit(kvf_prng *rng) {
    return (double)(kvf_prng_next(rng) >> 11) * 0x1p-53;
}

/* Approximately standard normal: the sum of four uniforms, centred and scaled to variance 1
 * (Irwin-Hall). Bounded by +-3.46, which keeps generated logits finite and the generator
 * exact; heavy tails come from the other distributions instead. */
inline double kvf_prng_normal(kvf_prng *rng) {
    /* Var(U) = 1/12, so four uniforms sum to variance 1/3; sqrt(3) rescales. The constant is
     * a literal so no sqrt() call (and no libm) is involved. The sum is taken left to right. */
    double s = kvf_prng_unit(rng) + kvf_prng_unit(rng);
    s = s + kvf_prng_unit(rng);
    s = s + kvf_prng_unit(rng);
    return (s - 2.0) * 1.7320508075688772;
}

/* 64-bit FNV-1a, for content hashes (finding names). */
uint64_t kvf_hash64(const void *data, uint64_t size);

#endif
