/* A relation's two runs judged (kvf_outcome_relate in outcome.h): the bits compared through
 * kvfuzz/relation.h, and a broken relation recorded in the outcome. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "kvfuzz/outcome.h"
#include "kvfuzz/relation.h"

void kvf_outcome_relation_broken(kvf_outcome *out, const kvf_relation_pair *p, int promised) {
    out->relation_broken = 1;
    out->relation = (int)p->relation;
    out->relation_seed = p->seed;
    out->relation_promised = promised;
    snprintf(out->relation_what, sizeof out->relation_what, "%s", p->what);
    if (promised && out->finding == KVF_FINDING_NONE) {
        out->finding = KVF_FINDING_INVARIANCE;
        out->rule = -1;
    }
}

int64_t kvf_outcome_relate(kvf_outcome *out, const kvf_relation_pair *p, int promised,
                           const kvf_case *c, const kvf_bf16 *o, const float *lse,
                           const kvf_bf16 *o2, const float *lse2) {
    kvf_relation_diff f;
    const int64_t n = kvf_relation_compare(p, c, o, lse, o2, lse2, &f);
    if (n == 0) return 0;
    out->difference = (kvf_difference){
        .output = f.lse ? KVF_OUTPUT_LSE : KVF_OUTPUT_O,
        .b = f.b,
        .h = f.h,
        .d = f.lse ? -1 : f.d,
        .first_bits = f.bits,
        .second_bits = f.derived_bits,
        .count = f.count,
    };
    kvf_outcome_relation_broken(out, p, promised);
    return n;
}

int kvf_finding_report_relation(const json_t *report, int *relation, uint64_t *seed) {
    const json_t *r = report ? json_object_get(report, "relation") : NULL;
    if (!r) return 0;
    const char *name = json_string_value(json_object_get(r, "name"));
    const char *seed_text = json_string_value(json_object_get(r, "seed"));
    if (!name || !seed_text) return -1;
    const int id = kvf_relation_parse(name);
    char *end = NULL;
    errno = 0;
    const unsigned long long v = strtoull(seed_text, &end, 10);
    if (id < 0 || errno || !end || *end || end == seed_text) return -1;
    *relation = id;
    *seed = (uint64_t)v;
    return 1;
}
