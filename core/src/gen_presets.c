/* Presets: named starting points (kvf_spec_preset), each a recipe for one bug class of
 * docs/bug-classes.md or one shape of a real workload, with the seed deciding the values. The
 * base recipe they start from is shared with random recipes (gen_random.c), so both begin from
 * the same shape conventions. A preset's recipe is pinned by tests/test_gen_hash.c: changing
 * one changes what `kvfuzz gen --preset` users stored. */
#include <math.h>
#include <string.h>

#include "gen_internal.h"
#include "kvfuzz/spec.h"

typedef struct preset {
    const char *name;
    const char *description;
    void (*apply)(kvf_spec *s, uint64_t seed);
} preset;

void kvf__base_recipe(kvf_spec *s, uint64_t seed, int hq, int hk, int d, int page) {
    kvf_recipe *rp = &s->recipe;
    rp->num_qo_heads = (uint8_t)hq;
    rp->num_kv_heads = (uint8_t)hk;
    rp->head_dim = (uint16_t)d;
    rp->page_size = (uint16_t)page;
    rp->table = KVF_TABLE_SHUFFLED;
    rp->sm_scale = (float)(1.0 / sqrt((double)d));
    rp->q = rp->k = rp->v = (kvf_dist){KVF_DIST_NORMAL, 0, 0};
    rp->seed = seed;
    rp->expansion = KVF_EXPANSION_DEFAULT;
}

static void preset_seed(kvf_spec *s, uint64_t seed) {
    kvf__base_recipe(s, seed, 20, 4, 128, 64);
    kvf_spec_set_batch(s, 1, NULL);
    s->recipe.spare_pages = 1; /* 51 pages of a 52-page pool */
    s->recipe.num_pages[0] = 51;
    s->recipe.last_page_len[0] = (uint16_t)(1 + seed % 64);
}

static void preset_batch_mixed(kvf_spec *s, uint64_t seed) {
    kvf__base_recipe(s, seed, 20, 4, 128, 64);
    kvf_spec_set_batch(s, 6, NULL);
    static const int64_t lens[6] = {1, 63, 64, 65, 0, 700};
    for (uint32_t b = 0; b < 6; b++)
        kvf_recipe_set_seq_len(&s->recipe, b, lens[b]);
    s->recipe.spare_pages = 3;
}

static void preset_empty(kvf_spec *s, uint64_t seed) {
    kvf__base_recipe(s, seed, 20, 4, 128, 64);
    kvf_spec_set_batch(s, 3, NULL);
    kvf_recipe_set_seq_len(&s->recipe, 0, 0);
    kvf_recipe_set_seq_len(&s->recipe, 1, 100);
    kvf_recipe_set_seq_len(&s->recipe, 2, 0);
    s->recipe.poison = KVF_POISON_ALL & ~(KVF_POISON_TAIL_INF | KVF_POISON_UNREF_INF);
    s->recipe.spare_pages = 2;
}

static void preset_tail_nan(kvf_spec *s, uint64_t seed) {
    preset_seed(s, seed);
    s->recipe.num_pages[0] = 4;
    s->recipe.last_page_len[0] = 5;
    s->recipe.poison = KVF_POISON_TAIL_NAN | KVF_POISON_UNREF_NAN;
    s->recipe.spare_pages = 4;
}

static void preset_high_ids(kvf_spec *s, uint64_t seed) {
    preset_seed(s, seed);
    s->recipe.table = KVF_TABLE_HIGH_IDS;
    s->recipe.num_pages[0] = 8;
    s->recipe.page_id_base = 65530; /* crosses 65536: 32-bit element offsets overflow */
    s->recipe.poison = KVF_POISON_UNREF_NAN;
}

static void preset_shared_prefix(kvf_spec *s, uint64_t seed) {
    kvf__base_recipe(s, seed, 20, 4, 128, 64);
    kvf_spec_set_batch(s, 4, NULL);
    static const int64_t lens[4] = {200, 129, 300, 64};
    for (uint32_t b = 0; b < 4; b++)
        kvf_recipe_set_seq_len(&s->recipe, b, lens[b]);
    s->recipe.table = KVF_TABLE_SHARED_PREFIX;
    s->recipe.poison = KVF_POISON_TAIL_NAN;
}

