// What `kvfuzz bench` needs of the device: deterministic input fill, the read roofline, and
// the CUDA buffer host as kvfuzz/kernel_bench.h offers it (several kernels on one host's
// buffers, pools generated on the device, checked runs and bare launches).
//
// The roofline is the bandwidth a plain streaming read of the same number of bytes reaches in
// the same run: 16-byte loads, four independent ones in flight per thread, a grid of several
// blocks per SM, and an XOR checksum per block written out so the loads cannot be dropped.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>

#include "host_cuda_internal.cuh"
#include "kvfuzz/cuda_kernels.h"
#include "kvfuzz/kernel_bench.h"

namespace {

constexpr int kRoofThreads = 512;
constexpr int kRoofBlocksPerSm = 4;
constexpr int kRoofUnroll = 4;
constexpr int64_t kRoofMaxBlocks = 1024; // sink length; >= SMs * blocks per SM on an H200

__global__ void __launch_bounds__(kRoofThreads)
    roofline_kernel(const uint4 *src, int64_t n, uint32_t *sink) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    uint32_t x = 0;
    for (; i + (kRoofUnroll - 1) * stride < n; i += kRoofUnroll * stride) {
        uint4 w[kRoofUnroll];
#pragma unroll
        for (int u = 0; u < kRoofUnroll; ++u)
            w[u] = __ldcs(src + i + u * stride);
#pragma unroll
        for (int u = 0; u < kRoofUnroll; ++u)
            x ^= w[u].x ^ w[u].y ^ w[u].z ^ w[u].w;
    }
    for (; i < n; i += stride) {
        const uint4 w = __ldcs(src + i);
        x ^= w.x ^ w.y ^ w.z ^ w.w;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        x ^= __shfl_xor_sync(0xffffffffu, x, o);
    __shared__ uint32_t s[kRoofThreads / 32];
    if ((threadIdx.x & 31) == 0) s[threadIdx.x >> 5] = x;
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t y = 0;
        for (int w = 0; w < kRoofThreads / 32; ++w)
            y ^= s[w];
        sink[blockIdx.x] = y;
    }
}

// SplitMix64 finalizer: a good 64-bit mix, cheap, the same on every device.
__device__ __forceinline__ uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

__global__ void fill_bf16_kernel(uint16_t *dst, int64_t n, uint64_t seed, float scale) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const uint64_t h = mix64(seed ^ mix64((uint64_t)i));
        const float u = (float)(h >> 40) * (1.0f / 16777216.0f); // [0, 1), 24 bits
        const float x = (2.0f * u - 1.0f) * scale;
        dst[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x));
    }
}

__global__ void fill_fp8_kernel(uint8_t *dst, int64_t n, uint64_t seed, float scale, int e5m2) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const uint64_t h = mix64(seed ^ mix64((uint64_t)i));
        const float u = (float)(h >> 40) * (1.0f / 16777216.0f); // [0, 1), 24 bits
        const float x = (2.0f * u - 1.0f) * scale;
        dst[i] = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, e5m2 ? __NV_E5M2 : __NV_E4M3);
    }
}

int fail(kvf_error *err, cudaError_t e, const char *what) {
    return kvf_error_set(err, e == cudaErrorMemoryAllocation ? KVF_ENOMEM : KVF_EDEVICE,
                         "%s failed: %s.", what, cudaGetErrorString(e));
}

} // namespace

extern "C" int64_t kvf_cuda_roofline_sink_len(void) {
    return kRoofMaxBlocks;
}

extern "C" int kvf_cuda_roofline_launch(const void *dev, int64_t bytes, uint32_t *sink,
                                        void *stream, kvf_error *err) {
    if (!dev || !sink || bytes < 0)
        return kvf_error_set(err, KVF_EINVAL,
                             "The roofline needs a buffer, a sink and bytes >= 0.");
    int device = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (e != cudaSuccess) return fail(err, e, "Querying the device");
    const int64_t n = (bytes + 15) / 16;
    int64_t blocks = (int64_t)sms * kRoofBlocksPerSm;
    const int64_t need = (n + kRoofThreads - 1) / kRoofThreads;
    if (blocks > need) blocks = need > 0 ? need : 1;
    if (blocks > kRoofMaxBlocks) blocks = kRoofMaxBlocks;
    roofline_kernel<<<(unsigned)blocks, kRoofThreads, 0, (cudaStream_t)stream>>>((const uint4 *)dev,
                                                                                 n, sink);
    e = cudaGetLastError();
    return e == cudaSuccess ? 0 : fail(err, e, "Launching the roofline kernel");
}

