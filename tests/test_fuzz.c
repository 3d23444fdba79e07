/* Fuzzing pieces: the structure-aware mutator keeps specs valid, inside the budget and inside
 * the finite input domain while reaching every move and every edge length; error buckets,
 * signatures and atomic de-duplicated findings; the worker survives crashing and hanging
 * kernels; the campaign finds the planted bug; the minimizer shrinks it and keeps its class. */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <stdint.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "kvfuzz/campaign.h"
#include "kvfuzz/minimize.h"
#include "kvfuzz/mutate.h"
#include "kvfuzz/outcome.h"
#include "kvfuzz/runner.h"
#include "kvfuzz/test_kernels.h"
#include "../fuzz/src/queue.h" /* the campaign's internal queue, tested directly */

static kvf_limits case_limits(void) {
    kvf_limits l;
    kvf_limits_default(&l);
    return l;
}

/* A fresh temporary directory, removed (one level deep) by rm_tree. */
static void make_tmp(char *out, size_t size) {
    const char *base = getenv("TMPDIR");
    snprintf(out, size, "%s/kvf-test-fuzz-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(out)) {
        CHECK_FAIL_AT("mkdtemp failed");
        out[0] = 0;
    }
}

static int count_files(const char *dir, const char *prefix, int *hidden) {
    DIR *d = opendir(dir);
    int n = 0;
    if (hidden) *hidden = 0;
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (e->d_name[0] == '.') {
            if (hidden) (*hidden)++;
            continue;
        }
        if (!prefix || strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    }
    closedir(d);
    return n;
}

static void rm_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            rm_tree(path);
        else
            unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

/* A small valid spec: the seed shape with two short sequences. */
static kvf_spec small_spec(uint64_t seed) {
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "seed-h20kv4", seed, &err), &err);
    s.recipe.page_size = 16;
    kvf_spec_set_batch(&s, 2, &err);
    s.recipe.num_pages[0] = 3, s.recipe.last_page_len[0] = 5;
    s.recipe.num_pages[1] = 1, s.recipe.last_page_len[1] = 16;
    return s;
}

static int64_t seq_len(const kvf_recipe *rp, uint32_t b) {
    return rp->num_pages[b] ? (int64_t)(rp->num_pages[b] - 1) * rp->page_size + rp->last_page_len[b]
                            : 0;
}

static void mutations_stay_valid(void) {
    kvf_limits cl = case_limits();
    kvf_mutate_limits ml;
    kvf_mutate_limits_default(&ml);
    kvf_prng rng;
    kvf_prng_seed(&rng, 11);
    int moves[KVF_MUT_COUNT] = {0};
    int built = 0;
    kvf_spec s = small_spec(1);
    for (int i = 0; i < 1500; i++) {
        int m = kvf_spec_mutate(&s, &rng, -1, &ml, &cl);
        CHECK(m >= 0 && m < KVF_MUT_COUNT);
        if (m >= 0 && m < KVF_MUT_COUNT) moves[m]++;
        const kvf_recipe *rp = &s.recipe;
        CHECK(rp->batch_size <= ml.max_batch);
        for (uint32_t b = 0; b < rp->batch_size; b++)
            CHECK(rp->num_pages[b] <= ml.max_pages);
        CHECK(kvf_spec_work(&s) <= ml.max_work);
        CHECK(kvf_spec_pool_elems(&s) <= ml.max_pool_elems);
        kvf_case c;
        kvf_error err = {0};
        if (kvf_spec_repair(&s, &cl, 0, &c, &err) == 0) {
            built++;
            CHECK(kvf_case_inputs_finite(&c));
            kvf_case_free(&c);
        }
        /* encode(decode(encode(s))) is the identity: the mutated spec is a real case file. */
        uint8_t *bytes;
        size_t n;
        CHECK_OK(kvf_spec_encode(&s, &bytes, &n, &err), &err);
        kvf_spec back;
        CHECK_OK(kvf_spec_decode(&back, bytes, n, &cl, &err), &err);
        CHECK(kvf_spec_equal(&back, &s));
        kvf_spec_free(&back);
        free(bytes);
        if (i % 100 == 99) { /* restart now and then so the walk covers fresh structure */
            kvf_spec_free(&s);
            s = small_spec((uint64_t)i);
        }
    }
    kvf_spec_free(&s);
    CHECK(built > 1400);
    for (int m = 0; m < KVF_MUT_COUNT; m++)
        if (m != KVF_MUT_EXPLICIT && moves[m] == 0)
            CHECK_FAIL_AT("move %s never applied", kvf_mutation_name((kvf_mutation)m));
}

/* The length move reaches 0, 1, S-1, S and S+1 tokens. */
/* kvf_spec_pool_elems bounds what the generator writes: a high-ids pool just past the size
 * written whole at the longest id stride (3) but not at the shortest (1) is written whole when
 * the seed draws a short stride, and the estimate says so (it once took such a pool for a
 * sparse one, and the harness built 64 MiB pools it meant to refuse). */
