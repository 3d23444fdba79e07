// The CUDA buffer host's device check kernels (host_cuda_internal.cuh): the prepare kernel
// before a run and the post kernel after it (cooperative launches), and the page poison,
// scatter, fill and count kernels around them, with the one launch of each that the host's
// other files call. Nothing here allocates, copies or synchronizes.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <stdint.h>

#include "host_cuda_internal.cuh"

namespace kvf_cuda_host {
namespace {

namespace cg = cooperative_groups;

__device__ unsigned long long mix64(unsigned long long z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Position-dependent hash of one vector: equal sums before and after mean, but for a 2^-64
// chance, that no vector changed and none moved.
__device__ unsigned long long vec_hash(uint4 x, unsigned long long at) {
    const unsigned long long lo = x.x | (unsigned long long)x.y << 32;
    const unsigned long long hi = x.z | (unsigned long long)x.w << 32;
    return mix64(lo ^ (at * 0x9e3779b97f4a7c15ull)) + mix64(hi ^ (at * 0xc2b2ae3d27d4eb4full + 1));
}

__device__ unsigned long long warp_sum_u64(unsigned long long x) {
    for (int o = 16; o > 0; o >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// Checksums of both pools (the pages listed, or the whole pools) and of `in`, by the blocks of
// one row of the grid (blockIdx.x) in one grid-stride loop; threads per block are 256.
__device__ void checksum(const CheckParams &p, unsigned long long *dst) {
    const int64_t total = p.whole_vecs > 0 ? p.whole_vecs : p.n_ids * p.page_vec;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t i0 = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    unsigned long long h[3] = {0, 0, 0};
    for (int64_t i = i0; i < total; i += stride) {
        int64_t at = i;
        if (p.whole_vecs <= 0) {
            const int64_t page = i / p.page_vec;
            at = p.ids[page] * p.page_vec + (i - page * p.page_vec);
        }
        h[0] += vec_hash(p.k[at], (unsigned long long)at);
        h[1] += vec_hash(p.v[at], (unsigned long long)at);
    }
    for (int64_t i = i0; i < p.in_vecs; i += stride)
        h[2] += vec_hash(p.in[i], (unsigned long long)i);
    // One atomic per sum and block: thousands on one address would serialize in L2.
    __shared__ unsigned long long s_h[3][8];
    const int warp = threadIdx.x >> 5;
    for (int j = 0; j < 3; ++j) {
        h[j] = warp_sum_u64(h[j]);
        if ((threadIdx.x & 31) == 0) s_h[j][warp] = h[j];
    }
    __syncthreads();
    if (threadIdx.x == 0) // holds warp 0's sums
        for (int j = 0; j < 3; ++j) {
            for (int w = 1; w < (int)(blockDim.x >> 5); ++w)
                h[j] += s_h[j][w];
            if (h[j]) atomicAdd(&dst[j], h[j]);
        }
}

// What byte i of `out` holds before the run: o and lse poison, guard bytes elsewhere.
__device__ unsigned char out_byte(const CheckParams &p, size_t i) {
    if (i >= p.o_at && i < p.o_at + p.o_b) // KVF_HOST_POISON_O, little-endian
        return (unsigned char)((i - p.o_at) & 1 ? KVF_HOST_POISON_O >> 8 : KVF_HOST_POISON_O);
    if (i >= p.lse_at && i < p.lse_at + p.lse_b) // KVF_HOST_POISON_LSE
        return (unsigned char)(KVF_HOST_POISON_LSE >> (8 * ((i - p.lse_at) & 3)));
    return (unsigned char)KVF_HOST_GUARD_BYTE;
}

__device__ unsigned char ws_byte(const CheckParams &p, size_t i) {
    return i >= kG && i < kG + p.ws_bytes ? (unsigned char)KVF_HOST_POISON_BYTE
                                          : (unsigned char)KVF_HOST_GUARD_BYTE;
}

// The page work of one grid-stride loop: poisons the listed pages of both pools (what an
// earlier case wrote) ...
__device__ void poison_pages(const int64_t *ids, int64_t n, int64_t page_vec, uint4 *k_pool,
                             uint4 *v_pool, uint32_t word) {
    const uint4 w = make_uint4(word, word, word, word);
    const int64_t total = n * page_vec;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t page = i / page_vec, j = i - page * page_vec;
        k_pool[ids[page] * page_vec + j] = w;
        v_pool[ids[page] * page_vec + j] = w;
    }
}

// ... and writes pages gathered on the host into `src` (n K pages, then the same n pages of V,
// each of page_vec 16-byte vectors) to their places: page i of each half goes to page ids[i].
__device__ void scatter_pages(const uint4 *src, const int64_t *ids, int64_t n, int64_t page_vec,
                              uint4 *k_pool, uint4 *v_pool) {
    const int64_t per_pool = n * page_vec;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < 2 * per_pool;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int is_v = i >= per_pool;
        const int64_t r = is_v ? i - per_pool : i;
        const int64_t page = r / page_vec, j = r - page * page_vec;
        (is_v ? v_pool : k_pool)[ids[page] * page_vec + j] = src[i];
    }
}

// Copies n 16-byte vectors in one grid-stride loop.
__device__ void copy_vecs(uint4 *dst, const uint4 *src, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

// Before the run, one cooperative launch in three steps, each after a grid-wide barrier that
// makes the previous step's writes visible to every block:
//   1. the result block set; `in` and the page list copied from the mapped image; the pages an
//      earlier case wrote and this one does not read re-poisoned (in that case's geometry,
//      which may overlap this case's pages: hence the barrier before step 2);
//   2. the pages the case reads written from the stage; o, lse and the workspace poisoned and
//      their guards written (filled here rather than uploaded: the outputs cost no transfer);
//   3. the checksums of what the kernel will read.
__global__ void prepare_kernel(const CheckParams p) {
    // The whole result block is written, padding included: post_kernel copies all of it back,
    // and a copy of bytes never written reads uninitialized memory (compute-sanitizer initcheck).
    if (blockIdx.x == 0) {
        for (size_t i = threadIdx.x; i < kResBytes / 16; i += blockDim.x)
            ((uint4 *)p.res)[i] = make_uint4(0, 0, 0, 0);
        // Vector 0, which holds ws_first, was zeroed by this same thread.
        if (threadIdx.x == 0) p.res->ws_first = kNone;
    }
    copy_vecs((uint4 *)p.in, p.up_in, p.in_vecs);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < p.n_ids;
         i += (int64_t)gridDim.x * blockDim.x)
        ((int64_t *)p.ids)[i] = p.up_ids[i];
    poison_pages(p.poison, p.n_poison, p.poison_vec, p.k, p.v, p.poison_word);
    cg::this_grid().sync();
    scatter_pages(p.stage, p.ids, p.n_scatter, p.page_vec, p.k, p.v);
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t i0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    uint32_t *o = (uint32_t *)p.out;
    for (size_t i = i0; i < p.out_b / 4; i += stride) {
        const size_t b = 4 * i;
        o[i] = out_byte(p, b) | (uint32_t)out_byte(p, b + 1) << 8 |
               (uint32_t)out_byte(p, b + 2) << 16 | (uint32_t)out_byte(p, b + 3) << 24;
    }
    uint32_t *w = (uint32_t *)p.ws;
    for (size_t i = i0; i < p.ws_region / 4; i += stride) {
        const size_t b = 4 * i;
        w[i] = ws_byte(p, b) | (uint32_t)ws_byte(p, b + 1) << 8 |
               (uint32_t)ws_byte(p, b + 2) << 16 | (uint32_t)ws_byte(p, b + 3) << 24;
    }
    cg::this_grid().sync();
    checksum(p, p.res->before);
}

// After the run, one cooperative launch: the workspace guards checked and the checksums taken
// again while `out` is copied to the mapped h_down; after a grid-wide barrier, the result
// block too. The host reads both once the stream is synchronized.
__global__ void post_kernel(const CheckParams p) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t i0 = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    for (int64_t i = i0; i < (int64_t)p.ws_region; i += stride) {
        if ((size_t)i >= kG && (size_t)i < kG + p.ws_bytes) continue;
        if (p.ws[i] != (unsigned char)KVF_HOST_GUARD_BYTE) {
            atomicMin(&p.res->ws_first, (unsigned long long)i);
            break;
        }
    }
    copy_vecs((uint4 *)(p.down + kResBytes), (const uint4 *)p.out, (int64_t)(p.out_b / 16));
    checksum(p, p.res->after);
    cg::this_grid().sync();
    copy_vecs((uint4 *)p.down, (const uint4 *)p.res, (int64_t)(kResBytes / 16));
}

__global__ void fill_kernel(uint4 *dst, int64_t vecs, uint32_t word) {
    const uint4 w = make_uint4(word, word, word, word);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < vecs;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = w;
}

// The batches of a case too large for one stage, before its prepare kernel.
__global__ void scatter_pages_kernel(const uint4 *src, const int64_t *ids, int64_t n,
                                     int64_t page_vec, uint4 *k_pool, uint4 *v_pool) {
    scatter_pages(src, ids, n, page_vec, k_pool, v_pool);
}

__global__ void poison_pages_kernel(const int64_t *ids, int64_t n, int64_t page_vec, uint4 *k_pool,
                                    uint4 *v_pool, uint32_t word) {
    poison_pages(ids, n, page_vec, k_pool, v_pool, word);
}

// Poisons slots [used[i], S) of pages ids[i] in both pools (device-generated pools of bench).
__global__ void poison_tails_kernel(const int64_t *ids, const int32_t *used, int64_t n,
                                    int64_t page_vec, int64_t slot_vec, uint4 *k_pool,
                                    uint4 *v_pool, uint32_t word) {
    const uint4 w = make_uint4(word, word, word, word);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * page_vec;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t page = i / page_vec, j = i - page * page_vec;
        if (j < used[page] * slot_vec) continue;
        k_pool[ids[page] * page_vec + j] = w;
        v_pool[ids[page] * page_vec + j] = w;
    }
}

// Counts 16-byte vectors that are not poison outside the pages marked in `mask` (one byte per
// page; vectors past num_pages pages belong to no page).
__global__ void count_unpoisoned_kernel(const uint4 *pool, int64_t vecs, int64_t page_vec,
                                        const unsigned char *mask, int64_t num_pages, uint32_t word,
                                        unsigned long long *count) {
    unsigned long long mine = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < vecs;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t page = i / page_vec;
        if (page < num_pages && mask[page]) continue;
        const uint4 v = pool[i];
        if (v.x != word || v.y != word || v.z != word || v.w != word) ++mine;
    }
    if (mine) atomicAdd(count, mine);
}

