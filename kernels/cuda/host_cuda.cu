// The CUDA buffer host (kernel_host.h): the device buffers every KVF_PLUGIN_DEVICE_CUDA kernel
// descriptor runs on, the built-in `cuda`, `cuda-naive` and mutants as much as a plugin.
//
// Device memory of one host:
//   K and V pools   [P][S][Hk][D] each, every byte KVF_HOST_POISON_INPUT except the slots a
//                   sequence reads. Kept between runs: a run uploads only the pages the case
//                   reads (through a pinned staging buffer, K and V in one copy and one scatter
//                   kernel) and the next run re-poisons only those pages. Filling whole pools
//                   every run (up to 2 x 8 GiB for page ids past 65535) made the GPU the
//                   bottleneck of a campaign.
//   d_io            [in | result | out | ws]; in, out and ws made of pieces [guard | data |
//                   guard] (guards of KVF_HOST_GUARD_BYTES, data 256-byte aligned):
//                     in     q, kv_indptr, kv_indices, kv_last_page_len: what the kernel reads;
//                     result what the check kernels found (CheckResult);
//                     out    o (KVF_HOST_POISON_O) and lse (KVF_HOST_POISON_LSE);
//                     ws     the descriptor's workspace, KVF_HOST_POISON_BYTE.
// One run is: one copy up (in and the initial result block), the pre kernel (poison and guards
// of out and ws, checksums of the pools and of in), the descriptor's run() on the host's
// stream, the post kernel (workspace guards, the checksums again), one copy down (result and
// out with its guards), one stream synchronization. Finding where a check failed (which byte,
// which page) costs extra copies, paid only when it fails.
//
// Checksums, not copies: comparing against a second device copy would double the pools'
// memory and the inputs' upload, and downloading them would cost more than the kernel. The
// pool checksums cover the whole pools when each is at most kWholePoolCheckBytes, otherwise
// the pages the case reads: a write elsewhere into a larger pool goes unseen (the CPU host
// likewise checks only what it wrote in pools past its own bound).
#include <cuda_runtime.h>

#include "cuda_error.cuh"
#include "device_buffer.cuh"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/cuda_kernels.h"

extern "C" {
#include "kvfuzz/kernel.h"
#include "kvfuzz/kernel_host.h"
}

namespace {

constexpr size_t kG = KVF_HOST_GUARD_BYTES;
constexpr size_t kStageBytes = 64u << 20;          // gather buffer for the pages a case reads
constexpr size_t kWholePoolCheckBytes = 64u << 20; // per pool: checksummed whole up to this
constexpr uint32_t kPoisonWord = KVF_HOST_POISON_INPUT * 0x10001u; // two poison bf16
constexpr unsigned long long kNone = ~0ull;
constexpr size_t kResBytes = 256; // the result block of the check kernels

size_t align256(size_t x) {
    return (x + 255) & ~(size_t)255;
}

// A piece of d_io: [guard][data][guard], padded to 256 bytes; data at +kG.
size_t piece_bytes(size_t data) {
    return align256(kG + data + kG);
}

// ---------------------------------------------------------------------------------------------
// Device kernels

// What the post kernel found, downloaded with the outputs. Initialised by the upload.
struct CheckResult {
    unsigned long long ws_first;  // first workspace guard byte that changed
    unsigned long long before[3]; // checksums of K, V and `in` before the run
    unsigned long long after[3];  // and after
};

static_assert(sizeof(CheckResult) <= kResBytes, "the result block holds CheckResult");

struct CheckParams {
    const uint4 *k, *v;      // the pools
    const int64_t *ids;      // pages to checksum (n_ids of page_vec vectors) ...
    int64_t n_ids, page_vec; // ...
    int64_t whole_vecs;      // ... or, when > 0, the first whole_vecs vectors of each pool
    const uint4 *in;         // in_vecs vectors
    int64_t in_vecs;
    unsigned char *out; // [guard | o | guard], [lse | guard], padded: out_b bytes
    size_t out_b, o_at, o_b, lse_at, lse_b;
    unsigned char *ws; // [guard | ws_bytes | guard], padded: ws_region bytes
    size_t ws_bytes, ws_region;
    CheckResult *res;
};

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

// Checksums of both pools (the pages listed, or the whole pools) and of `in`. Rows of
// blockIdx.y share one grid-stride loop each; threads per block are 256.
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

// Before the run: y = 0 poisons o, lse and the workspace and writes their guards, y = 1
// checksums. Filled here rather than uploaded: the outputs cost no copy over PCIe.
__global__ void pre_kernel(const CheckParams p) {
    if (blockIdx.y == 1) {
        checksum(p, p.res->before);
        return;
    }
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
}

// After the run: y = 0 checks the workspace guards, y = 1 checksums again.
__global__ void post_kernel(const CheckParams p) {
    if (blockIdx.y == 1) {
        checksum(p, p.res->after);
        return;
    }
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t i0 = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    for (int64_t i = i0; i < (int64_t)p.ws_region; i += stride) {
        if ((size_t)i >= kG && (size_t)i < kG + p.ws_bytes) continue;
        if (p.ws[i] != (unsigned char)KVF_HOST_GUARD_BYTE) {
            atomicMin(&p.res->ws_first, (unsigned long long)i);
            break;
        }
    }
}

__global__ void fill_kernel(uint4 *dst, int64_t vecs, uint32_t word) {
    const uint4 w = make_uint4(word, word, word, word);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < vecs;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = w;
}

// Pages gathered on the host into `src` (n K pages, then the same n pages of V, each of
// page_vec 16-byte vectors), to their places: page i of each half goes to page ids[i].
__global__ void scatter_pages_kernel(const uint4 *src, const int64_t *ids, int64_t n,
                                     int64_t page_vec, uint4 *k_pool, uint4 *v_pool) {
    const int64_t per_pool = n * page_vec;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < 2 * per_pool;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int is_v = i >= per_pool;
        const int64_t r = is_v ? i - per_pool : i;
        const int64_t page = r / page_vec, j = r - page * page_vec;
        (is_v ? v_pool : k_pool)[ids[page] * page_vec + j] = src[i];
    }
}

// Poisons the listed pages of both pools: undoes what scatter_pages_kernel wrote.
__global__ void poison_pages_kernel(const int64_t *ids, int64_t n, int64_t page_vec, uint4 *k_pool,
                                    uint4 *v_pool) {
    const uint4 w = make_uint4(kPoisonWord, kPoisonWord, kPoisonWord, kPoisonWord);
    const int64_t total = n * page_vec;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t page = i / page_vec, j = i - page * page_vec;
        k_pool[ids[page] * page_vec + j] = w;
        v_pool[ids[page] * page_vec + j] = w;
    }
}