static void pool_estimate_bounds_the_generator(void) {
    kvf_limits cl = case_limits();
    int whole = 0, cases = 0;
    for (uint32_t base = 4086; base <= 4092; base += 3)
        for (uint64_t seed = 1; seed <= 6; seed++) {
            kvf_spec s = small_spec(seed); /* 4 table entries of 16 KiB pages: 4096 fill 64 MiB */
            s.recipe.table = KVF_TABLE_HIGH_IDS;
            s.recipe.page_id_base = base;
            s.recipe.spare_pages = 0;
            kvf_case c;
            kvf_error err = {0};
            CHECK_OK(kvf_case_build(&c, &s, &cl, &err), &err);
            int64_t written = c.num_resident_pages * kvf_case_page_elems(&c);
            if (written > kvf_spec_pool_elems(&s))
                CHECK_FAIL_AT("base %u seed %llu: the generator wrote %lld elements, the estimate "
                              "is %lld",
                              base, (unsigned long long)seed, (long long)written,
                              (long long)kvf_spec_pool_elems(&s));
            whole += c.num_resident_pages == c.num_pages;
            cases++;
            kvf_case_free(&c);
            kvf_spec_free(&s);
        }
    CHECK(whole > 0 && whole < cases); /* both sides of the boundary were built */
}

static void lengths_jump_to_edges(void) {
    kvf_limits cl = case_limits();
    kvf_mutate_limits ml;
    kvf_mutate_limits_default(&ml);
    ml.max_work = INT64_MAX / 4;
    ml.max_pool_elems = INT64_MAX / 4;
    kvf_prng rng;
    kvf_prng_seed(&rng, 5);
    int seen[5] = {0};
    for (int i = 0; i < 400; i++) {
        kvf_spec s = small_spec(2);
        kvf_spec_mutate(&s, &rng, KVF_MUT_SEQ_LENGTH, &ml, &cl);
        for (uint32_t b = 0; b < s.recipe.batch_size; b++) {
            int64_t len = seq_len(&s.recipe, b), S = s.recipe.page_size;
            int64_t edges[5] = {0, 1, S - 1, S, S + 1};
            for (int e = 0; e < 5; e++)
                if (len == edges[e]) seen[e] = 1;
        }
        kvf_spec_free(&s);
    }
    for (int e = 0; e < 5; e++)
        CHECK_INT_EQ(seen[e], 1);
}

/* Special values at referenced positions stay finite; NaN/inf only land where nothing reads. */
static void values_stay_in_domain(void) {
    kvf_limits cl = case_limits();
    kvf_mutate_limits ml;
    kvf_mutate_limits_default(&ml);
    kvf_prng rng;
    kvf_prng_seed(&rng, 9);
    int nonfinite_overrides = 0;
    for (int i = 0; i < 300; i++) {
        kvf_spec s = small_spec(3);
        s.recipe.poison = KVF_POISON_ALL;
        s.recipe.spare_pages = 3;
        for (int k = 0; k < 4; k++) {
            kvf_spec_mutate(&s, &rng, KVF_MUT_VALUE, &ml, &cl);
            kvf_spec_mutate(&s, &rng, KVF_MUT_TABLE_ENTRY, &ml, &cl);
        }
        for (uint32_t k = 0; k < s.num_overrides; k++)
            if (s.overrides[k].target >= KVF_OVERRIDE_Q &&
                !kvf_bf16_is_finite((kvf_bf16)s.overrides[k].value))
                nonfinite_overrides++;
        kvf_case c;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_repair(&s, &cl, 0, &c, &err), &err);
        CHECK(kvf_case_inputs_finite(&c));
        kvf_case_free(&c);
        kvf_spec_free(&s);
    }
    CHECK(nonfinite_overrides > 0); /* tail slots do get NaN and inf */
}

static void crossover_is_valid(void) {
    kvf_limits cl = case_limits();
    kvf_mutate_limits ml;
    kvf_mutate_limits_default(&ml);
    kvf_prng rng;
    kvf_prng_seed(&rng, 3);
    for (int i = 0; i < 100; i++) {
        kvf_spec a = small_spec(4), b = small_spec(5), out;
        kvf_spec_mutate(&b, &rng, KVF_MUT_BATCH, &ml, &cl);
        b.recipe.v.kind = KVF_DIST_ONE_HOT;
        CHECK_INT_EQ(kvf_spec_crossover(&out, &a, &b, &rng, &ml), 0);
        kvf_error err = {0};
        CHECK_OK(kvf_spec_repair(&out, &cl, 0, NULL, &err), &err);
        CHECK(out.recipe.batch_size <= ml.max_batch);
        kvf_spec_free(&a);
        kvf_spec_free(&b);
        kvf_spec_free(&out);
    }
}

static void buckets(void) {
    CHECK_INT_EQ(kvf_margin_bucket(0), 0);
    CHECK_INT_EQ(kvf_margin_bucket(1.0), 51);
    CHECK_INT_EQ(kvf_margin_bucket(1.5), 51);
    CHECK_INT_EQ(kvf_margin_bucket(2.0), 52);
    CHECK_INT_EQ(kvf_margin_bucket(0.5), 50);
    CHECK_INT_EQ(kvf_margin_bucket(1e-300), 1);
    CHECK_INT_EQ(kvf_margin_bucket(1e300), 61);
    CHECK_INT_EQ(kvf_margin_bucket(INFINITY), 62);
    CHECK_INT_EQ(kvf_margin_bucket(NAN), 63);
    CHECK_INT_EQ(kvf_ulp_bucket(0), 0);
    CHECK_INT_EQ(kvf_ulp_bucket(1), 1);
    CHECK_INT_EQ(kvf_ulp_bucket(2), 2);
    CHECK_INT_EQ(kvf_ulp_bucket(3), 2);
    CHECK_INT_EQ(kvf_ulp_bucket(4), 3);
    CHECK_INT_EQ(kvf_ulp_bucket(INT64_MAX), 64);
    CHECK_INT_EQ(kvf_ulp_bucket(-1), 65);
}

