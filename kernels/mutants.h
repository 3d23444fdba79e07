/* Mutant ids, one per entry of kernels/mutants.def (the one list), for the compile-time bug
 * tests of the split-KV algorithm: kernels/cpu/splitkv_algo.h, kernels/cuda/decode.cuh and
 * the CUDA plan and launch (kernels/cuda/split_*.h, split_host.cuh).
 *
 * A translation unit defines KVF_MUT_ACTIVE to the id of the mutant it compiles in before it
 * uses KVF_MUT: KVF__MUT_NONE in the production sources, KVF__MUT_<ID> (set by
 * kernels/CMakeLists.txt) in a mutant's object. KVF_MUT(X) is then an integer constant
 * expression, "mutant X is compiled in": every mutant branch is compiled (and type-checked) in
 * every build, and a production object folds all of them away, so it carries no trace of them
 * (docs/mutants.md). C and C++ (CUDA) share this header. */
#ifndef KVFUZZ_KERNELS_MUTANTS_H
#define KVFUZZ_KERNELS_MUTANTS_H

enum kvf__mut_id {
    KVF__MUT_NONE = 0,
#define KVF_MUTANT(ID, name, cls, desc) KVF__MUT_##ID,
#define KVF_MUTANT_CPU(ID, name, cls, desc) KVF__MUT_##ID,
#include "mutants.def"
#undef KVF_MUTANT
#undef KVF_MUTANT_CPU
    KVF__MUT_COUNT
};

#define KVF_MUT(X) ((int)(KVF_MUT_ACTIVE) == (int)KVF__MUT_##X)
/* Bugs that several mutants share: the bf16-P mutants round the weights as bf16-probs does (a
 * design they declare, kvf_kernel.precision) and add the bug under test on top. */
#define KVF_MUT_ROUNDS_P (KVF_MUT(BF16_PROBS) || KVF_MUT(BF16P_ACC) || KVF_MUT(BF16P_TRUNC_STORE))
#define KVF_MUT_BF16_ACC (KVF_MUT(BF16_ACC) || KVF_MUT(BF16P_ACC))
#define KVF_MUT_TRUNC_STORE (KVF_MUT(TRUNC_STORE) || KVF_MUT(BF16P_TRUNC_STORE))
/* The precision model a mutant declares (docs/precision.md): NULL (f32) but for the bf16-P
 * mutants, whose weights and denominator follow bf16-p-rsum by design. */
#define KVF_MUT_DECLARED_PRECISION                                                                 \
    ((KVF_MUT(BF16P_ACC) || KVF_MUT(BF16P_TRUNC_STORE)) ? "bf16-p-rsum" : (const char *)0)
/* The FP8 mutants (classes fp8-scale and fp8-decode): they take FP8 caches, the others bf16. */
#define KVF_MUT_FP8                                                                                \
    (KVF_MUT(V_SCALE_IGNORED) || KVF_MUT(K_SCALE_TWICE) || KVF_MUT(SCALE_Q_HEAD) ||                \
     KVF_MUT(TOKEN_SCALE_SLOT) || KVF_MUT(E4M3_AS_E5M2) || KVF_MUT(FP8_SUBNORMAL_FLUSH) ||         \
     KVF_MUT(V_SCALE_FP16_WEIGHTS))
/* Some mutant is compiled in (a mutant object, not a production one). */
#define KVF_MUT_ANY ((int)(KVF_MUT_ACTIVE) != (int)KVF__MUT_NONE)

#endif
