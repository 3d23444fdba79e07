/* GPU tests, the CUDA buffer host's device pools: page ids past 65536 (64-bit page offsets, a
 * pool over 4 GiB), the pool poison kept between runs, and resident pages staged in batches.
 * Skips (exit 77) when no usable CUDA device is present.
 *
 * Environment: KVF_GPU_CASES scales the generated case counts (default GPU_CASES_DEFAULT). */
#include "gpu_fixtures.h"

/* ---- 64-bit offsets ---------------------------------------------------------------------- */

/* The seed shape with page ids past 65536: page * page_elems (32768 elements) passes 2^31, so
 * a kernel with 32-bit element offsets reads the wrong page (bug class B10). The pool is over
 * 4 GiB per cache on the device. Judged by the oracle under strict. */
static void test_high_page_ids(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    kvf_error err = {0};
    kvf_spec spec;
    kvf_case c;
    memset(&c, 0, sizeof c);
    kvf_limits lim;
    kvf_limits_default(&lim);
    CHECK_OK(kvf_spec_preset(&spec, "seed-h20kv4", 7, &err), &err);
    spec.recipe.table = KVF_TABLE_HIGH_IDS;
    spec.recipe.page_id_base = 65540;
    spec.recipe.poison = KVF_POISON_ALL;
    const int failures_before = check_failures;
    CHECK_OK(kvf_case_build(&c, &spec, &lim, &err), &err);
    if (check_failures != failures_before) return;
    int32_t min_id = INT32_MAX;
    for (int32_t i = 0; i < c.kv_indptr[c.batch_size]; i++)
        if (c.kv_indices[i] < min_id) min_id = c.kv_indices[i];
    CHECK(min_id > 65536);
    CHECK((int64_t)min_id * kvf_case_page_elems(&c) > INT32_MAX);
    const kvf_oracle_opts oo = oracle_on_every_core();
    kvf_oracle_result orc;
    memset(&orc, 0, sizeof orc);
    CHECK_OK(kvf_oracle_run(&orc, &c, &oo, &err), &err);
    kvf_rule strict;
    CHECK_OK(kvf_rule_parse(&strict, "strict", &err), &err);
    kvf_bf16 *o = malloc((size_t)kvf_case_o_elems(&c) * sizeof *o);
    float *lse = malloc((size_t)kvf_case_lse_elems(&c) * sizeof *lse);
    const char *names[2] = {"cuda", "cuda-naive"};
    for (int k = 0; k < 2 && check_failures == failures_before; k++) {
        CHECK_OK(kvf_kernel_run_once(kvf_kernel_find(names[k]), &c, o, lse, &err), &err);
        kvf_verdict v;
        CHECK_OK(kvf_judge(&v, &strict, &c, &orc, o, lse, &err), &err);
        if (!v.pass)
            CHECK_FAIL_AT("%s fails strict with page ids from %d: %s, %lld o violations", names[k],
                          min_id, kvf_finding_class_name(v.finding), (long long)v.o.violations);
    }
    printf("  page ids from %d, pool %.2f GiB per cache\n", min_id,
           (double)c.pool_bytes / (1 << 30));
    free(o);
    free(lse);
    kvf_oracle_result_free(&orc);
    kvf_case_free(&c);
    kvf_spec_free(&spec);
}

/* ---- the poisoned pool across runs ------------------------------------------------------- */

/* The CUDA buffer host keeps its device pools between runs and re-poisons only what the previous
 * run wrote. With KVF_CUDA_VERIFY_POOL the host checks after every upload that no byte outside
 * the pages the current case reads is anything but KVF_HOST_POISON_INPUT, so a stale page of an
 * earlier case (which a kernel reading the wrong page would see as plausible data instead of
 * NaN) fails the run.
 * The sequence mixes a 4 GiB high-id pool, generated cases of every shape and page size, and a
 * case rejected before its upload (which leaves the pools as they were, so the next run must
 * find them clean without refilling them). */
static void test_pool_poison_between_runs(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    setenv("KVF_CUDA_VERIFY_POOL", "1", 1);
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_random_opts ro;
    random_opts(&ro);
    const long n = env_long("KVF_GPU_CASES", GPU_CASES_DEFAULT, 1, 100000000) / 50 + 4;
    const char *names[2] = {"cuda", "cuda-naive"};
    long runs = 0;
    for (int k = 0; k < 2; k++) {
        const kvf_kernel *kern = kvf_kernel_find(names[k]);
        kvf_error err = {0};
        void *st = NULL;
        CHECK_OK(kvf_kernel_create(kern, &st, &err), &err);
        if (!st) break;
        for (long i = -1; i < n; i++) {
            kvf_spec spec;
            kvf_case c;
            memset(&c, 0, sizeof c);
            const uint64_t seed = GPU_SEED_BASE + 0x200000 + (uint64_t)i;
            int rc;
            if (i < 0) { /* first the largest pool, so later cases run inside a larger allocation */
                rc = kvf_spec_preset(&spec, "seed-h20kv4", 7, &err);
                spec.recipe.table = KVF_TABLE_HIGH_IDS;
                spec.recipe.page_id_base = 65540;
            } else {
                rc = kvf_spec_random(&spec, seed, &ro, &err);
            }
            if (rc || kvf_case_build(&c, &spec, &lim, &err)) {
                CHECK_FAIL_AT("case %ld does not build: %s", i, err.msg);
                kvf_spec_free(&spec);
                continue;
            }
            kvf_bf16 *o = malloc(((size_t)kvf_case_o_elems(&c) + 1) * sizeof *o);
            float *lse = malloc(((size_t)kvf_case_lse_elems(&c) + 1) * sizeof *lse);
            if (i == n / 2 && c.batch_size > 0 && c.kv_indptr[c.batch_size] > 0) {
                /* A rejected case between two good ones. */
                int32_t saved = c.kv_indices[0];
                c.kv_indices[0] = -1;
                CHECK(kvf_kernel_run(kern, st, &c, o, lse, &err) == KVF_EINVAL);
                c.kv_indices[0] = saved;
            }
            rc = kvf_kernel_run(kern, st, &c, o, lse, &err);
            if (rc)
                CHECK_FAIL_AT("%s: case %ld (seed 0x%llx, %lld resident pages of %lld): %s",
                              names[k], i, (unsigned long long)seed,
                              (long long)c.num_resident_pages, (long long)c.num_pages, err.msg);
            runs++;
            free(o);
            free(lse);
            kvf_case_free(&c);
            kvf_spec_free(&spec);
        }
        kvf_kernel_destroy(kern, st);
    }
    unsetenv("KVF_CUDA_VERIFY_POOL");
    printf("  %ld runs checked for stale pages\n", runs);
}

