/* Unit tests of the MPFR oracle (oracle/src/oracle.c) against itself and independent
 * references on random cases: working precisions and thread counts agree, GQA grouping, a
 * shuffled and poisoned pool gives the contiguous layout's bits, a long double evaluation of
 * the definition agrees within its error; the seed workload timed; each case also streamed. */
#include <float.h>
#include <time.h>

#include "oracle_hand.h"

/* A small deterministic generator (xorshift64*), independent of core's PRNG. */
static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static uint64_t rng_next(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Du;
}
/* Uniform in (-scale, scale), rounded to bf16. */
static kvf_bf16 rnd_bf16(double scale) {
    double u = (double)(rng_next() >> 11) * 0x1p-53;
    return bf((float)((2 * u - 1) * scale));
}

/* A random case: B sequences with lengths up to maxlen, Hq = 4, Hk = 2, D = 16, S = 4. */
static int random_case(kvf_case *c, int32_t batch, int64_t maxlen, double qs, double ks,
                       double vs) {
    int64_t len[8];
    for (int32_t b = 0; b < batch; b++)
        len[b] = (int64_t)(rng_next() % (uint64_t)maxlen) + 1;
    if (build(c, 4, 2, 16, 4, batch, len, 1)) return -1;
    for (int64_t i = 0; i < kvf_case_q_elems(c); i++)
        c->q[i] = rnd_bf16(qs);
    for (int32_t b = 0; b < batch; b++)
        for (int64_t t = 0; t < len[b]; t++)
            for (int32_t g = 0; g < 2; g++)
                for (int32_t d = 0; d < 16; d++) {
                    *kat(c, b, t, g, d) = rnd_bf16(ks);
                    *vat(c, b, t, g, d) = rnd_bf16(vs);
                }
    return 0;
}

/* Working precisions 64 and 256 (and 24) certify the same bits; exact values agree within the
 * bound 2^-p (5 cond + 2|o|) of the lower precision. */
static void test_precisions_agree(void) {
    const double scales[4][3] = {{1, 1, 1}, {4, 4, 0.01}, {16, 8, 100}, {0.1, 0.1, 1e-30}};
    for (int it = 0; it < 12; it++) {
        kvf_case c;
        const double *sc = scales[it % 4];
        if (random_case(&c, 3, 40, sc[0], sc[1], sc[2])) return;
        kvf_oracle_result a, b, lo;
        if (run(&a, &c, 64, 0) || run(&b, &c, 256, 0) || run(&lo, &c, 24, 0)) return;
        CHECK(b.max_precision_used >= 256);
        for (int64_t i = 0; i < kvf_case_o_elems(&c); i++) {
            CHECK_HEX_EQ(a.o_rounded[i], b.o_rounded[i]);
            CHECK_HEX_EQ(lo.o_rounded[i], b.o_rounded[i]);
            double tol =
                0x1p-60 * (5 * a.o_cond[i] + 2 * fabs(a.o_exact[i])) + 0x1p-52 * fabs(b.o_exact[i]);
            if (!(fabs(a.o_exact[i] - b.o_exact[i]) <= tol))
                CHECK_FAIL_AT("o_exact[%lld]: %a vs %a (tol %g)", (long long)i, a.o_exact[i],
                              b.o_exact[i], tol);
        }
        for (int64_t i = 0; i < kvf_case_lse_elems(&c); i++) {
            CHECK_HEX_EQ(kvf_f32_bits(a.lse_rounded[i]), kvf_f32_bits(b.lse_rounded[i]));
            CHECK_HEX_EQ(kvf_f32_bits(lo.lse_rounded[i]), kvf_f32_bits(b.lse_rounded[i]));
            CHECK(fabs(a.lse_exact[i] - b.lse_exact[i]) <= 0x1p-52 * (1 + fabs(b.lse_exact[i])));
        }
        kvf_oracle_result_free(&a);
        kvf_oracle_result_free(&b);
        kvf_oracle_result_free(&lo);
        kvf_case_free(&c);
    }
}

