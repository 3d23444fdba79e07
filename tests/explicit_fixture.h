/* A spec holding explicit tensors, the way an imported workload arrives (tests/test_spec_codec.c,
 * test_fuzz_mutate.c): the spec's own generated case, its q, caches (bytes, FP8 or bf16) and
 * page table copied in as explicit tensors. The spec owns them (kvf_spec_free); the generated
 * case goes to *gen when gen is not NULL (the caller frees it), else is freed. */
#ifndef KVFUZZ_TESTS_EXPLICIT_FIXTURE_H
#define KVFUZZ_TESTS_EXPLICIT_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kvfuzz/spec.h"

static inline void give_explicit_tensors(kvf_spec *s, const kvf_limits *lim, kvf_case *gen_out) {
    kvf_case gen;
    kvf_error err = {0};
    CHECK_OK(kvf_case_build(&gen, s, lim, &err), &err);
    kvf_explicit *ex = &s->explicit_tensors;
    const int64_t entries = gen.kv_indptr[gen.batch_size];
    s->has_explicit = 1;
    ex->num_pages = gen.num_pages;
    ex->kv_indices = malloc((size_t)(entries > 0 ? entries : 1) * 4);
    ex->q = malloc((size_t)kvf_case_q_elems(&gen) * 2 + 2);
    ex->k_cache = malloc(gen.pool_bytes + 2);
    ex->v_cache = malloc(gen.pool_bytes + 2);
    if (!ex->kv_indices || !ex->q || !ex->k_cache || !ex->v_cache) abort();
    if (entries) memcpy(ex->kv_indices, gen.kv_indices, (size_t)entries * 4);
    memcpy(ex->q, gen.q, (size_t)kvf_case_q_elems(&gen) * 2);
    memcpy(ex->k_cache, gen.k_cache, gen.pool_bytes);
    memcpy(ex->v_cache, gen.v_cache, gen.pool_bytes);
    if (gen_out)
        *gen_out = gen;
    else
        kvf_case_free(&gen);
}

#endif
