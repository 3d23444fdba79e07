/* The strict rule's per-judgement state and element check, which the fa rule builds on (fa.c
 * judges lse, non-finite values and rows without a usable baseline exactly as strict does).
 *
 * Internal to the oracle library. The state owns its scratch: kvf__strict_state_open allocates
 * it (KVF_ENOMEM with one sentence when it cannot), kvf__strict_state_close frees it. */
#ifndef KVFUZZ_RULES_STRICT_H
#define KVFUZZ_RULES_STRICT_H

#include "rule.h"
#include "strict_bound.h"

typedef struct kvf__strict_state {
    double *cm;        /* a P model's row scratch (kvf__strict_scratch_doubles), else NULL */
    kvf__strict_row s; /* the row part of the bound of row `row` */
    int64_t row;       /* the row s was computed for; -1 before the first */
} kvf__strict_state;

/* For judging case c under precision model p. */
int kvf__strict_state_open(kvf__strict_state *st, const kvf_precision *p, const kvf_case *c,
                           kvf_error *err);
void kvf__strict_state_close(kvf__strict_state *st);
/* The bound's row part for the element's row, computed when a row's first element needs it:
 * elements the judge counts from their bits alone never do. */
const kvf__strict_row *kvf__strict_row_of(kvf__strict_state *st, const kvf__rule_row *row);
/* strict's verdict on one element against the row part s. */
void kvf__strict_check(const kvf__strict_row *s, const kvf__elem_in *in, kvf_element_error *e);

#endif
