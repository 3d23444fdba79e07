/* The shape set of a campaign (docs/fuzzing.md, "Shape sets"): for a kernel that compiles per
 * shape (a Triton or torch.compile function), the cases take their shape (Hq, Hk, D, S) from a
 * small set that grows slowly, so that the kernel's JIT caches serve most cases. Fresh recipes,
 * mutations and large cases alike: a shape already in the set is kept; the first `initial`
 * shapes seen, and then one more every `growth` cases, join it; any other is replaced by a
 * member drawn at random, its sequences keeping their lengths in tokens.
 *
 * One set per campaign, shared by its generator threads under its own lock (every worker then
 * meets the same shapes). Errors: none; a spec that cannot take another shape (explicit
 * tensors) keeps its own. */
#ifndef KVF_FUZZ_SHAPE_SET_H
#define KVF_FUZZ_SHAPE_SET_H

#include <pthread.h>
#include <stdint.h>

#include "kvfuzz/mutate.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/spec.h"

#define KVF__SHAPE_SET_MAX 256

typedef struct kvf__shape {
    uint8_t num_qo_heads, num_kv_heads;
    uint16_t head_dim, page_size;
} kvf__shape;

typedef struct kvf__shape_set {
    pthread_mutex_t mu;
    int initial;         /* shapes admitted as they come; 0: the set is off */
    uint64_t growth;     /* cases between two later admissions */
    uint64_t seen;       /* cases that went through the set */
    uint64_t next_admit; /* the case count at which the next new shape joins */
    kvf__shape member[KVF__SHAPE_SET_MAX];
    int n;
    uint64_t replaced; /* cases whose shape was replaced */
} kvf__shape_set;

void kvf__shape_set_init(kvf__shape_set *ss, int initial, uint64_t growth);
void kvf__shape_set_destroy(kvf__shape_set *ss);

/* Passes spec through the set (rng draws the member): returns 1 when its shape was replaced and
 * the spec fitted to lim again (its batch halved while its outputs alone would take half the
 * work budget, then kvf_spec_fit, which then shortens sequences rather than the shape), 0 when
 * it kept its own. */
int kvf__shape_set_apply(kvf__shape_set *ss, kvf_spec *spec, kvf_prng *rng,
                         const kvf_mutate_limits *lim);

/* The set's size now. */
int kvf__shape_set_size(kvf__shape_set *ss);

#endif