static void signatures_and_saving(void) {
    char dir[512];
    make_tmp(dir, sizeof dir);
    kvf_outcome crash, hang, crash2;
    kvf_outcome_from_run(&crash, KVF_RUN_CRASH, "killed");
    crash.signal = 11;
    crash2 = crash;
    crash2.signal = 6;
    kvf_outcome_from_run(&hang, KVF_RUN_HANG, "late");
    char t1[256], t2[256];
    uint64_t h1 = kvf_outcome_signature(&crash, "k", t1, sizeof t1);
    CHECK(h1 == kvf_outcome_signature(&crash, "k", NULL, 0));
    CHECK(h1 != kvf_outcome_signature(&crash2, "k", t2, sizeof t2));
    CHECK(h1 != kvf_outcome_signature(&hang, "k", NULL, 0));
    CHECK(h1 != kvf_outcome_signature(&crash, "other", NULL, 0));
    CHECK_STR_CONTAINS(t1, "crash|k|signal11");

    kvf_spec s = small_spec(1), s2 = small_spec(2);
    int is_new = -1;
    char path[4300];
    json_t *extra = json_pack("{s:i}", "x", 1);
    hang.deadline = INFINITY; /* a number JSON cannot spell */
    kvf_error err = {0};
    CHECK_OK(kvf_finding_save(dir, &crash, "k", &s, NULL, extra, &is_new, path, sizeof path, &err),
             &err);
    json_decref(extra);
    CHECK_INT_EQ(is_new, 1);
    CHECK_STR_CONTAINS(path, "/crash-");
    {
        /* The report is JSON (jansson reads it back) with the extra members. */
        char jpath[4300];
        snprintf(jpath, sizeof jpath, "%.*s.json", (int)(strlen(path) - 5), path);
        json_error_t je;
        json_t *rep = json_load_file(jpath, 0, &je);
        CHECK(rep != NULL);
        CHECK_INT_EQ(json_integer_value(json_object_get(rep, "x")), 1);
        CHECK(json_is_null(json_object_get(rep, "fib_catches"))); /* a crash: not judged */
        CHECK_INT_EQ(json_integer_value(json_object_get(rep, "signal")), 11);
        json_decref(rep);
    }
    /* Same signature, different case: kept out, the first case and its report stay. */
    CHECK_OK(kvf_finding_save(dir, &crash, "k", &s2, NULL, NULL, &is_new, NULL, 0, &err), &err);
    CHECK_INT_EQ(is_new, 0);
    char hang_path[4300];
    CHECK_OK(kvf_finding_save(dir, &hang, "k", &s2, NULL, NULL, &is_new, hang_path,
                              sizeof hang_path, &err),
             &err);
    CHECK_INT_EQ(is_new, 1);
    {
        char jpath[4300];
        snprintf(jpath, sizeof jpath, "%.*s.json", (int)(strlen(hang_path) - 5), hang_path);
        json_error_t je;
        json_t *rep = json_load_file(jpath, 0, &je);
        CHECK(rep != NULL);
        CHECK_STR_CONTAINS(json_string_value(json_object_get(rep, "deadline_s")), "Infinity");
        json_decref(rep);
    }
    int hidden;
    CHECK_INT_EQ(count_files(dir, "crash-", &hidden), 2);
    CHECK_INT_EQ(count_files(dir, "hang-", NULL), 2);
    CHECK_INT_EQ(hidden, 0); /* no temporary left behind */
    kvf_spec back;
    kvf_limits cl = case_limits();
    CHECK_OK(kvf_case_load(path, &back, NULL, &cl, &err), &err);
    CHECK(kvf_spec_equal(&back, &s));
    kvf_spec_free(&back);
    kvf_spec_free(&s);
    kvf_spec_free(&s2);
    rm_tree(dir);
}

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

/* A bounded campaign finds the planted bug; the minimizer shrinks its case and keeps its class;
 * a production kernel gives nothing in the same budget. */
