/* Attribution of tolerance findings to precision models (docs/precision.md, section 5): a
 * verdict that fails under the model a kernel declares is judged again under every looser
 * model of the ladder (precision.h), and the tightest one that accepts it names the precision
 * the kernel actually delivers. A finding no model accepts is a defect.
 *
 * Pure: reads its inputs, writes only the caller's struct; the judge it calls allocates and
 * frees its own scratch. Errors: those of kvf_judge (KVF_EINVAL for a shape mismatch,
 * KVF_ENOMEM). */
#ifndef KVFUZZ_ATTRIBUTION_H
#define KVFUZZ_ATTRIBUTION_H

#include "kvfuzz/judge.h"

typedef enum kvf_attribution_kind {
    KVF_ATTRIB_NONE = 0,  /* nothing to attribute: the verdict passes, or its rule is neither
                             strict nor fa, or its class is not a tolerance class */
    KVF_ATTRIB_PRECISION, /* a looser model accepts it: precision below the declared model */
    KVF_ATTRIB_DEFECT,    /* no model of the ladder accepts it */
} kvf_attribution_kind;

typedef struct kvf_attribution {
    kvf_attribution_kind kind;
    kvf_precision declared; /* the model the verdict was judged under */
    kvf_precision model;    /* KVF_ATTRIB_PRECISION: the tightest model that accepts it */
    double margin;          /* ... and the largest element margin under it (<= 1) */
    /* Other models as simple as `model` (as many components) that accept it too, with their
     * margins, "bf16-partials (margin 0.52)"; "" when none. One case cannot tell their
     * mechanisms apart. */
    char also[160];
    /* For people: "fails f32; within bf16-p (margin 0.41): P rounded to bf16 before P.V
     * (denominator from the unrounded P)", with ", equally within ..." before the colon when
     * `also` is not empty, or "fails f32; no precision model explains it". */
    char text[600];
} kvf_attribution;

/* Attributes a failing strict or fa verdict `v` (as kvf_judge returned it for this case and
 * these outputs). Writes kind NONE for anything else. */
int kvf_attribute(kvf_attribution *out, const kvf_verdict *v, const kvf_case *c,
                  const kvf_oracle_result *oracle, const kvf_bf16 *o, const float *lse,
                  kvf_error *err);

/* "precision" or "defect" ("" for NONE): the word reports and JSON use. */
const char *kvf_attribution_kind_name(kvf_attribution_kind k);

#endif
