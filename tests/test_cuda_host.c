/* GPU tests of the CUDA buffer host (kernel_host.h, kernels/cuda/host_cuda.cu): test kernel
 * descriptors that leave an output unwritten, write past o, or modify k_cache must each get
 * their own error code with a sentence naming the place; a correct kernel launched as a
 * programmatic dependent must pass; the production `cuda` descriptor passes on the same
 * cases. Each case runs on a small pool (checked whole) and on one of 4 GiB per cache (only the
 * pages the case reads are checked). Two hosts driven in two phases from one thread (submit,
 * then the other's collect) give a plain run's outputs bit for bit, and keep their failures
 * apart. A kernel that traps in `kvfuzz bench`'s checked run ends that run with a sentence
 * naming it (last: the trap loses the context). Skips (exit 77) when no usable CUDA device is
 * present. */
#include <stdint.h>

#include "check.h"
#include "cuda_test_kernels.h"
#include "kvfuzz/bench_session.h"
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

/* Two `cuda` hosts driven as the worker's lanes drive them: each case is submitted before the
 * case ahead of it on the other host is collected. Over generated cases of many shapes every
 * result (code and outputs, bit for bit) equals a plain kvf_host_run's on a third host. Then a
 * kernel that writes into k_cache runs on one host beside `cuda` on the other, collected in
 * either order: only its own collect reports KVF_EINPUTMOD. */
static void test_two_phase(void) {
    char why[256];
    if (!kvf_cuda_available(why, sizeof why)) CHECK_SKIP("%s", why);
    enum { N = 48 };
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_random_opts rnd;
    kvf_random_opts_default(&rnd);
    rnd.max_batch = 12, rnd.max_pages = 40, rnd.max_tokens = 6000;
    rnd.layouts = 0; /* the CUDA buffer host lays out dense buffers only */
    kvf_error err = {0};
    kvf_case cases[N];
    kvf_bf16 *want_o[N], *o[N];
    float *want_lse[N], *lse[N];
    int want_rc[N], n = 0;
    const kvf_plugin_kernel *cuda = kvf_kernel_find("cuda")->desc;
    kvf_host *ref = NULL, *h[2] = {NULL, NULL};
    CHECK_OK(kvf_host_create(cuda, &ref, &err), &err);
    CHECK_OK(kvf_host_create(cuda, &h[0], &err), &err);
    CHECK_OK(kvf_host_create(cuda, &h[1], &err), &err);
    if (!ref || !h[0] || !h[1]) return;
    CHECK_INT_EQ(kvf_host_overlaps(h[0]), 1);
    for (uint64_t seed = 1; n < N && seed < 400; seed++) {
        kvf_spec spec;
        if (kvf_spec_random(&spec, seed, &rnd, &err) ||
            kvf_case_build(&cases[n], &spec, &lim, &err)) {
            kvf_spec_free(&spec);
            continue;
        }
        kvf_spec_free(&spec);
        const size_t no = (size_t)kvf_case_o_elems(&cases[n]) + 1;
        const size_t nl = (size_t)kvf_case_lse_elems(&cases[n]) + 1;
        want_o[n] = calloc(no, 2), o[n] = calloc(no, 2);
        want_lse[n] = calloc(nl, 4), lse[n] = calloc(nl, 4);
        want_rc[n] = kvf_host_run(ref, &cases[n], want_o[n], want_lse[n], &err);
        n++;
    }
    CHECK_INT_EQ(n, N);
    int ran = 0;
    CHECK_INT_EQ(kvf_host_submit(h[0], &cases[0], &err), want_rc[0]);
    for (int i = 1; i <= N; i++) {
        if (i < N) kvf_host_submit(h[i % 2], &cases[i], &err); /* its error comes from collect */
        const int j = i - 1;
        kvf_error_clear(&err);
        const int rc = kvf_host_collect(h[j % 2], o[j], lse[j], &err);
        if (rc != want_rc[j]) {
            CHECK_FAIL_AT("case %d: %s in two phases, %s in one (%s)", j,
                          rc ? kvf_errname(rc) : "0", want_rc[j] ? kvf_errname(want_rc[j]) : "0",
                          err.msg);
            continue;
        }
        if (rc) continue;
        ran++;
        const size_t no = (size_t)kvf_case_o_elems(&cases[j]);
        const size_t nl = (size_t)kvf_case_lse_elems(&cases[j]);
        if (memcmp(o[j], want_o[j], no * 2) || memcmp(lse[j], want_lse[j], nl * 4))
            CHECK_FAIL_AT("case %d: two phases gave other outputs than one run", j);
    }
    if (ran < N / 2) CHECK_FAIL_AT("only %d of %d cases ran", ran, N);

    kvf_host *bad = NULL;
    CHECK_OK(kvf_host_create(&kvf_test_cuda_modify_k, &bad, &err), &err);
    if (bad && want_rc[0] == 0) {
        for (int order = 0; order < 2; order++) {
            CHECK_OK(kvf_host_submit(h[0], &cases[0], &err), &err);
            kvf_host_submit(bad, &cases[0], &err);
            kvf_error_clear(&err);
            if (order == 0) CHECK_INT_EQ(kvf_host_collect(bad, o[1], lse[1], &err), KVF_EINPUTMOD);
            CHECK_OK(kvf_host_collect(h[0], o[0], lse[0], &err), &err);
            CHECK(memcmp(o[0], want_o[0], (size_t)kvf_case_o_elems(&cases[0]) * 2) == 0);
            kvf_error_clear(&err);
            if (order == 1) CHECK_INT_EQ(kvf_host_collect(bad, o[1], lse[1], &err), KVF_EINPUTMOD);
        }
    }
    kvf_host_destroy(bad);
    for (int i = 0; i < n; i++) {
        free(want_o[i]), free(o[i]), free(want_lse[i]), free(lse[i]);
        kvf_case_free(&cases[i]);
    }
    kvf_host_destroy(ref);
    kvf_host_destroy(h[0]);
    kvf_host_destroy(h[1]);
}