extern "C" int kvf_cuda_fill_fp8(uint8_t *dev, int64_t n, uint64_t seed, float scale, int dtype,
                                 void *stream, kvf_error *err) {
    if (dtype != 1 && dtype != 2)
        return kvf_error_set(err, KVF_EINVAL, "FP8 fill of dtype %d (1 e4m3, 2 e5m2).", dtype);
    if (n <= 0) return 0;
    const int64_t blocks = (n + 255) / 256 < 65536 ? (n + 255) / 256 : 65536;
    fill_fp8_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(dev, n, seed, scale,
                                                                        dtype == 2);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : fail(err, e, "Launching the FP8 fill kernel");
}

extern "C" int kvf_cuda_fill_bf16(kvf_bf16 *dev, int64_t n, uint64_t seed, float scale,
                                  void *stream, kvf_error *err) {
    if (n <= 0) return 0;
    const int64_t blocks = (n + 255) / 256 < 65536 ? (n + 255) / 256 : 65536;
    fill_bf16_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(dev, n, seed, scale);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : fail(err, e, "Launching the fill kernel");
}

// ---- the buffer host for `kvfuzz bench` (kvfuzz/kernel_bench.h) -----------------------------

namespace kvf_cuda_host {

// Poisons what no sequence reads in generated pools: whole pages nobody references, tails of
// last pages.
static int poison_unread(Host *h, const kvf_case *c, kvf_error *err) {
    int rc = 0;
    int32_t *used = kvf__host_used_slots(c, (int64_t)INT32_MAX + 1, err);
    if (!used) return err ? err->code : KVF_ENOMEM;
    int64_t n = 0;
    for (int64_t p = 0; p < c->num_pages; ++p)
        if (used[p] < c->page_size) ++n;
    int64_t *ids = NULL;
    int32_t *cnt = NULL;
    void *d_tail = NULL;
    if (n > 0) {
        ids = (int64_t *)malloc((size_t)n * sizeof *ids);
        cnt = (int32_t *)malloc((size_t)n * sizeof *cnt);
        if (!ids || !cnt) rc = kvf_error_set(err, KVF_ENOMEM, "out of host memory");
        for (int64_t p = 0, i = 0; !rc && p < c->num_pages; ++p)
            if (used[p] < c->page_size) ids[i] = p, cnt[i++] = used[p];
        cudaError_t e = rc ? cudaSuccess : cudaMalloc(&d_tail, (size_t)n * 12);
        if (e == cudaSuccess && !rc)
            e = cudaMemcpy(d_tail, ids, (size_t)n * 8, cudaMemcpyHostToDevice);
        if (e == cudaSuccess && !rc)
            e = cudaMemcpy((char *)d_tail + (size_t)n * 8, cnt, (size_t)n * 4,
                           cudaMemcpyHostToDevice);
        if (e == cudaSuccess && !rc) {
            const int64_t page_vec = (int64_t)(h->page_bytes / 16);
            e = launch_poison_tails((const int64_t *)d_tail,
                                    (const int32_t *)((char *)d_tail + (size_t)n * 8), n, page_vec,
                                    page_vec / c->page_size, (uint4 *)h->d_k, (uint4 *)h->d_v,
                                    h->pool_word, h->stream);
        }
        if (e == cudaSuccess) e = cudaStreamSynchronize(h->stream);
        if (!rc && e != cudaSuccess) rc = kvf__cuda_fail(err, e, "Poisoning generated pools");
    }
    free(used);
    free(ids);
    free(cnt);
    if (d_tail) cudaFree(d_tail);
    return rc;
}

// kvf_bench_host_load_generated on the host itself.
static int load_generated(Host *h, const kvf_case *c, uint64_t seed, kvf_error *err) {
    (void)cudaGetLastError();
    h->loaded = 0;
    h->c = c;
    h->pools_known = 0;
    int rc = kvf__host_check_case(c, err);
    if (rc) return rc;
    kvf_kernel_shape(c, &h->shape);
    plan_slots(h, c);
    if ((rc = set_elements(h, c, err))) return rc;
    h->num_pages = c->num_pages;
    if (h->page_bytes % 16)
        return kvf_error_set(err, KVF_EUNSUPPORTED, "a page of %zu bytes is not a multiple of 16",
                             h->page_bytes);
    rc = read_pages(h, c, err);
    // Nothing to re-poison or write: the generator fills the pools. The page list goes up with
    // each run, for the checksums of a large pool.
    h->n_poison = h->n_scatter = 0;
    if (!rc) rc = layout(h, c, 0, 0, err);
    if (rc) return rc;
    build_images(h, c);
    write_lists(h, c, 1);
    const size_t pool = (size_t)c->num_pages * h->page_bytes;
    h->pool_touched = 1;
    h->pool_clean = 0; // generated values everywhere: no longer poison outside a page list
    rc = pools_reserve(h, pool, err);
    if (rc || pool == 0) return rc;
    if (h->fp8) {
        // Values up to 240 (e4m3's largest is 448), brought near U(-1, 1) by the case's scales
        // (bench_workload.c).
        if ((rc = kvf_cuda_fill_fp8((uint8_t *)h->d_k, (int64_t)pool, seed * 3 + 1, 240.0f,
                                    c->quant.k_dtype, h->stream, err)) ||
            (rc = kvf_cuda_fill_fp8((uint8_t *)h->d_v, (int64_t)pool, seed * 3 + 2, 240.0f,
                                    c->quant.v_dtype, h->stream, err)))
            return rc;
    } else {
        const int64_t elems = (int64_t)(pool / 2);
        if ((rc = kvf_cuda_fill_bf16((kvf_bf16 *)h->d_k, elems, seed * 3 + 1, 1.0f, h->stream,
                                     err)) ||
            (rc =
                 kvf_cuda_fill_bf16((kvf_bf16 *)h->d_v, elems, seed * 3 + 2, 1.0f, h->stream, err)))
            return rc;
    }
    if ((rc = poison_unread(h, c, err))) return rc;
    h->n_written = 0; // the pools are not clean: the next case poisons them whole
    KVF_CUDA_TRY(cudaStreamSynchronize(h->stream), "Generating the pools");
    h->loaded = 1;
    return 0;
}

} // namespace kvf_cuda_host

