/* The deterministic generator of the fast-path tests (tests/test_oracle_fast.c,
 * tests/test_fastmath.c): xorshift64*, independent of core's PRNG; each file draws from a state
 * of its own, seeded alike. */
#ifndef KVFUZZ_TESTS_FAST_RNG_H
#define KVFUZZ_TESTS_FAST_RNG_H

#include <stdint.h>

static uint64_t rng_state = 0x2545F4914F6CDD1Du;
static inline uint64_t rng_next(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Du;
}
static inline double rng_unit(void) {
    return (double)(rng_next() >> 11) * 0x1p-53;
}

#endif
