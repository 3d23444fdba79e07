/* Unit tests of the value draws of both expansions (core/src/gen_draw1.c, gen_draw2.c, through
 * kvf_case_build): the laws of every distribution, poison kind and filler, checked
 * statistically on fixed seeds (moments, ranges, shares within 6 standard errors). */
#include "spec_fixtures.h"

/* One long sequence of one kv head, contiguous, full pages: k_cache[0, n) holds n values of the
 * k distribution in order; q is drawn from `q`. */
static int law_case(kvf_case *c, kvf_dist k, kvf_dist q, uint64_t seed, int64_t tokens) {
    kvf_limits lim = limits();
    kvf_spec s;
    memset(&s, 0, sizeof s);
    kvf_recipe *rp = &s.recipe;
    rp->expansion = (uint8_t)g_expansion;
    rp->num_qo_heads = rp->num_kv_heads = 1;
    rp->head_dim = 128;
    rp->page_size = 128;
    rp->sm_scale = 1.0f;
    rp->k = k;
    rp->q = q;
    rp->v = k;
    rp->seed = seed;
    kvf_spec_set_batch(&s, 1, NULL);
    kvf_recipe_set_seq_len(rp, 0, tokens);
    kvf_error err = {0};
    int rc = kvf_case_build(c, &s, &lim, &err);
    if (rc) CHECK_FAIL_AT("law case does not build: %s", err.msg);
    kvf_spec_free(&s);
    return rc;
}

/* |observed - expected| within 6 standard errors (a binomial count or a sample mean): the
 * seeds are fixed, so this is a sanity bound on the law, never a flaky one. */
static void check_near(const char *what, double observed, double expected, double std_error) {
    if (!(fabs(observed - expected) <= 6 * std_error + 1e-12))
        CHECK_FAIL_AT("expansion %d, %s: %.6g, expected %.6g (6 standard errors: %.3g)",
                      g_expansion, what, observed, expected, 6 * std_error);
}

static void check_count(const char *what, int64_t count, int64_t n, double p) {
    check_near(what, (double)count / (double)n, p, sqrt(p * (1 - p) / (double)n));
}

