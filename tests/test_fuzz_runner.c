/* Unit tests for the runner and its worker process (fuzz/engine/runner.c, worker.c): lanes, pages
 * between cases, surviving crashing and hanging kernels, and no restart. */
#include "fuzz_fixtures.h"

/* Small generated cases (up to 3 sequences of 96 tokens in 4 pages): quick for a worker. */
static void small_random_opts(kvf_random_opts *rnd) {
    kvf_random_opts_default(rnd);
    rnd->max_batch = 3, rnd->max_pages = 4, rnd->max_tokens = 96;
}

/* Up to n cases built from random specs of seeds 1, 2, ... (those past the limits are skipped),
 * each of whose sequences has at least min_len tokens. Returns how many were built. */
static int random_cases(kvf_case *cases, int n, const kvf_random_opts *rnd, int64_t min_len) {
    kvf_limits cl = case_limits();
    kvf_error err = {0};
    int made = 0;
    for (uint64_t seed = 1; made < n && seed < 100 * (uint64_t)n; seed++) {
        kvf_spec spec;
        const int rc = kvf_spec_random(&spec, seed, rnd, &err) ||
                       kvf_case_build(&cases[made], &spec, &cl, &err);
        kvf_spec_free(&spec);
        if (rc) continue;
        int64_t shortest = INT64_MAX;
        for (int32_t b = 0; b < cases[made].batch_size; b++)
            if (kvf_case_seq_len(&cases[made], b) < shortest)
                shortest = kvf_case_seq_len(&cases[made], b);
        if (shortest < min_len) {
            kvf_case_free(&cases[made]);
            continue;
        }
        made++;
    }
    return made;
}

/* The `cuda` kernel's worker with two lanes, which one thread drives in two phases (worker.c,
 * pipeline_main): over generated cases of many shapes, in a window of launches, the results
 * come back in order and equal a one-lane worker's bit for bit. Needs a GPU (skipped without;
 * the probe runs in a child, so this process stays fork-safe). */
static void runner_cuda_lanes(void) {
    char why[256];
    if (!kvf_runner_probe_cuda(why, sizeof why)) CHECK_SKIP("%s", why);
    const kvf_kernel *k = kvf_kernel_find("cuda");
    if (!k) CHECK_SKIP("this kvfuzz has no cuda kernel");
    kvf_limits cl = case_limits();
    kvf_error err = {0};
    kvf_random_opts rnd;
    kvf_random_opts_default(&rnd);
    rnd.max_batch = 12, rnd.max_pages = 40, rnd.max_tokens = 6000;
    enum { N = 200 };
    kvf_case *cases = calloc(N, sizeof *cases);
    kvf_bf16 *o[2][N];
    float *lse[2][N];
    kvf_run_status st[2][N];
    const int n = random_cases(cases, N, &rnd, 0);
    CHECK_INT_EQ(n, N);
    for (int i = 0; i < n; i++)
        for (int l = 0; l < 2; l++) {
            o[l][i] = calloc((size_t)kvf_case_o_elems(&cases[i]) + 1, sizeof **o[l]);
            lse[l][i] = calloc((size_t)kvf_case_lse_elems(&cases[i]) + 1, sizeof **lse[l]);
        }
    for (int l = 0; l < 2; l++) {
        kvf_runner_opts ro = {k, cl, 30, 0, 0, l + 1};
        kvf_runner *r;
        CHECK_OK(kvf_runner_create(&r, &ro, &err), &err);
        int submitted = 0;
        for (int i = 0; i < N; i++) {
            while (submitted < N && kvf_runner_has_room(r))
                CHECK_OK(kvf_runner_submit(r, &cases[submitted++], &err), &err);
            kvf_run_result res;
            kvf_runner_collect(r, o[l][i], lse[l][i], &res);
            st[l][i] = res.status;
            if (res.status != KVF_RUN_OK && res.status != KVF_RUN_UNSUPPORTED)
                CHECK_FAIL_AT("%d lane(s), case %d: %s", l + 1, i, res.message);
        }
        CHECK_INT_EQ(kvf_runner_lanes(r), l + 1);
        CHECK_INT_EQ(kvf_runner_starts(r), 1);
        kvf_runner_destroy(r);
    }
    int ran = 0;
    for (int i = 0; i < N; i++) {
        if (st[0][i] != st[1][i])
            CHECK_FAIL_AT("case %d: status %d with one lane, %d with two", i, (int)st[0][i],
                          (int)st[1][i]);
        if (st[0][i] != KVF_RUN_OK) continue;
        ran++;
        const size_t no = (size_t)kvf_case_o_elems(&cases[i]);
        const size_t nl = (size_t)kvf_case_lse_elems(&cases[i]);
        if (memcmp(o[0][i], o[1][i], no * 2) || memcmp(lse[0][i], lse[1][i], nl * 4))
            CHECK_FAIL_AT("case %d came back with other outputs from two lanes", i);
    }
    if (ran < N / 2) CHECK_FAIL_AT("only %d of %d cases ran", ran, N);
    for (int i = 0; i < n; i++) {
        for (int l = 0; l < 2; l++)
            free(o[l][i]), free(lse[l][i]);
        kvf_case_free(&cases[i]);
    }
    free(cases);
}

