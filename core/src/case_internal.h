/* Core-internal allocation for the generator (gen_expand.c). The generator writes every byte of a
 * small pool (every page of a pool up to 64 MiB is resident and written in full), so zeroing
 * it first, as kvf_case_alloc does, would only be undone. */
#ifndef KVFUZZ_CASE_INTERNAL_H
#define KVFUZZ_CASE_INTERNAL_H

#include "kvfuzz/case.h"

/* kvf_case_alloc, but caches that come from the heap (pool_bytes <= KVF_CASE_HEAP_POOL_BYTES)
 * are left unwritten when `zero_caches` is 0: the caller writes or zeroes all of them. */
int kvf__case_alloc(kvf_case *out, int32_t hq, int32_t hk, int32_t d, int32_t s, int32_t batch,
                    int64_t table_entries, int64_t num_pages, int zero_caches,
                    const kvf_limits *lim, kvf_error *err);

/* The scale arrays' limit, KVF_CASE_MAX_SCALES and max_pool_bytes / 4 entries each (KVF_ELIMIT
 * with one sentence): kvf_case_set_quant's check, which kvf_case_build also makes from the
 * pool's size before it allocates or writes anything. */
int kvf__case_scale_limit(int64_t n, const kvf_limits *lim, kvf_error *err);

#endif
