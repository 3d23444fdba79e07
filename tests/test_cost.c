/* The pieces core and the mutator share: the cost model's search sizes (kvf_spec_work,
 * kvf_spec_pool_elems, kvf_spec_tokens) against their formulas, the pool rule as the generator
 * follows it, and the edge-length picker kind by kind. The bits these feed are pinned elsewhere
 * (tests/test_gen_hash.c for random recipes, tests/test_fuzz.c for the fitting); here each piece
 * is held to what kvfuzz/cost.h and kvfuzz/spec.h say it does. */
#include "check.h"
#include "kvfuzz/cost.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/spec.h"

/* A hand-made spec: Hq 8, Hk 2, D 64, S 16, shuffled table, the given lengths. */
static kvf_spec spec_of(const int64_t *lens, uint16_t batch) {
    kvf_spec s;
    memset(&s, 0, sizeof s);
    kvf_recipe *rp = &s.recipe;
    rp->expansion = KVF_EXPANSION_DEFAULT;
    rp->num_qo_heads = 8;
    rp->num_kv_heads = 2;
    rp->head_dim = 64;
    rp->page_size = 16;
    rp->table = KVF_TABLE_SHUFFLED;
    rp->sm_scale = 0.125f;
    rp->seed = 5;
    if (kvf_spec_set_batch(&s, batch, NULL)) CHECK_FAIL_AT("out of memory");
    for (uint16_t b = 0; b < batch; b++)
        kvf_recipe_set_seq_len(rp, b, lens[b]);
    return s;
}

static void work_follows_its_formulas(void) {
    static const int64_t lens[3] = {1, 16, 40}; /* 1 + 1 + 3 = 5 pages, 57 tokens */
    kvf_spec s = spec_of(lens, 3);
    CHECK_INT_EQ(kvf_recipe_entries(&s.recipe), 5);
    CHECK_INT_EQ(kvf_recipe_page_elems(&s.recipe), 16 * 2 * 64);
    CHECK_INT_EQ(kvf_spec_tokens(&s), 57);
    /* The search's weighting: (tokens + 32 B) Hq D. */
    CHECK_INT_EQ(kvf_spec_work(&s), (57 + 32 * 3) * 8 * 64);
    /* The budget's: Hq (tokens (D + 64) + B D), the same terms weighted as an upper bound. */
    kvf_case_cost cost;
    kvf_recipe_cost(&s.recipe, &cost);
    CHECK_INT_EQ(cost.work, 8 * (57 * (64 + 64) + 3 * 64));
    CHECK_INT_EQ(cost.memory_bytes, cost.tensor_bytes + cost.oracle_bytes + cost.kernel_bytes);
    kvf_spec_free(&s);
}

/* kvf_spec_pool_elems by table kind, and the generator writing what the pool rule says. */
static void pool_rule_as_estimated_and_built(void) {
    static const int64_t lens[2] = {20, 33}; /* 2 + 3 pages */
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_spec s = spec_of(lens, 2);
    const int64_t e = kvf_recipe_page_elems(&s.recipe);
    s.recipe.spare_pages = 3;
    CHECK_INT_EQ(kvf_spec_pool_elems(&s), (5 + 3) * e);
    s.recipe.table = KVF_TABLE_SCATTERED;
    CHECK_INT_EQ(kvf_spec_pool_elems(&s), (2 * 5 + 3 + 1) * e);
    /* A small high-ids pool: written whole, every page resident. */
    s.recipe.table = KVF_TABLE_HIGH_IDS;
    s.recipe.page_id_base = 100;
    CHECK_INT_EQ(kvf_spec_pool_elems(&s), (100 + 3 * 5 + 3) * e);
    kvf_case c;
    kvf_error err = {0};
    CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
    CHECK_INT_EQ(c.num_resident_pages, c.num_pages);
    CHECK(c.num_pages * e <= kvf_spec_pool_elems(&s));
    kvf_case_free(&c);
    /* Past KVF_FULL_POOL_BYTES per cache: the referenced pages and at most
     * KVF_POOL_NEIGHBOUR_PAGES neighbours. */
    s.recipe.page_id_base = (uint32_t)(KVF_FULL_POOL_BYTES / (2 * e) + 10);
    CHECK_INT_EQ(kvf_spec_pool_elems(&s), (5 + 2 * 5) * e);
    CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
    CHECK(c.num_pages * e * 2 > KVF_FULL_POOL_BYTES);
    CHECK(c.num_resident_pages <= 5 + KVF_POOL_NEIGHBOUR_PAGES);
    CHECK(c.num_resident_pages * e <= kvf_spec_pool_elems(&s));
    kvf_case_free(&c);
    kvf_spec_free(&s);
}

