/* The cost model (kvfuzz/cost.h): estimates of what a case costs to build and judge, the
 * budgets they are held to, and the check that refuses a recipe past them. */
#include "kvfuzz/cost.h"

#include "cost_internal.h"
#include "kvfuzz/env.h"
#include "kvfuzz/spec.h"

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
    out->work = hq * (tokens * (d + 64) + b * d);
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

static double gib(int64_t bytes) {
    return (double)bytes / (double)((int64_t)1 << 30);
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
    if (cost.memory_bytes + explicit_bytes > max_memory)
        return kvf_error_set(err, KVF_ELIMIT,
                             "the case with its explicit pool of %lld pages needs about %.2f GiB, "
                             "past the memory budget of %.2f GiB (KVF_MAX_MEMORY_MIB raises it)",
                             (long long)pool, gib(cost.memory_bytes + explicit_bytes),
                             gib(max_memory));
    return 0;
}

int kvf__recipe_check_budgets(const kvf_recipe *rp, const kvf_limits *lim, kvf_error *err) {
    int64_t max_memory, max_work;
    int rc = kvf_limits_budgets(lim, &max_memory, &max_work, err);
    if (rc) return rc;
    kvf_case_cost c;
    kvf_recipe_cost(rp, &c);
    if (c.memory_bytes > max_memory)
        return kvf_error_set(err, KVF_ELIMIT,
                             "the case needs about %.2f GiB (tensors %.2f, oracle %.2f, kernel "
                             "buffers %.2f), past the memory budget of %.2f GiB "
                             "(KVF_MAX_MEMORY_MIB raises it)",
                             gib(c.memory_bytes), gib(c.tensor_bytes), gib(c.oracle_bytes),
                             gib(c.kernel_bytes), gib(max_memory));
    if (c.work > max_work)
        return kvf_error_set(err, KVF_ELIMIT,
                             "the case needs %lld units of oracle work, past the work budget of "
                             "%lld (KVF_MAX_WORK raises it)",
                             (long long)c.work, (long long)max_work);
    return 0;
}
