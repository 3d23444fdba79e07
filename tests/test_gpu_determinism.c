/* GPU tests, determinism: the `cuda` and `cuda-naive` kernels give the same bits twice on one
 * state (cached pool and plan) and once on a fresh one, on generated cases long enough for
 * many splits. Skips (exit 77) when no usable CUDA device is present. */
#include "gpu_fixtures.h"

static void test_same_bits_twice(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    const char *names[2] = {"cuda", "cuda-naive"};
    kvf_random_opts ro;
    random_opts(&ro);
    ro.max_tokens = 2048; /* longer: more splits, more chances for a race to show */
    kvf_limits lim;
    kvf_limits_default(&lim);
    long n = env_long("KVF_GPU_CASES", GPU_CASES_DEFAULT, 1, 100000000) / 50;
    if (n < 4) n = 4;
    for (int k = 0; k < 2; k++) {
        const kvf_kernel *kern = kvf_kernel_find(names[k]);
        CHECK(kern != NULL);
        if (!kern) return;
        kvf_error err = {0};
        void *st1 = NULL, *st2 = NULL;
        CHECK_OK(kvf_kernel_create(kern, &st1, &err), &err);
        CHECK_OK(kvf_kernel_create(kern, &st2, &err), &err);
        if (!st1 || !st2) return;
        for (long i = 0; i < n; i++) {
            kvf_spec spec;
            kvf_case c;
            memset(&c, 0, sizeof c);
            uint64_t seed = GPU_SEED_BASE + 0x100000 + (uint64_t)i;
            if (kvf_spec_random(&spec, seed, &ro, &err) || kvf_case_build(&c, &spec, &lim, &err)) {
                CHECK_FAIL_AT("seed 0x%llx does not build: %s", (unsigned long long)seed, err.msg);
                kvf_spec_free(&spec);
                continue;
            }
            run_outputs out[3];
            for (int r = 0; r < 3; r++)
                out[r] = outputs_for(&c);
            /* Twice on one state (cached pool and plan), once on a fresh one. */
            CHECK_OK(kvf_kernel_run(kern, st1, &c, out[0].o, out[0].lse, &err), &err);
            CHECK_OK(kvf_kernel_run(kern, st1, &c, out[1].o, out[1].lse, &err), &err);
            CHECK_OK(kvf_kernel_run(kern, st2, &c, out[2].o, out[2].lse, &err), &err);
            for (int r = 1; r < 3; r++) {
                if (!outputs_same_bits(&out[0], &out[r]))
                    CHECK_FAIL_AT("%s: seed 0x%llx gives different bits on run %d", names[k],
                                  (unsigned long long)seed, r + 1);
            }
            for (int r = 0; r < 3; r++)
                outputs_free(&out[r]);
            kvf_case_free(&c);
            kvf_spec_free(&spec);
        }
        kvf_kernel_destroy(kern, st1);
        kvf_kernel_destroy(kern, st2);
    }
    printf("  %ld cases x 2 kernels, 3 runs each\n", n);
}

static const check_test tests[] = {
    {"same_bits_twice", test_same_bits_twice},
    {NULL, NULL},
};

CHECK_MAIN(tests)
