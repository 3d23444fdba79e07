/* Unit tests of the oracle's fast path (oracle/src/oracle_fast.c) against its MPFR path: both
 * paths on the committed seed cases, on constructed exact ties, and on 10^5 generated cases,
 * asserting bit-identical rounded outputs and row data and agreement of the high-precision
 * values within their documented errors; the same bits on any number of threads; rows streamed
 * (the MPFR path byte-identical to stored rows, the fast path still agreeing); one workspace
 * reused across shapes. The fast path's arithmetic: tests/test_fastmath.c. Run one test by
 * name: test_oracle_fast NAME. */
#include "check.h"

#include <dirent.h>
#include <mpfr.h>

#include "../oracle/src/oracle_fast.h"
#include "../oracle/src/row_store.h"
#include "fast_rng.h"
#include "kvfuzz/mutate.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/spec.h"

/* ---- the two paths ------------------------------------------------------------------------ */

typedef struct tally {
    long cases, rows, fast_rows, fallback_rows, ties, mismatches;
} tally;

static int run_path(kvf_oracle_result *r, const kvf_case *c, int path) {
    kvf_oracle_opts o;
    kvf_oracle_opts_default(&o);
    o.path = path;
    kvf_error err;
    kvf_error_clear(&err);
    int rc = kvf_oracle_run(r, c, &o, &err);
    CHECK_OK(rc, &err);
    return rc;
}

static int same_double(double a, double b) {
    return memcmp(&a, &b, sizeof a) == 0;
}

/* Asserts bit-identical rounded outputs and row data, and the high-precision values within the
 * bounds the judge relies on (oracle.h): o_exact and lse_exact within 2^-40 (C + |x|) of each
 * other (each is within about 2^-45 of the exact value, far inside the judge's 2^-24), plus
 * 2^-900 for o (results below the doubles' range, where the fast path's products underflow),
 * o_cond within a relative 2^-30 (both are sums of L positive terms in double) plus 2^-900
 * (weights below e^-700 count as 0 in the fast path, as a double holds nothing of them). */
static void compare(const kvf_case *c, const char *what, tally *t) {
    kvf_oracle_result m, f;
    if (run_path(&m, c, KVF_ORACLE_MPFR)) return;
    if (run_path(&f, c, KVF_ORACLE_FAST)) {
        kvf_oracle_result_free(&m);
        return;
    }
    long rows = (long)c->batch_size * c->num_qo_heads, bad = 0;
    int32_t D = c->head_dim;
    for (long row = 0; row < rows && bad < 3; row++) {
        const kvf_oracle_row *a = &m.rows[row], *b = &f.rows[row];
        if (a->length != b->length || !same_double(a->logit_abs_max, b->logit_abs_max) ||
            !same_double(a->dot_abs_max, b->dot_abs_max) ||
            !same_double(a->v_abs_max, b->v_abs_max) || a->overflow != b->overflow ||
            a->nonfinite_input != b->nonfinite_input) {
            CHECK_FAIL_AT("%s: row %ld data: logit %a/%a dot %a/%a v %a/%a ovf %d/%d", what, row,
                          a->logit_abs_max, b->logit_abs_max, a->dot_abs_max, b->dot_abs_max,
                          a->v_abs_max, b->v_abs_max, a->overflow, b->overflow);
            bad++;
        }
        if (kvf_f32_bits(m.lse_rounded[row]) != kvf_f32_bits(f.lse_rounded[row])) {
            CHECK_FAIL_AT("%s: lse[%ld]: mpfr %a, fast %a", what, row, m.lse_rounded[row],
                          f.lse_rounded[row]);
            bad++;
        }
        double le = m.lse_exact[row], lf = f.lse_exact[row];
        if (!(le == lf || (isnan(le) && isnan(lf)) || fabs(le - lf) <= 0x1p-40 * (1 + fabs(le)))) {
            CHECK_FAIL_AT("%s: lse_exact[%ld]: mpfr %a, fast %a", what, row, le, lf);
            bad++;
        }
        for (int32_t d = 0; d < D; d++) {
            long i = row * D + d;
            if (m.o_rounded[i] != f.o_rounded[i]) {
                CHECK_FAIL_AT("%s: o[%ld][%d]: mpfr %04x, fast %04x (exact %a)", what, row, d,
                              m.o_rounded[i], f.o_rounded[i], m.o_exact[i]);
                bad++;
            }
            double xe = m.o_exact[i], xf = f.o_exact[i], ce = m.o_cond[i], cf = f.o_cond[i];
            if (!(xe == xf || (isnan(xe) && isnan(xf)) ||
                  fabs(xe - xf) <= 0x1p-40 * (fabs(ce) + fabs(xe)) + 0x1p-900)) {
                CHECK_FAIL_AT("%s: o_exact[%ld][%d]: mpfr %a, fast %a", what, row, d, xe, xf);
                bad++;
            }
            if (!(ce == cf || (isnan(ce) && isnan(cf)) ||
                  fabs(ce - cf) <= 0x1p-30 * fabs(ce) + 0x1p-900)) {
                CHECK_FAIL_AT("%s: o_cond[%ld][%d]: mpfr %a, fast %a", what, row, d, ce, cf);
                bad++;
            }
        }
    }
    CHECK_INT_EQ(m.fast_rows, 0);
    CHECK_INT_EQ(m.fallback_rows, 0);
    CHECK_INT_EQ(f.fast_rows + f.fallback_rows, rows);
    t->cases++;
    t->rows += rows;
    t->fast_rows += f.fast_rows;
    t->fallback_rows += f.fallback_rows;
    t->ties += m.exact_ties;
    t->mismatches += bad;
    kvf_oracle_result_free(&m);
    kvf_oracle_result_free(&f);
}

