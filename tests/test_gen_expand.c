/* Unit tests of expansion (core/src/gen_expand.c, kvf_case_build): the seed preset's shape and
 * shuffled table, deterministically; poison in tail slots and unreferenced pages; page ids past
 * 32-bit element offsets in a sparse pool; the ascending logit pattern; overrides that make an
 * invalid case rejected naming the field. The behaviour, under both expansions; the bits are
 * pinned by tests/test_gen_hash.c. FP8 overrides hold FP8 values wherever they land. */
#include "spec_fixtures.h"

/* Same spec, same bits: a fixed hash of the seed workload's expansion pins the generator, so
 * a change that would silently alter every stored corpus file fails here. */
static void test_generator_is_deterministic(void) {
    kvf_limits lim = limits();
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "seed-h20kv4", 1, &err), &err);
    s.recipe.expansion = (uint8_t)g_expansion;
    kvf_case a, b;
    CHECK_OK(kvf_case_build(&a, &s, &lim, &err), &err);
    CHECK_OK(kvf_case_build(&b, &s, &lim, &err), &err);
    CHECK(cases_equal(&a, &b));
    CHECK_INT_EQ(a.batch_size, 1);
    CHECK_INT_EQ(a.kv_indptr[1], 51);
    CHECK_INT_EQ(a.num_pages, 52);
    CHECK_INT_EQ(a.num_qo_heads, 20);
    CHECK_INT_EQ(a.num_kv_heads, 4);
    CHECK_INT_EQ(a.head_dim, 128);
    CHECK_INT_EQ(a.page_size, 64);
    CHECK_INT_EQ(a.kv_last_page_len[0], 2); /* 1 + seed % 64 */
    CHECK_DBL_EQ(a.sm_scale, (float)(1.0 / sqrt(128.0)));
    /* Shuffled: not the identity. */
    int identity = 1;
    for (int i = 0; i < 51; i++)
        identity &= a.kv_indices[i] == i;
    CHECK(!identity);
    kvf_case_free(&a);
    kvf_case_free(&b);
    kvf_spec_free(&s);
}

static void test_poison_reaches_tails_and_unreferenced_pages(void) {
    kvf_limits lim = limits();
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "tail-nan", 3, &err), &err);
    s.recipe.expansion = (uint8_t)g_expansion;
    kvf_case c;
    CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
    int64_t len = kvf_case_seq_len(&c, 0);
    CHECK_INT_EQ(len, 3 * 64 + 5);
    /* Slot 5 of the last page: NaN in both caches. Used slots: finite. */
    int64_t last_page = c.kv_indices[3];
    int64_t pe = kvf_case_page_elems(&c), se = (int64_t)c.num_kv_heads * c.head_dim;
    CHECK(kvf_bf16_is_nan(c.k_cache[last_page * pe + 5 * se]));
    CHECK(kvf_bf16_is_nan(c.v_cache[last_page * pe + 63 * se + se - 1]));
    CHECK(kvf_bf16_is_finite(c.k_cache[last_page * pe + 4 * se]));
    /* Every unreferenced page of this small pool is resident and NaN. */
    CHECK_INT_EQ(c.num_resident_pages, c.num_pages);
    for (int64_t p = 0; p < c.num_pages; p++) {
        int referenced = 0;
        for (int i = 0; i < 4; i++)
            referenced |= c.kv_indices[i] == p;
        if (!referenced) CHECK(kvf_bf16_is_nan(c.v_cache[p * pe]));
    }
    kvf_case_free(&c);
    kvf_spec_free(&s);
}

static void test_high_ids_cross_32bit_offsets(void) {
    kvf_limits lim = limits();
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "high-page-ids", 1, &err), &err);
    s.recipe.expansion = (uint8_t)g_expansion;
    kvf_case c;
    CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
    int32_t max_id = 0;
    for (int i = 0; i < c.kv_indptr[1]; i++)
        if (c.kv_indices[i] > max_id) max_id = c.kv_indices[i];
    CHECK(max_id >= 65536);
    CHECK((int64_t)max_id * kvf_case_page_elems(&c) > INT32_MAX);
    /* Sparse: only referenced pages and their neighbours hold data. */
    CHECK(c.num_resident_pages < 64);
    kvf_case_free(&c);
    kvf_spec_free(&s);
}