// Poisons slots [used[i], S) of pages ids[i] in both pools (device-generated pools of bench).
__global__ void poison_tails_kernel(const int64_t *ids, const int32_t *used, int64_t n,
                                    int64_t page_vec, int64_t slot_vec, uint4 *k_pool,
                                    uint4 *v_pool) {
    const uint4 w = make_uint4(kPoisonWord, kPoisonWord, kPoisonWord, kPoisonWord);
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
                                        const unsigned char *mask, int64_t num_pages,
                                        unsigned long long *count) {
    unsigned long long mine = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < vecs;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t page = i / page_vec;
        if (page < num_pages && mask[page]) continue;
        const uint4 v = pool[i];
        if (v.x != kPoisonWord || v.y != kPoisonWord || v.z != kPoisonWord || v.w != kPoisonWord)
            ++mine;
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

// ---------------------------------------------------------------------------------------------
// The host

struct Slot {
    const kvf_plugin_kernel *desc;
    void *state;
    int rc;        // outcome of supports + plan for the loaded inputs (0: ready to run)
    kvf_error why; // its sentence
    size_t ws_bytes;
};

// Offsets of one loaded case in d_io (and in h_up for in and the result block).
struct Layout {
    size_t q, ip, ix, ll;         // data offsets in `in`
    size_t q_b, ip_b, ix_b, ll_b; // data bytes
    size_t in_b;                  // bytes of `in`
    size_t res_at, up_b;          // the result block; up_b = bytes uploaded (in, result block)
    size_t out_at;                // `out` in d_io
    size_t o, lse;                // data offsets in `out`
    size_t o_b, lse_b, out_b;
    size_t ws_at, ws_bytes, ws_region;
    size_t total;
};

struct Host {
    Slot *slots;
    int n;
    cudaStream_t stream;
    // The pools. Invariant while pool_clean is set: every byte of [0, pool_cap) is poison
    // except the pages listed in d_written (written_pages ids of written_page_bytes each), which
    // hold the previous case's pages. A fresh allocation, a device-generated load, or a run that
    // fails after it began changing the pools (pool_touched) clears pool_clean, and the next
    // run poisons the whole pool again. A case rejected before that (malformed, unsupported)
    // leaves the pools as they were.
    void *d_k, *d_v;
    size_t pool_cap;
    int pool_clean, pool_touched;
    void *d_written;
    size_t written_cap;
    int64_t written_pages;
    size_t written_page_bytes;
    int verify_pool; // KVF_CUDA_VERIFY_POOL: check the invariant above after every upload
    void *d_stage, *h_stage;
    size_t stage_cap, stage_bytes;
    void *d_ids;
    size_t ids_cap;
    // The pages the loaded case reads and how many slots of each (host; for locating a
    // changed pool byte).
    int64_t *pages;
    int32_t *page_used;
    void *page_sort; // scratch of read_pages
    size_t pages_cap;
    int64_t num_read_pages;
    // d_io and its pinned images: h_up = [in | result as initialised], h_down = [result | out]
    // after the run.
    void *d_io, *h_up, *h_down;
    size_t io_cap, up_cap, down_cap;
    Layout L;
    kvf_plugin_shape shape;
    const kvf_case *c; // the loaded case: shape, table, q (must outlive the load)
    int pools_known;   // its K/V are what the pools hold (not so for generated pools: then a
                       // changed pool byte is reported without its place)
    int loaded;
    size_t page_bytes;
    int64_t num_pages;
};

// Checks what the kernels do not: pointers, the page table against the pool, lengths. A
// malformed case is KVF_EINVAL before any kernel sees it.
int check_case(const kvf_case *c, kvf_error *err) {
    if (c->num_qo_heads < 1 || c->num_kv_heads < 1 || c->num_qo_heads % c->num_kv_heads != 0)
        return kvf_error_set(err, KVF_EINVAL,
                             "num_qo_heads %d is not a positive multiple of num_kv_heads %d",
                             c->num_qo_heads, c->num_kv_heads);
    if (c->head_dim < 1 || c->page_size < 1 || c->batch_size < 0 || c->num_pages < 0)
        return kvf_error_set(err, KVF_EINVAL,
                             "head_dim %d, page_size %d, batch_size %d or num_pages %lld is out "
                             "of range",
                             c->head_dim, c->page_size, c->batch_size, (long long)c->num_pages);
    if (!c->kv_indptr || (c->batch_size > 0 && (!c->q || !c->kv_last_page_len)))
        return kvf_error_set(err, KVF_EINVAL, "the case has no q, kv_indptr or kv_last_page_len");
    if (c->kv_indptr[0] != 0)
        return kvf_error_set(err, KVF_EINVAL, "kv_indptr[0] is %d, not 0", c->kv_indptr[0]);
    for (int32_t b = 0; b < c->batch_size; ++b) {
        const int32_t n = c->kv_indptr[b + 1] - c->kv_indptr[b];
        if (c->kv_indptr[b + 1] < c->kv_indptr[b])
            return kvf_error_set(err, KVF_EINVAL, "kv_indptr decreases at index %d (%d < %d)",
                                 b + 1, c->kv_indptr[b + 1], c->kv_indptr[b]);
        const int32_t last = c->kv_last_page_len[b];
        if (n > 0 && (last < 1 || last > c->page_size))
            return kvf_error_set(err, KVF_EINVAL,
                                 "kv_last_page_len[%d] is %d, outside [1, page_size = %d]", b, last,
                                 c->page_size);
        if (n == 0 && (last < 0 || last > c->page_size))
            return kvf_error_set(err, KVF_EINVAL,
                                 "kv_last_page_len[%d] is %d for an empty sequence, outside [0, "
                                 "page_size = %d]",
                                 b, last, c->page_size);
    }
    const int64_t entries = c->kv_indptr[c->batch_size];
    if (entries > 0 && !c->kv_indices)
        return kvf_error_set(err, KVF_EINVAL, "the case has no kv_indices");
    for (int64_t i = 0; i < entries; ++i)
        if (c->kv_indices[i] < 0 || c->kv_indices[i] >= c->num_pages)
            return kvf_error_set(err, KVF_EINVAL, "kv_indices[%lld] is %d, outside [0, %lld)",
                                 (long long)i, c->kv_indices[i], (long long)c->num_pages);
    // 128-bit: P * page bytes can pass 2^64 for absurd shapes; such a pool is never real.
    const unsigned __int128 need =
        (unsigned __int128)c->num_pages * (uint64_t)kvf_case_page_elems(c) * 2u;
    if (need > ((unsigned __int128)1 << 62))
        return kvf_error_set(err, KVF_EUNSUPPORTED, "the page pool (%lld pages) is too large",
                             (long long)c->num_pages);
    return 0;
}

int host_create(const kvf_plugin_kernel *const *descs, int n, Host **out, kvf_error *err) {
    *out = NULL;
    char why[256];
    if (!kvf_cuda_runtime_available(why, sizeof why))
        return kvf_error_set(err, KVF_EDEVICE, "%s", why);
    Host *h = (Host *)calloc(1, sizeof *h);
    Slot *slots = (Slot *)calloc((size_t)n, sizeof *slots);
    if (!h || !slots) {
        free(h);
        free(slots);
        return kvf_error_set(err, KVF_ENOMEM, "out of host memory for the CUDA buffer host");
    }
    h->slots = slots;
    const char *verify = getenv("KVF_CUDA_VERIFY_POOL");
    h->verify_pool = verify && *verify && strcmp(verify, "0") != 0;
    h->stage_bytes = kStageBytes;
    const char *stage = getenv("KVF_CUDA_STAGE_BYTES");
    int rc = 0;
    if (stage && *stage) {
        char *end = NULL;
        errno = 0;
        const unsigned long long v = strtoull(stage, &end, 10);
        if (errno || *end || stage[0] == '-' || v < 32 || v > (1ull << 30) || v % 16)
            rc = kvf_error_set(err, KVF_EINVAL,
                               "KVF_CUDA_STAGE_BYTES must be a multiple of 16 from 32 to 2^30, "
                               "got \"%s\"",
                               stage);
        h->stage_bytes = (size_t)v;
    }
    if (!rc) {
        const cudaError_t e = cudaStreamCreateWithFlags(&h->stream, cudaStreamNonBlocking);
        if (e != cudaSuccess) rc = kvf__cuda_fail(err, e, "Creating a CUDA stream");
    }
    for (int i = 0; i < n && !rc; ++i) {
        Slot *s = &h->slots[i];
        s->desc = descs[i];
        if (s->desc->create) {
            char msg[KVF_ERROR_MSG_MAX] = {0};
            const int st = s->desc->create(s->desc, &s->state, msg, sizeof msg - 1);
            if (st != KVF_PLUGIN_OK) {
                rc = kvf_error_set(err, st == KVF_PLUGIN_NOMEM ? KVF_ENOMEM : KVF_EKERNEL,
                                   "%s could not start: %s", s->desc->name,
                                   msg[0] ? msg : "create() failed without a message");
                break; // no state to destroy
            }
        }
        h->n = i + 1;
        // A create() that failed inside CUDA without saying so leaves its error here.
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) rc = kvf__cuda_fail(err, e, "Creating the kernel's state");
    }
    if (rc) {
        kvf__cuda_host_destroy(h);
        return rc;
    }
    *out = h;
    return 0;
}