static void print_tally(const char *what, const tally *t) {
    printf("%s: %ld cases, %ld rows, %ld fast, %ld fallback (%.3f%%), %ld exact ties\n", what,
           t->cases, t->rows, t->fast_rows, t->fallback_rows,
           t->rows ? 100.0 * (double)t->fallback_rows / (double)t->rows : 0.0, t->ties);
}

/* What a test asserts about one case (compare or check_streamed). */
typedef void (*case_check)(const kvf_case *c, const char *what, tally *t);

/* check on every seed case (corpus/seeds) of at most max_len tokens per sequence. */
static void run_seeds(case_check check, tally *t, int64_t max_len) {
    const char *src = getenv("KVF_SOURCE_DIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/corpus/seeds", src ? src : ".");
    DIR *dh = opendir(dir);
    CHECK(dh != NULL);
    if (!dh) return;
    struct dirent *de;
    while ((de = readdir(dh))) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 5, ".kvfz") != 0) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        kvf_limits lim;
        kvf_limits_default(&lim);
        kvf_case c;
        kvf_error err;
        int rc = kvf_case_load(path, NULL, &c, &lim, &err);
        CHECK_OK(rc, &err);
        if (rc) continue;
        if (kvf_case_max_seq_len(&c) <= max_len) check(&c, de->d_name, t);
        kvf_case_free(&c);
    }
    closedir(dh);
}

static void test_seed_cases(void) {
    tally t = {0};
    run_seeds(compare, &t, INT64_MAX);
    CHECK(t.cases >= 17);
    CHECK(t.fast_rows > 0);
    print_tally("seeds", &t);
}

/* Exact ties built on purpose: equal logits (every key equal) with v values whose mean is a
 * bf16 midpoint, an exact zero (v and -v), and near misses one value away; and two logit
 * groups whose means are both the midpoint. Case k of a fixed sequence (the test's PRNG). */