/* A worker with several lanes: a thread each (cpu-ref, 4 lanes), or all driven in two phases
 * from one thread (test-two-phase, by default two lanes). Results come back in the order
 * submitted and equal cpu-ref's run in this process, over generated cases of different sizes.
 * A crash or a hang among launches that ran side by side is run again alone and blamed on its
 * own launch only, the others coming back clean. A failure that happens only side by side
 * (test-overlap) is not returned, and is counted as such. */
static void runner_lanes(void) {
    kvf_limits cl = case_limits();
    kvf_error err = {0};
    kvf_random_opts rnd;
    small_random_opts(&rnd);
    enum { N = 24 };
    kvf_case cases[N];
    kvf_bf16 *want_o[N], *o[N];
    float *want_lse[N], *lse[N];
    /* No sequence of 0 or 1 tokens: test-two-phase's triggers. */
    const int n = random_cases(cases, N, &rnd, 2);
    CHECK_INT_EQ(n, N);
    for (int i = 0; i < n; i++) {
        const size_t no = (size_t)kvf_case_o_elems(&cases[i]) + 1;
        const size_t nl = (size_t)kvf_case_lse_elems(&cases[i]) + 1;
        want_o[i] = calloc(no, sizeof **want_o), o[i] = calloc(no, sizeof **o);
        want_lse[i] = calloc(nl, sizeof **want_lse), lse[i] = calloc(nl, sizeof **lse);
        CHECK_OK(kvf_kernel_run_once(kvf_kernel_find("cpu-ref"), &cases[i], want_o[i], want_lse[i],
                                     &err),
                 &err);
    }
    kvf_runner *r;
    /* Lanes asked, lanes run: test-two-phase's default is KVF_RUNNER_AUTO_LANES. */
    const struct {
        const char *kernel;
        int ask, lanes;
    } runs[3] = {
        {"cpu-ref", 4, 4}, {"test-two-phase", 0, KVF_RUNNER_AUTO_LANES}, {"test-two-phase", 5, 5}};
    for (int k = 0; k < 3; k++) {
        kvf_runner_opts ro = {kvf_fuzz_kernel_find(runs[k].kernel), cl, 10, 0, 0, runs[k].ask};
        CHECK_OK(kvf_runner_create(&r, &ro, &err), &err);
        CHECK_OK(kvf_runner_start(r, &err), &err);
        CHECK_INT_EQ(kvf_runner_max_inflight(r), KVF_RUNNER_WINDOW(runs[k].lanes));
        int submitted = 0;
        for (int i = 0; i < N; i++) {
            memset(o[i], 0, (size_t)kvf_case_o_elems(&cases[i]) * sizeof **o);
            while (submitted < N && submitted - i < kvf_runner_max_inflight(r))
                CHECK_OK(kvf_runner_submit(r, &cases[submitted++], &err), &err);
            kvf_run_result res;
            kvf_runner_collect(r, o[i], lse[i], &res);
            if (res.status != KVF_RUN_OK)
                CHECK_FAIL_AT("%s, case %d: %s", runs[k].kernel, i, res.message);
            const size_t no = (size_t)kvf_case_o_elems(&cases[i]);
            const size_t nl = (size_t)kvf_case_lse_elems(&cases[i]);
            if (memcmp(o[i], want_o[i], no * sizeof **o) || memcmp(lse[i], want_lse[i], nl * 4))
                CHECK_FAIL_AT("%s: case %d came back with another case's outputs", runs[k].kernel,
                              i);
        }
        CHECK_INT_EQ(kvf_runner_lanes(r), runs[k].lanes);
        CHECK_INT_EQ(kvf_runner_starts(r), 1);
        CHECK_INT_EQ(kvf_runner_reruns(r), 0);
        kvf_runner_destroy(r);
    }

    /* Crash and hang among others: each run first beside up to three others. */
    kvf_spec good = small_spec(1), empty = small_spec(1), one = small_spec(1);
    empty.recipe.num_pages[1] = 0, empty.recipe.last_page_len[1] = 0;
    one.recipe.num_pages[1] = 1, one.recipe.last_page_len[1] = 1;
    const kvf_spec *specs[3] = {&good, &empty, &one};
    kvf_case three[3];
    for (int i = 0; i < 3; i++)
        CHECK_OK(kvf_case_build(&three[i], specs[i], &cl, &err), &err);
    kvf_bf16 *oo = malloc((size_t)kvf_case_o_elems(&three[0]) * sizeof *oo);
    float *ll = malloc((size_t)kvf_case_lse_elems(&three[0]) * sizeof *ll);
    /* Each kernel with its lanes, and which of the cases makes it fail: test-two-phase
     * crashes on the empty sequence and hangs on the one-token one. */
    const char *names[4] = {"test-crash", "test-hang", "test-two-phase", "test-two-phase"};
    for (int k = 0; k < 4; k++) {
        kvf_runner_opts rk = {kvf_fuzz_kernel_find(names[k]), cl, 0.5, 0, 0, k < 2 ? 4 : 0};
        CHECK_OK(kvf_runner_create(&r, &rk, &err), &err);
        const int bad = k % 2 == 0 ? 1 : 2, total = 10;
        const int order[10] = {0, 0, bad, 0, 0, 0, 0, 0, 0, 0};
        int sent = 0;
        for (int i = 0; i < total; i++) {
            while (sent < total && sent - i < kvf_runner_max_inflight(r))
                CHECK_OK(kvf_runner_submit(r, &three[order[sent++]], &err), &err);
            kvf_run_result res;
            kvf_runner_collect(r, oo, ll, &res);
            const int want = order[i] == 0 ? KVF_RUN_OK : bad == 1 ? KVF_RUN_CRASH : KVF_RUN_HANG;
            if ((int)res.status != want)
                CHECK_FAIL_AT("%s, launch %d: status %d (%s), expected %d", names[k], i,
                              (int)res.status, res.message, want);
        }
        /* The first failure was beside others and ran again alone, where it failed again. */
        CHECK_INT_EQ(kvf_runner_reruns(r), 1);
        CHECK_INT_EQ(kvf_runner_unrepeated(r), 0);
        kvf_runner_destroy(r);
    }
    /* States that interfere: the side-by-side crashes all run clean alone. */
    kvf_runner_opts rv = {kvf_fuzz_kernel_find("test-overlap"), cl, 10, 0, 0, 4};
    CHECK(rv.kernel != NULL);
    CHECK_OK(kvf_runner_create(&r, &rv, &err), &err);
    for (int i = 0; i < 4; i++)
        CHECK_OK(kvf_runner_submit(r, &three[0], &err), &err);
    for (int i = 0; i < 4; i++) {
        kvf_run_result res;
        kvf_runner_collect(r, oo, ll, &res);
        if (res.status != KVF_RUN_OK) CHECK_FAIL_AT("test-overlap %d: %s", i, res.message);
    }
    CHECK_INT_EQ(kvf_runner_reruns(r), 1);
    CHECK_INT_EQ(kvf_runner_unrepeated(r), 1);
    kvf_runner_destroy(r);
    free(oo);
    free(ll);
    for (int i = 0; i < 3; i++)
        kvf_case_free(&three[i]);
    kvf_spec_free(&good);
    kvf_spec_free(&empty);
    kvf_spec_free(&one);
    for (int i = 0; i < N; i++) {
        kvf_case_free(&cases[i]);
        free(want_o[i]), free(o[i]), free(want_lse[i]), free(lse[i]);
    }
}

