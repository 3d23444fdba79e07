/* GPU tests of the CUDA buffer host (kernel_host.h, kernels/cuda/host_cuda.cu): test kernel
 * descriptors that leave an output unwritten, write past o, or modify k_cache must each get
 * their own error code with a sentence naming the place; a correct kernel launched as a
 * programmatic dependent must pass; the production `cuda` descriptor passes on the same
 * cases. Each case runs on a small pool (checked whole) and on one of 4 GiB per cache (only the
 * pages the case reads are checked). Skips (exit 77) when no usable CUDA device is present. */
#include <stdint.h>

#include "check.h"
#include "cuda_test_kernels.h"
#include "kvfuzz/kernel.h"
#include "kvfuzz/kernel_host.h"
#include "kvfuzz/spec.h"

/* small: the mixed-lengths preset (pools of a few pages); large: the seed shape with page ids
 * past 65536 (pools over 4 GiB). */
static int build(kvf_case *c, kvf_spec *spec, int large, kvf_error *err) {
    memset(c, 0, sizeof *c);
    kvf_limits lim;
    kvf_limits_default(&lim);
    int rc = kvf_spec_preset(spec, large ? "seed-h20kv4" : "mixed-lengths", 3, err);
    if (!rc && large) {
        spec->recipe.table = KVF_TABLE_HIGH_IDS;
        spec->recipe.page_id_base = 65540;
    }
    if (!rc) rc = kvf_case_build(c, spec, &lim, err);
    return rc;
}

typedef struct expectation {
    const kvf_plugin_kernel *desc;
    int code;
    const char *needle;
} expectation;

static void run_expect(const expectation *x, const kvf_case *c, const char *what) {
    kvf_error err = {0};
    kvf_host *h = NULL;
    CHECK_OK(kvf_host_create(x->desc, &h, &err), &err);
    if (!h) return;
    kvf_bf16 *o = calloc((size_t)kvf_case_o_elems(c) + 1, sizeof *o);
    float *lse = calloc((size_t)kvf_case_lse_elems(c) + 1, sizeof *lse);
    /* Twice on one host: a failed run must leave the next one judged on its own. */
    for (int round = 0; round < 2; round++) {
        kvf_error_clear(&err);
        int rc = kvf_host_run(h, c, o, lse, &err);
        if (rc != x->code)
            CHECK_FAIL_AT("%s on the %s case, run %d: expected %s, got %s (%s)", x->desc->name,
                          what, round + 1, x->code ? kvf_errname(x->code) : "0",
                          rc ? kvf_errname(rc) : "0", err.msg);
        else if (x->needle)
            CHECK_STR_CONTAINS(err.msg, x->needle);
    }
    /* What the kernel wrote comes back even when a check fails. */
    if (x->desc != kvf_kernel_find("cuda")->desc) CHECK_HEX_EQ(o[0], 0);
    if (x->code == 0 && x->desc == &kvf_test_cuda_pdl) {
        int64_t nonzero = 0;
        for (int64_t i = 0; i < kvf_case_o_elems(c); i++)
            nonzero += o[i] != 0;
        CHECK_INT_EQ(nonzero, 0);
    }
    free(o);
    free(lse);
    kvf_host_destroy(h);
}

static void test_violations(void) {
    char why[256];
    if (!kvf_cuda_available(why, sizeof why)) CHECK_SKIP("%s", why);
    const expectation xs[] = {
        {&kvf_test_cuda_unwritten, KVF_EUNWRITTEN, "o elements unwritten"},
        {&kvf_test_cuda_oob_o, KVF_EOOBWRITE, "outside o: byte 1 past its end"},
        {&kvf_test_cuda_modify_k, KVF_EINPUTMOD, "k_cache at page"},
        {&kvf_test_cuda_pdl, 0, NULL},
        {kvf_kernel_find("cuda")->desc, 0, NULL},
    };
    for (int large = 0; large < 2; large++) {
        kvf_error err = {0};
        kvf_spec spec;
        kvf_case c;
        CHECK_OK(build(&c, &spec, large, &err), &err);
        if (c.batch_size == 0) return;
        printf("  %s case: %lld pages, %.2f MiB per pool\n", large ? "large" : "small",
               (long long)c.num_pages, (double)c.pool_bytes / (1 << 20));
        for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++)
            run_expect(&xs[i], &c, large ? "large" : "small");
        kvf_case_free(&c);
        kvf_spec_free(&spec);
    }
}

/* The unwritten element is named: the last q head of the last sequence. */
static void test_unwritten_place(void) {
    char why[256];
    if (!kvf_cuda_available(why, sizeof why)) CHECK_SKIP("%s", why);
    kvf_error err = {0};
    kvf_spec spec;
    kvf_case c;
    CHECK_OK(build(&c, &spec, 0, &err), &err);
    kvf_host *h = NULL;
    CHECK_OK(kvf_host_create(&kvf_test_cuda_unwritten, &h, &err), &err);
    if (!h) return;
    kvf_bf16 *o = calloc((size_t)kvf_case_o_elems(&c), sizeof *o);
    float *lse = calloc((size_t)kvf_case_lse_elems(&c), sizeof *lse);
    CHECK_INT_EQ(kvf_host_run(h, &c, o, lse, &err), KVF_EUNWRITTEN);
    char want[96];
    snprintf(want, sizeof want, "left %d of %lld o elements unwritten, the first at b %d h %d d 0",
             c.head_dim, (long long)kvf_case_o_elems(&c), c.batch_size - 1, c.num_qo_heads - 1);
    CHECK_STR_CONTAINS(err.msg, want);
    CHECK_HEX_EQ(o[kvf_case_o_elems(&c) - 1], KVF_HOST_POISON_O);
    free(o);
    free(lse);
    kvf_host_destroy(h);
    kvf_case_free(&c);
    kvf_spec_free(&spec);
}

static const check_test tests[] = {
    {"violations", test_violations},
    {"unwritten_place", test_unwritten_place},
    {NULL, NULL},
};

CHECK_MAIN(tests)
