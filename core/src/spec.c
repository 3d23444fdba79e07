/* The spec as a value: freeing, the batch setter and copying. The recipe's shape is recipe.c,
 * its domain recipe_check.c, the bytes of a spec spec_codec.c (with equality, which compares
 * canonical encodings), its files spec_file.c. */
#include "kvfuzz/spec.h"

#include <stdlib.h>
#include <string.h>

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
