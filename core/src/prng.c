#include "kvfuzz/prng.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void kvf_prng_seed(kvf_prng *rng, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&x);
}

void kvf_prng_seed_stream(kvf_prng *rng, uint64_t seed, uint64_t stream) {
    uint64_t x = stream * 0xD1B54A32D192ED03ull;
    kvf_prng_seed(rng, seed ^ splitmix64(&x));
}

/* The external definitions of the inline draws (prng.h). */
extern inline uint64_t kvf_prng_next(kvf_prng *rng);
extern inline uint64_t kvf_prng_below(kvf_prng *rng, uint64_t n);
extern inline double kvf_prng_unit(kvf_prng *rng);
extern inline double kvf_prng_normal(kvf_prng *rng);

uint64_t kvf_hash64(const void *data, uint64_t size) {
    const unsigned char *p = data;
    uint64_t h = 0xCBF29CE484222325ull;
    for (uint64_t i = 0; i < size; i++) {
        h ^= p[i];
        h *= 0x100000001B3ull;
    }
    return h;
}
