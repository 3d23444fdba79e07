/* Unit tests for rule parsing (kvf_rule_parse in oracle/src/judge.c) and the rule table
 * (kvfuzz/rules.def): valid and invalid rule texts, every kind's words and names. */
#include "judge_fixtures.h"

/* ------------------------------------------------------------------------------------------ */
/* Rule parsing                                                                                */
/* ------------------------------------------------------------------------------------------ */

static void test_parse_valid(void) {
    kvf_rule r;
    kvf_error err = {0};
    CHECK_OK(kvf_rule_parse(&r, "fib", &err), &err);
    CHECK_INT_EQ(r.kind, KVF_RULE_FIB);
    CHECK_DBL_EQ(r.atol, 1e-2);
    CHECK_DBL_EQ(r.rtol, 1e-2);
    CHECK(strcmp(r.name, "fib") == 0);
    CHECK_OK(kvf_rule_parse(&r, "sol", &err), &err);
    CHECK_INT_EQ(r.kind, KVF_RULE_SOL);
    CHECK_DBL_EQ(r.atol, 1e-2);
    CHECK_OK(kvf_rule_parse(&r, "strict", &err), &err);
    CHECK_INT_EQ(r.kind, KVF_RULE_STRICT);
    CHECK_OK(kvf_rule_parse(&r, "allclose:1e-3:1e-3", &err), &err);
    CHECK_INT_EQ(r.kind, KVF_RULE_ALLCLOSE);
    CHECK_DBL_EQ(r.atol, 1e-3);
    CHECK_DBL_EQ(r.rtol, 1e-3);
    CHECK(strcmp(r.name, "allclose:0.001:0.001") == 0);
    CHECK_OK(kvf_rule_parse(&r, "allclose:0x1p-3:-0", &err), &err);
    CHECK_DBL_EQ(r.atol, 0.125);
    CHECK(strcmp(r.name, "allclose:0.125:0") == 0);
    /* The canonical name parses back to the very same tolerances. */
    CHECK_OK(kvf_rule_parse(&r, "allclose:0.1:3e-7", &err), &err);
    kvf_rule again;
    CHECK_OK(kvf_rule_parse(&again, r.name, &err), &err);
    CHECK_DBL_EQ(again.atol, r.atol);
    CHECK_DBL_EQ(again.rtol, r.rtol);
    CHECK(strcmp(again.name, r.name) == 0);
    CHECK_OK(kvf_rule_parse(&r, "ulp:0", &err), &err);
    CHECK_INT_EQ(r.kind, KVF_RULE_ULP);
    CHECK_INT_EQ(r.ulps, 0);
    CHECK_OK(kvf_rule_parse(&r, "ulp:007", &err), &err);
    CHECK_INT_EQ(r.ulps, 7);
    CHECK(strcmp(r.name, "ulp:7") == 0);
    kvf_rule_default(&r);
    CHECK_INT_EQ(r.kind, KVF_RULE_STRICT);
    CHECK(strcmp(r.name, "strict") == 0);
    for (int k = 0; k < KVF_RULE_KIND_COUNT; k++)
        CHECK(strlen(kvf_rule_help((kvf_rule_kind)k)) > 10);
}