/* The worker process reports a segfault and a hang as such and keeps serving afterwards. */
/* One worker process runs case after case. Every page a case does not hold must still read as
 * zero there (test-pool-check fails the run otherwise), over generated cases whose pools, page
 * sizes and resident pages all differ, poisoned unreferenced pages included, and over cases
 * built so that each leaves empty pages the one before it wrote. */
static void worker_pages_between_cases(void) {
    kvf_limits cl = case_limits();
    kvf_error err = {0};
    kvf_random_opts rnd;
    small_random_opts(&rnd);
    rnd.allow_high_ids = 0; /* test-pool-check reads every page of the pool */
    kvf_runner_opts ro = {kvf_fuzz_kernel_find("test-pool-check"), cl, 10, 0, 0, 1};
    CHECK(ro.kernel != NULL);
    kvf_runner *r;
    CHECK_OK(kvf_runner_create(&r, &ro, &err), &err);
    int ran = 0, with_extra_pages = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        kvf_spec spec;
        kvf_case c;
        if (kvf_spec_random(&spec, seed, &rnd, &err) || kvf_case_build(&c, &spec, &cl, &err)) {
            kvf_spec_free(&spec);
            continue; /* a recipe past these limits: not what is tested here */
        }
        if (c.num_resident_pages > c.kv_indptr[c.batch_size]) with_extra_pages++;
        kvf_bf16 *o = malloc((size_t)(kvf_case_o_elems(&c) + 1) * sizeof *o);
        float *lse = malloc((size_t)(kvf_case_lse_elems(&c) + 1) * sizeof *lse);
        kvf_run_result res;
        CHECK_OK(kvf_runner_run(r, &c, o, lse, &res, &err), &err);
        if (res.status != KVF_RUN_OK)
            CHECK_FAIL_AT("seed %llu: status %d: %s", (unsigned long long)seed, res.status,
                          res.message);
        ran++;
        free(o);
        free(lse);
        kvf_case_free(&c);
        kvf_spec_free(&spec);
    }
    CHECK(ran >= 40);
    CHECK(with_extra_pages > 0); /* poisoned pages outside the table were among them */
    /* And a pair built for it: a contiguous table fills pages that the next case, with the same
     * page layout, a scattered table and a large pool, leaves empty. */
    /* A small pool and two large sparse ones with the same page layout: the contiguous case fills
     * pages the scattered ones leave empty, and each scattered case fills pages the other leaves
     * empty. A pool past 64 MiB keeps only the referenced pages and their neighbours resident. */
    kvf_spec specs[3] = {small_spec(3), small_spec(3), small_spec(4)};
    specs[0].recipe.table = KVF_TABLE_CONTIGUOUS;
    for (int i = 1; i < 3; i++) {
        specs[i].recipe.table = KVF_TABLE_SCATTERED;
        specs[i].recipe.spare_pages = 5000;
    }
    kvf_case trio[3];
    for (int i = 0; i < 3; i++)
        CHECK_OK(kvf_case_build(&trio[i], &specs[i], &cl, &err), &err);
    /* The order run below, and the premise that the last two runs' empty pages include pages
     * the run before wrote (the small pool of run 1 is too small to see the others' pages). */
    const int order[4] = {1, 0, 2, 1};
    for (int i = 2; i < 4; i++) {
        const kvf_case *now = &trio[order[i]], *before = &trio[order[i - 1]];
        int64_t overlap = 0;
        for (int64_t a = 0; a < before->num_resident_pages; a++) {
            int64_t p = before->resident_pages[a], held = 0;
            for (int64_t b = 0; b < now->num_resident_pages; b++)
                held |= now->resident_pages[b] == p;
            overlap += !held && p < now->num_pages;
        }
        if (overlap == 0) CHECK_FAIL_AT("run %d leaves no page of run %d empty", i, i - 1);
    }
    /* A large case first, so that the worker's pools are already large enough for all of them
     * and are reused, not mapped afresh. */
    for (int i = 0; i < 4; i++) {
        kvf_case *pc = &trio[order[i]];
        kvf_bf16 *o = malloc((size_t)kvf_case_o_elems(pc) * sizeof *o);
        float *lse = malloc((size_t)kvf_case_lse_elems(pc) * sizeof *lse);
        kvf_run_result res;
        CHECK_OK(kvf_runner_run(r, pc, o, lse, &res, &err), &err);
        if (res.status != KVF_RUN_OK) CHECK_FAIL_AT("run %d: %s", i, res.message);
        free(o);
        free(lse);
    }
    for (int i = 0; i < 3; i++) {
        kvf_case_free(&trio[i]);
        kvf_spec_free(&specs[i]);
    }
    CHECK_INT_EQ(kvf_runner_starts(r), 1);
    kvf_runner_destroy(r);
}

