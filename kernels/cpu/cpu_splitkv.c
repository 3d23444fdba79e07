/* cpu-splitkv: the production split-KV algorithm (splitkv_algo.h) with no mutation. */
#define KVF_SPLITKV_FN cpu_splitkv_run
#include "splitkv_algo.h"

const kvf_kernel kvf_kernel_cpu_splitkv = {
    .name = "cpu-splitkv",
    .description = "split-KV online softmax in fp32: 32-token tiles, chunk states merged by lse",
    .device = KVF_DEVICE_CPU,
    .run = cpu_splitkv_run,
};