/* Resident pages reach the device through a pinned staging buffer, K and V together, in as many
 * batches as the buffer needs. With the buffer shrunk to one or two page pairs
 * (KVF_CUDA_STAGE_BYTES) every case with several resident pages goes up in several batches; its
 * output must equal, bit for bit, the one-batch upload of a default state, and the pools must
 * stay poisoned outside the resident pages (KVF_CUDA_VERIFY_POOL). */
static void test_staging_in_batches(void) {
    char why[256];
    if (gpu_skip_reason(why, sizeof why)) CHECK_SKIP("%s", why);
    const char *names[2] = {"cuda", "cuda-naive"};
    kvf_random_opts ro;
    random_opts(&ro);
    ro.max_tokens = 2048;
    kvf_limits lim;
    kvf_limits_default(&lim);
    const long n = env_long("KVF_GPU_CASES", GPU_CASES_DEFAULT, 1, 100000000) / 100 + 8;
    long batched = 0, most_batches = 0;
    for (int k = 0; k < 2; k++) {
        const kvf_kernel *kern = kvf_kernel_find(names[k]);
        kvf_error err = {0};
        setenv("KVF_CUDA_STAGE_BYTES", "12x", 1);
        void *bad = NULL;
        CHECK_INT_EQ(kvf_kernel_create(kern, &bad, &err), KVF_EINVAL);
        CHECK(strstr(err.msg, "KVF_CUDA_STAGE_BYTES") != NULL);
        unsetenv("KVF_CUDA_STAGE_BYTES");
        void *whole = NULL;
        CHECK_OK(kvf_kernel_create(kern, &whole, &err), &err);
        if (!whole) return;
        for (long i = 0; i < n; i++) {
            kvf_spec spec;
            kvf_case c;
            memset(&c, 0, sizeof c);
            const uint64_t seed = GPU_SEED_BASE + 0x300000 + (uint64_t)i;
            if (kvf_spec_random(&spec, seed, &ro, &err) || kvf_case_build(&c, &spec, &lim, &err)) {
                CHECK_FAIL_AT("seed 0x%llx does not build: %s", (unsigned long long)seed, err.msg);
                kvf_spec_free(&spec);
                continue;
            }
            const long pairs = 1 + i % 2;
            const size_t page_bytes = (size_t)kvf_case_page_elems(&c) * sizeof(kvf_bf16);
            char bytes[32];
            snprintf(bytes, sizeof bytes, "%zu", 2 * page_bytes * (size_t)pairs);
            setenv("KVF_CUDA_STAGE_BYTES", bytes, 1);
            setenv("KVF_CUDA_VERIFY_POOL", "1", 1);
            void *small = NULL;
            CHECK_OK(kvf_kernel_create(kern, &small, &err), &err);
            unsetenv("KVF_CUDA_STAGE_BYTES");
            unsetenv("KVF_CUDA_VERIFY_POOL");
            run_outputs one_batch = outputs_for(&c), batched_out = outputs_for(&c);
            CHECK_OK(kvf_kernel_run(kern, whole, &c, one_batch.o, one_batch.lse, &err), &err);
            if (small)
                CHECK_OK(kvf_kernel_run(kern, small, &c, batched_out.o, batched_out.lse, &err),
                         &err);
            if (small && !outputs_same_bits(&one_batch, &batched_out))
                CHECK_FAIL_AT("%s: seed 0x%llx (%lld resident pages, %ld per batch) differs from "
                              "its one-batch upload",
                              names[k], (unsigned long long)seed, (long long)c.num_resident_pages,
                              pairs);
            const long batches = (long)((c.num_resident_pages + pairs - 1) / pairs);
            if (batches > 1) batched++;
            if (batches > most_batches) most_batches = batches;
            if (small) kvf_kernel_destroy(kern, small);
            outputs_free(&one_batch);
            outputs_free(&batched_out);
            kvf_case_free(&c);
            kvf_spec_free(&spec);
        }
        kvf_kernel_destroy(kern, whole);
    }
    CHECK(batched > 0);
    printf("  %ld cases uploaded in several batches (up to %ld)\n", batched, most_batches);
}

static const check_test tests[] = {
    {"high_page_ids", test_high_page_ids},
    {"pool_poison_between_runs", test_pool_poison_between_runs},
    {"staging_in_batches", test_staging_in_batches},
    {NULL, NULL},
};

CHECK_MAIN(tests)
