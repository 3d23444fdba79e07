/* FlashInfer-Bench Solution JSON files for Python kernels: reads one, checks what kvfuzz needs
 * of it and writes its sources into a private temporary folder the worker imports from.
 *
 * A solution is {name, definition, author, spec: {language, target_hardware, entry_point
 * "file.py::function", dependencies, destination_passing_style}, sources: [{path, content}]}.
 * kvfuzz accepts languages python and triton in destination-passing style, for a
 * gqa_paged_decode definition; the head counts, head dim and page size that the definition's
 * name fixes (gqa_paged_decode_h32_kv8_d128_ps1) become the shapes the kernel supports.
 *
 * The definition itself ({name, axes, inputs, outputs, ...}) is looked for where a
 * FlashInfer-Bench dataset keeps it: DEF.json beside the solution, or definitions/DEF.json or
 * definitions/OP_TYPE/DEF.json in the solution's folder or any folder above it. When found,
 * its inputs must be (q, k_cache, v_cache, kv_indptr, kv_indices[, kv_last_page_len],
 * sm_scale) and its outputs (output, lse), in that order, and its const axes fix the shape.
 *
 * Ownership: kvf__solution_load fills a caller-owned struct whose strings and folder it owns;
 * kvf__solution_free releases them and removes the folder. Errors, one sentence each:
 * KVF_ENOTFOUND (the file cannot be read), KVF_EINVAL (not JSON, a field missing or of the
 * wrong type, a wrong language, no entry point, the entry file not among the sources, a source
 * path that leaves the folder, outputs returned instead of passed, a definition whose
 * signature is not kvfuzz's), KVF_EIO (the folder cannot
 * be written), KVF_ENOMEM. */
#ifndef KVFUZZ_PYTHON_SOLUTION_H
#define KVFUZZ_PYTHON_SOLUTION_H

#include <stdint.h>

#include "kvfuzz/error.h"

typedef struct kvf__solution {
    char *name;       /* the solution's name */
    char *definition; /* the definition it solves */
    char *language;   /* "python" or "triton" */
    char *dir;        /* private folder holding the sources */
    char *entry_file; /* relative to dir */
    char *function;
    /* Fixed by the definition (its const axes, else its name); 0 where it fixes nothing. */
    int32_t num_qo_heads, num_kv_heads, head_dim, page_size;
    /* The definition file found beside the solution (NULL when none was), and the arguments
     * its signature takes: 9, or 8 for a definition without kv_last_page_len (page size 1);
     * 11 or 10 for a definition with FP8 caches, k_scale and v_scale after sm_scale. */
    char *definition_path;
    int num_args;
    /* The caches' dtype (kvf_kv_dtype: both caches, one f32 scale each when FP8). */
    int32_t kv_dtype;
} kvf__solution;

int kvf__solution_load(const char *path, kvf__solution *out, kvf_error *err);
void kvf__solution_free(kvf__solution *s); /* a zeroed struct is fine */

#endif
