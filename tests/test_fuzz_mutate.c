/* Unit tests for the structure-aware mutator (fuzz/search/mutate.c): mutants stay valid, inside
 * the budget and inside the finite input domain while reaching every move and edge length;
 * crossover stays valid; a cache dtype set (kvf_mutate_limits.kv_dtypes) holds for fresh specs,
 * mutants, cross-overs and large specs, and the full set mutates as before it existed. */
#include "explicit_fixture.h"
#include "fuzz_fixtures.h"

static int64_t seq_len(const kvf_recipe *rp, uint32_t b) {
    return rp->num_pages[b] ? (int64_t)(rp->num_pages[b] - 1) * rp->page_size + rp->last_page_len[b]
                            : 0;
}

static void mutations_stay_valid(void) {
    kvf_limits cl = case_limits();
    kvf_mutate_limits ml;
    kvf_mutate_limits_default(&ml);
    kvf_prng rng;
    kvf_prng_seed(&rng, 11);
    int moves[KVF_MUT_COUNT] = {0};
    int built = 0;
    kvf_spec s = small_spec(1);
    for (int i = 0; i < 1500; i++) {
        int m = kvf_spec_mutate(&s, &rng, -1, &ml, &cl);
        CHECK(m >= 0 && m < KVF_MUT_COUNT);
        if (m >= 0 && m < KVF_MUT_COUNT) moves[m]++;
        const kvf_recipe *rp = &s.recipe;
        CHECK(rp->batch_size <= ml.max_batch);
        for (uint32_t b = 0; b < rp->batch_size; b++)
            CHECK(rp->num_pages[b] <= ml.max_pages);
        CHECK(kvf_spec_work(&s) <= ml.max_work);
        CHECK(kvf_spec_pool_elems(&s) <= ml.max_pool_elems);
        kvf_case c;
        kvf_error err = {0};
        if (kvf_spec_repair(&s, &cl, 0, &c, &err) == 0) {
            built++;
            CHECK(kvf_case_inputs_finite(&c));
            kvf_case_free(&c);
        }
        /* encode(decode(encode(s))) is the identity: the mutated spec is a real case file. */
        uint8_t *bytes;
        size_t n;
        CHECK_OK(kvf_spec_encode(&s, &bytes, &n, &err), &err);
        kvf_spec back;
        CHECK_OK(kvf_spec_decode(&back, bytes, n, &cl, &err), &err);
        CHECK(kvf_spec_equal(&back, &s));
        kvf_spec_free(&back);
        free(bytes);
        if (i % 100 == 99) { /* restart now and then so the walk covers fresh structure */
            kvf_spec_free(&s);
            s = small_spec((uint64_t)i);
        }
    }
    kvf_spec_free(&s);
    CHECK(built > 1400);
    for (int m = 0; m < KVF_MUT_COUNT; m++)
        if (m != KVF_MUT_EXPLICIT && moves[m] == 0)
            CHECK_FAIL_AT("move %s never applied", kvf_mutation_name((kvf_mutation)m));
}

/* The length move reaches 0, 1, S-1, S and S+1 tokens. */
/* kvf_spec_pool_elems bounds what the generator writes: a high-ids pool just past the size
 * written whole at the longest id stride (3) but not at the shortest (1) is written whole when
 * the seed draws a short stride, and the estimate says so (it once took such a pool for a
 * sparse one, and the harness built 64 MiB pools it meant to refuse). */
static void pool_estimate_bounds_the_generator(void) {
    kvf_limits cl = case_limits();
    int whole = 0, cases = 0;
    for (uint32_t base = 4086; base <= 4092; base += 3)
        for (uint64_t seed = 1; seed <= 6; seed++) {
            kvf_spec s = small_spec(seed); /* 4 table entries of 16 KiB pages: 4096 fill 64 MiB */
            s.recipe.table = KVF_TABLE_HIGH_IDS;
            s.recipe.page_id_base = base;
            s.recipe.spare_pages = 0;
            kvf_case c;
            kvf_error err = {0};
            CHECK_OK(kvf_case_build(&c, &s, &cl, &err), &err);
            int64_t written = c.num_resident_pages * kvf_case_page_elems(&c);
            if (written > kvf_spec_pool_elems(&s))
                CHECK_FAIL_AT("base %u seed %llu: the generator wrote %lld elements, the estimate "
                              "is %lld",
                              base, (unsigned long long)seed, (long long)written,
                              (long long)kvf_spec_pool_elems(&s));
            whole += c.num_resident_pages == c.num_pages;
            cases++;
            kvf_case_free(&c);
            kvf_spec_free(&s);
        }
    CHECK(whole > 0 && whole < cases); /* both sides of the boundary were built */
}