/* Moments and ranges of the continuous kinds, on 2^20 values each. */
static void test_distribution_laws(void) {
    const int64_t tokens = 8192, n = tokens * 128;
    for (int scale = -3; scale <= 5; scale += 8) {
        const double sd = ldexp(1.0, scale);
        kvf_case c;
        /* normal: mean 0, variance 2^(2 scale), |x| <= 2 sqrt(3) 2^scale (Irwin-Hall of 4). */
        if (law_case(&c, (kvf_dist){KVF_DIST_NORMAL, (int8_t)scale, 0},
                     (kvf_dist){KVF_DIST_UNIFORM, (int8_t)scale, 0}, 11, tokens))
            return;
        double sum = 0, sum2 = 0, sum4 = 0, maxabs = 0;
        for (int64_t i = 0; i < n; i++) {
            double x = kvf_bf16_to_f32(c.k_cache[i]) / sd;
            sum += x, sum2 += x * x, sum4 += x * x * x * x;
            if (fabs(x) > maxabs) maxabs = fabs(x);
        }
        check_near("normal mean", sum / n, 0, 1 / sqrt((double)n));
        /* The Irwin-Hall sum of four uniforms has kurtosis 3 - 6/(5 * 4) = 2.7, so
         * Var(x^2) = 2.7 - 1. */
        check_near("normal variance", sum2 / n, 1, sqrt(1.7 / n));
        check_near("normal fourth moment", sum4 / n, 2.7, 0.01);
        CHECK(maxabs <= 2 * sqrt(3.0) * (1 + 1.0 / 128));
        CHECK(maxabs > 3.0); /* the tails reach past 3 sigma at this sample size */
        /* uniform (q): mean 0, variance 2^(2 scale) / 3, inside [-2^scale, 2^scale]. */
        int64_t nq = kvf_case_q_elems(&c);
        CHECK_INT_EQ(nq, 128);
        kvf_case_free(&c);
        kvf_dist u = {KVF_DIST_UNIFORM, (int8_t)scale, 0};
        if (law_case(&c, u, u, 12, tokens)) return;
        sum = sum2 = maxabs = 0;
        int64_t neg = 0;
        for (int64_t i = 0; i < n; i++) {
            double x = kvf_bf16_to_f32(c.k_cache[i]) / sd;
            sum += x, sum2 += x * x;
            neg += x < 0;
            if (fabs(x) > maxabs) maxabs = fabs(x);
        }
        check_near("uniform mean", sum / n, 0, sqrt(1.0 / 3 / n));
        check_near("uniform variance", sum2 / n, 1.0 / 3, sqrt((1.0 / 5 - 1.0 / 9) / n));
        check_count("uniform negative share", neg, n, 0.5);
        CHECK(maxabs <= 1.0 && maxabs > 0.999);
        kvf_case_free(&c);
    }
    /* log-uniform, span 6, scale -2: floor(log2 |x|) + 2 uniform on [-6, 6] (13 values), the
     * significand uniform in [1, 2) (mean of log2 of it: 2 - 1 / ln 2), signs even. */
    kvf_case c;
    if (law_case(&c, (kvf_dist){KVF_DIST_LOG_UNIFORM, -2, 6}, (kvf_dist){KVF_DIST_NORMAL, 0, 0}, 13,
                 tokens))
        return;
    int64_t bins[13] = {0}, neg = 0, outside = 0;
    double frac = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = fabs((double)kvf_bf16_to_f32(c.k_cache[i]));
        neg += kvf_bf16_to_f32(c.k_cache[i]) < 0;
        int e;
        double m = frexp(x, &e); /* x = m 2^e, m in [0.5, 1) */
        int bin = e - 1 + 2 + 6;
        if (bin == 13 && m == 0.5) bin = 12; /* 2 - 2^-9 and above round up to the next power */
        if (x == 0 || bin < 0 || bin > 12) {
            outside++;
            continue;
        }
        bins[bin]++;
        frac += log2(2 * m);
    }
    CHECK_INT_EQ(outside, 0);
    for (int b = 0; b < 13; b++)
        check_count("log-uniform exponent bin", bins[b], n, 1.0 / 13);
    check_count("log-uniform negative share", neg, n, 0.5);
    /* log2 of a bf16 significand: the rounding to 8 bits moves the mean by less than 2^-9. */
    check_near("log-uniform significand", frac / n, 2 - 1 / log(2.0),
               0.3 / sqrt((double)n) + 0.002);
    kvf_case_free(&c);
}

