/* Unit tests of the MPFR oracle: hand-built cases whose answers are known exactly (one token,
 * equal logits, exact ties both ways, extreme and overflowing logits, empty sequences, GQA
 * mapping, shuffled pages, non-finite inputs), agreement between working precisions and
 * thread counts, and comparison with independent references (a plain MPFR evaluation and a
 * long double one). Run one test by name: test_oracle NAME. */
#include "check.h"

#include <float.h>
#include <mpfr.h>
#include <pthread.h>
#include <time.h>

#include "kvfuzz/oracle.h"
#include "kvfuzz/spec.h"
#include "../oracle/src/mp_memory.h"
#include "../oracle/src/row_store.h"

/* ---- building cases by hand ------------------------------------------------------------- */

static kvf_bf16 bf(float f) {
    return kvf_f32_to_bf16_rne(f);
}
static double dv(kvf_bf16 h) {
    return (double)kvf_bf16_to_f32(h);
}

/* B sequences of lengths len[] in contiguous pages (sequence after sequence), plus `spare`
 * unreferenced pages at the end of the pool. Every value starts at +0. */
static int build(kvf_case *c, int32_t hq, int32_t hk, int32_t d, int32_t s, int32_t batch,
                 const int64_t *len, int64_t spare) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_error err;
    int64_t entries = 0;
    for (int32_t b = 0; b < batch; b++)
        entries += (len[b] + s - 1) / s;
    int rc = kvf_case_alloc(c, hq, hk, d, s, batch, entries, entries + spare, &lim, &err);
    CHECK_OK(rc, &err);
    if (rc) return rc;
    int64_t e = 0;
    for (int32_t b = 0; b < batch; b++) {
        int64_t n = (len[b] + s - 1) / s;
        c->kv_indptr[b] = (int32_t)e;
        for (int64_t i = 0; i < n; i++)
            c->kv_indices[e + i] = (int32_t)(e + i);
        c->kv_last_page_len[b] = n ? (int32_t)(len[b] - (n - 1) * s) : 0;
        e += n;
    }
    c->kv_indptr[batch] = (int32_t)e;
    rc = kvf_case_validate(c, &lim, &err);
    CHECK_OK(rc, &err);
    return rc;
}

static kvf_bf16 *qat(kvf_case *c, int32_t b, int32_t h, int32_t d) {
    return &c->q[((size_t)b * c->num_qo_heads + h) * c->head_dim + d];
}
static kvf_bf16 *kat(kvf_case *c, int32_t b, int64_t t, int32_t g, int32_t d) {
    return &c->k_cache[kvf_case_kv_offset(c, b, t, g, d)];
}
static kvf_bf16 *vat(kvf_case *c, int32_t b, int64_t t, int32_t g, int32_t d) {
    return &c->v_cache[kvf_case_kv_offset(c, b, t, g, d)];
}

/* The fast path against the MPFR result r of the same case: bit-identical rounded values and
 * row data (tests/test_oracle_fast.c holds the rest of the cross-check). */
static void check_fast_path_agrees(const kvf_oracle_result *r, const kvf_case *c) {
    kvf_oracle_opts o;
    kvf_oracle_opts_default(&o);
    o.path = KVF_ORACLE_FAST;
    kvf_error err;
    kvf_error_clear(&err);
    kvf_oracle_result f;
    int rc = kvf_oracle_run(&f, c, &o, &err);
    CHECK_OK(rc, &err);
    if (rc) return;
    int64_t rows = (int64_t)c->batch_size * c->num_qo_heads;
    for (int64_t i = 0; i < rows; i++) {
        CHECK_HEX_EQ(kvf_f32_bits(f.lse_rounded[i]), kvf_f32_bits(r->lse_rounded[i]));
        CHECK(memcmp(&f.rows[i], &r->rows[i], sizeof f.rows[i]) == 0);
    }
    for (int64_t i = 0; i < rows * c->head_dim; i++)
        CHECK_HEX_EQ(f.o_rounded[i], r->o_rounded[i]);
    CHECK_INT_EQ(f.fast_rows + f.fallback_rows, rows);
    kvf_oracle_result_free(&f);
}

/* The MPFR path only. */
static int run_mpfr(kvf_oracle_result *r, const kvf_case *c, long p0, int threads) {
    kvf_oracle_opts o;
    kvf_oracle_opts_default(&o);
    if (p0) o.initial_precision = p0;
    o.threads = threads;
    o.path = KVF_ORACLE_MPFR;
    kvf_error err;
    kvf_error_clear(&err);
    int rc = kvf_oracle_run(r, c, &o, &err);
    CHECK_OK(rc, &err);
    return rc;
}

/* The MPFR path (the reference these tests are about), and the fast path checked against it. */
static int run(kvf_oracle_result *r, const kvf_case *c, long p0, int threads) {
    int rc = run_mpfr(r, c, p0, threads);
    if (rc == 0) check_fast_path_agrees(r, c);
    return rc;
}

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

