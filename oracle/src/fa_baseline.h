/* The fp32 baseline of the `fa` rule (docs/fa-rule.md): one plain fp32 attention computation
 * per (sequence, q head) row, done by the judge itself so that the rule can compare a kernel's
 * error with what ordinary fp32 arithmetic loses on the same data.
 *
 * Internal to the oracle library. It shares no code with kernels/ on purpose: a baseline that
 * reused a kernel's code would repeat that kernel's bugs and excuse them. */
#ifndef KVFUZZ_FA_BASELINE_H
#define KVFUZZ_FA_BASELINE_H

#include <stdint.h>

#include "kvfuzz/case.h"

/* Computes row (b, h) of a valid case: o_out[0..D) receives the fp32 output before any bf16
 * rounding. `scratch` holds at least kvf_case_seq_len(c, b) floats (the row's weights). An
 * empty sequence gives o = 0. Non-finite inputs propagate (NaN / inf in o_out); the caller
 * decides what an unusable baseline means. Never fails, never allocates. */
void kvf__fa_baseline_row(const kvf_case *c, int32_t b, int32_t h, float *o_out, float *scratch);

#endif
