/* The spec as a value: the recipe's own domain (kvf_recipe_check, which the decoder and
 * kvf_case_build both run, ending with the budgets of cost.c), copying, comparison, freeing, the
 * per-sequence setters and the names of the strategies. The bytes of a spec are spec_codec.c,
 * its files spec_file.c. */
#include "kvfuzz/spec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost_internal.h"

static const char *const table_names[KVF_TABLE_COUNT] = {"contiguous",    "shuffled", "reversed",
                                                         "shared-prefix", "high-ids", "scattered"};
static const char *const dist_names[KVF_DIST_COUNT] = {"normal",      "uniform", "log-uniform",
                                                       "constant",    "one-hot", "subnormal",
                                                       "signed-zero", "special"};
static const char *const logit_names[KVF_LOGITS_COUNT] = {
    "natural", "equal", "near-tie", "spike", "very-negative", "huge", "beyond-f32", "ascending"};

const char *kvf_table_name(int k) {
    return k >= 0 && k < KVF_TABLE_COUNT ? table_names[k] : "?";
}
const char *kvf_dist_name(int k) {
    return k >= 0 && k < KVF_DIST_COUNT ? dist_names[k] : "?";
}
const char *kvf_logits_name(int k) {
    return k >= 0 && k < KVF_LOGITS_COUNT ? logit_names[k] : "?";
}

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

int64_t kvf_recipe_entries(const kvf_recipe *rp) {
    int64_t n = 0;
    for (uint32_t b = 0; b < rp->batch_size; b++)
        n += rp->num_pages[b];
    return n;
}

int64_t kvf_recipe_page_elems(const kvf_recipe *rp) {
    return (int64_t)rp->page_size * rp->num_kv_heads * rp->head_dim;
}

void kvf_spec_free(kvf_spec *s) {
    if (!s) return;
    free(s->recipe.num_pages);
    free(s->recipe.last_page_len);
    free(s->overrides);
    free(s->explicit_tensors.kv_indices);
    free(s->explicit_tensors.q);
    free(s->explicit_tensors.k_cache);
    free(s->explicit_tensors.v_cache);
    memset(s, 0, sizeof *s);
}

int kvf_spec_set_batch(kvf_spec *s, uint16_t batch, kvf_error *err) {
    kvf_recipe *rp = &s->recipe;
    uint16_t *np = realloc(rp->num_pages, (batch ? batch : 1) * sizeof *np);
    if (!np) return kvf_error_set(err, KVF_ENOMEM, "could not allocate the sequence list");
    rp->num_pages = np;
    uint16_t *nl = realloc(rp->last_page_len, (batch ? batch : 1) * sizeof *nl);
    if (!nl) return kvf_error_set(err, KVF_ENOMEM, "could not allocate the sequence list");
    rp->last_page_len = nl;
    for (uint32_t b = rp->batch_size; b < batch; b++) {
        np[b] = 1;
        nl[b] = rp->page_size ? rp->page_size : 1;
    }
    rp->batch_size = batch;
    return 0;
}

int64_t kvf_recipe_seq_len(const kvf_recipe *rp, uint32_t b) {
    return rp->num_pages[b] ? (int64_t)(rp->num_pages[b] - 1) * rp->page_size + rp->last_page_len[b]
                            : 0;
}

void kvf_recipe_set_seq_len(kvf_recipe *rp, uint32_t b, int64_t len) {
    if (len <= 0) {
        rp->num_pages[b] = 0;
        rp->last_page_len[b] = 0;
        return;
    }
    int64_t s = rp->page_size, n = (len + s - 1) / s;
    if (n > 65535) n = 65535, len = n * s;
    rp->num_pages[b] = (uint16_t)n;
    rp->last_page_len[b] = (uint16_t)(len - (n - 1) * s);
}

static void *dup_bytes(const void *src, size_t n) {
    void *p = malloc(n ? n : 1);
    if (p && n) memcpy(p, src, n);
    return p;
}

int kvf_spec_copy(kvf_spec *dst, const kvf_spec *src, kvf_error *err) {
    *dst = *src;
    const kvf_recipe *rp = &src->recipe;
    size_t per_seq = (size_t)rp->batch_size * sizeof(uint16_t);
    dst->recipe.num_pages = dup_bytes(rp->num_pages, per_seq);
    dst->recipe.last_page_len = dup_bytes(rp->last_page_len, per_seq);
    dst->overrides = dup_bytes(src->overrides, src->num_overrides * sizeof *src->overrides);
    memset(&dst->explicit_tensors, 0, sizeof dst->explicit_tensors);
    int failed = !dst->recipe.num_pages || !dst->recipe.last_page_len || !dst->overrides;
    if (src->has_explicit && !failed) {
        const kvf_explicit *ex = &src->explicit_tensors;
        int64_t page_elems = kvf_recipe_page_elems(rp);
        size_t pool = (size_t)(ex->num_pages * page_elems * 2);
        dst->explicit_tensors.num_pages = ex->num_pages;
        dst->explicit_tensors.kv_indices =
            dup_bytes(ex->kv_indices, (size_t)kvf_recipe_entries(rp) * 4);
        dst->explicit_tensors.q =
            dup_bytes(ex->q, (size_t)rp->batch_size * rp->num_qo_heads * rp->head_dim * 2);
        dst->explicit_tensors.k_cache = dup_bytes(ex->k_cache, pool);
        dst->explicit_tensors.v_cache = dup_bytes(ex->v_cache, pool);
        failed = !dst->explicit_tensors.kv_indices || !dst->explicit_tensors.q ||
                 !dst->explicit_tensors.k_cache || !dst->explicit_tensors.v_cache;
    }
    if (failed) {
        kvf_spec_free(dst);
        return kvf_error_set(err, KVF_ENOMEM, "could not copy the case spec");
    }
    return 0;
}

int kvf_spec_equal(const kvf_spec *a, const kvf_spec *b) {
    uint8_t *ea = NULL, *eb = NULL;
    size_t na = 0, nb = 0;
    /* The canonical encoding holds every field, so equal encodings mean equal specs. */
    int same = kvf_spec_encode(a, &ea, &na, NULL) == 0 && kvf_spec_encode(b, &eb, &nb, NULL) == 0 &&
               na == nb && memcmp(ea, eb, na) == 0;
    free(ea);
    free(eb);
    return same;
}