// ---- the pools -------------------------------------------------------------------------------

int pools_fill(Host *h, kvf_error *err) {
    const int64_t vecs = (int64_t)(h->pool_cap / 16);
    for (int which = 0; which < 2; ++which) {
        fill_kernel<<<grid_for(vecs), 256, 0, h->stream>>>((uint4 *)(which ? h->d_v : h->d_k), vecs,
                                                           kPoisonWord);
        KVF_CUDA_TRY(cudaGetLastError(), "Launching the pool poison kernel");
    }
    return 0;
}

// Sizes both pools for `pool` bytes each (a fresh allocation is not clean).
int pools_reserve(Host *h, size_t pool, kvf_error *err) {
    if (pool <= h->pool_cap) return 0;
    if (h->d_k) cudaFree(h->d_k);
    if (h->d_v) cudaFree(h->d_v);
    h->d_k = h->d_v = NULL;
    h->pool_cap = 0;
    h->pool_clean = 0;
    KVF_CUDA_TRY(cudaMalloc(&h->d_k, pool), "Allocating the device K pool");
    KVF_CUDA_TRY(cudaMalloc(&h->d_v, pool), "Allocating the device V pool");
    h->pool_cap = pool;
    return 0;
}

// Brings the pools to all poison: the whole pools when not clean, otherwise only the pages the
// previous case wrote.
int pools_repoison(Host *h, kvf_error *err) {
    if (!h->pool_clean) {
        const int rc = pools_fill(h, err);
        if (rc) return rc;
    } else if (h->written_pages > 0) {
        const int64_t page_vec = (int64_t)(h->written_page_bytes / 16);
        poison_pages_kernel<<<grid_for(h->written_pages * page_vec), 256, 0, h->stream>>>(
            (const int64_t *)h->d_written, h->written_pages, page_vec, (uint4 *)h->d_k,
            (uint4 *)h->d_v);
        KVF_CUDA_TRY(cudaGetLastError(), "Launching the page poison kernel");
    }
    h->written_pages = 0;
    h->pool_clean = 1;
    return 0;
}