int grid_for(int64_t vecs) {
    const int64_t b = (vecs + 255) / 256;
    return (int)(b < 1 ? 1 : b < 4096 ? b : 4096);
}

// The check kernels: at least 8 items per thread and at most 512 blocks (about 4 per SM),
// which keeps them short and the checksum's atomics few.
int check_grid(int64_t items) {
    const int64_t b = (items + 2047) / 2048;
    return (int)(b < 1 ? 1 : b < 512 ? b : 512);
}

// Blocks of a cooperative check kernel for `items` units of device work (check_grid's) and
// `host_vecs` vectors of host memory (one a thread), no more than fit on the device at once.
unsigned coop_grid(const Host *h, int64_t items, int64_t host_vecs) {
    int64_t b = check_grid(items);
    if ((host_vecs + 255) / 256 > b) b = (host_vecs + 255) / 256;
    return (unsigned)(b < h->coop_blocks ? b : h->coop_blocks);
}

} // namespace

cudaError_t coop_capacity(int *blocks) {
    // A cooperative launch must fit on the device whole: both check kernels are.
    int dev = 0, sms = 0, pre = 0, post = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&pre, prepare_kernel, 256, 0);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&post, post_kernel, 256, 0);
    const int per_sm = pre < post ? pre : post;
    *blocks = per_sm * sms;
    return e;
}

