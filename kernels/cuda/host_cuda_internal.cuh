// The CUDA buffer host's private header (kernel_host.h is the contract, host_internal.h the
// entry points): the device buffers every KVF_PLUGIN_DEVICE_CUDA kernel descriptor runs on, the
// built-in `cuda`, `cuda-naive` and mutants as much as a plugin. Shared by the host's files and
// nothing else:
//   host_cuda.cu      the host's life (create, destroy) and its entry points;
//   host_pools.cu     loading a case: the pools, the layout of the buffers and their images;
//   host_run.cu       one checked run (enqueue, finish, checks) and locating a failed check;
//   host_checks.cu    the device check kernels (prepare, post, poison, scatter, fill, count) and
//                     their launches: no other file names a kernel of the host's;
//   host_graph.cu     the graph-replay relation's run: capture, replay (kernel_host.h);
//   bench_support.cu  the hooks of `kvfuzz bench` (kvfuzz/kernel_bench.h).
// This header owns the host's structs (Host, Slot, Layout, Enqueued, Timing, and CheckParams and
// CheckResult, which the check kernels share with the host code), the constants of its memory,
// the timing marks, and the declarations of what one of those files defines for another;
// everything else is file-local. The names live in namespace kvf_cuda_host.
//
// Memory of one host:
//   K and V pools   [P][S][Hk][D] each, every element KVF_HOST_POISON_INPUT (bf16 caches) or
//                   0x7F, the NaN byte of both FP8 formats (FP8 caches: one byte an element),
//                   except the slots a sequence reads. K and V have one element size. Kept between
//                   runs: a run writes only the pages the case reads and re-poisons the pages the
//                   previous case wrote that this one does not read. Filling whole pools every run
//                   (up to 2 x 8 GiB for page ids past 65535) made the GPU the bottleneck of a
//                   campaign.
//   h_up            pinned and mapped (kernels read it in place): in, the page ids to
//                   re-poison, the page ids the case reads, the stage (the K images of the
//                   pages read, then their V images); each piece 256-byte aligned.
//   d_io            [in | ids | result | out | ws]: in, out and ws made of pieces [guard | data |
//                   guard] (guards of KVF_HOST_GUARD_BYTES):
//                     in     q, kv_indptr, kv_indices, kv_last_page_len, k_scale, v_scale:
//                            what the kernel reads;
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
#ifndef KVFUZZ_CUDA_HOST_CUDA_INTERNAL_CUH
#define KVFUZZ_CUDA_HOST_CUDA_INTERNAL_CUH

#include <cuda_runtime.h>

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "cuda_error.cuh"

extern "C" {
#include "host_internal.h" // and kvfuzz/kernel_host.h
#include "kvfuzz/kernel.h"
}

