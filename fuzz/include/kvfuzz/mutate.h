/* Structure-aware mutation of case specs: the moves libFuzzer's custom mutator and the campaign
 * runner make on a decoded .kvfz (batch size, page counts, last-page lengths jumping to 0, 1,
 * S-1, S, S+1, page-table strategy and single entries, value distributions and single special
 * bf16 values, poison flags, sm_scale), a cross-over of two specs, and the fitting that keeps a
 * mutated spec inside the small-case budget the fuzzers run at.
 *
 * Ownership: every function edits the caller's kvf_spec in place (its arrays may be
 * reallocated); nothing else is allocated that outlives a call. Errors: kvf_spec_mutate and
 * kvf_spec_crossover return KVF_ENOMEM (the spec is then still a valid, freeable spec);
 * kvf_spec_repair returns the build error of a spec it could not make valid. */
#ifndef KVFUZZ_MUTATE_H
#define KVFUZZ_MUTATE_H

#include <stdint.h>

#include "kvfuzz/prng.h"
#include "kvfuzz/spec.h"

/* The budget a fuzzed case is kept within. Small cases are what find bugs fastest: the strict
 * rule sees 1-ulp-class bugs only at tens to hundreds of tokens, and the oracle's cost grows
 * with tokens x Hq x D. */
typedef struct kvf_mutate_limits {
    int32_t max_batch;      /* sequences per case */
    int32_t max_pages;      /* pages per sequence */
    int32_t max_page_size;  /* S */
    int32_t max_head_dim;   /* D */
    int32_t max_group;      /* Hq / Hk */
    int32_t max_kv_heads;   /* Hk */
    int64_t max_work;       /* kvf_spec_work: the oracle's cost */
    int64_t max_pool_elems; /* kvf_spec_pool_elems: the generator's cost */
    int32_t max_overrides;
    int allow_overflow;  /* may choose logits past the f32 range (the overflow class) */
    int allow_high_ids;  /* may choose the high-ids table (page ids past 65535) */
    int allow_nonfinite; /* may put NaN/inf at referenced positions (outside the default input
                            domain, docs/design.md §4); unused slots take them regardless */
    int allow_layouts;   /* may give a case a buffer layout other than the dense one */
    int allow_quant;     /* may give a case FP8 caches and scales (kvf_recipe_draw_quant) */
    /* The dtypes a cache may hold (KVF_KV_DTYPES_*, kvfuzz/kv_quant.h; 0: all), honoured by
     * fresh recipes, moves and fitting alike. Without bf16 (and with allow_quant) every case
     * gets FP8 caches: a bf16 spec is given the quantization kvf_spec_random draws for its
     * seed, a cache of a dtype outside the set takes one inside it, and the quant move never
     * goes back to bf16; explicit tensors then keep the dtypes they came with, since other
     * dtypes would need other values. Without FP8 no case keeps quantized caches, explicit
     * tensors included (as without allow_quant). */
    unsigned kv_dtypes;
} kvf_mutate_limits;

/* The smallest max_work under which a case is not empty: one token of one head of one
 * dimension, plus its output (kvf_spec_work). */
#define KVF_MUTATE_MIN_WORK 33

/* Defaults: batch <= 4, <= 8 pages of <= 256 slots, D <= 256, group <= 16, work <= 2^17,
 * pool <= 2^15 elements per cache, 16 overrides, overflow and high ids allowed, NaN/inf only where
 * they are never read, every cache dtype. */
void kvf_mutate_limits_default(kvf_mutate_limits *lim);

