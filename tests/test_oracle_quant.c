/* Unit tests of the oracle on quantized caches (oracle/src/oracle.c, item 6): power-of-two
 * scales fold into sm_scale and the output exactly, per-token scales that agree give the tensor
 * scale's bits, random per-token and per-head scales give the definition's rounding at 400
 * bits (stored and streamed rows), exact ties through scaled values, the fold's overflow flag,
 * and k values outside the FP8 range refused. */
#include "oracle_hand.h"

#include "kvfuzz/fp8.h"
#include "kvfuzz/prng.h"

static uint64_t rng_state = 0x243F6A8885A308D3u;
static uint64_t rng_next(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Du;
}

/* A finite FP8 value's image, uniform over the finite bytes. */
static kvf_bf16 rnd_fp8(int dt) {
    for (;;) {
        uint8_t x = (uint8_t)rng_next();
        if (isfinite(kvf_fp8_to_f32(x, dt))) return kvf_fp8_to_bf16(x, dt);
    }
}

/* A positive f32 scale: 2^e (e in [-span, span]) times a 24-bit significand in [1, 2). */
static float rnd_scale(int span) {
    int e = (int)(rng_next() % (uint64_t)(2 * span + 1)) - span;
    double m = 1.0 + (double)(rng_next() >> 41) * 0x1p-23;
    return (float)ldexp(m, e);
}

/* Hq 4, Hk 2, D 16, S 4; k e4m3, v e5m2; the scales at `gran`, drawn by rnd_scale(span). */
static int quant_case(kvf_case *c, int32_t batch, int gran, int span) {
    int64_t len[4];
    for (int32_t b = 0; b < batch; b++)
        len[b] = (int64_t)(rng_next() % 13) + 1;
    if (build(c, 4, 2, 16, 4, batch, len, 1)) return -1;
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_error err;
    kvf_kv_quant q = {KVF_KV_E4M3, KVF_KV_E5M2, (uint8_t)gran};
    int rc = kvf_case_set_quant(c, &q, &lim, &err);
    CHECK_OK(rc, &err);
    if (rc) return rc;
    for (int64_t i = 0; i < kvf_case_q_elems(c); i++)
        c->q[i] = bf((float)((double)(int64_t)(rng_next() >> 40) * 0x1p-23 - 1.0));
    for (int32_t b = 0; b < batch; b++)
        for (int64_t t = 0; t < len[b]; t++)
            for (int32_t g = 0; g < 2; g++)
                for (int32_t d = 0; d < 16; d++) {
                    *kat(c, b, t, g, d) = rnd_fp8(KVF_KV_E4M3);
                    *vat(c, b, t, g, d) = rnd_fp8(KVF_KV_E5M2);
                }
    for (int64_t i = 0; i < kvf_case_scale_count(c); i++) {
        c->k_scale[i] = rnd_scale(span);
        c->v_scale[i] = rnd_scale(span);
    }
    rc = kvf_case_validate(c, &lim, &err);
    CHECK_OK(rc, &err);
    return rc;
}

/* o and lse of row (b, h) from the definition at 400 bits, with the dequantized values (the
 * logits are exact there; the largest is subtracted before the exponentials). */
