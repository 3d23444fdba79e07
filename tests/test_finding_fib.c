/* A finding run again for a FlashInfer-Bench export (kvfuzz/finding_fib.h): a correct kernel
 * passes every rule, a mutant fails strict, FIB's check fails a correct kernel on an empty
 * sequence for the wrong reason, a crashing kernel is a run-level finding; and the extra object
 * a trace carries. */
#include "check.h"
#include "kvfuzz/finding_fib.h"
#include "kvfuzz/test_kernels.h"

/* Runs kernel `name` on preset `preset` (in a worker unless in_process) into *x. */
static void rerun(const char *name, const char *preset, int in_process, kvf_spec *s, kvf_case *c,
                  kvf_finding_rerun *x) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(s, preset, 1, &err), &err);
    CHECK_OK(kvf_case_build(c, s, &lim, &err), &err);
    const kvf_kernel *k = kvf_fuzz_kernel_find(name);
    CHECK(k != NULL);
    kvf_runner *r = NULL;
    kvf_runner_opts ro = {k, lim, 30, 0, in_process, 1};
    CHECK_OK(kvf_runner_create(&r, &ro, &err), &err);
    kvf_rule rules[KVF_FINDING_FIB_RULES];
    kvf_finding_fib_rules(rules);
    CHECK(strcmp(rules[0].name, "strict") == 0 && strcmp(rules[2].name, "fib") == 0);
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    oo.threads = 2;
    memset(x, 0, sizeof *x);
    CHECK_OK(kvf_finding_rerun_run(x, r, c, rules, &oo, "f.kvfz", &err), &err);
    kvf_runner_destroy(r);
}

static void test_correct_kernel(void) {
    kvf_spec s;
    kvf_case c;
    kvf_finding_rerun x;
    rerun("cpu-ref", "seed-h20kv4", 1, &s, &c, &x);
    CHECK(x.res.status == KVF_RUN_OK && x.have_oracle);
    kvf_finding_fib_view v;
    kvf_finding_fib_view_of(&x, &c, &v);
    CHECK_STR_EQ(v.strict, "pass");
    CHECK_STR_EQ(v.fa, "pass");
    CHECK_STR_EQ(v.fib, "pass");
    CHECK(!v.fib_fails && !v.kvfuzz_fails && !v.wrong_reason && !v.empty_seq);
    CHECK_STR_EQ(v.sentence, "nothing to reproduce (every rule passes)");
    json_t *report = json_pack("{s:s}", "class", "o-tolerance");
    s.has_origin = 1;
    snprintf(s.origin.definition, sizeof s.origin.definition, "gqa_paged_decode_h20_kv4_d128_ps64");
    snprintf(s.origin.workload_uuid, sizeof s.origin.workload_uuid, "w9");
    json_t *e = kvf_finding_fib_extra("f.kvfz", "cpu-ref", report, &s, &x);
    CHECK_STR_EQ(json_string_value(json_object_get(e, "finding")), "f.kvfz");
    CHECK_STR_EQ(json_string_value(json_object_get(e, "class")), "none");
    CHECK_STR_EQ(json_string_value(json_object_get(e, "report_class")), "o-tolerance");
    CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(e, "origin"), "workload_uuid")),
                 "w9");
    CHECK_INT_EQ(strlen(json_string_value(json_object_get(e, "signature_hash"))), 16);
    json_t *verdicts = json_object_get(e, "verdicts");
    CHECK_INT_EQ(json_array_size(verdicts), 3);
    CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(verdicts, 2), "rule")), "fib");
    CHECK(json_is_true(json_object_get(json_array_get(verdicts, 0), "pass")));
    CHECK(json_is_null(json_object_get(e, "attribution")));
    CHECK(json_object_get(json_object_get(e, "ulp"), "o_max_ulps") != NULL);
    json_decref(e);
    json_decref(report);
    kvf_finding_rerun_free(&x);
    kvf_case_free(&c);
    kvf_spec_free(&s);
}

/* A mutant's defect: strict or fa fails it; FIB's check sees some defects, misses others, and
 * fails a case with an empty sequence whatever the kernel does. */