static void campaign_finds_and_minimizes_planted_bug(void) {
    char dir[512], findings[600];
    make_tmp(dir, sizeof dir);
    snprintf(findings, sizeof findings, "%s/findings", dir);
    FILE *log = fopen("/dev/null", "w");
    kvf_campaign_opts o;
    kvf_campaign_opts_default(&o);
    o.kernel = kvf_fuzz_kernel_find("test-planted");
    o.max_runs = 150;
    o.jobs = 2;
    o.seed = 7;
    o.findings_dir = findings;
    o.log = log;
    kvf_campaign_stats st;
    kvf_error err = {0};
    CHECK_OK(kvf_campaign_run(&o, &st, &err), &err);
    CHECK_INT_EQ(st.cases, 150);
    CHECK(st.finding_hits > 0);
    CHECK(st.findings_new > 0);
    /* Each new finding's case and report, and the campaign's hit counts (hits-*.counts). */
    CHECK_INT_EQ(count_files(findings, NULL, NULL), 2 * st.findings_new + 1);
    CHECK_INT_EQ(count_files(findings, "hits-", NULL), 1);

    /* Minimize the first accuracy finding: the slot read past a last page holds the host's NaN
     * poison, so it shows as nonfinite (or as o-tolerance where the generator's data got
     * there first). */
    DIR *d = opendir(findings);
    char path[1024] = "";
    kvf_finding_class target = KVF_FINDING_NONE;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if ((strncmp(e->d_name, "o-tolerance-", 12) == 0 ||
             strncmp(e->d_name, "nonfinite-", 10) == 0) &&
            strstr(e->d_name, ".kvfz")) {
            /* Prefer a nonfinite one: the slot it reads is poison, so one sequence shows it.
             * An o-tolerance one read a slot another sequence of a shared page uses, and
             * needs that sequence too. */
            if (target == KVF_FINDING_NONFINITE) continue;
            snprintf(path, sizeof path, "%s/%s", findings, e->d_name);
            target = e->d_name[0] == 'o' ? KVF_FINDING_O_TOLERANCE : KVF_FINDING_NONFINITE;
        }
    if (d) closedir(d);
    CHECK(path[0] != 0);
    if (path[0]) {
        /* An accuracy finding says whether FlashInfer-Bench's rule (fib) catches it. */
        char jpath[1100];
        snprintf(jpath, sizeof jpath, "%.*s.json", (int)(strlen(path) - 5), path);
        json_error_t je;
        json_t *rep = json_load_file(jpath, 0, &je);
        CHECK(rep != NULL);
        CHECK(json_is_boolean(json_object_get(rep, "fib_catches")));
        CHECK(json_is_object(json_object_get(rep, "campaign")));
        json_decref(rep);
    }
    if (path[0]) {
        kvf_limits cl = case_limits();
        kvf_spec s;
        CHECK_OK(kvf_case_load(path, &s, NULL, &cl, &err), &err);
        int64_t tokens_before = kvf_spec_tokens(&s);
        kvf_minimize_opts mo;
        kvf_minimize_opts_default(&mo);
        mo.kernel = o.kernel;
        mo.target = target;
        mo.jobs = 2;
        kvf_outcome out;
        kvf_minimize_stats ms;
        CHECK_OK(kvf_minimize(&s, &mo, &out, &ms, &err), &err);
        CHECK_INT_EQ(out.finding, target);
        CHECK(kvf_spec_tokens(&s) <= tokens_before);
        CHECK(s.recipe.batch_size <= (target == KVF_FINDING_NONFINITE ? 1 : 2));
        CHECK(ms.accepted > 0);
        /* The minimized case replays to the same class. */
        kvf_outcome again;
        CHECK_OK(kvf_minimize_evaluate(&s, &mo, &again, &err), &err);
        CHECK_INT_EQ(again.finding, target);
        kvf_spec_free(&s);
    }

    /* The production kernel: same budget, nothing. */
    o.kernel = kvf_fuzz_kernel_find("cpu-splitkv");
    o.max_runs = 100;
    CHECK_OK(kvf_campaign_run(&o, &st, &err), &err);
    CHECK_INT_EQ(st.finding_hits, 0);
    fclose(log);
    rm_tree(dir);
}

/* A worker killed from outside (here: the first time each case runs) is not a finding: each crash
 * is re-run, runs cleanly, and is counted as unconfirmed; a real crash is still filed. */
static void campaign_confirms_crashes(void) {
    char dir[] = "/tmp/kvf-test-flaky-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char seen[256], findings[256];
    snprintf(seen, sizeof seen, "%s/seen", dir);
    snprintf(findings, sizeof findings, "%s/findings", dir);
    CHECK(mkdir(seen, 0700) == 0);
    setenv("KVF_TEST_FLAKY_DIR", seen, 1);
    FILE *log = tmpfile();
    kvf_campaign_opts o;
    kvf_campaign_opts_default(&o);
    o.kernel = kvf_fuzz_kernel_find("test-flaky");
    o.max_runs = 20;
    o.jobs = 1;
    o.seed = 3;
    o.findings_dir = findings;
    o.log = log;
    kvf_campaign_stats st;
    kvf_error err = {0};
    CHECK_OK(kvf_campaign_run(&o, &st, &err), &err);
    CHECK_INT_EQ(st.by_class[KVF_FINDING_CRASH], 0);
    CHECK(st.crashes_unconfirmed >= 5);
    CHECK_INT_EQ(st.crashes, 0); /* unconfirmed crashes are not counted as crashes */
    CHECK_INT_EQ(st.findings_new, 0);
    unsetenv("KVF_TEST_FLAKY_DIR");
    rm_tree(seen);
    /* A kernel that crashes every time on a trigger is still filed. */
    o.kernel = kvf_fuzz_kernel_find("test-crash");
    o.max_runs = 60;
    CHECK_OK(kvf_campaign_run(&o, &st, &err), &err);
    CHECK(st.by_class[KVF_FINDING_CRASH] > 0);
    CHECK_INT_EQ(st.crashes_unconfirmed, 0);
    CHECK_INT_EQ(st.crashes, st.by_class[KVF_FINDING_CRASH]); /* each confirmed crash counted */
    CHECK_INT_EQ(st.hangs, 0);
    fclose(log);
    rm_tree(dir);
}

/* The oracle pool leaves a quarter of the cores, at most 4, to the threads that set the pace,
 * except when there is no kernel; never fewer than one thread. */
/* A generated beyond-f32 case of batch 3, lengths 1, 0, 0, judged by the default rules (strict
 * and fa) on the outputs FlashInfer gave for it: NaN o and lse on sequence 0, whose logits
 * leave f32 (lse about 1.4e41), and its empty-sequence lse of about -5e4 (its "-inf"). The
 * finding is nonfinite, and rightly: the empty sequences are in the model. It was filed as
 * "nonfinite ... o nan", described by the out-of-model NaNs; its signature now names the lse
 * that decided it, the known FlashInfer empty-sequence finding ("lse|finite"). */
