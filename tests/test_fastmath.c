/* Unit tests of the fast oracle path's arithmetic (oracle/src/fastmath.c) against MPFR: exp and
 * log within their stated bounds, and the bf16 rounding against the MPFR path's
 * kvf_oracle_round_bf16 on random doubles and on every midpoint and its neighbours. */
#include "check.h"

#include <mpfr.h>

#include "../oracle/src/fastmath.h"
#include "fast_rng.h"
#include "kvfuzz/oracle.h"

/* |approx - exact| / |exact| at 200 bits, rounded up. */
static double rel_err(double approx, mpfr_srcptr exact) {
    mpfr_t d;
    mpfr_init2(d, 200);
    mpfr_sub_d(d, exact, approx, MPFR_RNDN);
    mpfr_div(d, d, exact, MPFR_RNDN);
    double r = fabs(mpfr_get_d(d, MPFR_RNDU));
    mpfr_clear(d);
    return r;
}

static void test_exp_bound(void) {
    kvf__fm_init();
    mpfr_t x, y;
    mpfr_inits2(200, x, y, (mpfr_ptr)0);
    double worst = 0;
    for (int i = 0; i < 200000; i++) {
        double v;
        switch (i % 4) {
        case 0:
            v = -701 * rng_unit();
            break;
        case 1:
            v = -ldexp(rng_unit(), -(int)(rng_next() % 60));
            break;
        case 2:
            v = -(double)(rng_next() % 1011) * 0.6931471805599453 / 64 * 64;
            break;
        default: /* near the reduction's rounding points n + 1/2 */
            v = -((double)(rng_next() % 64000) + 0.5) * 0.010830424696249145 +
                ldexp(rng_unit() - 0.5, -40);
        }
        if (v < -701) v = -701;
        mpfr_set_d(x, v, MPFR_RNDN);
        mpfr_exp(y, x, MPFR_RNDN);
        double e = rel_err(kvf__exp(v), y);
        if (e > worst) worst = e;
        if (!(e <= KVF__EXP_ERR)) CHECK_FAIL_AT("exp(%a): relative error %g", v, e);
    }
    CHECK_DBL_EQ(kvf__exp(0.0), 1.0);
    CHECK_DBL_EQ(kvf__exp(-0.0), 1.0);
    printf("exp: worst relative error %.3g = %.2f u (bound %.0f u)\n", worst, worst / KVF__U,
           KVF__EXP_ERR / KVF__U);
    mpfr_clears(x, y, (mpfr_ptr)0);
}

static void test_log_bound(void) {
    kvf__fm_init();
    mpfr_t x, y;
    mpfr_inits2(200, x, y, (mpfr_ptr)0);
    double worst1 = 0;
    for (int i = 0; i < 100000; i++) {
        double r = i % 2 ? 0.5 * rng_unit() : ldexp(rng_unit(), -(int)(rng_next() % 1000));
        mpfr_set_d(x, r, MPFR_RNDN);
        mpfr_log1p(y, x, MPFR_RNDN);
        double got = kvf__log1p_small(r);
        if (r == 0) {
            CHECK_DBL_EQ(got, 0.0);
            continue;
        }
        double e = rel_err(got, y);
        if (e > worst1) worst1 = e;
        if (!(e <= KVF__SERIES_ERR)) CHECK_FAIL_AT("log1p(%a): relative error %g", r, e);
    }
    double worst2 = 0;
    for (int i = 0; i < 100000; i++) {
        double z = i % 3 ? 1 + ldexp(rng_unit(), (int)(rng_next() % 30))
                         : nextafter(1.0, 2.0) + rng_unit() * 1e-9;
        mpfr_set_d(x, z, MPFR_RNDN);
        mpfr_log(y, x, MPFR_RNDN);
        double bound;
        double got = kvf__log_ge1(z, &bound);
        mpfr_sub_d(x, y, got, MPFR_RNDN);
        double err = fabs(mpfr_get_d(x, MPFR_RNDU));
        if (!(err <= bound)) CHECK_FAIL_AT("log(%a): error %g above its bound %g", z, err, bound);
        if (err / mpfr_get_d(y, MPFR_RNDN) > worst2) worst2 = err / mpfr_get_d(y, MPFR_RNDN);
    }
    printf("log1p: worst relative error %.2f u (bound %.0f u); log: worst %.2f u\n",
           worst1 / KVF__U, KVF__SERIES_ERR / KVF__U, worst2 / KVF__U);
    mpfr_clears(x, y, (mpfr_ptr)0);
}

/* kvf__bf16_rne against the MPFR path's kvf_oracle_round_bf16 on random doubles of every
 * magnitude, and on every bf16 midpoint and its neighbours (ties to even, the subnormals, the
 * overflow threshold). */
static void test_bf16_rounding(void) {
    for (int i = 0; i < 300000; i++) {
        uint64_t bits = rng_next();
        int e = (int)(rng_next() % 300) - 160; /* the bf16 range and beyond */
        bits = (bits & 0x800FFFFFFFFFFFFFu) | ((uint64_t)(e + 1023) << 52);
        double x;
        memcpy(&x, &bits, sizeof x);
        CHECK_HEX_EQ(kvf__bf16_rne(x), kvf_oracle_round_bf16(x));
    }
    for (uint32_t m = 0; m < 0x7F80u; m++) {
        double a = (double)kvf_bf16_to_f32((kvf_bf16)m);
        double bnext = m + 1 < 0x7F80u ? (double)kvf_bf16_to_f32((kvf_bf16)(m + 1)) : 0x1p128;
        double mid = (a + bnext) / 2; /* exact */
        double pts[] = {mid, nextafter(mid, 0), nextafter(mid, INFINITY), a, nextafter(a, 0)};
        for (int k = 0; k < 5; k++)
            for (int sg = 0; sg < 2; sg++) {
                double x = sg ? -pts[k] : pts[k];
                CHECK_HEX_EQ(kvf__bf16_rne(x), kvf_oracle_round_bf16(x));
            }
    }
}

static const check_test tests[] = {
    {"exp_bound", test_exp_bound},
    {"log_bound", test_log_bound},
    {"bf16_rounding", test_bf16_rounding},
    {NULL, NULL},
};

CHECK_MAIN(tests)
