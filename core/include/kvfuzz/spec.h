/* The case file's content (docs/design.md §6): a compact recipe, optional explicit overrides,
 * optional explicit tensors and an optional origin (an imported workload's names); its .kvfz
 * codec (versions 1 and 2, which differ only in the expansion they name); and the deterministic
 * generator that expands a spec into a kvf_case. What a spec costs, and the budgets, are
 * kvfuzz/cost.h, included here.
 *
 * Definitions in core/src: recipe.c (strategy names, the recipe's shape), recipe_check.c (its
 * domain), spec.c (the spec as a value: free, copy, batch), spec_codec.c (the .kvfz bytes and
 * equality), spec_file.c (case files), gen_expand.c (expansion),
 * gen_presets.c (presets), gen_random.c (random recipes and edge lengths).
 *
 * Ownership: a kvf_spec owns its arrays (per-sequence lists, overrides, explicit tensors);
 * kvf_spec_free() releases them. kvf_spec_encode() returns a malloc'd buffer the caller frees.
 * Errors: KVF_EFORMAT for bytes that are not a version 1 or 2 case file, KVF_EINVAL for a field
 * outside its domain, KVF_ELIMIT for sizes past kvf_limits, KVF_ENOMEM; always with one sentence
 * naming the field. The on-disk layout is documented in docs/case-format.md. */
#ifndef KVFUZZ_SPEC_H
#define KVFUZZ_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/case.h"
#include "kvfuzz/cost.h"
#include "kvfuzz/prng.h"

/* The newest format version read and written. The version byte names the expansion: version 1
 * files expand with expansion 1, version 2 files with expansion 2 (docs/case-format.md,
 * "Expansion" and "Expansion 2"); nothing else in the layout differs. */
#define KVF_FORMAT_VERSION 2

/* Which expansion turns a recipe into tensors. Both draw every strategy from the same laws;
 * they differ in the bits. Expansion 1 is the original (every version 1 file means its bits);
 * expansion 2 draws the same distributions several times faster. */
typedef enum kvf_expansion {
    KVF_EXPANSION_1 = 1,
    KVF_EXPANSION_2 = 2,
    KVF_EXPANSION_DEFAULT = KVF_EXPANSION_2 /* what presets and random recipes use */
} kvf_expansion;

/* The generator's strategies come from one table, kvfuzz/strategies.def: a family's lines, in
 * order, are its enum's values, which .kvfz files store (docs/case-format.md, "Strategies").
 * How sequences' pages are laid out in the pool (docs/bug-classes.md: "page tables that are
 * shuffled, shared between sequences, reversed, and use page ids >= 65536"). */
typedef enum kvf_table_kind {
#define KVF_PAGE_TABLE(id, name, layout, pool, flags, doc) KVF_TABLE_##id,
#include "kvfuzz/strategies.def"
    KVF_TABLE_COUNT
} kvf_table_kind;

/* Value distributions for q, k and v. scale = 2^log2_scale; param is kind-specific. */
typedef enum kvf_dist_kind {
#define KVF_VALUE_DIST(id, name, fill1, fill2, simple, flags, doc) KVF_DIST_##id,
#include "kvfuzz/strategies.def"
    KVF_DIST_COUNT
} kvf_dist_kind;

/* Shapes imposed on the logits through k (and, scaled, q), after q is drawn. */
typedef enum kvf_logit_kind {
#define KVF_LOGIT_PATTERN(id, name, key, scale, flags, doc) KVF_LOGITS_##id,
#include "kvfuzz/strategies.def"
    KVF_LOGITS_COUNT
} kvf_logit_kind;

/* A strategy's flags (the flags column of kvfuzz/strategies.def). */
enum {
    /* A page table whose ids start at page_id_base (high-ids: kvf_recipe_check refuses a
     * nonzero base for every other table): random recipes and mutations take it only with
     * allow_high_ids, and give it a base. */
    KVF_STRATEGY_HIGH_IDS = 1u << 0,
    /* The family's stand-in: what random recipes (and, for tables, mutations) take instead of a
     * kind they may not take there: a HIGH_IDS table without allow_high_ids, a V_ONLY
     * distribution for q or k. */
    KVF_STRATEGY_STANDIN = 1u << 1,
    /* A logit pattern past the f32 range (the overflow class): without allow_overflow, random
     * recipes and mutations draw only the patterns listed before the first such one. */
    KVF_STRATEGY_OVERFLOW = 1u << 2,
    /* A distribution random recipes draw for v only: in q or k its bf16 extremes put the
     * logits past f32 (the overflow class, which only the logit pattern brings in). */
    KVF_STRATEGY_V_ONLY = 1u << 3,
    /* A distribution whose param is an exponent span: random recipes draw it from 1..12 for q
     * and k, 1..60 for v (0..7 for every other kind). */
    KVF_STRATEGY_SPAN = 1u << 4,
    /* Random recipes also draw it late (strategies.def says when): one in eight recipes whose
     * field still holds the family's first kind take it (for a distribution: each of q, k and v
     * in turn, v alone for a V_ONLY one; a HIGH_IDS table or an OVERFLOW pattern only where the
     * options allow it). */
    KVF_STRATEGY_LATE = 1u << 5,
    /* Added after random recipes were pinned: out of the family's uniform draw, drawn only
     * late (as LATE). */
    KVF_STRATEGY_LATE_ONLY = 1u << 6
};