static void ref_row(const kvf_case *c, int32_t b, int32_t h, kvf_bf16 *o, float *lse) {
    int32_t g = h / (c->num_qo_heads / c->num_kv_heads);
    int64_t L = kvf_case_seq_len(c, b);
    mpfr_t s[16], m, z, x, acc[16];
    /* The widest exponent range: a weight like e^(-2^40) must not underflow to 0, or a tiny o
     * loses its sign. */
    mpfr_exp_t old_min = mpfr_get_emin(), old_max = mpfr_get_emax();
    mpfr_set_emin(mpfr_get_emin_min());
    mpfr_set_emax(mpfr_get_emax_max());
    mpfr_inits2(400, m, z, x, (mpfr_ptr)0);
    for (int64_t t = 0; t < L; t++) {
        mpfr_init2(s[t], 400);
        mpfr_set_ui(s[t], 0, MPFR_RNDN);
        double ks = kvf_case_k_scale(c, b, t, g);
        for (int32_t d = 0; d < c->head_dim; d++) {
            mpfr_set_d(x, dv(*qat((kvf_case *)c, b, h, d)), MPFR_RNDN);
            mpfr_mul_d(x, x, dv(*kat((kvf_case *)c, b, t, g, d)), MPFR_RNDN);
            mpfr_mul_d(x, x, ks, MPFR_RNDN);
            mpfr_add(s[t], s[t], x, MPFR_RNDN);
        }
        mpfr_mul_d(s[t], s[t], (double)c->sm_scale, MPFR_RNDN);
        if (t == 0 || mpfr_cmp(s[t], m) > 0) mpfr_set(m, s[t], MPFR_RNDN);
    }
    for (int32_t d = 0; d < c->head_dim; d++) {
        mpfr_init2(acc[d], 400);
        mpfr_set_ui(acc[d], 0, MPFR_RNDN);
    }
    mpfr_set_ui(z, 0, MPFR_RNDN);
    for (int64_t t = 0; t < L; t++) {
        double vs = kvf_case_v_scale(c, b, t, g);
        mpfr_sub(s[t], s[t], m, MPFR_RNDN);
        mpfr_exp(s[t], s[t], MPFR_RNDN);
        mpfr_add(z, z, s[t], MPFR_RNDN);
        for (int32_t d = 0; d < c->head_dim; d++) {
            mpfr_mul_d(x, s[t], vs * dv(*vat((kvf_case *)c, b, t, g, d)), MPFR_RNDN);
            mpfr_add(acc[d], acc[d], x, MPFR_RNDN);
        }
        mpfr_clear(s[t]);
    }
    for (int32_t d = 0; d < c->head_dim; d++) {
        mpfr_div(x, acc[d], z, MPFR_RNDN);
        o[d] = bf((float)ref_round(x, 8, -132, 128));
        mpfr_clear(acc[d]);
    }
    /* lse = (m + ln z) / ln 2 */
    mpfr_log(z, z, MPFR_RNDN);
    mpfr_add(z, z, m, MPFR_RNDN);
    mpfr_const_log2(x, MPFR_RNDN);
    mpfr_div(x, z, x, MPFR_RNDN);
    *lse = ref_round_f32(x);
    mpfr_clears(m, z, x, (mpfr_ptr)0);
    mpfr_set_emin(old_min);
    mpfr_set_emax(old_max);
}

static void check_against_definition(const kvf_case *c) {
    kvf_oracle_result r;
    /* run() also checks the fast path's bits against the MPFR path's (tensor and head scales;
     * per-token scales go to the MPFR path whole). */
    if (run(&r, c, 0, 0)) return;
    for (int32_t b = 0; b < c->batch_size; b++)
        for (int32_t h = 0; h < c->num_qo_heads; h++) {
            kvf_bf16 o[16];
            float lse;
            ref_row(c, b, h, o, &lse);
            int64_t row = (int64_t)b * c->num_qo_heads + h;
            CHECK_HEX_EQ(kvf_f32_bits(r.lse_rounded[row]), kvf_f32_bits(lse));
            for (int32_t d = 0; d < c->head_dim; d++)
                CHECK_HEX_EQ(r.o_rounded[row * c->head_dim + d], o[d]);
        }
    CHECK_INT_EQ(r.fast_rows, 0); /* run()'s first result is the MPFR path's */
    kvf_oracle_result_free(&r);
}

static void per_token_scales_match_definition(void) {
    for (int it = 0; it < 6; it++) {
        kvf_case c;
        if (quant_case(&c, 3, KVF_SCALE_TOKEN, it < 3 ? 4 : 30)) return;
        check_against_definition(&c);
        kvf_case_free(&c);
    }
}

static void per_head_scales_match_definition(void) {
    for (int it = 0; it < 4; it++) {
        kvf_case c;
        if (quant_case(&c, 2, KVF_SCALE_HEAD, 20)) return;
        check_against_definition(&c);
        kvf_case_free(&c);
    }
}

/* Tensor scales 2^a and 2^b: the plain case with the same values and sm_scale 2^a has the same
 * lse, and o scaled by 2^b (normal range: exact). */