static void runner_survives_crash_and_hang(void) {
    kvf_limits cl = case_limits();
    kvf_spec good = small_spec(1), empty = small_spec(1), one = small_spec(1);
    empty.recipe.num_pages[1] = 0, empty.recipe.last_page_len[1] = 0;
    one.recipe.num_pages[1] = 1, one.recipe.last_page_len[1] = 1;
    const kvf_spec *specs[3] = {&good, &empty, &one};
    kvf_case cases[3];
    kvf_error err = {0};
    for (int i = 0; i < 3; i++) {
        CHECK_OK(kvf_case_build(&cases[i], specs[i], &cl, &err), &err);
    }
    kvf_bf16 *o = malloc((size_t)kvf_case_o_elems(&cases[0]) * sizeof *o);
    float *lse = malloc((size_t)kvf_case_lse_elems(&cases[0]) * sizeof *lse);
    const char *names[2] = {"test-crash", "test-hang"};
    for (int k = 0; k < 2; k++) {
        kvf_runner_opts ro = {kvf_fuzz_kernel_find(names[k]), cl, 0.5, 0, 0, 1};
        CHECK(ro.kernel != NULL);
        kvf_runner *r;
        CHECK_OK(kvf_runner_create(&r, &ro, &err), &err);
        kvf_run_result res;
        CHECK_OK(kvf_runner_run(r, &cases[0], o, lse, &res, &err), &err);
        CHECK_INT_EQ(res.status, KVF_RUN_OK);
        int bad = k == 0 ? 1 : 2;
        CHECK_OK(kvf_runner_run(r, &cases[bad], o, lse, &res, &err), &err);
        CHECK_INT_EQ(res.status, k == 0 ? KVF_RUN_CRASH : KVF_RUN_HANG);
        if (k == 0) CHECK_INT_EQ(res.signal, 11);
        CHECK_OK(kvf_runner_run(r, &cases[0], o, lse, &res, &err), &err);
        CHECK_INT_EQ(res.status, KVF_RUN_OK);
        CHECK_INT_EQ(kvf_runner_starts(r), 2);
        kvf_runner_destroy(r);
    }
    /* The runner kept full: a crash or hang is blamed on its own launch, the launches queued
     * behind it (already in the worker's reader and in the socket) run on a fresh worker, and
     * one more than the limit is refused. */
    for (int k = 0; k < 2; k++) {
        kvf_runner_opts ro = {kvf_fuzz_kernel_find(names[k]), cl, 0.5, 0, 0, 1};
        kvf_runner *r;
        CHECK_OK(kvf_runner_create(&r, &ro, &err), &err);
        const int bad = k == 0 ? 1 : 2, total = kvf_runner_max_inflight(r);
        CHECK_INT_EQ(total, KVF_RUNNER_WINDOW(1));
        int order[KVF_RUNNER_MAX_INFLIGHT] = {0};
        order[1] = bad;
        kvf_run_result res;
        int submitted = 0;
        for (; submitted < kvf_runner_max_inflight(r); submitted++)
            CHECK_OK(kvf_runner_submit(r, &cases[order[submitted]], &err), &err);
        CHECK_INT_EQ(kvf_runner_submit(r, &cases[0], &err), KVF_EINVAL);
        for (int i = 0; i < total; i++) {
            kvf_runner_collect(r, o, lse, &res);
            CHECK_INT_EQ(res.status, order[i] == 0 ? KVF_RUN_OK
                                     : k == 0      ? KVF_RUN_CRASH
                                                   : KVF_RUN_HANG);
            if (submitted < total)
                CHECK_OK(kvf_runner_submit(r, &cases[order[submitted++]], &err), &err);
        }
        CHECK_INT_EQ(kvf_runner_starts(r), 2);
        kvf_runner_destroy(r);
    }
    CHECK(kvf_fuzz_kernel_find("test-nope") == NULL);
    CHECK(kvf_fuzz_kernel_find("cpu-ref") == kvf_kernel_find("cpu-ref"));
    for (size_t i = 0; i < kvf_kernel_count(); i++) /* never in the registry users see */
        CHECK(strncmp(kvf_kernel_at(i)->name, "test-", 5) != 0);
    free(o);
    free(lse);
    for (int i = 0; i < 3; i++) {
        kvf_case_free(&cases[i]);
    }
    kvf_spec_free(&good);
    kvf_spec_free(&empty);
    kvf_spec_free(&one);
}

