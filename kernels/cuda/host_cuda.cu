// The CUDA buffer host (kernel_host.h): the device buffers every KVF_PLUGIN_DEVICE_CUDA kernel
// descriptor runs on, the built-in `cuda`, `cuda-naive` and mutants as much as a plugin.
//
// Memory of one host:
//   K and V pools   [P][S][Hk][D] each, every byte KVF_HOST_POISON_INPUT except the slots a
//                   sequence reads. Kept between runs: a run writes only the pages the case
//                   reads and re-poisons the pages the previous case wrote that this one does
//                   not read. Filling whole pools every run (up to 2 x 8 GiB for page ids past
//                   65535) made the GPU the bottleneck of a campaign.
//   h_up            pinned and mapped (kernels read it in place): in, the page ids to
//                   re-poison, the page ids the case reads, the stage (the K images of the
//                   pages read, then their V images); each piece 256-byte aligned.
//   d_io            [in | ids | result | out | ws]: in, out and ws made of pieces [guard | data |
//                   guard] (guards of KVF_HOST_GUARD_BYTES):
//                     in     q, kv_indptr, kv_indices, kv_last_page_len: what the kernel reads;
//                     ids    the page ids the case reads;
//                     result what the check kernels found (CheckResult);
//                     out    o (KVF_HOST_POISON_O) and lse (KVF_HOST_POISON_LSE);
//                     ws     the descriptor's workspace, KVF_HOST_POISON_BYTE.
//   h_down          pinned and mapped: the result block and `out`, written by the post kernel.
// One run is three CUDA calls around the descriptor's run(): the prepare kernel (copies in and
// ids from h_up, re-poisons and writes the pages, poisons out and ws and writes their guards,
// then checksums the pools and `in`), run() on the host's stream, the post kernel (workspace
// guards, the checksums again, the result and out into h_down), one stream synchronization.
// Each CUDA call costs the host microseconds (about 4 a launch and 2.5 a copy on an H200 host)
// and the device as much again before the next can start, more than a small case's kernels
// run, so the calls are few and the check kernels reach host memory themselves instead of
// waiting for copies. A case whose pages exceed the stage (KVF_CUDA_STAGE_BYTES) goes up in
// batches before the run instead, each its own copy and scatter kernel. Finding where a check
// failed (which byte, which page) costs extra copies, paid only when it fails.
//
// Checksums, not copies: comparing against a second device copy would double the pools'
// memory and the inputs' upload, and downloading them would cost more than the kernel. The
// pool checksums cover the whole pools when each is at most kWholePoolCheckBytes, otherwise
// the pages the case reads: a write elsewhere into a larger pool goes unseen (the CPU host
// likewise checks only what it wrote in pools past its own bound).
//
// KVF_CUDA_HOST_TIMING=1 prints, every 5 s, where a run's host time goes (docs/performance.md).
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "cuda_error.cuh"
#include "device_buffer.cuh"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvfuzz/cuda_kernels.h"

extern "C" {
#include "kvfuzz/kernel.h"
#include "host_internal.h"
}

