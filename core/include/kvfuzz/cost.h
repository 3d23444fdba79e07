/* The cost model: what a case costs to build, judge and search, estimated from its spec alone
 * before anything is allocated, the budgets those estimates are held to (docs/case-format.md,
 * "Budgets"), and the pool rule that decides which pages the generator writes, which the
 * estimates follow. One model for the whole program: the decoder and kvf_case_build check
 * every recipe against the budgets (kvf_recipe_check), the FlashInfer-Bench import checks
 * explicit pools (kvf_explicit_pool_budget), the oracle sizes its threads by the KVF_ORACLE_*
 * figures and reads the budgets (kvf_limits_budgets), the generator (core/src/gen_expand.c)
 * follows the pool rule, and the mutator, the campaign and the fuzz harnesses size cases by
 * kvf_spec_work and kvf_spec_pool_elems. Definitions: core/src/cost.c.
 *
 * This header names the spec types by their struct tags only, so that kvfuzz/spec.h can include
 * it without an include circle.
 *
 * Ownership: nothing here allocates. Errors: kvf_limits_budgets returns KVF_EINVAL (a budget
 * variable that is not a decimal integer in its range) and kvf_explicit_pool_budget also
 * KVF_ELIMIT (past the memory budget), each with one sentence; the estimates do not fail. */
#ifndef KVFUZZ_COST_H
#define KVFUZZ_COST_H

#include <stdint.h>

#include "kvfuzz/case.h"

struct kvf_recipe;
struct kvf_spec;

/* What judging a case costs, estimated from its recipe alone, before anything is allocated
 * (docs/case-format.md, "Budgets"). Upper estimates, not measurements: tensors count q, the
 * table and every referenced page twice (the case, and its copy in the kernel's worker); the
 * oracle its outputs and the working memory of its longest row on one thread; kernel buffers
 * the kernel's outputs twice (the determinism re-run) and the judge's per-token scratch. */
typedef struct kvf_case_cost {
    int64_t tensor_bytes;
    int64_t oracle_bytes;
    int64_t kernel_bytes;
    int64_t memory_bytes; /* the sum of the three */
    int64_t work;         /* Hq x (sum over sequences of L x (D + 64) + B x D): the oracle's time */
} kvf_case_cost;

/* Working memory of the oracle, one thread (docs/oracle.md, "Memory"). Each path keeps
 * per-token values for a row only while they fit in KVF_ORACLE_ROW_STORE_BYTES: the MPFR path's
 * workspace takes KVF_ORACLE_MPFR_TOKEN_BYTES per token at the first precision (oracle.c), the
 * fast path's KVF_ORACLE_FAST_TOKEN_BYTES(G) for a kv group of G q heads (oracle_fast.c). A
 * longer row streams: its tokens are recomputed in every pass, in blocks within the same limit,
 * so a thread's memory does not grow with the row (an exact-tie test on a streamed row holds
 * one entry per distinct logit, within a quarter of the memory budget). The oracle runs fewer
 * threads when more would pass the memory budget. */
#define KVF_ORACLE_ROW_STORE_BYTES ((int64_t)32 << 20)
#define KVF_ORACLE_MPFR_TOKEN_BYTES 688
#define KVF_ORACLE_FAST_TOKEN_BYTES(G) (24 * (int64_t)(G) + 40)
#define KVF_ORACLE_TOKEN_BYTES(G) (KVF_ORACLE_MPFR_TOKEN_BYTES + KVF_ORACLE_FAST_TOKEN_BYTES(G))
/* One thread's working memory for a case whose longest row has `longest` tokens: both paths'
 * stores, with the streamed MPFR path's exact weight sum (at most 2^21 bits, twice). */
#define KVF_ORACLE_THREAD_BYTES(longest, G)                                                        \
    ((longest)*KVF_ORACLE_TOKEN_BYTES(G) < 2 * KVF_ORACLE_ROW_STORE_BYTES + ((int64_t)1 << 19)     \
         ? (longest)*KVF_ORACLE_TOKEN_BYTES(G)                                                     \
         : 2 * KVF_ORACLE_ROW_STORE_BYTES + ((int64_t)1 << 19))
/* Bytes of the oracle's outputs per output element (o) and per row (lse, row data). */
#define KVF_ORACLE_ELEM_BYTES 18
#define KVF_ORACLE_ROW_BYTES 64

/* Defaults of the budgets (KVF_MAX_MEMORY_MIB and KVF_MAX_WORK override them). */
#define KVF_DEFAULT_MAX_MEMORY_BYTES ((int64_t)2 << 30)
#define KVF_DEFAULT_MAX_WORK ((int64_t)1 << 33)

void kvf_recipe_cost(const struct kvf_recipe *rp, kvf_case_cost *out);

/* `bytes` as a person reads a size in a message: "1.00 MiB", "2.50 GiB", "512 bytes" (GiB
 * from 1 GiB up, MiB from 1 MiB, KiB from 1 KiB), written into buf, which it returns. */
#define KVF_SIZE_TEXT_MAX 32
const char *kvf_size_text(int64_t bytes, char buf[KVF_SIZE_TEXT_MAX]);

/* The budgets in force for `limits`: its fields when positive, else KVF_MAX_MEMORY_MIB (MiB)
 * and KVF_MAX_WORK when set and not empty, else the defaults. KVF_EINVAL, with a sentence
 * naming the variable, when one is set to anything but a decimal integer in its range (the
 * environment table, kvfuzz/env.h). */
int kvf_limits_budgets(const kvf_limits *limits, int64_t *max_memory_bytes, int64_t *max_work,
                       kvf_error *err);

/* The memory budget of a case that carries an explicit pool of `pool` pages (every page of k
 * and v held by the spec and again by the case) beside what kvf_recipe_cost() counts: the
 * decoder and the FlashInfer-Bench import check it before allocating the pool. KVF_ELIMIT with
 * one sentence when it is past the budget; the errors of kvf_limits_budgets(). */
int kvf_explicit_pool_budget(const struct kvf_recipe *recipe, int64_t pool,
                             const kvf_limits *limits, kvf_error *err);

/* The pool rule. The generator writes every page of a pool of at most KVF_FULL_POOL_BYTES per
 * cache (referenced pages get values, the others poison or filler, so a kernel that reads an
 * unreferenced page changes its answer); in a larger pool only the referenced pages and at most
 * KVF_POOL_NEIGHBOUR_PAGES unreferenced neighbours of them (where an off-by-one lands), so a
 * high-ids pool of gigabytes stays sparse. Fewer when the resident-bytes limit allows fewer. */
#define KVF_FULL_POOL_BYTES ((int64_t)64 << 20)
#define KVF_POOL_NEIGHBOUR_PAGES 64

/* Total tokens of a spec: the sum of its sequences' lengths. */
int64_t kvf_spec_tokens(const struct kvf_spec *spec);

/* The oracle's cost as the search sizes cases: (tokens + 32 x batch) x Hq x D. Measured on the
 * MPFR oracle, a correctly rounded output costs about as much as 32 tokens' dot products. The
 * same terms as kvf_case_cost.work, weighted as measured rather than as an upper bound. */
int64_t kvf_spec_work(const struct kvf_spec *spec);

/* The generator's cost: elements it writes into each cache under the pool rule (all of a small
 * pool; the referenced pages and their neighbours in a large one). Explicit pools count whole.
 * For a high-ids table, whose stride the seed draws from 1..3, the largest pool of the three. */
int64_t kvf_spec_pool_elems(const struct kvf_spec *spec);

#endif