// The self-check of KVF_CUDA_VERIFY_POOL: after an upload, every byte of both pools outside
// the pages just written must be poison. Scans the whole allocation, so tests only.
int pools_verify(Host *h, kvf_error *err) {
    const int64_t P = h->num_pages;
    unsigned char *mask = (unsigned char *)calloc((size_t)P + 1, 1);
    if (!mask) return kvf_error_set(err, KVF_ENOMEM, "out of host memory for the pool check");
    for (int64_t i = 0; i < h->num_read_pages; ++i)
        mask[h->pages[i]] = 1;
    unsigned char *d_mask = NULL;
    unsigned long long *d_count = NULL, count[2] = {0, 0};
    cudaError_t e = cudaMalloc(&d_mask, (size_t)P + 1);
    if (e == cudaSuccess) e = cudaMalloc(&d_count, sizeof count);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(d_mask, mask, (size_t)P + 1, cudaMemcpyHostToDevice, h->stream);
    if (e == cudaSuccess) e = cudaMemsetAsync(d_count, 0, sizeof count, h->stream);
    const int64_t vecs = (int64_t)(h->pool_cap / 16), page_vec = (int64_t)(h->page_bytes / 16);
    for (int which = 0; which < 2 && e == cudaSuccess; ++which) {
        count_unpoisoned_kernel<<<grid_for(vecs), 256, 0, h->stream>>>(
            (const uint4 *)(which ? h->d_v : h->d_k), vecs, page_vec, d_mask, P, d_count + which);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(count, d_count, sizeof count, cudaMemcpyDeviceToHost, h->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(h->stream);
    free(mask);
    if (d_mask) cudaFree(d_mask);
    if (d_count) cudaFree(d_count);
    if (e != cudaSuccess) return kvf__cuda_fail(err, e, "Checking the pool poison");
    if (count[0] || count[1])
        return kvf_error_set(err, KVF_EDEVICE,
                             "the device pools hold %llu (K) and %llu (V) 16-byte vectors that "
                             "are not poison outside the pages the case reads",
                             count[0], count[1]);
    return 0;
}

struct PageUse {
    int64_t page;
    int32_t used;
};

int cmp_page_use(const void *a, const void *b) {
    const int64_t x = ((const PageUse *)a)->page, y = ((const PageUse *)b)->page;
    return (x > y) - (x < y);
}

// The pages the case reads and how many leading slots of each (the rule of
// kvf__host_used_slots: a page that is one sequence's last and another's inner page is read
// whole), ascending. Sorting the table's entries costs O(E log E) and nothing per pool page:
// kvf__host_used_slots' array of P entries would be up to 2^26 of them (an 8 GiB pool of
// 128-byte pages) for every case with page ids past 65535, a sixth of a campaign.
int read_pages(Host *h, const kvf_case *c, kvf_error *err) {
    h->num_read_pages = 0;
    const int64_t entries = c->kv_indptr[c->batch_size];
    if (entries == 0) return 0;
    if ((size_t)entries > h->pages_cap) {
        free(h->pages);
        free(h->page_used);
        free(h->page_sort);
        h->pages = (int64_t *)malloc((size_t)entries * sizeof *h->pages);
        h->page_used = (int32_t *)malloc((size_t)entries * sizeof *h->page_used);
        h->page_sort = malloc((size_t)entries * sizeof(PageUse));
        h->pages_cap = h->pages && h->page_used && h->page_sort ? (size_t)entries : 0;
        if (!h->pages_cap)
            return kvf_error_set(err, KVF_ENOMEM, "out of host memory for the page list");
    }
    PageUse *u = (PageUse *)h->page_sort;
    for (int32_t b = 0; b < c->batch_size; ++b) {
        const int32_t beg = c->kv_indptr[b], end = c->kv_indptr[b + 1];
        for (int32_t e = beg; e < end; ++e) {
            u[e].page = c->kv_indices[e];
            u[e].used = e == end - 1 ? c->kv_last_page_len[b] : c->page_size;
        }
    }
    qsort(u, (size_t)entries, sizeof *u, cmp_page_use);
    int64_t n = 0;
    for (int64_t i = 0; i < entries; ++i) {
        if (n > 0 && h->pages[n - 1] == u[i].page) {
            if (u[i].used > h->page_used[n - 1]) h->page_used[n - 1] = u[i].used;
            continue;
        }
        h->pages[n] = u[i].page;
        h->page_used[n++] = u[i].used;
    }
    h->num_read_pages = n;
    return 0;
}

// Uploads the pages the case reads (their data in used slots, poison after) into the poisoned
// pools. The host pool may be GiBs of lazily mapped zeros; only those pages are touched.
int pools_upload(Host *h, const kvf_case *c, kvf_error *err) {
    const size_t page_bytes = h->page_bytes;
    const size_t pool = (size_t)c->num_pages * page_bytes;
    if (pool == 0) return 0;
    // The copies move 16-byte vectors; every bf16 page of 8 * k elements is a multiple of 16.
    if (page_bytes % 16 != 0)
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "a page of %zu bytes is not a multiple of 16 bytes", page_bytes);
    h->pool_touched = 1;
    int rc = pools_reserve(h, pool, err);
    if (!rc) rc = pools_repoison(h, err);
    if (rc) return rc;
    const int64_t n_pages = h->num_read_pages;
    if (n_pages == 0) return h->verify_pool ? pools_verify(h, err) : 0;
    if (!h->h_stage) { // both buffers or neither
        void *hs = NULL, *ds = NULL;
        KVF_CUDA_TRY(cudaMallocHost(&hs, h->stage_bytes), "Allocating pinned staging");
        const cudaError_t e = cudaMalloc(&ds, h->stage_bytes);
        if (e != cudaSuccess) {
            cudaFreeHost(hs);
            return kvf__cuda_fail(err, e, "Allocating device staging");
        }
        h->h_stage = hs, h->d_stage = ds;
        h->stage_cap = h->stage_bytes;
    }
    if (2 * page_bytes > h->stage_cap)
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "a page of %zu bytes and its V page exceed the %zu-byte staging "
                             "buffer",
                             page_bytes, h->stage_cap);
    rc = kvf__cuda_dev_grow(&h->d_ids, &h->ids_cap, (size_t)n_pages * sizeof(int64_t),
                            "Allocating the page list", err);
    if (rc) return rc;
    // The ids go up from pinned memory behind h_up's images (laid out by the caller), which
    // stays untouched until the run synchronizes.
    const int64_t *pinned_ids = (const int64_t *)((unsigned char *)h->h_up + h->L.up_b);
    KVF_CUDA_TRY(cudaMemcpyAsync(h->d_ids, pinned_ids, (size_t)n_pages * sizeof(int64_t),
                                 cudaMemcpyHostToDevice, h->stream),
                 "Uploading the page list");
    // K and V pages travel together, one copy and one scatter per batch. The staging buffer is
    // free on entry (every run ends synchronized, a failed one too), so only a case too large
    // for one batch waits for a copy before it refills the buffer.
    const int64_t per_batch = (int64_t)(h->stage_cap / (2 * page_bytes));
    kvf_bf16 *stage = (kvf_bf16 *)h->h_stage;
    const int64_t page_elems = (int64_t)(page_bytes / 2);
    for (int64_t i0 = 0; i0 < n_pages; i0 += per_batch) {
        const int64_t n = n_pages - i0 < per_batch ? n_pages - i0 : per_batch;
        if (i0 > 0) KVF_CUDA_TRY(cudaStreamSynchronize(h->stream), "Uploading pages");
        for (int64_t i = 0; i < n; ++i) {
            const int64_t p = h->pages[i0 + i];
            const int32_t used = h->page_used[i0 + i];
            kvf__host_page_image(c, c->k_cache, p, used, stage + i * page_elems);
            kvf__host_page_image(c, c->v_cache, p, used, stage + (n + i) * page_elems);
        }
        KVF_CUDA_TRY(cudaMemcpyAsync(h->d_stage, stage, (size_t)(2 * n) * page_bytes,
                                     cudaMemcpyHostToDevice, h->stream),
                     "Uploading pages");
        scatter_pages_kernel<<<grid_for(2 * n * (int64_t)(page_bytes / 16)), 256, 0, h->stream>>>(
            (const uint4 *)h->d_stage, (const int64_t *)h->d_ids + i0, n,
            (int64_t)(page_bytes / 16), (uint4 *)h->d_k, (uint4 *)h->d_v);
        KVF_CUDA_TRY(cudaGetLastError(), "Launching the page scatter kernel");
    }
    // This case's id list becomes the list the next run re-poisons (stream order keeps the
    // next upload into the swapped-in buffer behind this run's kernels).
    void *ids = h->d_ids;
    size_t cap = h->ids_cap;
    h->d_ids = h->d_written, h->ids_cap = h->written_cap;
    h->d_written = ids, h->written_cap = cap;
    h->written_pages = n_pages;
    h->written_page_bytes = page_bytes;
    return h->verify_pool ? pools_verify(h, err) : 0;
}

