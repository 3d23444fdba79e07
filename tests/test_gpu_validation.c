/* GPU tests, input validation: the `cuda` and `cuda-naive` kernels refuse a case whose page
 * ids, last page lengths, indptr, head counts or head dim they cannot take, each with its own
 * error and words, and still run after. Skips (exit 77) when no usable CUDA device is present. */
#include "gpu_fixtures.h"

/* ---- validation -------------------------------------------------------------------------- */

static void expect_error(void *st, const kvf_kernel *k, const kvf_case *c, int code,
                         const char *needle) {
    kvf_error err = {0};
    size_t no = (size_t)kvf_case_o_elems(c) + 1, nl = (size_t)kvf_case_lse_elems(c) + 1;
    kvf_bf16 *o = malloc(no * sizeof *o);
    float *lse = malloc(nl * sizeof *lse);
    int rc = kvf_kernel_run(k, st, c, o, lse, &err);
    if (rc != code)
        CHECK_FAIL_AT("%s: expected %s, got %d (%s)", k->name, kvf_errname(code), rc, err.msg);
    else
        CHECK_STR_CONTAINS(err.msg, needle);
    free(o);
    free(lse);
}

static void test_validation(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    kvf_error err = {0};
    kvf_spec spec;
    kvf_case c;
    memset(&c, 0, sizeof c);
    kvf_limits lim;
    kvf_limits_default(&lim);
    CHECK_OK(kvf_spec_preset(&spec, "mixed-lengths", 3, &err), &err);
    const int failures_before = check_failures;
    CHECK_OK(kvf_case_build(&c, &spec, &lim, &err), &err);
    if (check_failures != failures_before) return;
    const char *names[2] = {"cuda", "cuda-naive"};
    for (int k = 0; k < 2; k++) {
        const kvf_kernel *kern = kvf_kernel_find(names[k]);
        void *st = NULL;
        CHECK_OK(kvf_kernel_create(kern, &st, &err), &err);
        if (!st) return;
        int32_t saved_idx = c.kv_indices[0];
        c.kv_indices[0] = (int32_t)c.num_pages;
        expect_error(st, kern, &c, KVF_EINVAL, "kv_indices[0]");
        c.kv_indices[0] = saved_idx;

        int32_t saved_last = c.kv_last_page_len[0];
        c.kv_last_page_len[0] = c.page_size + 1;
        expect_error(st, kern, &c, KVF_EINVAL, "kv_last_page_len[0]");
        c.kv_last_page_len[0] = saved_last;

        int32_t saved_ip = c.kv_indptr[1];
        c.kv_indptr[1] = c.kv_indptr[2] + 1;
        expect_error(st, kern, &c, KVF_EINVAL, "kv_indptr");
        c.kv_indptr[1] = saved_ip;

        int32_t hq = c.num_qo_heads, hk = c.num_kv_heads;
        c.num_kv_heads = 3; /* 20 % 3 != 0 */
        expect_error(st, kern, &c, KVF_EINVAL, "multiple");
        c.num_kv_heads = 1, c.num_qo_heads = 17; /* group 17: memory layout still fits q */
        expect_error(st, kern, &c, KVF_EUNSUPPORTED, "group 17");
        c.num_qo_heads = hq, c.num_kv_heads = hk;

        int32_t d = c.head_dim;
        c.head_dim = 96;
        expect_error(st, kern, &c, KVF_EUNSUPPORTED, "head_dim 96");
        c.head_dim = d;

        /* Still a working state after rejected inputs. */
        kvf_bf16 *o = malloc((size_t)kvf_case_o_elems(&c) * sizeof *o);
        float *lse = malloc((size_t)kvf_case_lse_elems(&c) * sizeof *lse);
        CHECK_OK(kvf_kernel_run(kern, st, &c, o, lse, &err), &err);
        free(o);
        free(lse);
        kvf_kernel_destroy(kern, st);
    }
    kvf_case_free(&c);
    kvf_spec_free(&spec);
}

static const check_test tests[] = {
    {"validation", test_validation},
    {NULL, NULL},
};

CHECK_MAIN(tests)
