/* The split-KV plan as a pure host function (no CUDA runtime): from the problem (the shape and
 * the host page-table metadata) and three numbers of the device (SMs, resident CTAs per SM of
 * the split instance, its tile), the split heuristic, the schedule of work items and the size
 * of the workspace the split and merge kernels (decode.cuh, merge.cuh) need. The CUDA plan
 * (split_launch.cuh) calls it after its occupancy query; tests/test_split_plan.c tests it built
 * with the plain C compiler.
 *
 * The production functions are built from split_plan_algo.h by split_plan.c (no mutant). A CUDA
 * mutant's object (cuda/mutants/decode_mutant.cu) compiles split_plan_algo.h again inside its
 * own namespace with its bug in, and never includes this header: these declarations name the
 * production plan only (the types are in split_plan_types.h).
 *
 * Schedule layout (int32): [B+1] seq_first (the number of items of the sequences before each;
 * entry B is the item count), zero-padded to a multiple of 4 entries (items_at), then per work
 * item 4 entries: sequence, kv_indptr[sequence], first token, end token | 1 << 31 when the item
 * is its sequence's only one (SplitParams::items). Every sequence has at least one item, so an
 * empty one is written too. Items come in sequence and token order, except when their CTAs
 * (items x kv heads) overflow one wave of slots: then longest first (by tiles, ties in that
 * order), so that the grid dispatches long CTAs before short ones. Either way split k of
 * sequence b (first token k x chunk_tokens) keeps its partial state in workspace row
 * seq_first[b] + k, where the merge kernel reads it. The items also have an arithmetic form
 * whenever every sequence has the same length and they are in sequence order (split_item.h).
 *
 * Ownership: kvf__cuda_split_build() mallocs plan->sched; kvf__cuda_split_free() frees it (and
 * is safe on a zeroed or freed plan). The problem's arrays are read during the call only.
 * Errors: 0 or a negative KVF_E* code with one sentence in err: KVF_EINVAL for malformed input,
 * KVF_EUNSUPPORTED for a shape or length the CUDA kernels do not implement, KVF_ENOMEM. */
#ifndef KVFUZZ_CUDA_SPLIT_PLAN_H
#define KVFUZZ_CUDA_SPLIT_PLAN_H

#include "split_plan_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The shape limits of the CUDA kernels (cuda_kernels.h); no page-table arrays read. */
int kvf__cuda_check_shape(const kvf_cuda_problem *pr, kvf_error *err);
/* The shape, then the page-table metadata: kv_indptr from 0 and monotone, last-page lengths in
 * [1, S] for non-empty sequences and [0, S] for empty ones, lengths <= KVF_CUDA_MAX_SEQ_LEN. */
int kvf__cuda_check_problem(const kvf_cuda_problem *pr, kvf_error *err);
/* fl(sm_scale * log2 e), rounded once from double: logits in base-2 units. */
float kvf__cuda_scale_log2(float sm_scale);
/* The group G of the split instance the launch runs (Hq / Hk). */
int32_t kvf__cuda_split_group(const kvf_cuda_problem *pr);
/* Checks the problem (kvf__cuda_check_problem), then plans it for `dev`. */
int kvf__cuda_split_build(const kvf_cuda_problem *pr, const kvf__cuda_split_device *dev,
                          kvf__cuda_split_plan *plan, kvf_error *err);
void kvf__cuda_split_free(kvf__cuda_split_plan *plan);

#ifdef __cplusplus
}
#endif

#endif