// ---- layout and images -------------------------------------------------------------------

// Lays out d_io for the shape and the slots' workspaces and sizes every buffer; `ids` more
// bytes of pinned memory behind h_up's images carry the page list.
int layout(Host *h, const kvf_case *c, size_t ids, kvf_error *err) {
    Layout &L = h->L;
    memset(&L, 0, sizeof L);
    const int64_t B = c->batch_size;
    L.q_b = (size_t)kvf_case_q_elems(c) * 2;
    L.ip_b = (size_t)(B + 1) * 4;
    L.ix_b = (size_t)c->kv_indptr[B] * 4;
    L.ll_b = (size_t)B * 4;
    L.q = kG;
    L.ip = piece_bytes(L.q_b) + kG;
    L.ix = L.ip - kG + piece_bytes(L.ip_b) + kG;
    L.ll = L.ix - kG + piece_bytes(L.ix_b) + kG;
    L.in_b = L.ll - kG + piece_bytes(L.ll_b);
    L.res_at = L.in_b;
    L.up_b = L.res_at + kResBytes;
    L.out_at = L.up_b;
    L.o_b = (size_t)kvf_case_o_elems(c) * 2;
    L.lse_b = (size_t)kvf_case_lse_elems(c) * 4;
    L.o = kG;
    L.lse = piece_bytes(L.o_b) + kG;
    L.out_b = L.lse - kG + piece_bytes(L.lse_b);
    L.ws_at = L.out_at + L.out_b;
    for (int i = 0; i < h->n; ++i)
        if (h->slots[i].rc == 0 && h->slots[i].ws_bytes > L.ws_bytes)
            L.ws_bytes = h->slots[i].ws_bytes;
    L.ws_region = piece_bytes(L.ws_bytes);
    L.total = L.ws_at + L.ws_region;
    int rc = kvf__cuda_dev_grow(&h->d_io, &h->io_cap, L.total,
                                "Allocating device inputs and outputs", err);
    if (!rc)
        rc = kvf__cuda_pinned_grow(&h->h_up, &h->up_cap, L.up_b + ids, "Allocating pinned inputs",
                                   err);
    if (!rc)
        rc = kvf__cuda_pinned_grow(&h->h_down, &h->down_cap, kResBytes + L.out_b,
                                   "Allocating pinned outputs", err);
    return rc;
}

// h_up = [in | result block as initialised]: guards and padding KVF_HOST_GUARD_BYTE. It also
// stays what `in` must hold after the run, for locating a changed byte.
void build_images(Host *h, const kvf_case *c) {
    const Layout &L = h->L;
    unsigned char *up = (unsigned char *)h->h_up;
    kvf__host_fill_guard(up, L.in_b);
    if (L.q_b) memcpy(up + L.q, c->q, L.q_b);
    memcpy(up + L.ip, c->kv_indptr, L.ip_b);
    if (L.ix_b) memcpy(up + L.ix, c->kv_indices, L.ix_b);
    if (L.ll_b) memcpy(up + L.ll, c->kv_last_page_len, L.ll_b);
    CheckResult init;
    memset(&init, 0, sizeof init);
    init.ws_first = kNone;
    memset(up + L.res_at, 0, kResBytes);
    memcpy(up + L.res_at, &init, sizeof init);
}

// supports() and plan() of every slot for the loaded shape and table; sizes their workspaces.
void plan_slots(Host *h, const kvf_case *c) {
    for (int i = 0; i < h->n; ++i) {
        Slot *s = &h->slots[i];
        const kvf_plugin_kernel *d = s->desc;
        kvf_error_clear(&s->why);
        s->ws_bytes = 0;
        s->rc = kvf__host_supports(d, &h->shape, &s->why);
        if (!s->rc && d->plan) {
            char msg[KVF_ERROR_MSG_MAX] = {0};
            const kvf_plugin_index index = {c->kv_indptr, c->kv_indices, c->kv_last_page_len};
            const int st = d->plan(s->state, &h->shape, &index, msg, sizeof msg - 1);
            s->rc = kvf__host_status(d, st, msg, "plan", &s->why);
        }
        if (!s->rc && d->workspace_bytes) s->ws_bytes = d->workspace_bytes(s->state, &h->shape);
    }
}

void fill_args(Host *h, const Slot *s, kvf_plugin_args *a) {
    const Layout &L = h->L;
    unsigned char *io = (unsigned char *)h->d_io;
    kvf__host_contiguous_args(h->c, &h->shape, a);
    a->q = (const uint16_t *)(io + L.q);
    a->k_cache = (const uint16_t *)h->d_k;
    a->v_cache = (const uint16_t *)h->d_v;
    a->kv_indptr = (const int32_t *)(io + L.ip);
    a->kv_indices = (const int32_t *)(io + L.ix);
    a->kv_last_page_len = (const int32_t *)(io + L.ll);
    a->o = (uint16_t *)(io + L.out_at + L.o);
    a->lse = (float *)(io + L.out_at + L.lse);
    a->workspace = s->ws_bytes ? io + L.ws_at + kG : NULL;
    a->workspace_bytes = s->ws_bytes;
    a->stream = h->stream;
}

