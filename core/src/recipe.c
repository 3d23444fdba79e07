/* The recipe's shape (kvfuzz/spec.h): its strategies' table (kvfuzz/strategies.def: names,
 * docs, flags), its page-table size, a page's elements and each sequence's length. Pure
 * functions of the recipe and the table, below the cost model and the checks that use them. */
#include <string.h>

#include "kvfuzz/spec.h"

/* ---- the strategy table (kvfuzz/strategies.def) --------------------------------------------- */

typedef struct strategy {
    const char *name, *doc;
    unsigned flags;
} strategy;

static const strategy tables[KVF_TABLE_COUNT] = {
#define KVF_PAGE_TABLE(id, name, layout, pool, flags, doc) [KVF_TABLE_##id] = {name, doc, flags},
#include "kvfuzz/strategies.def"
};
static const strategy dists[KVF_DIST_COUNT] = {
#define KVF_VALUE_DIST(id, name, fill1, fill2, simple, flags, doc)                                 \
    [KVF_DIST_##id] = {name, doc, flags},
#include "kvfuzz/strategies.def"
};
static const strategy logits[KVF_LOGITS_COUNT] = {
#define KVF_LOGIT_PATTERN(id, name, key, scale, flags, doc) [KVF_LOGITS_##id] = {name, doc, flags},
#include "kvfuzz/strategies.def"
};
static const uint8_t dist_simple[KVF_DIST_COUNT] = {
#define KVF_VALUE_DIST(id, name, fill1, fill2, simple, flags, doc) [KVF_DIST_##id] = simple,
#include "kvfuzz/strategies.def"
};

static const struct {
    const strategy *rows;
    int count;
} families[KVF_FAMILY_COUNT] = {
    [KVF_FAMILY_TABLE] = {tables, KVF_TABLE_COUNT},
    [KVF_FAMILY_DIST] = {dists, KVF_DIST_COUNT},
    [KVF_FAMILY_LOGITS] = {logits, KVF_LOGITS_COUNT},
};

int kvf_strategy_count(int family) {
    return family >= 0 && family < KVF_FAMILY_COUNT ? families[family].count : 0;
}

/* The row of a kind, or NULL out of range. */
static const strategy *row_of(int family, int kind) {
    return kind >= 0 && kind < kvf_strategy_count(family) ? &families[family].rows[kind] : NULL;
}

const char *kvf_strategy_name(int family, int kind) {
    const strategy *r = row_of(family, kind);
    return r ? r->name : "?";
}

const char *kvf_strategy_doc(int family, int kind) {
    const strategy *r = row_of(family, kind);
    return r ? r->doc : "";
}

unsigned kvf_strategy_flags(int family, int kind) {
    const strategy *r = row_of(family, kind);
    return r ? r->flags : 0;
}

int kvf_strategy_parse(int family, const char *name) {
    for (int k = 0; name && k < kvf_strategy_count(family); k++)
        if (strcmp(name, families[family].rows[k].name) == 0) return k;
    return -1;
}

int kvf_strategy_first(int family, unsigned flags) {
    int k = 0, n = kvf_strategy_count(family);
    while (k < n && !(families[family].rows[k].flags & flags))
        k++;
    return k;
}

int kvf_dist_simple(int kind) {
    return kind >= 0 && kind < KVF_DIST_COUNT ? dist_simple[kind] : 0;
}

const char *kvf_table_name(int k) {
    return kvf_strategy_name(KVF_FAMILY_TABLE, k);
}
const char *kvf_dist_name(int k) {
    return kvf_strategy_name(KVF_FAMILY_DIST, k);
}
const char *kvf_logits_name(int k) {
    return kvf_strategy_name(KVF_FAMILY_LOGITS, k);
}

/* ---- the recipe's shape ---------------------------------------------------------------------- */

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
