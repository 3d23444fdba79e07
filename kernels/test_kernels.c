/* Deliberately broken kernels for kvfuzz's own tests (kvfuzz/test_kernels.h). They live in the
 * kernels module because they are built on the built-in kernels' internals. Each wraps cpu-ref
 * so that, away from its trigger, it is a correct kernel and passes every rule: a test then
 * shows that the fuzzers find the trigger, not that they flag everything. */
#include "kvfuzz/test_kernels.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "kvfuzz/builtin_kernel.h"
#include "kvfuzz/kernel_host.h"

/* cpu-ref's computation on the host's buffers (these kernels already run inside a host). */
static int run_reference(const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    return kvf__cpu_ref_compute(c, o, lse, err);
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

/* Killed (SIGKILL) the first time it sees a case, and correct on every later run of it, as a
 * worker killed from outside would look to the campaign. The cases seen are remembered as
 * files in the folder KVF_TEST_FLAKY_DIR, which outlives the worker. */
static int flaky_run(void *state, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    (void)state;
    const char *dir = getenv("KVF_TEST_FLAKY_DIR");
    if (dir && *dir) {
        uint64_t h = 1469598103934665603ull;
        const uint8_t *q = (const uint8_t *)c->q;
        for (int64_t i = 0; i < kvf_case_q_elems(c) * 2; i++)
            h = (h ^ q[i]) * 1099511628211ull;
        h ^= (uint64_t)kvf_case_total_tokens(c) * 0x9e3779b97f4a7c15ull;
        char path[4200];
        snprintf(path, sizeof path, "%s/%016llx", dir, (unsigned long long)h);
        FILE *f = fopen(path, "r");
        if (f) {
            fclose(f);
        } else {
            f = fopen(path, "w");
            if (f) fclose(f);
            raise(SIGKILL);
        }
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

/* Checks what a kernel may assume about its input: every slot no sequence reads holds the
 * buffer host's input poison (in a large pool, those of referenced pages and their
 * neighbours), also in a worker process that has run other cases before (data
 * left over from an earlier case would show here). Scans the whole pool: for small test cases
 * only. */
static int pool_check_run(void *state, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    (void)state;
    const int64_t pe = kvf_case_page_elems(c);
    const int64_t slot_elems = (int64_t)c->num_kv_heads * c->head_dim;
    int32_t *used = kvf__host_used_slots(c, INT32_MAX, err);
    if (!used) return err ? err->code : KVF_ENOMEM;
    int rc = 0;
    const int whole =
        (size_t)c->num_pages * (size_t)pe * sizeof(kvf_bf16) <= KVF_HOST_POISON_POOL_BYTES;
    for (int64_t p = 0; p < c->num_pages && !rc; p++) {
        const int near = (p > 0 && used[p - 1]) || (p + 1 < c->num_pages && used[p + 1]);
        if (!whole && !used[p] && !near) continue; /* the host promises no poison there */
        for (int64_t i = (int64_t)used[p] * slot_elems; i < pe && !rc; i++)
            if (c->k_cache[p * pe + i] != KVF_HOST_POISON_INPUT ||
                c->v_cache[p * pe + i] != KVF_HOST_POISON_INPUT)
                rc = kvf_error_set(err, KVF_EINVAL,
                                   "test-pool-check: page %lld holds data at element %lld, which "
                                   "no sequence reads",
                                   (long long)p, (long long)i);
    }
    free(used);
    return rc ? rc : run_reference(c, o, lse, err);
}

/* A kernel whose states interfere, as one that declares concurrent states but keeps a global
 * would: each run stays inside for a while, and a run that finds another inside segfaults.
 * Alone it is cpu-ref. */
static atomic_int overlap_inside;

static int overlap_run(void *state, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    (void)state;
    const int others = atomic_fetch_add(&overlap_inside, 1);
    struct timespec ts = {0, 30000000};
    nanosleep(&ts, NULL);
    if (others > 0 || atomic_load(&overlap_inside) > 1) {
        volatile uintptr_t address = 16;
        *(volatile int32_t *)address = 1;
    }
    atomic_fetch_sub(&overlap_inside, 1);
    return run_reference(c, o, lse, err);
}

/* A kernel run in two phases as the CUDA buffer host runs them (kvf_kernel_submit), without a
 * GPU: submit keeps the case, collect runs it, with test-crash's and test-hang's triggers. */
typedef struct two_phase_state {
    const kvf_case *c; /* submitted, not yet collected */
} two_phase_state;

static int two_phase_create(void **state, kvf_error *err) {
    *state = calloc(1, sizeof(two_phase_state));
    return *state ? 0 : kvf_error_set(err, KVF_ENOMEM, "test-two-phase: out of memory");
}

static void two_phase_destroy(void *state) {
    free(state);
}

static int two_phase_submit(void *state, const kvf_case *c, kvf_error *err) {
    two_phase_state *s = state;
    if (s->c) return kvf_error_set(err, KVF_EINVAL, "test-two-phase: a run is already submitted");
    s->c = c;
    return 0;
}

static int two_phase_collect(void *state, kvf_bf16 *o, float *lse, kvf_error *err) {
    two_phase_state *s = state;
    const kvf_case *c = s->c;
    if (!c) return kvf_error_set(err, KVF_EINVAL, "test-two-phase: no run was submitted");
    s->c = NULL;
    if (has_length(c, 1)) return hang_run(NULL, c, o, lse, err);
    return crash_run(NULL, c, o, lse, err);
}

static int two_phase_run(void *state, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    const int rc = two_phase_submit(state, c, err);
    return rc ? rc : two_phase_collect(state, o, lse, err);
}

#define TWO_PHASE_DESC                                                                             \
    "test only: cpu-ref run in two phases (submit, collect), with test-crash's and test-hang's "   \
    "triggers"

static const kvf__case_kernel planted_impl = {planted_run, 0}, crash_impl = {crash_run, 0},
                              hang_impl = {hang_run, 0}, pool_check_impl = {pool_check_run, 0},
                              flaky_impl = {flaky_run, 0}, overlap_impl = {overlap_run, 0};

#define PLANTED_DESC "test only: cpu-ref reading one slot past each partly filled last page"
#define CRASH_DESC "test only: cpu-ref that segfaults on cases with an empty sequence"
#define HANG_DESC "test only: cpu-ref that never returns on cases with a one-token sequence"
#define FLAKY_DESC "test only: cpu-ref killed the first time it sees a case (KVF_TEST_FLAKY_DIR)"
#define POOL_CHECK_DESC "test only: cpu-ref that fails if a slot no sequence reads is not poisoned"
#define OVERLAP_DESC "test only: cpu-ref that segfaults when another of its runs is in progress"
#define NOSTART_DESC "test only: its create() fails, as a kernel whose device is missing does"

/* The start failure of a kernel whose device or library is missing, for the commands' exit
 * status when a kernel cannot start. */
static int nostart_create(const kvf_plugin_kernel *self, void **state, char *msg, size_t n) {
    (void)self, (void)state;
    snprintf(msg, n, "test-nostart: create() fails on purpose");
    return KVF_PLUGIN_ERROR;
}

#define DEVICE1_DESC                                                                               \
    "test only: cpu-ref whose create() fails in a worker pinned to device 1 "                      \
    "(CUDA_VISIBLE_DEVICES=1), as on a GPU that is gone"

static int reference_run(void *state, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    (void)state;
    return run_reference(c, o, lse, err);
}
static const kvf__case_kernel reference_impl = {reference_run, 0};

/* A broken GPU of a multi-device campaign, without a GPU: the worker the campaign pins to
 * device 1 cannot start its kernel; the others run cpu-ref. */
static int device1_create(const kvf_plugin_kernel *self, void **state, char *msg, size_t n) {
    const char *dev = getenv("CUDA_VISIBLE_DEVICES");
    if (dev && strcmp(dev, "1") == 0) {
        snprintf(msg, n, "test-device1-broken: device 1 does not answer");
        return KVF_PLUGIN_ERROR;
    }
    return kvf__builtin_create(self, state, msg, n);
}

/* test-crash and test-hang do not start while KVF_TEST_NO_RESTART is set (a test sets it once
 * their first worker runs, to reach the runner's paths where no fresh worker can be had). */
static int restart_create(const kvf_plugin_kernel *self, void **state, char *msg, size_t n) {
    if (getenv("KVF_TEST_NO_RESTART")) {
        snprintf(msg, n, "%s: KVF_TEST_NO_RESTART is set", self->name);
        return KVF_PLUGIN_ERROR;
    }
    return kvf__builtin_create(self, state, msg, n);
}

static const kvf_plugin_kernel test_descs[] = {
    KVF_BUILTIN_CPU_DESC("test-planted", PLANTED_DESC, planted_impl),
    KVF_BUILTIN_CPU_DESC_CREATE("test-crash", CRASH_DESC, crash_impl, restart_create),
    KVF_BUILTIN_CPU_DESC_CREATE("test-hang", HANG_DESC, hang_impl, restart_create),
    KVF_BUILTIN_CPU_DESC("test-pool-check", POOL_CHECK_DESC, pool_check_impl),
    KVF_BUILTIN_CPU_DESC("test-flaky", FLAKY_DESC, flaky_impl),
    KVF_BUILTIN_CPU_DESC("test-overlap", OVERLAP_DESC, overlap_impl),
    {.struct_size = sizeof(kvf_plugin_kernel),
     .name = "test-nostart",
     .description = NOSTART_DESC,
     .device = KVF_PLUGIN_DEVICE_CPU,
     .role = KVF_PLUGIN_ROLE_UNDER_TEST,
     .user = (void *)&planted_impl,
     .supports = kvf__builtin_supports_all,
     .create = nostart_create,
     .run = kvf__builtin_run},
    {.struct_size = sizeof(kvf_plugin_kernel),
     .name = "test-device1-broken",
     .description = DEVICE1_DESC,
     .device = KVF_PLUGIN_DEVICE_CPU,
     .role = KVF_PLUGIN_ROLE_UNDER_TEST,
     .user = (void *)&reference_impl,
     .supports = kvf__builtin_supports_all,
     .create = device1_create,
     .run = kvf__builtin_run},
};

static const kvf_kernel test_kernels[] = {
    {.name = "test-planted",
     .description = PLANTED_DESC,
     .device = KVF_DEVICE_CPU,
     .models = "B03",
     .desc = &test_descs[0]},
    {.name = "test-crash",
     .description = CRASH_DESC,
     .device = KVF_DEVICE_CPU,
     .models = "B04",
     .desc = &test_descs[1]},
    {.name = "test-hang",
     .description = HANG_DESC,
     .device = KVF_DEVICE_CPU,
     .models = "B07",
     .desc = &test_descs[2]},
    {.name = "test-pool-check",
     .description = POOL_CHECK_DESC,
     .device = KVF_DEVICE_CPU,
     .models = "",
     .desc = &test_descs[3]},
    {.name = "test-flaky",
     .description = FLAKY_DESC,
     .device = KVF_DEVICE_CPU,
     .models = "",
     .desc = &test_descs[4]},
    {.name = "test-overlap",
     .description = OVERLAP_DESC,
     .device = KVF_DEVICE_CPU,
     .models = "",
     .desc = &test_descs[5]},
    {.name = "test-nostart",
     .description = NOSTART_DESC,
     .device = KVF_DEVICE_CPU,
     .models = "",
     .desc = &test_descs[6]},
    {.name = "test-device1-broken",
     .description = DEVICE1_DESC,
     .device = KVF_DEVICE_CPU,
     .models = "",
     .desc = &test_descs[7]},
    {.name = "test-two-phase",
     .description = TWO_PHASE_DESC,
     .device = KVF_DEVICE_CPU,
     .models = "",
     .create = two_phase_create,
     .destroy = two_phase_destroy,
     .run = two_phase_run,
     .submit = two_phase_submit,
     .collect = two_phase_collect,
     .concurrent_states = 8},
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
