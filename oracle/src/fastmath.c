/* Constants of the fast path's exp and log, correctly rounded by MPFR, and ln z for z >= 1
 * (fastmath.h; the error analysis is docs/oracle.md, "The fast path", F2-F3). */
#include "fastmath.h"

#include <math.h>
#include <mpfr.h>
#include <pthread.h>

kvf__fm_consts kvf__fm;

static pthread_once_t fm_once = PTHREAD_ONCE_INIT;

static void fm_fill(void) {
    mpfr_t a, r, l;
    mpfr_inits2(256, a, r, l, (mpfr_ptr)0);
    for (int j = 0; j < 64; j++) {
        mpfr_set_ui(a, (unsigned long)j, MPFR_RNDN);
        mpfr_div_2ui(a, a, 6, MPFR_RNDN); /* j/64, exact */
        mpfr_exp2(r, a, MPFR_RNDN);
        kvf__fm.t2[j] = mpfr_get_d(r, MPFR_RNDN);
    }
    mpfr_const_log2(l, MPFR_RNDN); /* ln 2 to 256 bits */
    kvf__fm.ln2 = mpfr_get_d(l, MPFR_RNDN);
    mpfr_ui_div(r, 1, l, MPFR_RNDN);
    kvf__fm.log2e = mpfr_get_d(r, MPFR_RNDN);
    mpfr_mul_2ui(r, r, 6, MPFR_RNDN); /* 64 / ln 2 */
    kvf__fm.inv_l = mpfr_get_d(r, MPFR_RNDN);
    mpfr_div_2ui(a, l, 6, MPFR_RNDN); /* ln 2 / 64 */
    mpfr_set_prec(r, 36);
    mpfr_set(r, a, MPFR_RNDN);
    kvf__fm.l_hi = mpfr_get_d(r, MPFR_RNDN); /* exact: 36 bits */
    mpfr_sub(a, a, r, MPFR_RNDN);            /* exact at 256 bits */
    kvf__fm.l_lo = mpfr_get_d(a, MPFR_RNDN);
    mpfr_set_prec(r, 256);
    mpfr_set_ui(r, 1, MPFR_RNDN);
    for (int i = 0; i < 7; i++) {
        if (i > 1) mpfr_div_ui(r, r, (unsigned long)i, MPFR_RNDN); /* 1/i! to 256 bits */
        kvf__fm.ec[i] = mpfr_get_d(r, MPFR_RNDN);
    }
    for (int i = 0; i < 14; i++) {
        mpfr_set_ui(a, 1, MPFR_RNDN);
        mpfr_div_ui(a, a, (unsigned long)(2 * i + 1), MPFR_RNDN);
        kvf__fm.lc[i] = mpfr_get_d(a, MPFR_RNDN);
    }
    mpfr_clears(a, r, l, (mpfr_ptr)0);
}

void kvf__fm_init(void) {
    pthread_once(&fm_once, fm_fill);
}

/* z = 2^e f, f in [sqrt(1/2), sqrt(2)): f - 1 is exact (Sterbenz: f/1 in [1/2, 2]) and
 * s = (f - 1)/(f + 1) has |s| <= 0.1716 with relative error <= 2u + u^2, so
 * |2atanh-series(s) - ln f| <= KVF__SERIES_ERR |ln f| (F3). Then
 * ln z = e ln 2 + ln f: e * RN(ln 2) is off by at most |e| 2^-54 from e ln 2 (the constant) plus
 * u |e RN(ln 2)| (the product, exact for |e| < 2^10 anyway), and the sum rounds once more. */
double kvf__log_ge1(double z, double *err) {
    int e;
    double f = frexp(z, &e); /* z = f 2^e, f in [1/2, 1) */
    if (f < 0.70710678118654752) {
        f *= 2;
        e -= 1;
    }
    double s = (f - 1.0) / (f + 1.0);
    double lf = kvf__atanh2(s);
    double ke = (double)e * kvf__fm.ln2;
    double res = ke + lf;
    double alf = fabs(lf), ake = fabs(ke);
    /* Each term of the bound is nonnegative; the sum of four terms, rounded, is then inflated by
     * 2^-40 relative (more than the 4u its own rounding can lose) plus an absolute 2^-1000. */
    *err = (KVF__SERIES_ERR * alf + fabs((double)e) * 0x1p-54 + KVF__U * ake + KVF__U * fabs(res)) *
               (1 + 0x1p-40) +
           0x1p-1000;
    return res;
}
