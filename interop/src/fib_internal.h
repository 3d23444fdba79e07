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

enum { IN_Q, IN_K, IN_V, IN_INDPTR, IN_INDICES, IN_LAST, IN_SCALE, IN_COUNT };

/* q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale; output, lse. */
extern const kvf__fib_tensor kvf__fib_inputs[IN_COUNT];
extern const kvf__fib_tensor kvf__fib_outputs[2];

/* A member's string value, or NULL. */
const char *kvf__fib_get_str(json_t *o, const char *key);

#endif
