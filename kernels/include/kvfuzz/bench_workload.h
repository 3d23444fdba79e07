/* The host side of `kvfuzz bench` (docs/performance.md, "Method"): its workloads (the presets
 * seed, sweep and mixed, or one custom batch and length), the host case each workload is timed
 * on (the page table shuffled over a pool with one spare page, q uniform in [-1, 1]; the K/V
 * pools are generated on the device, kernel_bench.h), the bytes the read roofline streams, a
 * kernel's agreement with the reference, and a result's timing statistics, check word and JSON
 * row, and which kernels it times. Plain C with no CUDA dependency: built in every configuration
 * and tested on the CPU (tests/test_bench_workload.c). The timed session itself is
 * kvfuzz/bench_session.h.
 *
 * Ownership: a kvf_bench_workloads list owns its workloads and their lengths
 * (kvf_bench_workloads_free releases them); a case from kvf_bench_case_build belongs to the
 * caller (kvf_case_free); a JSON value returned is a new reference the caller owns, NULL when
 * memory ran out. Errors: 0 or a negative KVF_E* code with one sentence in err: KVF_ENOMEM,
 * KVF_EINVAL (an unknown preset, a kernel bench cannot time), KVF_ELIMIT (a workload of more
 * than 2^31-1 pages), and the kernel resolver's (kvfuzz/kernel.h). */
#ifndef KVFUZZ_BENCH_WORKLOAD_H
#define KVFUZZ_BENCH_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/case.h"
#include "kvfuzz/error.h"
#include "kvfuzz/json_io.h"
#include "kvfuzz/kernel.h"

/* The shape every workload of a run shares: query and KV heads, head dim, page size, and the
 * caches' element type (kvf_kv_dtype: bf16, or FP8 for both K and V) with the scales'
 * granularity (kvf_scale_granularity; none for bf16). */
typedef struct kvf_bench_shape {
    int32_t hq, hk, d, s;
    int32_t kv_dtype, scale_gran;
} kvf_bench_shape;

typedef struct kvf_bench_workload {
    char name[48];
    int32_t batch;
    int32_t *lens; /* [batch]: tokens per sequence */
} kvf_bench_workload;

typedef struct kvf_bench_workloads {
    kvf_bench_workload *items;
    int count;
} kvf_bench_workloads;

/* ---- the kernels (bench_kernels.c) ---- */

/* The longest --kernel value: a comma-separated list of that many bytes at most. */
#define KVF_BENCH_KERNELS_MAX 1024

/* Appends the CUDA kernels a comma-separated list of kernel names names (built-in names,
 * cuda/mut=..., PATH.so, PATH.so:NAME; no test kernels): PATH.so adds every CUDA kernel of the
 * plugin and drops the others; a kernel named alone must be a CUDA kernel (KVF_EINVAL "NAME is
 * not a CUDA kernel"). The resolver's errors as kvf_kernel_resolve_list's; KVF_EINVAL for a list
 * of KVF_BENCH_KERNELS_MAX bytes or more. On an error the names before the bad one stay added. */
int kvf_bench_add_kernels(kvf_kernel_list *list, const char *specs, kvf_error *err);

/* cuda and cuda-naive (those of them this build has) into an empty list; a list that holds
 * kernels is left as it is. 0, or KVF_ENOMEM. */
int kvf_bench_default_kernels(kvf_kernel_list *list, kvf_error *err);

/* ---- the workloads (bench_workload.c) ---- */

/* Whether `name` is a preset: seed, sweep or mixed. */
int kvf_bench_preset_known(const char *name);

/* "HQ:HK" with HK dividing HQ, both in 1..1024, and a group (HQ / HK) of at most 16: 0, or -1
 * (the outputs are then unspecified). */
int kvf_bench_parse_heads(const char *text, int32_t *hq, int32_t *hk);

/* A head dim of 64, 128 or 256 in decimal: 0, or -1. */
int kvf_bench_parse_head_dim(const char *text, int32_t *d);

/* The workloads of a run into an empty list: with batch >= 0 the one custom workload
 * "b<batch>-l<len>" of equal lengths; else the preset (NULL: seed). seed: batch 1 of the seed
 * case file's length, 51 pages of 64 the last holding 2 (3202 tokens); sweep: batch {1, 8, 32,
 * 128} x length {512, 4096, 32768}, named "b<batch>-l<len>"; mixed: batch 64, lengths drawn
 * log-uniform in [1, 16384] from `seed`, sequences 5 and 40 empty. On an error the list is left
 * empty. */