/* ---- independent references -------------------------------------------------------------- */

/* IEEE rounding by MPFR's documented emulation (mpfr_check_range + mpfr_subnormalize with the
 * format's exponent range), a different route from the oracle's round_to_format. */
static double ref_round(mpfr_srcptr x, int bits, mpfr_exp_t emin, mpfr_exp_t emax) {
    mpfr_exp_t old_min = mpfr_get_emin(), old_max = mpfr_get_emax();
    mpfr_t y;
    mpfr_init2(y, bits);
    int inex = mpfr_set(y, x, MPFR_RNDN);
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
    inex = mpfr_check_range(y, inex, MPFR_RNDN);
    mpfr_subnormalize(y, inex, MPFR_RNDN);
    double r = mpfr_get_d(y, MPFR_RNDN);
    mpfr_set_emin(old_min);
    mpfr_set_emax(old_max);
    mpfr_clear(y);
    return r;
}
static float ref_round_f32(mpfr_srcptr x) {
    return (float)ref_round(x, 24, -148, 128);
}

/* lse of row (b, h) straight from the definition at 400 bits (moderate logits only). */
static void ref_lse(mpfr_ptr out, const kvf_case *c, int32_t b, int32_t h) {
    int32_t g = h / (c->num_qo_heads / c->num_kv_heads);
    int64_t L = kvf_case_seq_len(c, b);
    mpfr_t s, sum, x;
    mpfr_inits2(400, s, sum, x, (mpfr_ptr)0);
    mpfr_set_ui(sum, 0, MPFR_RNDN);
    for (int64_t t = 0; t < L; t++) {
        mpfr_set_ui(s, 0, MPFR_RNDN);
        for (int32_t d = 0; d < c->head_dim; d++) {
            mpfr_set_d(x, dv(*qat((kvf_case *)c, b, h, d)), MPFR_RNDN);
            mpfr_mul_d(x, x, dv(*kat((kvf_case *)c, b, t, g, d)), MPFR_RNDN);
            mpfr_add(s, s, x, MPFR_RNDN);
        }
        mpfr_mul_d(s, s, (double)c->sm_scale, MPFR_RNDN);
        mpfr_exp(s, s, MPFR_RNDN);
        mpfr_add(sum, sum, s, MPFR_RNDN);
    }
    mpfr_log2(out, sum, MPFR_RNDN);
    mpfr_clears(s, sum, x, (mpfr_ptr)0);
}

/* ---- tests -------------------------------------------------------------------------------- */