/* The three families, for the accessors below. */
typedef enum kvf_strategy_family {
    KVF_FAMILY_TABLE = 0, /* kvf_table_kind */
    KVF_FAMILY_DIST,      /* kvf_dist_kind */
    KVF_FAMILY_LOGITS,    /* kvf_logit_kind */
    KVF_FAMILY_COUNT
} kvf_strategy_family;

/* What strategies.def says of a kind (core/src/recipe.c). An unknown family has no kinds; a
 * kind out of range is named "?", documented "", has no flags and is never simple. */
int kvf_strategy_count(int family);
const char *kvf_strategy_name(int family, int kind);
const char *kvf_strategy_doc(int family, int kind);
unsigned kvf_strategy_flags(int family, int kind);
/* The kind named `name` in the family, or -1. */
int kvf_strategy_parse(int family, const char *name);
/* The first kind of the family with any of `flags`, or the family's count when none has. */
int kvf_strategy_first(int family, unsigned flags);
/* A distribution's place in the minimizer's order (the def's `simple`: 1 the simplest; 0 for a
 * kind it never proposes). */
int kvf_dist_simple(int kind);

/* Poison bits: what unused slots and unreferenced pages hold. Without a bit they hold
 * ordinary random values, never zeros, so a kernel that reads them changes the answer. */
enum {
    KVF_POISON_TAIL_NAN = 1u << 0,  /* unused slots of last pages: NaN */
    KVF_POISON_TAIL_INF = 1u << 1,  /* unused slots: +-inf (NaN wins if both) */
    KVF_POISON_UNREF_NAN = 1u << 2, /* unreferenced pages: NaN */
    KVF_POISON_UNREF_INF = 1u << 3, /* unreferenced pages: +-inf (NaN wins if both) */
    KVF_POISON_ALL = 0xFu
};

typedef struct kvf_dist {
    uint8_t kind;      /* kvf_dist_kind */
    int8_t log2_scale; /* in [-126, 127] */
    uint8_t param;     /* kind-specific; see kvf_dist_kind */
} kvf_dist;

typedef struct kvf_recipe {
    uint8_t expansion;     /* kvf_expansion, written as the format version; 0 reads as 1 (a
                              recipe filled in by hand, as before expansion 2 existed) */
    uint8_t num_qo_heads;  /* 1..255 */
    uint8_t num_kv_heads;  /* 1..255, divides num_qo_heads */
    uint16_t head_dim;     /* 1..limits */
    uint16_t page_size;    /* 1..limits */
    uint16_t batch_size;   /* 0..limits */
    uint8_t table;         /* kvf_table_kind */
    uint8_t logits;        /* kvf_logit_kind */
    uint8_t poison;        /* KVF_POISON_* bits */
    uint32_t page_id_base; /* first id for KVF_TABLE_HIGH_IDS; must be 0 for other tables */
    uint16_t spare_pages;  /* unreferenced pages added to the pool */
    float sm_scale;        /* finite */
    kvf_dist q, k, v;
    uint64_t seed;
    uint16_t *num_pages;     /* [batch_size] pages per sequence */
    uint16_t *last_page_len; /* [batch_size] in [1, S]; 0 exactly when num_pages is 0 */
} kvf_recipe;

typedef enum kvf_override_target {
    KVF_OVERRIDE_TABLE_ENTRY = 1, /* kv_indices[index] = value (as int32) */
    KVF_OVERRIDE_LAST_LEN = 2,    /* kv_last_page_len[index] = value (as int32) */
    KVF_OVERRIDE_Q = 3,           /* q[index] = value (bf16 bits in the low 16) */
    KVF_OVERRIDE_K = 4,           /* k_cache[index] = value */
    KVF_OVERRIDE_V = 5,           /* v_cache[index] = value */
} kvf_override_target;