static void preset_gqa7(kvf_spec *s, uint64_t seed) {
    kvf__base_recipe(s, seed, 28, 4, 128, 16);
    kvf_spec_set_batch(s, 2, NULL);
    kvf_recipe_set_seq_len(&s->recipe, 0, 257);
    kvf_recipe_set_seq_len(&s->recipe, 1, 31);
    s->recipe.table = KVF_TABLE_REVERSED;
}

static void preset_gqa16_d256(kvf_spec *s, uint64_t seed) {
    kvf__base_recipe(s, seed, 32, 2, 256, 128);
    kvf_spec_set_batch(s, 2, NULL);
    kvf_recipe_set_seq_len(&s->recipe, 0, 129);
    kvf_recipe_set_seq_len(&s->recipe, 1, 1000);
    s->recipe.table = KVF_TABLE_SCATTERED;
}

static void preset_page1(kvf_spec *s, uint64_t seed) {
    kvf__base_recipe(s, seed, 8, 8, 64, 1);
    kvf_spec_set_batch(s, 3, NULL);
    kvf_recipe_set_seq_len(&s->recipe, 0, 1);
    kvf_recipe_set_seq_len(&s->recipe, 1, 77);
    kvf_recipe_set_seq_len(&s->recipe, 2, 5);
}

static void preset_page256(kvf_spec *s, uint64_t seed) {
    kvf__base_recipe(s, seed, 20, 4, 128, 256);
    kvf_spec_set_batch(s, 2, NULL);
    kvf_recipe_set_seq_len(&s->recipe, 0, 257);
    kvf_recipe_set_seq_len(&s->recipe, 1, 255);
    s->recipe.poison = KVF_POISON_TAIL_NAN;
}

/* The seed shape with fewer pages and a logit pattern imposed. */
static void seed_with_logits(kvf_spec *s, uint64_t seed, uint16_t pages, kvf_logit_kind logits) {
    preset_seed(s, seed);
    s->recipe.num_pages[0] = pages;
    s->recipe.logits = (uint8_t)logits;
}

static void preset_equal_logits(kvf_spec *s, uint64_t seed) {
    seed_with_logits(s, seed, 2, KVF_LOGITS_EQUAL);
}
static void preset_spike(kvf_spec *s, uint64_t seed) {
    seed_with_logits(s, seed, 6, KVF_LOGITS_SPIKE);
}
static void preset_very_negative(kvf_spec *s, uint64_t seed) {
    seed_with_logits(s, seed, 6, KVF_LOGITS_VERY_NEGATIVE);
}
static void preset_huge(kvf_spec *s, uint64_t seed) {
    seed_with_logits(s, seed, 3, KVF_LOGITS_HUGE);
}
static void preset_beyond_f32(kvf_spec *s, uint64_t seed) {
    seed_with_logits(s, seed, 2, KVF_LOGITS_BEYOND_F32);
}
static void preset_ascending(kvf_spec *s, uint64_t seed) {
    seed_with_logits(s, seed, 128, KVF_LOGITS_ASCENDING); /* 127 full pages and the last one */
}

static void preset_subnormal(kvf_spec *s, uint64_t seed) {
    preset_seed(s, seed);
    s->recipe.num_pages[0] = 2;
    s->recipe.v = (kvf_dist){KVF_DIST_SUBNORMAL, 0, 0};
    s->recipe.q = (kvf_dist){KVF_DIST_SIGNED_ZERO, 0, 0};
}

static void preset_log_uniform(kvf_spec *s, uint64_t seed) {
    preset_seed(s, seed);
    s->recipe.num_pages[0] = 5;
    s->recipe.v = (kvf_dist){KVF_DIST_LOG_UNIFORM, 0, 100};
    s->recipe.k = (kvf_dist){KVF_DIST_LOG_UNIFORM, -2, 6};
}

