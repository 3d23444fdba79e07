/* Unit test of a new case's spec (core/src/spec_make.c, kvfuzz/spec_make.h): a preset and a
 * random recipe in either expansion, the same spec for the same seed, an unknown preset named,
 * and a recipe that does not build under the limits refused with its reason. */
#include "spec_fixtures.h"

#include "kvfuzz/spec_make.h"

static void test_preset_and_random(void) {
    kvf_limits lim = limits();
    kvf_error err = {0};
    kvf_spec a, b, p;
    CHECK_OK(kvf_spec_make(&p, "seed-h20kv4", 1, KVF_EXPANSION_1, NULL, &lim, &err), &err);
    CHECK_INT_EQ(p.recipe.expansion, KVF_EXPANSION_1);
    kvf_spec ref;
    CHECK_OK(kvf_spec_preset(&ref, "seed-h20kv4", 1, &err), &err);
    ref.recipe.expansion = KVF_EXPANSION_1;
    CHECK(kvf_spec_equal(&p, &ref));
    kvf_spec_free(&ref);
    kvf_spec_free(&p);

    CHECK_OK(kvf_spec_make(&a, NULL, 42, KVF_EXPANSION_2, NULL, &lim, &err), &err);
    CHECK_OK(kvf_spec_make(&b, NULL, 42, KVF_EXPANSION_2, NULL, &lim, &err), &err);
    CHECK_INT_EQ(a.recipe.expansion, KVF_EXPANSION_2);
    CHECK(kvf_spec_equal(&a, &b));
    kvf_spec_free(&b);
    CHECK_OK(kvf_spec_make(&b, NULL, 43, KVF_EXPANSION_2, NULL, &lim, &err), &err);
    CHECK(!kvf_spec_equal(&a, &b));
    kvf_spec_free(&a);
    kvf_spec_free(&b);
    CHECK_OK(kvf_spec_make(&a, NULL, 42, KVF_EXPANSION_1, NULL, &lim, &err), &err);
    CHECK_INT_EQ(a.recipe.expansion, KVF_EXPANSION_1);
    kvf_case c;
    CHECK_OK(kvf_case_build(&c, &a, &lim, &err), &err);
    kvf_case_free(&c);
    kvf_spec_free(&a);
}

static void test_refusals(void) {
    kvf_limits lim = limits();
    kvf_error err = {0};
    kvf_spec s;
    CHECK_INT_EQ(kvf_spec_make(&s, "no-such-preset", 1, KVF_EXPANSION_2, NULL, &lim, &err),
                 KVF_ENOTFOUND);
    CHECK_STR_CONTAINS(err.msg, "no-such-preset");
    /* The seed shape's 51 pages do not fit a pool limit of one page's bytes. */
    lim.max_pool_bytes = 64 * 4 * 128 * 2;
    int rc = kvf_spec_make(&s, "seed-h20kv4", 1, KVF_EXPANSION_2, NULL, &lim, &err);
    CHECK(rc < 0);
    CHECK(strncmp(err.msg, "the recipe does not build: ", 27) == 0);
    CHECK(strlen(err.msg) > 27);
}

static const check_test tests[] = {
    {"preset_and_random", test_preset_and_random},
    {"refusals", test_refusals},
    {NULL, NULL},
};

CHECK_MAIN(tests)