static void lengths_jump_to_edges(void) {
    kvf_limits cl = case_limits();
    kvf_mutate_limits ml;
    kvf_mutate_limits_default(&ml);
    ml.max_work = INT64_MAX / 4;
    ml.max_pool_elems = INT64_MAX / 4;
    kvf_prng rng;
    kvf_prng_seed(&rng, 5);
    int seen[5] = {0};
    for (int i = 0; i < 400; i++) {
        kvf_spec s = small_spec(2);
        kvf_spec_mutate(&s, &rng, KVF_MUT_SEQ_LENGTH, &ml, &cl);
        for (uint32_t b = 0; b < s.recipe.batch_size; b++) {
            int64_t len = seq_len(&s.recipe, b), S = s.recipe.page_size;
            int64_t edges[5] = {0, 1, S - 1, S, S + 1};
            for (int e = 0; e < 5; e++)
                if (len == edges[e]) seen[e] = 1;
        }
        kvf_spec_free(&s);
    }
    for (int e = 0; e < 5; e++)
        CHECK_INT_EQ(seen[e], 1);
}

/* Special values at referenced positions stay finite; NaN/inf only land where nothing reads. */
static void values_stay_in_domain(void) {
    kvf_limits cl = case_limits();
    kvf_mutate_limits ml;
    kvf_mutate_limits_default(&ml);
    kvf_prng rng;
    kvf_prng_seed(&rng, 9);
    int nonfinite_overrides = 0;
    for (int i = 0; i < 300; i++) {
        kvf_spec s = small_spec(3);
        s.recipe.poison = KVF_POISON_ALL;
        s.recipe.spare_pages = 3;
        for (int k = 0; k < 4; k++) {
            kvf_spec_mutate(&s, &rng, KVF_MUT_VALUE, &ml, &cl);
            kvf_spec_mutate(&s, &rng, KVF_MUT_TABLE_ENTRY, &ml, &cl);
        }
        for (uint32_t k = 0; k < s.num_overrides; k++)
            if (s.overrides[k].target >= KVF_OVERRIDE_Q &&
                !kvf_bf16_is_finite((kvf_bf16)s.overrides[k].value))
                nonfinite_overrides++;
        kvf_case c;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_repair(&s, &cl, 0, &c, &err), &err);
        CHECK(kvf_case_inputs_finite(&c));
        kvf_case_free(&c);
        kvf_spec_free(&s);
    }
    CHECK(nonfinite_overrides > 0); /* tail slots do get NaN and inf */
}

static void crossover_is_valid(void) {
    kvf_limits cl = case_limits();
    kvf_mutate_limits ml;
    kvf_mutate_limits_default(&ml);
    kvf_prng rng;
    kvf_prng_seed(&rng, 3);
    for (int i = 0; i < 100; i++) {
        kvf_spec a = small_spec(4), b = small_spec(5), out;
        kvf_spec_mutate(&b, &rng, KVF_MUT_BATCH, &ml, &cl);
        b.recipe.v.kind = KVF_DIST_ONE_HOT;
        CHECK_INT_EQ(kvf_spec_crossover(&out, &a, &b, &rng, &ml), 0);
        kvf_error err = {0};
        CHECK_OK(kvf_spec_repair(&out, &cl, 0, NULL, &err), &err);
        CHECK(out.recipe.batch_size <= ml.max_batch);
        kvf_spec_free(&a);
        kvf_spec_free(&b);
        kvf_spec_free(&out);
    }
}

/* An imported FP8 workload (explicit tensors, e5m2 caches, tensor scales): its mutants keep the
 * quantization while they keep the tensors (a value written into a cache is an image of an FP8
 * byte), keep it as a recipe once a structural move drops them, and always build. */
