/* FlashInfer-Bench (FIB) datasets (docs/fib.md): reading gqa_paged_decode definitions and
 * workloads into kvfuzz case specs, and writing a case back as a FIB definition, workload and
 * safetensors blob.
 *
 * A dataset is definitions/<op_type>/<def>.json, workloads/<op_type>/<def>.jsonl (one trace
 * object {definition, workload: {uuid, axes, inputs}, solution: null, evaluation: null} per
 * line; a bare workload object is accepted too), blob/workloads/<op_type>/<def>/
 * <def>_<uuid>.safetensors, solutions/<author>/<op_type>/<def>/<name>.json and
 * traces/<author>/<op_type>/<def>.jsonl (FIB's validator reads only these paths). An input is
 * {type: random}, {type: scalar, value} or {type: safetensors, path, tensor_key}, the path
 * relative to the dataset root; FIB's own writer may leave a defaulted "type" out, of inputs
 * and of axes, and the reader defaults it as FIB's pydantic models do.
 *
 * Caches are bf16, or FP8 in kvfuzz's FP8 definitions (<shape>_fp8_e4m3, <shape>_fp8_e5m2):
 * k_cache and v_cache in float8_e4m3fn or float8_e5m2 (both the same), and two more inputs,
 * k_scale and v_scale, float32 of shape [num_scales] with num_scales const 1: one scale per
 * cache, k = k_scale * k_cache exactly (kvfuzz/kv_quant.h, tensor granularity).
 *
 * Ownership: kvf_fib_definition is a plain struct (no heap). kvf_fib_import fills a
 * caller-owned kvf_spec (kvf_spec_free releases it). kvf_fib_definition_json returns malloc'd text
 * and kvf_fib_export a malloc'd line, which the caller frees. A kvf_fib_importer keeps the names
 * of the files it wrote (kvf_fib_importer_free releases them); what it tells on_case is valid
 * during the call only. Errors, one sentence each:
 * KVF_EINVAL (JSON that is not what FIB writes, a definition that is not paged decode, a
 * dtype FIB does not know or kvfuzz does not run, a shape or dtype that disagrees with the
 * definition, a random page table, a kv_indptr or kv_last_page_len kvfuzz cannot take),
 * KVF_EFORMAT (a blob that is not safetensors, or a Git LFS pointer), KVF_ELIMIT (sizes
 * past kvf_limits, a safetensors header over 100 MB), KVF_EIO, KVF_ENOMEM. */
#ifndef KVFUZZ_FIB_H
#define KVFUZZ_FIB_H

#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/spec.h"

#define KVF_FIB_OP_TYPE "gqa_paged"
#define KVF_FIB_FAMILY "gqa_paged_decode"

typedef struct kvf_fib_definition {
    char name[KVF_ORIGIN_NAME_MAX + 1];
    char op_type[KVF_ORIGIN_NAME_MAX + 1];
    int32_t num_qo_heads, num_kv_heads, head_dim, page_size; /* its const axes */
    int has_last_page_len; /* 0: no kv_last_page_len input, every last page full (S = 1) */
    int kv_dtype;          /* kvf_kv_dtype of both caches; FP8 ones come with k_scale and v_scale */
} kvf_fib_definition;

/* Reads a definition and checks that it is gqa_paged_decode as kvfuzz runs it: inputs q,
 * k_cache, v_cache, kv_indptr, kv_indices[, kv_last_page_len], sm_scale with FIB's shapes and
 * bfloat16 / int32 / float32 dtypes, or the same with float8_e4m3fn or float8_e5m2 caches
 * followed by k_scale and v_scale (float32 [num_scales], num_scales const 1), outputs output and
 * lse, the four head and page axes const. `what` names the text in messages. */
int kvf_fib_definition_parse(kvf_fib_definition *out, const char *text, size_t size,
                             const char *what, kvf_error *err);
int kvf_fib_definition_load(kvf_fib_definition *out, const char *path, kvf_error *err);

typedef struct kvf_fib_import_opts {
    const char *root;  /* the dataset root that relative safetensors paths start from */
    uint64_t seed;     /* of the values of random q, k_cache and v_cache */
    kvf_limits limits; /* of the case; blobs are read up to the size such a case can have */
} kvf_fib_import_opts;

/* One workload (a JSONL line) of definition `def` into a spec with explicit tensors and an
 * origin. Random q / k_cache / v_cache are drawn from opts->seed (normal, variance 1, rounded
 * to bf16; FP8 caches' values clamped to [-2, 2] as FIB's are and rounded to the FP8 dtype; one
 * stream per input), unless the blob's metadata records the random inputs and seed of an
 * earlier import (kvf_fib_export writes it), which the origin then keeps. A workload of an FP8
 * definition gives explicit caches holding the images of its bytes (kvfuzz/fp8.h) and a
 * quantization recipe of tensor scales whose bases are its k_scale and v_scale (finite and
 * positive, else KVF_EINVAL), which kvf_case_build applies to the explicit tensors. */
int kvf_fib_import(kvf_spec *out, const kvf_fib_definition *def, const char *line, size_t size,
                   const char *what, const kvf_fib_import_opts *opts, kvf_error *err);

/* ---- a dataset's workloads into case files (fib_workloads.c) ---- */

/* A case kvf_fib_import_workloads wrote. */
typedef struct kvf_fib_imported {
    const kvf_fib_definition *def;
    const kvf_spec *spec; /* its origin names the workload, its random inputs and seed */
    const kvf_case *c;
    const char *path; /* <out_dir>/<definition>_<uuid>.kvfz */
} kvf_fib_imported;

/* An importer: where the cases go, how workloads are read, and what it tells its caller. Set
 * out_dir, opts and the callbacks (each may be NULL) in a zeroed struct; kvf_fib_importer_free
 * releases what it gathered. */