CheckParams check_params(Host *h) {
    const Layout &L = h->L;
    unsigned char *io = (unsigned char *)h->d_io;
    CheckParams p;
    memset(&p, 0, sizeof p);
    p.k = (const uint4 *)h->d_k, p.v = (const uint4 *)h->d_v;
    p.page_vec = (int64_t)(h->page_bytes / 16);
    const size_t pool = (size_t)h->num_pages * h->page_bytes;
    if (pool > 0 && pool <= kWholePoolCheckBytes) {
        p.whole_vecs = (int64_t)(pool / 16);
    } else {
        // d_written lists the loaded case's pages once it has any (pools_upload, and the
        // generated load); a case with none reads no page.
        p.ids = (const int64_t *)h->d_written;
        p.n_ids = h->num_read_pages;
    }
    p.in = (const uint4 *)io;
    p.in_vecs = (int64_t)(L.in_b / 16);
    p.out = io + L.out_at, p.out_b = L.out_b;
    p.o_at = L.o, p.o_b = L.o_b, p.lse_at = L.lse, p.lse_b = L.lse_b;
    p.ws = io + L.ws_at, p.ws_bytes = L.ws_bytes, p.ws_region = L.ws_region;
    p.res = (CheckResult *)(io + L.res_at);
    return p;
}

// ---- locating a failed check (slow paths) ----------------------------------------------------

// Names the byte `at` of `in`: a data byte is an input change, a guard byte an out-of-bounds
// write next to the buffer it guards.
int name_in_byte(Host *h, size_t at, unsigned char was, unsigned char now, kvf_error *err) {
    const Layout &L = h->L;
    const struct {
        const char *name;
        size_t at, bytes;
    } buf[4] = {{"q", L.q, L.q_b},
                {"kv_indptr", L.ip, L.ip_b},
                {"kv_indices", L.ix, L.ix_b},
                {"kv_last_page_len", L.ll, L.ll_b}};
    for (int i = 0; i < 4; ++i) {
        const size_t beg = buf[i].at - kG, end = buf[i].at + buf[i].bytes + kG;
        if (at < beg || at >= end) continue;
        if (at >= buf[i].at && at < buf[i].at + buf[i].bytes)
            return kvf_error_set(err, KVF_EINPUTMOD,
                                 "the kernel modified its input %s at byte %zu (0x%02x became "
                                 "0x%02x)",
                                 buf[i].name, at - buf[i].at, was, now);
        const int after = at >= buf[i].at;
        const size_t dist = after ? at - (buf[i].at + buf[i].bytes) + 1 : buf[i].at - at;
        // The wording of kvf__host_check_guard, so findings read alike on both hosts.
        return kvf_error_set(err, KVF_EOOBWRITE,
                             "the kernel wrote outside %s: byte %zu %s it changed (guard byte "
                             "0x%02x became 0x%02x)",
                             buf[i].name, dist, after ? "past its end" : "before its start", was,
                             now);
    }
    return kvf_error_set(err, KVF_EOOBWRITE,
                         "the kernel wrote into the padding between its input buffers (byte %zu, "
                         "0x%02x became 0x%02x)",
                         at, was, now);
}

int locate_in_change(Host *h, kvf_error *err) {
    const size_t n = h->L.in_b;
    unsigned char *now = (unsigned char *)malloc(n);
    if (!now) return kvf_error_set(err, KVF_EINPUTMOD, "the kernel modified its inputs");
    const cudaError_t e = cudaMemcpy(now, h->d_io, n, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        free(now);
        return kvf__cuda_fail(err, e, "Reading back a changed input");
    }
    const unsigned char *was = (const unsigned char *)h->h_up;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; ++i)
        if (now[i] != was[i]) rc = name_in_byte(h, i, was[i], now[i], err);
    free(now);
    // Equal bytes and a changed checksum: the kernel wrote and then restored them.
    return rc ? rc
              : kvf_error_set(err, KVF_EINPUTMOD, "the kernel modified its inputs during the run");
}

// Compares device page `p` of both pools with what it must hold (the case's page image, or
// poison for a page the case does not read).
int locate_in_page(Host *h, int64_t p, int32_t used, kvf_bf16 *have, kvf_bf16 *want,
                   kvf_error *err) {
    const kvf_case *c = h->c;
    const int64_t pe = (int64_t)(h->page_bytes / 2);
    for (int which = 0; which < 2; ++which) {
        const unsigned char *pool = (const unsigned char *)(which ? h->d_v : h->d_k);
        KVF_CUDA_TRY(cudaMemcpy(have, pool + (size_t)p * h->page_bytes, h->page_bytes,
                                cudaMemcpyDeviceToHost),
                     "Reading back a page");
        kvf__host_page_image(c, which ? c->v_cache : c->k_cache, p, used, want);
        for (int64_t i = 0; i < pe; ++i)
            if (have[i] != want[i]) {
                const int64_t slot = i / ((int64_t)c->num_kv_heads * c->head_dim);
                return kvf_error_set(err, KVF_EINPUTMOD,
                                     "the kernel modified its input %s at page %lld slot %lld kv "
                                     "head %lld d %lld (0x%04x became 0x%04x)",
                                     which ? "v_cache" : "k_cache", (long long)p, (long long)slot,
                                     (long long)(i / c->head_dim % c->num_kv_heads),
                                     (long long)(i % c->head_dim), want[i], have[i]);
            }
    }
    return 0;
}

int locate_pool_change(Host *h, const CheckResult *r, kvf_error *err) {
    const char *which = r->before[0] != r->after[0] ? "k_cache" : "v_cache";
    if (!h->pools_known)
        return kvf_error_set(err, KVF_EINPUTMOD, "the kernel modified its input %s", which);
    const size_t pe = h->page_bytes / 2;
    kvf_bf16 *have = (kvf_bf16 *)malloc(2 * pe * sizeof(kvf_bf16));
    if (!have) return kvf_error_set(err, KVF_EINPUTMOD, "the kernel modified its input %s", which);
    kvf_bf16 *want = have + pe;
    int rc = 0;
    for (int64_t i = 0; i < h->num_read_pages && !rc; ++i)
        rc = locate_in_page(h, h->pages[i], h->page_used[i], have, want, err);
    // Not in a page the case reads: the whole-pool checksum saw a poisoned page change.
    if (!rc && (size_t)h->num_pages * h->page_bytes <= kWholePoolCheckBytes) {
        unsigned char *read = (unsigned char *)calloc((size_t)h->num_pages + 1, 1);
        for (int64_t i = 0; read && i < h->num_read_pages; ++i)
            read[h->pages[i]] = 1;
        for (int64_t p = 0; read && p < h->num_pages && !rc; ++p)
            if (!read[p]) rc = locate_in_page(h, p, 0, have, want, err);
        free(read);
    }
    free(have);
    if (!rc) rc = kvf_error_set(err, KVF_EINPUTMOD, "the kernel modified its input %s", which);
    return rc;
}