static int build_tie_case(kvf_case *c, int k) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    int64_t L = 2 + (int64_t)(rng_next() % 7);
    kvf_error err;
    int32_t D = 8;
    int rc = kvf_case_alloc(c, 2, 1, D, 4, 1, (L + 3) / 4, (L + 3) / 4, &lim, &err);
    CHECK_OK(rc, &err);
    if (rc) return rc;
    for (int32_t i = 0; i < (int32_t)((L + 3) / 4); i++)
        c->kv_indices[i] = i;
    c->kv_indptr[0] = 0;
    c->kv_indptr[1] = (int32_t)((L + 3) / 4);
    c->kv_last_page_len[0] = (int32_t)(L - ((L + 3) / 4 - 1) * 4);
    c->sm_scale = 0.25f;
    for (int32_t d = 0; d < D; d++) {
        c->q[d] = kvf_f32_to_bf16_rne((float)(rng_unit() - 0.5));
        c->q[D + d] = kvf_f32_to_bf16_rne((float)(rng_unit() - 0.5));
    }
    int two_groups = k % 4 == 3;
    for (int64_t tk = 0; tk < L; tk++)
        for (int32_t d = 0; d < D; d++)
            c->k_cache[kvf_case_kv_offset(c, 0, tk, 0, d)] =
                two_groups && tk >= 2 ? c->q[d] : (kvf_bf16)0x3F80u; /* 1.0 */
    for (int32_t d = 0; d < D; d++) {
        /* Column d: adjacent bf16 values a, a+ulp in pairs (mean: the midpoint), or v, -v
         * (mean 0), or a triple that misses the midpoint. */
        kvf_bf16 a = (kvf_bf16)(0x3C00u + (rng_next() % 0x800u));
        if (rng_next() & 1) a |= 0x8000u;
        kvf_bf16 a2 = (kvf_bf16)(a + 1);
        int mode = (int)(rng_next() % 3);
        for (int64_t tk = 0; tk < L; tk++) {
            kvf_bf16 v;
            if (mode == 0)
                v = (tk & 1) ? a2 : a;
            else if (mode == 1)
                v = (tk & 1) ? (kvf_bf16)(a ^ 0x8000u) : a;
            else
                v = tk == 0 ? a2 : a;
            if ((L & 1) && tk == L - 1 && mode != 2) v = tk & 1 ? a2 : a;
            c->v_cache[kvf_case_kv_offset(c, 0, tk, 0, d)] = v;
        }
    }
    return 0;
}

/* The fast path must hand every tie to MPFR or decide it exactly (F8). */
static void test_exact_ties(void) {
    tally t = {0};
    for (int k = 0; k < 400; k++) {
        kvf_case c;
        if (build_tie_case(&c, k)) return;
        compare(&c, "tie case", &t);
        kvf_case_free(&c);
    }
    print_tally("ties", &t);
    CHECK(t.ties > 100);
    CHECK(t.fast_rows > 100); /* decided exactly without MPFR (F8) */
}

/* A generated case small enough for the MPFR path to keep up: kvf_spec_random at `seed` with
 * at most 2 sequences of 2 pages and 8 tokens, fitted to small shapes as the campaign fits a
 * spec into its budget (small pools keep generation cheap). Nonzero when the seed gives no
 * case. */
static int small_random_case(kvf_case *c, uint64_t seed, kvf_error *err) {
    kvf_random_opts ro;
    kvf_random_opts_default(&ro);
    ro.max_batch = 2;
    ro.max_pages = 2;
    ro.max_tokens = 8;
    ro.max_work = 8 * 2 * 64;
    ro.allow_high_ids = 0; /* sparse pools past 65535 pages: generation time, nothing new here */
    kvf_mutate_limits ml;
    kvf_mutate_limits_default(&ml);
    ml.max_page_size = 16;
    ml.max_head_dim = 64;
    ml.max_group = 8;
    ml.max_kv_heads = 2;
    ml.max_pool_elems = 4096;
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_spec s;
    if (kvf_spec_random(&s, seed, &ro, err)) return 1;
    kvf_spec_fit(&s, &ml);
    int rc = kvf_case_build(c, &s, &lim, err);
    kvf_spec_free(&s);
    return rc;
}

/* 10^5 generated cases, small enough for the MPFR path to keep up: every strategy, logit shape
 * and distribution of kvf_spec_random, seeds 1..100000. */
/* check on the first n cases small_random_case gives (seeds 1, 2, ...), stopping early after
 * more than 20 mismatches. */
static void run_generated(long n, case_check check, tally *t) {
    long built = 0;
    for (uint64_t seed = 1; built < n; seed++) {
        kvf_case c;
        kvf_error err;
        if (small_random_case(&c, seed, &err)) continue;
        built++;
        char what[64];
        snprintf(what, sizeof what, "seed %llu", (unsigned long long)seed);
        check(&c, what, t);
        kvf_case_free(&c);
        if (t->mismatches > 20) break;
    }
}

static void test_generated(void) {
    const char *env = getenv("KVF_FAST_CASES");
    long n = env ? atol(env) : 100000;
    tally t = {0};
    run_generated(n, compare, &t);
    print_tally("generated", &t);
    CHECK(t.cases >= n);
    CHECK(t.fast_rows > t.fallback_rows);
}

/* The fast path gives the same bits on any number of threads (rows are shared out by kv group;
 * the seed case has 4 groups of 5 heads). */