static void beyond_f32_finding_signature(void) {
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "beyond-f32-logits", 1, &err), &err);
    CHECK_OK(kvf_spec_set_batch(&s, 3, &err), &err);
    kvf_recipe_set_seq_len(&s.recipe, 0, 1);
    kvf_recipe_set_seq_len(&s.recipe, 1, 0);
    kvf_recipe_set_seq_len(&s.recipe, 2, 0);
    kvf_limits cl = case_limits();
    kvf_case c;
    CHECK_OK(kvf_case_build(&c, &s, &cl, &err), &err);
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    kvf_oracle_result oracle;
    CHECK_OK(kvf_oracle_run(&oracle, &c, &oo, &err), &err);
    const int64_t rows = kvf_case_lse_elems(&c), D = c.head_dim;
    /* The oracle flags every row of sequence 0 (some with an lse past f32), none of the empty
     * ones. */
    int beyond = 0;
    for (int64_t r = 0; r < rows; r++) {
        int seq0 = r < c.num_qo_heads;
        CHECK_INT_EQ(oracle.rows[r].overflow != 0, seq0);
        CHECK_INT_EQ(oracle.rows[r].nonfinite_input, 0);
        if (seq0 && isfinite(oracle.lse_exact[r]) && fabs(oracle.lse_exact[r]) > ldexp(1.0, 128))
            beyond++;
    }
    CHECK(beyond > 0);
    kvf_bf16 *o = malloc((size_t)kvf_case_o_elems(&c) * sizeof *o);
    float *lse = malloc((size_t)rows * sizeof *lse);
    if (!o || !lse) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int64_t r = 0; r < rows; r++) {
        int seq0 = r < c.num_qo_heads;
        for (int64_t d = 0; d < D; d++)
            o[r * D + d] = seq0 ? KVF_BF16_QNAN : 0x0000u;
        lse[r] = seq0 ? NAN : -INFINITY;
    }
    kvf_rule rules[KVF_DEFAULT_RULES];
    int nr = kvf_rule_default_set(rules, KVF_DEFAULT_RULES);
    kvf_outcome out;
    char sig[256];
    /* Correct empty sequences: only the overflow rows fail, class overflow, no finding. */
    CHECK_OK(kvf_outcome_judge(&out, rules, nr, 0, &c, &oracle, o, lse, NULL, NULL, &err), &err);
    for (int r = 0; r < nr; r++)
        CHECK_INT_EQ(out.verdicts[r].finding, KVF_FINDING_OVERFLOW);
    CHECK_INT_EQ(out.finding, KVF_FINDING_NONE);
    CHECK_OK(kvf_outcome_judge(&out, rules, nr, 1, &c, &oracle, o, lse, NULL, NULL, &err), &err);
    CHECK_INT_EQ(out.finding, KVF_FINDING_OVERFLOW);
    kvf_outcome_signature(&out, "flashinfer", sig, sizeof sig);
    CHECK_STR_CONTAINS(sig, "overflow|flashinfer|strict|o|");
    /* The lse the oracle rounds (+-inf) on those rows: still overflow. */
    for (int64_t r = 0; r < c.num_qo_heads; r++)
        lse[r] = oracle.lse_rounded[r];
    CHECK_OK(kvf_outcome_judge(&out, rules, nr, 0, &c, &oracle, o, lse, NULL, NULL, &err), &err);
    for (int r = 0; r < nr; r++)
        CHECK_INT_EQ(out.verdicts[r].finding, KVF_FINDING_OVERFLOW);
    CHECK_INT_EQ(out.finding, KVF_FINDING_NONE);
    /* FlashInfer's empty-sequence lse: nonfinite, named by the lse. */
    for (int64_t r = c.num_qo_heads; r < rows; r++)
        lse[r] = -49998.4f;
    CHECK_OK(kvf_outcome_judge(&out, rules, nr, 0, &c, &oracle, o, lse, NULL, NULL, &err), &err);
    for (int r = 0; r < nr; r++)
        CHECK_INT_EQ(out.verdicts[r].finding, KVF_FINDING_NONFINITE);
    CHECK_INT_EQ(out.finding, KVF_FINDING_NONFINITE);
    kvf_outcome_signature(&out, "flashinfer", sig, sizeof sig);
    CHECK_STR_CONTAINS(sig, "nonfinite|flashinfer|strict|lse|finite");
    CHECK_INT_EQ(out.verdicts[0].lse.worst[0].out_of_model, 0);
    /* A NaN on an in-model row (sequence 1) is the o's finding. */
    for (int64_t r = c.num_qo_heads; r < rows; r++)
        lse[r] = -INFINITY;
    o[(c.num_qo_heads + 1) * D + 3] = KVF_BF16_QNAN;
    CHECK_OK(kvf_outcome_judge(&out, rules, nr, 0, &c, &oracle, o, lse, NULL, NULL, &err), &err);
    CHECK_INT_EQ(out.finding, KVF_FINDING_NONFINITE);
    kvf_outcome_signature(&out, "flashinfer", sig, sizeof sig);
    CHECK_STR_CONTAINS(sig, "nonfinite|flashinfer|strict|o|nan");
    CHECK_INT_EQ(out.verdicts[0].o.worst[0].b, 1);
    CHECK_INT_EQ(out.verdicts[0].o.worst[0].d, 3);
    free(o);
    free(lse);
    kvf_oracle_result_free(&oracle);
    kvf_case_free(&c);
    kvf_spec_free(&s);
}

static void default_jobs(void) {
    kvf_campaign_opts o;
    kvf_campaign_opts_default(&o);
    const long cores[] = {0, 1, 2, 3, 4, 8, 16, 64, 1000};
    const int with_kernel[] = {1, 1, 2, 3, 3, 6, 12, 60, KVF_CAMPAIGN_MAX_JOBS - 4};
    const int oracle_only[] = {1, 1, 2, 3, 4, 8, 16, 64, KVF_CAMPAIGN_MAX_JOBS};
    for (size_t i = 0; i < sizeof cores / sizeof cores[0]; i++) {
        o.oracle_only = 0;
        CHECK_INT_EQ(kvf_campaign_default_jobs(&o, cores[i]), with_kernel[i]);
        o.oracle_only = 1;
        CHECK_INT_EQ(kvf_campaign_default_jobs(&o, cores[i]), oracle_only[i]);
    }
}

