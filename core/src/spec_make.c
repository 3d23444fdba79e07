/* A new case's spec, checked to build (kvfuzz/spec_make.h). */
#include "kvfuzz/spec_make.h"

int kvf_spec_make(kvf_spec *out, const char *preset, uint64_t seed, int expansion,
                  const kvf_quant_recipe *quant, const kvf_limits *limits, kvf_error *err) {
    if (quant && !kvf_quant_recipe_is_plain(quant)) {
        int qrc = kvf_quant_recipe_check(quant, err);
        if (!qrc && kvf_kv_quant_is_plain(&quant->kv))
            qrc = kvf_error_set(err, KVF_EINVAL, "bf16 caches without scales take no base scales");
        if (qrc) return qrc;
    }
    kvf_random_opts ropts;
    kvf_random_opts_default(&ropts);
    ropts.expansion = expansion;
    int rc =
        preset ? kvf_spec_preset(out, preset, seed, err) : kvf_spec_random(out, seed, &ropts, err);
    if (rc) return rc;
    out->recipe.expansion = (uint8_t)expansion;
    if (quant) out->quant = *quant;
    kvf_case c;
    kvf_error berr = {0};
    if ((rc = kvf_case_build(&c, out, limits, &berr))) {
        kvf_spec_free(out);
        return kvf_error_set(err, rc, "the recipe does not build: %s", berr.msg);
    }
    kvf_case_free(&c);
    return 0;
}