typedef struct kvf_override {
    uint8_t target; /* kvf_override_target */
    uint64_t index;
    uint32_t value;
} kvf_override;

/* Full tensors for an imported workload. The page counts and last-page lengths still come
 * from the recipe (so the table's shape is written once); values and ids come from here. */
typedef struct kvf_explicit {
    int64_t num_pages;   /* pool size P */
    int32_t *kv_indices; /* [sum of recipe.num_pages] */
    kvf_bf16 *q;         /* [B][Hq][D] */
    kvf_bf16 *k_cache;   /* [P][S][Hk][D] */
    kvf_bf16 *v_cache;   /* [P][S][Hk][D] */
} kvf_explicit;

/* Where an imported case came from (docs/case-format.md, "Origin"; docs/fib.md): the
 * FlashInfer-Bench definition and workload, and which of q, k_cache and v_cache the workload
 * left `random`, drawn by kvfuzz from random_seed. Names hold 1..KVF_ORIGIN_NAME_MAX
 * characters of [A-Za-z0-9_.-], so they can name files. */
#define KVF_ORIGIN_NAME_MAX 128
enum {
    KVF_ORIGIN_RANDOM_Q = 1u << 0,
    KVF_ORIGIN_RANDOM_K = 1u << 1,
    KVF_ORIGIN_RANDOM_V = 1u << 2,
    KVF_ORIGIN_RANDOM_ALL = 0x7u
};
typedef struct kvf_origin {
    char definition[KVF_ORIGIN_NAME_MAX + 1];
    char workload_uuid[KVF_ORIGIN_NAME_MAX + 1];
    uint8_t random_inputs; /* KVF_ORIGIN_RANDOM_* bits */
    uint64_t random_seed;  /* the seed of the random inputs' values */
} kvf_origin;

/* Whether s is a valid origin name (see kvf_origin). */
int kvf_origin_name_ok(const char *s);

/* How a case's caches are quantized (kvfuzz/kv_quant.h; docs/case-format.md, "Quantization
 * section"): the expansion draws the values as for bf16 and rounds each cache's to its dtype
 * (kvf_fp8_from_f32: nearest, ties to even, saturating), then draws the scales from the seed.
 * A tensor scale is the base itself; a per-head or per-token scale is the base times 2^u, u
 * uniform in [-spread, spread], times a significand uniform in [1, 2) when `fine` is set,
 * rounded to f32 (kept within (0, FLT_MAX]). All zero: bf16 caches without scales, no section. */
#define KVF_QUANT_MAX_SPREAD 64
typedef struct kvf_quant_recipe {
    kvf_kv_quant kv;
    float k_scale, v_scale; /* finite, > 0; exactly 1 without scales */
    uint8_t spread;         /* 0..KVF_QUANT_MAX_SPREAD; 0 for tensor scales and none */
    uint8_t fine;           /* 0 or 1; 0 for tensor scales and none */
} kvf_quant_recipe;

/* 1 when q is the all-zero recipe (bf16 caches, no scales). */
int kvf_quant_recipe_is_plain(const kvf_quant_recipe *q);
/* The fields in their domains (KVF_EINVAL with one sentence). */
int kvf_quant_recipe_check(const kvf_quant_recipe *q, kvf_error *err);

typedef struct kvf_spec {
    kvf_recipe recipe;
    kvf_override *overrides;
    uint32_t num_overrides;
    int has_explicit;
    kvf_explicit explicit_tensors;
    int has_origin;
    kvf_origin origin;
    /* The buffers' layout (kvfuzz/layout.h; docs/case-format.md, "Layout section"): all zero
     * for the dense layout, which writes no section. */
    kvf_layout layout;
    /* The caches' dtypes and scales: all zero for bf16 without scales, which writes no
     * section. With explicit tensors only tensor scales (the bases are the scales), and the
     * explicit FP8 caches hold images of their bytes (an imported FP8 workload, docs/fib.md). */
    kvf_quant_recipe quant;
} kvf_spec;

/* Decodes a .kvfz byte string (version 1 or 2). Any byte string either decodes (return 0) or is
 * rejected with one sentence. Checks the recipe's own domain and the limits; whether the expanded
 * case is valid (e.g. an override's page id) is kvf_case_build()'s job. */
int kvf_spec_decode(kvf_spec *out, const uint8_t *data, size_t size, const kvf_limits *limits,
                    kvf_error *err);

