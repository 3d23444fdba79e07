/* cpu-splitkv: the production split-KV algorithm (splitkv_algo.h) with no mutation. */
#define KVF_SPLITKV_FN cpu_splitkv_run
#define KVF_MUT_ACTIVE KVF__MUT_NONE
#include "splitkv_algo.h"

#include "kvfuzz/builtin_kernel.h"

#define CPU_SPLITKV_DESCRIPTION                                                                    \
    "split-KV online softmax in fp32: 32-token tiles, chunk states merged by lse"
static const kvf__case_kernel cpu_splitkv_impl = {cpu_splitkv_run, 0};
static const kvf_plugin_kernel cpu_splitkv_desc =
    KVF_BUILTIN_CPU_DESC_QUANT("cpu-splitkv", CPU_SPLITKV_DESCRIPTION, cpu_splitkv_impl);

const kvf_kernel kvf_kernel_cpu_splitkv = {
    .name = "cpu-splitkv",
    .description = CPU_SPLITKV_DESCRIPTION,
    .device = KVF_DEVICE_CPU,
    .desc = &cpu_splitkv_desc,
    .role = KVF_PLUGIN_ROLE_REFERENCE,
};
