/* Plugins through the kernel resolver and the buffer host: the example kernel, loaded as a
 * plugin, gives the same bits as its built-in twin cpu-ref on generated cases; the host
 * catches each buffer violation with its own error code; the resolver refuses what it cannot
 * load with one sentence. KVF_TEST_PLUGIN names tests/plugins/misbehaving.c's library. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/spec.h"

static const char *plugin_path(void) {
    const char *p = getenv("KVF_TEST_PLUGIN");
    return p && *p ? p : NULL;
}

static const kvf_kernel *resolve_one(const char *name) {
    char spec[4200];
    snprintf(spec, sizeof spec, "%s:%s", plugin_path(), name);
    const kvf_kernel *k[4];
    size_t n = 0;
    kvf_error err = {0};
    CHECK_OK(kvf_kernel_resolve(spec, NULL, k, 4, &n, &err), &err);
    CHECK_INT_EQ(n, 1);
    return n == 1 ? k[0] : NULL;
}

static int build(uint64_t seed, kvf_case *c) {
    kvf_random_opts ro;
    kvf_random_opts_default(&ro);
    ro.max_work = 1 << 17;
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_spec s;
    if (kvf_spec_random(&s, seed, &ro, NULL)) return -1;
    int rc = kvf_case_build(c, &s, &lim, NULL);
    kvf_spec_free(&s);
    return rc;
}

static void test_twin_bit_identical(void) {
    if (!plugin_path()) CHECK_SKIP("KVF_TEST_PLUGIN is not set");
    const kvf_kernel *twin = resolve_one("twin");
    const kvf_kernel *ref = kvf_kernel_find("cpu-ref");
    if (!twin || !ref) return;
    void *ts = NULL, *rs = NULL;
    kvf_error err = {0};
    CHECK_OK(kvf_kernel_create(twin, &ts, &err), &err);
    CHECK_OK(kvf_kernel_create(ref, &rs, &err), &err);
    int compared = 0;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        kvf_case c;
        if (build(seed, &c)) continue;
        const size_t no = (size_t)kvf_case_o_elems(&c) + 1, nl = (size_t)kvf_case_lse_elems(&c) + 1;
        kvf_bf16 *o1 = calloc(no, 2), *o2 = calloc(no, 2);
        float *l1 = calloc(nl, 4), *l2 = calloc(nl, 4);
        int r1 = kvf_kernel_run(twin, ts, &c, o1, l1, &err);
        int r2 = kvf_kernel_run(ref, rs, &c, o2, l2, &err);
        CHECK_INT_EQ(r1, r2);
        if (r1 == 0 && r2 == 0) {
            compared++;
            if (memcmp(o1, o2, (no - 1) * 2) || memcmp(l1, l2, (nl - 1) * 4))
                CHECK_FAIL_AT("seed %llu: the plugin twin and cpu-ref differ",
                              (unsigned long long)seed);
        }
        free(o1), free(o2), free(l1), free(l2);
        kvf_case_free(&c);
    }
    CHECK(compared >= 250);
    kvf_kernel_destroy(twin, ts);
    kvf_kernel_destroy(ref, rs);
    kvf_kernel_free(twin);
}

/* Each misbehaving kernel, run in this process on a small case, gives its error code. */
static void test_host_catches_violations(void) {
    if (!plugin_path()) CHECK_SKIP("KVF_TEST_PLUGIN is not set");
    static const struct {
        const char *name;
        int code;
        const char *words;
    } cases[] = {
        {"unwritten", KVF_EUNWRITTEN, "unwritten"},
        {"oob", KVF_EOOBWRITE, "outside o: byte 7 past its end"},
        {"input-mod", KVF_EINPUTMOD, "input q"},
        {"error", KVF_EKERNEL, "deliberate failure"},
        {"false-support", KVF_EKERNEL, "claims support it lacks"},
        {"nan", 0, NULL},
    };
    kvf_case c;
    uint64_t seed = 1;
    while (build(seed, &c) || kvf_case_o_elems(&c) == 0)
        seed++;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const kvf_kernel *k = resolve_one(cases[i].name);
        if (!k) continue;
        void *st = NULL;
        kvf_error err = {0};
        CHECK_OK(kvf_kernel_create(k, &st, &err), &err);
        const size_t no = (size_t)kvf_case_o_elems(&c), nl = (size_t)kvf_case_lse_elems(&c);
        kvf_bf16 *o = calloc(no, 2);
        float *l = calloc(nl, 4);
        int rc = kvf_kernel_run(k, st, &c, o, l, &err);
        if (rc != cases[i].code)
            CHECK_FAIL_AT("%s: code %d (%s), expected %d", cases[i].name, rc, err.msg,
                          cases[i].code);
        if (cases[i].words && !strstr(err.msg, cases[i].words))
            CHECK_FAIL_AT("%s: \"%s\" does not say \"%s\"", cases[i].name, err.msg, cases[i].words);
        if (!cases[i].words) CHECK_HEX_EQ(o[0], 0x7fc0); /* NaN is the judge's business */
        free(o), free(l);
        kvf_kernel_destroy(k, st);
        kvf_kernel_free(k);
    }
    kvf_case_free(&c);
}

static void test_supports_is_asked_in_a_probe(void) {
    if (!plugin_path()) CHECK_SKIP("KVF_TEST_PLUGIN is not set");
    const kvf_kernel *k = resolve_one("groups");
    if (!k) return;
    kvf_plugin_shape s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.num_kv_heads = 2;
    s.head_dim = 64;
    s.page_size = 16;
    for (int g = 1; g <= 16; g++) {
        s.num_qo_heads = 2 * g;
        char why[160] = "";
        int want = g <= 6 || g == 8;
        CHECK_INT_EQ(kvf_kernel_supports(k, &s, why, sizeof why), want);
        if (!want) CHECK(strstr(why, "not dispatched") != NULL);
        /* asked again: from the memo, same answer */
        CHECK_INT_EQ(kvf_kernel_supports(k, &s, NULL, 0), want);
    }
    kvf_kernel_free(k);
}

static void test_resolve_errors(void) {
    const kvf_kernel *k[4];
    size_t n = 0;
    kvf_error err = {0};
    CHECK_INT_EQ(kvf_kernel_resolve("no-such-kernel", NULL, k, 4, &n, &err), KVF_ENOTFOUND);
    CHECK(strstr(err.msg, "unknown kernel") != NULL);
    CHECK_INT_EQ(kvf_kernel_resolve("/nonexistent/lib.so", NULL, k, 4, &n, &err), KVF_ENOTFOUND);
    CHECK(strstr(err.msg, "No such file") != NULL);
    if (plugin_path()) {
        char spec[4200];
        snprintf(spec, sizeof spec, "%s:nope", plugin_path());
        CHECK_INT_EQ(kvf_kernel_resolve(spec, NULL, k, 4, &n, &err), KVF_ENOTFOUND);
        CHECK(strstr(err.msg, "has no kernel nope") != NULL);
        CHECK_INT_EQ(kvf_kernel_resolve(plugin_path(), NULL, k, 4, &n, &err), KVF_ELIMIT);
        CHECK_INT_EQ(n, 0); /* nothing half-resolved is left behind */
    }
}

static const check_test tests[] = {
    {"twin_bit_identical", test_twin_bit_identical},
    {"host_catches_violations", test_host_catches_violations},
    {"supports_is_asked_in_a_probe", test_supports_is_asked_in_a_probe},
    {"resolve_errors", test_resolve_errors},
    {NULL, NULL},
};

CHECK_MAIN(tests)