static void explicit_fp8_keeps_its_scales(void) {
    kvf_limits cl = case_limits();
    kvf_mutate_limits ml;
    kvf_mutate_limits_default(&ml);
    ml.max_work = INT64_MAX / 4; /* no shrinking that would drop the tensors by itself */
    ml.max_pool_elems = INT64_MAX / 4;
    kvf_error err = {0};
    kvf_prng rng;
    kvf_prng_seed(&rng, 13);
    int kept_explicit = 0, kept_recipe = 0;
    for (int i = 0; i < 200; i++) {
        kvf_spec s = small_spec(2);
        s.quant =
            (kvf_quant_recipe){{KVF_KV_E5M2, KVF_KV_E5M2, KVF_SCALE_TENSOR}, 0.5f, 2.0f, 0, 0};
        give_explicit_tensors(&s, &cl, NULL);
        for (int k = 0; k < 6; k++)
            kvf_spec_mutate(&s, &rng, i % 2 ? KVF_MUT_EXPLICIT : -1, &ml, &cl);
        kvf_case c;
        CHECK_OK(kvf_spec_repair(&s, &cl, 0, &c, &err), &err);
        if (c.quant.granularity == KVF_SCALE_TENSOR && c.quant.k_dtype == KVF_KV_E5M2) {
            CHECK(c.k_scale && c.k_scale[0] > 0);
            if (s.has_explicit)
                kept_explicit++;
            else
                kept_recipe++;
        }
        kvf_case_free(&c);
        kvf_spec_free(&s);
    }
    CHECK(kept_explicit > 0);
    CHECK(kept_recipe > 0);
}

/* ---- cache dtypes (kvf_mutate_limits.kv_dtypes) ---------------------------------------------- */

static void digest_spec(uint64_t *h, const kvf_spec *s) {
    uint8_t *bytes;
    size_t n;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_encode(s, &bytes, &n, &err), &err);
    for (size_t i = 0; i < n; i++) {
        *h ^= bytes[i];
        *h *= 0x100000001B3ull;
    }
    free(bytes);
}

/* A fresh spec as a campaign's generator makes one (kvf_mutate_random_opts, then fitted). */
static kvf_spec fresh_spec(uint64_t seed, const kvf_mutate_limits *ml) {
    kvf_random_opts ro;
    kvf_mutate_random_opts(&ro, ml);
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_random(&s, seed, &ro, &err), &err);
    kvf_spec_fit(&s, ml);
    return s;
}

/* 40 fresh specs, each mutated 25 times (every fifth move the quant move) and crossed with the
 * one before: the digest of every spec and move on the way. The full dtype set (and 0, its
 * stand-in) walks exactly as the mutator did before the set existed (recorded then). */
static void every_dtype_mutates_as_before(void) {
    static const unsigned sets[] = {KVF_KV_DTYPES_ALL, 0};
    kvf_limits cl = case_limits();
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        kvf_mutate_limits ml;
        kvf_mutate_limits_default(&ml);
        ml.kv_dtypes = sets[k];
        kvf_prng rng;
        kvf_prng_seed(&rng, 21);
        uint64_t h = 0xCBF29CE484222325ull;
        int quantized = 0, have_prev = 0;
        kvf_spec prev;
        for (int i = 0; i < 40; i++) {
            kvf_spec s = fresh_spec(kvf_prng_next(&rng), &ml);
            digest_spec(&h, &s);
            for (int j = 0; j < 25; j++) {
                int m = kvf_spec_mutate(&s, &rng, j % 5 == 4 ? KVF_MUT_QUANT : -1, &ml, &cl);
                for (size_t b = 0; b < sizeof m; b++) { /* the move, as its bytes */
                    h ^= ((const unsigned char *)&m)[b];
                    h *= 0x100000001B3ull;
                }
                digest_spec(&h, &s);
                quantized += !kvf_quant_recipe_is_plain(&s.quant);
            }
            if (have_prev) {
                kvf_spec x;
                CHECK_INT_EQ(kvf_spec_crossover(&x, &s, &prev, &rng, &ml), 0);
                digest_spec(&h, &x);
                kvf_spec_free(&x);
                kvf_spec_free(&prev);
            }
            prev = s;
            have_prev = 1;
        }
        kvf_spec_free(&prev);
        CHECK_INT_EQ(quantized, 626);
        CHECK_HEX_EQ(h, 0x2d29b42eeab0f88eull);
    }
}

/* Whether a spec's caches are FP8 of the set's dtypes, and whether it builds into a valid case
 * holding them (kvf_spec_repair builds and validates). */
