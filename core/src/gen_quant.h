/* The quantization step of the expansion (gen_quant.c), internal to core/. */
#ifndef KVFUZZ_GEN_QUANT_H
#define KVFUZZ_GEN_QUANT_H

#include "kvfuzz/spec.h"

/* For a spec with a quantization recipe: sets the case's dtypes and scales, rounds the values of
 * the referenced pages (c->resident_pages) and of the extra pages to their dtype and draws the
 * scales of both. Nothing for a plain recipe. Errors as kvf_case_set_quant's. */
int kvf__gen_quantize(kvf_case *c, const kvf_spec *s, const int64_t *extra, int64_t num_extra,
                      const kvf_limits *lim, kvf_error *err);

/* For a spec with explicit tensors and a quantization recipe (tensor scales): sets the case's
 * dtypes and its two scales, the recipe's bases. The explicit FP8 caches are taken as they are:
 * every element must be an image of its dtype's bytes (KVF_EINVAL naming the first that is
 * not), since every explicit page holds data. Nothing for a plain recipe. */
int kvf__gen_quantize_explicit(kvf_case *c, const kvf_spec *s, const kvf_limits *lim,
                               kvf_error *err);

#endif