/* The moves, for counting and tests. */
typedef enum kvf_mutation {
    KVF_MUT_BATCH = 0,     /* resize the batch (0 .. max) */
    KVF_MUT_SEQ_REMOVE,    /* drop one sequence */
    KVF_MUT_SEQ_DUPLICATE, /* repeat one sequence's length */
    KVF_MUT_SEQ_LENGTH,    /* one sequence's length to 0, 1, S-1, S, S+1, k*32 +- 1, random */
    KVF_MUT_SEQ_PAGES,     /* one sequence's page count, keeping its last-page length */
    KVF_MUT_LAST_LEN,      /* one sequence's last-page length to 1, S-1, S or random */
    KVF_MUT_PAGE_SIZE,     /* S from a list of edge sizes, lengths kept where they fit */
    KVF_MUT_SHAPE,         /* Hk, the group Hq/Hk, D */
    KVF_MUT_TABLE,         /* page-table strategy, page_id_base near 32-bit offset edges */
    KVF_MUT_SPARE,         /* unreferenced pages in the pool */
    KVF_MUT_TABLE_ENTRY,   /* one kv_indices entry: aliased, last page of the pool, spare */
    KVF_MUT_DIST,          /* one of the q/k/v distributions: kind, scale or parameter */
    KVF_MUT_VALUE,    /* one q/k/v element set to a special bf16 (used slot, tail, unreferenced) */
    KVF_MUT_POISON,   /* flip one poison bit */
    KVF_MUT_LOGITS,   /* logit pattern */
    KVF_MUT_SM_SCALE, /* sm_scale: 1/sqrt(D), powers of two, 0, negative, tiny, huge */
    KVF_MUT_SEED,     /* new values, same structure */
    KVF_MUT_DROP_OVERRIDE, /* remove one override */
    KVF_MUT_EXPLICIT,      /* one element or page id of explicit tensors */
    KVF_MUT_LAYOUT,        /* the buffer layout: drawn anew, or back to dense */
    KVF_MUT_QUANT,         /* the caches' dtypes and scales: drawn anew, or back to bf16
                              (never when lim->kv_dtypes leaves bf16 out) */
    KVF_MUT_COUNT
} kvf_mutation;

const char *kvf_mutation_name(kvf_mutation m);

/* Applies one move chosen with `rng` (or, when `which` is in [0, KVF_MUT_COUNT), that move) and
 * fits the result to `lim`. Returns the move applied (a different one when the chosen move does
 * not apply to this spec) or a negative KVF_E* code. Moves that need the expanded case (single
 * entries and values) build it under `case_limits`. */
int kvf_spec_mutate(kvf_spec *spec, kvf_prng *rng, int which, const kvf_mutate_limits *lim,
                    const kvf_limits *case_limits);

/* out = a cross-over of a and b: a's structure (shape, batch, lengths, table) with b's values
 * (distributions, seed, logits, poison, sm_scale), or a's first sequences followed by b's last.
 * out must be empty; it is fitted to lim. 0 or KVF_ENOMEM. */
int kvf_spec_crossover(kvf_spec *out, const kvf_spec *a, const kvf_spec *b, kvf_prng *rng,
                       const kvf_mutate_limits *lim);

/* Shrinks a spec into the budget: batch, pages, page size, head dim, group, work, pool and
 * override count, in that order, changing as little as it can. Explicit tensors are dropped
 * when the shape must change. The caches' quantization is then fitted (kvf_spec_fit_quant). */
void kvf_spec_fit(kvf_spec *spec, const kvf_mutate_limits *lim);

/* The caches' quantization alone brought within lim (allow_quant, kv_dtypes), everything else
 * kept: dropped where not allowed, drawn from the spec's seed (kvf_recipe_draw_quant_seeded)
 * or its dtypes changed where FP8 caches of other dtypes are required, per-slot scales made
 * per-head for a large pool, K and V overrides rounded to the caches' dtypes. Deterministic:
 * the same spec and limits give the same result. */
void kvf_spec_fit_quant(kvf_spec *spec, const kvf_mutate_limits *lim);

/* Makes the overrides consistent with the expanded case (indices and page ids wrapped into
 * range, impossible ones dropped) and checks that the spec builds. Unless allow_nonfinite, it
 * also keeps NaN/inf out of the result's inputs: a table override that points a sequence at a
 * poisoned page is dropped (then other overrides, the poison, huge logit scaling, extreme q/k
 * values). On success *built (if not NULL) receives the built case, which the caller frees. Returns
 * 0 or the build error. */
int kvf_spec_repair(kvf_spec *spec, const kvf_limits *case_limits, int allow_nonfinite,
                    kvf_case *built, kvf_error *err);

/* Whether every q element and every k/v element some sequence reads is finite (the default
 * input domain). */
int kvf_case_inputs_finite(const kvf_case *c);

/* The costs a search limits (kvf_spec_work, kvf_spec_pool_elems, kvf_spec_tokens) are core's
 * cost model, kvfuzz/cost.h. */

/* Random options for kvf_spec_random that stay inside lim. */
void kvf_mutate_random_opts(kvf_random_opts *out, const kvf_mutate_limits *lim);

#endif