static void check_fp8_spec(const kvf_spec *s0, unsigned set, const char *what, int i) {
    kvf_limits cl = case_limits();
    const kvf_kv_quant *q = &s0->quant.kv;
    if (!kvf_kv_dtype_is_fp8(q->k_dtype) || !kvf_kv_dtype_is_fp8(q->v_dtype) ||
        !kvf_kv_dtypes_has(set, q->k_dtype) || !kvf_kv_dtypes_has(set, q->v_dtype)) {
        CHECK_FAIL_AT("%s %d under %s: caches k %s v %s", what, i, kvf_kv_dtypes_name(set),
                      kvf_kv_dtype_name(q->k_dtype), kvf_kv_dtype_name(q->v_dtype));
        return;
    }
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_copy(&s, s0, &err), &err);
    kvf_case c;
    if (kvf_spec_repair(&s, &cl, 0, &c, &err)) {
        CHECK_FAIL_AT("%s %d under %s does not build: %s", what, i, kvf_kv_dtypes_name(set),
                      err.msg);
    } else {
        CHECK(c.quant.k_dtype == q->k_dtype && c.quant.v_dtype == q->v_dtype);
        CHECK_OK(kvf_case_validate(&c, &cl, &err), &err);
        kvf_case_free(&c);
    }
    kvf_spec_free(&s);
}

/* With FP8 required (fp8, e4m3, e5m2), every fresh spec, every mutant (from bf16 specs too,
 * whatever the move), every cross-over and every large spec has FP8 caches of the set's
 * dtypes and builds; fitting a bf16 spec gives it the same caches every time. */
static void fp8_sets_hold_every_case(void) {
    static const unsigned sets[] = {KVF_KV_DTYPES_FP8, 1u << KVF_KV_E4M3, 1u << KVF_KV_E5M2};
    kvf_limits cl = case_limits();
    kvf_campaign_opts co;
    kvf_campaign_opts_default(&co);
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        kvf_mutate_limits ml = co.mutate, large = co.large;
        ml.kv_dtypes = large.kv_dtypes = sets[k];
        kvf_prng rng;
        kvf_prng_seed(&rng, 31 + k);
        int dtypes_seen[KVF_KV_DTYPE_COUNT] = {0};
        for (int i = 0; i < 80; i++) {
            kvf_spec s = fresh_spec(kvf_prng_next(&rng), &ml);
            check_fp8_spec(&s, sets[k], "fresh spec", i);
            /* A bf16 spec (a corpus entry, say) mutated: FP8 after any move. */
            kvf_spec b = small_spec((uint64_t)i);
            CHECK(kvf_quant_recipe_is_plain(&b.quant));
            kvf_spec_mutate(&b, &rng, -1, &ml, &cl);
            check_fp8_spec(&b, sets[k], "mutated bf16 spec", i);
            for (int j = 0; j < 6; j++) {
                kvf_spec_mutate(&s, &rng, j % 3 == 2 ? KVF_MUT_QUANT : -1, &ml, &cl);
                check_fp8_spec(&s, sets[k], "mutant", i);
                dtypes_seen[s.quant.kv.k_dtype]++;
                dtypes_seen[s.quant.kv.v_dtype]++;
            }
            kvf_spec x, plain = small_spec((uint64_t)i + 1);
            CHECK_INT_EQ(kvf_spec_crossover(&x, &plain, &s, &rng, &ml), 0);
            check_fp8_spec(&x, sets[k], "cross-over", i);
            kvf_spec_free(&x);
            /* Fitting is deterministic: the same bf16 spec gets the same caches. */
            kvf_spec f1, f2;
            kvf_error err = {0};
            CHECK_OK(kvf_spec_copy(&f1, &plain, &err), &err);
            CHECK_OK(kvf_spec_copy(&f2, &plain, &err), &err);
            kvf_spec_fit(&f1, &ml);
            kvf_spec_fit(&f2, &ml);
            CHECK(kvf_spec_equal(&f1, &f2));
            kvf_spec_free(&f1);
            kvf_spec_free(&f2);
            kvf_spec_free(&plain);
            if (i % 40 == 0) { /* a large spec (campaign's large limits), drawn and fitted */
                kvf_spec l = fresh_spec(kvf_prng_next(&rng), &large);
                check_fp8_spec(&l, sets[k], "large spec", i);
                kvf_spec_free(&l);
            }
            kvf_spec_free(&b);
            kvf_spec_free(&s);
        }
        CHECK(dtypes_seen[KVF_KV_BF16] == 0);
        if (sets[k] == KVF_KV_DTYPES_FP8)
            CHECK(dtypes_seen[KVF_KV_E4M3] > 0 && dtypes_seen[KVF_KV_E5M2] > 0);
    }
}

