/* Expansion 2's random words and value draws (docs/case-format.md, "Expansion 2"), internal to
 * the generator (gen_expand.c). A stream is four xoshiro256** lanes stepped together; word j of the
 * stream is lane j mod 4's output number j / 4. Every draw below consumes whole words in that
 * order, so the stream is one well-defined sequence however the words are computed.
 *
 * Ownership: the caller owns the kvf__d2 state (a plain struct, no allocation). Nothing here
 * fails. */
#ifndef KVFUZZ_GEN_DRAW2_H
#define KVFUZZ_GEN_DRAW2_H

#include <stdint.h>

#include "kvfuzz/bf16.h"
#include "kvfuzz/spec.h"

#define KVF__D2_LANES 4
#define KVF__D2_BUF 64 /* words computed ahead; a multiple of KVF__D2_LANES */

typedef struct kvf__d2 {
    uint64_t s[4][KVF__D2_LANES]; /* xoshiro256** state word k of lane l: s[k][l] */
    uint64_t buf[KVF__D2_BUF];    /* the next words of the stream, buf[pos..] */
    int pos;
} kvf__d2;

/* Lane l of the stream for `purpose` is kvf_prng_seed_stream(seed, 256 * purpose + l). */
void kvf__d2_seed(kvf__d2 *st, uint64_t seed, uint64_t purpose);

/* The next word of the stream. */
uint64_t kvf__d2_word(kvf__d2 *st);

/* Uniform integer in [0, n), 1 <= n <= 2^32 - 1: Lemire's multiply-shift on the low 32 bits
 * of a word, a rejected word replaced by the next. */
uint32_t kvf__d2_below(kvf__d2 *st, uint32_t n);

/* `rows` rows of `row_len` values of distribution d into dst (rows matter to one-hot only). */
void kvf__d2_fill(kvf_bf16 *dst, int64_t rows, int32_t row_len, const kvf_dist *d, kvf__d2 *st);

/* n filler values (finite, nonzero, +-[0.5, 1)): eight per word. */
void kvf__d2_filler(kvf_bf16 *dst, int64_t n, kvf__d2 *st);

/* n poison values: NaN with payloads 1..127 and either sign when `nan`, else +-inf. */
void kvf__d2_poison(kvf_bf16 *dst, int64_t n, int nan, kvf__d2 *st);

#endif