/* Checks a recipe's own domain (what the decoder checks of it) and the limits. */
int kvf_recipe_check(const kvf_recipe *recipe, const kvf_limits *limits, kvf_error *err);

/* Encodes canonically: decode(encode(s)) == s, and encode(decode(b)) == b for accepted b. */
int kvf_spec_encode(const kvf_spec *spec, uint8_t **out_data, size_t *out_size, kvf_error *err);

/* Deep copy; dst must be empty. */
int kvf_spec_copy(kvf_spec *dst, const kvf_spec *src, kvf_error *err);

/* Returns nonzero when two specs are field-by-field identical. */
int kvf_spec_equal(const kvf_spec *a, const kvf_spec *b);

/* Tokens in sequence b of a recipe (0 when it has no pages). */
int64_t kvf_recipe_seq_len(const kvf_recipe *rp, uint32_t b);
/* Sets sequence b to `len` tokens: page count and last-page length (0 and 0 for len <= 0);
 * a length past 65535 pages is cut to 65535 full pages. */
void kvf_recipe_set_seq_len(kvf_recipe *rp, uint32_t b, int64_t len);
/* Entries of the page table: the sum of the sequences' page counts. */
int64_t kvf_recipe_entries(const kvf_recipe *rp);
/* Elements of one page of one cache: S x Hk x D. */
int64_t kvf_recipe_page_elems(const kvf_recipe *rp);

/* Sets the batch and (re)allocates the per-sequence arrays (new entries: 1 page, full). */
int kvf_spec_set_batch(kvf_spec *spec, uint16_t batch_size, kvf_error *err);

void kvf_spec_free(kvf_spec *spec);

/* Expands a spec into a case deterministically (same spec, same bits, on every machine),
 * applies the overrides, validates. */
int kvf_case_build(kvf_case *out, const kvf_spec *spec, const kvf_limits *limits, kvf_error *err);

/* Named starting points, with expansion KVF_EXPANSION_DEFAULT (set recipe.expansion to
 * KVF_EXPANSION_1 for the version 1 file of the same recipe). "seed-h20kv4": FlashInfer-Bench's
 * gqa_paged_decode_h20_kv4_d128_ps64 (batch 1, 51 pages of 64 from a pool of 52, last page length
 * drawn from the seed). The list is available through kvf_preset_name(i) for i <
 * kvf_preset_count(). KVF_ENOTFOUND if unknown. */
int kvf_spec_preset(kvf_spec *out, const char *name, uint64_t seed, kvf_error *err);
size_t kvf_preset_count(void);
const char *kvf_preset_name(size_t i);
const char *kvf_preset_description(size_t i);

/* Options for drawing random specs over the whole strategy space. */
typedef struct kvf_random_opts {
    int32_t max_batch;  /* largest batch drawn */
    int32_t max_pages;  /* largest page count per sequence */
    int32_t max_tokens; /* cap on total tokens (pages are trimmed to fit) */
    int64_t max_work;   /* cap on total tokens x Hq x D, the oracle's cost driver */
    int allow_overflow; /* may draw KVF_LOGITS_BEYOND_F32 */
    int allow_high_ids; /* may draw KVF_TABLE_HIGH_IDS with ids past 65535 */
    int expansion;      /* kvf_expansion of the recipes drawn; 0 means KVF_EXPANSION_DEFAULT */
    int layouts;        /* may draw a buffer layout other than the dense one (one in four) */
    int quant;          /* may draw quantized caches (kvf_recipe_draw_quant, one in four) */
    /* With quant, the dtypes a cache may hold (KVF_KV_DTYPES_*, kvfuzz/kv_quant.h; 0: all).
     * Without bf16 every recipe is quantized (the draw that one recipe in four makes), its FP8
     * dtypes restricted to the set; without FP8 none is. KVF_KV_DTYPES_ALL draws as before the
     * set existed. */
    unsigned kv_dtypes;
} kvf_random_opts;

void kvf_random_opts_default(kvf_random_opts *opts);

/* A buffer layout other than the dense one for recipe rp (kvfuzz/layout.h), drawn with r:
 * strides padded by multiples of 8 elements (rows stay 16-byte aligned) or, less often, by odd
 * amounts; HND pages half the time; views inside larger allocations; and, where the pool is
 * small enough for it, pages padded far past their size, as packed page records are (the pool
 * stays within 256 MiB per cache at the padded stride). A high-ids table, whose pool is sized
 * near the case limits, keeps its pages' dense strides. */