namespace {

namespace cg = cooperative_groups;

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

// What the check kernels found, downloaded with the outputs. Set by the prepare kernel.
struct CheckResult {
    unsigned long long ws_first;  // first workspace guard byte that changed
    unsigned long long before[3]; // checksums of K, V and `in` before the run
    unsigned long long after[3];  // and after
};

static_assert(sizeof(CheckResult) <= kResBytes, "the result block holds CheckResult");

struct CheckParams {
    uint4 *k, *v;            // the pools
    const int64_t *ids;      // pages to checksum (n_ids of page_vec vectors) ...
    int64_t n_ids, page_vec; // ...
    int64_t whole_vecs;      // ... or, when > 0, the first whole_vecs vectors of each pool
    // What the prepare kernel reads from the mapped h_up: `in` (in_vecs vectors, copied to
    // d_io's `in`), the page ids the case reads (n_ids, copied to `ids`), the pages to
    // re-poison (n_poison of poison_vec vectors each: the geometry of the case that wrote them)
    // and the pages it writes (n_scatter, from stage).
    const uint4 *up_in;
    const int64_t *up_ids, *poison;
    int64_t n_poison, poison_vec;
    const uint4 *stage;
    int64_t n_scatter;
    const uint4 *in; // in_vecs vectors
    int64_t in_vecs;
    unsigned char *out; // [guard | o | guard], [lse | guard], padded: out_b bytes
    size_t out_b, o_at, o_b, lse_at, lse_b;
    unsigned char *ws; // [guard | ws_bytes | guard], padded: ws_region bytes
    size_t ws_bytes, ws_region;
    CheckResult *res;
    unsigned char *down; // the mapped h_down: the result block, then `out`, after the run
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
    poison_pages(p.poison, p.n_poison, p.poison_vec, p.k, p.v);
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
                                    uint4 *v_pool) {
    poison_pages(ids, n, page_vec, k_pool, v_pool);
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

// Offsets of one loaded case in h_up (`in`, then the lists and the stage) and in d_io.
struct Layout {
    size_t q, ip, ix, ll;         // data offsets in `in`
    size_t q_b, ip_b, ix_b, ll_b; // data bytes
    size_t in_b;                  // bytes of `in`, at 0 in both
    size_t poison_at, ids_at;     // h_up: the page ids to re-poison, the page ids the case reads
    size_t stage_at, stage_b;     // h_up: the stage, K images of stage_pages pages, then V images
    size_t image_b;               // bytes of h_up's image
    size_t dev_ids_at;            // d_io: the page ids the case reads
    size_t res_at, out_at;        // d_io: the result block, `out`
    size_t o, lse;                // data offsets in `out`
    size_t o_b, lse_b, out_b;
    size_t ws_at, ws_bytes, ws_region;
    size_t total;
};

// KVF_CUDA_HOST_TIMING: host seconds per phase of a run, and device seconds between events
// recorded on the stream between the run's calls, summed over the runs.
enum HostPhase { kPlan, kImages, kPools, kCalls, kRunCall, kWait, kChecks, kHostPhases };
enum DevicePhase { kPrepare, kRunDev, kPost, kDevicePhases };

struct Timing {
    int on;
    double next_report;
    long long runs;
    double host[kHostPhases], dev[kDevicePhases];
    double last; // when the phase being timed began
    cudaEvent_t ev[kDevicePhases + 1];
    int events;  // the events exist
    int pending; // events recorded for this run, read after its synchronization
};

double now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Ends the phase being timed as `ph` and starts the next.
void host_mark(Timing &t, int ph) {
    if (!t.on) return;
    const double now = now_s();
    t.host[ph] += now - t.last;
    t.last = now;
}

// Records event i on the stream: the device phase i - 1 ends there.
void dev_mark(Timing &t, int i, cudaStream_t st) {
    if (t.on && t.events) (void)cudaEventRecord(t.ev[i], st);
}

// What checked_enqueue leaves for checked_finish.
struct Enqueued {
    int k;                       // the slot run
    int st;                      // what its run() returned
    cudaError_t e;               // the first launch error: run()'s own, else the post kernel's
    char msg[KVF_ERROR_MSG_MAX]; // run()'s message
};

struct Host {
    Slot *slots;
    int n;
    cudaStream_t stream;
    int coop_blocks; // most blocks of prepare_kernel resident at once (a cooperative launch)
    // The pools. Invariant while pool_clean is set: every byte of [0, pool_cap) is poison
    // except the pages listed in `written` (n_written ids of written_page_bytes each), which
    // hold the last loaded case's pages once its prepare kernel ran. A fresh allocation, a
    // device-generated load, or a run that fails after it began changing the pools
    // (pool_touched) clears pool_clean, and the next run poisons the whole pool again. A case
    // rejected before that (malformed, unsupported) leaves the pools as they were.
    void *d_k, *d_v;
    size_t pool_cap;
    int pool_clean, pool_touched;
    int64_t *written;
    size_t written_cap;
    int64_t n_written;
    size_t written_page_bytes;
    size_t poison_page_bytes; // the geometry of the pages the loaded case re-poisons
    int verify_pool;          // KVF_CUDA_VERIFY_POOL: check the invariant above every run
    size_t stage_bytes;       // the stage's capacity (KVF_CUDA_STAGE_BYTES)
    // The pages the loaded case reads and how many slots of each (host; for locating a
    // changed pool byte).
    int64_t *pages;
    int32_t *page_used;
    void *page_sort; // scratch of read_pages
    size_t pages_cap;
    int64_t num_read_pages;
    // How the loaded case's pages reach the pools: the prepare kernel re-poisons n_poison pages
    // and writes n_scatter (all the pages read, or 0 once a staged upload or the device
    // generator wrote them).
    int64_t n_poison, n_scatter;
    // d_io and the mapped host buffers the prepare and post kernels reach in place (d_up and
    // d_down their device addresses): h_up = `in`, the lists and the stage, h_down = [result |
    // out] after the run. d_stage holds one batch of a staged upload.
    void *d_io, *h_up, *d_up, *h_down, *d_down, *d_stage;
    size_t io_cap, up_cap, down_cap, stage_cap;
    Layout L;
    kvf_plugin_shape shape;
    const kvf_case *c; // the loaded case: shape, table, q (must outlive the load)
    int pools_known;   // its K/V are what the pools hold (not so for generated pools: then a
                       // changed pool byte is reported without its place)
    int loaded;
    size_t page_bytes;
    int64_t num_pages;
    Enqueued q;    // the run submitted and not yet collected
    int submitted; // kvf__cuda_host_submit queued a run that kvf__cuda_host_collect has not
                   // finished
    Timing t;
};

// Adds the device phases of a synchronized run; every 5 s of runs, prints the sums so far (a
// worker may be killed at any moment: no report at exit).
void timing_end_run(Timing &t) {
    if (!t.on) return;
    if (t.pending) {
        for (int i = 0; i < kDevicePhases; ++i) {
            float ms = 0;
            if (cudaEventElapsedTime(&ms, t.ev[i], t.ev[i + 1]) == cudaSuccess)
                t.dev[i] += 1e-3 * ms;
        }
        (void)cudaGetLastError();
        t.pending = 0;
    }
    t.runs++;
    const double now = now_s();
    if (t.next_report == 0) t.next_report = now + 5;
    if (now < t.next_report) return;
    t.next_report = now + 5;
    const double us = 1e6 / (double)t.runs;
    fprintf(stderr,
            "kvfuzz cuda host %d: %lld runs; host microseconds per run: plans %.1f, images %.1f, "
            "pools %.1f, calls %.1f (of them run() %.1f), waiting %.1f, checks %.1f; device: "
            "prepare %.1f, run %.1f, post %.1f\n",
            (int)getpid(), t.runs, t.host[kPlan] * us, t.host[kImages] * us, t.host[kPools] * us,
            (t.host[kCalls] + t.host[kRunCall]) * us, t.host[kRunCall] * us, t.host[kWait] * us,
            t.host[kChecks] * us, t.dev[kPrepare] * us, t.dev[kRunDev] * us, t.dev[kPost] * us);
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
    const char *timing = getenv("KVF_CUDA_HOST_TIMING");
    h->t.on = timing && *timing && strcmp(timing, "0") != 0;
    if (h->t.on) {
        h->t.events = 1;
        for (int i = 0; i <= kDevicePhases; ++i)
            if (cudaEventCreate(&h->t.ev[i]) != cudaSuccess) h->t.events = 0;
        (void)cudaGetLastError();
    }
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
    if (!rc) { // a cooperative launch must fit on the device whole: both check kernels are
        int dev = 0, sms = 0, pre = 0, post = 0;
        cudaError_t e = cudaGetDevice(&dev);
        if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (e == cudaSuccess)
            e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&pre, prepare_kernel, 256, 0);
        if (e == cudaSuccess)
            e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&post, post_kernel, 256, 0);
        const int per_sm = pre < post ? pre : post;
        if (e != cudaSuccess)
            rc = kvf__cuda_fail(err, e, "Querying the device for the check kernels");
        else if (per_sm * sms < 1)
            rc = kvf_error_set(err, KVF_EDEVICE, "the check kernels fit on no multiprocessor");
        h->coop_blocks = per_sm * sms;
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

// The self-check of KVF_CUDA_VERIFY_POOL: once the prepare kernel has written the case's pages,
// every byte of both pools outside them must be poison. Scans the whole allocation, so tests
// only.
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

// The pages the pools hold from the last case (`written`) that the loaded case does not read,
// into dst: what the prepare kernel re-poisons. Both lists ascend, so one merge pass.
int64_t pages_no_longer_read(const Host *h, int64_t *dst) {
    int64_t n = 0, j = 0;
    for (int64_t i = 0; i < h->n_written; ++i) {
        const int64_t p = h->written[i];
        while (j < h->num_read_pages && h->pages[j] < p)
            ++j;
        if (j < h->num_read_pages && h->pages[j] == p) continue;
        dst[n++] = p;
    }
    return n;
}

// Whether the loaded case's pages go up in batches before the run (more than one stage of
// them) rather than through the prepare kernel. Sets n_poison (-1: the pages of `written` that
// this case does not read, counted by write_lists; all of them when their geometry differs,
// since their bytes may then overlap this case's pages) and n_scatter, and returns the pages
// the stage holds. Needs pools_reserve first: a fresh allocation is poisoned whole, so nothing
// is re-poisoned.
int64_t plan_pages(Host *h, int *staged) {
    const int64_t per_batch = (int64_t)(h->stage_bytes / (2 * h->page_bytes));
    *staged = h->num_read_pages > per_batch;
    h->n_scatter = *staged ? 0 : h->num_read_pages;
    h->poison_page_bytes = h->written_page_bytes;
    if (!h->pool_clean)
        h->n_poison = 0;
    else if (*staged || h->written_page_bytes != h->page_bytes)
        h->n_poison = h->n_written;
    else
        h->n_poison = -1;
    return *staged ? per_batch : h->num_read_pages;
}

// The images of the n pages the case reads from its i-th on into `stage`: their K images, then
// their V images (the layout the scatter kernels read).
void write_page_images(const Host *h, const kvf_case *c, int64_t i0, int64_t n, kvf_bf16 *stage) {
    const int64_t page_elems = (int64_t)(h->page_bytes / 2);
    for (int64_t i = 0; i < n; ++i) {
        const int64_t p = h->pages[i0 + i];
        const int32_t used = h->page_used[i0 + i];
        kvf__host_page_image(c, c->k_cache, p, used, stage + i * page_elems);
        kvf__host_page_image(c, c->v_cache, p, used, stage + (n + i) * page_elems);
    }
}

// The pages in batches through d_stage, before the run: re-poisons the listed pages of
// `written` (in their own geometry), then writes each batch, waiting for the previous batch's
// copy before refilling the stage. The lists are in h_up already (write_lists).
int upload_staged(Host *h, const kvf_case *c, kvf_error *err) {
    const Layout &L = h->L;
    unsigned char *io = (unsigned char *)h->d_io, *up = (unsigned char *)h->h_up;
    const size_t poison_b = (size_t)h->n_poison * sizeof(int64_t);
    int rc =
        kvf__cuda_dev_grow(&h->d_stage, &h->stage_cap, poison_b > L.stage_b ? poison_b : L.stage_b,
                           "Allocating device staging", err);
    if (rc) return rc;
    KVF_CUDA_TRY(cudaMemcpyAsync(io + L.dev_ids_at, up + L.ids_at,
                                 (size_t)h->num_read_pages * sizeof(int64_t),
                                 cudaMemcpyHostToDevice, h->stream),
                 "Uploading the page list");
    if (h->n_poison > 0) {
        KVF_CUDA_TRY(cudaMemcpyAsync(h->d_stage, up + L.poison_at, poison_b, cudaMemcpyHostToDevice,
                                     h->stream),
                     "Uploading the page list");
        const int64_t page_vec = (int64_t)(h->poison_page_bytes / 16);
        poison_pages_kernel<<<grid_for(h->n_poison * page_vec), 256, 0, h->stream>>>(
            (const int64_t *)h->d_stage, h->n_poison, page_vec, (uint4 *)h->d_k, (uint4 *)h->d_v);
        KVF_CUDA_TRY(cudaGetLastError(), "Launching the page poison kernel");
    }
    h->n_poison = 0;
    const int64_t per_batch = (int64_t)(L.stage_b / (2 * h->page_bytes));
    const int64_t page_elems = (int64_t)(h->page_bytes / 2), page_vec = page_elems / 8;
    kvf_bf16 *stage = (kvf_bf16 *)(up + L.stage_at);
    for (int64_t i0 = 0; i0 < h->num_read_pages; i0 += per_batch) {
        const int64_t left = h->num_read_pages - i0, n = left < per_batch ? left : per_batch;
        if (i0 > 0) KVF_CUDA_TRY(cudaStreamSynchronize(h->stream), "Uploading pages");
        write_page_images(h, c, i0, n, stage);
        KVF_CUDA_TRY(cudaMemcpyAsync(h->d_stage, stage, (size_t)(2 * n) * h->page_bytes,
                                     cudaMemcpyHostToDevice, h->stream),
                     "Uploading pages");
        scatter_pages_kernel<<<grid_for(2 * n * page_vec), 256, 0, h->stream>>>(
            (const uint4 *)h->d_stage, (const int64_t *)(io + L.dev_ids_at) + i0, n, page_vec,
            (uint4 *)h->d_k, (uint4 *)h->d_v);
        KVF_CUDA_TRY(cudaGetLastError(), "Launching the page scatter kernel");
    }
    return 0;
}

// Remembers the loaded case's pages as what the pools hold once it runs (the next case
// re-poisons them).
int note_written(Host *h, kvf_error *err) {
    const int64_t n = h->num_read_pages;
    if ((size_t)n > h->written_cap) {
        int64_t *w = (int64_t *)realloc(h->written, (size_t)n * sizeof *w);
        if (!w) return kvf_error_set(err, KVF_ENOMEM, "out of host memory for the page list");
        h->written = w;
        h->written_cap = (size_t)n;
    }
    if (n) memcpy(h->written, h->pages, (size_t)n * sizeof *h->written);
    h->n_written = n;
    h->written_page_bytes = h->page_bytes;
    return 0;
}

// ---- layout and images -------------------------------------------------------------------

// Lays out h_up and d_io for the shape, the slots' workspaces, poison_slots page ids to
// re-poison (at most), the pages the case reads and a stage of stage_pages pages (none when
// they go up in batches first); sizes every buffer.
int layout(Host *h, const kvf_case *c, int64_t poison_slots, int64_t stage_pages, kvf_error *err) {
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
    const size_t ids_b = align256((size_t)h->num_read_pages * sizeof(int64_t));
    L.poison_at = L.in_b;
    L.ids_at = L.poison_at + align256((size_t)poison_slots * sizeof(int64_t));
    L.stage_at = L.ids_at + ids_b;
    L.stage_b = (size_t)(2 * stage_pages) * h->page_bytes;
    L.image_b = L.stage_at + L.stage_b;
    L.dev_ids_at = L.in_b;
    L.res_at = L.dev_ids_at + ids_b;
    L.out_at = L.res_at + kResBytes;
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
        rc = kvf__cuda_mapped_grow(&h->h_up, &h->d_up, &h->up_cap, L.image_b,
                                   "Allocating pinned inputs", err);
    if (!rc)
        rc = kvf__cuda_mapped_grow(&h->h_down, &h->d_down, &h->down_cap, kResBytes + L.out_b,
                                   "Allocating pinned outputs", err);
    return rc;
}

// h_up's image of `in`: guards and padding KVF_HOST_GUARD_BYTE. It also stays what `in` must
// hold after the run, for locating a changed byte.
void build_images(Host *h, const kvf_case *c) {
    const Layout &L = h->L;
    unsigned char *up = (unsigned char *)h->h_up;
    kvf__host_fill_guard(up, L.in_b);
    if (L.q_b) memcpy(up + L.q, c->q, L.q_b);
    memcpy(up + L.ip, c->kv_indptr, L.ip_b);
    if (L.ix_b) memcpy(up + L.ix, c->kv_indices, L.ix_b);
    if (L.ll_b) memcpy(up + L.ll, c->kv_last_page_len, L.ll_b);
}

// h_up's lists (the pages to re-poison, n_poison of them from here on; the pages read) and, for
// a case that goes up with the run, the stage: every page's K image, then every V image.
void write_lists(Host *h, const kvf_case *c, int staged) {
    const Layout &L = h->L;
    unsigned char *up = (unsigned char *)h->h_up;
    int64_t *poison = (int64_t *)(up + L.poison_at);
    if (h->n_poison < 0)
        h->n_poison = pages_no_longer_read(h, poison);
    else if (h->n_poison > 0)
        memcpy(poison, h->written, (size_t)h->n_poison * sizeof *poison);
    if (h->num_read_pages)
        memcpy(up + L.ids_at, h->pages, (size_t)h->num_read_pages * sizeof(int64_t));
    if (staged) return;
    write_page_images(h, c, 0, h->num_read_pages, (kvf_bf16 *)(up + L.stage_at));
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
    unsigned char *io = (unsigned char *)h->d_io, *up = (unsigned char *)h->d_up;
    CheckParams p;
    memset(&p, 0, sizeof p);
    p.k = (uint4 *)h->d_k, p.v = (uint4 *)h->d_v;
    p.page_vec = (int64_t)(h->page_bytes / 16);
    // The pages the case reads: where the prepare kernel writes them, and what the checksums
    // cover in a pool too large to cover whole.
    p.ids = (const int64_t *)(io + L.dev_ids_at);
    p.n_ids = h->num_read_pages;
    const size_t pool = (size_t)h->num_pages * h->page_bytes;
    if (pool > 0 && pool <= kWholePoolCheckBytes) p.whole_vecs = (int64_t)(pool / 16);
    p.up_in = (const uint4 *)up;
    p.up_ids = (const int64_t *)(up + L.ids_at);
    p.poison = (const int64_t *)(up + L.poison_at);
    p.n_poison = h->n_poison;
    p.poison_vec = (int64_t)(h->poison_page_bytes / 16);
    p.stage = (const uint4 *)(up + L.stage_at);
    p.n_scatter = h->n_scatter;
    p.in = (const uint4 *)io;
    p.in_vecs = (int64_t)(L.in_b / 16);
    p.out = io + L.out_at, p.out_b = L.out_b;
    p.o_at = L.o, p.o_b = L.o_b, p.lse_at = L.lse, p.lse_b = L.lse_b;
    p.ws = io + L.ws_at, p.ws_bytes = L.ws_bytes, p.ws_region = L.ws_region;
    p.res = (CheckResult *)(io + L.res_at);
    p.down = (unsigned char *)h->d_down;
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

// Blocks of a cooperative check kernel for `items` units of device work (check_grid's) and
// `host_vecs` vectors of host memory (one a thread), no more than fit on the device at once.
unsigned coop_grid(const Host *h, int64_t items, int64_t host_vecs) {
    int64_t b = check_grid(items);
    if ((host_vecs + 255) / 256 > b) b = (host_vecs + 255) / 256;
    return (unsigned)(b < h->coop_blocks ? b : h->coop_blocks);
}

// Enqueues slot k's run on the loaded inputs with fresh poison: the prepare kernel, run(), the
// post kernel, all on the host's stream; what the finish needs goes into h->q. Returns only the
// host's own errors (a failed prepare launch); run()'s status and launch errors are the
// finish's to report, after the synchronization, as a run reports them.
int checked_enqueue(Host *h, int k, kvf_error *err) {
    Slot *s = &h->slots[k];
    if (s->rc) {
        if (err) *err = s->why;
        return s->rc;
    }
    const Layout &L = h->L;
    CheckParams cp = check_params(h);
    const int64_t pool_vecs = cp.whole_vecs > 0 ? cp.whole_vecs : cp.n_ids * cp.page_vec;
    int64_t most = pool_vecs > cp.in_vecs ? pool_vecs : cp.in_vecs;
    const int64_t items[] = {(int64_t)((L.out_b + L.ws_region) / 4), cp.n_ids,
                             cp.n_poison * cp.poison_vec, 2 * cp.n_scatter * cp.page_vec};
    for (int64_t x : items)
        if (x > most) most = x;
    // What the prepare kernel reads from host memory goes one vector per thread: each read
    // waits a PCIe round trip, so the threads in flight set the speed, not the device's memory.
    const int64_t host_vecs = cp.in_vecs + cp.n_ids + cp.n_poison + 2 * cp.n_scatter * cp.page_vec;
    void *args[] = {&cp};
    dev_mark(h->t, kPrepare, h->stream);
    KVF_CUDA_TRY(cudaLaunchCooperativeKernel((const void *)prepare_kernel,
                                             dim3(coop_grid(h, most, host_vecs)), dim3(256), args,
                                             0, h->stream),
                 "Launching the prepare kernel");
    dev_mark(h->t, kRunDev, h->stream);
    if (h->verify_pool && h->pools_known && h->num_pages > 0) {
        const int vr = pools_verify(h, err);
        if (vr) return vr;
    }
    kvf_plugin_args a;
    fill_args(h, s, &a);
    Enqueued &q = h->q;
    q.k = k;
    memset(q.msg, 0, sizeof q.msg);
    host_mark(h->t, kCalls);
    q.st = s->desc->run(s->state, &a, q.msg, sizeof q.msg - 1);
    host_mark(h->t, kRunCall);
    dev_mark(h->t, kPost, h->stream);
    // The kernel's own launch errors first: they are the kernel's, not the host's.
    cudaError_t &e = q.e;
    e = cudaGetLastError();
    if (e == cudaSuccess) {
        most = pool_vecs > cp.in_vecs ? pool_vecs : cp.in_vecs;
        const int64_t out_vecs = (int64_t)(L.out_b / 16);
        if ((int64_t)L.ws_region > most) most = (int64_t)L.ws_region;
        if (out_vecs > most) most = out_vecs;
        e = cudaLaunchCooperativeKernel((const void *)post_kernel,
                                        dim3(coop_grid(h, most, out_vecs)), dim3(256), args, 0,
                                        h->stream);
    }
    dev_mark(h->t, kDevicePhases, h->stream);
    host_mark(h->t, kCalls);
    return 0;
}

// Waits for what checked_enqueue queued, then makes every check of kernel_host.h; o and lse
// receive the outputs.
int checked_finish(Host *h, kvf_bf16 *o, float *lse, kvf_error *err) {
    const Enqueued &q = h->q;
    Slot *s = &h->slots[q.k];
    const Layout &L = h->L;
    cudaError_t e = q.e;
    // Another host's work since the enqueue is none of this run's time.
    if (h->t.on) h->t.last = now_s();
    // The stream, not the device: other streams' work (a plugin's own) is none of this run's.
    const cudaError_t se = cudaStreamSynchronize(h->stream);
    host_mark(h->t, kWait);
    h->t.pending = h->t.events && e == cudaSuccess && se == cudaSuccess;
    if (e == cudaSuccess) e = se;
    if (e != cudaSuccess)
        return kvf_error_set(err, KVF_EDEVICE, "%s failed on the device: %s (%s)", s->desc->name,
                             cudaGetErrorName(e), cudaGetErrorString(e));
    int rc = kvf__host_status(s->desc, q.st, q.msg, "run", err);
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

// Runs slot k once on the loaded inputs with fresh poison, then every check of kernel_host.h.
int checked_run(Host *h, int k, kvf_bf16 *o, float *lse, kvf_error *err) {
    const int rc = checked_enqueue(h, k, err);
    return rc ? rc : checked_finish(h, o, lse, err);
}

// Everything of one host case before the run: validation, plans, layout, images, pages.
int load_case(Host *h, const kvf_case *c, kvf_error *err) {
    h->loaded = 0;
    h->c = c;
    h->pools_known = 1;
    int rc = kvf__host_check_case(c, err);
    if (rc) return rc;
    if (c->kv_indptr[c->batch_size] > 0 && (!c->k_cache || !c->v_cache))
        return kvf_error_set(err, KVF_EINVAL, "the case has no k_cache or v_cache");
    kvf_kernel_shape(c, &h->shape);
    plan_slots(h, c);
    host_mark(h->t, kPlan);
    if (h->n == 1 && h->slots[0].rc) {
        if (err) *err = h->slots[0].why;
        return h->slots[0].rc;
    }
    h->page_bytes = (size_t)kvf_case_page_elems(c) * 2;
    h->num_pages = c->num_pages;
    rc = read_pages(h, c, err);
    if (rc) return rc;
    // Without a pool the case reads no page, and the pools stay as they are.
    const size_t pool = (size_t)c->num_pages * h->page_bytes;
    int staged = 0;
    int64_t stage_pages = 0;
    h->n_poison = h->n_scatter = 0;
    if (pool > 0) {
        // The copies move 16-byte vectors; every bf16 page of 8 * k elements is a multiple of 16.
        if (h->page_bytes % 16 != 0)
            return kvf_error_set(err, KVF_EUNSUPPORTED,
                                 "a page of %zu bytes is not a multiple of 16 bytes",
                                 h->page_bytes);
        if (h->num_read_pages > 0 && 2 * h->page_bytes > h->stage_bytes)
            return kvf_error_set(err, KVF_EUNSUPPORTED,
                                 "a page of %zu bytes and its V page exceed the %zu-byte staging "
                                 "buffer",
                                 h->page_bytes, h->stage_bytes);
        rc = pools_reserve(h, pool, err);
        if (rc) return rc;
        stage_pages = plan_pages(h, &staged);
    }
    rc = layout(h, c, h->n_poison < 0 ? h->n_written : h->n_poison, stage_pages, err);
    if (rc) return rc;
    build_images(h, c);
    write_lists(h, c, staged);
    host_mark(h->t, kImages);
    if (pool > 0) {
        // From here the pools change (in the prepare kernel when not staged): a failure leaves
        // them unknown.
        h->pool_touched = 1;
        if (!h->pool_clean) rc = pools_fill(h, err);
        if (!rc && staged) rc = upload_staged(h, c, err);
        if (!rc) rc = note_written(h, err);
        if (rc) return rc;
        h->pool_clean = 1;
    }
    host_mark(h->t, kPools);
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

// A failure ends the run here, whichever phase it came from.
int end_failed_run(Host *h, int rc) {
    if (rc && rc != KVF_EUNSUPPORTED) after_failure(h);
    if (rc == KVF_EINPUTMOD) h->pool_clean = 0; // the kernel wrote into the pools
    return rc;
}

extern "C" int kvf__cuda_host_submit(void *hv, const kvf_case *c, kvf_error *err) {
    Host *h = (Host *)hv;
    if (!h || !c) return kvf_error_set(err, KVF_EINVAL, "NULL host or case");
    if (h->submitted)
        return kvf_error_set(err, KVF_EINVAL, "a run was submitted and not yet collected");
    // A failed API call of an earlier run (already reported) must not be blamed on this one.
    (void)cudaGetLastError();
    h->pool_touched = 0;
    if (h->t.on) h->t.last = now_s();
    int rc = load_case(h, c, err);
    if (!rc) rc = checked_enqueue(h, 0, err);
    if (!rc) {
        h->submitted = 1;
        return 0;
    }
    host_mark(h->t, kChecks);
    timing_end_run(h->t);
    return end_failed_run(h, rc);
}

extern "C" int kvf__cuda_host_collect(void *hv, kvf_bf16 *o, float *lse, kvf_error *err) {
    Host *h = (Host *)hv;
    if (!h || !h->submitted) return kvf_error_set(err, KVF_EINVAL, "no run was submitted");
    if (h->c->batch_size > 0 && (!o || !lse)) {
        // The run is queued all the same: let it end before the buffers are reused.
        (void)cudaStreamSynchronize(h->stream);
        h->submitted = 0;
        return kvf_error_set(err, KVF_EINVAL, "NULL output buffer");
    }
    h->submitted = 0;
    const int rc = checked_finish(h, o, lse, err);
    host_mark(h->t, kChecks);
    timing_end_run(h->t);
    return end_failed_run(h, rc);
}

extern "C" int kvf__cuda_host_run(void *hv, const kvf_case *c, kvf_bf16 *o, float *lse,
                                  kvf_error *err) {
    Host *h = (Host *)hv;
    if (!h || !c || (c->batch_size > 0 && (!o || !lse)))
        return kvf_error_set(err, KVF_EINVAL, "NULL host, case or output buffer");
    const int rc = kvf__cuda_host_submit(h, c, err);
    return rc ? rc : kvf__cuda_host_collect(h, o, lse, err);
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
    for (int i = 0; h->t.events && i <= kDevicePhases; ++i)
        cudaEventDestroy(h->t.ev[i]);
    void *dev[] = {h->d_k, h->d_v, h->d_io, h->d_stage};
    for (void *d : dev)
        if (d) cudaFree(d);
    void *pinned[] = {h->h_up, h->h_down};
    for (void *p : pinned)
        if (p) cudaFreeHost(p);
    free(h->written);
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
    int rc = kvf__host_check_case(c, err);
    if (rc) return rc;
    kvf_kernel_shape(c, &h->shape);
    plan_slots(h, c);
    h->page_bytes = (size_t)kvf_case_page_elems(c) * 2;
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
    h->n_written = 0; // the pools are not clean: the next case poisons them whole
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
