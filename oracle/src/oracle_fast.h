/* The oracle's fast path (docs/oracle.md, "The fast path"): one row (sequence b, q head h) in
 * double arithmetic with a rigorous error bound. Internal to the oracle library.
 *
 * kvf__fast_row() returns 1 when it certified every output of the row and wrote all of them
 * (o_rounded, o_exact, o_cond, lse_rounded, lse_exact, the row info), bit-identical in the
 * rounded values and the row info to what the MPFR path writes. It returns 0 when the row must
 * go to the MPFR path: a bound that does not settle a rounding, an interval that touches a
 * rounding boundary (a possible exact tie), a non-finite input, a length past the limits, or
 * no memory. What it wrote then is garbage that the MPFR path overwrites.
 *
 * Ownership: a workspace belongs to one thread; kvf__fast_ws_free releases it. */
#ifndef KVFUZZ_ORACLE_FAST_H
#define KVFUZZ_ORACLE_FAST_H

#include <stdint.h>

#include "kvfuzz/case.h"
#include "kvfuzz/oracle.h"

typedef struct kvf__fast_ws kvf__fast_ws;

typedef struct kvf__fast_out {
    kvf_bf16 *o_rounded; /* [D] */
    double *o_exact;     /* [D] */
    double *o_cond;      /* [D] */
    float *lse_rounded;
    double *lse_exact;
    kvf_oracle_row *info;
} kvf__fast_out;

/* NULL when out of memory (the caller then uses the MPFR path only). */
kvf__fast_ws *kvf__fast_ws_new(void);
void kvf__fast_ws_free(kvf__fast_ws *ws);

/* The calling thread must have MPFR's exponent range widened as the oracle's workers do (the
 * rare exact evaluation of the largest logit uses 640-bit MPFR numbers). */
int kvf__fast_row(kvf__fast_ws *ws, const kvf_case *c, int32_t b, int32_t h,
                  const kvf__fast_out *out);

#endif
