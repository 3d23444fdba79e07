// The CUDA plan object behind kvf_cuda_plan (cuda_kernels.h), shared by the production kernels
// (decode.cu, naive.cu) and every CUDA mutant (cuda/mutants/decode_mutant.cu): one type, one
// create/destroy (plan.cu), and the schedule's device state (split_schedule.cuh). What differs
// between the production kernel and a mutant, the plan's heuristic (split_plan_algo.h) and the
// launch (split_launch.cuh), is compiled per translation unit.
#ifndef KVFUZZ_CUDA_PLAN_CUH
#define KVFUZZ_CUDA_PLAN_CUH

#include <cuda_runtime.h>

#include "decode.cuh"
#include "kvfuzz/cuda_kernels.h"
#include "split_item.h"
#include "split_schedule.cuh"

struct kvf_cuda_plan {
    kvf_cuda_algo algo;
    int device, num_sms;
    // The prepared problem.
    int ready;
    int32_t Hq, Hk, D, S, B;
    float scale_log2;
    int32_t k_dtype, v_dtype, scale_gran; // kvf_cuda_problem's: FP8 caches and their scales
    int64_t num_pages;            // the pool's pages (B10's mutant folds its offsets into the pool)
    int32_t n_entries;            // kv_indptr[B] (B15's mutant clamps its extra page to the table)
    const kvf::SplitEntry *entry; // the split instance (D, G) of the translation unit's policy
    kvf_cuda_plan_info info;
    int32_t n_items;
    size_t items_at;      // where the work items start in the schedule (split_plan.h)
    kvf__split_form form; // the schedule's arithmetic form, if it has one (split_item.h)
    kvf__cuda_sched sched;
    // The split-KV partial states live in the caller's workspace (kvf_cuda_tensors): the
    // buffer host poisons and guards it like every other buffer a kernel writes.
    size_t ws_acc_bytes; // [rows][D] floats at offset 0, then [rows] float2 at ws_ml_at
    size_t ws_ml_at, ws_bytes;
    // cuda-naive's launch reads at most this many tokens of a sequence when > 0: only the
    // baked-max-seq-len mutant (cuda/mutants/naive_baked.cu) sets it, from the host's shape at
    // launch.
    int64_t naive_len_cap;
};

// Records the shape of a checked problem in p (not ready yet).
void kvf__cuda_plan_set_problem(kvf_cuda_plan *p, const kvf_cuda_problem *pr, float scale_log2);

// The checks every launch makes before enqueuing anything: 1 when there is nothing to launch
// (an empty batch), 0 to go on, else the KVF_EINVAL error (plan not prepared, a NULL tensor, a
// missing or misaligned workspace).
int kvf__cuda_plan_check_launch(const kvf_cuda_plan *p, const kvf_cuda_tensors *t, kvf_error *err);

// cuda-naive (naive.cu): prepares a checked problem; enqueues its kernel.
int kvf__cuda_naive_prepare(kvf_cuda_plan *p, const kvf_cuda_problem *pr);
int kvf__cuda_naive_launch(kvf_cuda_plan *p, const kvf_cuda_tensors *t, cudaStream_t st,
                           kvf_error *err);

#endif
