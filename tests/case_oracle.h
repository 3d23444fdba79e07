/* For tests that judge generated cases: builds a case from a spec (the spec is freed) and runs
 * the oracle on it, failing the test with one line when either step fails. Returns 0, or the
 * error code (then nothing is left to free). */
#ifndef KVFUZZ_TESTS_CASE_ORACLE_H
#define KVFUZZ_TESTS_CASE_ORACLE_H

#include "check.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/spec.h"

static inline int kvf_test_case_and_oracle(kvf_spec *s, kvf_case *c, kvf_oracle_result *r) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_error err = {0};
    int rc = kvf_case_build(c, s, &lim, &err);
    kvf_spec_free(s);
    if (rc) {
        CHECK_FAIL_AT("case does not build: %s", err.msg);
        return rc;
    }
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    oo.threads = 2;
    rc = kvf_oracle_run(r, c, &oo, &err);
    if (rc) {
        CHECK_FAIL_AT("oracle failed: %s", err.msg);
        kvf_case_free(c);
    }
    return rc;
}

#endif