/* With bf16 only, no spec keeps FP8 caches: fresh specs, mutants with the quant move, and
 * FP8 specs fitted all come out plain. */
static void bf16_set_holds_no_fp8(void) {
    kvf_limits cl = case_limits();
    kvf_mutate_limits ml, fp8;
    kvf_mutate_limits_default(&ml);
    kvf_mutate_limits_default(&fp8);
    ml.kv_dtypes = KVF_KV_DTYPES_BF16;
    fp8.kv_dtypes = KVF_KV_DTYPES_FP8;
    kvf_prng rng;
    kvf_prng_seed(&rng, 41);
    for (int i = 0; i < 100; i++) {
        kvf_spec s = fresh_spec(kvf_prng_next(&rng), &ml);
        CHECK(kvf_quant_recipe_is_plain(&s.quant));
        kvf_spec_mutate(&s, &rng, KVF_MUT_QUANT, &ml, &cl);
        CHECK(kvf_quant_recipe_is_plain(&s.quant));
        kvf_spec_free(&s);
        kvf_spec q = fresh_spec(kvf_prng_next(&rng), &fp8);
        CHECK(!kvf_quant_recipe_is_plain(&q.quant));
        kvf_spec_fit(&q, &ml);
        CHECK(kvf_quant_recipe_is_plain(&q.quant));
        kvf_spec_free(&q);
    }
}

/* A spec whose caches are FP8 of another dtype, or mixed with bf16, takes the set's dtypes
 * when fitted; explicit tensors keep the dtypes they came with. */
static void fit_moves_caches_into_the_set(void) {
    kvf_limits cl = case_limits();
    kvf_mutate_limits ml;
    kvf_mutate_limits_default(&ml);
    ml.kv_dtypes = 1u << KVF_KV_E5M2;
    kvf_spec s = small_spec(7);
    s.quant = (kvf_quant_recipe){{KVF_KV_E4M3, KVF_KV_BF16, KVF_SCALE_NONE}, 1.0f, 1.0f, 0, 0};
    kvf_spec_fit(&s, &ml);
    CHECK_INT_EQ(s.quant.kv.k_dtype, KVF_KV_E5M2);
    CHECK_INT_EQ(s.quant.kv.v_dtype, KVF_KV_E5M2);
    check_fp8_spec(&s, ml.kv_dtypes, "refitted spec", 0);
    kvf_spec_free(&s);
    ml.kv_dtypes = KVF_KV_DTYPES_FP8;
    s = small_spec(8);
    s.quant = (kvf_quant_recipe){{KVF_KV_BF16, KVF_KV_E5M2, KVF_SCALE_NONE}, 1.0f, 1.0f, 0, 0};
    kvf_spec_fit(&s, &ml);
    CHECK_INT_EQ(s.quant.kv.k_dtype, KVF_KV_E5M2); /* the other cache's FP8 dtype */
    CHECK_INT_EQ(s.quant.kv.v_dtype, KVF_KV_E5M2);
    kvf_spec_free(&s);
    /* Explicit bf16 tensors: no FP8 to give them without other values. */
    s = small_spec(9);
    give_explicit_tensors(&s, &cl, NULL);
    ml.max_work = ml.max_pool_elems = INT64_MAX / 4;
    kvf_spec_fit(&s, &ml);
    CHECK(s.has_explicit);
    CHECK(kvf_quant_recipe_is_plain(&s.quant));
    kvf_spec_free(&s);
}

static const check_test tests[] = {
    {"every_dtype_mutates_as_before", every_dtype_mutates_as_before},
    {"fp8_sets_hold_every_case", fp8_sets_hold_every_case},
    {"bf16_set_holds_no_fp8", bf16_set_holds_no_fp8},
    {"fit_moves_caches_into_the_set", fit_moves_caches_into_the_set},
    {"explicit_fp8_keeps_its_scales", explicit_fp8_keeps_its_scales},
    {"mutations_stay_valid", mutations_stay_valid},
    {"lengths_jump_to_edges", lengths_jump_to_edges},
    {"pool_estimate_bounds_the_generator", pool_estimate_bounds_the_generator},
    {"values_stay_in_domain", values_stay_in_domain},
    {"crossover_is_valid", crossover_is_valid},
    {NULL, NULL},
};

CHECK_MAIN(tests)
