/* The fp32 baselines of the `fa` rule (docs/fa-rule.md): plain fp32 attention computations
 * per (sequence, q head) row, done by the judge itself so that the rule can compare a kernel's
 * error with what ordinary fp32 arithmetic loses on the same data.
 *
 * Internal to the oracle library. It shares no code with kernels/ on purpose: a baseline that
 * reused a kernel's code would repeat that kernel's bugs and excuse them. */
#ifndef KVFUZZ_FA_BASELINE_H
#define KVFUZZ_FA_BASELINE_H

#include <stdint.h>

#include "kvfuzz/case.h"

/* The three orders the rule measures (docs/fa-rule.md, §2). */
typedef enum kvf__fa_order {
    KVF__FA_TWO_PASS = 0, /* maximum first, then weights normalised (by 3x their sum), sums */
    KVF__FA_ONLINE_FWD,   /* one pass, tokens ascending, rescaled at every new maximum */
    KVF__FA_ONLINE_BWD,   /* the same, tokens descending, every weight times 1 - 2^-24 */
    KVF__FA_ORDERS
} kvf__fa_order;

/* Natural-unit logits of row (b, h) of a valid case: s[t] = fl(fl(sum_d q_d k_td) * sm_scale),
 * the sum sequential, for t < kvf_case_seq_len(c, b). */
void kvf__fa_baseline_logits(const kvf_case *c, int32_t b, int32_t h, float *s);

/* Row (b, h) in one order from its logits s: o_out[0..D) receives the fp32 output before any
 * bf16 rounding. `w` holds at least kvf_case_seq_len(c, b) floats (two-pass weights). An empty
 * sequence gives o = 0. Non-finite inputs propagate (NaN / inf in o_out); the caller decides
 * what an unusable baseline means. Never fails, never allocates. */
void kvf__fa_baseline_softmax(const kvf_case *c, int32_t b, int32_t h, kvf__fa_order order,
                              const float *s, float *w, float *o_out);

#endif