/* Graph replay (kvf_host_graph_replay): a run() that synchronizes its stream passes eagerly and
 * cannot be captured, which comes back as the kernel's error naming the CUDA error; the host
 * runs eagerly again afterwards. */
static void test_graph_capture_failure(void) {
    char why[256];
    if (!kvf_cuda_available(why, sizeof why)) CHECK_SKIP("%s", why);
    kvf_spec spec;
    kvf_case c;
    kvf_error err = {0};
    CHECK_OK(build(&c, &spec, 0, &err), &err);
    kvf_host *h = NULL;
    CHECK_OK(kvf_host_create(&kvf_test_cuda_sync, &h, &err), &err);
    kvf_bf16 *o = calloc((size_t)kvf_case_o_elems(&c) + 1, sizeof *o);
    float *lse = calloc((size_t)kvf_case_lse_elems(&c) + 1, sizeof *lse);
    if (h && o && lse) {
        CHECK_OK(kvf_host_run(h, &c, o, lse, &err), &err);
        kvf_error_clear(&err);
        CHECK_INT_EQ(kvf_host_graph_replay(h, &c, &c, o, lse, &err), KVF_EKERNEL);
        CHECK_STR_CONTAINS(err.msg, "could not be captured in a CUDA graph");
        CHECK_STR_CONTAINS(err.msg, "cudaError");
        kvf_error_clear(&err);
        CHECK_OK(kvf_host_run(h, &c, o, lse, &err), &err);
    }
    free(o);
    free(lse);
    kvf_host_destroy(h);
    kvf_case_free(&c);
    kvf_spec_free(&spec);
}

/* A workspace past KVF_PLUGIN_MAX_WORKSPACE_BYTES is the kernel's error, named before anything
 * is allocated (2^64 - 100 bytes would wrap the host's size arithmetic); the host then runs a
 * correct kernel as before. */
