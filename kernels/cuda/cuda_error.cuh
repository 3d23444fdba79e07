// CUDA errors as kvfuzz errors, shared by the kernels' host code (plan, launches) and the CUDA
// buffer host (host_*.cu): out of device memory is KVF_ENOMEM, any other error KVF_EDEVICE,
// each with the cudaError name so that the runner can tell a device fault from a launch error.
#ifndef KVFUZZ_CUDA_ERROR_CUH
#define KVFUZZ_CUDA_ERROR_CUH

#include <cuda_runtime.h>

extern "C" {
#include "kvfuzz/error.h" // a C header: its functions have C linkage
}

static inline int kvf__cuda_fail(kvf_error *err, cudaError_t e, const char *what) {
    if (e == cudaErrorMemoryAllocation)
        return kvf_error_set(err, KVF_ENOMEM, "%s: the device is out of memory (%s)", what,
                             cudaGetErrorName(e));
    return kvf_error_set(err, KVF_EDEVICE, "%s failed: %s (%s)", what, cudaGetErrorName(e),
                         cudaGetErrorString(e));
}

// Returns the kvfuzz error from the enclosing function (which has a kvf_error *err) when the
// call fails.
#define KVF_CUDA_TRY(call, what)                                                                   \
    do {                                                                                           \
        cudaError_t kvf_e_ = (call);                                                               \
        if (kvf_e_ != cudaSuccess) return kvf__cuda_fail(err, kvf_e_, what);                       \
    } while (0)

#endif