void kvf_recipe_draw_layout(kvf_layout *out, const kvf_recipe *rp, kvf_prng *r);
/* The largest page padding that keeps rp's pool within 256 MiB per cache (whatever the other
 * paddings), and at most KVF_LAYOUT_MAX_PAGE_PAD; 0 for a high-ids table. */
int64_t kvf_recipe_max_page_pad(const kvf_recipe *rp);

/* A quantization for recipe rp drawn with r (kvf_quant_recipe): e4m3 or e5m2 caches (the same
 * dtype three times in four), scales per tensor, KV head or page slot (per slot only while the
 * pool stays within 2^20 slots; one in eight without scales), bases log-uniform in [2^-8, 2^8]
 * or, one in eight each, near f32's overflow or underflow, a spread of 0, a few binades or
 * tens of them, fine significands half the time. One in two draws also moves the k or v
 * distribution's scale to the dtype's largest values (saturation) or its subnormals. */
void kvf_recipe_draw_quant(kvf_quant_recipe *out, kvf_recipe *rp, kvf_prng *r);
/* The same draw with each cache's FP8 dtype kept within `kv_dtypes` (KVF_KV_DTYPES_*; 0: all):
 * a dtype outside it is replaced by the other FP8 dtype, before the draws that depend on it.
 * With both FP8 dtypes in the set it is kvf_recipe_draw_quant, draw for draw. The set must
 * hold an FP8 dtype. */
void kvf_recipe_draw_quant_in(kvf_quant_recipe *out, kvf_recipe *rp, kvf_prng *r,
                              unsigned kv_dtypes);
/* The quantization kvf_spec_random gives rp's seed when every recipe must be quantized, the
 * draw from the seed's own quantization stream, within `kv_dtypes`: for callers that must give
 * a recipe FP8 caches without a generator of their own (kvf_spec_fit), so that the same recipe
 * always gets the same caches. */
void kvf_recipe_draw_quant_seeded(kvf_quant_recipe *out, kvf_recipe *rp, unsigned kv_dtypes);

/* A random, valid spec from `seed`: every table kind, distribution, logit shape, poison bit
 * and GQA group 1..16 (with 5 and 7) can come out; shapes from the grid D in {64,128,256},
 * S in {1,2,3,16,64,128,256} among others. */
int kvf_spec_random(kvf_spec *out, uint64_t seed, const kvf_random_opts *opts, kvf_error *err);

/* Sequence lengths where bugs live, for random recipes and mutations alike: the kinds a menu of
 * kvf_edge_length_pick lists. S is the page size, max the longest length allowed. */
typedef enum kvf_edge_length {
    KVF_EDGE_EMPTY = 0,  /* 0 */
    KVF_EDGE_ONE,        /* 1 */
    KVF_EDGE_PAGE_BELOW, /* S - 1 */
    KVF_EDGE_PAGE,       /* S */
    KVF_EDGE_PAGE_ABOVE, /* S + 1 */
    KVF_EDGE_TWO_PAGES,  /* 2S - 1, 2S or 2S + 1 (one draw) */
    KVF_EDGE_TILE,       /* 32 k - 1, 32 k or 32 k + 1 for k in 1..8: 32-token tile edges */
    KVF_EDGE_MAX,        /* max */
    KVF_EDGE_MAX_BELOW,  /* max - 1 */
    KVF_EDGE_ANY,        /* uniform in [1, max] (0 when max is 0) */
    KVF_EDGE_COUNT
} kvf_edge_length;

/* One length, clamped into [0, max_len]: the kind menu[i] for i drawn uniformly from [0, n)
 * (n >= 1), then that kind's own draws, one at a time in the order listed above, so a seed
 * means the same length on every compiler. A caller chooses the mix by the menu: repeating a
 * kind makes it likelier. Nothing fails. */
int64_t kvf_edge_length_pick(kvf_prng *rng, const uint8_t *menu, uint32_t n, int32_t page_size,
                             int64_t max_len);

/* Names for printing ("shuffled", "normal", "spike", ...): kvf_strategy_name of each family. */
const char *kvf_table_name(int kind);
const char *kvf_dist_name(int kind);
const char *kvf_logits_name(int kind);

/* Reads a file and decodes + builds it. spec_out may be NULL. KVF_EIO if unreadable. */
int kvf_case_load(const char *path, kvf_spec *spec_out, kvf_case *case_out,
                  const kvf_limits *limits, kvf_error *err);

/* Writes a spec atomically (temporary file in the same folder, fsync, rename). */
int kvf_spec_save(const kvf_spec *spec, const char *path, kvf_error *err);

#endif