static void test_threads_agree(void) {
    const char *src = getenv("KVF_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/corpus/seeds/00-seed-h20kv4.kvfz", src ? src : ".");
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_case c;
    kvf_error err;
    int rc = kvf_case_load(path, NULL, &c, &lim, &err);
    CHECK_OK(rc, &err);
    if (rc) return;
    kvf_oracle_result r[2];
    for (int k = 0; k < 2; k++) {
        kvf_oracle_opts o;
        kvf_oracle_opts_default(&o);
        o.path = KVF_ORACLE_FAST;
        o.threads = k ? 3 : 1;
        rc = kvf_oracle_run(&r[k], &c, &o, &err);
        CHECK_OK(rc, &err);
        if (rc) {
            if (k) kvf_oracle_result_free(&r[0]);
            kvf_case_free(&c);
            return;
        }
    }
    size_t no = (size_t)kvf_case_o_elems(&c), nl = (size_t)kvf_case_lse_elems(&c);
    CHECK(memcmp(r[0].o_rounded, r[1].o_rounded, no * 2) == 0);
    CHECK(memcmp(r[0].o_exact, r[1].o_exact, no * 8) == 0);
    CHECK(memcmp(r[0].o_cond, r[1].o_cond, no * 8) == 0);
    CHECK(memcmp(r[0].lse_rounded, r[1].lse_rounded, nl * 4) == 0);
    CHECK(memcmp(r[0].lse_exact, r[1].lse_exact, nl * 8) == 0);
    CHECK(memcmp(r[0].rows, r[1].rows, nl * sizeof(kvf_oracle_row)) == 0);
    CHECK_INT_EQ(r[1].fast_rows + r[1].fallback_rows, (long)nl);
    kvf_oracle_result_free(&r[0]);
    kvf_oracle_result_free(&r[1]);
    kvf_case_free(&c);
}

/* Streamed rows (docs/oracle.md, "Memory"): with the store limit lowered so that rows stream in
 * blocks of one and of three tokens, the MPFR path must give exactly the bits it gives on
 * stored rows (every output array, byte for byte: the same exact sums, rounded once), and the
 * fast path must still agree with it as compare() demands. The cases: the seeds, the
 * constructed ties (groups of equal logits on streamed rows) and generated cases. */
static void check_streamed(const kvf_case *c, const char *what, tally *t) {
    const int64_t limits[] = {0, 3 * KVF_ORACLE_MPFR_TOKEN_BYTES};
    kvf_oracle_result ref;
    if (run_path(&ref, c, KVF_ORACLE_MPFR)) return;
    size_t no = (size_t)kvf_case_o_elems(c), nl = (size_t)kvf_case_lse_elems(c);
    for (size_t k = 0; k < sizeof limits / sizeof limits[0]; k++) {
        kvf__row_store_bytes = limits[k];
        kvf_oracle_result m;
        if (run_path(&m, c, KVF_ORACLE_MPFR) == 0) {
            int same = memcmp(ref.o_rounded, m.o_rounded, no * 2) == 0 &&
                       memcmp(ref.o_exact, m.o_exact, no * 8) == 0 &&
                       memcmp(ref.o_cond, m.o_cond, no * 8) == 0 &&
                       memcmp(ref.lse_rounded, m.lse_rounded, nl * 4) == 0 &&
                       memcmp(ref.lse_exact, m.lse_exact, nl * 8) == 0 &&
                       memcmp(ref.rows, m.rows, nl * sizeof(kvf_oracle_row)) == 0 &&
                       ref.exact_ties == m.exact_ties;
            if (!same)
                CHECK_FAIL_AT("%s: streamed MPFR (limit %lld) differs from stored", what,
                              (long long)limits[k]);
            kvf_oracle_result_free(&m);
        }
        compare(c, what, t);
    }
    kvf__row_store_bytes = KVF_ORACLE_ROW_STORE_BYTES;
    kvf_oracle_result_free(&ref);
}

static void test_streamed(void) {
    tally t = {0};
    /* The long seeds take the MPFR path a second each per pass: only the shorter ones. */
    run_seeds(check_streamed, &t, 4096);
    for (int k = 0; k < 100; k++) {
        kvf_case c;
        build_tie_case(&c, k);
        check_streamed(&c, "tie case", &t);
        kvf_case_free(&c);
    }
    run_generated(2000, check_streamed, &t);
    print_tally("streamed", &t);
    CHECK(t.ties > 50);
    CHECK(t.fallback_rows > 0); /* F8 on a streamed row goes to MPFR */
}

