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

static inline uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

uint64_t kvf_prng_next(kvf_prng *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t kvf_prng_below(kvf_prng *rng, uint64_t n) {
    /* Rejection keeps every residue equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
        x = kvf_prng_next(rng);
    } while (x >= limit);
    return x % n;
}

double kvf_prng_unit(kvf_prng *rng) {
    return (double)(kvf_prng_next(rng) >> 11) * 0x1p-53;
}

double kvf_prng_normal(kvf_prng *rng) {
    /* Var(U) = 1/12, so four uniforms sum to variance 1/3; sqrt(3) rescales. The constant is
     * a literal so no sqrt() call (and no libm) is involved. */
    double s = kvf_prng_unit(rng) + kvf_prng_unit(rng) + kvf_prng_unit(rng) + kvf_prng_unit(rng);
    return (s - 2.0) * 1.7320508075688772;
}

uint64_t kvf_hash64(const void *data, uint64_t size) {
    const unsigned char *p = data;
    uint64_t h = 0xCBF29CE484222325ull;
    for (uint64_t i = 0; i < size; i++) {
        h ^= p[i];
        h *= 0x100000001B3ull;
    }
    return h;
}