typedef struct kvf_fib_importer {
    const char *out_dir;
    kvf_fib_import_opts opts;
    void (*on_case)(void *ctx, const kvf_fib_imported *x); /* after each case is written */
    void (*warn)(void *ctx, const char *message); /* a definition without a workloads file */
    void *ctx;
    size_t written; /* cases written */
    size_t skipped; /* a dataset's definitions that are not gqa_paged_decode */
    char **names;   /* the files written, to refuse a repeated uuid */
    size_t nnames;
} kvf_fib_importer;

/* Every workload (non-blank line) of one workloads file of definition def, each written as
 * <out_dir>/<def>_<uuid>.kvfz. Stops at the first that cannot be: a line kvf_fib_import refuses
 * (the sentence names the file and line), a workload that is not a valid case, a uuid written
 * before in this import (KVF_EINVAL), a file that cannot be read or written. */
int kvf_fib_import_workloads(kvf_fib_importer *im, const kvf_fib_definition *def, const char *path,
                             kvf_error *err);

/* Every gqa_paged_decode definition of a dataset folder (definitions/<op_type>/<def>.json or
 * definitions/<def>.json; `only`, when not NULL, names the one definition to import, whatever
 * its family), each with its workloads files (workloads/<op_type>/<def>.jsonl or
 * workloads/<def>.jsonl; a definition without one is told through warn). Other definitions
 * are counted in skipped. KVF_EINVAL when there is no such definition. */
int kvf_fib_import_dataset(kvf_fib_importer *im, const char *dataset, const char *only,
                           kvf_error *err);

void kvf_fib_importer_free(kvf_fib_importer *im);

/* The dataset root blob paths start from, for a workloads file given alone: the folder holding
 * workloads/ (<root>/workloads/<op_type>/<def>.jsonl, "." for a path that starts at
 * workloads/), else the file's folder. */
void kvf_fib_guess_root(const char *workloads, char *root, size_t n);

/* The definition name FIB gives the shape: gqa_paged_decode_h20_kv4_d128_ps64; with FP8 caches
 * (kv_dtype KVF_KV_E4M3 or KVF_KV_E5M2) kvfuzz's FP8 definition of it,
 * gqa_paged_decode_h20_kv4_d128_ps64_fp8_e4m3 or ..._fp8_e5m2. */
void kvf_fib_definition_name(char *out, size_t size, int32_t num_qo_heads, int32_t num_kv_heads,
                             int32_t head_dim, int32_t page_size, int kv_dtype);

/* The definition JSON for a shape and cache dtype (pretty-printed, newline-terminated): axes,
 * inputs, outputs, constraints and a torch reference with FIB's semantics (docs/fib.md); FP8
 * caches add the num_scales axis, k_scale and v_scale, and the dequantization in float32. NULL
 * when memory runs out or kv_dtype is not a kvf_kv_dtype. */
char *kvf_fib_definition_json(int32_t num_qo_heads, int32_t num_kv_heads, int32_t head_dim,
                              int32_t page_size, int kv_dtype);

/* Whether case c can be a FIB workload: KVF_ELIMIT for a pool over 1 GiB per cache (a blob
 * holds every page), KVF_EINVAL for a case without a page-table entry (every sequence empty,
 * or no sequence): FIB's validator requires every axis to be positive, and num_kv_indices
 * equals kv_indptr[-1], which is then 0; KVF_EINVAL for a quantization no definition covers
 * (the FP8 definitions take both caches in one FP8 dtype with one scale each: not per-head or
 * per-token scales, mixed dtypes, or FP8 without scales), the sentence naming it. */
int kvf_fib_check_exportable(const kvf_case *c, kvf_error *err);

/* What FIB's DefaultEvaluator.check_correctness records for a kernel's o and lse against a
 * reference (flashinfer_bench/bench/evaluators/default.py, bench/utils.py compute_error_stats,
 * commit 40e6ca78), outputs in the definition's order, output then lse:
 * - an output of the kernel holding an inf stops the check: INCORRECT_NUMERICAL with both
 *   errors inf; else one holding a NaN: both NaN (the -inf lse of an empty sequence, correct
 *   as it is, stops it too);
 * - else abs = |a - r| and rel = abs / (|r| + 1e-8) in float32, an element exceeds when both
 *   pass 1e-2, and the output's maxima are torch's max (NaN when one is NaN), folded into the
 *   running maxima by Python's max(running, new), which keeps the running value when the new
 *   one is NaN;
 * - INCORRECT_NUMERICAL when an element exceeds, else PASSED. */
typedef struct kvf_fib_evaluation {
    int passed;
    double max_absolute_error, max_relative_error;
    int stopped_at; /* 0, or the output whose inf or NaN stopped the check: 1 output, 2 lse */
} kvf_fib_evaluation;
void kvf_fib_evaluate(const kvf_case *c, const kvf_bf16 *o, const float *lse, const kvf_bf16 *ref_o,
                      const float *ref_lse, kvf_fib_evaluation *out);

/* Writes case c (built from spec) as a FIB workload into the dataset at root: its blob
 * blob/workloads/gqa_paged/<def>/<def>_<uuid>.safetensors with every input tensor (the
 * origin's random inputs and seed in its metadata; FP8 caches as their bytes, F8_E4M3 or
 * F8_E5M2, and k_scale and v_scale as F32 [1]), and returns in *line the workload JSON (one
 * line, no newline: {"uuid", "axes", "inputs"}) that names it. def_name and uuid must be origin
 * names, def_name the definition of c's shape and cache dtype. */
int kvf_fib_export(const char *root, const char *def_name, const char *uuid, const kvf_spec *spec,
                   const kvf_case *c, char **line, kvf_error *err);

#endif
