// Device and pinned host buffers that grow on demand, shared by the CUDA buffer host
// (host_pools.cu: pools, staging, the mapped inputs and outputs) and the split plan's schedule
// (split_schedule.cu). Neither keeps the contents across a growth: callers refill the buffer.
// Errors: KVF_ENOMEM when CUDA is out of memory, KVF_EDEVICE otherwise (cuda_error.cuh), with
// `what` naming the buffer; on error *buf is NULL and *cap 0.
#ifndef KVFUZZ_CUDA_DEVICE_BUFFER_CUH
#define KVFUZZ_CUDA_DEVICE_BUFFER_CUH

#include <stddef.h>

#include "cuda_error.cuh"

// Grows a device buffer to at least `bytes` (exactly `bytes` when it has to grow).
int kvf__cuda_dev_grow(void **buf, size_t *cap, size_t bytes, const char *what, kvf_error *err);

// Grows a pinned host buffer to at least `bytes`; it allocates 2 x bytes, so that a slowly
// growing demand reallocates (and waits for the device) rarely.
int kvf__cuda_pinned_grow(void **buf, size_t *cap, size_t bytes, const char *what, kvf_error *err);

// Grows a pinned host buffer that kernels read and write in place (mapped; *dev is the device's
// address of it), like kvf__cuda_pinned_grow: a kernel reaching it spares a copy call and its
// latency when the bytes are few. On error *buf and *dev are NULL and *cap 0.
int kvf__cuda_mapped_grow(void **buf, void **dev, size_t *cap, size_t bytes, const char *what,
                          kvf_error *err);

#endif
