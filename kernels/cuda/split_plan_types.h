/* The types of the split-KV plan (split_plan.h describes the plan, its schedule layout and
 * its contract). Apart from the function declarations so that a CUDA mutant's object
 * (cuda/mutants/decode_mutant.cu), which defines its own plan functions of the same names in a
 * namespace of its own, shares the types without seeing the production declarations: with
 * both in view, argument-dependent lookup would find two candidates for every call. */
#ifndef KVFUZZ_CUDA_SPLIT_PLAN_TYPES_H
#define KVFUZZ_CUDA_SPLIT_PLAN_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/cuda_kernels.h"
#include "split_item.h"

/* What the plan needs to know of the device and the kernel instance. */
typedef struct kvf__cuda_split_device {
    int32_t num_sms;           /* multiprocessors of the device, >= 1 */
    int32_t ctas_per_sm;       /* resident CTAs per SM of the split instance, >= 1 */
    int32_t tile_tokens;       /* tokens per tile of the instance, >= 1 */
    int32_t force_chunk_tiles; /* > 0: tiles per split (KVF_CUDA_CHUNK_TILES); else heuristic */
} kvf__cuda_split_device;

typedef struct kvf__cuda_split_plan {
    kvf_cuda_plan_info info; /* every field (num_sms, ctas_per_sm from the device) */
    int32_t n_items;         /* work items: blockIdx.x of the split kernel */
    int32_t *sched;          /* the schedule, sched_len entries (layout above) */
    size_t sched_len, items_at;
    kvf__split_form form; /* the schedule's arithmetic form (split_item.h), splits 0 if none */
    /* Workspace: [rows][D] floats of unnormalized outputs at 0, then [rows] (m, l) float pairs
     * at ws_ml_at (256-byte aligned); all 0 when no sequence has more than one split. */
    size_t ws_acc_bytes, ws_ml_at, ws_bytes;
} kvf__cuda_split_plan;

#endif
