/* Fixtures of the case-model tests (tests/test_spec_*.c, test_gen_*.c, test_case.c,
 * test_budget.c): the expansion the behavioural tests use and the macro that runs a test once
 * per expansion, default limits, small random recipes, encoding, case comparison, and the
 * offsets of the v1 header (docs/case-format.md). */
#ifndef KVFUZZ_TESTS_SPEC_FIXTURES_H
#define KVFUZZ_TESTS_SPEC_FIXTURES_H

#include <math.h>
#include <stdint.h>

#include "check.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/spec.h"

/* The expansion the behavioural tests below use (each runs once per expansion). */
static int g_expansion = KVF_EXPANSION_1;

static inline kvf_limits limits(void) {
    kvf_limits l;
    kvf_limits_default(&l);
    return l;
}

/* Small random recipes: the properties tested here do not depend on size, and the suite also
 * runs under AddressSanitizer. */
static inline kvf_random_opts small_random_opts(void) {
    kvf_random_opts o;
    kvf_random_opts_default(&o);
    o.max_work = 1 << 16;
    o.max_pages = 4;
    o.expansion = g_expansion;
    return o;
}

static inline void encode_or_fail(const kvf_spec *s, uint8_t **data, size_t *size) {
    kvf_error err = {0};
    CHECK_OK(kvf_spec_encode(s, data, size, &err), &err);
}

static inline int cases_equal(const kvf_case *a, const kvf_case *b) {
    if (a->num_qo_heads != b->num_qo_heads || a->num_kv_heads != b->num_kv_heads ||
        a->head_dim != b->head_dim || a->page_size != b->page_size ||
        a->batch_size != b->batch_size || a->num_pages != b->num_pages ||
        kvf_f32_bits(a->sm_scale) != kvf_f32_bits(b->sm_scale) ||
        a->num_resident_pages != b->num_resident_pages)
        return 0;
    if (memcmp(a->kv_indptr, b->kv_indptr, ((size_t)a->batch_size + 1) * 4) ||
        memcmp(a->kv_last_page_len, b->kv_last_page_len, (size_t)a->batch_size * 4) ||
        memcmp(a->kv_indices, b->kv_indices, (size_t)a->kv_indptr[a->batch_size] * 4) ||
        memcmp(a->q, b->q, (size_t)kvf_case_q_elems(a) * 2))
        return 0;
    int64_t pe = kvf_case_page_elems(a);
    for (int64_t i = 0; i < a->num_resident_pages; i++) {
        int64_t p = a->resident_pages[i];
        if (p != b->resident_pages[i] ||
            memcmp(a->k_cache + p * pe, b->k_cache + p * pe, (size_t)pe * 2) ||
            memcmp(a->v_cache + p * pe, b->v_cache + p * pe, (size_t)pe * 2))
            return 0;
    }
    return 1;
}

/* Offsets in the v1 header (docs/case-format.md). */
enum {
    OFF_VERSION = 4,
    OFF_SECTIONS = 5,
    OFF_RESERVED = 6,
    OFF_HQ = 8,
    OFF_HK = 9,
    OFF_D = 10,
    OFF_S = 12,
    OFF_B = 14,
    OFF_TABLE = 16,
    OFF_LOGITS = 17,
    OFF_POISON = 18,
    OFF_RES2 = 19,
    OFF_BASE = 20,
    OFF_SPARE = 24,
    OFF_RES3 = 26,
    OFF_SCALE = 28,
    OFF_QDIST = 32,
    OFF_KDIST = 35,
    OFF_VDIST = 38,
    OFF_RES4 = 41,
    OFF_SEED = 44,
    OFF_SEQS = 52
};

/* Each behavioural test once per expansion. */
#define BOTH_EXPANSIONS(name)                                                                      \
    static void name##_e1(void) {                                                                  \
        g_expansion = KVF_EXPANSION_1;                                                             \
        name();                                                                                    \
    }                                                                                              \
    static void name##_e2(void) {                                                                  \
        g_expansion = KVF_EXPANSION_2;                                                             \
        name();                                                                                    \
        g_expansion = KVF_EXPANSION_1;                                                             \
    }

#endif
