/* The quantization step of the expansion (gen_quant.c), internal to core/. */
#ifndef KVFUZZ_GEN_QUANT_H
#define KVFUZZ_GEN_QUANT_H

#include "kvfuzz/spec.h"

/* For a spec with a quantization recipe: sets the case's dtypes and scales, rounds the values of
 * the referenced pages (c->resident_pages) and of the extra pages to their dtype and draws the
 * scales of both. Nothing for a plain recipe. Errors as kvf_case_set_quant's. */
int kvf__gen_quantize(kvf_case *c, const kvf_spec *s, const int64_t *extra, int64_t num_extra,
                      const kvf_limits *lim, kvf_error *err);

#endif
