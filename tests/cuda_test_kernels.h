/* Test-only CUDA kernel descriptors (tests/cuda_test_kernels.cu), each breaking one rule of the
 * buffer host: kept out of the registry so that no campaign runs them. */
#ifndef KVFUZZ_CUDA_TEST_KERNELS_H
#define KVFUZZ_CUDA_TEST_KERNELS_H

#include "kvfuzz/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const kvf_plugin_kernel kvf_test_cuda_unwritten;      /* KVF_EUNWRITTEN expected */
extern const kvf_plugin_kernel kvf_test_cuda_oob_o;          /* KVF_EOOBWRITE */
extern const kvf_plugin_kernel kvf_test_cuda_modify_k;       /* KVF_EINPUTMOD */
extern const kvf_plugin_kernel kvf_test_cuda_pdl;            /* correct: 0 */
extern const kvf_plugin_kernel kvf_test_cuda_sync;           /* correct eagerly; no graph capture */
extern const kvf_plugin_kernel kvf_test_cuda_huge_workspace; /* KVF_EKERNEL before allocating */
extern const kvf_plugin_kernel kvf_test_cuda_trap;           /* KVF_EDEVICE; the context is lost */

#ifdef __cplusplus
}
#endif

#endif