/* q head h reads kv head h / G (G = 3 here), never h % Hk. */
static void test_gqa_grouping(void) {
    kvf_case c;
    int64_t len[1] = {5};
    if (build(&c, 6, 2, 2, 4, 1, len, 0)) return;
    for (int32_t h = 0; h < 6; h++)
        *qat(&c, 0, h, 0) = bf(0.25f * (float)(h + 1));
    for (int64_t t = 0; t < 5; t++)
        for (int32_t g = 0; g < 2; g++) {
            *kat(&c, 0, t, g, 0) = bf(g ? -(float)t : (float)t);
            *vat(&c, 0, t, g, 0) = bf((float)(g + 1)); /* constant per kv head */
            *vat(&c, 0, t, g, 1) = bf((float)(t * (g ? 3 : 1)));
        }
    kvf_oracle_result r;
    if (run(&r, &c, 0, 0)) return;
    mpfr_t ref;
    mpfr_init2(ref, 400);
    for (int32_t h = 0; h < 6; h++) {
        CHECK_HEX_EQ(r.o_rounded[h * 2 + 0], bf((float)(h / 3 + 1)));
        ref_lse(ref, &c, 0, h);
        CHECK_HEX_EQ(kvf_f32_bits(r.lse_rounded[h]), kvf_f32_bits(ref_round_f32(ref)));
    }
    mpfr_clear(ref);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

/* The same tokens in a shuffled pool with poisoned (NaN / inf) tail slots and spare pages give
 * the same bits as the contiguous layout. */
static void test_shuffled_pages(void) {
    const int32_t S = 3, D = 4;
    const int64_t L = 10; /* 4 pages, last holds 1 */
    kvf_case a, b;
    int64_t len[1] = {L};
    if (build(&a, 2, 1, D, S, 1, len, 0)) return;
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_error err;
    CHECK_OK(kvf_case_alloc(&b, 2, 1, D, S, 1, 4, 9, &lim, &err), &err);
    const int32_t perm[4] = {7, 2, 5, 0};
    for (int i = 0; i < 4; i++)
        b.kv_indices[i] = perm[i];
    b.kv_last_page_len[0] = 1;
    for (int64_t i = 0; i < kvf_case_q_elems(&a); i++)
        a.q[i] = b.q[i] = rnd_bf16(2);
    /* Poison the whole pool of b first, then write the real tokens. */
    for (size_t i = 0; i < b.pool_bytes / 2; i++) {
        b.k_cache[i] = (i % 3) ? KVF_BF16_QNAN : KVF_BF16_POS_INF;
        b.v_cache[i] = (i % 2) ? KVF_BF16_NEG_INF : KVF_BF16_QNAN;
    }
    for (int64_t t = 0; t < L; t++)
        for (int32_t d = 0; d < D; d++) {
            kvf_bf16 k = rnd_bf16(2), v = rnd_bf16(3);
            *kat(&a, 0, t, 0, d) = *kat(&b, 0, t, 0, d) = k;
            *vat(&a, 0, t, 0, d) = *vat(&b, 0, t, 0, d) = v;
        }
    CHECK_OK(kvf_case_validate(&b, &lim, &err), &err);
    kvf_oracle_result ra, rb;
    if (run(&ra, &a, 0, 0) || run(&rb, &b, 0, 0)) return;
    for (int64_t i = 0; i < kvf_case_o_elems(&a); i++) {
        CHECK_HEX_EQ(ra.o_rounded[i], rb.o_rounded[i]);
        CHECK_DBL_EQ(ra.o_exact[i], rb.o_exact[i]);
    }
    for (int h = 0; h < 2; h++) {
        CHECK_HEX_EQ(kvf_f32_bits(ra.lse_rounded[h]), kvf_f32_bits(rb.lse_rounded[h]));
        CHECK_INT_EQ(rb.rows[h].nonfinite_input, 0);
    }
    kvf_oracle_result_free(&ra);
    kvf_oracle_result_free(&rb);
    kvf_case_free(&a);
    kvf_case_free(&b);
}

/* Against a long double evaluation of the definition on benign random cases. Its error: the
 * D = 16 products are exact and their sum loses at most D eps |q||k| (eps = LDBL_EPSILON), so a
 * logit is off by < 16 eps * 256 here (|q|, |k| < 4); expl adds a few eps relative to each
 * weight, so o is within ~(2^12 + L) eps (C + |o|) and lse within ~(2^12 + L) eps (1 + |lse|).
 * The tolerance is 2^14 eps times those scales. */
static void test_long_double_reference(void) {
    const long double eps = LDBL_EPSILON;
    for (int it = 0; it < 10; it++) {
        kvf_case c;
        if (random_case(&c, 4, 60, 4, 4, 2)) return;
        kvf_oracle_result r;
        if (run(&r, &c, 0, 0)) return;
        for (int32_t b = 0; b < c.batch_size; b++) {
            int64_t L = kvf_case_seq_len(&c, b);
            for (int32_t h = 0; h < 4; h++) {
                int32_t g = h / 2;
                long double s[64], mx = -INFINITY, z = 0;
                for (int64_t t = 0; t < L; t++) {
                    long double acc = 0;
                    for (int32_t d = 0; d < 16; d++)
                        acc += (long double)dv(*qat(&c, b, h, d)) * dv(*kat(&c, b, t, g, d));
                    s[t] = acc * (long double)c.sm_scale;
                    if (s[t] > mx) mx = s[t];
                }
                for (int64_t t = 0; t < L; t++)
                    z += expl(s[t] - mx);
                long double lse = (mx + logl(z)) / logl(2.0L);
                size_t row = (size_t)b * 4 + (size_t)h;
                long double lse_tol = 0x1p14L * eps * (1 + fabsl(lse));
                if (!(fabsl((long double)r.lse_exact[row] - lse) <= lse_tol))
                    CHECK_FAIL_AT("lse[%d][%d]: %.17g vs %.17Lg", b, h, r.lse_exact[row], lse);
                for (int32_t d = 0; d < 16; d++) {
                    long double num = 0;
                    for (int64_t t = 0; t < L; t++)
                        num += expl(s[t] - mx) * dv(*vat(&c, b, t, g, d));
                    long double o = num / z;
                    size_t i = row * 16 + (size_t)d;
                    long double tol = 0x1p14L * eps * (r.o_cond[i] + fabsl(o));
                    if (!(fabsl((long double)r.o_exact[i] - o) <= tol))
                        CHECK_FAIL_AT("o[%d][%d][%d]: %.17g vs %.17Lg", b, h, d, r.o_exact[i], o);
                    /* The rounding must agree unless o is within tol of a rounding boundary. */
                    kvf_bf16 lo = kvf_oracle_round_bf16((double)(o - tol));
                    kvf_bf16 hi = kvf_oracle_round_bf16((double)(o + tol));
                    if (lo == hi) CHECK_HEX_EQ(r.o_rounded[i], lo);
                }
            }
        }
        kvf_oracle_result_free(&r);
        kvf_case_free(&c);
    }
}

static void test_threads_agree(void) {
    kvf_case c;
    if (random_case(&c, 8, 50, 3, 3, 1)) return;
    kvf_oracle_result a, b;
    if (run(&a, &c, 0, 1) || run(&b, &c, 0, 3)) return;
    CHECK(memcmp(a.o_rounded, b.o_rounded, (size_t)kvf_case_o_elems(&c) * 2) == 0);
    CHECK(memcmp(a.o_exact, b.o_exact, (size_t)kvf_case_o_elems(&c) * 8) == 0);
    CHECK(memcmp(a.lse_rounded, b.lse_rounded, (size_t)kvf_case_lse_elems(&c) * 4) == 0);
    CHECK_INT_EQ(a.exact_ties, b.exact_ties);
    kvf_oracle_result_free(&a);
    kvf_oracle_result_free(&b);
    kvf_case_free(&c);
}

/* The seed workload, timed on one thread (a report, not a pass/fail threshold). */
static void test_seed_timing(void) {
    kvf_spec sp;
    kvf_case c;
    kvf_limits lim;
    kvf_error err;
    kvf_limits_default(&lim);
    if (kvf_spec_preset(&sp, "seed-h20kv4", 1, &err)) CHECK_SKIP("no seed preset: %s", err.msg);
    int rc = kvf_case_build(&c, &sp, &lim, &err);
    CHECK_OK(rc, &err);
    if (rc) {
        kvf_spec_free(&sp);
        return;
    }
    struct timespec t0, t1;
    kvf_oracle_result r;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (run_mpfr(&r, &c, 0, 1)) return;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("seed-h20kv4: L = %lld, %d q heads, oracle %.3f s on one thread (max precision %ld, "
           "retries %ld, ties %ld)\n",
           (long long)kvf_case_seq_len(&c, 0), c.num_qo_heads, sec, r.max_precision_used,
           r.ziv_retries, r.exact_ties);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    check_fast_path_agrees(&r, &c);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("seed-h20kv4: fast path and its comparison %.3f s\n", sec);
    for (int64_t i = 0; i < kvf_case_lse_elems(&c); i++)
        CHECK(isfinite(r.lse_rounded[i]));
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
    kvf_spec_free(&sp);
}

/* Every hand case of this file again with every row streamed one token per block
 * (run_streamed, tests/oracle_hand.h). */
static void test_streamed_rows(void) {
    void (*const fns[])(void) = {
        test_precisions_agree,      test_gqa_grouping,  test_shuffled_pages,
        test_long_double_reference, test_threads_agree,
    };
    run_streamed(fns, sizeof fns / sizeof fns[0]);
}

static const check_test tests[] = {
    {"precisions_agree", test_precisions_agree},
    {"gqa_grouping", test_gqa_grouping},
    {"shuffled_pages", test_shuffled_pages},
    {"long_double_reference", test_long_double_reference},
    {"threads_agree", test_threads_agree},
    {"seed_timing", test_seed_timing},
    {"streamed_rows", test_streamed_rows},
    {NULL, NULL},
};

CHECK_MAIN(tests)
