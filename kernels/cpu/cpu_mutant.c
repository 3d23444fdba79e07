/* One CPU mutant: compiled once per entry of kernels/mutants.def with KVF_MUT_ACTIVE
 * (KVF__MUT_<ID>, kernels/mutants.h), KVF_MUTANT_ID, KVF_MUTANT_NAME, KVF_MUTANT_CLASS and
 * KVF_MUTANT_DESC defined by the build. */
#define KVF_SPLITKV_FN cpu_mutant_run
#include "splitkv_algo.h"

#define KVF_CAT_(a, b) a##b
#define KVF_CAT(a, b) KVF_CAT_(a, b)

#include "kvfuzz/builtin_kernel.h"

static const kvf__case_kernel cpu_mutant_impl = {cpu_mutant_run, KVF_MUT(PAGE_STRIDE_IGNORED)};
static const kvf_plugin_kernel cpu_mutant_desc = KVF_BUILTIN_CPU_DESC_QUANT(
    "cpu-splitkv/mut=" KVF_MUTANT_NAME, KVF_MUTANT_DESC, cpu_mutant_impl);

const kvf_kernel KVF_CAT(kvf_kernel_cpu_mut_, KVF_MUTANT_ID) = {
    .name = "cpu-splitkv/mut=" KVF_MUTANT_NAME,
    .description = KVF_MUTANT_DESC,
    .device = KVF_DEVICE_CPU,
    .models = KVF_MUTANT_CLASS,
    .precision = KVF_MUT_DECLARED_PRECISION,
    .desc = &cpu_mutant_desc,
};