static void test_mutant(void) {
    static const struct {
        const char *kernel, *preset;
        int fib_fails, wrong_reason;
        const char *sentence;
    } runs[] = {
        {"cpu-splitkv/mut=scale-twice", "seed-h20kv4", 1, 0, "FIB reproduces it"},
        {"cpu-splitkv/mut=trunc-store", "tail-nan", 0, 0, "FIB will not see it (fib passes)"},
        {"cpu-splitkv/mut=trunc-store", "mixed-lengths", 1, 1,
         "FIB flags it for the wrong reason (its check fails the -inf lse of an empty sequence, "
         "which is correct, in every kernel); the defect itself passes FIB's check"},
    };
    for (int i = 0; i < 3; i++) {
        kvf_spec s;
        kvf_case c;
        kvf_finding_rerun x;
        rerun(runs[i].kernel, runs[i].preset, 1, &s, &c, &x);
        kvf_finding_fib_view v;
        kvf_finding_fib_view_of(&x, &c, &v);
        CHECK(x.res.status == KVF_RUN_OK && v.kvfuzz_fails);
        CHECK_INT_EQ(v.fib_fails, runs[i].fib_fails);
        CHECK_INT_EQ(v.wrong_reason, runs[i].wrong_reason);
        CHECK_STR_EQ(v.fib, !runs[i].fib_fails ? "pass"
                            : runs[i].wrong_reason
                                ? "benign"
                                : kvf_finding_class_name(x.out.verdicts[2].finding));
        CHECK_STR_EQ(v.sentence, runs[i].sentence);
        kvf_finding_rerun_free(&x);
        kvf_case_free(&c);
        kvf_spec_free(&s);
    }
}

/* cpu-ref is right on empty sequences; FIB's check fails their -inf lse all the same. */
static void test_wrong_reason(void) {
    kvf_spec s;
    kvf_case c;
    kvf_finding_rerun x;
    rerun("cpu-ref", "empty-sequences", 1, &s, &c, &x);
    kvf_finding_fib_view v;
    kvf_finding_fib_view_of(&x, &c, &v);
    CHECK_STR_EQ(v.strict, "pass");
    CHECK_STR_EQ(v.fib, "benign");
    CHECK(v.wrong_reason && v.empty_seq && v.fib_fails && !v.kvfuzz_fails);
    CHECK_STR_EQ(v.sentence, "FIB flags it for the wrong reason (its check fails the -inf lse of "
                             "an empty sequence, which is correct, in every kernel)");
    kvf_finding_rerun_free(&x);
    kvf_case_free(&c);
    kvf_spec_free(&s);
}

/* A run without outputs: its class for every rule, no oracle, no verdicts in the extra. */
static void test_crash(void) {
    kvf_spec s;
    kvf_case c;
    kvf_finding_rerun x;
    rerun("test-crash", "empty-sequences", 0, &s, &c, &x);
    CHECK_INT_EQ(x.res.status, KVF_RUN_CRASH);
    CHECK(!x.have_oracle);
    kvf_finding_fib_view v;
    kvf_finding_fib_view_of(&x, &c, &v);
    CHECK_STR_EQ(v.strict, "crash");
    CHECK_STR_EQ(v.fib, "crash");
    CHECK(v.fib_fails && v.kvfuzz_fails && !v.wrong_reason);
    CHECK_STR_EQ(v.sentence, "FIB reproduces it");
    json_t *e = kvf_finding_fib_extra("f.kvfz", "test-crash", NULL, &s, &x);
    CHECK_STR_EQ(json_string_value(json_object_get(e, "class")), "crash");
    CHECK(json_object_get(e, "verdicts") == NULL && json_object_get(e, "report_class") == NULL);
    json_decref(e);
    kvf_finding_rerun_free(&x);
    kvf_case_free(&c);
    kvf_spec_free(&s);
}

static const check_test tests[] = {
    {"correct_kernel", test_correct_kernel},
    {"mutant", test_mutant},
    {"wrong_reason", test_wrong_reason},
    {"crash", test_crash},
    {NULL, NULL},
};

CHECK_MAIN(tests)