/* Overflow-class violations count only when asked for. */
static void overflow_needs_asking(void) {
    kvf_outcome out;
    kvf_rule rule;
    kvf_rule_parse(&rule, "strict", NULL);
    kvf_verdict v = {0};
    v.rule = rule;
    v.pass = 0;
    v.finding = KVF_FINDING_OVERFLOW;
    /* Judge-free check of the selection: fake one overflow verdict. */
    kvf_outcome_from_run(&out, KVF_RUN_OK, NULL);
    out.nrules = 1;
    out.verdicts[0] = v;
    int f[16];
    CHECK(kvf_outcome_features(&out, f) == 5);
    kvf_spec s = small_spec(1);
    s.recipe.logits = KVF_LOGITS_BEYOND_F32;
    kvf_limits cl = case_limits();
    kvf_case c;
    kvf_error err = {0};
    CHECK_OK(kvf_case_build(&c, &s, &cl, &err), &err);
    kvf_oracle_opts oo;
    kvf_oracle_opts_default(&oo);
    kvf_oracle_result oracle;
    CHECK_OK(kvf_oracle_run(&oracle, &c, &oo, &err), &err);
    kvf_bf16 *o = calloc((size_t)kvf_case_o_elems(&c), sizeof *o);
    float *lse = calloc((size_t)kvf_case_lse_elems(&c), sizeof *lse);
    /* All-zero output on overflow rows: wrong, but only in the overflow class. */
    CHECK_OK(kvf_outcome_judge(&out, &rule, 1, 0, &c, &oracle, o, lse, NULL, NULL, &err), &err);
    CHECK_INT_EQ(out.verdicts[0].finding, KVF_FINDING_OVERFLOW);
    CHECK_INT_EQ(out.finding, KVF_FINDING_NONE);
    CHECK_OK(kvf_outcome_judge(&out, &rule, 1, 1, &c, &oracle, o, lse, NULL, NULL, &err), &err);
    CHECK_INT_EQ(out.finding, KVF_FINDING_OVERFLOW);
    CHECK_INT_EQ(out.rule, 0);
    free(o);
    free(lse);
    kvf_oracle_result_free(&oracle);
    kvf_case_free(&c);
    kvf_spec_free(&s);
}

/* ---- the bounded queue ------------------------------------------------------------------- */

typedef struct queue_producer {
    kvf__queue *q;
    int base, n, refused;
} queue_producer;

static void *queue_produce(void *arg) {
    queue_producer *p = arg;
    for (int i = 0; i < p->n; i++) {
        /* Sizes 0 to 60 against the byte-bounded queue's 100: some items wait for bytes, some
         * for a count. */
        const size_t bytes = (size_t)((p->base + i) % 7) * 10;
        if (kvf__queue_push_sized(p->q, (void *)(intptr_t)(p->base + i + 1), bytes)) p->refused++;
    }
    return NULL;
}

static int freed_items;
static void count_free(void *item) {
    (void)item;
    freed_items++;
}

/* Many producers through a queue of 3 items and 100 bytes: every item comes out once, each
 * producer's in order (a lost wake-up hangs here); close drains, abort refuses, free releases
 * what is left. */
static void queue_bounded_mpmc(void) {
    kvf__queue q;
    CHECK(kvf__queue_init(&q, 3, 100) == 0);
    enum { P = 4, N = 2000 };
    queue_producer prod[P];
    pthread_t tid[P];
    for (int i = 0; i < P; i++) {
        prod[i] = (queue_producer){&q, i * N, N, 0};
        pthread_create(&tid[i], NULL, queue_produce, &prod[i]);
    }
    static int seen[P * N];
    memset(seen, 0, sizeof seen);
    int last[P];
    for (int i = 0; i < P; i++)
        last[i] = -1;
    int in_order = 1;
    for (int k = 0; k < P * N; k++) {
        int v = (int)(intptr_t)kvf__queue_pop(&q) - 1;
        CHECK(v >= 0 && v < P * N);
        if (v < 0 || v >= P * N) break;
        seen[v]++;
        if (v % N <= last[v / N]) in_order = 0;
        last[v / N] = v % N;
        CHECK(q.count <= 3);
    }
    for (int i = 0; i < P; i++)
        pthread_join(tid[i], NULL);
    int once = 1;
    for (int k = 0; k < P * N; k++)
        once &= seen[k] == 1;
    CHECK(once);
    CHECK(in_order);
    /* Closed: what is inside still comes out, then NULL; pushes are refused. */
    CHECK(kvf__queue_push(&q, (void *)1) == 0);
    kvf__queue_close(&q);
    CHECK(kvf__queue_push(&q, (void *)2) != 0);
    CHECK(kvf__queue_pop(&q) == (void *)1);
    CHECK(kvf__queue_pop(&q) == NULL);
    kvf__queue_free(&q, count_free);
    /* Aborted: pops return at once, the items stay for free. */
    CHECK(kvf__queue_init(&q, 2, 0) == 0);
    CHECK(kvf__queue_push(&q, (void *)1) == 0);
    kvf__queue_abort(&q);
    CHECK(kvf__queue_pop(&q) == NULL);
    freed_items = 0;
    kvf__queue_free(&q, count_free);
    CHECK_INT_EQ(freed_items, 1);
}

