/* The cost model (kvfuzz/cost.h): estimates of what a case costs to build, judge and search,
 * the budgets they are held to, and the check that refuses a recipe past them.
 *
 * The oracle's time is counted in one unit everywhere, dot-product terms (oracle_terms), with
 * two weightings: the budget's (kvf_case_cost.work, an upper bound that refuses cases) and the
 * search's (kvf_spec_work, measured, that sizes fuzzed cases). They are not merged: each is
 * pinned by what depends on it (KVF_MAX_WORK's meaning; every mutation and campaign seed). */
#include "kvfuzz/cost.h"

#include <stdio.h>

#include "cost_internal.h"
#include "kvfuzz/env.h"
#include "kvfuzz/spec.h"

/* The oracle's time in dot-product terms: for each of the Hq heads of each sequence, one term per
 * token and dimension plus `token_extra` per token (its exponential and bookkeeping), and
 * `output_weight` terms per output element (its correct rounding). */
static int64_t oracle_terms(int64_t hq, int64_t d, int64_t tokens, int64_t batch,
                            int64_t token_extra, int64_t output_weight) {
    return hq * (tokens * (d + token_extra) + batch * d * output_weight);
}

/* The budget's weighting: generous per token, one term per output element. */
#define BUDGET_TOKEN_EXTRA 64
#define BUDGET_OUTPUT_WEIGHT 1
/* The search's weighting, measured on the oracle (MPFR, one core): an exact dot-product term
 * costs about 27 ns and a correctly rounded output about 1.2 us, some 45 terms; outputs are
 * weighted accordingly. */
#define SEARCH_TOKEN_EXTRA 0
#define SEARCH_OUTPUT_WEIGHT 32

/* ---- budgets (docs/case-format.md, "Budgets") ------------------------------------------- */

void kvf_recipe_cost(const kvf_recipe *rp, kvf_case_cost *out) {
    /* Every factor is bounded by the recipe's field widths (B < 2^16, Hq, Hk < 2^8, D, S < 2^16,
     * pages per sequence < 2^16), so no product below leaves int64. */
    const int64_t hq = rp->num_qo_heads, hk = rp->num_kv_heads ? rp->num_kv_heads : 1;
    const int64_t d = rp->head_dim, s = rp->page_size, b = rp->batch_size;
    const int64_t g = hq / hk > 0 ? hq / hk : 1;
    int64_t tokens = 0, longest = 0, entries = 0;
    for (uint32_t i = 0; i < rp->batch_size; i++) {
        int64_t n = rp->num_pages[i];
        int64_t len = n ? (n - 1) * s + rp->last_page_len[i] : 0;
        tokens += len;
        entries += n;
        if (len > longest) longest = len;
    }
    const int64_t rows = b * hq, elems = rows * d, page_bytes = s * hk * d * 2;
    /* Referenced pages (at most one per table entry), their spares and the poisoned
     * neighbours of a sparse pool (at most 64), in both caches. */
    int64_t pages = entries + rp->spare_pages + KVF_POOL_NEIGHBOUR_PAGES;
    int64_t tensors = elems * 2 + (entries + 3 * b + 1) * 4 + pages * page_bytes * 2;
    out->tensor_bytes = 2 * tensors;
    out->oracle_bytes = elems * KVF_ORACLE_ELEM_BYTES + rows * KVF_ORACLE_ROW_BYTES +
                        KVF_ORACLE_THREAD_BYTES(longest, g) + d * 256;
    out->kernel_bytes = 2 * (elems * 2 + rows * 4) + elems * 8 + longest * 16;
    out->memory_bytes = out->tensor_bytes + out->oracle_bytes + out->kernel_bytes;
    out->work = oracle_terms(hq, d, tokens, b, BUDGET_TOKEN_EXTRA, BUDGET_OUTPUT_WEIGHT);
}

int kvf_limits_budgets(const kvf_limits *lim, int64_t *max_memory, int64_t *max_work,
                       kvf_error *err) {
    int64_t mib = KVF_DEFAULT_MAX_MEMORY_BYTES >> 20, work = KVF_DEFAULT_MAX_WORK;
    int rc = 0;
    /* The environment table (env.c) says what each accepts; unset or empty is the default. */
    if (lim->max_memory_bytes <= 0) rc = kvf_env_int("KVF_MAX_MEMORY_MIB", mib, &mib, err);
    if (!rc && lim->max_work <= 0) rc = kvf_env_int("KVF_MAX_WORK", work, &work, err);
    if (rc) return rc;
    *max_memory = lim->max_memory_bytes > 0 ? lim->max_memory_bytes : mib << 20;
    *max_work = lim->max_work > 0 ? lim->max_work : work;
    return 0;
}