// ---- one checked run -------------------------------------------------------------------------

// Runs slot k once on the loaded inputs with fresh poison, then every check of kernel_host.h.
int checked_run(Host *h, int k, kvf_bf16 *o, float *lse, kvf_error *err) {
    Slot *s = &h->slots[k];
    if (s->rc) {
        if (err) *err = s->why;
        return s->rc;
    }
    const Layout &L = h->L;
    unsigned char *io = (unsigned char *)h->d_io;
    KVF_CUDA_TRY(cudaMemcpyAsync(io, h->h_up, L.up_b, cudaMemcpyHostToDevice, h->stream),
                 "Uploading the inputs");
    const CheckParams cp = check_params(h);
    const int64_t pool_vecs = cp.whole_vecs > 0 ? cp.whole_vecs : cp.n_ids * cp.page_vec;
    int64_t most = pool_vecs > cp.in_vecs ? pool_vecs : cp.in_vecs;
    if ((int64_t)((L.out_b + L.ws_region) / 4) > most)
        most = (int64_t)((L.out_b + L.ws_region) / 4);
    pre_kernel<<<dim3((unsigned)check_grid(most), 2), 256, 0, h->stream>>>(cp);
    KVF_CUDA_TRY(cudaGetLastError(), "Launching the pre-run check kernel");
    kvf_plugin_args a;
    fill_args(h, s, &a);
    char msg[KVF_ERROR_MSG_MAX] = {0};
    const int st = s->desc->run(s->state, &a, msg, sizeof msg - 1);
    // The kernel's own launch errors first: they are the kernel's, not the host's.
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) {
        most = pool_vecs > cp.in_vecs ? pool_vecs : cp.in_vecs;
        if ((int64_t)L.ws_region > most) most = (int64_t)L.ws_region;
        post_kernel<<<dim3((unsigned)check_grid(most), 2), 256, 0, h->stream>>>(cp);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(h->h_down, io + L.res_at, kResBytes + L.out_b, cudaMemcpyDeviceToHost,
                            h->stream);
    // The stream, not the device: other streams' work (a plugin's own) is none of this run's.
    const cudaError_t se = cudaStreamSynchronize(h->stream);
    if (e == cudaSuccess) e = se;
    if (e != cudaSuccess)
        return kvf_error_set(err, KVF_EDEVICE, "%s failed on the device: %s (%s)", s->desc->name,
                             cudaGetErrorName(e), cudaGetErrorString(e));
    int rc = kvf__host_status(s->desc, st, msg, "run", err);
    const unsigned char *down = (const unsigned char *)h->h_down + kResBytes;
    // The outputs go back whatever the checks find, so a finding shows what was written.
    if (L.o_b) memcpy(o, down + L.o, L.o_b);
    if (L.lse_b) memcpy(lse, down + L.lse, L.lse_b);
    if (rc) return rc;
    CheckResult r;
    memcpy(&r, h->h_down, sizeof r);
    if (!rc) rc = kvf__host_check_guard(down, kG, "o", "before", err);
    if (!rc) rc = kvf__host_check_guard(down + L.o + L.o_b, kG, "o", "after", err);
    if (!rc) rc = kvf__host_check_guard(down + L.lse - kG, kG, "lse", "before", err);
    if (!rc) rc = kvf__host_check_guard(down + L.lse + L.lse_b, kG, "lse", "after", err);
    if (!rc && r.ws_first != kNone) {
        const int after = r.ws_first >= kG;
        const size_t dist = after ? (size_t)r.ws_first - kG - L.ws_bytes + 1 : kG - r.ws_first;
        rc = kvf_error_set(err, KVF_EOOBWRITE,
                           "the kernel wrote outside the workspace: byte %zu %s it changed", dist,
                           after ? "past its end" : "before its start");
    }
    if (!rc && r.before[2] != r.after[2]) rc = locate_in_change(h, err);
    if (!rc && (r.before[0] != r.after[0] || r.before[1] != r.after[1]))
        rc = locate_pool_change(h, &r, err);
    if (!rc) rc = kvf__host_check_outputs(h->c, o, lse, err);
    return rc;
}

// Everything of one host case before the run: validation, plans, layout, images, pages.
int load_case(Host *h, const kvf_case *c, kvf_error *err) {
    h->loaded = 0;
    h->c = c;
    h->pools_known = 1;
    int rc = check_case(c, err);
    if (rc) return rc;
    if (c->kv_indptr[c->batch_size] > 0 && (!c->k_cache || !c->v_cache))
        return kvf_error_set(err, KVF_EINVAL, "the case has no k_cache or v_cache");
    kvf_kernel_shape(c, &h->shape);
    plan_slots(h, c);
    if (h->n == 1 && h->slots[0].rc) {
        if (err) *err = h->slots[0].why;
        return h->slots[0].rc;
    }
    h->page_bytes = (size_t)kvf_case_page_elems(c) * 2;
    h->num_pages = c->num_pages;
    rc = read_pages(h, c, err);
    if (!rc) rc = layout(h, c, (size_t)h->num_read_pages * sizeof(int64_t), err);
    if (rc) return rc;
    build_images(h, c);
    if (h->num_read_pages)
        memcpy((unsigned char *)h->h_up + h->L.up_b, h->pages,
               (size_t)h->num_read_pages * sizeof(int64_t));
    rc = pools_upload(h, c, err);
    if (rc) return rc;
    h->loaded = 1;
    return 0;
}

