/* Shared helpers for the GPU tests (test_gpu_*.c): the skip when no usable CUDA device is
 * present, the random case count and seed base, the generator's options for small cases, one
 * run's outputs compared bit for bit, and the oracle on every core.
 *
 * Environment: KVF_GPU_CASES sets the random case count (default GPU_CASES_DEFAULT; a sanitizer
 * run uses a few dozen); the tests that draw generated cases scale their counts from it. */
#ifndef KVFUZZ_TESTS_GPU_FIXTURES_H
#define KVFUZZ_TESTS_GPU_FIXTURES_H

#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/spec.h"

/* Why 10,000: the generator draws the group (18 slots, 1..16 with 5 and 7 twice), the head
 * dim (3) and the page size (11 slots) independently, so the rarest (group, D, S) triple has
 * probability 1/594 per case; 10,000 cases miss a given triple with probability
 * (1 - 1/594)^10000 < 5e-8, so every triple of the grid is covered (asserted by test_gpu_sweep.c),
 * and every table kind, logit pattern, distribution and poison bit hundreds of times. The cases are
 * small (at most 4 sequences, 384 tokens) so the MPFR oracle, not the GPU, sets the pace. */
#define GPU_CASES_DEFAULT 10000
#define GPU_SEED_BASE 0x6b7666757a7a0000ull

static inline int gpu_skip_reason(char *why, size_t n) {
    return !kvf_cuda_available(why, n);
}

static inline long env_long(const char *name, long dflt, long lo, long hi) {
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "%s=\"%s\" is not an integer in [%ld, %ld]; using %ld\n", name, s, lo, hi,
                dflt);
        return dflt;
    }
    return v;
}

static inline void random_opts(kvf_random_opts *o) {
    kvf_random_opts_default(o);
    o->max_batch = 4;
    o->max_pages = 6;
    o->max_tokens = 384;   /* > 4 tiles of 64: several splits and merges per sequence */
    o->allow_overflow = 0; /* logits past f32 are their own finding class, not accuracy */
    o->allow_high_ids = 1;
    o->layouts = 0; /* the CUDA buffer host lays out dense buffers only */
}

/* One run's outputs (one spare element each, as everywhere in the tests). */
typedef struct run_outputs {
    kvf_bf16 *o;
    float *lse;
    size_t n_o, n_lse;
} run_outputs;

static inline run_outputs outputs_for(const kvf_case *c) {
    run_outputs r;
    r.n_o = (size_t)kvf_case_o_elems(c);
    r.n_lse = (size_t)kvf_case_lse_elems(c);
    r.o = malloc((r.n_o + 1) * sizeof *r.o);
    r.lse = malloc((r.n_lse + 1) * sizeof *r.lse);
    return r;
}

static inline int outputs_same_bits(const run_outputs *a, const run_outputs *b) {
    return memcmp(a->o, b->o, a->n_o * sizeof *a->o) == 0 &&
           memcmp(a->lse, b->lse, a->n_lse * sizeof *a->lse) == 0;
}

static inline void outputs_free(run_outputs *r) {
    free(r->o);
    free(r->lse);
}

/* The oracle's default options with a thread per online core. */
static inline kvf_oracle_opts oracle_on_every_core(void) {
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    oo.threads = (int)(online > 0 ? online : 4);
    return oo;
}

#endif
