/* Unit tests for the structure-aware mutator (fuzz/search/mutate.c): mutants stay valid, inside
 * the budget and inside the finite input domain while reaching every move and edge length;
 * crossover stays valid. */
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
        kvf_case gen;
        CHECK_OK(kvf_case_build(&gen, &s, &cl, &err), &err);
        kvf_explicit *ex = &s.explicit_tensors;
        const int64_t entries = gen.kv_indptr[gen.batch_size];
        s.has_explicit = 1;
        ex->num_pages = gen.num_pages;
        ex->kv_indices = malloc((size_t)(entries > 0 ? entries : 1) * 4);
        ex->q = malloc((size_t)kvf_case_q_elems(&gen) * 2 + 2);
        ex->k_cache = malloc(gen.pool_bytes + 2);
        ex->v_cache = malloc(gen.pool_bytes + 2);
        if (entries) memcpy(ex->kv_indices, gen.kv_indices, (size_t)entries * 4);
        memcpy(ex->q, gen.q, (size_t)kvf_case_q_elems(&gen) * 2);
        memcpy(ex->k_cache, gen.k_cache, gen.pool_bytes);
        memcpy(ex->v_cache, gen.v_cache, gen.pool_bytes);
        kvf_case_free(&gen);
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

static const check_test tests[] = {
    {"explicit_fp8_keeps_its_scales", explicit_fp8_keeps_its_scales},
    {"mutations_stay_valid", mutations_stay_valid},
    {"lengths_jump_to_edges", lengths_jump_to_edges},
    {"pool_estimate_bounds_the_generator", pool_estimate_bounds_the_generator},
    {"values_stay_in_domain", values_stay_in_domain},
    {"crossover_is_valid", crossover_is_valid},
    {NULL, NULL},
};

CHECK_MAIN(tests)