/* When no fresh worker can be had after a failure (KVF_TEST_NO_RESTART makes the test kernels'
 * create() fail): a hang with two lanes is reported as a hang (the runner once signalled pid 0,
 * its own process group, there); after a crash, the launch queued behind it fails as having no
 * worker, and the next one submitted gets a fresh worker and runs (it once came back as a
 * crash without ever reaching a worker). */
static void runner_without_restart(void) {
    kvf_limits cl = case_limits();
    kvf_spec good = small_spec(1), empty = small_spec(1), one = small_spec(1);
    empty.recipe.num_pages[1] = 0, empty.recipe.last_page_len[1] = 0;
    one.recipe.num_pages[1] = 1, one.recipe.last_page_len[1] = 1;
    kvf_case c_good, c_empty, c_one;
    kvf_error err = {0};
    CHECK_OK(kvf_case_build(&c_good, &good, &cl, &err), &err);
    CHECK_OK(kvf_case_build(&c_empty, &empty, &cl, &err), &err);
    CHECK_OK(kvf_case_build(&c_one, &one, &cl, &err), &err);
    kvf_bf16 *o = malloc((size_t)kvf_case_o_elems(&c_good) * sizeof *o);
    float *lse = malloc((size_t)kvf_case_lse_elems(&c_good) * sizeof *lse);
    kvf_run_result res;
    kvf_runner *r;

    kvf_runner_opts rh = {kvf_fuzz_kernel_find("test-hang"), cl, 0.3, 5, 0, 2};
    CHECK_OK(kvf_runner_create(&r, &rh, &err), &err);
    CHECK_OK(kvf_runner_start(r, &err), &err);
    CHECK_INT_EQ(kvf_runner_lanes(r), 2);
    CHECK_OK(kvf_runner_submit(r, &c_one, &err), &err);
    setenv("KVF_TEST_NO_RESTART", "1", 1);
    kvf_runner_collect(r, o, lse, &res);
    unsetenv("KVF_TEST_NO_RESTART");
    CHECK_INT_EQ(res.status, KVF_RUN_HANG);
    kvf_runner_destroy(r);

    kvf_runner_opts rc = {kvf_fuzz_kernel_find("test-crash"), cl, 5, 5, 0, 1};
    CHECK_OK(kvf_runner_create(&r, &rc, &err), &err);
    CHECK_OK(kvf_runner_submit(r, &c_empty, &err), &err);
    CHECK_OK(kvf_runner_submit(r, &c_good, &err), &err);
    setenv("KVF_TEST_NO_RESTART", "1", 1);
    kvf_runner_collect(r, o, lse, &res);
    CHECK_INT_EQ(res.status, KVF_RUN_CRASH);
    unsetenv("KVF_TEST_NO_RESTART");
    CHECK_OK(kvf_runner_submit(r, &c_good, &err), &err);
    kvf_runner_collect(r, o, lse, &res); /* queued behind the crash, when no worker could start */
    CHECK_INT_EQ(res.status, KVF_RUN_KERNEL_ERROR);
    CHECK(strstr(res.message, "no worker to run the case") != NULL);
    kvf_runner_collect(r, o, lse, &res);
    if (res.status != KVF_RUN_OK) CHECK_FAIL_AT("after a failed restart: %s", res.message);
    kvf_runner_destroy(r);

    free(o);
    free(lse);
    kvf_case_free(&c_good);
    kvf_case_free(&c_empty);
    kvf_case_free(&c_one);
    kvf_spec_free(&good);
    kvf_spec_free(&empty);
    kvf_spec_free(&one);
}

