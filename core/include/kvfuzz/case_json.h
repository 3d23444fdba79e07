/* A case as JSON for people and tools (`kvfuzz show`): its shape, page table and lengths, the
 * recipe it came from (with its overrides and, for an imported case, its origin), a summary of
 * the values it uses, and optionally every tensor value as bf16 bits.
 *
 * Ownership: the json_t returned is a new reference the caller owns (json_decref); the spec and
 * the case are borrowed for the call. Errors: none but memory: NULL when it ran out (or a string
 * jansson refuses, such as a path that is not UTF-8). */
#ifndef KVFUZZ_CASE_JSON_H
#define KVFUZZ_CASE_JSON_H

#include <jansson.h>
#include <stdint.h>

#include "kvfuzz/bf16.h"
#include "kvfuzz/case.h"
#include "kvfuzz/spec.h"

/* Counts and moments of a set of bf16 values: NaN and infinities are counted apart and left
 * out of min, max and the sums. Start from all zeros. */
typedef struct kvf_value_summary {
    int64_t count, nan, inf, zero;
    double min, max, sum, sum_abs;
} kvf_value_summary;

void kvf_value_summary_add(kvf_value_summary *s, kvf_bf16 x);

/* {"count", "nan", "inf", "zero", "min", "max", "mean", "mean_abs"}; min, max and the means are
 * null when no value is finite (never a number standing for "none"). */
json_t *kvf_value_summary_json(const kvf_value_summary *s);

/* The case read from `path` (spec: its recipe, c: the case it builds) as one object: file,
 * format_version, shape, batch_size, num_pages, sm_scale (and its bits), total_tokens,
 * seq_lens, the page table arrays, recipe, overrides, explicit_tensors, origin (imported cases
 * only), values (q, and k/v over the tokens sequences use) and resident_pages; with `full`,
 * also q and the resident pages' k and v as arrays of 4-digit hex bits. */
json_t *kvf_case_json(const char *path, const kvf_spec *spec, const kvf_case *c, int full);

#endif