typedef struct sized_producer {
    kvf__queue *q;
    const size_t *sizes;
    int n;
} sized_producer;

static void *queue_produce_sized(void *arg) {
    sized_producer *p = arg;
    for (int i = 0; i < p->n; i++)
        kvf__queue_push_sized(p->q, (void *)(intptr_t)(i + 1), p->sizes[i]);
    return NULL;
}

/* The byte bound: pushes wait while the declared bytes would pass it, except into an empty
 * queue (an item larger than the bound alone still passes); every item comes out in order. */
static void queue_byte_bound(void) {
    kvf__queue q;
    CHECK(kvf__queue_init(&q, 8, 100) == 0);
    static const size_t sizes[] = {60, 60, 30, 200, 10, 100, 1};
    enum { N = (int)(sizeof sizes / sizeof sizes[0]) };
    sized_producer p = {&q, sizes, N};
    pthread_t tid;
    pthread_create(&tid, NULL, queue_produce_sized, &p);
    int most_items = 0;
    for (int k = 0; k < N; k++) {
        /* Let the producer fill what the bounds allow before each pop. */
        for (int spin = 0; spin < 200; spin++) {
            pthread_mutex_lock(&q.mu);
            const int full = q.count == N - k || q.count == 8 ||
                             (q.count > 0 && sizes[k + q.count] > 100 - q.bytes);
            pthread_mutex_unlock(&q.mu);
            if (full) break;
            usleep(1000);
        }
        pthread_mutex_lock(&q.mu);
        const int count = q.count;
        const size_t bytes = q.bytes;
        pthread_mutex_unlock(&q.mu);
        if (count > most_items) most_items = count;
        if (count > 1 && bytes > 100)
            CHECK_FAIL_AT("%d items hold %zu bytes, over 100", count, bytes);
        CHECK_INT_EQ((int)(intptr_t)kvf__queue_pop(&q), k + 1);
    }
    pthread_join(tid, NULL);
    CHECK(most_items >= 2); /* the small ones shared the queue */
    pthread_mutex_lock(&q.mu);
    CHECK(q.count == 0 && q.bytes == 0);
    pthread_mutex_unlock(&q.mu);
    kvf__queue_free(&q, NULL);
}

/* init / start / wait / free as separate steps; free without wait stops the threads. */
static void campaign_lifecycle(void) {
    FILE *log = fopen("/dev/null", "w");
    kvf_campaign_opts o;
    kvf_campaign_opts_default(&o);
    o.kernel = kvf_fuzz_kernel_find("cpu-ref");
    o.max_runs = 30;
    o.jobs = 1;
    o.log = log;
    kvf_campaign_stats st;
    kvf_error err = {0};
    kvf_campaign *cp = NULL;
    CHECK_OK(kvf_campaign_init(&cp, &o, &st, &err), &err);
    CHECK_OK(kvf_campaign_start(cp, &err), &err);
    CHECK_OK(kvf_campaign_wait(cp, &err), &err);
    kvf_campaign_free(cp);
    CHECK_INT_EQ(st.cases, 30);
    CHECK_INT_EQ(st.judged, 30);
    /* The oracle threads' busy time holds the oracle's and is all in once wait returns. */
    CHECK(st.oracle_s > 0 && st.judge_s >= st.oracle_s);
    /* Every case has a row at least; the MPFR rows are some of them. */
    CHECK(st.oracle_rows >= 30 && st.oracle_mpfr_rows >= 0 &&
          st.oracle_mpfr_rows <= st.oracle_rows);
    /* Started, never waited for: free stops it. */
    o.max_runs = 0;
    CHECK_OK(kvf_campaign_init(&cp, &o, &st, &err), &err);
    CHECK_OK(kvf_campaign_start(cp, &err), &err);
    kvf_campaign_free(cp);
    /* A failed init still leaves something to free. */
    o.kernel = NULL;
    CHECK(kvf_campaign_init(&cp, &o, &st, &err) == KVF_EINVAL);
    kvf_campaign_free(cp);
    fclose(log);
}

/* --max-findings: the campaign stops once that many signatures are found. */
static void campaign_stops_on_finding(void) {
    char dir[512], findings[600];
    make_tmp(dir, sizeof dir);
    snprintf(findings, sizeof findings, "%s/findings", dir);
    FILE *log = fopen("/dev/null", "w");
    kvf_campaign_opts o;
    kvf_campaign_opts_default(&o);
    o.kernel = kvf_fuzz_kernel_find("test-planted");
    o.max_runs = 20000;
    o.max_findings = 1;
    o.jobs = 2;
    o.seed = 7;
    o.findings_dir = findings;
    o.log = log;
    kvf_campaign_stats st;
    kvf_error err = {0};
    CHECK_OK(kvf_campaign_run(&o, &st, &err), &err);
    CHECK(st.findings_new >= 1);
    /* What was in flight when it stopped may add a few signatures, not hundreds of cases. */
    CHECK(st.cases < 2000);
    fclose(log);
    rm_tree(dir);
}

/* Reach: the share of the oracle work asked for goes to large cases, which reach 32,768-token
 * sequences and batches of 64 and more; with large_share 0 nothing is past the small budget. */
