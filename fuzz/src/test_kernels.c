/* Deliberately broken kernels for kvfuzz's own tests (test_kernels.h). Each wraps cpu-ref so
 * that, away from its trigger, it is a correct kernel and passes every rule: a test then shows
 * that the fuzzers find the trigger, not that they flag everything. */
#include "kvfuzz/test_kernels.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const kvf_kernel *reference(void) {
    return kvf_kernel_find("cpu-ref");
}

static int run_reference(const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    const kvf_kernel *k = reference();
    if (!k) return kvf_error_set(err, KVF_ENOTFOUND, "the cpu-ref kernel is not registered");
    return kvf_kernel_run_once(k, c, o, lse, err);
}

/* The planted bug: the kernel believes every partly filled last page holds one more token. */
static int planted_run(void *state, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    (void)state;
    kvf_case wrong = *c;
    int32_t *lens = malloc((size_t)(c->batch_size ? c->batch_size : 1) * sizeof *lens);
    if (!lens) return kvf_error_set(err, KVF_ENOMEM, "test-planted: out of memory");
    for (int32_t b = 0; b < c->batch_size; b++) {
        int32_t last = c->kv_last_page_len[b];
        lens[b] = (last > 0 && last < c->page_size) ? last + 1 : last;
    }
    wrong.kv_last_page_len = lens;
    int rc = run_reference(&wrong, o, lse, err);
    free(lens);
    return rc;
}

static int has_length(const kvf_case *c, int64_t len) {
    for (int32_t b = 0; b < c->batch_size; b++)
        if (kvf_case_seq_len(c, b) == len) return 1;
    return 0;
}

static int crash_run(void *state, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    (void)state;
    if (has_length(c, 0)) {
        /* An out-of-bounds store far from any mapping, as a kernel indexing past a zero-length
         * request would do. volatile keeps the compiler from proving anything about it. */
        volatile uintptr_t address = 16;
        *(volatile int32_t *)address = 1;
    }
    return run_reference(c, o, lse, err);
}

static int hang_run(void *state, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    (void)state;
    if (has_length(c, 1))
        for (;;) { /* a spin on a flag nobody sets, like a merge waiting for a missing split */
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
    return run_reference(c, o, lse, err);
}

/* Checks what a kernel may assume about its input: every page outside the resident list reads
 * as zero, also in a worker process that has run other cases before (a page left over from an
 * earlier case would show here). Scans the whole pool: for small test cases only. */
static int pool_check_run(void *state, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    (void)state;
    const int64_t pe = kvf_case_page_elems(c);
    int64_t next = 0; /* index into the ascending resident list */
    for (int64_t p = 0; p < c->num_pages; p++) {
        while (next < c->num_resident_pages && c->resident_pages[next] < p)
            next++;
        if (next < c->num_resident_pages && c->resident_pages[next] == p) continue;
        for (int64_t i = 0; i < pe; i++)
            if (c->k_cache[p * pe + i] || c->v_cache[p * pe + i])
                return kvf_error_set(err, KVF_EINVAL,
                                     "test-pool-check: page %lld is not resident but holds data "
                                     "at element %lld",
                                     (long long)p, (long long)i);
    }
    return run_reference(c, o, lse, err);
}

static const kvf_kernel test_kernels[] = {
    {.name = "test-planted",
     .description = "test only: cpu-ref reading one slot past each partly filled last page",
     .device = KVF_DEVICE_CPU,
     .models = "B03",
     .run = planted_run},
    {.name = "test-crash",
     .description = "test only: cpu-ref that segfaults on cases with an empty sequence",
     .device = KVF_DEVICE_CPU,
     .models = "B04",
     .run = crash_run},
    {.name = "test-hang",
     .description = "test only: cpu-ref that never returns on cases with a one-token sequence",
     .device = KVF_DEVICE_CPU,
     .models = "B07",
     .run = hang_run},
    {.name = "test-pool-check",
     .description = "test only: cpu-ref that fails if a page outside the resident list holds data",
     .device = KVF_DEVICE_CPU,
     .models = "",
     .run = pool_check_run},
};

size_t kvf_test_kernel_count(void) {
    return sizeof test_kernels / sizeof test_kernels[0];
}

const kvf_kernel *kvf_test_kernel_at(size_t i) {
    return i < kvf_test_kernel_count() ? &test_kernels[i] : NULL;
}

const kvf_kernel *kvf_fuzz_kernel_find(const char *name) {
    const kvf_kernel *k = kvf_kernel_find(name);
    if (k || strncmp(name, "test-", 5) != 0) return k;
    for (size_t i = 0; i < kvf_test_kernel_count(); i++)
        if (strcmp(test_kernels[i].name, name) == 0) return &test_kernels[i];
    return NULL;
}
