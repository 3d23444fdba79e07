/* Invariance relations (docs/invariance.md): a transformation of a case and what must hold,
 * bit for bit, between a kernel's outputs on the case and on the transformed ("derived") case.
 * The relations are the lines of kvfuzz/relations.def.
 *
 * kvf_relation_derive builds the derived case of a relation from a case and a seed: the same
 * seed and case give the same derived case, so a finding records the relation and the seed,
 * and replay derives the second case again. kvf_relation_compare maps the derived outputs back
 * and counts the elements whose bits differ (any NaN equals any NaN: payloads are not
 * compared).
 *
 * Ownership: a kvf_relation_pair owns its derived case and maps; kvf_relation_pair_free
 * releases them. Errors: KVF_EUNSUPPORTED when the relation does not apply to the case (one
 * KV head for a head permutation, no room in the limits for a placement past the int32 edge
 * is not this: placement then uses the highest ids that fit), KVF_ELIMIT / KVF_EINVAL from the
 * derived case's checks, KVF_ENOMEM; each with one sentence. */
#ifndef KVFUZZ_RELATION_H
#define KVFUZZ_RELATION_H

#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/case.h"

typedef enum kvf_relation {
#define KVF_RELATION(id, name, promised, doc) KVF_RELATION_##id,
#include "kvfuzz/relations.def"
#undef KVF_RELATION
    KVF_RELATION_COUNT
} kvf_relation;

/* A set of relations: bit r is relation r. */
#define KVF_RELATION_BIT(r) (1u << (unsigned)(r))
#define KVF_RELATION_ALL ((1u << KVF_RELATION_COUNT) - 1u)

const char *kvf_relation_name(kvf_relation r); /* "?" out of range */
const char *kvf_relation_doc(kvf_relation r);
/* 1 for a relation whose second run is not a run of the derived case but the case itself,
 * replayed through a CUDA graph captured on the derived case (graph-replay: kvf_kernel_graph_
 * replay in kvfuzz/kernel.h, the wire flag of the campaign's worker); its outputs are then
 * compared with the case's eager run through identity maps. 0 for the others. */
int kvf_relation_is_replay(kvf_relation r);
/* The relation named `name`, or -1. */
int kvf_relation_parse(const char *name);
/* The relations every kernel promises unless it says otherwise (PROMISED DEFAULT). */
unsigned kvf_relation_default_promises(void);
/* A set of relations from text, starting from `base`: names joined by ',', each adding its
 * relation, or withdrawing it after '-'; "all" stands for every relation. KVF_EINVAL with a
 * sentence naming the first word that is not a relation and the text (`what` it is). */
int kvf_relation_set_parse(const char *text, const char *what, unsigned base, unsigned *mask,
                           kvf_error *err);
/* A kernel's promises from its declaration (kvfuzz/plugin.h, `promises`): the defaults changed
 * by names joined by ',' ("batch-invariance" adds, "-v-scaling" withdraws). NULL or "" gives
 * the defaults. KVF_EINVAL with a sentence naming the first word that is not a relation. */
int kvf_relation_promises_parse(const char *text, unsigned *mask, kvf_error *err);
/* The set as text ("placement,head-permutation"), "none" for the empty set. */
void kvf_relation_mask_text(unsigned mask, char *buf, size_t size);

typedef struct kvf_relation_pair {
    kvf_relation relation;
    uint64_t seed;
    kvf_case derived;
    /* How derived outputs map back: derived row (b, h) of original row (b, h) is
     * (seq_of[b], head_of[h]); seq_of[b] is -1 for a sequence the derived case does not hold. */
    int32_t *seq_of;  /* [B] */
    int32_t *head_of; /* [Hq] */
    int shift;        /* v-scaling: derived o = o x 2^shift */
    /* v-scaling: o elements [B][Hq][D] whose terms come near the subnormal range, where
     * scaling may round differently; they are not compared (NULL: none excluded). */
    uint8_t *excluded;
    int64_t num_excluded;
    char what[160]; /* the transformation in words, for a finding ("pages moved to 65520..") */
} kvf_relation_pair;

/* Derives relation r of case c with seed; the derived case is checked against lim. */
int kvf_relation_derive(kvf_relation_pair *p, kvf_relation r, const kvf_case *c, uint64_t seed,
                        const kvf_limits *lim, kvf_error *err);
void kvf_relation_pair_free(kvf_relation_pair *p);

/* The first element where a relation broke. */
typedef struct kvf_relation_diff {
    int64_t count; /* elements that differ */
    int64_t compared;
    int lse;         /* the first difference is in lse (else o) */
    int32_t b, h, d; /* in the original case's coordinates */
    uint32_t bits, derived_bits;
} kvf_relation_diff;

/* Compares the kernel's outputs on c (o, lse) with its outputs on p->derived (o2, lse2).
 * Returns the number of differing elements (0: the relation held). */
int64_t kvf_relation_compare(const kvf_relation_pair *p, const kvf_case *c, const kvf_bf16 *o,
                             const float *lse, const kvf_bf16 *o2, const float *lse2,
                             kvf_relation_diff *first);

#endif