cudaError_t launch_prepare(const Host *h, CheckParams *p, int64_t items, int64_t host_vecs) {
    void *args[] = {p};
    return cudaLaunchCooperativeKernel((const void *)prepare_kernel,
                                       dim3(coop_grid(h, items, host_vecs)), dim3(256), args, 0,
                                       h->stream);
}

cudaError_t launch_post(const Host *h, CheckParams *p, int64_t items, int64_t host_vecs) {
    void *args[] = {p};
    return cudaLaunchCooperativeKernel((const void *)post_kernel,
                                       dim3(coop_grid(h, items, host_vecs)), dim3(256), args, 0,
                                       h->stream);
}

cudaError_t launch_fill(uint4 *dst, int64_t vecs, uint32_t word, cudaStream_t stream) {
    fill_kernel<<<grid_for(vecs), 256, 0, stream>>>(dst, vecs, word);
    return cudaGetLastError();
}

cudaError_t launch_poison_pages(const int64_t *ids, int64_t n, int64_t page_vec, uint4 *k_pool,
                                uint4 *v_pool, uint32_t word, cudaStream_t stream) {
    poison_pages_kernel<<<grid_for(n * page_vec), 256, 0, stream>>>(ids, n, page_vec, k_pool,
                                                                    v_pool, word);
    return cudaGetLastError();
}

cudaError_t launch_scatter_pages(const uint4 *src, const int64_t *ids, int64_t n, int64_t page_vec,
                                 uint4 *k_pool, uint4 *v_pool, cudaStream_t stream) {
    scatter_pages_kernel<<<grid_for(2 * n * page_vec), 256, 0, stream>>>(src, ids, n, page_vec,
                                                                         k_pool, v_pool);
    return cudaGetLastError();
}

cudaError_t launch_poison_tails(const int64_t *ids, const int32_t *used, int64_t n,
                                int64_t page_vec, int64_t slot_vec, uint4 *k_pool, uint4 *v_pool,
                                uint32_t word, cudaStream_t stream) {
    poison_tails_kernel<<<grid_for(n * page_vec), 256, 0, stream>>>(ids, used, n, page_vec,
                                                                    slot_vec, k_pool, v_pool, word);
    return cudaGetLastError();
}

cudaError_t launch_count_unpoisoned(const uint4 *pool, int64_t vecs, int64_t page_vec,
                                    const unsigned char *mask, int64_t num_pages, uint32_t word,
                                    unsigned long long *count, cudaStream_t stream) {
    count_unpoisoned_kernel<<<grid_for(vecs), 256, 0, stream>>>(pool, vecs, page_vec, mask,
                                                                num_pages, word, count);
    return cudaGetLastError();
}

} // namespace kvf_cuda_host
