/* The de-duplication signature of a finding (outcome.h): what triage tells apart, as text and
 * as a hash that names the finding's files. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kvfuzz/outcome.h"
#include "kvfuzz/prng.h"

static const char *magnitude_band(int64_t ulps) {
    if (ulps < 0 || ulps == INT64_MAX) return "nan";
    if (ulps <= 2) return "ulp1-2";
    if (ulps <= 15) return "ulp3-15";
    if (ulps <= 255) return "ulp16-255";
    return "ulp256+";
}

static const char *value_kind(double x) {
    return isnan(x) ? "nan" : isinf(x) ? (x > 0 ? "+inf" : "-inf") : "finite";
}

const char *kvf_kernel_identity(const char *kernel, char *buf, size_t size) {
    const char *colon = strstr(kernel, ".so:");
    if (!colon) colon = strstr(kernel, ".so.");
    const char *slash = NULL;
    for (const char *p = kernel; colon && p < colon; p++)
        if (*p == '/') slash = p;
    snprintf(buf, size, "%s", slash ? slash + 1 : kernel);
    return buf;
}

uint64_t kvf_outcome_signature(const kvf_outcome *out, const char *kernel_name, char *text,
                               size_t size) {
    /* Room for the identity and every other field: a signature is never truncated. */
    char identity[512], buf[sizeof identity + 256];
    /* The library's folder is where it was built, not what it is: two builds of one plugin
     * give one signature (docs/plugins.md, "Names"). */
    const char *kernel = kvf_kernel_identity(kernel_name, identity, sizeof identity);
    const char *cls = kvf_finding_class_name(out->finding);
    if (out->rule >= 0 && out->rule < out->nrules) {
        const kvf_verdict *v = &out->verdicts[out->rule];
        /* The output that fails: o for o-tolerance, lse for lse-tolerance, for the others the
         * one whose worst element fails. Only an overflow finding is about rows out of the
         * model; any other class was decided on in-model rows, so o names it only when it
         * fails there: NaN in o on a row whose logits leave f32, beside an empty sequence's
         * wrong lse, is the lse's finding (whose in-model failures lead its worst list). */
        int64_t o_fails = v->o.violations;
        if (out->finding != KVF_FINDING_OVERFLOW) o_fails -= v->o.violations_out_of_model;
        const kvf_output_metrics *m = &v->o;
        const char *which = "o";
        if (out->finding == KVF_FINDING_LSE_TOLERANCE ||
            (out->finding != KVF_FINDING_O_TOLERANCE && o_fails == 0)) {
            m = &v->lse;
            which = "lse";
        }
        const char *detail = magnitude_band(m->max_ulps);
        if (out->finding == KVF_FINDING_NONFINITE && m->worst_count > 0)
            detail = value_kind(m->worst[0].kernel_value);
        snprintf(buf, sizeof buf, "%s|%s|%s|%s|%s", cls, kernel, v->rule.name, which, detail);
    } else if (out->finding == KVF_FINDING_CRASH && out->status == KVF_RUN_KERNEL_ERROR) {
        snprintf(buf, sizeof buf, "%s|%s|device-fault", cls, kernel);
    } else if (out->finding == KVF_FINDING_CRASH) {
        snprintf(buf, sizeof buf, "%s|%s|%s%d", cls, kernel, out->signal ? "signal" : "exit",
                 out->signal ? out->signal : out->exit_code);
    } else if (out->finding == KVF_FINDING_INVARIANCE) {
        snprintf(buf, sizeof buf, "%s|%s|%s|%s", cls, kernel,
                 kvf_relation_name((kvf_relation)out->relation),
                 out->difference.output == KVF_OUTPUT_O ? "o" : "lse");
    } else if (out->finding == KVF_FINDING_NONDETERMINISM) {
        snprintf(buf, sizeof buf, "%s|%s|%s", cls, kernel,
                 out->difference.output == KVF_OUTPUT_O ? "o" : "lse");
    } else {
        snprintf(buf, sizeof buf, "%s|%s", cls, kernel);
    }
    if (text && size) snprintf(text, size, "%s", buf);
    return kvf_hash64(buf, strlen(buf));
}
