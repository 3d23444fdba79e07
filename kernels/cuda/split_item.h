/* The arithmetic form of a split schedule. When every sequence of a batch has the same length
 * (batch 1 among them), the plan's work items follow a formula of the item index alone, and the
 * split kernel computes its item instead of loading it: the load of the schedule would
 * otherwise come before the loads of q and of the first page ids, one more trip to memory on
 * the path to the first K/V bytes (docs/performance.md, "Work items by arithmetic").
 *
 * The plan (split_plan_algo.h) builds the schedule's table as always, then sets the form only
 * when the formula gives every item of that table exactly: the table stays the definition, and
 * the kernel's two ways of finding its item cannot disagree. Plain C with no state; the
 * function is compiled for the host and, under nvcc, for the device. */
#ifndef KVFUZZ_CUDA_SPLIT_ITEM_H
#define KVFUZZ_CUDA_SPLIT_ITEM_H

#include <stdint.h>

#ifdef __CUDACC__
#define KVF__HOST_DEVICE __host__ __device__ __forceinline__
#else
#define KVF__HOST_DEVICE static inline
#endif

/* A schedule in arithmetic form: item i is split i % splits of sequence i / splits. splits == 0
 * when the schedule has no such form (the table must be read). */
typedef struct kvf__split_form {
    int32_t splits;       /* items per sequence, or 0 */
    int32_t pages;        /* pages per sequence: sequence b's table starts at b * pages */
    int32_t len;          /* tokens per sequence */
    int32_t chunk_tokens; /* tokens per split */
    int32_t single;       /* 1 << 31 when each sequence is one item (split_plan.h), else 0 */
} kvf__split_form;

/* Item i of a schedule in form f (f.splits > 0), in the table's layout (split_plan.h):
 * sequence, kv_indptr[sequence], first token, end token | single. */
KVF__HOST_DEVICE void kvf__split_form_item(int32_t splits, int32_t pages, int32_t len,
                                           int32_t chunk_tokens, int32_t single, int32_t i,
                                           int32_t out[4]) {
    const int32_t b = i / splits, k = i - b * splits;
    const int64_t beg = (int64_t)k * chunk_tokens;
    const int64_t end = beg + chunk_tokens < len ? beg + chunk_tokens : len;
    out[0] = b;
    out[1] = b * pages;
    out[2] = (int32_t)beg;
    out[3] = (int32_t)((uint32_t)(end > beg ? end : beg) | (uint32_t)single);
}

#endif
