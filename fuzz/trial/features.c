/* The fuzzers' feedback (outcome.h, "error buckets"): an outcome's margins, ulp distances and
 * classes as indices into a space of features, so a campaign or libFuzzer keeps a case that
 * reaches a bucket no earlier case reached. */
#include <math.h>
#include <stdint.h>

#include "kvfuzz/outcome.h"

int kvf_margin_bucket(double m) {
    if (isnan(m)) return 63;
    if (isinf(m)) return 62;
    if (m <= 0) return 0;
    int e = ilogb(m); /* floor(log2 m) */
    if (e < -50) e = -50;
    if (e > 10) e = 10;
    return 1 + (e + 50);
}

int kvf_ulp_bucket(int64_t u) {
    if (u < 0) return 65;
    if (u == INT64_MAX) return 64;
    if (u == 0) return 0;
    int e = 0;
    while (u >>= 1)
        e++;
    return 1 + e;
}

int kvf_feature_space(int nrules) {
    return nrules * 2 * KVF_MARGIN_BUCKETS + 2 * KVF_ULP_BUCKETS +
           (nrules > 0 ? nrules : 1) * KVF_FINDING_CLASS_COUNT;
}

int kvf_feature_max(int nrules) {
    return nrules * 2 + 2 + (nrules > 0 ? nrules : 1);
}

int kvf_outcome_features(const kvf_outcome *out, int *f) {
    int n = 0, nr = out->nrules;
    const int ulp_base = nr * 2 * KVF_MARGIN_BUCKETS;
    const int class_base = ulp_base + 2 * KVF_ULP_BUCKETS;
    if (out->status != KVF_RUN_OK || nr == 0) {
        /* Run-level classes share the first rule's class slots. */
        f[n++] = class_base + out->finding;
        return n;
    }
    for (int r = 0; r < nr; r++) {
        const kvf_verdict *v = &out->verdicts[r];
        f[n++] = (r * 2 + 0) * KVF_MARGIN_BUCKETS + kvf_margin_bucket(v->o.max_margin);
        f[n++] = (r * 2 + 1) * KVF_MARGIN_BUCKETS + kvf_margin_bucket(v->lse.max_margin);
        f[n++] = class_base + r * KVF_FINDING_CLASS_COUNT + v->finding;
    }
    /* ulp distances do not depend on the rule. A NaN/inf mismatch has no distance; it keeps
     * a bucket of its own (the one past every distance), so the search still tells it apart. */
    const kvf_output_metrics *mo = &out->verdicts[0].o, *ml = &out->verdicts[0].lse;
    f[n++] = ulp_base +
             (mo->nonfinite_mismatch ? kvf_ulp_bucket(INT64_MAX) : kvf_ulp_bucket(mo->max_ulps));
    f[n++] = ulp_base + KVF_ULP_BUCKETS +
             (ml->nonfinite_mismatch ? kvf_ulp_bucket(INT64_MAX) : kvf_ulp_bucket(ml->max_ulps));
    return n;
}
