// One CUDA mutant: the split-KV decode kernel (decode.cuh, decode.cu) with one deliberate bug.
// kernels/CMakeLists.txt compiles this file once per entry of kernels/mutants.def with
// KVF_MUTANT_<ID>, KVF_MUTANT_ID, KVF_MUTANT_NAME, KVF_MUTANT_CLASS and KVF_MUTANT_DESC defined;
// it registers as "cuda/mut=<name>".
//
// Why an include inside a namespace of the mutant's own (kvf_mut_<ID>): the mutant must run
// the production code path (descriptor, plan, split kernel, merge kernel, and the CUDA buffer
// host's NaN-poisoned device pools) with only the bug changed, and 26 objects holding the same
// templates and host functions must not collide with each other or with the production `cuda`
// object at link time (a weak template instance from another object could silently replace the
// production kernel). Only the kvf_kernel entry (its plugin-ABI descriptor) is meant to be used
// from outside. (Not an anonymous namespace: decode.cu opens one of its own, and nvcc's
// generated stub cannot tell two nested ones apart.)
//
// Build-time economy (a 2-core CI machine with nvcc but no GPU compiles 26 of these): only the
// head_dim 128 instances (groups 1..16) are compiled; other head dims are KVF_EUNSUPPORTED and
// the campaign finds the bug on its D = 128 cases.
#if !defined(KVF_MUTANT_ID) || !defined(KVF_MUTANT_NAME) || !defined(KVF_MUTANT_CLASS) ||          \
    !defined(KVF_MUTANT_DESC)
#error "the build defines KVF_MUTANT_ID, _NAME, _CLASS and _DESC for each mutant"
#endif
#define KVF_CUDA_MUTANT_TU 1

// Every header decode.cu and decode.cuh include, at global scope first, so that their own
// #include lines inside the namespace below expand to nothing (include guards).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/cuda_kernels.h"

#define KVF_CAT_(a, b) a##b
#define KVF_CAT(a, b) KVF_CAT_(a, b)

namespace KVF_CAT(kvf_mut_, KVF_MUTANT_ID) {
#include "../decode.cu"

// The instance table decode.cu's split_entry() reads: this mutant's kernel, D = 128.
KVF_SPLIT_TABLE(128);
} // namespace kvf_mut_<ID>
#define KVF_MUT_NS KVF_CAT(kvf_mut_, KVF_MUTANT_ID)

namespace KVF_MUT_NS {
static const kvf_plugin_kernel kDesc =
    KVF_CUDA_SPLIT_DESC("cuda/mut=" KVF_MUTANT_NAME,
                        KVF_MUTANT_DESC " (CUDA mutant of the split-KV kernel; head_dim 128 only)",
                        KVF_PLUGIN_ROLE_UNDER_TEST);
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
};