static void test_huge_workspace(void) {
    char why[256];
    if (!kvf_cuda_available(why, sizeof why)) CHECK_SKIP("%s", why);
    kvf_error err = {0};
    kvf_spec spec;
    kvf_case c;
    CHECK_OK(build(&c, &spec, 0, &err), &err);
    kvf_host *h = NULL;
    CHECK_OK(kvf_host_create(&kvf_test_cuda_huge_workspace, &h, &err), &err);
    kvf_bf16 *o = calloc((size_t)kvf_case_o_elems(&c), sizeof *o);
    float *lse = calloc((size_t)kvf_case_lse_elems(&c), sizeof *lse);
    for (int round = 0; h && round < 2; round++) {
        kvf_error_clear(&err);
        CHECK_INT_EQ(kvf_host_run(h, &c, o, lse, &err), KVF_EKERNEL);
        CHECK_STR_CONTAINS(err.msg, "asks for a workspace of 18446744073709551516 bytes, over "
                                    "kvfuzz's limit");
    }
    kvf_host_destroy(h);
    h = NULL;
    CHECK_OK(kvf_host_create(&kvf_test_cuda_pdl, &h, &err), &err);
    if (h) CHECK_OK(kvf_host_run(h, &c, o, lse, &err), &err);
    kvf_host_destroy(h);
    free(o);
    free(lse);
    kvf_case_free(&c);
    kvf_spec_free(&spec);
}

/* A kernel that fails on the device during `kvfuzz bench`'s checked run ends the run with a
 * sentence naming the kernel, the workload and the device's error. It runs last: a trap leaves
 * the process's context unusable. */
static void test_bench_device_error(void) {
    char why[256];
    if (!kvf_cuda_available(why, sizeof why)) CHECK_SKIP("%s", why);
    kvf_kernel trap = {0};
    trap.name = kvf_test_cuda_trap.name;
    trap.description = kvf_test_cuda_trap.description;
    trap.device = KVF_DEVICE_CUDA;
    trap.desc = &kvf_test_cuda_trap;
    trap.role = KVF_PLUGIN_ROLE_UNDER_TEST;
    const kvf_kernel *kernels[] = {&trap};
    kvf_bench_settings st = {{20, 4, 128, 64, 0, 0}, 1, 0, 1};
    kvf_bench_workloads w = {0};
    kvf_bench_session *s = NULL;
    kvf_bench_device dev;
    kvf_bench_measure m;
    kvf_error err = {0};
    int rc = kvf_bench_workloads_make(&w, NULL, 2, 256, 1, &err);
    if (!rc) rc = kvf_bench_session_create(&s, kernels, 1, &st, &err);
    if (!rc) rc = kvf_bench_session_start(s, &err);
    if (!rc) rc = kvf_bench_session_prepare(s, &dev, &err);
    CHECK_OK(rc, &err);
    if (!rc && w.count == 1) {
        kvf_error_clear(&err);
        CHECK_INT_EQ(kvf_bench_session_run(s, &w.items[0], 1, &m, &err), KVF_EDEVICE);
        CHECK_STR_CONTAINS(err.msg, "kernel test-trap on workload b2-l256: test-trap failed on "
                                    "the device: ");
        CHECK_STR_CONTAINS(err.msg, "; the run ends there");
    }
    kvf_bench_session_destroy(s);
    kvf_bench_workloads_free(&w);
}

static const check_test tests[] = {
    {"huge_workspace", test_huge_workspace},
    {"violations", test_violations},
    {"graph_capture_failure", test_graph_capture_failure},
    {"unwritten_place", test_unwritten_place},
    {"two_phase", test_two_phase},
    {"bench_device_error", test_bench_device_error}, /* last: it loses the context */
    {NULL, NULL},
};

CHECK_MAIN(tests)
