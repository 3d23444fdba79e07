/* GPU tests, determinism: the `cuda` and `cuda-naive` kernels give the same bits twice on one
 * state (cached pool and plan) and once on a fresh one, on generated cases long enough for
 * many splits; the FP8 split kernel's f16 scores give the bits of its bf16 ones. Skips (exit
 * 77) when no usable CUDA device is present. */
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

/* The rule of kernels/cuda/decode.cuh ("The scores in f16") for the CTAs of sequence b and KV
 * head hk: every head row's nonzero q elements within 30 binades of the largest, scaled by
 * 2^-s (s = that exponent - 15) into -86 <= s <= 88. -1 where the kernel never takes the path
 * (D = 256, G > 8, keys not e4m3). */
static int f16_scores_apply(const kvf_case *c, int b, int hk) {
    const int G = c->num_qo_heads / c->num_kv_heads, D = c->head_dim;
    if (c->quant.k_dtype != KVF_KV_E4M3 || D > 128 || G > 8) return -1;
    for (int g = 0; g < G; g++) {
        const kvf_bf16 *row = c->q + ((int64_t)b * c->num_qo_heads + hk * G + g) * D;
        int emin = 255, emax = 0;
        for (int d = 0; d < D; d++) {
            const int mag = row[d] & 0x7fff;
            if (!mag) continue;
            if (mag >> 7 < emin) emin = mag >> 7;
            if (mag >> 7 > emax) emax = mag >> 7;
        }
        const int s = emax - 127 - 15;
        if (emax >= emin && (emin < emax - 29 || s < -86 || s > 88)) return 0;
    }
    return 1;
}

/* Sets q element d of row (b, hq) to +-2^e (biased exponent e, 1..254). */
static void set_q_pow2(kvf_case *c, int b, int hq, int d, int e, int negative) {
    c->q[((int64_t)b * c->num_qo_heads + hq) * c->head_dim + d] =
        (kvf_bf16)((negative ? 0x8000 : 0) | (e << 7));
}

/* Moves row (b, hq)'s nonzero elements so that the largest sits at biased exponent `top`
 * (exact: a power of two times each, all staying normal). Returns 0 when the row cannot. */
static int shift_row_to(kvf_case *c, int b, int hq, int top) {
    kvf_bf16 *row = c->q + ((int64_t)b * c->num_qo_heads + hq) * c->head_dim;
    int emin = 255, emax = 0;
    for (int d = 0; d < c->head_dim; d++) {
        const int e = (row[d] & 0x7fff) >> 7;
        if (!(row[d] & 0x7fff)) continue;
        if (e == 0 || e == 255) return 0;
        if (e < emin) emin = e;
        if (e > emax) emax = e;
    }
    if (emax < emin || emin + top - emax < 1 || top > 254) return 0;
    for (int d = 0; d < c->head_dim; d++)
        if (row[d] & 0x7fff) row[d] = (kvf_bf16)(row[d] + (top - emax) * 128);
    return 1;
}

/* The FP8 split kernel's f16 scores (decode.cuh) give the bits of its bf16 scores, which
 * KVF_CUDA_FP8_BF16_SCORES=1 forces: on generated FP8 cases, and on rows edited to sit on each
 * edge of the rule (30 binades of range, and the smallest and largest scale). */
static void test_fp8_f16_scores_same_bits(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    const kvf_kernel *kern = kvf_kernel_find("cuda");
    CHECK(kern != NULL);
    if (!kern) return;
    kvf_random_opts ro;
    random_opts(&ro);
    ro.quant = 1;
    ro.kv_dtypes = KVF_KV_DTYPES_FP8;
    kvf_limits lim;
    kvf_limits_default(&lim);
    long n = env_long("KVF_GPU_CASES", GPU_CASES_DEFAULT, 1, 100000000) / 10;
    if (n < 24) n = 24;
    kvf_error err = {0};
    void *st_f16 = NULL, *st_bf16 = NULL;
    CHECK_OK(kvf_kernel_create(kern, &st_f16, &err), &err);
    CHECK_OK(kvf_kernel_create(kern, &st_bf16, &err), &err);
    if (!st_f16 || !st_bf16) return;
    long taken = 0, refused = 0, edited = 0;
    for (long i = 0; i < n; i++) {
        kvf_spec spec;
        kvf_case c;
        memset(&c, 0, sizeof c);
        const uint64_t seed = GPU_SEED_BASE + 0x200000 + (uint64_t)i;
        if (kvf_spec_random(&spec, seed, &ro, &err) || kvf_case_build(&c, &spec, &lim, &err)) {
            CHECK_FAIL_AT("seed 0x%llx does not build: %s", (unsigned long long)seed, err.msg);
            kvf_spec_free(&spec);
            continue;
        }
        /* Edges, on the first head of sequence 0: 29 binades (taken) or 30 (refused) below the
         * largest element; the largest at s = -86 or 88 (taken) or one past (refused). */
        const int D = c.head_dim;
        int ok = 1;
        switch (c.batch_size > 0 ? i % 6 : 0) { /* no row to edit without a sequence */
        case 1:
        case 2:
            ok = shift_row_to(&c, 0, 0, 127 + 15);
            set_q_pow2(&c, 0, 0, D - 1, 127 + 15, 0);
            set_q_pow2(&c, 0, 0, 0, 127 + 15 - (i % 6 == 1 ? 29 : 30), 1);
            break;
        case 3:
        case 4:
            ok = shift_row_to(&c, 0, 0, i % 6 == 3 ? 127 + 15 - 86 : 127 + 15 - 87);
            break;
        case 5:
            ok = shift_row_to(&c, 0, 0, 127 + 15 + 88 + (i % 12 == 5));
            break;
        }
        edited += i % 6 != 0 && ok;
        for (int b = 0; b < c.batch_size; b++)
            for (int hk = 0; hk < c.num_kv_heads; hk++) {
                const int a = f16_scores_apply(&c, b, hk);
                taken += a == 1, refused += a == 0;
            }
        run_outputs out[2] = {outputs_for(&c), outputs_for(&c)};
        CHECK_OK(kvf_kernel_run(kern, st_f16, &c, out[0].o, out[0].lse, &err), &err);
        setenv("KVF_CUDA_FP8_BF16_SCORES", "1", 1);
        CHECK_OK(kvf_kernel_run(kern, st_bf16, &c, out[1].o, out[1].lse, &err), &err);
        unsetenv("KVF_CUDA_FP8_BF16_SCORES");
        if (!outputs_same_bits(&out[0], &out[1]))
            CHECK_FAIL_AT("seed 0x%llx (edit %ld): the f16 scores give other bits than bf16's",
                          (unsigned long long)seed, i % 6);
        outputs_free(&out[0]);
        outputs_free(&out[1]);
        kvf_case_free(&c);
        kvf_spec_free(&spec);
    }
    kvf_kernel_destroy(kern, st_f16);
    kvf_kernel_destroy(kern, st_bf16);
    printf("  %ld FP8 cases (%ld edited): %ld (sequence, KV head) pairs in f16, %ld refused\n", n,
           edited, taken, refused);
    /* Both sides of the rule ran, or the comparison proved nothing. */
    CHECK(taken > 0);
    CHECK(refused > 0);
}

static const check_test tests[] = {
    {"same_bits_twice", test_same_bits_twice},
    {"fp8_f16_scores_same_bits", test_fp8_f16_scores_same_bits},
    {NULL, NULL},
};

CHECK_MAIN(tests)
