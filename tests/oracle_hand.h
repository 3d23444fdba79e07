/* Hand-built cases for the MPFR oracle's tests (tests/test_oracle_*.c): a case of given
 * sequence lengths in contiguous pages, element accessors, the oracle run on the MPFR path
 * with the fast path checked against it, independent references (IEEE rounding through MPFR's
 * emulation, the lse from its definition at 400 bits), and the runner that repeats hand cases
 * with every row streamed. */
#ifndef KVFUZZ_TESTS_ORACLE_HAND_H
#define KVFUZZ_TESTS_ORACLE_HAND_H

#include "check.h"

#include <mpfr.h>

#include "../oracle/src/row_store.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/spec.h"

/* ---- building cases by hand ------------------------------------------------------------- */

static inline kvf_bf16 bf(float f) {
    return kvf_f32_to_bf16_rne(f);
}
static inline double dv(kvf_bf16 h) {
    return (double)kvf_bf16_to_f32(h);
}

/* B sequences of lengths len[] in contiguous pages (sequence after sequence), plus `spare`
 * unreferenced pages at the end of the pool. Every value starts at +0. */
static inline int build(kvf_case *c, int32_t hq, int32_t hk, int32_t d, int32_t s, int32_t batch,
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

static inline kvf_bf16 *qat(kvf_case *c, int32_t b, int32_t h, int32_t d) {
    return &c->q[((size_t)b * c->num_qo_heads + h) * c->head_dim + d];
}
static inline kvf_bf16 *kat(kvf_case *c, int32_t b, int64_t t, int32_t g, int32_t d) {
    return &c->k_cache[kvf_case_kv_offset(c, b, t, g, d)];
}
static inline kvf_bf16 *vat(kvf_case *c, int32_t b, int64_t t, int32_t g, int32_t d) {
    return &c->v_cache[kvf_case_kv_offset(c, b, t, g, d)];
}

/* The fast path against the MPFR result r of the same case: bit-identical rounded values and
 * row data (tests/test_oracle_fast.c holds the rest of the cross-check). */
static inline void check_fast_path_agrees(const kvf_oracle_result *r, const kvf_case *c) {
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
static inline int run_mpfr(kvf_oracle_result *r, const kvf_case *c, long p0, int threads) {
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
static inline int run(kvf_oracle_result *r, const kvf_case *c, long p0, int threads) {
    int rc = run_mpfr(r, c, p0, threads);
    if (rc == 0) check_fast_path_agrees(r, c);
    return rc;
}

/* ---- independent references -------------------------------------------------------------- */

/* IEEE rounding by MPFR's documented emulation (mpfr_check_range + mpfr_subnormalize with the
 * format's exponent range), a different route from the oracle's round_to_format. */
static inline double ref_round(mpfr_srcptr x, int bits, mpfr_exp_t emin, mpfr_exp_t emax) {
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
static inline float ref_round_f32(mpfr_srcptr x) {
    return (float)ref_round(x, 24, -148, 128);
}

/* lse of row (b, h) straight from the definition at 400 bits (moderate logits only). */
static inline void ref_lse(mpfr_ptr out, const kvf_case *c, int32_t b, int32_t h) {
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

/* Runs hand cases again with the store limit at 0 (docs/oracle.md, "Memory"): each row
 * streams one token per block through both paths, and must give the same verdicts: the
 * streamed code (exact weight sums across blocks, groups of equal logits from the table of
 * distinct dots) on ties, far groups, extreme logits, non-finite inputs and stop requests. */
static inline void run_streamed(void (*const *fns)(void), size_t n) {
    kvf__row_store_bytes = 0;
    for (size_t i = 0; i < n; i++)
        fns[i]();
    kvf__row_store_bytes = KVF_ORACLE_ROW_STORE_BYTES;
}

#endif
