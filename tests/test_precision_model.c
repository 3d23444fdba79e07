/* Unit tests of the precision models as values (kvfuzz/precision.h, oracle/src/precision.c;
 * docs/precision.md): parsing model texts and their canonical names, one-sentence errors, rule
 * names with a model, which model covers which, and the ladder attribution walks. */
#include <string.h>

#include "check.h"
#include "kvfuzz/judge.h"
#include "kvfuzz/precision.h"

/* ---- model texts -------------------------------------------------------------------------- */

static void test_parse_and_names(void) {
    static const struct {
        const char *text, *name;
    } good[] = {
        {"f32", "f32"},
        {"", "f32"},
        {"ftz", "ftz"},
        {"bf16-p", "bf16-p"},
        {"ftz+bf16-p", "bf16-p+ftz"},
        {"bf16-partials+ftz", "bf16-partials+ftz"},
        {"ftz+bf16-partials+fp16-p-rsum", "fp16-p-rsum+bf16-partials+ftz"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        kvf_precision p;
        kvf_error err = {0};
        CHECK_OK(kvf_precision_parse(&p, good[i].text, &err), &err);
        char name[KVF_PRECISION_NAME_MAX];
        kvf_precision_name(&p, name, sizeof name);
        CHECK(strcmp(name, good[i].name) == 0);
    }
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"bf16", "unknown component 'bf16'"}, {"bf16-p+fp16-p", "names P's rounding twice"},
        {"ftz+ftz", "names ftz twice"},       {"f32+ftz", "f32 stands alone"},
        {"bf16-p+", "ends with '+'"},         {"+ftz", "empty component"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kvf_precision p;
        kvf_error err = {0};
        CHECK_INT_EQ(kvf_precision_parse(&p, bad[i].text, &err), KVF_EINVAL);
        CHECK_STR_CONTAINS(err.msg, bad[i].needle);
    }
    kvf_rule r;
    kvf_error err = {0};
    CHECK_OK(kvf_rule_parse(&r, "strict:ftz+bf16-p", &err), &err);
    CHECK(strcmp(r.name, "strict:bf16-p+ftz") == 0);
    CHECK_OK(kvf_rule_parse(&r, "fa:f32", &err), &err);
    CHECK(strcmp(r.name, "fa") == 0);
    CHECK_INT_EQ(kvf_rule_parse(&r, "strict:", &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "empty precision model");
}

static void test_covers_and_ladder(void) {
    kvf_precision f32, bp, bpr, hp, part, ftz, fi;
    kvf_precision_parse(&f32, "f32", NULL);
    kvf_precision_parse(&bp, "bf16-p", NULL);
    kvf_precision_parse(&bpr, "bf16-p-rsum", NULL);
    kvf_precision_parse(&hp, "fp16-p", NULL);
    kvf_precision_parse(&part, "bf16-partials", NULL);
    kvf_precision_parse(&ftz, "ftz", NULL);
    kvf_precision_parse(&fi, "bf16-partials+ftz", NULL);
    CHECK(kvf_precision_covers(&bp, &f32));
    CHECK(kvf_precision_covers(&bpr, &bp));
    CHECK(!kvf_precision_covers(&bp, &bpr));
    CHECK(!kvf_precision_covers(&bp, &hp));
    CHECK(!kvf_precision_covers(&hp, &bp));
    CHECK(kvf_precision_covers(&fi, &part));
    CHECK(kvf_precision_covers(&fi, &ftz));
    CHECK(!kvf_precision_covers(&part, &fi));
    /* The ladder starts at f32, holds every model once, and never lists a model after one
     * that it contains strictly (the tighter explanation comes first). */
    size_t n = kvf_precision_ladder_count();
    CHECK_INT_EQ((long long)n, 20);
    CHECK(kvf_precision_is_f32(kvf_precision_ladder_at(0)));
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            const kvf_precision *a = kvf_precision_ladder_at(i), *b = kvf_precision_ladder_at(j);
            CHECK(!kvf_precision_equal(a, b));
            if (kvf_precision_covers(a, b) && !kvf_precision_equal(a, b))
                CHECK_FAIL_AT("ladder entry %zu contains the later entry %zu", i, j);
        }
}

static const check_test tests[] = {
    {"parse_and_names", test_parse_and_names},
    {"covers_and_ladder", test_covers_and_ladder},
    {NULL, NULL},
};

CHECK_MAIN(tests)