/* The discrete kinds: one-hot spikes, subnormals, signed zeros, extremes, constants. */
static void test_discrete_laws(void) {
    const int64_t tokens = 4096, n = tokens * 128;
    kvf_case c;
    /* one-hot, param 32: one spike at a uniform position per row of 128, each other value a
     * spike with probability 32/256. */
    if (law_case(&c, (kvf_dist){KVF_DIST_ONE_HOT, 1, 32}, (kvf_dist){KVF_DIST_ONE_HOT, 1, 0}, 21,
                 tokens))
        return;
    int64_t spikes = 0, others = 0, first_half = 0;
    for (int64_t r = 0; r < tokens; r++) {
        int64_t row = 0;
        for (int i = 0; i < 128; i++) {
            kvf_bf16 x = c.k_cache[r * 128 + i];
            if (x == 0x4000) /* 2^1 */
                row++;
            else if (x != 0)
                others++;
        }
        CHECK(row >= 1);
        spikes += row;
    }
    CHECK_INT_EQ(others, 0);
    check_count("one-hot extra spikes", spikes - tokens, n - tokens, 32.0 / 256);
    /* q, param 0: exactly one spike per row, at a uniform position. */
    int64_t q_spikes = 0;
    for (int i = 0; i < 128; i++)
        q_spikes += c.q[i] == 0x4000;
    CHECK_INT_EQ(q_spikes, 1);
    kvf_case_free(&c);
    if (law_case(&c, (kvf_dist){KVF_DIST_NORMAL, 0, 0}, (kvf_dist){KVF_DIST_ONE_HOT, 0, 0}, 22, 1))
        return;
    kvf_case_free(&c);
    /* Spike positions over many one-row cases (q of one head): uniform over the row. */
    for (uint64_t seed = 0; seed < 512; seed++) {
        if (law_case(&c, (kvf_dist){KVF_DIST_CONSTANT, 0, 0}, (kvf_dist){KVF_DIST_ONE_HOT, 0, 0},
                     1000 + seed, 1))
            return;
        for (int i = 0; i < 128; i++)
            if (c.q[i]) first_half += i < 64;
        kvf_case_free(&c);
    }
    check_count("one-hot spike position in the first half", first_half, 512, 0.5);
    /* subnormal: bits 1..255 (either sign), each equally likely. */
    if (law_case(&c, (kvf_dist){KVF_DIST_SUBNORMAL, 0, 0}, (kvf_dist){KVF_DIST_CONSTANT, 3, 0}, 23,
                 tokens))
        return;
    static int64_t bits[256];
    memset(bits, 0, sizeof bits);
    int64_t neg = 0, bad = 0;
    for (int64_t i = 0; i < n; i++) {
        kvf_bf16 x = c.k_cache[i];
        neg += x >> 15;
        if ((x & 0x7FFF) < 1 || (x & 0x7FFF) > 255)
            bad++;
        else
            bits[x & 0xFF]++;
    }
    CHECK_INT_EQ(bad, 0);
    check_count("subnormal negative share", neg, n, 0.5);
    check_count("subnormal value 1", bits[1], n, 1.0 / 255);
    check_count("subnormal value 0x7F", bits[0x7F], n, 1.0 / 255);
    check_count("subnormal value 0xFF", bits[0xFF], n, 1.0 / 255);
    int64_t subnormal = 0;
    for (int b = 1; b < 128; b++)
        subnormal += bits[b];
    check_count("subnormal share of true subnormals", subnormal, n, 127.0 / 255);
    for (int i = 0; i < 128; i++)
        CHECK_HEX_EQ(c.q[i], 0x4100); /* constant 2^3 */
    kvf_case_free(&c);
    /* signed zero: +0 3/8, -0 3/8, N(0, 2^scale) 1/4. */
    if (law_case(&c, (kvf_dist){KVF_DIST_SIGNED_ZERO, 2, 0}, (kvf_dist){KVF_DIST_NORMAL, 0, 0}, 24,
                 tokens))
        return;
    int64_t pz = 0, nz = 0, other = 0;
    double sum2 = 0;
    for (int64_t i = 0; i < n; i++) {
        kvf_bf16 x = c.k_cache[i];
        if (x == 0x0000)
            pz++;
        else if (x == 0x8000)
            nz++;
        else {
            double v = kvf_bf16_to_f32(x) / 4;
            other++;
            sum2 += v * v;
        }
    }
    check_count("signed-zero +0", pz, n, 3.0 / 8);
    check_count("signed-zero -0", nz, n, 3.0 / 8);
    check_near("signed-zero normal variance", sum2 / (double)other, 1, sqrt(1.7 / (double)other));
    kvf_case_free(&c);
    /* special: each of the seven extremes 1/64, else N(0, 2^scale). */
    if (law_case(&c, (kvf_dist){KVF_DIST_SPECIAL, 0, 0}, (kvf_dist){KVF_DIST_NORMAL, 0, 0}, 25,
                 tokens))
        return;
    static const kvf_bf16 extremes[] = {0x7F7F, 0xFF7F, 0x0080, 0x8080, 0x0000, 0x8000, 0x0001};
    int64_t hits[7] = {0};
    for (int64_t i = 0; i < n; i++)
        for (int e = 0; e < 7; e++)
            hits[e] += c.k_cache[i] == extremes[e];
    for (int e = 0; e < 7; e++)
        check_count("special extreme", hits[e], n, 1.0 / 64);
    kvf_case_free(&c);
}