/* A case's buffer layout travels to the worker: the mutant page-stride-ignored, wrong only on
 * padded pages, gives the worker the bits it gives in this process on a padded case; and the
 * graph-replay relation's run of a CPU kernel comes back unsupported, not as an error. */
static void layout_and_graph_reach_the_worker(void) {
    const kvf_kernel *mut = kvf_kernel_find("cpu-splitkv/mut=page-stride-ignored");
    kvf_limits cl = case_limits();
    kvf_random_opts rnd;
    small_random_opts(&rnd);
    rnd.allow_high_ids = 0;
    kvf_error err = {0};
    kvf_runner_opts ro = {mut, cl, 30, 0, 0, 1}, here = {mut, cl, 30, 0, 1, 1};
    kvf_runner *r = NULL, *h = NULL;
    CHECK_OK(kvf_runner_create(&r, &ro, &err), &err);
    CHECK_OK(kvf_runner_create(&h, &here, &err), &err);
    int compared = 0;
    for (uint64_t seed = 1; seed <= 12 && r && h; seed++) {
        kvf_spec spec;
        kvf_case c;
        if (kvf_spec_random(&spec, seed, &rnd, &err)) continue;
        spec.layout.kv_page_pad = 64, spec.layout.kv_order = KVF_LAYOUT_HND;
        if (kvf_case_build(&c, &spec, &cl, &err) == 0) {
            const size_t no = (size_t)kvf_case_o_elems(&c) + 1,
                         nl = (size_t)c.batch_size * c.num_qo_heads + 1;
            kvf_bf16 *o[2] = {calloc(no, 2), calloc(no, 2)};
            float *lse[2] = {calloc(nl, 4), calloc(nl, 4)};
            kvf_run_result a, b;
            CHECK_OK(kvf_runner_run(r, &c, o[0], lse[0], &a, &err), &err);
            CHECK_OK(kvf_runner_run(h, &c, o[1], lse[1], &b, &err), &err);
            if (a.status == KVF_RUN_OK && b.status == KVF_RUN_OK) {
                compared++;
                CHECK(memcmp(o[0], o[1], (no - 1) * 2) == 0);
            }
            kvf_relation_pair p;
            if (kvf_relation_derive(&p, KVF_RELATION_GRAPH_REPLAY, &c, seed, &cl, &err) == 0) {
                CHECK_OK(kvf_runner_run_relation(r, &c, &p, o[0], lse[0], &a, &err), &err);
                CHECK_INT_EQ(a.status, KVF_RUN_UNSUPPORTED);
                CHECK_STR_CONTAINS(a.message, "CUDA kernels");
                kvf_relation_pair_free(&p);
            }
            for (int i = 0; i < 2; i++)
                free(o[i]), free(lse[i]);
            kvf_case_free(&c);
        }
        kvf_spec_free(&spec);
    }
    CHECK(compared >= 8);
    kvf_runner_destroy(r);
    kvf_runner_destroy(h);
}

static const check_test tests[] = {
    {"layout_and_graph_reach_the_worker", layout_and_graph_reach_the_worker},
    {"runner_survives_crash_and_hang", runner_survives_crash_and_hang},
    {"runner_without_restart", runner_without_restart},
    {"worker_pages_between_cases", worker_pages_between_cases},
    {"runner_lanes", runner_lanes},
    {"runner_cuda_lanes", runner_cuda_lanes},
    {NULL, NULL},
};

CHECK_MAIN(tests)
