/* The CUDA decode kernels' C interface: a reusable plan for device-resident inputs, the two
 * registered kernels `cuda` (split-KV, flash-decoding) and `cuda-naive` (one block per
 * (sequence, q head), no split), and small device helpers the benchmark needs. Everything here
 * exists only in builds with KVF_HAVE_CUDA.
 *
 * Ownership: a kvf_cuda_plan is created by kvf_cuda_plan_create() and released by
 * kvf_cuda_plan_destroy(); it owns its device schedule, which grows when a larger problem
 * arrives and is reused otherwise (no device allocation per launch in steady state). Tensors
 * and the workspace passed to kvf_cuda_plan_launch() belong to the caller.
 * Errors: 0 or a negative KVF_E* code with one sentence in err: KVF_EINVAL for malformed input,
 * KVF_EUNSUPPORTED for a shape these kernels do not implement, KVF_ENOMEM when the device
 * refuses memory, KVF_EDEVICE for any other CUDA error (the sentence carries CUDA's text). */
#ifndef KVFUZZ_CUDA_KERNELS_H
#define KVFUZZ_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The core headers carry no extern "C" of their own; the system headers they use are included
 * above so that only kvfuzz declarations land inside the block. */
#ifdef __cplusplus
extern "C" {
#endif

#include "kvfuzz/case.h"
#include "kvfuzz/error.h"
#include "kvfuzz/kernel.h"

/* States of the registered CUDA kernels one worker may run at once (plugin.h,
 * concurrent_states): each state is a buffer host with its own stream, a plan with its own
 * schedule and workspace, and nothing else. */
#define KVF_CUDA_CONCURRENT_STATES 8

/* The registered kernels: plugin-ABI descriptors (kvf_kernel.desc) that run through the CUDA
 * buffer host (kernel_host.h, cuda/host_cuda.cu and its neighbours) like any plugin: it owns
 * the poisoned device pools, the guarded outputs and workspace, and the checks after each run. */
extern const kvf_kernel kvf_kernel_cuda;
extern const kvf_kernel kvf_kernel_cuda_naive;

/* 1 when a CUDA device this build can run on (compute capability 9.0 or newer) is present;
 * otherwise 0 with the reason in `why` (may be NULL). kvf_cuda_available() in the registry
 * forwards here in CUDA builds. */
int kvf_cuda_runtime_available(char *why, size_t why_size);

/* Supported shapes. Anything else is KVF_EUNSUPPORTED. */
#define KVF_CUDA_MAX_GROUP 16          /* Hq / Hk in 1..16 */
#define KVF_CUDA_MAX_PAGE_SIZE 256     /* S in 1..256 */
#define KVF_CUDA_MAX_SEQ_LEN (1 << 30) /* tokens of one sequence */
/* head_dim must be 64, 128 or 256. */

typedef enum kvf_cuda_algo {
    KVF_CUDA_ALGO_SPLITKV = 0, /* split-KV partial states in fp32 + merge kernel */
    KVF_CUDA_ALGO_NAIVE = 1    /* one block per (sequence, q head), whole sequence */
} kvf_cuda_algo;

/* What a plan needs to know on the host: the shape and the per-sequence lengths (FlashInfer's
 * plan/run split). The arrays are read during kvf_cuda_plan_prepare() only. */
typedef struct kvf_cuda_problem {
    int32_t num_qo_heads, num_kv_heads, head_dim, page_size, batch_size;
    int64_t num_pages; /* pool size P; page ids must be < P */
    float sm_scale;
    const int32_t *kv_indptr;        /* host [B+1] */
    const int32_t *kv_last_page_len; /* host [B] */
    /* The caches' element types and the scales' granularity, numbered as plugin.h numbers
     * them (0 for bf16 caches without scales). The split-KV kernel takes FP8 K and V (e4m3 or
     * e5m2, either for each) with or without scales of any granularity, or bf16 K and V;
     * cuda-naive takes the same. A bf16 cache beside an FP8 one is KVF_EUNSUPPORTED. */
    int32_t k_dtype, v_dtype, scale_granularity;
} kvf_cuda_problem;

/* Device pointers for one launch; layouts as in docs/design.md section 1 (bf16 as raw bits; an
 * FP8 cache's pointer is its bytes, one per element). The page table on the device must match
 * the host arrays given to prepare(). */
typedef struct kvf_cuda_tensors {
    const kvf_bf16 *q;       /* [B][Hq][D] */
    const kvf_bf16 *k_cache; /* [P][S][Hk][D] */
    const kvf_bf16 *v_cache; /* [P][S][Hk][D] */
    const int32_t *kv_indptr, *kv_indices, *kv_last_page_len;
    kvf_bf16 *o; /* [B][Hq][D], written */
    float *lse;  /* [B][Hq], written (base 2) */
    /* Scratch for the split-KV partial states: kvf_cuda_plan_workspace_bytes() bytes,
     * 256-byte aligned (NULL when that is 0). Its contents need not survive between launches. */
    void *workspace;
    size_t workspace_bytes;
    /* f32 scales when the prepared problem has them (plugin.h: 1, Hk or P*S*Hk of each). */
    const float *k_scale, *v_scale;
} kvf_cuda_tensors;

/* What prepare() decided, for reports and the benchmark. */
typedef struct kvf_cuda_plan_info {
    int32_t tile_tokens;  /* tokens per online-softmax tile (one rescale per tile) */
    int32_t chunk_tokens; /* tokens per split (a multiple of tile_tokens); 0 for naive */
    int32_t max_splits;   /* most splits of one sequence */
    int64_t ctas;         /* blocks of the main kernel */
    int merge;            /* a merge kernel runs */
    int num_sms, ctas_per_sm;
} kvf_cuda_plan_info;

typedef struct kvf_cuda_plan kvf_cuda_plan;

/* Creates a plan bound to the current CUDA device. */
int kvf_cuda_plan_create(kvf_cuda_plan **out, kvf_cuda_algo algo, kvf_error *err);
void kvf_cuda_plan_destroy(kvf_cuda_plan *plan); /* NULL is fine */

/* Checks the shape and host page-table metadata (indptr monotone from 0, last-page lengths in
 * [1, S] for non-empty sequences), chooses the split count from the SM count and the workload,
 * sizes the workspace (kvf_cuda_plan_workspace_bytes) and stages the schedule: the next launch
 * enqueues its upload on the launch's stream ahead of the kernels (nothing to upload when the
 * schedule did not change), so prepare() itself never waits for the device. Page ids are not seen
 * here: callers of the device API own them. KVF_CUDA_CHUNK_TILES=N in the environment forces N
 * tiles per split (tests of split boundaries and tuning experiments; the default heuristic is meant
 * for everything else). */
int kvf_cuda_plan_prepare(kvf_cuda_plan *plan, const kvf_cuda_problem *problem, kvf_error *err);

/* Enqueues the kernels of the last prepared problem on `stream` (a cudaStream_t; NULL for the
 * legacy default stream). Asynchronous; checks launch errors only. */
int kvf_cuda_plan_launch(kvf_cuda_plan *plan, const kvf_cuda_tensors *tensors, void *stream,
                         kvf_error *err);

int kvf_cuda_plan_get_info(const kvf_cuda_plan *plan, kvf_cuda_plan_info *info);

/* Workspace the next launch of the last prepared problem needs (0 when nothing is merged). */
size_t kvf_cuda_plan_workspace_bytes(const kvf_cuda_plan *plan);

/* Benchmark helpers (all asynchronous on `stream`). */

/* Fills n bf16 values with a deterministic hash of (seed, index), uniform in [-scale, scale]
 * rounded to nearest even: the same bits on every run and device. */
int kvf_cuda_fill_bf16(kvf_bf16 *dev, int64_t n, uint64_t seed, float scale, void *stream,
                       kvf_error *err);

/* Fills n FP8 bytes of `dtype` (1 e4m3, 2 e5m2) with the nearest values (ties to even) to a
 * deterministic hash of (seed, index), uniform in [-scale, scale]: no NaN, never past the
 * format's largest finite value. */
int kvf_cuda_fill_fp8(uint8_t *dev, int64_t n, uint64_t seed, float scale, int dtype, void *stream,
                      kvf_error *err);
/* The read roofline: streams `bytes` bytes of `dev` once with 16-byte loads and folds them into
 * a checksum written to sink[0..kvf_cuda_roofline_sink_len()) so nothing can be optimized away.
 * `dev` must be 16-byte aligned and hold bytes rounded up to 16. */
int kvf_cuda_roofline_launch(const void *dev, int64_t bytes, uint32_t *sink, void *stream,
                             kvf_error *err);
int64_t kvf_cuda_roofline_sink_len(void);

#ifdef __cplusplus
}
#endif

#endif
