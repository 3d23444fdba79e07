/* The oracle's answer for one case as JSON (`kvfuzz oracle --json`), so that it can be checked
 * against any other arbitrary-precision implementation: per row (sequence, q head) its length,
 * the overflow flag, the correctly rounded lse (f32 bits and value) and the exact lse, and per o
 * element [bf16 bits, rounded value, exact value]. Non-finite numbers (the empty sequence's -inf
 * lse, any NaN) are the strings "-Infinity", "NaN" (kvfuzz/json_io.h), never bare tokens.
 *
 * Ownership: the json_t returned is a new reference the caller owns (json_decref); the case and
 * the result are borrowed. Errors: none but memory: NULL when it ran out. */
#ifndef KVFUZZ_ORACLE_JSON_H
#define KVFUZZ_ORACLE_JSON_H

#include <jansson.h>

#include "kvfuzz/case.h"
#include "kvfuzz/oracle.h"

/* {"batch_size", "num_qo_heads", "head_dim", "rows": [{"b", "h", "length", "overflow",
 * "lse_bits", "lse", "lse_exact", "o": [[bits, rounded, exact], ...]}, ...]}, rows in (b, h)
 * order. r must be the oracle's result for c. */
json_t *kvf_oracle_json(const kvf_case *c, const kvf_oracle_result *r);

#endif