/* Overrides that decode but make an invalid case are rejected by the build, naming the field. */
static void test_invalid_overrides_rejected_by_build(void) {
    kvf_limits lim = limits();
    struct {
        kvf_override o;
        const char *word;
    } bad[] = {
        {{KVF_OVERRIDE_TABLE_ENTRY, 3, 52}, "kv_indices[3] = 52"},
        {{KVF_OVERRIDE_TABLE_ENTRY, 3, 0xFFFFFFFFu}, "kv_indices[3] = -1"},
        {{KVF_OVERRIDE_TABLE_ENTRY, 51, 0}, "table has 51 entries"},
        {{KVF_OVERRIDE_LAST_LEN, 0, 65}, "kv_last_page_len[0] = 65"},
        {{KVF_OVERRIDE_LAST_LEN, 0, 0}, "kv_last_page_len[0] = 0"},
        {{KVF_OVERRIDE_LAST_LEN, 1, 3}, "batch has 1"},
        {{KVF_OVERRIDE_Q, 20 * 128, 0}, "q has 2560"},
        {{KVF_OVERRIDE_V, 52ull * 32768, 0}, "pool has"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kvf_spec s;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_preset(&s, "seed-h20kv4", 1, &err), &err);
        s.overrides = malloc(sizeof(kvf_override));
        s.overrides[0] = bad[i].o;
        s.num_overrides = 1;
        uint8_t *bytes;
        size_t n;
        encode_or_fail(&s, &bytes, &n);
        kvf_spec d;
        CHECK_OK(kvf_spec_decode(&d, bytes, n, &lim, &err), &err);
        kvf_case c;
        int rc = kvf_case_build(&c, &d, &lim, &err);
        CHECK_INT_EQ(rc, KVF_EINVAL);
        CHECK_STR_CONTAINS(err.msg, bad[i].word);
        free(bytes);
        kvf_spec_free(&s);
        kvf_spec_free(&d);
    }
}

/* An override of an FP8 cache holds an FP8 value's image wherever it lands: in a slot a sequence
 * reads (kvf_case_validate), and in an unused tail slot or an unreferenced page too, which the
 * kernel's FP8 buffer receives as well. Images are taken there, other bf16 values refused. */
static void test_fp8_overrides_are_fp8_values_everywhere(void) {
    kvf_limits lim = limits();
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "seed-h20kv4", 1, &err), &err);
    s.quant.kv = (kvf_kv_quant){KVF_KV_E4M3, KVF_KV_E5M2, KVF_SCALE_TENSOR};
    s.quant.k_scale = s.quant.v_scale = 1.0f;
    kvf_case c;
    CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
    const int64_t pe = kvf_case_page_elems(&c);
    /* The last page holds 2 of its 64 slots; one pool page is referenced by no sequence. */
    const uint64_t tail = (uint64_t)(c.kv_indices[50] * pe + 10 * 4 * 128 + 7);
    int64_t unref = -1;
    for (int64_t p = 0; p < c.num_pages && unref < 0; p++) {
        int used = 0;
        for (int i = 0; i < c.kv_indptr[1]; i++)
            used |= c.kv_indices[i] == p;
        if (!used) unref = p;
    }
    CHECK(unref >= 0);
    kvf_case_free(&c);
    const uint64_t spare = (uint64_t)(unref * pe + 100);
    struct {
        kvf_override o;
        const char *word; /* NULL: accepted */
    } ov[] = {
        {{KVF_OVERRIDE_K, tail, 0x7F80}, "sets k_cache["}, /* +inf: no e4m3 value */
        {{KVF_OVERRIDE_K, tail, 0x3F81}, "not an e4m3 value"},
        {{KVF_OVERRIDE_V, spare, 0x3F81}, "not an e5m2 value"},
        {{KVF_OVERRIDE_V, spare, 0xFFC1}, "0xffc1"}, /* a NaN, but no e5m2 NaN's image */
        {{KVF_OVERRIDE_K, tail, 0x43E0}, NULL},      /* 448, e4m3's largest */
        {{KVF_OVERRIDE_V, spare, 0x7F80}, NULL},     /* +inf is e5m2's */
    };
    for (size_t i = 0; i < sizeof ov / sizeof ov[0]; i++) {
        free(s.overrides);
        s.overrides = malloc(sizeof(kvf_override));
        s.overrides[0] = ov[i].o;
        s.num_overrides = 1;
        int rc = kvf_case_build(&c, &s, &lim, &err);
        if (ov[i].word) {
            CHECK_INT_EQ(rc, KVF_EINVAL);
            CHECK_STR_CONTAINS(err.msg, ov[i].word);
            continue;
        }
        CHECK_OK(rc, &err);
        if (rc) continue;
        const kvf_bf16 *cache = ov[i].o.target == KVF_OVERRIDE_K ? c.k_cache : c.v_cache;
        CHECK_INT_EQ(cache[ov[i].o.index], ov[i].o.value);
        kvf_case_free(&c);
    }
    kvf_spec_free(&s);
}

/* Per-token scales of a pool past 2^24 page slots and KV heads are refused from the pool's size,
 * before the caches are written (a pool of 5,001 pages of 1,024 slots, Hk 4: about 330 MB each). */
static void test_token_scales_past_the_limit_refused(void) {
    kvf_limits lim = limits();
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "seed-h20kv4", 1, &err), &err);
    s.recipe.num_qo_heads = 4, s.recipe.num_kv_heads = 4, s.recipe.head_dim = 8;
    s.recipe.page_size = 1024;
    s.recipe.num_pages[0] = 5000, s.recipe.last_page_len[0] = 1;
    s.quant.kv = (kvf_kv_quant){KVF_KV_E4M3, KVF_KV_E4M3, KVF_SCALE_TOKEN};
    s.quant.k_scale = s.quant.v_scale = 1.0f;
    kvf_case c;
    CHECK_INT_EQ(kvf_case_build(&c, &s, &lim, &err), KVF_ELIMIT);
    CHECK_STR_CONTAINS(err.msg, "per-token scales of 20484096 page slots and KV heads");
    kvf_spec_free(&s);
}