static void test_parse_errors(void) {
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"", "empty"},
        {NULL, "empty"},
        {"FIB", "unknown rule 'FIB'"},
        {"ulpx", "unknown rule 'ulpx'"},
        {"allclosex:1:1", "unknown rule"},
        {"fib:0.1", "'fib' takes no parameters"},
        {"sol:0.1:0.1", "'sol' takes no parameters"},
        {"strict:2", "unknown component '2'"},
        {"fa:bf16-p+bf16-p", "names P's rounding twice"},
        {"strict:", "empty precision model"},
        {"allclose", "needs two tolerances"},
        {"allclose:1e-3", "needs two tolerances"},
        {"allclose:1:2:3", "more than two tolerances"},
        {"allclose:1e-3:", "RTOL in rule"},
        {"allclose::1e-3", "ATOL in rule"},
        {"allclose:abc:1e-3", "ATOL 'abc'"},
        {"allclose:1e-3:1e-3x", "trailing characters 'x'"},
        {"allclose:-1:0", "ATOL '-1' in rule 'allclose:-1:0' is negative"},
        {"allclose:inf:0", "ATOL 'inf' in rule 'allclose:inf:0' is not finite"},
        {"allclose:0:nan", "RTOL 'nan' in rule 'allclose:0:nan' is not finite"},
        {"allclose:1e999:0", "is not finite"},
        {"allclose: 1:2", "starts with a blank"},
        {"ulp", "needs a count"},
        {"ulp:", "needs a count"},
        {"ulp:-1", "ulp count '-1'"},
        {"ulp:1.5", "ulp count '1.5'"},
        {"ulp:+1", "ulp count '+1'"},
        {"ulp:1e3", "ulp count '1e3'"},
        {"ulp: 1", "ulp count ' 1'"},
        {"ulp:99999999999999999999", "too large"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kvf_rule r;
        kvf_error err = {0};
        int rc = kvf_rule_parse(&r, bad[i].text, &err);
        if (rc != KVF_EINVAL) {
            CHECK_FAIL_AT("rule '%s' gave %d, want KVF_EINVAL",
                          bad[i].text ? bad[i].text : "(null)", rc);
            continue;
        }
        CHECK_INT_EQ(err.code, KVF_EINVAL);
        CHECK_STR_CONTAINS(err.msg, bad[i].needle);
        CHECK(strchr(err.msg, '\n') == NULL);
    }
}

/* The rule table (kvfuzz/rules.def): every kind has its words and parses back from its name,
 * the sentence for an unknown rule lists every rule, and only strict and fa take a model. */
static void test_rule_table(void) {
    kvf_error err = {0};
    kvf_rule bad;
    CHECK(kvf_rule_parse(&bad, "no-such-rule", &err) == KVF_EINVAL);
    for (int k = 0; k < KVF_RULE_KIND_COUNT; k++) {
        const char *help = kvf_rule_help((kvf_rule_kind)k);
        char name[32];
        size_t n = strcspn(help, " :[");
        CHECK(n > 0 && n < sizeof name);
        memcpy(name, help, n);
        name[n] = '\0';
        CHECK_STR_CONTAINS(err.msg, name);
        CHECK(strlen(kvf_rule_scope((kvf_rule_kind)k)) > 10);
        kvf_rule r;
        const char *text = strcmp(name, "allclose") == 0 ? "allclose:1e-3:1e-3"
                           : strcmp(name, "ulp") == 0    ? "ulp:2"
                                                         : name;
        CHECK(kvf_rule_parse(&r, text, NULL) == 0);
        CHECK_INT_EQ(r.kind, k);
        CHECK_INT_EQ(kvf_rule_takes_precision(&r), k == KVF_RULE_STRICT || k == KVF_RULE_FA);
    }
    CHECK(strcmp(kvf_rule_help(KVF_RULE_KIND_COUNT), "unknown rule kind") == 0);
    /* A model applies to the rules that take one and name none. */
    kvf_rule rs[4];
    CHECK(kvf_rule_parse(&rs[0], "strict", NULL) == 0);
    CHECK(kvf_rule_parse(&rs[1], "fa:ftz", NULL) == 0);
    CHECK(kvf_rule_parse(&rs[2], "fib", NULL) == 0);
    CHECK(kvf_rule_parse(&rs[3], "fa", NULL) == 0);
    kvf_precision p;
    CHECK(kvf_precision_parse(&p, "bf16-p", NULL) == 0);
    kvf_rules_apply_precision(rs, 4, &p);
    CHECK(strcmp(rs[0].name, "strict:bf16-p") == 0);
    CHECK(strcmp(rs[1].name, "fa:ftz") == 0);
    CHECK(strcmp(rs[2].name, "fib") == 0);
    CHECK(strcmp(rs[3].name, "fa:bf16-p") == 0);
}

static const check_test tests[] = {
    {"parse_valid", test_parse_valid},
    {"parse_errors", test_parse_errors},
    {"rule_table", test_rule_table},
    {NULL, NULL},
};

CHECK_MAIN(tests)
