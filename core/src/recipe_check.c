/* The recipe's own domain (kvfuzz/spec.h): what the decoder and kvf_case_build both check
 * before anything is allocated, ending with the budgets of cost.c. */
#include <math.h>

#include "cost_internal.h"
#include "kvfuzz/spec.h"

/* Shared by the decoder and kvf_case_build (for hand-made specs): the recipe's own domain. */
int kvf_recipe_check(const kvf_recipe *rp, const kvf_limits *lim, kvf_error *err) {
    if (rp->expansion > KVF_EXPANSION_2)
        return kvf_error_set(err, KVF_EINVAL, "expansion %u is not one of the 2 known",
                             rp->expansion);
    if (rp->num_qo_heads < 1 || rp->num_kv_heads < 1)
        return kvf_error_set(err, KVF_EINVAL,
                             "num_qo_heads (%u) and num_kv_heads (%u) must be at least 1",
                             rp->num_qo_heads, rp->num_kv_heads);
    if (rp->num_qo_heads % rp->num_kv_heads)
        return kvf_error_set(err, KVF_EINVAL,
                             "num_qo_heads %u is not a multiple of num_kv_heads %u",
                             rp->num_qo_heads, rp->num_kv_heads);
    if (rp->num_qo_heads > lim->max_qo_heads)
        return kvf_error_set(err, KVF_ELIMIT, "num_qo_heads %u exceeds the limit of %d",
                             rp->num_qo_heads, lim->max_qo_heads);
    if (rp->head_dim < 1 || rp->head_dim > lim->max_head_dim)
        return kvf_error_set(err, rp->head_dim < 1 ? KVF_EINVAL : KVF_ELIMIT,
                             "head_dim %u is outside [1, %d]", rp->head_dim, lim->max_head_dim);
    if (rp->page_size < 1 || rp->page_size > lim->max_page_size)
        return kvf_error_set(err, rp->page_size < 1 ? KVF_EINVAL : KVF_ELIMIT,
                             "page_size %u is outside [1, %d]", rp->page_size, lim->max_page_size);
    if (rp->batch_size > lim->max_batch)
        return kvf_error_set(err, KVF_ELIMIT, "batch_size %u exceeds the limit of %d",
                             rp->batch_size, lim->max_batch);
    if (rp->table >= KVF_TABLE_COUNT)
        return kvf_error_set(err, KVF_EINVAL, "page-table strategy %u is not one of the %d known",
                             rp->table, KVF_TABLE_COUNT);
    if (rp->logits >= KVF_LOGITS_COUNT)
        return kvf_error_set(err, KVF_EINVAL, "logit pattern %u is not one of the %d known",
                             rp->logits, KVF_LOGITS_COUNT);
    if (rp->poison & ~KVF_POISON_ALL)
        return kvf_error_set(err, KVF_EINVAL, "poison flags 0x%02x use undefined bits", rp->poison);
    if (rp->table != KVF_TABLE_HIGH_IDS && rp->page_id_base != 0)
        return kvf_error_set(err, KVF_EINVAL,
                             "page_id_base is %u but only the high-ids table uses it (must be 0)",
                             rp->page_id_base);
    if (rp->page_id_base > (uint32_t)INT32_MAX)
        return kvf_error_set(err, KVF_EINVAL, "page_id_base %u is past the int32 page-id range",
                             rp->page_id_base);
    if (!isfinite(rp->sm_scale))
        return kvf_error_set(err, KVF_EINVAL, "sm_scale must be finite, got %g",
                             (double)rp->sm_scale);
    const kvf_dist *dists[3] = {&rp->q, &rp->k, &rp->v};
    const char *names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        if (dists[i]->kind >= KVF_DIST_COUNT)
            return kvf_error_set(err, KVF_EINVAL, "%s distribution %u is not one of the %d known",
                                 names[i], dists[i]->kind, KVF_DIST_COUNT);
        if (dists[i]->log2_scale < -126)
            return kvf_error_set(err, KVF_EINVAL, "%s scale exponent %d is below -126", names[i],
                                 dists[i]->log2_scale);
    }
    int64_t pages = 0, tokens = 0;
    for (uint32_t b = 0; b < rp->batch_size; b++) {
        uint16_t n = rp->num_pages[b], last = rp->last_page_len[b];
        if (n == 0 && last != 0)
            return kvf_error_set(err, KVF_EINVAL,
                                 "sequence %u has no pages but last_page_len %u (must be 0)", b,
                                 last);
        if (n > 0 && (last < 1 || last > rp->page_size))
            return kvf_error_set(err, KVF_EINVAL,
                                 "sequence %u's last_page_len %u is outside [1, page_size %u]", b,
                                 last, rp->page_size);
        pages += n;
        if (n) tokens += (int64_t)(n - 1) * rp->page_size + last;
    }
    if (pages > lim->max_table_entries)
        return kvf_error_set(err, KVF_ELIMIT,
                             "the page table has %lld entries, past the limit of %lld",
                             (long long)pages, (long long)lim->max_table_entries);
    if (tokens > lim->max_tokens)
        return kvf_error_set(err, KVF_ELIMIT, "the case has %lld tokens, past the limit of %lld",
                             (long long)tokens, (long long)lim->max_tokens);
    return kvf__recipe_check_budgets(rp, lim, err);
}

int kvf_quant_recipe_is_plain(const kvf_quant_recipe *q) {
    return kvf_kv_quant_is_plain(&q->kv) && q->k_scale == 0 && q->v_scale == 0 && !q->spread &&
           !q->fine;
}

int kvf_quant_recipe_check(const kvf_quant_recipe *q, kvf_error *err) {
    int rc = kvf_kv_quant_check(&q->kv, err);
    if (rc) return rc;
    if (kvf_quant_recipe_is_plain(q)) return 0;
    if (q->fine > 1)
        return kvf_error_set(err, KVF_EINVAL, "the scales' fine flag is %u, not 0 or 1", q->fine);
    if (q->spread > KVF_QUANT_MAX_SPREAD)
        return kvf_error_set(err, KVF_EINVAL, "the scales' spread %u is above its maximum %d",
                             q->spread, KVF_QUANT_MAX_SPREAD);
    if (q->kv.granularity == KVF_SCALE_NONE) {
        if (q->k_scale != 1.0f || q->v_scale != 1.0f || q->spread || q->fine)
            return kvf_error_set(err, KVF_EINVAL,
                                 "caches without scales must have base scales 1 and no spread or "
                                 "fine flag");
        return 0;
    }
    if (q->kv.granularity == KVF_SCALE_TENSOR && (q->spread || q->fine))
        return kvf_error_set(err, KVF_EINVAL,
                             "tensor scales are their bases: the spread and fine flag must be 0");
    if (!(isfinite(q->k_scale) && q->k_scale > 0) || !(isfinite(q->v_scale) && q->v_scale > 0))
        return kvf_error_set(err, KVF_EINVAL,
                             "the base scales k %g and v %g must be finite and positive",
                             (double)q->k_scale, (double)q->v_scale);
    return 0;
}