/* The ascending pattern: for the first q head of each group, every token's exact logit is
 * strictly above every earlier one (so an online softmax rescales at every token), on the
 * preset and on a random recipe that draws the pattern. Dot products in double are exact here
 * (products of bf16 values have 16 significant bits and the sums stay far from 53). */
static void check_ascending(const kvf_case *c, const char *what) {
    const int32_t D = c->head_dim, G = c->num_qo_heads / c->num_kv_heads;
    for (int32_t b = 0; b < c->batch_size; b++)
        for (int32_t h = 0; h < c->num_qo_heads; h += G) {
            const kvf_bf16 *q = c->q + ((int64_t)b * c->num_qo_heads + h) * D;
            double prev = -INFINITY;
            int nonzero_q = 0;
            for (int32_t d = 0; d < D; d++)
                nonzero_q |= kvf_bf16_to_f32(q[d]) != 0.0f;
            if (!nonzero_q) continue; /* no coordinate to step: every logit is 0 */
            for (int64_t t = 0; t < kvf_case_seq_len(c, b); t++) {
                const kvf_bf16 *k = c->k_cache + kvf_case_kv_offset(c, b, t, h / G, 0);
                double dot = 0;
                for (int32_t d = 0; d < D; d++)
                    dot += (double)kvf_bf16_to_f32(q[d]) * kvf_bf16_to_f32(k[d]);
                if (!(dot > prev)) {
                    CHECK_FAIL_AT("%s: sequence %d head %d token %lld: logit %.17g after %.17g",
                                  what, (int)b, (int)h, (long long)t, dot, prev);
                    return;
                }
                prev = dot;
            }
        }
}

static void test_ascending_logits(void) {
    kvf_limits lim = limits();
    kvf_spec s;
    kvf_error err = {0};
    kvf_case c;
    CHECK_OK(kvf_spec_preset(&s, "ascending-logits", 4, &err), &err);
    s.recipe.expansion = (uint8_t)g_expansion;
    CHECK_INT_EQ(s.recipe.logits, KVF_LOGITS_ASCENDING);
    CHECK_STR_CONTAINS(kvf_logits_name(KVF_LOGITS_ASCENDING), "ascending");
    CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
    CHECK(kvf_case_seq_len(&c, 0) > 8000);
    check_ascending(&c, "preset ascending-logits");
    kvf_case_free(&c);
    kvf_spec_free(&s);
    /* The random generator draws it (last, from natural-logit recipes). */
    kvf_random_opts ro = small_random_opts();
    int found = 0;
    for (uint64_t seed = 0; seed < 400 && found < 3; seed++) {
        CHECK_OK(kvf_spec_random(&s, seed, &ro, &err), &err);
        if (s.recipe.logits == KVF_LOGITS_ASCENDING && s.recipe.k.kind == KVF_DIST_NORMAL &&
            s.recipe.q.kind == KVF_DIST_NORMAL) {
            CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
            char what[64];
            snprintf(what, sizeof what, "random seed %llu", (unsigned long long)seed);
            check_ascending(&c, what);
            kvf_case_free(&c);
            found++;
        }
        kvf_spec_free(&s);
    }
    CHECK(found == 3);
}

BOTH_EXPANSIONS(test_ascending_logits)
BOTH_EXPANSIONS(test_generator_is_deterministic)
BOTH_EXPANSIONS(test_poison_reaches_tails_and_unreferenced_pages)
BOTH_EXPANSIONS(test_high_ids_cross_32bit_offsets)

static const check_test tests[] = {
    {"ascending_logits", test_ascending_logits_e1},
    {"ascending_logits_expansion2", test_ascending_logits_e2},
    {"generator_is_deterministic", test_generator_is_deterministic_e1},
    {"generator_is_deterministic_expansion2", test_generator_is_deterministic_e2},
    {"poison_reaches_tails_and_unreferenced_pages",
     test_poison_reaches_tails_and_unreferenced_pages_e1},
    {"poison_reaches_tails_and_unreferenced_pages_expansion2",
     test_poison_reaches_tails_and_unreferenced_pages_e2},
    {"high_ids_cross_32bit_offsets", test_high_ids_cross_32bit_offsets_e1},
    {"high_ids_cross_32bit_offsets_expansion2", test_high_ids_cross_32bit_offsets_e2},
    {"invalid_overrides_rejected_by_build", test_invalid_overrides_rejected_by_build},
    {"fp8_overrides_are_fp8_values_everywhere", test_fp8_overrides_are_fp8_values_everywhere},
    {"token_scales_past_the_limit_refused", test_token_scales_past_the_limit_refused},
    {NULL, NULL},
};

CHECK_MAIN(tests)
