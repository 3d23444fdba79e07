/* The registry of kernels under test: CPU kernels always, CUDA kernels when built with CUDA.
 * Mutant families (compile-time variants of the production algorithms) append their tables
 * here; the production kernels themselves carry no trace of them. */
#include <stdio.h>
#include <string.h>

#include "kvfuzz/kernel.h"

extern const kvf_kernel kvf_kernel_cpu_ref;
extern const kvf_kernel kvf_kernel_cpu_splitkv;
#define KVF_MUTANT(id, name, cls, desc) extern const kvf_kernel kvf_kernel_cpu_mut_##id;
#define KVF_MUTANT_CPU KVF_MUTANT
#include "mutants.def"
#undef KVF_MUTANT
#undef KVF_MUTANT_CPU
#ifdef KVF_HAVE_CUDA
extern const kvf_kernel kvf_kernel_cuda;
extern const kvf_kernel kvf_kernel_cuda_naive;
extern const kvf_kernel kvf_kernel_cuda_naive_mut_baked_max_seq_len;
/* Defined by the CUDA library: 1 if a device is usable, else 0 with the reason. */
int kvf_cuda_runtime_available(char *why, size_t why_size);
#endif
#if defined(KVF_HAVE_CUDA) && defined(KVF_HAVE_CUDA_MUTANTS)
#define KVF_MUTANT_CPU(id, name, cls, desc) /* no CUDA twin */
#define KVF_MUTANT(id, name, cls, desc) extern const kvf_kernel kvf_kernel_cuda_mut_##id;
#include "mutants.def"
#undef KVF_MUTANT
#undef KVF_MUTANT_CPU
#endif

static const kvf_kernel *const kernels[] = {
    &kvf_kernel_cpu_ref, &kvf_kernel_cpu_splitkv,
#ifdef KVF_HAVE_CUDA
    &kvf_kernel_cuda,    &kvf_kernel_cuda_naive,  &kvf_kernel_cuda_naive_mut_baked_max_seq_len,
#endif
#define KVF_MUTANT(id, name, cls, desc) &kvf_kernel_cpu_mut_##id,
#define KVF_MUTANT_CPU KVF_MUTANT
#include "mutants.def"
#undef KVF_MUTANT
#undef KVF_MUTANT_CPU
#if defined(KVF_HAVE_CUDA) && defined(KVF_HAVE_CUDA_MUTANTS)
#define KVF_MUTANT_CPU(id, name, cls, desc) /* no CUDA twin */
#define KVF_MUTANT(id, name, cls, desc) &kvf_kernel_cuda_mut_##id,
#include "mutants.def"
#undef KVF_MUTANT
#undef KVF_MUTANT_CPU
#endif
};

size_t kvf_kernel_count(void) {
    return sizeof kernels / sizeof kernels[0];
}

const kvf_kernel *kvf_kernel_at(size_t i) {
    return i < kvf_kernel_count() ? kernels[i] : NULL;
}

const kvf_kernel *kvf_kernel_find(const char *name) {
    for (size_t i = 0; i < kvf_kernel_count(); i++)
        if (strcmp(kernels[i]->name, name) == 0) return kernels[i];
    return NULL;
}

int kvf_cuda_available(char *why, size_t why_size) {
#ifdef KVF_HAVE_CUDA
    return kvf_cuda_runtime_available(why, why_size);
#else
    if (why && why_size) snprintf(why, why_size, "kvfuzz was built without CUDA (no nvcc found)");
    return 0;
#endif
}