/* Every length a one-kind menu gives over many draws is one the kind names, and (for the kinds
 * with choices) each of them comes out. */
static void edge_lengths_of_each_kind(void) {
    const int32_t S = 16;
    const int64_t max = 300;
    for (int kind = 0; kind < KVF_EDGE_COUNT; kind++) {
        const uint8_t menu[1] = {(uint8_t)kind};
        kvf_prng rng;
        kvf_prng_seed(&rng, 1000 + (uint64_t)kind);
        int seen[301] = {0};
        for (int i = 0; i < 20000; i++) {
            int64_t len = kvf_edge_length_pick(&rng, menu, 1, S, max);
            if (len < 0 || len > max) {
                CHECK_FAIL_AT("kind %d gave %lld, outside [0, %lld]", kind, (long long)len,
                              (long long)max);
                return;
            }
            seen[len] = 1;
        }
        int distinct = 0;
        for (int64_t l = 0; l <= max; l++)
            distinct += seen[l];
        switch (kind) {
        case KVF_EDGE_EMPTY:
            CHECK(seen[0] && distinct == 1);
            break;
        case KVF_EDGE_ONE:
            CHECK(seen[1] && distinct == 1);
            break;
        case KVF_EDGE_PAGE_BELOW:
            CHECK(seen[S - 1] && distinct == 1);
            break;
        case KVF_EDGE_PAGE:
            CHECK(seen[S] && distinct == 1);
            break;
        case KVF_EDGE_PAGE_ABOVE:
            CHECK(seen[S + 1] && distinct == 1);
            break;
        case KVF_EDGE_TWO_PAGES:
            CHECK(seen[2 * S - 1] && seen[2 * S] && seen[2 * S + 1] && distinct == 3);
            break;
        case KVF_EDGE_TILE:
            for (int k = 1; k <= 8; k++)
                CHECK(seen[32 * k - 1] && seen[32 * k] && seen[32 * k + 1]);
            CHECK_INT_EQ(distinct, 24);
            break;
        case KVF_EDGE_MAX:
            CHECK(seen[max] && distinct == 1);
            break;
        case KVF_EDGE_MAX_BELOW:
            CHECK(seen[max - 1] && distinct == 1);
            break;
        default: /* KVF_EDGE_ANY */
            CHECK(!seen[0] && seen[1] && seen[max] && distinct > 250);
            break;
        }
    }
}

/* Lengths past max are cut to it; an empty range gives 0 without drawing from it. */
static void edge_lengths_clamp(void) {
    const uint8_t above[1] = {KVF_EDGE_PAGE_ABOVE}, any[1] = {KVF_EDGE_ANY};
    kvf_prng rng, copy;
    kvf_prng_seed(&rng, 3);
    CHECK_INT_EQ(kvf_edge_length_pick(&rng, above, 1, 64, 40), 40);
    CHECK_INT_EQ(kvf_edge_length_pick(&rng, above, 1, 64, -5), 0);
    copy = rng;
    CHECK_INT_EQ(kvf_edge_length_pick(&rng, any, 1, 64, 0), 0);
    (void)kvf_prng_below(&copy, 1); /* the menu's draw, and nothing more */
    CHECK(memcmp(&rng, &copy, sizeof rng) == 0);
}

/* A menu picks its kinds uniformly: repeating a kind makes it likelier. */
static void edge_length_menus_weight_kinds(void) {
    const uint8_t menu[4] = {KVF_EDGE_ONE, KVF_EDGE_MAX, KVF_EDGE_MAX, KVF_EDGE_MAX};
    kvf_prng rng;
    kvf_prng_seed(&rng, 9);
    int ones = 0, n = 40000;
    for (int i = 0; i < n; i++)
        ones += kvf_edge_length_pick(&rng, menu, 4, 16, 100) == 1;
    CHECK(ones > n / 4 - n / 40 && ones < n / 4 + n / 40);
}

static const check_test tests[] = {
    {"work_follows_its_formulas", work_follows_its_formulas},
    {"pool_rule_as_estimated_and_built", pool_rule_as_estimated_and_built},
    {"edge_lengths_of_each_kind", edge_lengths_of_each_kind},
    {"edge_lengths_clamp", edge_lengths_clamp},
    {"edge_length_menus_weight_kinds", edge_length_menus_weight_kinds},
    {NULL, NULL},
};

CHECK_MAIN(tests)
