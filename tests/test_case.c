/* Unit test of the case model's validation (core/src/case.c: kvf_case_alloc,
 * kvf_case_validate, kvf_case_seq_len) on a hand-made case: shared pages accepted, a decreasing
 * kv_indptr, an index past the pool and a non-finite sm_scale each rejected naming it, and a
 * pool past its limit refused at allocation. */
#include "spec_fixtures.h"

static void test_validate_hand_made(void) {
    kvf_limits lim = limits();
    kvf_case c;
    kvf_error err = {0};
    CHECK_OK(kvf_case_alloc(&c, 4, 2, 8, 4, 2, 3, 5, &lim, &err), &err);
    c.kv_indptr[1] = 2;
    c.kv_indptr[2] = 3;
    c.kv_indices[0] = 4;
    c.kv_indices[1] = 0;
    c.kv_indices[2] = 0; /* shared page */
    c.kv_last_page_len[0] = 4;
    c.kv_last_page_len[1] = 1;
    CHECK_OK(kvf_case_validate(&c, &lim, &err), &err);
    CHECK_INT_EQ(kvf_case_seq_len(&c, 0), 8);
    CHECK_INT_EQ(kvf_case_seq_len(&c, 1), 1);
    c.kv_indptr[1] = 4;
    CHECK_INT_EQ(kvf_case_validate(&c, &lim, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "kv_indptr decreases");
    c.kv_indptr[1] = 2;
    c.kv_indices[2] = 5;
    CHECK_INT_EQ(kvf_case_validate(&c, &lim, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "kv_indices[2] = 5");
    c.kv_indices[2] = 0;
    c.sm_scale = INFINITY;
    CHECK_INT_EQ(kvf_case_validate(&c, &lim, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "sm_scale");
    kvf_case_free(&c);
    lim.max_pool_bytes = 1024;
    CHECK_INT_EQ(kvf_case_alloc(&c, 4, 2, 8, 4, 2, 3, 1000, &lim, &err), KVF_ELIMIT);
    CHECK_STR_CONTAINS(err.msg, "limit");
    kvf_case_free(&c);
}

static const check_test tests[] = {
    {"validate_hand_made", test_validate_hand_made},
    {NULL, NULL},
};

CHECK_MAIN(tests)
