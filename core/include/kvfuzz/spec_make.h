/* A new case's spec (`kvfuzz gen`): a named preset or a random recipe over every generator
 * strategy, in the file version of the chosen expansion, checked to build before anyone saves
 * it, so that a case file kvfuzz writes always opens.
 *
 * Ownership: on success *out holds a spec the caller releases with kvf_spec_free; on failure
 * there is nothing to release. Errors: kvf_spec_preset's (KVF_ENOTFOUND for an unknown preset)
 * and kvf_spec_random's, each with its sentence; a recipe that does not build under `limits`
 * returns kvf_case_build's code with "the recipe does not build: <why>". */
#ifndef KVFUZZ_SPEC_MAKE_H
#define KVFUZZ_SPEC_MAKE_H

#include <stdint.h>

#include "kvfuzz/case.h"
#include "kvfuzz/error.h"
#include "kvfuzz/spec.h"

/* The preset `preset` with values from `seed`, or with preset NULL a random recipe drawn from
 * `seed`; its recipe.expansion is `expansion` (KVF_EXPANSION_1 or KVF_EXPANSION_2); with quant
 * not NULL, its caches quantized so (kvf_quant_recipe; KVF_EINVAL with the sentence of
 * kvf_quant_recipe_check when out of its domain). */
int kvf_spec_make(kvf_spec *out, const char *preset, uint64_t seed, int expansion,
                  const kvf_quant_recipe *quant, const kvf_limits *limits, kvf_error *err);

#endif
