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
uint64_t kvf_prng_next(kvf_prng *rng);
/* Uniform integer in [0, n) without modulo bias; n > 0. */
uint64_t kvf_prng_below(kvf_prng *rng, uint64_t n);
/* Uniform double in [0, 1) with 53 random bits. */
double kvf_prng_unit(kvf_prng *rng);
/* Approximately standard normal: the sum of four uniforms, centred and scaled to variance 1
 * (Irwin-Hall). Bounded by +-3.46, which keeps generated logits finite and the generator
 * exact; heavy tails come from the other distributions instead. */
double kvf_prng_normal(kvf_prng *rng);

/* 64-bit FNV-1a, for content hashes (finding names). */
uint64_t kvf_hash64(const void *data, uint64_t size);

#endif