// After a failure past the first change to the pools nothing is known about what reached
// them: poison them whole next time. Copies still queued may read the pinned buffers the next
// run refills, and a pending error must not be blamed on the next run.
void after_failure(Host *h) {
    if (h->pool_touched) h->pool_clean = 0;
    (void)cudaStreamSynchronize(h->stream);
    (void)cudaGetLastError();
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Entry points (kernel_host.h)

extern "C" int kvf__cuda_host_create(const kvf_plugin_kernel *desc, void **out, kvf_error *err) {
    return kvf__cuda_host_create_many(&desc, 1, out, err);
}

extern "C" int kvf__cuda_host_create_many(const kvf_plugin_kernel *const *descs, int n, void **out,
                                          kvf_error *err) {
    *out = NULL;
    if (n < 1) return kvf_error_set(err, KVF_EINVAL, "a CUDA host needs at least one kernel");
    Host *h = NULL;
    const int rc = host_create(descs, n, &h, err);
    if (!rc) *out = h;
    return rc;
}

extern "C" int kvf__cuda_host_run(void *hv, const kvf_case *c, kvf_bf16 *o, float *lse,
                                  kvf_error *err) {
    Host *h = (Host *)hv;
    if (!h || !c || (c->batch_size > 0 && (!o || !lse)))
        return kvf_error_set(err, KVF_EINVAL, "NULL host, case or output buffer");
    // A failed API call of an earlier run (already reported) must not be blamed on this one.
    (void)cudaGetLastError();
    h->pool_touched = 0;
    int rc = load_case(h, c, err);
    if (!rc) rc = checked_run(h, 0, o, lse, err);
    if (rc && rc != KVF_EUNSUPPORTED) after_failure(h);
    if (rc == KVF_EINPUTMOD) h->pool_clean = 0; // the kernel wrote into the pools
    return rc;
}

extern "C" void kvf__cuda_host_describe(void *h, char *buf, size_t buf_size) {
    kvf__cuda_host_describe_at(h, 0, buf, buf_size);
}

extern "C" void kvf__cuda_host_destroy(void *hv) {
    Host *h = (Host *)hv;
    if (!h) return;
    if (h->stream) cudaStreamSynchronize(h->stream);
    for (int i = 0; i < h->n; ++i)
        if (h->slots[i].desc->destroy) h->slots[i].desc->destroy(h->slots[i].state);
    if (h->stream) cudaStreamDestroy(h->stream);
    void *dev[] = {h->d_k, h->d_v, h->d_io, h->d_stage, h->d_ids, h->d_written};
    for (void *d : dev)
        if (d) cudaFree(d);
    void *pinned[] = {h->h_stage, h->h_up, h->h_down};
    for (void *p : pinned)
        if (p) cudaFreeHost(p);
    free(h->pages);
    free(h->page_used);
    free(h->page_sort);
    free(h->slots);
    free(h);
}

// ---- for `kvfuzz bench` ----------------------------------------------------------------------

extern "C" int kvf__cuda_host_load_generated(void *hv, const kvf_case *c, uint64_t seed,
                                             kvf_error *err) {
    Host *h = (Host *)hv;
    (void)cudaGetLastError();
    h->loaded = 0;
    h->c = c;
    h->pools_known = 0;
    int rc = check_case(c, err);
    if (rc) return rc;
    kvf_kernel_shape(c, &h->shape);
    plan_slots(h, c);
    h->page_bytes = (size_t)kvf_case_page_elems(c) * 2;
    h->num_pages = c->num_pages;
    if (h->page_bytes % 16)
        return kvf_error_set(err, KVF_EUNSUPPORTED, "a page of %zu bytes is not a multiple of 16",
                             h->page_bytes);
    rc = read_pages(h, c, err);
    if (!rc) rc = layout(h, c, (size_t)h->num_read_pages * sizeof(int64_t), err);
    if (rc) return rc;
    build_images(h, c);
    const size_t pool = (size_t)c->num_pages * h->page_bytes;
    h->pool_touched = 1;
    h->pool_clean = 0; // generated values everywhere: no longer poison outside a page list
    rc = pools_reserve(h, pool, err);
    if (rc || pool == 0) return rc;
    const int64_t elems = (int64_t)(pool / 2);
    if ((rc = kvf_cuda_fill_bf16((kvf_bf16 *)h->d_k, elems, seed * 3 + 1, 1.0f, h->stream, err)) ||
        (rc = kvf_cuda_fill_bf16((kvf_bf16 *)h->d_v, elems, seed * 3 + 2, 1.0f, h->stream, err)))
        return rc;
    // Poison what no sequence reads: whole pages nobody references, tails of last pages.
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
            poison_tails_kernel<<<grid_for(n * page_vec), 256, 0, h->stream>>>(
                (const int64_t *)d_tail, (const int32_t *)((char *)d_tail + (size_t)n * 8), n,
                page_vec, page_vec / c->page_size, (uint4 *)h->d_k, (uint4 *)h->d_v);
            e = cudaGetLastError();
        }
        if (e == cudaSuccess) e = cudaStreamSynchronize(h->stream);
        if (!rc && e != cudaSuccess) rc = kvf__cuda_fail(err, e, "Poisoning generated pools");
    }
    free(used);
    free(ids);
    free(cnt);
    if (d_tail) cudaFree(d_tail);
    if (rc) return rc;
    // The pool checksum of a large pool covers the pages the case reads.
    if (h->num_read_pages) {
        rc = kvf__cuda_dev_grow(&h->d_written, &h->written_cap, (size_t)h->num_read_pages * 8,
                                "Allocating the page list", err);
        if (rc) return rc;
        KVF_CUDA_TRY(cudaMemcpy(h->d_written, h->pages, (size_t)h->num_read_pages * 8,
                                cudaMemcpyHostToDevice),
                     "Uploading the page list");
    }
    h->written_pages = h->num_read_pages;
    h->written_page_bytes = h->page_bytes;
    KVF_CUDA_TRY(cudaStreamSynchronize(h->stream), "Generating the pools");
    h->loaded = 1;
    return 0;
}

extern "C" int kvf__cuda_host_check(void *hv, int k, kvf_bf16 *o, float *lse, kvf_error *err) {
    Host *h = (Host *)hv;
    if (!h->loaded || k < 0 || k >= h->n)
        return kvf_error_set(err, KVF_EINVAL, "no inputs loaded, or no kernel %d", k);
    const int rc = checked_run(h, k, o, lse, err);
    if (rc && rc != KVF_EUNSUPPORTED) {
        (void)cudaStreamSynchronize(h->stream);
        (void)cudaGetLastError();
    }
    return rc;
}

extern "C" int kvf__cuda_host_launch(void *hv, int k, kvf_error *err) {
    Host *h = (Host *)hv;
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

extern "C" void *kvf__cuda_host_stream(void *hv) {
    return ((Host *)hv)->stream;
}

extern "C" void kvf__cuda_host_describe_at(void *hv, int k, char *buf, size_t buf_size) {
    Host *h = (Host *)hv;
    if (!buf || !buf_size) return;
    buf[0] = 0;
    if (!h || k < 0 || k >= h->n) return;
    const Slot *s = &h->slots[k];
    if (s->desc->describe && s->rc == 0) s->desc->describe(s->state, buf, buf_size);
    buf[buf_size - 1] = 0;
}
