/* The oracle's fast path (docs/oracle.md, "The fast path"): the G rows (q heads) of one kv
 * group of one sequence in double arithmetic with a rigorous error bound. Internal to the
 * oracle library.
 *
 * kvf__fast_group() writes into `out` (at rows b * Hq + g * G + i) every output of each row it
 * certified (o_rounded, o_exact, o_cond, lse_rounded, lse_exact, the row info), bit-identical
 * in the rounded values and the row info to what the MPFR path writes, and returns G flags:
 * 1 for such a row, 0 for a row that must go to the MPFR path (a bound that does not settle a
 * rounding, an interval that touches a rounding boundary, i.e. a possible exact tie, a
 * non-finite input, a length past the limits). It returns NULL (no row done) when out of
 * memory. What it wrote for a row flagged 0 is garbage that the MPFR path overwrites.
 *
 * Ownership: a workspace belongs to one thread and serves any sequence of cases (it grows to
 * each one's shape); kvf__fast_ws_free releases it; the flags live in it until the next call. */
#ifndef KVFUZZ_ORACLE_FAST_H
#define KVFUZZ_ORACLE_FAST_H

#include <stdint.h>

#include "kvfuzz/case.h"
#include "kvfuzz/oracle.h"

typedef struct kvf__fast_ws kvf__fast_ws;

/* NULL when out of memory (the caller then uses the MPFR path only). */
kvf__fast_ws *kvf__fast_ws_new(void);
void kvf__fast_ws_free(kvf__fast_ws *ws);

/* The calling thread must have MPFR's exponent range widened as the oracle's workers do (the
 * rare exact evaluation of the largest logit uses 640-bit MPFR numbers). */
const unsigned char *kvf__fast_group(kvf__fast_ws *ws, const kvf_case *c, int32_t b, int32_t g,
                                     kvf_oracle_result *out);

#endif