static void power_of_two_scales_fold(void) {
    kvf_case c, p;
    if (quant_case(&c, 2, KVF_SCALE_TENSOR, 0)) return;
    c.k_scale[0] = 0.25f;
    c.v_scale[0] = 8.0f;
    if (build(&p, 4, 2, 16, 4, 0, NULL, 0)) return;
    kvf_case_free(&p);
    /* The plain twin: the same arrays without the quantization. */
    p = c;
    p.quant = (kvf_kv_quant){0, 0, 0};
    p.k_scale = p.v_scale = NULL;
    p.sm_scale = c.sm_scale * 0.25f;
    kvf_oracle_result rq, rp;
    if (run_mpfr(&rq, &c, 0, 0)) return;
    if (run(&rp, &p, 0, 0)) return;
    for (int64_t i = 0; i < kvf_case_lse_elems(&c); i++)
        CHECK_HEX_EQ(kvf_f32_bits(rq.lse_rounded[i]), kvf_f32_bits(rp.lse_rounded[i]));
    for (int64_t i = 0; i < kvf_case_o_elems(&c); i++)
        CHECK_DBL_EQ(dv(rq.o_rounded[i]), 8.0 * dv(rp.o_rounded[i]));
    kvf_oracle_result_free(&rq);
    kvf_oracle_result_free(&rp);
    kvf_case_free(&c);
}

/* Per-token scales that are all the same non-power-of-two value give the tensor scale's bits. */
static void uniform_token_scales_match_tensor(void) {
    kvf_case t, k;
    uint64_t keep = rng_state;
    if (quant_case(&t, 3, KVF_SCALE_TENSOR, 0)) return;
    rng_state = keep;
    if (quant_case(&k, 3, KVF_SCALE_TOKEN, 0)) return;
    t.k_scale[0] = 1.7f;
    t.v_scale[0] = 0.3f;
    for (int64_t i = 0; i < kvf_case_scale_count(&k); i++) {
        k.k_scale[i] = 1.7f;
        k.v_scale[i] = 0.3f;
    }
    kvf_oracle_result a, b;
    if (run_mpfr(&a, &t, 0, 0) || run_mpfr(&b, &k, 0, 0)) return;
    CHECK(memcmp(a.o_rounded, b.o_rounded, (size_t)kvf_case_o_elems(&t) * 2) == 0);
    CHECK(memcmp(a.lse_rounded, b.lse_rounded, (size_t)kvf_case_lse_elems(&t) * 4) == 0);
    kvf_oracle_result_free(&a);
    kvf_oracle_result_free(&b);
    kvf_case_free(&t);
    kvf_case_free(&k);
}

/* Equal logits (k = 0) and two tokens whose scaled v average to a bf16 midpoint: the exact tie
 * goes to even; a scale 2^-20 larger breaks it upward. */
static void scaled_values_decide_ties(void) {
    for (int up = 0; up < 2; up++) {
        kvf_case c;
        int64_t len[1] = {2};
        if (build(&c, 1, 1, 1, 2, 1, len, 0)) return;
        kvf_limits lim;
        kvf_limits_default(&lim);
        kvf_error err;
        kvf_kv_quant q = {KVF_KV_E4M3, KVF_KV_E4M3, KVF_SCALE_TOKEN};
        CHECK_OK(kvf_case_set_quant(&c, &q, &lim, &err), &err);
        *qat(&c, 0, 0, 0) = bf(1.0f);
        *vat(&c, 0, 0, 0, 0) = bf(1.0f);
        *vat(&c, 0, 1, 0, 0) = bf(1.0f);
        for (int i = 0; i < 2; i++)
            c.k_scale[i] = 1.0f;
        c.v_scale[0] = 1.0f;
        c.v_scale[1] = (float)(1.0 + 0x1p-7 + (up ? 0x1p-20 : 0));
        kvf_oracle_result r;
        if (run_mpfr(&r, &c, 0, 0)) return;
        CHECK_HEX_EQ(r.o_rounded[0], up ? 0x3F81 : 0x3F80);
        CHECK_INT_EQ(r.exact_ties, up ? 0 : 1);
        kvf_oracle_result_free(&r);
        kvf_case_free(&c);
    }
}

