/* Attribution of tolerance findings to precision models (attribution.h). */
#include "kvfuzz/attribution.h"

#include <stdio.h>
#include <string.h>

const char *kvf_attribution_kind_name(kvf_attribution_kind k) {
    switch (k) {
    case KVF_ATTRIB_PRECISION:
        return "precision";
    case KVF_ATTRIB_DEFECT:
        return "defect";
    default:
        return "";
    }
}

static int components(const kvf_precision *p) {
    return (p->p_format != KVF_P_F32) + (p->partials_bf16 != 0) + (p->ftz != 0);
}

int kvf_attribute(kvf_attribution *out, const kvf_verdict *v, const kvf_case *c,
                  const kvf_oracle_result *oracle, const kvf_bf16 *o, const float *lse,
                  kvf_error *err) {
    memset(out, 0, sizeof *out);
    if (!v || v->pass || !kvf_rule_takes_precision(&v->rule) ||
        (v->finding != KVF_FINDING_O_TOLERANCE && v->finding != KVF_FINDING_LSE_TOLERANCE &&
         v->finding != KVF_FINDING_NONFINITE))
        return 0;
    out->declared = v->rule.precision;
    char declared[KVF_PRECISION_NAME_MAX];
    kvf_precision_name(&out->declared, declared, sizeof declared);
    /* A NaN or an infinity where the exact value is finite is outside every model: no rounding
     * of P or of the partials makes one. It is a defect without judging again (no pass). */
    /* fp16 weights explain small errors of any kind (their unit is 2^-11), so a bf16 design's
     * finding would often read "P rounded to fp16", a mechanism the kernel does not have. With
     * bf16 inputs that design is rare: for a kernel that does not declare it, the fp16 models
     * come after every other (pass 1), where they name what only they explain (a weight below
     * fp16's normal range lost). */
    const int declared_fp16 = out->declared.p_format == KVF_P_FP16;
    int level = 0, naccepted = 0;
    kvf_precision accepted[24];
    char first[KVF_PRECISION_NAME_MAX + 48] = "";
    for (int pass = 0; pass < 2 && v->finding != KVF_FINDING_NONFINITE; pass++) {
        for (size_t i = 0; i < kvf_precision_ladder_count(); i++) {
            const kvf_precision *m = kvf_precision_ladder_at(i);
            if (kvf_precision_equal(m, &out->declared) || !kvf_precision_covers(m, &out->declared))
                continue;
            int late = m->p_format == KVF_P_FP16 && !declared_fp16;
            if (late != (pass == 1)) continue;
            /* After the first model that accepts, only those as simple (the ladder lists them
             * together) are tried. */
            if (out->kind == KVF_ATTRIB_PRECISION && components(m) != level) continue;
            /* A model containing one that already accepts adds nothing (bf16-p-rsum after
             * bf16-p). */
            int redundant = 0;
            for (int k = 0; k < naccepted && !redundant; k++)
                redundant = kvf_precision_covers(m, &accepted[k]);
            if (redundant) continue;
            kvf_rule r = v->rule;
            kvf_rule_set_precision(&r, m);
            kvf_verdict again;
            int rc = kvf_judge(&again, &r, c, oracle, o, lse, err);
            if (rc) return rc;
            if (kvf_verdict_status_of(&again, 0) == KVF_VERDICT_FAIL) continue;
            if (naccepted < (int)(sizeof accepted / sizeof accepted[0])) accepted[naccepted++] = *m;
            double margin = again.o.max_margin > again.lse.max_margin ? again.o.max_margin
                                                                      : again.lse.max_margin;
            char name[KVF_PRECISION_NAME_MAX], mtext[32];
            kvf_precision_name(m, name, sizeof name);
            kvf_margin_text(mtext, sizeof mtext, margin);
            if (out->kind == KVF_ATTRIB_PRECISION) {
                /* Another model as simple as the first also accepts it: one case cannot tell
                 * their mechanisms apart (a bf16-P kernel's error fits bf16-partials too), so
                 * both are named. */
                size_t used = strlen(out->also);
                snprintf(out->also + used, sizeof out->also - used, "%s%s (margin %s)",
                         used ? ", " : "", name, mtext);
                continue;
            }
            out->kind = KVF_ATTRIB_PRECISION;
            out->model = *m;
            out->margin = margin;
            level = components(m);
            snprintf(first, sizeof first, "%s (margin %s)", name, mtext);
        }
        if (out->kind == KVF_ATTRIB_PRECISION) break;
    }
    if (out->kind == KVF_ATTRIB_PRECISION) {
        char why[160];
        kvf_precision_explain(&out->model, why, sizeof why);
        snprintf(out->text, sizeof out->text, "fails %s; within %s%s%s: %s", declared, first,
                 out->also[0] ? ", equally within " : "", out->also, why);
        return 0;
    }
    out->kind = KVF_ATTRIB_DEFECT;
    snprintf(out->text, sizeof out->text, "fails %s; no precision model explains it", declared);
    return 0;
}