int kvf_bench_workloads_make(kvf_bench_workloads *w, const char *preset, int64_t batch, int64_t len,
                             uint64_t seed, kvf_error *err);
void kvf_bench_workloads_free(kvf_bench_workloads *w);

/* The longest sequence of a workload (0 when every one is empty). */
int32_t kvf_bench_workload_max_len(const kvf_bench_workload *w);

/* The host case workload w is timed on: the shape, sm_scale 1/sqrt(D), kv_indptr and
 * kv_last_page_len from the lengths, a page table that is a shuffle (from seed and `first`, 1
 * for a run's first workload) of a pool with one page more than the sequences use, and q ~ U(-1,
 * 1) rounded to bf16 (from seed). k_cache and v_cache stay NULL. On an error c is left empty. */
int kvf_bench_case_build(kvf_case *c, const kvf_bench_workload *w, const kvf_bench_shape *shape,
                         uint64_t seed, int first, kvf_error *err);

/* ---- a row (bench_result.c) ---- */

/* The bytes a run moves, which the read roofline streams once: q, the K and V rows the case
 * reads (tokens x Hk x D, bf16, each), o and lse. */
int64_t kvf_bench_bytes(const kvf_case *c);

/* GB/s of `bytes` moved in `us` microseconds. */
double kvf_bench_gbps(int64_t bytes, double us);

/* One (workload, kernel) row of a run. */
typedef struct kvf_bench_result {
    const char *kernel;
    int status; /* 0, or the KVF_E* of the host's check */
    char why[KVF_ERROR_MSG_MAX];
    char plan[160];                        /* the kernel's describe() */
    double med_us, min_us, gbps, fraction; /* measured when status is 0 */
    double max_abs_o, max_abs_lse;         /* against the reference, when status is 0 */
    int agree;
} kvf_bench_result;

/* Compares a kernel's outputs with the reference's into r: agree is 0 when an o element differs
 * by more than 1e-2 absolute and relative, an lse element by more than 1e-3 absolute and
 * relative, or either side is not finite (both lse -inf of the same sign is the empty sequence,
 * and agrees); max_abs_o and max_abs_lse are the largest differences. */
void kvf_bench_compare(const kvf_case *c, const kvf_bf16 *o, const float *lse,
                       const kvf_bf16 *o_ref, const float *lse_ref, kvf_bench_result *r);

/* The median and minimum of n >= 1 event times in milliseconds, in microseconds; sorts ms. */
void kvf_bench_median_min(float *ms, int n, double *median_us, double *min_us);

/* Sets a timed result's times, its GB/s of `bytes` and its fraction of the roofline (roofline
 * median / kernel median). */
void kvf_bench_result_timed(kvf_bench_result *r, double med_us, double min_us, double roof_us,
                            int64_t bytes);

/* The row's check: "unsupported", the error's name (EUNWRITTEN, ...), "ok" or "MISMATCH". */
const char *kvf_bench_result_check(const kvf_bench_result *r);

/* Whether the row fails the run: a check other than unsupported, or a disagreement. */
int kvf_bench_result_fails(const kvf_bench_result *r);

/* A device as bench's table and JSON name it. */
typedef struct kvf_bench_device {
    char name[256];
    int sms;
    int l2_bytes;
} kvf_bench_device;

/* `kvfuzz bench --json`'s object without its rows: date, gpu, sms, l2_bytes, iters, warmup,
 * flush_bytes and the empty array "results", which *results borrows. */
json_t *kvf_bench_json_root(const char *date, const kvf_bench_device *dev, int iters, int warmup,
                            size_t flush_bytes, json_t **results);

/* One row of `kvfuzz bench --json`: the workload and shape, the bytes, the times and rates where
 * they were measured (status 0; no number stands for "none"), the roofline's, the check, the
 * differences from the reference (null when untimed), the plan, and the error when the check
 * failed. */
json_t *kvf_bench_json_row(const kvf_bench_workload *w, const kvf_bench_shape *shape,
                           const kvf_bench_result *r, int64_t tokens, int64_t bytes,
                           double roof_us);

#endif
