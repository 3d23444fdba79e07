/* Unit test of the oracle's GMP memory cap (oracle/src/mp_memory.c): memory past a thread's cap
 * is a flag, never an abort. */
#include "check.h"

#include <mpfr.h>

#include "../oracle/src/mp_memory.h"

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

static const check_test tests[] = {
    {"gmp_cap_is_a_flag", test_gmp_cap_is_a_flag},
    {NULL, NULL},
};

CHECK_MAIN(tests)