using namespace kvf_cuda_host;

struct kvf_bench_host {
    Host *host;
};

extern "C" int kvf_bench_host_create(const kvf_plugin_kernel *const *descs, int n,
                                     kvf_bench_host **out, kvf_error *err) {
    *out = NULL;
    if (n < 1) return kvf_error_set(err, KVF_EINVAL, "a CUDA host needs at least one kernel");
    Host *h = NULL;
    const int rc = host_create(descs, n, &h, err);
    if (rc) return rc;
    kvf_bench_host *b = (kvf_bench_host *)malloc(sizeof *b);
    if (!b) {
        kvf__cuda_host_destroy(h);
        return kvf_error_set(err, KVF_ENOMEM, "out of host memory for the CUDA buffer host");
    }
    b->host = h;
    *out = b;
    return 0;
}

extern "C" void kvf_bench_host_destroy(kvf_bench_host *b) {
    if (!b) return;
    kvf__cuda_host_destroy(b->host);
    free(b);
}

extern "C" int kvf_bench_host_load_generated(kvf_bench_host *b, const kvf_case *c, uint64_t seed,
                                             kvf_error *err) {
    return load_generated(b->host, c, seed, err);
}

extern "C" int kvf_bench_host_check(kvf_bench_host *b, int k, kvf_bf16 *o, float *lse,
                                    kvf_error *err) {
    Host *h = b->host;
    if (!h->loaded || k < 0 || k >= h->n)
        return kvf_error_set(err, KVF_EINVAL, "no inputs loaded, or no kernel %d", k);
    const int rc = checked_run(h, k, o, lse, err);
    if (rc && rc != KVF_EUNSUPPORTED) {
        (void)cudaStreamSynchronize(h->stream);
        (void)cudaGetLastError();
    }
    return rc;
}

extern "C" int kvf_bench_host_launch(kvf_bench_host *b, int k, kvf_error *err) {
    Host *h = b->host;
    if (!h->loaded || k < 0 || k >= h->n)
        return kvf_error_set(err, KVF_EINVAL, "no inputs loaded, or no kernel %d", k);
    Slot *s = &h->slots[k];
    if (s->rc) {
        if (err) *err = s->why;
        return s->rc;
    }
    kvf_plugin_args a;
    fill_args(h, s, &a);
    char msg[KVF_ERROR_MSG_MAX] = {0};
    const int rc =
        kvf__host_status(s->desc, s->desc->run(s->state, &a, msg, sizeof msg - 1), msg, "run", err);
    if (rc) return rc;
    KVF_CUDA_TRY(cudaGetLastError(), "Launching the kernel");
    return 0;
}

extern "C" void *kvf_bench_host_stream(kvf_bench_host *b) {
    return b->host->stream;
}

extern "C" void kvf_bench_host_describe(kvf_bench_host *b, int k, char *buf, size_t buf_size) {
    describe_slot(b ? b->host : NULL, k, buf, buf_size);
}
