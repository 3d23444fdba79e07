// One CUDA mutant: the split-KV decode kernel with one deliberate bug. kernels/CMakeLists.txt
// compiles this file once per entry of kernels/mutants.def with KVF_MUT_ACTIVE (KVF__MUT_<ID>,
// kernels/mutants.h), KVF_MUTANT_ID, KVF_MUTANT_NAME, KVF_MUTANT_CLASS and KVF_MUTANT_DESC
// defined; it registers as "cuda/mut=<name>".
//
// The mutant runs the production code path (descriptor, plan, split kernel, merge kernel, and
// the CUDA buffer host's NaN-poisoned device pools) with only the bug changed:
//   - the kernels are the production templates (decode.cuh, merge.cuh) instantiated with the
//     one-line policy MutantBug below instead of NoBug. Distinct template arguments give
//     distinct symbols, so no instance of one object can stand in for another's at link time;
//   - the plan (split_plan_algo.h), the launch (split_launch.cuh) and the descriptor functions
//     (decode_desc.cuh) are compiled again with this KVF_MUT_ACTIVE inside a namespace of the
//     mutant's own (kvf_mut_<ID>), so that 26 objects holding the same host functions collide
//     neither with each other nor with the production `cuda` object. Inside the namespace they
//     call this mutant's plan; the plan object, its schedule and the buffer helpers are the
//     production ones (plan.cu, split_schedule.cu, device_buffer.cu). (Not an anonymous
//     namespace: decode_desc.cuh opens one of its own.)
//
// Build-time economy (a 2-core CI machine with nvcc but no GPU compiles 26 of these): only the
// head_dim 128 instances (groups 1..16) are compiled; other head dims are KVF_EUNSUPPORTED and
// the campaign finds the bug on its D = 128 cases.
#if !defined(KVF_MUT_ACTIVE) || !defined(KVF_MUTANT_ID) || !defined(KVF_MUTANT_NAME) ||            \
    !defined(KVF_MUTANT_CLASS) || !defined(KVF_MUTANT_DESC)
#error "the build defines KVF_MUT_ACTIVE and KVF_MUTANT_ID, _NAME, _CLASS and _DESC per mutant"
#endif

// Every header the namespace's includes include, at global scope first, so that their own
// #include lines inside the namespace below expand to nothing (include guards): the types, the
// kernels and the production declarations stay global.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../mutants.h"
#include "../cuda_error.cuh"
#include "../decode.cuh"
#include "../merge.cuh"
#include "../plan.cuh"
#include "../split_plan_types.h" // not split_plan.h: the plan functions are this mutant's
#include "kvfuzz/cuda_kernels.h"

#define KVF_CAT_(a, b) a##b
#define KVF_CAT(a, b) KVF_CAT_(a, b)
#define KVF_MUT_NS KVF_CAT(kvf_mut_, KVF_MUTANT_ID)

using MutantBug = kvf::Bug<KVF_MUT_ACTIVE>; // this mutant's policy

namespace KVF_MUT_NS {
// The instance tables split_launch.cuh reads: this mutant's kernels, D = 128; the FP8 ones for
// an FP8 mutant only (the others refuse FP8 caches in the plan, so the bf16 table stands in).
KVF_SPLIT_TABLE(128, MutantBug);
#ifdef KVF_MUTANT_FP8
KVF_SPLIT_TABLE_OF(kvf_split_fp8_d128, 128, MutantBug, true);
#else
static const kvf::SplitEntry *const kvf_split_fp8_d128 = kvf_split_d128;
#endif

#include "../split_plan_algo.h"
#include "../split_launch.cuh"

// The prepare and launch decode_desc.cuh calls, as this mutant's: the split-KV path only (a
// mutant is a variant of the split-KV kernel).
static int plan_prepare(kvf_cuda_plan *p, const kvf_cuda_problem *pr, kvf_error *err) {
    p->ready = 0;
    const int rc = kvf__cuda_check_problem(pr, err);
    return rc ? rc : split_prepare(p, pr, err);
}

static int plan_launch(kvf_cuda_plan *p, const kvf_cuda_tensors *t, void *stream, kvf_error *err) {
    const int rc = kvf__cuda_plan_check_launch(p, t, err);
    if (rc) return rc < 0 ? rc : 0;
    return split_launch(p, t, (cudaStream_t)stream, err);
}

#include "../decode_desc.cuh"

static const kvf_plugin_kernel kDesc =
    KVF_CUDA_SPLIT_DESC("cuda/mut=" KVF_MUTANT_NAME,
                        KVF_MUTANT_DESC " (CUDA mutant of the split-KV kernel; head_dim 128 only)",
                        KVF_PLUGIN_ROLE_UNDER_TEST, KVF_MUT_FP8 ? KVF_CUDA_KV_DTYPES : 0,
                        KVF_MUT_FP8 ? KVF_CUDA_SCALES : 0);
} // namespace KVF_MUT_NS

// A registry entry with no case-level vtable: the mutant runs through the CUDA buffer host,
// as the production kernel and any plugin do (kernel.h).
extern "C" const kvf_kernel KVF_CAT(kvf_kernel_cuda_mut_, KVF_MUTANT_ID) = {
    "cuda/mut=" KVF_MUTANT_NAME,
    KVF_MUTANT_DESC " (CUDA mutant of the split-KV kernel; head_dim 128 only)",
    KVF_DEVICE_CUDA,
    KVF_MUTANT_CLASS,
    NULL,
    NULL,
    NULL,
    &KVF_MUT_NS::kDesc,
    KVF_PLUGIN_ROLE_UNDER_TEST,
    NULL,
    NULL,
    NULL,
    NULL,
    0,
    KVF_MUT_DECLARED_PRECISION,
};