static void campaign_reaches_long_and_wide(void) {
    FILE *log = fopen("/dev/null", "w");
    kvf_campaign_opts o;
    kvf_campaign_opts_default(&o);
    o.kernel = kvf_fuzz_kernel_find("cpu-splitkv");
    o.oracle_only = 1;   /* what is generated is the point, not the kernel */
    o.large_share = 0.9; /* many large cases in a short run, */
    o.large.max_work = o.large.max_pool_elems = (int64_t)1 << 21; /* cheaper ones */
    o.max_runs = 60;
    o.jobs = 2;
    o.generators = 1;
    o.seed = 11;
    o.log = log;
    kvf_campaign_stats st;
    kvf_error err = {0};
    CHECK_OK(kvf_campaign_run(&o, &st, &err), &err);
    CHECK(st.large_cases > 0);
    CHECK(st.longest_seq >= 32768);
    CHECK(st.largest_batch >= 64);
    double share = st.work_large / (st.work_large + st.work_small);
    CHECK(share > 0.8 && share < 0.97); /* the share asked for, give or take one large case */
    o.large_share = 0;
    o.max_runs = 300;
    CHECK_OK(kvf_campaign_run(&o, &st, &err), &err);
    CHECK_INT_EQ(st.large_cases, 0);
    CHECK(st.longest_seq <= 8 * 256);
    CHECK(st.largest_batch <= 4);
    fclose(log);
}

/* A running campaign takes in corpus files that appear in its folder (another campaign's),
 * and only those: its own new entries are not read back. */
static void campaign_reloads_corpus(void) {
    char dir[512], corpus[600];
    make_tmp(dir, sizeof dir);
    snprintf(corpus, sizeof corpus, "%s/corpus", dir);
    CHECK(mkdir(corpus, 0700) == 0);
    FILE *log = fopen("/dev/null", "w");
    kvf_campaign_opts o;
    kvf_campaign_opts_default(&o);
    o.kernel = kvf_fuzz_kernel_find("cpu-ref");
    o.time_limit_s = 2;
    o.reload_s = 0.2;
    o.jobs = 1;
    o.seed = 5;
    o.corpus_dir = corpus;
    o.log = log;
    kvf_campaign_stats st;
    kvf_error err = {0};
    kvf_campaign *cp = NULL;
    CHECK_OK(kvf_campaign_init(&cp, &o, &st, &err), &err);
    CHECK_OK(kvf_campaign_start(cp, &err), &err);
    struct timespec ts = {0, 500000000};
    nanosleep(&ts, NULL);
    /* Another campaign's entries: three small valid cases under names of their own. */
    for (int i = 0; i < 3; i++) {
        kvf_spec s = small_spec(100 + (uint64_t)i);
        char path[700];
        snprintf(path, sizeof path, "%s/other-%d.kvfz", corpus, i);
        CHECK_OK(kvf_spec_save(&s, path, &err), &err);
        kvf_spec_free(&s);
    }
    CHECK_OK(kvf_campaign_wait(cp, &err), &err);
    kvf_campaign_free(cp);
    CHECK_INT_EQ(st.corpus_reloaded, 3);
    CHECK(st.corpus_added > 0);
    fclose(log);
    rm_tree(dir);
}

/* Temporary files of an interrupted write are removed once old enough, and nothing else. */
static void stale_temps_removed(void) {
    char dir[512];
    make_tmp(dir, sizeof dir);
    const char *names[] = {".stats-x.json.tmp.AbC123",
                           ".kvfuzz-write-check.q1W2e3",
                           ".stats-x.json.tmp.ZZZ999",
                           "keep.kvfz",
                           ".hidden",
                           "a.tmp.123456",
                           ".crash-0123456789ab.tmp.4242.7"};
    for (int i = 0; i < 7; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "w");
        CHECK(f != NULL);
        if (f) fclose(f);
        if (i != 2) { /* all but one are two hours old */
            struct timespec times[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
            utimensat(AT_FDCWD, path, times, 0);
        }
    }
    CHECK_INT_EQ(kvf_fuzz_remove_stale_temps(dir, 60), 3);
    int hidden = 0;
    CHECK_INT_EQ(count_files(dir, NULL, &hidden), 2); /* keep.kvfz, a.tmp.123456 */
    CHECK_INT_EQ(hidden, 2);                          /* the young temp, .hidden */
    rm_tree(dir);
}

static const check_test tests[] = {
    {"mutations_stay_valid", mutations_stay_valid},
    {"lengths_jump_to_edges", lengths_jump_to_edges},
    {"pool_estimate_bounds_the_generator", pool_estimate_bounds_the_generator},
    {"values_stay_in_domain", values_stay_in_domain},
    {"crossover_is_valid", crossover_is_valid},
    {"buckets", buckets},
    {"signatures_and_saving", signatures_and_saving},
    {"runner_survives_crash_and_hang", runner_survives_crash_and_hang},
    {"runner_without_restart", runner_without_restart},
    {"worker_pages_between_cases", worker_pages_between_cases},
    {"runner_lanes", runner_lanes},
    {"runner_cuda_lanes", runner_cuda_lanes},
    {"campaign_finds_and_minimizes_planted_bug", campaign_finds_and_minimizes_planted_bug},
    {"overflow_needs_asking", overflow_needs_asking},
    {"beyond_f32_finding_signature", beyond_f32_finding_signature},
    {"default_jobs", default_jobs},
    {"campaign_confirms_crashes", campaign_confirms_crashes},
    {"queue_bounded_mpmc", queue_bounded_mpmc},
    {"queue_byte_bound", queue_byte_bound},
    {"campaign_lifecycle", campaign_lifecycle},
    {"campaign_stops_on_finding", campaign_stops_on_finding},
    {"campaign_reaches_long_and_wide", campaign_reaches_long_and_wide},
    {"campaign_reloads_corpus", campaign_reloads_corpus},
    {"stale_temps_removed", stale_temps_removed},
    {NULL, NULL},
};

CHECK_MAIN(tests)