/* A key scale whose fold into sm_scale log2(e) passes f32 marks the row's logits overflow. */
static void folded_scale_overflow_is_flagged(void) {
    kvf_case c;
    if (quant_case(&c, 1, KVF_SCALE_TENSOR, 0)) return;
    c.sm_scale = 1.0f;
    kvf_oracle_result r;
    c.k_scale[0] = 0x1p100f;
    if (run_mpfr(&r, &c, 0, 0)) return;
    CHECK(!(r.rows[0].overflow & KVF_ORACLE_OVERFLOW_LOGITS));
    kvf_oracle_result_free(&r);
    /* Zero the keys so the logits stay 0: only the fold itself overflows. */
    for (int64_t t = 0; t < kvf_case_seq_len(&c, 0); t++)
        for (int32_t d = 0; d < 16; d++)
            *kat(&c, 0, t, 0, d) = *kat(&c, 0, t, 1, d) = 0;
    c.k_scale[0] = 0x1.8p127f;
    if (run_mpfr(&r, &c, 0, 0)) return;
    CHECK(r.rows[0].overflow & KVF_ORACLE_OVERFLOW_LOGITS);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

/* A scaled case whose k holds a value outside the FP8 range is refused by the validator and,
 * where the exact dot would leave its digits (a subnormal q and scale), by the oracle: never
 * computed wrong. */
static void refuses_k_outside_fp8_range(void) {
    kvf_case c;
    if (quant_case(&c, 1, KVF_SCALE_TENSOR, 0)) return;
    *kat(&c, 0, 0, 0, 3) = bf(0x1p-20f);
    *qat(&c, 0, 0, 3) = 0x0001; /* 2^-133 */
    c.k_scale[0] = 0x1p-149f;
    kvf_limits lim;
    kvf_limits_default(&lim);
    kvf_error err;
    CHECK_INT_EQ(kvf_case_validate(&c, &lim, &err), KVF_EINVAL);
    CHECK(strstr(err.msg, "not an e4m3 value") != NULL);
    kvf_oracle_result r;
    kvf_oracle_opts o;
    kvf_oracle_opts_default(&o);
    CHECK_INT_EQ(kvf_oracle_run(&r, &c, &o, &err), KVF_EINVAL);
    CHECK(strstr(err.msg, "outside the FP8 range") != NULL);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

/* Generated quantized cases (every strategy, tensor and per-head scales, their edges): the
 * fast path's rounded values and row data are the MPFR path's bit for bit (run() checks), and it
 * certifies most rows itself. */
static void fast_path_agrees_on_generated_cases(void) {
    kvf_random_opts ro;
    kvf_random_opts_default(&ro);
    ro.max_work = 1 << 14;
    ro.layouts = 0;
    kvf_limits lim;
    kvf_limits_default(&lim);
    long fast = 0, rows = 0;
    for (uint64_t seed = 1; seed <= 150; seed++) {
        kvf_spec sp;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_random(&sp, seed, &ro, &err), &err);
        kvf_prng r;
        kvf_prng_seed_stream(&r, seed, 3);
        kvf_recipe_draw_quant(&sp.quant, &sp.recipe, &r);
        if (sp.quant.kv.granularity == KVF_SCALE_TOKEN) sp.quant.kv.granularity = KVF_SCALE_HEAD;
        kvf_case c;
        if (kvf_case_build(&c, &sp, &lim, &err)) {
            CHECK_FAIL_AT("seed %llu: %s", (unsigned long long)seed, err.msg);
            kvf_spec_free(&sp);
            continue;
        }
        kvf_oracle_opts o;
        kvf_oracle_opts_default(&o);
        kvf_oracle_result f, m;
        CHECK_OK(kvf_oracle_run(&f, &c, &o, &err), &err);
        if (run_mpfr(&m, &c, 0, 0) == 0) {
            check_fast_path_agrees(&m, &c);
            kvf_oracle_result_free(&m);
        }
        fast += f.fast_rows;
        rows += f.fast_rows + f.fallback_rows;
        kvf_oracle_result_free(&f);
        kvf_case_free(&c);
        kvf_spec_free(&sp);
    }
    CHECK(rows > 0 && fast * 2 > rows);
    printf("fast path certified %ld of %ld rows of quantized cases\n", fast, rows);
}

static void streamed_rows_agree(void) {
    void (*const fns[])(void) = {per_token_scales_match_definition,
                                 per_head_scales_match_definition, scaled_values_decide_ties,
                                 fast_path_agrees_on_generated_cases};
    run_streamed(fns, sizeof fns / sizeof fns[0]);
}

static const check_test tests[] = {
    {"per_token_scales_match_definition", per_token_scales_match_definition},
    {"per_head_scales_match_definition", per_head_scales_match_definition},
    {"power_of_two_scales_fold", power_of_two_scales_fold},
    {"uniform_token_scales_match_tensor", uniform_token_scales_match_tensor},
    {"scaled_values_decide_ties", scaled_values_decide_ties},
    {"folded_scale_overflow_is_flagged", folded_scale_overflow_is_flagged},
    {"refuses_k_outside_fp8_range", refuses_k_outside_fp8_range},
    {"fast_path_agrees_on_generated_cases", fast_path_agrees_on_generated_cases},
    {"streamed_rows_agree", streamed_rows_agree},
    {NULL, NULL},
};

CHECK_MAIN(tests)
