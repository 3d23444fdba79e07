/* The recipe's shape (kvfuzz/spec.h): the names of its strategies, its page-table size, a
 * page's elements and each sequence's length. Pure arithmetic on the recipe, below the cost
 * model and the checks that use it. */
#include "kvfuzz/spec.h"

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

int64_t kvf_recipe_entries(const kvf_recipe *rp) {
    int64_t n = 0;
    for (uint32_t b = 0; b < rp->batch_size; b++)
        n += rp->num_pages[b];
    return n;
}

int64_t kvf_recipe_page_elems(const kvf_recipe *rp) {
    return (int64_t)rp->page_size * rp->num_kv_heads * rp->head_dim;
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