/* One case of G tokens x L rows on page size 16, with small integer-valued k and v. */
static int reuse_case(kvf_case *c, int32_t hq, int64_t L) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_error err;
    const int64_t n = (L + 15) / 16;
    int rc = kvf_case_alloc(c, hq, 1, 4, 16, 1, n, n, &lim, &err);
    CHECK_OK(rc, &err);
    if (rc) return rc;
    c->kv_indptr[0] = 0;
    c->kv_indptr[1] = (int32_t)n;
    for (int64_t i = 0; i < n; i++)
        c->kv_indices[i] = (int32_t)(n - 1 - i);
    c->kv_last_page_len[0] = (int32_t)(L - (n - 1) * 16);
    c->sm_scale = 0.125f;
    for (int64_t i = 0; i < kvf_case_q_elems(c); i++)
        c->q[i] = kvf_f32_to_bf16_rne((float)((int)(rng_next() % 9) - 4));
    for (int64_t i = 0; i < n * kvf_case_page_elems(c); i++) {
        c->k_cache[i] = kvf_f32_to_bf16_rne((float)((int)(rng_next() % 9) - 4));
        c->v_cache[i] = kvf_f32_to_bf16_rne((float)((int)(rng_next() % 17) - 8) * 0.25f);
    }
    rc = kvf_case_validate(c, &lim, &err);
    CHECK_OK(rc, &err);
    return rc;
}

/* One fast workspace across cases of different shapes: a group of 4 with 100 tokens, then a
 * group of 1 with 400 (more token offsets than the first case needed, fewer values), then the
 * first again. Every row it certifies matches the MPFR path. */
static void test_workspace_reuse(void) {
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    mpfr_set_emin(mpfr_get_emin_min());
    mpfr_set_emax(mpfr_get_emax_max());
    kvf_case cs[2];
    kvf_oracle_result want[2], got[2];
    const int32_t hq[2] = {4, 1};
    const int64_t len[2] = {100, 400};
    kvf_oracle_opts o;
    kvf_oracle_opts_default(&o);
    o.path = KVF_ORACLE_MPFR;
    kvf_error err;
    for (int k = 0; k < 2; k++) {
        if (reuse_case(&cs[k], hq[k], len[k])) return;
        CHECK_OK(kvf_oracle_run(&want[k], &cs[k], &o, &err), &err);
        CHECK_OK(kvf_oracle_run(&got[k], &cs[k], &o, &err), &err); /* outputs sized for it */
        memset(got[k].o_rounded, 0xFF, (size_t)hq[k] * 4 * sizeof *got[k].o_rounded);
        memset(got[k].lse_rounded, 0xFF, (size_t)hq[k] * sizeof *got[k].lse_rounded);
    }
    kvf__fast_ws *ws = kvf__fast_ws_new();
    CHECK(ws != NULL);
    long certified = 0;
    for (int step = 0; ws && step < 3; step++) {
        const int k = step % 2;
        const unsigned char *done = kvf__fast_group(ws, &cs[k], 0, 0, &got[k]);
        CHECK(done != NULL);
        for (int32_t h = 0; done && h < hq[k]; h++) {
            if (!done[h]) continue;
            certified++;
            for (int32_t d = 0; d < 4; d++)
                CHECK_HEX_EQ(got[k].o_rounded[h * 4 + d], want[k].o_rounded[h * 4 + d]);
            CHECK_INT_EQ(kvf_f32_bits(got[k].lse_rounded[h]), kvf_f32_bits(want[k].lse_rounded[h]));
        }
    }
    CHECK(certified > 0);
    kvf__fast_ws_free(ws);
    for (int k = 0; k < 2; k++) {
        kvf_oracle_result_free(&want[k]);
        kvf_oracle_result_free(&got[k]);
        kvf_case_free(&cs[k]);
    }
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
}

static const check_test tests[] = {
    {"threads_agree", test_threads_agree},
    {"seed_cases", test_seed_cases},
    {"exact_ties", test_exact_ties},
    {"generated", test_generated},
    {"streamed", test_streamed},
    {"workspace_reuse", test_workspace_reuse},
    {NULL, NULL},
};

CHECK_MAIN(tests)
