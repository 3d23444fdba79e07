/* Shared by the FIB definition, import and export files (fib.h): the gqa_paged_decode
 * signature as FIB defines it. Internal to interop/. */
#ifndef KVFUZZ_FIB_INTERNAL_H
#define KVFUZZ_FIB_INTERNAL_H

#include <jansson.h>

#include "kvfuzz/fib.h"

typedef struct kvf__fib_tensor {
    const char *name;
    const char *dtype; /* FIB's name */
    int st_dtype;      /* the safetensors dtype it is stored as */
    int rank;          /* -1: a scalar (shape null) */
    const char *shape[4];
} kvf__fib_tensor;

enum {
    IN_Q,
    IN_K,
    IN_V,
    IN_INDPTR,
    IN_INDICES,
    IN_LAST,
    IN_SCALE,
    IN_K_SCALE,
    IN_V_SCALE,
    IN_COUNT
};

/* q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, k_scale, v_scale in
 * the definitions' order, caches in bf16; output, lse. */
extern const kvf__fib_tensor kvf__fib_inputs[IN_COUNT];
extern const kvf__fib_tensor kvf__fib_outputs[2];

/* The const axis the FP8 definitions' k_scale and v_scale are shaped by: one scale per cache. */
#define KVF__FIB_SCALE_AXIS "num_scales"

/* Input `in` of a definition whose caches hold kv_dtype (kvf_kv_dtype): k_cache and v_cache in
 * that dtype, every other input as kvf__fib_inputs has it. */
const kvf__fib_tensor *kvf__fib_input(int in, int kv_dtype);
/* Whether such a definition takes input `in`: kv_last_page_len only with has_last (every page
 * size but 1), k_scale and v_scale only with FP8 caches. */
int kvf__fib_takes(int in, int has_last, int kv_dtype);
/* FIB's name of a cache dtype: "bfloat16", "float8_e4m3fn", "float8_e5m2". */
const char *kvf__fib_kv_dtype_name(int kv_dtype);
/* Whether an FP8 definition covers a quantization: both caches in one FP8 dtype, one scale
 * each (tensor granularity). */
int kvf__fib_quant_covered(const kvf_kv_quant *q);
/* The cache dtype of the definition of case c: KVF_KV_BF16 for bf16 caches without scales, else
 * its k cache's (meaningful where kvf__fib_quant_covered holds). */
int kvf__fib_case_kv_dtype(const kvf_case *c);

/* A member's string value, or NULL. */
const char *kvf__fib_get_str(json_t *o, const char *key);

/* FIB's models give "type" a default, and FIB's own writer (save_json_file, exclude_unset)
 * leaves a defaulted type out; pydantic then picks the union member. These read a JSON value
 * the way pydantic's lax mode does (observed with pydantic 2.13.4): */
/* as a non-negative int (NonNegativeInt): a JSON integer, a JSON number with an integral value,
 * true / false, or a string of decimal digits (underscores between digits, an optional sign,
 * ".0..." and surrounding blanks allowed). 1 and the value in *out (clamped to INT64_MAX), or
 * 0. */
int kvf__fib_lax_uint(json_t *v, int64_t *out);
/* as Union[int, float, bool]: a JSON number or boolean, or a string Python's float() reads
 * (hex excepted). 1 and the value in *out (true 1, false 0), or 0. */
int kvf__fib_lax_number(json_t *v, double *out);
/* An axis: 'c' const (its value in *value), 'v' var, 0 what FIB refuses. Without "type",
 * AxisConst when "value" reads as a NonNegativeInt (it then has the most fields set), else
 * AxisVar, which takes any object. */
int kvf__fib_axis_kind(json_t *axis, int64_t *value);
/* An input description's type: its "type" string when it has one; without, what pydantic
 * makes of the union RandomInput | SafetensorsInput | ScalarInput: safetensors when "path"
 * and "tensor_key" are non-empty strings, else scalar when "value" reads as a number, else
 * random. NULL when FIB refuses it (not an object, or a "type" that is not a string). */
const char *kvf__fib_input_type(json_t *desc);

#endif