static void preset_long_len(kvf_spec *s, uint64_t seed, int64_t len) {
    kvf__base_recipe(s, seed, 20, 4, 128, 64);
    kvf_spec_set_batch(s, 1, NULL);
    kvf_recipe_set_seq_len(&s->recipe, 0, len);
}
static void preset_long4k(kvf_spec *s, uint64_t seed) {
    preset_long_len(s, seed, 4096);
}
static void preset_long(kvf_spec *s, uint64_t seed) {
    preset_long_len(s, seed, 32768);
}
static void preset_long128k(kvf_spec *s, uint64_t seed) {
    preset_long_len(s, seed, 131072);
}

static const preset presets[] = {
    {"seed-h20kv4",
     "FlashInfer-Bench gqa_paged_decode_h20_kv4_d128_ps64: batch 1, 51 pages of 64 from a pool of "
     "52",
     preset_seed},
    {"mixed-lengths", "seed shape, batch 6 with lengths 1, 63, 64, 65, 0, 700", preset_batch_mixed},
    {"empty-sequences", "seed shape, two empty sequences around one of 100 tokens, NaN poison",
     preset_empty},
    {"tail-nan", "seed shape, last page 5 of 64 slots used, NaN in unused slots and spare pages",
     preset_tail_nan},
    {"high-page-ids", "seed shape, page ids from 65530 upward (past 32-bit element offsets)",
     preset_high_ids},
    {"shared-prefix", "seed shape, 4 sequences sharing leading pages, NaN tails",
     preset_shared_prefix},
    {"gqa7", "group 7 (Hq 28, Hk 4), page 16, reversed page table", preset_gqa7},
    {"gqa16-d256", "group 16 (Hq 32, Hk 2), head dim 256, page 128, scattered ids",
     preset_gqa16_d256},
    {"page1", "page size 1, Hq = Hk = 8, head dim 64", preset_page1},
    {"page256", "page size 256, lengths 257 and 255, NaN tails", preset_page256},
    {"equal-logits", "seed shape, 2 pages, all keys equal: o is the mean of v",
     preset_equal_logits},
    {"spike-logit", "seed shape, one key aligned with q: one logit far above the rest",
     preset_spike},
    {"very-negative-logits", "seed shape, all keys but one anti-aligned with q",
     preset_very_negative},
    {"huge-logits", "seed shape, logits beyond +-5e4", preset_huge},
    {"beyond-f32-logits", "seed shape, logits past the f32 range (overflow class)",
     preset_beyond_f32},
    {"subnormal-values", "seed shape, subnormal v and signed-zero q", preset_subnormal},
    {"log-uniform", "seed shape, log-uniform magnitudes across the bf16 range in v",
     preset_log_uniform},
    {"ascending-logits", "seed shape, 128 pages, every logit above the previous ones",
     preset_ascending},
    {"long-4k", "seed shape, one sequence of 4096 tokens", preset_long4k},
    {"long-32k", "seed shape, one sequence of 32768 tokens", preset_long},
    {"long-128k", "seed shape, one sequence of 131072 tokens", preset_long128k},
};

size_t kvf_preset_count(void) {
    return sizeof presets / sizeof presets[0];
}
const char *kvf_preset_name(size_t i) {
    return i < kvf_preset_count() ? presets[i].name : NULL;
}
const char *kvf_preset_description(size_t i) {
    return i < kvf_preset_count() ? presets[i].description : NULL;
}

int kvf_spec_preset(kvf_spec *out, const char *name, uint64_t seed, kvf_error *err) {
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < kvf_preset_count(); i++)
        if (strcmp(presets[i].name, name) == 0) {
            presets[i].apply(out, seed);
            if (!out->recipe.num_pages) {
                kvf_spec_free(out);
                return kvf_error_set(err, KVF_ENOMEM, "out of memory building preset %s", name);
            }
            return 0;
        }
    return kvf_error_set(err, KVF_ENOTFOUND, "unknown preset \"%s\" (see kvfuzz gen --help)", name);
}
