// Growing device and pinned buffers (device_buffer.cuh).
#include <cuda_runtime.h>

#include "device_buffer.cuh"

int kvf__cuda_dev_grow(void **buf, size_t *cap, size_t bytes, const char *what, kvf_error *err) {
    if (bytes <= *cap) return 0;
    if (*buf) cudaFree(*buf);
    *buf = NULL;
    *cap = 0;
    KVF_CUDA_TRY(cudaMalloc(buf, bytes), what);
    *cap = bytes;
    return 0;
}

int kvf__cuda_pinned_grow(void **buf, size_t *cap, size_t bytes, const char *what, kvf_error *err) {
    if (bytes <= *cap) return 0;
    if (*buf) cudaFreeHost(*buf);
    *buf = NULL;
    *cap = 0;
    KVF_CUDA_TRY(cudaMallocHost(buf, 2 * bytes), what);
    *cap = 2 * bytes;
    return 0;
}

int kvf__cuda_mapped_grow(void **buf, void **dev, size_t *cap, size_t bytes, const char *what,
                          kvf_error *err) {
    if (bytes <= *cap) return 0;
    if (*buf) cudaFreeHost(*buf);
    *buf = *dev = NULL;
    *cap = 0;
    KVF_CUDA_TRY(cudaHostAlloc(buf, 2 * bytes, cudaHostAllocMapped), what);
    const cudaError_t e = cudaHostGetDevicePointer(dev, *buf, 0);
    if (e != cudaSuccess) {
        cudaFreeHost(*buf);
        *buf = *dev = NULL;
        return kvf__cuda_fail(err, e, what);
    }
    *cap = 2 * bytes;
    return 0;
}