/* Poison and filler: NaN payloads uniform on 1..127 with even signs, infinities of even signs,
 * filler finite and nonzero in +-[0.5, 1) with its 7 significand bits uniform. */
static void test_poison_and_filler_laws(void) {
    kvf_limits lim = limits();
    static const uint8_t kinds[] = {KVF_POISON_TAIL_NAN | KVF_POISON_UNREF_NAN,
                                    KVF_POISON_TAIL_INF | KVF_POISON_UNREF_INF, 0};
    for (int k = 0; k < 3; k++) {
        kvf_spec s;
        kvf_error err = {0};
        CHECK_OK(kvf_spec_preset(&s, "tail-nan", 9, &err), &err);
        s.recipe.expansion = (uint8_t)g_expansion;
        s.recipe.poison = kinds[k];
        s.recipe.spare_pages = 16;
        kvf_case c;
        CHECK_OK(kvf_case_build(&c, &s, &lim, &err), &err);
        kvf_spec_free(&s);
        const int64_t pe = kvf_case_page_elems(&c), se = (int64_t)c.num_kv_heads * c.head_dim;
        const int64_t last = c.kv_indices[c.kv_indptr[1] - 1];
        int64_t n = 0, neg = 0, bad = 0, low = 0, top = 0;
        for (int64_t i = 0; i < c.num_resident_pages; i++) {
            int64_t p = c.resident_pages[i];
            int referenced = 0;
            for (int32_t j = 0; j < c.kv_indptr[1]; j++)
                referenced |= c.kv_indices[j] == p;
            if (referenced && p != last) continue;
            int64_t from = p == last ? c.kv_last_page_len[0] * se : 0;
            for (int cache = 0; cache < 2; cache++)
                for (int64_t e = from; e < pe; e++) {
                    kvf_bf16 x = (cache ? c.v_cache : c.k_cache)[p * pe + e];
                    n++;
                    neg += x >> 15;
                    if (k == 0) {
                        bad += !kvf_bf16_is_nan(x);
                        low += (x & 0x7F) == 1;
                        top += (x & 0x7F) == 0x7F;
                    } else if (k == 1) {
                        bad += !kvf_bf16_is_inf(x);
                    } else {
                        float v = fabsf(kvf_bf16_to_f32(x));
                        bad += !(v >= 0.5f && v < 1.0f);
                        low += (x & 0x7F) == 0;
                        top += (x & 0x7F) == 0x7F;
                    }
                }
        }
        CHECK(n > 100000);
        CHECK_INT_EQ(bad, 0);
        check_count("poison/filler negative share", neg, n, 0.5);
        if (k == 0) {
            check_count("NaN payload 1", low, n, 1.0 / 127);
            check_count("NaN payload 0x7F", top, n, 1.0 / 127);
        } else if (k == 2) {
            check_count("filler significand 0", low, n, 1.0 / 128);
            check_count("filler significand 0x7F", top, n, 1.0 / 128);
        }
        kvf_case_free(&c);
    }
}

BOTH_EXPANSIONS(test_distribution_laws)
BOTH_EXPANSIONS(test_discrete_laws)
BOTH_EXPANSIONS(test_poison_and_filler_laws)

static const check_test tests[] = {
    {"distribution_laws", test_distribution_laws_e1},
    {"distribution_laws_expansion2", test_distribution_laws_e2},
    {"discrete_laws", test_discrete_laws_e1},
    {"discrete_laws_expansion2", test_discrete_laws_e2},
    {"poison_and_filler_laws", test_poison_and_filler_laws_e1},
    {"poison_and_filler_laws_expansion2", test_poison_and_filler_laws_e2},
    {NULL, NULL},
};

CHECK_MAIN(tests)