/* One token: o = v exactly (v = -0 gives +0, the exact zero) and lse = RN(s log2 e). */
static void test_one_token(void) {
    kvf_case c;
    int64_t len[1] = {1};
    if (build(&c, 2, 1, 4, 4, 1, len, 0)) return;
    const float qv[2][4] = {{0.5f, -1.25f, 3.0f, 0.0078125f}, {-2.0f, 0.75f, 1.5f, 100.0f}};
    const float kv[4] = {1.5f, 2.0f, -0.375f, 6.0f};
    const kvf_bf16 vv[4] = {bf(0.3f), bf(-7.5f), 0x8000u, 0x0001u};
    for (int d = 0; d < 4; d++) {
        *qat(&c, 0, 0, d) = bf(qv[0][d]);
        *qat(&c, 0, 1, d) = bf(qv[1][d]);
        *kat(&c, 0, 0, 0, d) = bf(kv[d]);
        *vat(&c, 0, 0, 0, d) = vv[d];
    }
    kvf_oracle_result r;
    if (run(&r, &c, 0, 0)) return;
    mpfr_t ref;
    mpfr_init2(ref, 400);
    for (int h = 0; h < 2; h++) {
        CHECK_HEX_EQ(r.o_rounded[h * 4 + 0], vv[0]);
        CHECK_HEX_EQ(r.o_rounded[h * 4 + 1], vv[1]);
        CHECK_HEX_EQ(r.o_rounded[h * 4 + 2], 0x0000u); /* exact zero: +0 */
        CHECK_HEX_EQ(r.o_rounded[h * 4 + 3], 0x0001u); /* smallest subnormal survives */
        CHECK_DBL_EQ(r.o_exact[h * 4 + 1], dv(vv[1]));
        CHECK_DBL_EQ(r.o_cond[h * 4 + 1], fabs(dv(vv[1])));
        ref_lse(ref, &c, 0, h);
        CHECK_HEX_EQ(kvf_f32_bits(r.lse_rounded[h]), kvf_f32_bits(ref_round_f32(ref)));
        CHECK(fabs(r.lse_exact[h] - mpfr_get_d(ref, MPFR_RNDN)) <= 1e-15 * fabs(r.lse_exact[h]));
        CHECK_INT_EQ(r.rows[h].length, 1);
        CHECK_INT_EQ(r.rows[h].overflow, 0);
    }
    mpfr_clear(ref);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

/* Equal logits: o is the mean of v; all-zero logits give lse = log2 L exactly. */
static void test_equal_logits(void) {
    const int64_t lens[3] = {4, 3, 5};
    for (int k = 0; k < 3; k++) {
        kvf_case c;
        int64_t len[1] = {lens[k]};
        if (build(&c, 1, 1, 2, 2, 1, len, 0)) return;
        /* k = 2: q . k_t = 3 for every token, so the logits are equal but not zero. */
        *qat(&c, 0, 0, 0) = bf(k == 2 ? 1.5f : 0.0f);
        const float v0[5] = {1, 2, 3, 6, 8};
        double mean = 0;
        for (int64_t t = 0; t < lens[k]; t++) {
            *kat(&c, 0, t, 0, 0) = bf(2.0f);
            *vat(&c, 0, t, 0, 0) = bf(v0[t]);
            *vat(&c, 0, t, 0, 1) = bf(-0.25f);
            mean += v0[t];
        }
        mean /= (double)lens[k];
        kvf_oracle_result r;
        if (run(&r, &c, 0, 0)) return;
        CHECK_HEX_EQ(r.o_rounded[0], kvf_oracle_round_bf16(mean));
        CHECK_HEX_EQ(r.o_rounded[1], bf(-0.25f));
        CHECK(fabs(r.o_exact[0] - mean) <= 1e-16 * mean);
        mpfr_t ref;
        mpfr_init2(ref, 400);
        ref_lse(ref, &c, 0, 0);
        CHECK_HEX_EQ(kvf_f32_bits(r.lse_rounded[0]), kvf_f32_bits(ref_round_f32(ref)));
        if (k == 0) {
            CHECK_DBL_EQ(r.lse_rounded[0], 2.0f);
            CHECK_DBL_EQ(r.lse_exact[0], 2.0);
        }
        mpfr_clear(ref);
        kvf_oracle_result_free(&r);
        kvf_case_free(&c);
    }
}

/* Two tokens of one logit whose v mean is exactly `mid`: the result must be `want` and the
 * oracle must have counted an exact tie. */
static void check_tie(kvf_bf16 v1, kvf_bf16 v2, kvf_bf16 want) {
    kvf_case c;
    int64_t len[1] = {2};
    if (build(&c, 1, 1, 1, 4, 1, len, 0)) return;
    *qat(&c, 0, 0, 0) = bf(0.5f);
    *kat(&c, 0, 0, 0, 0) = bf(3.0f);
    *kat(&c, 0, 1, 0, 0) = bf(3.0f);
    *vat(&c, 0, 0, 0, 0) = v1;
    *vat(&c, 0, 1, 0, 0) = v2;
    kvf_oracle_result r;
    if (run(&r, &c, 0, 0)) return;
    CHECK_HEX_EQ(r.o_rounded[0], want);
    CHECK_DBL_EQ(r.o_exact[0], (dv(v1) + dv(v2)) / 2);
    CHECK(r.exact_ties >= 1);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

static void test_tie_to_even_down(void) {
    check_tie(0x3F80u, 0x3F81u, 0x3F80u); /* 1 + 2^-8 between 1 (even) and 1 + 2^-7 */
    check_tie(0xBF81u, 0xBF80u, 0xBF80u); /* the same, negative */
    check_tie(0x0000u, 0x8001u, 0x8000u); /* -2^-134: between -0 (even) and -2^-133 */
}

static void test_tie_to_even_up(void) {
    check_tie(0x3F81u, 0x3F82u, 0x3F82u); /* 1 + 3 2^-8: up to the even 1 + 2^-6 */
    check_tie(0x4000u, 0x3FFFu, 0x4000u); /* 2 - 2^-8: up across the binade to 2 */
    check_tie(0x0001u, 0x0002u, 0x0002u); /* 3 2^-134: up to the even 2^-132 */
    check_tie(0x7F7Eu, 0x7F7Fu, 0x7F7Eu); /* near the top of the range: down to even */
}

static void test_tie_exact_zero(void) {
    check_tie(0x3F80u, 0xBF80u, 0x0000u); /* 1 + (-1): exactly 0 gives +0, never -0 */
    check_tie(0x8001u, 0x0001u, 0x0000u);
}

/* Two groups of two tokens with different logits, each group's v mean a midpoint: o is
 * exactly that midpoint (Lindemann-Weierstrass), so it ties to even. Moving one value of the
 * lower group breaks the tie by a tiny weighted amount that decides the direction, including
 * when the lower group is e^(-10^7) below (no working precision resolves that directly). */
static void groups_case(kvf_case *c, float low_k, kvf_bf16 low_v1, kvf_bf16 low_v2) {
    int64_t len[1] = {4};
    if (build(c, 1, 1, 1, 2, 1, len, 0)) return;
    c->sm_scale = 1.0f;
    *qat(c, 0, 0, 0) = bf(1.0f);
    *kat(c, 0, 0, 0, 0) = bf(2.0f);
    *kat(c, 0, 1, 0, 0) = bf(2.0f);
    *kat(c, 0, 2, 0, 0) = bf(low_k);
    *kat(c, 0, 3, 0, 0) = bf(low_k);
    *vat(c, 0, 0, 0, 0) = 0x3F80u;
    *vat(c, 0, 1, 0, 0) = 0x3F81u;
    *vat(c, 0, 2, 0, 0) = low_v1;
    *vat(c, 0, 3, 0, 0) = low_v2;
}

static void test_tie_groups(void) {
    const float lows[3] = {1.0f, -40.0f, -1.6777216e7f};
    for (int i = 0; i < 3; i++) {
        kvf_case c;
        kvf_oracle_result r;
        /* Tie: the lower group's mean is the midpoint too. */
        groups_case(&c, lows[i], 0x3F81u, 0x3F80u);
        if (run(&r, &c, 0, 0)) return;
        CHECK_HEX_EQ(r.o_rounded[0], 0x3F80u);
        CHECK_DBL_EQ(r.o_exact[0], 1.00390625);
        CHECK_INT_EQ(r.exact_ties, 1);
        kvf_oracle_result_free(&r);
        kvf_case_free(&c);
        /* Lower group slightly above the midpoint: o > midpoint, rounds up. */
        groups_case(&c, lows[i], 0x3F81u, 0x3F81u);
        if (run(&r, &c, 0, 0)) return;
        CHECK_HEX_EQ(r.o_rounded[0], 0x3F81u);
        CHECK_INT_EQ(r.exact_ties, 0);
        kvf_oracle_result_free(&r);
        kvf_case_free(&c);
        /* ... and below: rounds down. */
        groups_case(&c, lows[i], 0x3F80u, 0x3F80u);
        if (run(&r, &c, 0, 0)) return;
        CHECK_HEX_EQ(r.o_rounded[0], 0x3F80u);
        CHECK_INT_EQ(r.exact_ties, 0);
        kvf_oracle_result_free(&r);
        kvf_case_free(&c);
    }
}

/* Runs the oracle on c, whose o[0][0][0] lies on a midpoint that lower groups decide (no exact
 * tie): it must round to want. Frees c. Nonzero when the oracle failed. */
static int check_side_decided(kvf_case *c, kvf_bf16 want) {
    kvf_oracle_result r;
    if (run(&r, c, 0, 0)) return 1;
    CHECK_HEX_EQ(r.o_rounded[0], want);
    CHECK_INT_EQ(r.exact_ties, 0);
    kvf_oracle_result_free(&r);
    kvf_case_free(c);
    return 0;
}

/* The top group's mean is a midpoint; two groups about e^(-2^100) below decide together:
 * T = S_2 + e^-1 S_3 with S_2 = -2^-8 and S_3 = 3 2^-8 (up) or 2^-8 (down). */
static void test_tie_broken_by_two_far_groups(void) {
    const kvf_bf16 v3[2] = {0x3F82u, 0x3F81u}, want[2] = {0x3F81u, 0x3F80u};
    for (int k = 0; k < 2; k++) {
        kvf_case c;
        int64_t len[1] = {4};
        if (build(&c, 1, 1, 2, 4, 1, len, 0)) return;
        c.sm_scale = 1.0f;
        *qat(&c, 0, 0, 0) = bf(0x1p50f);
        *qat(&c, 0, 0, 1) = bf(1.0f);
        *kat(&c, 0, 2, 0, 0) = bf(-0x1p50f);
        *kat(&c, 0, 3, 0, 0) = bf(-0x1p50f);
        *kat(&c, 0, 3, 0, 1) = bf(-1.0f);
        *vat(&c, 0, 0, 0, 0) = 0x3F80u;
        *vat(&c, 0, 1, 0, 0) = 0x3F81u;
        *vat(&c, 0, 2, 0, 0) = 0x3F80u;
        *vat(&c, 0, 3, 0, 0) = v3[k];
        if (check_side_decided(&c, want[k])) return;
    }
}

/* The top group's mean is a midpoint and 100 lower groups of distinct logits, e^-66 to e^-165
 * below it, decide the side together: more groups than a streamed row's block has tokens, so
 * the operand list of the group sum must be sized by the groups (a heap overflow once). */
static void test_tie_broken_by_many_groups(void) {
    const kvf_bf16 low_v[2] = {0x3F81u, 0x3F80u}, want[2] = {0x3F81u, 0x3F80u};
    for (int k = 0; k < 2; k++) {
        kvf_case c;
        int64_t len[1] = {102};
        if (build(&c, 1, 1, 1, 16, 1, len, 0)) return;
        c.sm_scale = 1.0f;
        *qat(&c, 0, 0, 0) = bf(1.0f);
        *kat(&c, 0, 0, 0, 0) = bf(2.0f);
        *kat(&c, 0, 1, 0, 0) = bf(2.0f);
        *vat(&c, 0, 0, 0, 0) = 0x3F80u;
        *vat(&c, 0, 1, 0, 0) = 0x3F81u;
        for (int t = 2; t < 102; t++) {
            *kat(&c, 0, t, 0, 0) = bf(-(float)(62 + t)); /* integers below 256: exact */
            *vat(&c, 0, t, 0, 0) = low_v[k];
        }
        if (check_side_decided(&c, want[k])) return;
    }
}

/* o exactly 0 in the top group with a far lower group deciding the sign of the zero. */
static void test_signed_zero_from_far_group(void) {
    kvf_case c;
    kvf_oracle_result r;
    groups_case(&c, -1.6777216e7f, bf(-1.0f), bf(-2.0f));
    *vat(&c, 0, 0, 0, 0) = bf(1.0f);
    *vat(&c, 0, 1, 0, 0) = bf(-1.0f);
    if (run(&r, &c, 0, 0)) return;
    CHECK_HEX_EQ(r.o_rounded[0], 0x8000u); /* tiny negative: -0 */
    kvf_oracle_result_free(&r);
    *vat(&c, 0, 2, 0, 0) = bf(1.0f);
    *vat(&c, 0, 3, 0, 0) = bf(2.0f);
    if (run(&r, &c, 0, 0)) return;
    CHECK_HEX_EQ(r.o_rounded[0], 0x0000u);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

/* Head 0: token 0 has logit 0, the others -2^100 - 75 (about -1.3e30): o is token 0's v and
 * lse = log2(1 + 4 e^(-1.3e30)) rounds to +0. Head 1: logits 0, -100, -100, -100, -100, so
 * lse = log2(1 + 4 e^-100) ~ 2.2e-43 is an f32 subnormal, certified through log1p at once. */
static void test_extreme_negative(void) {
    kvf_case c;
    int64_t len[1] = {5};
    if (build(&c, 2, 1, 2, 8, 1, len, 0)) return;
    c.sm_scale = 1.0f;
    *qat(&c, 0, 0, 0) = bf(0x1p50f);
    *qat(&c, 0, 0, 1) = bf(0.75f);
    *qat(&c, 0, 1, 1) = bf(1.0f);
    for (int64_t t = 0; t < 5; t++) {
        *kat(&c, 0, t, 0, 0) = t ? bf(-0x1p50f) : 0;
        *kat(&c, 0, t, 0, 1) = t ? bf(-100.0f) : 0;
        *vat(&c, 0, t, 0, 0) = bf((float)(t + 1) * 1.5f);
        *vat(&c, 0, t, 0, 1) = bf(-0.125f * (float)(t + 3));
    }
    kvf_oracle_result r;
    if (run(&r, &c, 0, 0)) return;
    CHECK_HEX_EQ(r.o_rounded[0], bf(1.5f));
    CHECK_HEX_EQ(r.o_rounded[1], bf(-0.375f));
    CHECK_HEX_EQ(kvf_f32_bits(r.lse_rounded[0]), 0u); /* log2(1 + 4 e^-1.27e30): +0 */
    CHECK(r.lse_exact[0] == 0.0);
    CHECK_INT_EQ(r.rows[0].overflow, 0); /* e^s underflows f32, but s itself fits */
    CHECK(r.rows[0].logit_abs_max > 1.2e30);
    /* Head 1: reference lse by direct evaluation. */
    mpfr_t ref;
    mpfr_init2(ref, 400);
    ref_lse(ref, &c, 0, 1);
    float want = ref_round_f32(ref);
    CHECK(want > 0 && want < FLT_MIN); /* a subnormal f32 */
    CHECK_HEX_EQ(kvf_f32_bits(r.lse_rounded[1]), kvf_f32_bits(want));
    CHECK(fabs(r.lse_exact[1] - mpfr_get_d(ref, MPFR_RNDN)) <= 1e-15 * r.lse_exact[1]);
    CHECK(r.max_precision_used == 64); /* the relative lse bound certifies at once */
    mpfr_clear(ref);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

/* Logits past the f32 range: exact lse finite, rounded +-inf, overflow flag; o still exact. */
static void test_beyond_f32(void) {
    kvf_case c;
    int64_t len[1] = {3};
    if (build(&c, 2, 1, 1, 4, 1, len, 0)) return;
    c.sm_scale = 1.0f;
    *qat(&c, 0, 0, 0) = bf(0x1p100f);
    *qat(&c, 0, 1, 0) = bf(-0x1p100f);
    const float ks[3] = {0x1p100f, 0x1.02p100f, 0x1p99f};
    for (int64_t t = 0; t < 3; t++) {
        *kat(&c, 0, t, 0, 0) = bf(ks[t]);
        *vat(&c, 0, t, 0, 0) = bf((float)t - 0.5f);
    }
    kvf_oracle_result r;
    if (run(&r, &c, 0, 0)) return;
    /* Head 0: token 1 (k = 1.0078 2^100) dominates by e^(2^193). */
    CHECK_HEX_EQ(r.o_rounded[0], bf(0.5f));
    CHECK(isinf(r.lse_rounded[0]) && r.lse_rounded[0] > 0);
    double want = ldexp(1.0078125, 200) / log(2.0);
    CHECK(isfinite(r.lse_exact[0]) && fabs(r.lse_exact[0] - want) <= 1e-15 * want);
    CHECK(r.rows[0].overflow & KVF_ORACLE_OVERFLOW_LOGITS);
    /* Head 1: all logits about -2^200: lse about -2^199 / ln 2 rounds to -inf; token 2 wins. */
    CHECK_HEX_EQ(r.o_rounded[1], bf(1.5f));
    CHECK(isinf(r.lse_rounded[1]) && r.lse_rounded[1] < 0);
    CHECK(isfinite(r.lse_exact[1]) && r.lse_exact[1] < -1e59);
    CHECK(r.rows[1].overflow & KVF_ORACLE_OVERFLOW_LOGITS);
    CHECK(r.rows[1].dot_abs_max >= ldexp(1.0078125, 200));
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

/* v at the top of the bf16 range: o is exactly representable, but an fp32 accumulator of
 * sum p v overflows; the row is flagged. */
static void test_accumulator_overflow_flag(void) {
    kvf_case c;
    int64_t len[1] = {2};
    if (build(&c, 1, 1, 1, 2, 1, len, 0)) return;
    *vat(&c, 0, 0, 0, 0) = KVF_BF16_MAX;
    *vat(&c, 0, 1, 0, 0) = KVF_BF16_MAX;
    kvf_oracle_result r;
    if (run(&r, &c, 0, 0)) return;
    CHECK_HEX_EQ(r.o_rounded[0], KVF_BF16_MAX);
    CHECK_INT_EQ(r.rows[0].overflow, KVF_ORACLE_OVERFLOW_ACCUM);
    CHECK_DBL_EQ(r.lse_rounded[0], 1.0f);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

static void test_empty_sequence(void) {
    kvf_case c;
    int64_t len[3] = {3, 0, 2};
    if (build(&c, 2, 2, 3, 2, 3, len, 0)) return;
    for (int64_t t = 0; t < 3; t++)
        for (int d = 0; d < 3; d++)
            *vat(&c, 0, t, 0, d) = bf(1.0f + (float)d);
    kvf_oracle_result r;
    if (run(&r, &c, 0, 0)) return;
    for (int h = 0; h < 2; h++) {
        size_t row = 1 * 2 + (size_t)h;
        CHECK_INT_EQ(r.rows[row].length, 0);
        CHECK(isinf(r.lse_rounded[row]) && r.lse_rounded[row] < 0);
        CHECK(isinf(r.lse_exact[row]) && r.lse_exact[row] < 0);
        for (int d = 0; d < 3; d++) {
            CHECK_HEX_EQ(r.o_rounded[row * 3 + d], 0x0000u);
            CHECK_DBL_EQ(r.o_exact[row * 3 + d], 0.0);
            CHECK_DBL_EQ(r.o_cond[row * 3 + d], 0.0);
        }
    }
    CHECK_HEX_EQ(r.o_rounded[0 * 3 + 2], bf(3.0f)); /* sequence 0 is unaffected */
    CHECK_INT_EQ(r.rows[0].length, 3);
    CHECK_INT_EQ(r.rows[4].length, 2);
    CHECK(fabs(r.lse_exact[4] - 1.0) == 0); /* two zero logits: log2 2 */
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
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

/* NaN / inf at referenced positions: v makes only its column non-finite, q or k the row. */
static void test_nonfinite_inputs(void) {
    kvf_case c;
    int64_t len[1] = {3};
    if (build(&c, 2, 1, 4, 4, 1, len, 0)) return;
    for (int64_t i = 0; i < kvf_case_q_elems(&c); i++)
        c.q[i] = bf(0.5f);
    for (int64_t t = 0; t < 3; t++)
        for (int d = 0; d < 4; d++) {
            *kat(&c, 0, t, 0, d) = bf((float)t);
            *vat(&c, 0, t, 0, d) = bf(1.0f);
        }
    *vat(&c, 0, 1, 0, 1) = KVF_BF16_QNAN;
    *vat(&c, 0, 2, 0, 2) = KVF_BF16_POS_INF;
    *vat(&c, 0, 0, 0, 3) = KVF_BF16_POS_INF;
    *vat(&c, 0, 2, 0, 3) = KVF_BF16_NEG_INF;
    *qat(&c, 0, 1, 2) = KVF_BF16_NEG_INF;
    kvf_oracle_result r;
    if (run(&r, &c, 0, 0)) return;
    CHECK_HEX_EQ(r.o_rounded[0], bf(1.0f));
    CHECK(kvf_bf16_is_nan(r.o_rounded[1]));
    CHECK_HEX_EQ(r.o_rounded[2], KVF_BF16_POS_INF);
    CHECK(kvf_bf16_is_nan(r.o_rounded[3])); /* +inf and -inf */
    CHECK(isfinite(r.lse_rounded[0]));
    CHECK_INT_EQ(r.rows[0].nonfinite_input, 1);
    for (int d = 0; d < 4; d++)
        CHECK(kvf_bf16_is_nan(r.o_rounded[4 + d]));
    CHECK(isnan(r.lse_rounded[1]) && isnan(r.lse_exact[1]));
    CHECK_INT_EQ(r.rows[1].nonfinite_input, 1);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
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

static void test_invalid_case(void) {
    kvf_case c;
    int64_t len[1] = {3};
    if (build(&c, 1, 1, 2, 2, 1, len, 0)) return;
    c.kv_indices[1] = 5;
    kvf_oracle_result r;
    kvf_error err;
    CHECK_INT_EQ(kvf_oracle_run(&r, &c, NULL, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "kv_indices[1]");
    CHECK(r.o_rounded == NULL);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

static void test_round_bf16_double(void) {
    /* Rounds the double directly: 1 + 2^-8 + 2^-30 goes up, although rounding it to f32
     * first would land on the midpoint 1 + 2^-8 and then down to 1. */
    CHECK_HEX_EQ(kvf_oracle_round_bf16(1.0 + 0x1p-8 + 0x1p-30), 0x3F81u);
    CHECK_HEX_EQ(kvf_oracle_round_bf16(1.0 + 0x1p-8), 0x3F80u);
    CHECK_HEX_EQ(kvf_oracle_round_bf16(0x1p-134), 0x0000u);
    CHECK_HEX_EQ(kvf_oracle_round_bf16(0x1p-134 + 0x1p-160), 0x0001u);
    CHECK_HEX_EQ(kvf_oracle_round_bf16(-0x1p-140), 0x8000u);
    CHECK_HEX_EQ(kvf_oracle_round_bf16(0x1.ffp127), KVF_BF16_POS_INF); /* past MAX + ulp/2 */
    CHECK_HEX_EQ(kvf_oracle_round_bf16(0x1.fep127), KVF_BF16_MAX);
    CHECK_HEX_EQ(kvf_oracle_round_bf16(1e300), KVF_BF16_POS_INF);
    CHECK_HEX_EQ(kvf_oracle_round_bf16(-0.0), 0x8000u);
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

/* A stop request interrupts a long oracle run within a second, on either path, and holds until
 * cleared; a cleared oracle runs normally again. The case is one sequence of 2^19 tokens read
 * by 128 q heads of one kv group (seconds of work on the fast path, far more on MPFR's). */
typedef struct stop_run {
    const kvf_case *c;
    int path, rc;
    kvf_error err;
    double end_s, end_cpu_s;
} stop_run;

static double mono_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double process_cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *stop_run_main(void *arg) {
    stop_run *r = arg;
    kvf_oracle_opts o;
    kvf_oracle_opts_default(&o);
    o.path = r->path;
    o.threads = 1;
    kvf_oracle_result res;
    r->rc = kvf_oracle_run(&res, r->c, &o, &r->err);
    r->end_s = mono_s();
    r->end_cpu_s = process_cpu_s();
    if (r->rc == 0) kvf_oracle_result_free(&res);
    kvf_oracle_thread_done();
    return NULL;
}

static void test_stop_request_interrupts_within_a_second(void) {
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_spec s;
    memset(&s, 0, sizeof s);
    kvf_recipe *rp = &s.recipe;
    rp->num_qo_heads = 128;
    rp->num_kv_heads = 1;
    rp->head_dim = 32;
    rp->page_size = 1024;
    rp->sm_scale = 0.35f;
    rp->seed = 5;
    rp->logits = KVF_LOGITS_NEAR_TIE;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_set_batch(&s, 1, &err), &err);
    rp->num_pages[0] = 512;
    rp->last_page_len[0] = 1024;
    kvf_case c;
    CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
    kvf_spec_free(&s);
    static const int paths[] = {KVF_ORACLE_MPFR, KVF_ORACLE_FAST};
    static const double after_s[] = {0.3, 1.2};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) {
            kvf_oracle_clear_stop();
            stop_run r = {&c, paths[i], 0, {0}, 0, 0};
            pthread_t tid;
            CHECK(pthread_create(&tid, NULL, stop_run_main, &r) == 0);
            struct timespec nap = {0, (long)(after_s[k] * 1e9)};
            if (after_s[k] >= 1) nap.tv_sec = 1, nap.tv_nsec = (long)((after_s[k] - 1) * 1e9);
            nanosleep(&nap, NULL);
            double asked = mono_s(), asked_cpu = process_cpu_s();
            kvf_oracle_request_stop();
            pthread_join(tid, NULL);
            printf("%s path, stop after %.1f s: returned %.3f s after the request, %.3f s of CPU "
                   "(rc %d)\n",
                   kvf_oracle_path_name(paths[i]), after_s[k], r.end_s - asked,
                   r.end_cpu_s - asked_cpu, r.rc);
            CHECK_INT_EQ(r.rc, KVF_EINTR);
            CHECK_STR_CONTAINS(r.err.msg, "stopped by request");
            /* CPU time (the joining thread sleeps) measures the oracle, not the machine's load;
             * wall time gets slack for a loaded test machine. */
            CHECK(r.end_cpu_s - asked_cpu < 0.5);
            CHECK(r.end_s - asked < 3.0);
            CHECK(kvf_oracle_stop_requested());
        }
    /* The request holds until cleared; afterwards a small case runs normally. */
    kvf_oracle_result res;
    kvf_case one;
    const int64_t len1[1] = {1};
    CHECK_OK(build(&one, 1, 1, 2, 1, 1, len1, 0), &err);
    CHECK_INT_EQ(kvf_oracle_run(&res, &one, NULL, &err), KVF_EINTR);
    kvf_oracle_clear_stop();
    CHECK_OK(kvf_oracle_run(&res, &one, NULL, &err), &err);
    kvf_oracle_result_free(&res);
    kvf_case_free(&one);
    kvf_case_free(&c);
}

/* GMP memory past a thread's cap is a flag, never an abort (oracle/src/mp_memory.h): the
 * allocation is served from the arena (the number works), the thread is marked failed, and the
 * next kvf__mp_begin clears the mark. What the oracle does with the mark (KVF_ENOMEM, one
 * sentence) is the same as for memory the system refuses. */
static void test_gmp_cap_is_a_flag(void) {
    kvf__mp_install();
    kvf__mp_begin((int64_t)16 << 10);
    CHECK(!kvf__mp_failed());
    mpfr_t x;
    mpfr_init2(x, (mpfr_prec_t)1 << 19); /* 64 KiB of limbs, past the 16 KiB cap */
    CHECK(kvf__mp_failed());
    mpfr_set_ui(x, 3, MPFR_RNDN);
    mpfr_mul_ui(x, x, 7, MPFR_RNDN);
    CHECK(mpfr_cmp_ui(x, 21) == 0);
    mpfr_clear(x);
    kvf__mp_end();
    kvf__mp_begin(0);
    CHECK(!kvf__mp_failed());
    kvf__mp_end();
}

/* Every hand case above again with the store limit at 0 (docs/oracle.md, "Memory"): each row
 * streams one token per block through both paths, and must give the same verdicts: the
 * streamed code (exact weight sums across blocks, groups of equal logits from the table of
 * distinct dots) on ties, far groups, extreme logits, non-finite inputs and stop requests. */
static void test_streamed_rows(void) {
    void (*const fns[])(void) = {
        test_stop_request_interrupts_within_a_second,
        test_one_token,
        test_equal_logits,
        test_tie_to_even_down,
        test_tie_to_even_up,
        test_tie_exact_zero,
        test_tie_groups,
        test_tie_broken_by_two_far_groups,
        test_tie_broken_by_many_groups,
        test_signed_zero_from_far_group,
        test_extreme_negative,
        test_beyond_f32,
        test_accumulator_overflow_flag,
        test_empty_sequence,
        test_precisions_agree,
        test_gqa_grouping,
        test_shuffled_pages,
        test_long_double_reference,
        test_nonfinite_inputs,
        test_threads_agree,
    };
    kvf__row_store_bytes = 0;
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        fns[i]();
    kvf__row_store_bytes = KVF_ORACLE_ROW_STORE_BYTES;
}

static const check_test tests[] = {
    {"stop_request_interrupts_within_a_second", test_stop_request_interrupts_within_a_second},
    {"one_token", test_one_token},
    {"equal_logits", test_equal_logits},
    {"tie_to_even_down", test_tie_to_even_down},
    {"tie_to_even_up", test_tie_to_even_up},
    {"tie_exact_zero", test_tie_exact_zero},
    {"tie_groups", test_tie_groups},
    {"tie_broken_by_two_far_groups", test_tie_broken_by_two_far_groups},
    {"tie_broken_by_many_groups", test_tie_broken_by_many_groups},
    {"signed_zero_from_far_group", test_signed_zero_from_far_group},
    {"extreme_negative", test_extreme_negative},
    {"beyond_f32", test_beyond_f32},
    {"accumulator_overflow_flag", test_accumulator_overflow_flag},
    {"empty_sequence", test_empty_sequence},
    {"precisions_agree", test_precisions_agree},
    {"gqa_grouping", test_gqa_grouping},
    {"shuffled_pages", test_shuffled_pages},
    {"long_double_reference", test_long_double_reference},
    {"nonfinite_inputs", test_nonfinite_inputs},
    {"threads_agree", test_threads_agree},
    {"invalid_case", test_invalid_case},
    {"round_bf16_double", test_round_bf16_double},
    {"seed_timing", test_seed_timing},
    {"streamed_rows", test_streamed_rows},
    {"gmp_cap_is_a_flag", test_gmp_cap_is_a_flag},
    {NULL, NULL},
};

CHECK_MAIN(tests)