namespace kvf_cuda_host {

constexpr size_t kG = KVF_HOST_GUARD_BYTES;
constexpr size_t kStageBytes = 64u << 20;          // gather buffer for the pages a case reads
constexpr size_t kWholePoolCheckBytes = 64u << 20; // per pool: checksummed whole up to this
constexpr uint32_t kPoisonWord = KVF_HOST_POISON_INPUT * 0x10001u; // two poison bf16
constexpr uint32_t kPoisonWordFp8 = 0x7F7F7F7Fu; // four NaN bytes (e4m3 and e5m2 alike)
constexpr unsigned long long kNone = ~0ull;
constexpr size_t kResBytes = 256; // the result block of the check kernels

inline size_t align256(size_t x) {
    return (x + 255) & ~(size_t)255;
}

// A piece of d_io: [guard][data][guard], padded to 256 bytes; data at +kG.
inline size_t piece_bytes(size_t data) {
    return align256(kG + data + kG);
}

// ---- the check kernels' parameters and results --------------------------------------------

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
    uint32_t poison_word; // the pools' poison (Host.pool_word)
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

// ---- the host ------------------------------------------------------------------------------

struct Slot {
    const kvf_plugin_kernel *desc;
    void *state;
    int rc;        // outcome of supports + plan for the loaded inputs (0: ready to run)
    kvf_error why; // its sentence
    size_t ws_bytes;
};

// Offsets of one loaded case in h_up (`in`, then the lists and the stage) and in d_io.
struct Layout {
    size_t q, ip, ix, ll, ks, vs;             // data offsets in `in`
    size_t q_b, ip_b, ix_b, ll_b, ks_b, vs_b; // data bytes (scales: 0 without)
    size_t in_b;                              // bytes of `in`, at 0 in both
    size_t poison_at, ids_at; // h_up: the page ids to re-poison, the page ids the case reads
    size_t stage_at, stage_b; // h_up: the stage, K images of stage_pages pages, then V images
    size_t image_b;           // bytes of h_up's image
    size_t dev_ids_at;        // d_io: the page ids the case reads
    size_t res_at, out_at;    // d_io: the result block, `out`
    size_t o, lse;            // data offsets in `out`
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

inline double now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Ends the phase being timed as `ph` and starts the next.
inline void host_mark(Timing &t, int ph) {
    if (!t.on) return;
    const double now = now_s();
    t.host[ph] += now - t.last;
    t.last = now;
}

// Records event i on the stream: the device phase i - 1 ends there.
inline void dev_mark(Timing &t, int i, cudaStream_t st) {
    if (t.on && t.events) (void)cudaEventRecord(t.ev[i], st);
}

// How checked_enqueue calls the descriptor's run(): directly, captured in a CUDA graph that it
// then launches once, or by replaying that graph (host_graph.cu).
enum GraphPhase { kEager, kCapture, kReplay };

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
    uint32_t pool_word; // the poison the pools were filled with (kPoisonWord, kPoisonWordFp8)
    int fp8;            // the loaded case's caches are FP8 (one byte an element)
    kvf_bf16 *img;      // scratch: one bf16 page image before it is packed to FP8 bytes
    size_t img_cap;
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
    // Graph replay (host_graph.cu): the phase, the instantiated graph, and the floors the layout
    // keeps so that both cases of a replay get the same addresses (page-table entries and
    // workspace bytes at least these).
    GraphPhase graph_phase;
    cudaGraphExec_t graph_exec;
    int64_t floor_entries, floor_read_pages;
    size_t floor_ws;
    Enqueued q;    // the run submitted and not yet collected
    int submitted; // kvf__cuda_host_submit queued a run that kvf__cuda_host_collect has not
                   // finished
    Timing t;
};

// ---- defined in one of the host's files for the others ----------------------------------

// host_cuda.cu: a host for n descriptors (kvf__cuda_host_create has n = 1; bench more), its
// streams and check kernels' capacity set up and every descriptor's create() called; released
// by kvf__cuda_host_destroy. describe_slot is describe() of slot k for the loaded case ("" when
// it has none or refused the case).
int host_create(const kvf_plugin_kernel *const *descs, int n, Host **out, kvf_error *err);
void describe_slot(Host *h, int k, char *buf, size_t buf_size);

// host_pools.cu, the pools: sizes both for `pool` bytes each (a fresh allocation is not
// clean); checks KVF_CUDA_VERIFY_POOL's invariant; lists the pages the case reads.
int pools_reserve(Host *h, size_t pool, kvf_error *err);
int pools_verify(Host *h, kvf_error *err);
int read_pages(Host *h, const kvf_case *c, kvf_error *err);

// host_pools.cu, layout and images: lays out h_up and d_io for the case and sizes every buffer;
// writes h_up's image of `in`, its lists and (unless staged) the stage; asks supports() and
// plan() of every slot; the args of slot s's run(); the check kernels' parameters.
int layout(Host *h, const kvf_case *c, int64_t poison_slots, int64_t stage_pages, kvf_error *err);
void build_images(Host *h, const kvf_case *c);
void write_lists(Host *h, const kvf_case *c, int staged);
void plan_slots(Host *h, const kvf_case *c);
void fill_args(Host *h, const Slot *s, kvf_plugin_args *a);
CheckParams check_params(Host *h);

// host_pools.cu: the element size of the case's caches (page_bytes, fp8, the pools' poison
// word; a bf16 cache beside an FP8 one is KVF_EUNSUPPORTED); page p of cache `which` (0 K, 1 V)
// as the pool must hold it, page_bytes bytes into dst.
int set_elements(Host *h, const kvf_case *c, kvf_error *err);
void page_bytes_of(const Host *h, const kvf_case *c, int which, int64_t p, int32_t used,
                   unsigned char *dst);

// host_pools.cu: everything of one case before the run (validation, plans, layout, images,
// pages); 0 with the inputs loaded, else the error.
int load_case(Host *h, const kvf_case *c, kvf_error *err);

// host_run.cu: enqueues slot k's checked run on the loaded inputs (the host's own errors only);
// waits for it and makes every check of kernel_host.h, o and lse receiving the outputs; both
// in one; and what a failed run leaves to the next.
int checked_enqueue(Host *h, int k, kvf_error *err);
int checked_finish(Host *h, kvf_bf16 *o, float *lse, kvf_error *err);
int checked_run(Host *h, int k, kvf_bf16 *o, float *lse, kvf_error *err);
void after_failure(Host *h);

// host_graph.cu: run() of slot s in the graph phase of h: captured into h->graph_exec and
// launched (kCapture), or h->graph_exec launched (kReplay); returns run()'s status, a failed
// capture as KVF_PLUGIN_ERROR with its sentence in q->msg, a failed launch in q->e.
int graph_run(Host *h, Slot *s, const kvf_plugin_args *a, Enqueued *q);

// host_checks.cu: the launches. Each enqueues its kernel on `stream` as the host always has and
// returns the launch's error (cudaGetLastError for a <<<>>> launch).
//   coop_capacity: blocks of the cooperative check kernels that fit on the device at once;
//   launch_prepare / launch_post: the check kernels around run() (CheckParams), on a grid for
//     `items` units of device work and `host_vecs` vectors of host memory;
//   launch_fill: `vecs` vectors of dst set to `word`;
//   launch_poison_pages / launch_scatter_pages: pages ids[0..n) of both pools set to `word`,
//     or written from src (n K pages, then their V pages);
//   launch_poison_tails: slots [used[i], S) of pages ids[i] set to `word` (generated pools);
//   launch_count_unpoisoned: adds to *count the vectors of pool that are not `word` outside
//     the pages marked in mask.
cudaError_t coop_capacity(int *blocks);
cudaError_t launch_prepare(const Host *h, CheckParams *p, int64_t items, int64_t host_vecs);
cudaError_t launch_post(const Host *h, CheckParams *p, int64_t items, int64_t host_vecs);
cudaError_t launch_fill(uint4 *dst, int64_t vecs, uint32_t word, cudaStream_t stream);
cudaError_t launch_poison_pages(const int64_t *ids, int64_t n, int64_t page_vec, uint4 *k_pool,
                                uint4 *v_pool, uint32_t word, cudaStream_t stream);
cudaError_t launch_scatter_pages(const uint4 *src, const int64_t *ids, int64_t n, int64_t page_vec,
                                 uint4 *k_pool, uint4 *v_pool, cudaStream_t stream);
cudaError_t launch_poison_tails(const int64_t *ids, const int32_t *used, int64_t n,
                                int64_t page_vec, int64_t slot_vec, uint4 *k_pool, uint4 *v_pool,
                                uint32_t word, cudaStream_t stream);
cudaError_t launch_count_unpoisoned(const uint4 *pool, int64_t vecs, int64_t page_vec,
                                    const unsigned char *mask, int64_t num_pages, uint32_t word,
                                    unsigned long long *count, cudaStream_t stream);

} // namespace kvf_cuda_host

#endif