const char *kvf_size_text(int64_t bytes, char buf[KVF_SIZE_TEXT_MAX]) {
    static const struct {
        int shift;
        const char *unit;
    } units[] = {{30, "GiB"}, {20, "MiB"}, {10, "KiB"}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (bytes >= (int64_t)1 << units[i].shift) {
            snprintf(buf, KVF_SIZE_TEXT_MAX, "%.2f %s",
                     (double)bytes / (double)((int64_t)1 << units[i].shift), units[i].unit);
            return buf;
        }
    snprintf(buf, KVF_SIZE_TEXT_MAX, "%lld bytes", (long long)bytes);
    return buf;
}

int kvf_explicit_pool_budget(const kvf_recipe *rp, int64_t pool, const kvf_limits *lim,
                             kvf_error *err) {
    /* The explicit pool is held twice (the spec and the case) on top of the recipe's estimate,
     * which counts only referenced pages. */
    int64_t max_memory = 0, max_work = 0;
    int rc = kvf_limits_budgets(lim, &max_memory, &max_work, err);
    if (rc) return rc;
    kvf_case_cost cost;
    kvf_recipe_cost(rp, &cost);
    int64_t page_elems = kvf_recipe_page_elems(rp);
    int64_t explicit_bytes = pool * page_elems * 2 * 2 * 2;
    char need[KVF_SIZE_TEXT_MAX], budget[KVF_SIZE_TEXT_MAX];
    if (cost.memory_bytes + explicit_bytes > max_memory)
        return kvf_error_set(err, KVF_ELIMIT,
                             "the case with its explicit pool of %lld pages needs about %s, past "
                             "the memory budget of %s (KVF_MAX_MEMORY_MIB raises it)",
                             (long long)pool,
                             kvf_size_text(cost.memory_bytes + explicit_bytes, need),
                             kvf_size_text(max_memory, budget));
    return 0;
}

int kvf__recipe_check_budgets(const kvf_recipe *rp, const kvf_limits *lim, kvf_error *err) {
    int64_t max_memory, max_work;
    int rc = kvf_limits_budgets(lim, &max_memory, &max_work, err);
    if (rc) return rc;
    kvf_case_cost c;
    kvf_recipe_cost(rp, &c);
    char need[KVF_SIZE_TEXT_MAX], t[KVF_SIZE_TEXT_MAX], o[KVF_SIZE_TEXT_MAX], k[KVF_SIZE_TEXT_MAX],
        budget[KVF_SIZE_TEXT_MAX];
    if (c.memory_bytes > max_memory)
        return kvf_error_set(err, KVF_ELIMIT,
                             "the case needs about %s (tensors %s, oracle %s, kernel buffers %s), "
                             "past the memory budget of %s (KVF_MAX_MEMORY_MIB raises it)",
                             kvf_size_text(c.memory_bytes, need), kvf_size_text(c.tensor_bytes, t),
                             kvf_size_text(c.oracle_bytes, o), kvf_size_text(c.kernel_bytes, k),
                             kvf_size_text(max_memory, budget));
    if (c.work > max_work)
        return kvf_error_set(err, KVF_ELIMIT,
                             "the case needs %lld units of oracle work, past the work budget of "
                             "%lld (KVF_MAX_WORK raises it)",
                             (long long)c.work, (long long)max_work);
    return 0;
}

/* ---- the search's sizes --------------------------------------------------------------------- */

int64_t kvf_spec_tokens(const kvf_spec *s) {
    int64_t t = 0;
    for (uint32_t b = 0; b < s->recipe.batch_size; b++)
        t += kvf_recipe_seq_len(&s->recipe, b);
    return t;
}

int64_t kvf_spec_work(const kvf_spec *s) {
    const kvf_recipe *rp = &s->recipe;
    return oracle_terms(rp->num_qo_heads, rp->head_dim, kvf_spec_tokens(s), rp->batch_size,
                        SEARCH_TOKEN_EXTRA, SEARCH_OUTPUT_WEIGHT);
}

/* ---- the pool of each page table (KVF_PAGE_TABLE's pool) -------------------------------------
 * The elements of the pool kvf_case_build would write, from the table's entries and a page's
 * elements e, without laying the table out. */

typedef int64_t (*pool_fn)(const kvf_recipe *rp, int64_t entries, int64_t e);

/* Every entry's page and the spares (shared-prefix: at most). */
static int64_t kvf__pool_entries(const kvf_recipe *rp, int64_t entries, int64_t e) {
    return (entries + rp->spare_pages) * e;
}

static int64_t kvf__pool_scattered(const kvf_recipe *rp, int64_t entries, int64_t e) {
    return (2 * entries + rp->spare_pages + 1) * e;
}

/* The generator's pool is base + (E - 1) k + 1 + spare pages, the stride k drawn from 1..3:
 * between `lo` and `hi`. Written whole when it is at most KVF_FULL_POOL_BYTES, which a short
 * stride can make it although the longest is past that. */
static int64_t kvf__pool_high_ids(const kvf_recipe *rp, int64_t entries, int64_t e) {
    int64_t spare = rp->spare_pages;
    int64_t hi = rp->page_id_base + 3 * entries + spare;
    int64_t lo = rp->page_id_base + entries + spare;
    if (hi * e * 2 <= KVF_FULL_POOL_BYTES) return hi * e;
    if (lo * e * 2 <= KVF_FULL_POOL_BYTES) return KVF_FULL_POOL_BYTES / 2;
    return (entries +
            (2 * entries < KVF_POOL_NEIGHBOUR_PAGES ? 2 * entries : KVF_POOL_NEIGHBOUR_PAGES)) *
           e;
}

static const pool_fn pools[KVF_TABLE_COUNT] = {
#define KVF_PAGE_TABLE(id, name, layout, pool, flags, doc) [KVF_TABLE_##id] = pool,
#include "kvfuzz/strategies.def"
};

int64_t kvf_spec_pool_elems(const kvf_spec *s) {
    const kvf_recipe *rp = &s->recipe;
    int64_t e = kvf_recipe_page_elems(rp), entries = kvf_recipe_entries(rp);
    if (s->has_explicit) return s->explicit_tensors.num_pages * e;
    /* A table kind out of range (a spec not yet checked) counts as a dense pool. */
    return (rp->table < KVF_TABLE_COUNT ? pools[rp->table] : kvf__pool_entries)(rp, entries, e);
}
