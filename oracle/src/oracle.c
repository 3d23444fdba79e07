/* The MPFR oracle: correctly rounded o (bf16) and lse (f32) of GQA paged decode attention.
 *
 * Notation (one row = one sequence b and one query head h; docs/oracle.md has the long form):
 * s_t = sm_scale * sum_d q_d k_td, m = max_t s_t, delta_t = s_t - m <= 0, w_t = e^delta_t,
 * Z = sum_t w_t >= 1 (the argmax token has w = 1), N_d = sum_t w_t v_td, o_d = N_d / Z,
 * lse = (m + ln Z) / ln 2, u = 2^-p for the working precision p.
 *
 * 1. Logits are exact. A bf16 is M * 2^e with an integer M < 2^8 and e >= -133, so a product
 *    q_d k_td is an integer P < 2^16 times 2^(e_q + e_k) with e_q + e_k in [-266, 240]: every
 *    product is an integer multiple of 2^-266 below 2^256. The dot, scaled by 2^266, is an
 *    integer of magnitude < D * 2^522 < 2^553 (D < 2^31); it is accumulated exactly in 32-bit
 *    digits (dot_accumulate). Any difference of two dots is < 2^554 in the same units, and the
 *    f32 sm_scale has a 24-bit integer significand, so s_t, m, delta_t and any difference of two
 *    deltas have integer significands below 2^579 and are exact in LOGIT_PREC = 640 bits
 *    (MPFR's exponent is separate, so the range of sm_scale does not matter).
 *
 * 2. Weights. w_t is computed as RN_p(e^delta_t) (mpfr_exp is correctly rounded, relative error
 *    <= u). Tokens with delta_t < -2^20 are "negligible": w_t < e^(-2^20) < eta = 2^(-2^20).
 *    They get no exponential and enter the bounds through n_neg * eta (n_neg of them). This also
 *    keeps every exponential far inside MPFR's exponent range; we still widen the range to its
 *    maximum for the computation (delta_t itself can reach -2^580).
 *
 * 3. Z_hat = RN_p(sum w_hat) (mpfr_sum, correctly rounded). N_hat_d is the exact sum of the exact
 *    products w_hat_t * v_td, truncated below 2^F_d in a fixed-point accumulator
 *    (column_accumulate); each truncated piece loses < 2^F_d, tau_d = (pieces truncated) * 2^F_d.
 *    A_d = sum_t w_t |v_td| is bounded above in double arithmetic (A_up, see column_abs_sums).
 *    With o_hat = RN_p(N_hat / Z_hat), u <= 2^-20 and n_neg * eta < 2^-1000, the error is
 *        |o - o_hat| <= E_d = u (5 C_up + 2 |o_hat|) + 2 tau_d + 4 n_neg eta (A_up + V)
 *    where C_up = RU(A_up / Z_hat) >= C_d = A_d / Z (the conditioning the judge uses) and V is
 *    the largest |v|. Derivation: N_hat/Z_hat - o = (dN - o dZ) / Z_hat with
 *    |dZ| <= (2u + u^2) Z + (1 + u) n_neg eta, |dN| <= tau + u A + n_neg eta V, |o| Z <= A and
 *    Z, Z_hat >= 1 (docs/oracle.md spells out each step). For lse, Z = 1 + R with R the sum of
 *    the weights other than the reference token's (exactly 1); with R_hat = RN_p(sum w_hat),
 *    l = RN(log1p(R_hat)), y = RN(m + l), lam = RN(y / RN(ln 2)):
 *        |lse - lam| <= u (5 |y| + 6 l) + 3 n_neg eta,
 *    relative when m = 0, so a tiny lse (a subnormal, or +0) is certified at once. These bounds
 *    need n_neg eta far below u, hence p <= 2^19.
 *
 * 4. Ziv. Both ends of [x_hat - E, x_hat + E] (rounded outward) are rounded to the target format
 *    exactly as IEEE 754 does (round_to_format: round to nearest even at the precision the
 *    binade allows, subnormals by their fixed quantum, overflow past the largest finite value).
 *    Rounding is monotone, so equal results certify the answer. Otherwise: if the two results
 *    are adjacent, exactly one rounding boundary beta (a bf16 midpoint, or 0 between -0 and +0)
 *    lies inside, and boundary_side decides sign(o - beta) exactly (item 5); if not adjacent,
 *    the precision doubles.
 *
 * 5. Exact ties (Lindemann-Weierstrass). Group the tokens by exact logit value s_j (distinct
 *    rationals) and let S_j = sum over the group of (v_td - beta), an exact dyadic. Then
 *    o - beta = sum_j e^(s_j) S_j / (sum_t e^(s_t)). By Lindemann-Weierstrass (Baker's form:
 *    sum b_j e^(a_j) != 0 for distinct algebraic a_j and algebraic b_j not all zero), o == beta
 *    iff every S_j == 0, i.e. iff every group's mean of v_d is beta. That is tested exactly;
 *    a tie rounds to even (and an exact 0 gives +0). Otherwise the groups before the first
 *    nonzero S_j0 contribute nothing, and sign(o - beta) = sign(T) with
 *    T = sum_{j>=j0} e^(s_j - s_a) S_j for an anchor group a with 0 <= s_a - s_j0 <= 2^19. T is
 *    nonzero and its leading term is at least e^(-2^19) |S_j0| while every group below
 *    s_a - 2^20 is bounded by eta |S_j|, so a Ziv loop on T terminates even when o - beta is
 *    as small as e^(-2^580). The same theorem shows lse is rational only when every logit is 0
 *    (then lse = log2 L, an integer iff L is a power of two, handled exactly); every rounding
 *    boundary of f32 is rational, so the lse Ziv loop needs no tie test.
 *
 * 6. Scaled caches (kvfuzz/kv_quant.h: k = k_scale_t k8, v = v_scale_t v8, both caches FP8 when
 *    scales exist). The key scale goes into the dot: k_scale = K 2^E with K < 2^24 and E in
 *    [-149, 104], an FP8 k is an 8-bit integer times 2^e with e in [-23, 8] and a bf16 q one
 *    times 2^e' with e' in [-133, 120], so each product q_d K k_td is an integer below 2^40 at
 *    bit e' + e + E + 305 in [0, 537]: the dot, scaled by 2^305, is an integer below 2^608 (D <
 *    2^30), differences below 2^609, in the same 640-bit digits; with sm_scale's 24 bits every
 *    s_t and difference of deltas is below 2^634 and exact in LOGIT_PREC. Groups of equal dots
 *    are then groups of equal logits, as before. The value scale goes into the weights: the
 *    accumulator takes w_hat_t v_scale_t (exact at p + 24 bits) times the FP8 v, which is
 *    N_hat for the values v_scale_t v_td, and A_up, V, S_j take v_scale_t v_td (exact in
 *    double: 32 bits, exponent >= -172). Every bound above holds with v read as the
 *    dequantized value; S_j needs GROUP_SUM_PREC = 384 (multiples of 2^-172 below 2^173).
 *
 * Threads: rows are shared out over pthreads. MPFR's exponent range and constant caches are
 * per thread only in a thread-safe (TLS) build, so without TLS the oracle runs on one thread. */
#include "kvfuzz/oracle.h"

#include <gmp.h>
#include <math.h>
#include <mpfr.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/spec.h"
#include "mp_memory.h"
#include "oracle_fast.h"
#include "row_store.h"

#define DOT_SHIFT 266 /* every bf16*bf16 product is a multiple of 2^-266 */
/* Scaled caches (item 6): every q_d * k_scale_t * k_td with FP8 k is a multiple of 2^-305. */
#define DOT_SHIFT_SCALED 305
#define DOT_DIGITS 20      /* 640-bit two's complement digits hold |dot| * 2^266 < 2^553 */
#define LOGIT_PREC 640     /* exact s_t, m, delta_t and differences of deltas (item 1) */
#define GROUP_SUM_PREC 384 /* exact S_j: multiples of 2^-172 below 2^173 (boundary_side) */
#define NEGL_LOG2 20       /* delta < -2^20 is negligible; eta = 2^(-2^20) */
#define MIN_WORK_PREC 24   /* keeps u <= 2^-20, which the bound constants assume */
#define MAX_WORK_PREC (1L << 19)
#define BOUND_PREC 64 /* bounds are rounded upward, so a few bits suffice */
/* Accumulator slots grow by < 2^33 per token (column_accumulate); 2^28 tokens keep them
 * far below 2^63, and the double bound on A needs L < 2^28 too. Far beyond any limit. */
#define MAX_ROW_TOKENS ((int64_t)1 << 28)

#define M32 UINT64_C(0xFFFFFFFF)

static atomic_int default_path = KVF_ORACLE_FAST;

void kvf_oracle_set_default_path(int path) {
    if (path == KVF_ORACLE_FAST || path == KVF_ORACLE_MPFR) atomic_store(&default_path, path);
}

int kvf_oracle_default_path(void) {
    return atomic_load(&default_path);
}

void kvf_oracle_request_stop(void) {
    kvf__oracle_stop = 1;
}

void kvf_oracle_clear_stop(void) {
    kvf__oracle_stop = 0;
}

int kvf_oracle_stop_requested(void) {
    return kvf__oracle_stop;
}

/* Why kvf__oracle_halted() said stop, as the oracle's error. */
static int halt_error(kvf_error *err) {
    if (kvf__oracle_stop) return kvf_error_set(err, KVF_EINTR, "oracle: stopped by request");
    return kvf_error_set(err, KVF_ENOMEM,
                         "oracle: the MPFR working memory passed the memory budget of %lld MiB "
                         "or the system refused it",
                         (long long)(kvf__mp_cap() >> 20));
}

const char *kvf_oracle_path_name(int path) {
    return path == KVF_ORACLE_MPFR ? "mpfr" : path == KVF_ORACLE_FAST ? "fast" : "unknown";
}

int kvf_oracle_path_parse(const char *name, int *out) {
    if (!name) return -1;
    if (strcmp(name, "fast") == 0) {
        *out = KVF_ORACLE_FAST;
    } else if (strcmp(name, "mpfr") == 0) {
        *out = KVF_ORACLE_MPFR;
    } else {
        return -1;
    }
    return 0;
}

void kvf_oracle_opts_default(kvf_oracle_opts *opts) {
    opts->initial_precision = 64;
    opts->max_precision = 1L << 14;
    opts->threads = 0;
    opts->path = kvf_oracle_default_path();
}

/* ---- bf16 fields ---------------------------------------------------------------------------- */

/* |x| = M * 2^e with M < 2^8 an integer; returns the sign bit. Finite x only. */
static inline int bf16_split(kvf_bf16 x, uint32_t *mant, long *e) {
    uint32_t ef = (x >> 7) & 0xFFu;
    if (ef) {
        *mant = (x & 0x7Fu) | 0x80u;
        *e = (long)ef - 134; /* (1.m) * 2^(ef-127) = (128+m) * 2^(ef-134) */
    } else {
        *mant = x & 0x7Fu;
        *e = -133;
    }
    return x >> 15;
}

static inline int bf16_nonfinite(kvf_bf16 x) {
    return (x & 0x7F80u) == 0x7F80u;
}

/* ---- IEEE rounding ------------------------------------------------------------------------ */

/* Rounds x to the binary format with `bits` significand bits and normal exponents [-126, 127]
 * (bf16: 8, f32: 24) as IEEE 754 round-to-nearest-even does, and returns the result as a
 * double (exact: it has <= 24 bits and lies in double's range). A binade [2^E, 2^(E+1)) below
 * the normal range holds only subnormals with quantum 2^(-126-bits+1), i.e. k = bits + E + 126
 * significant bits; rounding x to k bits with ties-to-even uses that quantum and its parity,
 * so it is IEEE's subnormal rounding (a carry into the next binade is representable too).
 * Rounding to `bits` bits past 2^128 - half an ulp gives 2^128, which IEEE calls overflow:
 * +-inf. Nothing here depends on the current exponent range beyond holding x. Zero gives +0;
 * callers decide the sign of exact zeros. scratch is clobbered. */
static double round_to_format(mpfr_srcptr x, int bits, mpfr_ptr scratch) {
    if (mpfr_nan_p(x)) return NAN;
    int neg = mpfr_signbit(x) != 0;
    if (mpfr_inf_p(x)) return neg ? -INFINITY : INFINITY;
    if (mpfr_zero_p(x)) return 0.0;
    long big_e = (long)mpfr_get_exp(x) - 1; /* |x| in [2^E, 2^(E+1)) */
    double r;
    if (big_e > 127) {
        r = INFINITY;
    } else {
        long k = big_e >= -126 ? bits : bits + big_e + 126;
        if (k >= 1) {
            mpfr_set_prec(scratch, k);
            mpfr_set(scratch, x, MPFR_RNDN); /* RNDN is ties-to-even */
            mpfr_abs(scratch, scratch, MPFR_RNDN);
            r = mpfr_cmp_ui_2exp(scratch, 1, 128) >= 0 ? INFINITY : mpfr_get_d(scratch, MPFR_RNDN);
        } else if (k == 0) {
            /* |x| in [half the smallest subnormal, the smallest subnormal): the exact half is
             * a tie and goes to 0 (even); anything above goes up. */
            mpfr_set_prec(scratch, 2);
            mpfr_set_ui_2exp(scratch, 1, big_e, MPFR_RNDN);
            r = mpfr_cmpabs(x, scratch) > 0 ? ldexp(1.0, -126 - bits + 1) : 0.0;
        } else {
            r = 0.0;
        }
    }
    return neg ? -r : r;
}

/* Bits of a double that is exactly representable in bf16 (as round_to_format returns). */
static inline kvf_bf16 bf16_bits_of(double r) {
    return (kvf_bf16)(kvf_f32_bits((float)r) >> 16);
}

/* Position on the ordered line where -0 and +0 are distinct neighbours. */
static inline long bf16_index(kvf_bf16 x) {
    return (x & 0x8000u) ? -(long)(x & 0x7FFFu) - 1 : (long)x;
}

kvf_bf16 kvf_oracle_round_bf16(double x) {
    if (isnan(x)) return (kvf_bf16)(signbit(x) ? 0xFFC0u : 0x7FC0u);
    if (x == 0) return (kvf_bf16)(signbit(x) ? 0x8000u : 0x0000u);
    mpfr_t v, scratch;
    mpfr_init2(v, 53);
    mpfr_init2(scratch, 8);
    mpfr_set_d(v, x, MPFR_RNDN); /* exact: 53 bits */
    double r = round_to_format(v, 8, scratch);
    mpfr_clear(v);
    mpfr_clear(scratch);
    if (r == 0) return (kvf_bf16)(x < 0 ? 0x8000u : 0x0000u);
    return bf16_bits_of(r);
}

/* ---- multi-digit integers ----------------------------------------------------------------- */

/* Resolves signed per-digit sums into n base-2^32 digits (two's complement) and returns the
 * carry out of the top digit: 0 for a value in [0, 2^(32n)), -1 for one in [-2^(32n), 0). */
static int64_t digits_normalize(uint32_t *dig, const int64_t *acc, size_t n) {
    int64_t carry = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t v = acc[i] + carry;
        uint64_t low = (uint64_t)v & M32;
        dig[i] = (uint32_t)low;
        carry = (v - (int64_t)low) / ((int64_t)1 << 32); /* exact division */
    }
    return carry;
}

static void digits_negate(uint32_t *dig, size_t n) {
    uint64_t carry = 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = (uint64_t)(uint32_t)~dig[i] + carry;
        dig[i] = (uint32_t)v;
        carry = v >> 32;
    }
}

/* Two's complement comparison of n-digit numbers. */
static int digits_cmp(const uint32_t *a, const uint32_t *b, size_t n) {
    for (size_t i = n; i-- > 0;) {
        uint32_t x = a[i], y = b[i];
        if (i == n - 1) {
            x ^= 0x80000000u;
            y ^= 0x80000000u;
        }
        if (x != y) return x < y ? -1 : 1;
    }
    return 0;
}

static void digits_sub(uint32_t *r, const uint32_t *a, const uint32_t *b, size_t n) {
    uint64_t borrow = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = (uint64_t)a[i] - b[i] - borrow;
        r[i] = (uint32_t)v;
        borrow = (v >> 63) & 1u;
    }
}

static int digits_is_zero(const uint32_t *a, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i]) return 0;
    return 1;
}

/* x = (two's complement digits) * 2^exp2, exactly when prec(x) >= 32n. dig is clobbered. */
static void digits_to_mpfr(mpfr_ptr x, uint32_t *dig, size_t n, long exp2, mpz_ptr z) {
    int neg = (dig[n - 1] >> 31) & 1u;
    if (neg) digits_negate(dig, n);
    mpz_import(z, n, -1, sizeof(uint32_t), 0, 0, dig);
    mpfr_set_z_2exp(x, z, exp2, MPFR_RNDN);
    if (neg) mpfr_neg(x, x, MPFR_RNDN);
}

/* ---- the per-thread workspace --------------------------------------------------------------- */

typedef struct tok_key {
    const uint32_t *dig; /* the token's (or the group's) dot digits */
    int64_t t;
} tok_key;

enum { COL_NONZERO = 1, COL_NAN = 2, COL_PINF = 4, COL_NINF = 8 };

/* Bytes a group of equal logits takes on a streamed row (its digits, delta, sums, hash slots,
 * bookkeeping), for the memory budget of boundary tests. */
#define GROUP_BYTES 768

typedef struct ws {
    /* Per token of the current block. A stored row (row_store.h) is one block, filled once;
     * a streamed row is cut into blocks of `bt` tokens whose values each pass recomputes. */
    int64_t cap; /* initialised token slots */
    int stored;
    int64_t bt;          /* tokens per block */
    int64_t blk0;        /* first token of the block in the arrays; -1: none */
    long blk_p;          /* precision of its weights; 0: none */
    uint32_t *dots;      /* [cap][DOT_DIGITS] exact dot * 2^266, two's complement */
    int64_t *kvoff;      /* [cap] element offset of (token, kv head, d = 0) */
    double *vsc;         /* [cap] the token's v scale (1 without scales) */
    double raw_abs_max;  /* a scaled row's largest sum_d |q_d k8_td|, without the scale */
    double kdeq_abs_max; /* ... and its largest dequantized |k| */
    mpfr_t *delta;       /* [cap] s_t - m, exact (LOGIT_PREC) */
    unsigned char *negl; /* [cap] delta < -2^20 */
    mpfr_t *w;           /* [cap] RN_p(e^delta) */
    mpfr_ptr *ptrs;      /* [cap + 1] operand lists for the weight sums */
    long *wexp;          /* [cap] w = (chunks) * 2^wexp */
    double *wup;         /* [cap] w rounded up to double */
    uint32_t *chunks;    /* [cap][nc] w's significand in 32-bit chunks, least significant first */
    size_t chunks_cap;
    uint32_t dref[DOT_DIGITS]; /* the reference token's dot */

    /* Groups of equal exact logit, built on demand for boundary tests: from the stored tokens
     * (one key per token), or, on a streamed row, from a table of the distinct dots. */
    int64_t gcap;    /* initialised group slots */
    tok_key *keys;   /* sorted by logit, highest first */
    int64_t *gstart; /* [gcap + 1] group j = keys[gstart[j] .. gstart[j+1]) */
    mpfr_ptr *gdel;  /* [gcap] delta of group j */
    mpfr_t *gsum;    /* [gcap] S_j (GROUP_SUM_PREC) */
    mpfr_t *gterm;   /* [gcap] e^(s_j - s_j0) * S_j */
    mpfr_t *gexp;    /* [gcap] RN_q(e^(s_j - s_a)), cached across columns for one (a, q) */
    long *gstamp;    /* [gcap] gexp[j] valid when == gepoch; -gepoch: negligible group */
    mpfr_ptr *gptrs; /* [gcap] operand list of the group sum (a streamed row has more groups
                      * than its block has tokens) */
    long gepoch, gcache_q;
    int64_t ngroups, gcache_a;
    int groups_ready;
    /* streamed rows: distinct dots in order of appearance, and a hash table over them */
    int64_t dcount_cap;
    uint32_t *ddig;  /* [n][DOT_DIGITS] */
    int64_t *dcount; /* [n] tokens with that dot */
    int64_t *drank;  /* [n] its group */
    mpfr_t *ddelta;  /* [n] its delta (LOGIT_PREC) */
    int64_t ndelta;  /* initialised ddelta slots */
    int64_t *dhash;  /* [dhash_cap] index + 1, 0: empty */
    size_t dhash_cap;
    int64_t mem_budget; /* bytes: the groups' table stays within a quarter of it */
    /* streamed rows: the exact sum of the weights (section 2 of docs/oracle.md) */
    mpfr_t zacc, ztmp;

    /* per column */
    int32_t dcap;
    uint32_t *qm;
    long *qe;
    unsigned char *qneg;
    double *qabs;
    unsigned char *colstate;
    uint16_t *colmag; /* OR of |v| bits per column */
    int32_t *list;    /* columns still to certify */
    double *araw, *aup;
    long *fexp;
    int64_t *ntrunc;
    int64_t *acc;
    size_t acc_cap;
    uint32_t *digbuf;
    size_t digbuf_cap;

    mpz_t z;
    mpfr_t m, smf, zsum, rsum, nhat, ohat, chat, bound, t1, t2, lo, hi, eta, beta, scratch, ln2,
        lse_l, lse_y, lam, gd, tsum, absum, neglsum, wsc;
} ws;

typedef struct counters {
    long maxp, retries, ties;
    long fast_rows, fallback_rows;
} counters;

/* The scalar MPFR variables of a workspace, for initialisation and release in one place. */
#define WS_SCALARS(s)                                                                              \
    {                                                                                              \
        (s)->m, (s)->smf, (s)->zsum, (s)->rsum, (s)->nhat, (s)->ohat, (s)->chat, (s)->bound,       \
            (s)->t1, (s)->t2, (s)->lo, (s)->hi, (s)->eta, (s)->beta, (s)->scratch, (s)->ln2,       \
            (s)->lse_l, (s)->lse_y, (s)->lam, (s)->gd, (s)->tsum, (s)->absum, (s)->neglsum,        \
            (s)->zacc, (s)->ztmp, (s)->wsc                                                         \
    }

static void ws_init(ws *s) {
    memset(s, 0, sizeof *s);
    mpz_init(s->z);
    mpfr_ptr scalars[] = WS_SCALARS(s);
    for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++)
        mpfr_init2(scalars[i], BOUND_PREC);
    mpfr_set_prec(s->m, LOGIT_PREC);
    mpfr_set_prec(s->smf, 24);
    mpfr_set_prec(s->gd, LOGIT_PREC);
    mpfr_set_ui_2exp(s->eta, 1, -(1L << NEGL_LOG2), MPFR_RNDN);
    s->blk0 = -1;
}

static void ws_free(ws *s) {
    for (int64_t i = 0; i < s->cap; i++) {
        mpfr_clear(s->delta[i]);
        mpfr_clear(s->w[i]);
    }
    for (int64_t i = 0; i < s->gcap; i++) {
        mpfr_clear(s->gsum[i]);
        mpfr_clear(s->gterm[i]);
        mpfr_clear(s->gexp[i]);
    }
    for (int64_t i = 0; i < s->ndelta; i++)
        mpfr_clear(s->ddelta[i]);
    void *blocks[] = {s->vsc,  s->dots,   s->kvoff, s->delta,    s->negl,   s->w,
                      s->ptrs, s->wexp,   s->wup,   s->chunks,   s->keys,   s->gstart,
                      s->gdel, s->gsum,   s->gterm, s->gexp,     s->gstamp, s->gptrs,
                      s->ddig, s->dcount, s->drank, s->ddelta,   s->dhash,  s->qm,
                      s->qe,   s->qneg,   s->qabs,  s->colstate, s->colmag, s->list,
                      s->araw, s->aup,    s->fexp,  s->ntrunc,   s->acc,    s->digbuf};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
        free(blocks[i]);
    mpz_clear(s->z);
    mpfr_ptr scalars[] = WS_SCALARS(s);
    for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++)
        mpfr_clear(scalars[i]);
}

/* realloc that keeps the old block (and sets *fail) when the system refuses. */
static void *grow(void *old, size_t elems, size_t size, int *fail) {
    void *n = realloc(old, elems * size + 1);
    if (!n) {
        *fail = 1;
        return old;
    }
    return n;
}
#define GROW(ptr, elems, fail) ((ptr) = grow((ptr), (elems), sizeof *(ptr), (fail)))
/* Grows a scratch buffer to hold n elements; evaluates to nonzero on failure. */
#define RESERVE(ptr, cap, n, fail)                                                                 \
    ((n) <= (cap) ? 0 : (GROW(ptr, n, fail), *(fail) ? 1 : ((cap) = (n), 0)))

static int64_t grown_cap(int64_t cap, int64_t n) {
    cap = cap ? cap : 64;
    while (cap < n)
        cap *= 2;
    return cap;
}

/* Token slots for n tokens (a block). */
static int ws_reserve_tokens(ws *s, int64_t n) {
    if (n <= s->cap) return 0;
    int64_t cap = grown_cap(s->cap, n);
    size_t c = (size_t)cap;
    int fail = 0;
    GROW(s->dots, c * DOT_DIGITS, &fail);
    GROW(s->kvoff, c, &fail);
    GROW(s->vsc, c, &fail);
    GROW(s->delta, c, &fail);
    GROW(s->negl, c, &fail);
    GROW(s->w, c, &fail);
    GROW(s->ptrs, c + 1, &fail);
    GROW(s->wexp, c, &fail);
    GROW(s->wup, c, &fail);
    if (fail) return KVF_ENOMEM; /* arrays may have grown; cap still counts the initialised */
    /* s->cap counts the initialised slots as they come, so a stop or a failed GMP allocation
     * part way leaves a workspace that ws_free releases exactly. */
    for (int64_t i = s->cap; i < cap; i++) {
        if (kvf__oracle_halted()) return KVF_EINTR;
        mpfr_init2(s->delta[i], LOGIT_PREC);
        mpfr_init2(s->w[i], MIN_WORK_PREC);
        s->cap = i + 1;
    }
    return 0;
}

/* Group slots for n groups (keys: n as well). */
static int ws_reserve_groups(ws *s, int64_t n) {
    if (n <= s->gcap) return 0;
    int64_t cap = grown_cap(s->gcap, n);
    size_t c = (size_t)cap;
    int fail = 0;
    GROW(s->keys, c, &fail);
    GROW(s->gstart, c + 1, &fail);
    GROW(s->gdel, c, &fail);
    GROW(s->gsum, c, &fail);
    GROW(s->gterm, c, &fail);
    GROW(s->gexp, c, &fail);
    GROW(s->gstamp, c, &fail);
    GROW(s->gptrs, c, &fail);
    if (fail) return KVF_ENOMEM;
    for (int64_t i = s->gcap; i < cap; i++) {
        if (kvf__oracle_halted()) return KVF_EINTR;
        mpfr_init2(s->gsum[i], GROUP_SUM_PREC);
        mpfr_init2(s->gterm[i], GROUP_SUM_PREC);
        mpfr_init2(s->gexp[i], MIN_WORK_PREC);
        s->gstamp[i] = 0;
        s->gcap = i + 1;
    }
    return 0;
}

static int ws_reserve_cols(ws *s, int32_t d) {
    if (d <= s->dcap) return 0;
    size_t c = (size_t)d;
    int fail = 0;
    GROW(s->qm, c, &fail);
    GROW(s->qe, c, &fail);
    GROW(s->qneg, c, &fail);
    GROW(s->qabs, c, &fail);
    GROW(s->colstate, c, &fail);
    GROW(s->colmag, c, &fail);
    GROW(s->list, c, &fail);
    GROW(s->araw, c, &fail);
    GROW(s->aup, c, &fail);
    GROW(s->fexp, c, &fail);
    GROW(s->ntrunc, c, &fail);
    if (fail) return KVF_ENOMEM;
    s->dcap = d;
    return 0;
}

/* ---- one row ------------------------------------------------------------------------------ */

typedef struct job {
    const kvf_case *c;
    kvf_oracle_result *out;
    long p0, pmax;
    int64_t mp_cap; /* GMP bytes per thread: the memory budget */
    int fast;       /* try the fast path first (oracle_fast.c) */
    int handed;     /* the fast path was asked for: rows it does not certify count as handed
                       over (fallback_rows), a scaled case's every row among them */
    atomic_long next_row;
    atomic_int stop;
    pthread_mutex_t lock;
    int rc;
    kvf_error err;
} job;

typedef struct row {
    const kvf_case *c;
    int32_t b, h, g, D;
    int64_t L;
    int sm_sign;         /* sign of sm_scale (0 for +-0: every logit is 0) */
    int scaled;          /* the case has scales (item 6) */
    long dot_shift;      /* DOT_SHIFT, or DOT_SHIFT_SCALED when scaled */
    int64_t ref;         /* a token with the largest logit */
    int64_t n_neg;       /* negligible tokens */
    int all_zero_logits; /* every s_t == 0 */
    double vmax;
    /* outputs of this row */
    kvf_bf16 *o_rounded;
    double *o_exact, *o_cond;
    float *lse_rounded;
    double *lse_exact;
    kvf_oracle_row *info;
} row;

static inline const kvf_bf16 *row_v(const row *r, int64_t kvoff) {
    return r->c->v_cache + kvoff;
}

/* Exact dot of q (decoded in s->q*) with key row kr into 20 digits; returns 1 if kr holds a
 * non-finite value. Each product P * 2^(e_q + e_k) is added at bit e_q + e_k + 266 in [0, 506]:
 * P << (bit % 32) < 2^47 splits into two digit increments below 2^32, so a slot grows by less
 * than 2^32 per product and D < 2^31 products cannot overflow it. */
static int dot_accumulate(ws *s, int32_t D, const kvf_bf16 *kr, uint32_t *dig, double *abs_sum) {
    int64_t acc[DOT_DIGITS] = {0};
    double asum[4] = {0, 0, 0, 0};
    int bad = 0;
    for (int32_t d = 0; d < D; d++) {
        kvf_bf16 kb = kr[d];
        if (bf16_nonfinite(kb)) {
            bad = 1;
            continue;
        }
        uint32_t km;
        long ke;
        int kneg = bf16_split(kb, &km, &ke);
        uint64_t prod = (uint64_t)s->qm[d] * km;
        if (!prod) continue;
        long off = s->qe[d] + ke + DOT_SHIFT;
        uint64_t val = prod << (off & 31);
        long j = off >> 5;
        /* Branch-free negation (x ^ m) - m with m = 0 or -1: the signs are random data. */
        int64_t m = -(int64_t)(kneg ^ s->qneg[d]);
        acc[j] += ((int64_t)(val & M32) ^ m) - m;
        acc[j + 1] += ((int64_t)(val >> 32) ^ m) - m;
        /* |q||k| is exact in double (16-bit product, exponent in [-266, 256]); four partial
         * sums keep the additions from forming one long dependency chain. */
        asum[d & 3] += s->qabs[d] * fabs((double)kvf_bf16_to_f32(kb));
    }
    digits_normalize(dig, acc, DOT_DIGITS);
    *abs_sum = (asum[0] + asum[1]) + (asum[2] + asum[3]);
    return bad;
}

/* dot_accumulate for a scaled row (item 6): the key scale ks = K 2^E joins every product, placed
 * at bit e_q + e_k + E + 305, in [0, 537] for the keys check_scaled_keys admits. K k_m q_m <
 * 2^40 shifted by up to 31 bits is cut into a low part (two digit increments below 2^32) and a
 * high part below 2^39 (two more), so a slot grows by less than 2^33 per product and D < 2^30
 * products cannot overflow it. */
static int dot_accumulate_scaled(ws *s, int32_t D, const kvf_bf16 *kr, float ks, uint32_t *dig,
                                 double *abs_sum) {
    int64_t acc[DOT_DIGITS] = {0};
    double asum[4] = {0, 0, 0, 0};
    *abs_sum = 0;
    int bad = 0;
    double ka_max = 0; /* every element, a zero q beside it too: 0 x inf is NaN in f32 */
    int ke_s;
    (void)frexp((double)ks, &ke_s); /* ks in [2^(ke_s - 1), 2^ke_s) */
    long kse = ke_s - 24 < -149 ? -149 : ke_s - 24;
    uint64_t kk = (uint64_t)ldexp((double)ks, (int)-kse); /* exact: ks = kk 2^kse, kk < 2^24 */
    for (int32_t d = 0; d < D; d++) {
        kvf_bf16 kb = kr[d];
        if (bf16_nonfinite(kb)) {
            bad = 1;
            continue;
        }
        uint32_t km;
        long ke;
        int kneg = bf16_split(kb, &km, &ke);
        double ka = fabs((double)kvf_bf16_to_f32(kb));
        ka_max = ka > ka_max ? ka : ka_max;
        uint64_t prod = (uint64_t)s->qm[d] * km * kk;
        if (!prod) continue;
        long off = s->qe[d] + ke + kse + DOT_SHIFT_SCALED;
        int sh = (int)(off & 31);
        long j = off >> 5;
        uint64_t lo = (prod & M32) << sh, hi = (prod >> 32) << sh;
        int64_t m = -(int64_t)(kneg ^ s->qneg[d]);
        acc[j] += ((int64_t)(lo & M32) ^ m) - m;
        acc[j + 1] += ((int64_t)(lo >> 32) ^ m) - m;
        acc[j + 1] += ((int64_t)(hi & M32) ^ m) - m;
        acc[j + 2] += ((int64_t)(hi >> 32) ^ m) - m;
        asum[d & 3] += s->qabs[d] * ka;
    }
    digits_normalize(dig, acc, DOT_DIGITS);
    /* Unscaled first: a kernel that folds the scale forms this dot in f32 (item 6). */
    double raw = (asum[0] + asum[1]) + (asum[2] + asum[3]);
    if (raw > s->raw_abs_max) s->raw_abs_max = raw;
    /* Exact (8 x 24 bits), so the maximum of the products is this product of the maxima. */
    if (ka_max * (double)ks > s->kdeq_abs_max) s->kdeq_abs_max = ka_max * (double)ks;
    *abs_sum = raw * (double)ks;
    return bad;
}

static int cmp_dot_desc(const void *a, const void *b) {
    const tok_key *x = a, *y = b;
    int c = digits_cmp(y->dig, x->dig, DOT_DIGITS);
    return c ? c : (x->t < y->t ? -1 : x->t > y->t);
}

static int cmp_dot_asc(const void *a, const void *b) {
    const tok_key *x = a, *y = b;
    int c = digits_cmp(x->dig, y->dig, DOT_DIGITS);
    return c ? c : (x->t < y->t ? -1 : x->t > y->t);
}

/* ---- blocks of tokens ---------------------------------------------------------------------- */

/* Kv offsets and exact dots of tokens [t0, t1) into the block arrays (index t - t0). Returns 1
 * if a key row holds a non-finite value; raises *abs_max to the largest sum_d |q_d k_td|. Stops
 * early (the caller sees kvf__oracle_halted()) on a stop request. */
static int block_dots(ws *s, const row *r, int64_t t0, int64_t t1, double *abs_max) {
    const kvf_case *c = r->c;
    int bad = 0;
    for (int64_t t = t0; t < t1; t++) {
        /* Polled every 256 tokens in the loops without MPFR calls (a stop must take effect
         * within a second however long the row is), every token in the others. */
        if (!(t & 255) && kvf__oracle_halted()) break;
        int64_t i = t - t0;
        s->kvoff[i] = kvf_case_kv_offset(c, r->b, t, r->g, 0);
        double asum = 0;
        if (r->scaled) {
            s->vsc[i] = (double)kvf_case_v_scale(c, r->b, t, r->g);
            bad |= dot_accumulate_scaled(s, r->D, c->k_cache + s->kvoff[i],
                                         kvf_case_k_scale(c, r->b, t, r->g),
                                         s->dots + (size_t)i * DOT_DIGITS, &asum);
        } else {
            s->vsc[i] = 1.0;
            bad |= dot_accumulate(s, r->D, c->k_cache + s->kvoff[i],
                                  s->dots + (size_t)i * DOT_DIGITS, &asum);
        }
        if (asum > *abs_max) *abs_max = asum;
    }
    return bad;
}

/* delta_t = sm * (dot_t - dot_ref) * 2^-266, exact, and the negligible flags, for the block's n
 * tokens; returns how many are negligible. */
static int64_t block_deltas(ws *s, const row *r, int64_t n) {
    uint32_t tmp[DOT_DIGITS];
    int64_t nneg = 0;
    for (int64_t i = 0; i < n; i++) {
        if (kvf__oracle_halted()) break;
        digits_sub(tmp, s->dots + (size_t)i * DOT_DIGITS, s->dref, DOT_DIGITS);
        if (r->sm_sign == 0 || digits_is_zero(tmp, DOT_DIGITS)) {
            mpfr_set_ui(s->delta[i], 0, MPFR_RNDN);
        } else {
            digits_to_mpfr(s->delta[i], tmp, DOT_DIGITS, -r->dot_shift, s->z);
            mpfr_mul(s->delta[i], s->delta[i], s->smf, MPFR_RNDN);
        }
        s->negl[i] = mpfr_cmp_si_2exp(s->delta[i], -1, NEGL_LOG2) < 0;
        nneg += s->negl[i];
    }
    return nneg;
}

/* Bits of the accumulator's weights at precision p: w_hat_t, or w_hat_t v_scale_t on a scaled
 * row (item 6: exact with 24 more bits). */
static long chunk_bits(const row *r, long p) {
    return r->scaled ? p + 24 : p;
}

/* Weights at precision p for the block's n tokens: w_t, the 32-bit chunks of w_t (times the v
 * scale on a scaled row), an upper double of w_t. */
static int block_weights(ws *s, const row *r, int64_t n, long p) {
    size_t nc = (size_t)(chunk_bits(r, p) + 31) / 32;
    int fail = 0;
    if (RESERVE(s->chunks, s->chunks_cap, (size_t)n * nc, &fail)) return KVF_ENOMEM;
    for (int64_t i = 0; i < n; i++) {
        if (kvf__oracle_halted()) return KVF_EINTR;
        if (s->negl[i]) {
            s->wup[i] = 0;
            continue;
        }
        mpfr_ptr w = s->w[i];
        mpfr_set_prec(w, p);
        mpfr_exp(w, s->delta[i], MPFR_RNDN);
        if (r->scaled) {
            mpfr_set_prec(s->wsc, p + 24);
            mpfr_mul_d(s->wsc, w, s->vsc[i], MPFR_RNDN); /* exact: p + 24 bits */
            s->wexp[i] = (long)mpfr_get_z_2exp(s->z, s->wsc);
        } else {
            s->wexp[i] = (long)mpfr_get_z_2exp(s->z, w);
        }
        uint32_t *ch = s->chunks + (size_t)i * nc;
        size_t cnt = 0;
        mpz_export(ch, &cnt, -1, sizeof(uint32_t), 0, 0, s->z);
        for (size_t k = cnt; k < nc; k++)
            ch[k] = 0;
        s->wup[i] = mpfr_get_d(w, MPFR_RNDU);
    }
    return 0;
}

/* Makes the block arrays hold tokens [t0, t0 + bt) of the row (fewer at its end), with weights
 * at precision p (p = 0: none needed); *n is the block's length. A stored row is one block
 * whose dots and deltas row_compute filled once, so only the weights of a new precision are
 * computed; a streamed row recomputes the block: the same integer and MPFR operations, so the
 * same values in every pass. */
static int block_at(ws *s, const row *r, int64_t t0, long p, int64_t *n) {
    *n = r->L - t0 < s->bt ? r->L - t0 : s->bt;
    if (s->blk0 != t0) {
        double unused = 0;
        (void)block_dots(s, r, t0, t0 + *n, &unused);
        (void)block_deltas(s, r, *n);
        s->blk0 = t0;
        s->blk_p = 0;
        if (kvf__oracle_halted()) return KVF_EINTR;
    }
    if (p && s->blk_p != p) {
        int rc = block_weights(s, r, *n, p);
        if (rc) return rc;
        s->blk_p = p;
    }
    return 0;
}

/* ---- groups of equal logits --------------------------------------------------------------- */

static uint64_t digits_hash(const uint32_t *dig) {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < DOT_DIGITS; i++) {
        h ^= dig[i];
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
    }
    return h;
}

/* The index of a distinct dot on a streamed row, added if new (add set); -1 when it is not there
 * (add clear), -2 when adding would pass the table's memory (the caller says why), -3 when the
 * system refuses memory. */
static int64_t distinct_find(ws *s, const uint32_t *dig, int add, int64_t *ndist) {
    if (add && (size_t)(*ndist + 1) * 2 > s->dhash_cap) {
        size_t cap = s->dhash_cap ? s->dhash_cap * 2 : 1024;
        int64_t *h = calloc(cap, sizeof *h);
        if (!h) return -3;
        for (int64_t i = 0; i < *ndist; i++) {
            size_t k = (size_t)digits_hash(s->ddig + (size_t)i * DOT_DIGITS) & (cap - 1);
            while (h[k])
                k = (k + 1) & (cap - 1);
            h[k] = i + 1;
        }
        free(s->dhash);
        s->dhash = h;
        s->dhash_cap = cap;
    }
    if (!s->dhash_cap) return -1;
    size_t k = (size_t)digits_hash(dig) & (s->dhash_cap - 1);
    for (; s->dhash[k]; k = (k + 1) & (s->dhash_cap - 1)) {
        int64_t i = s->dhash[k] - 1;
        if (memcmp(s->ddig + (size_t)i * DOT_DIGITS, dig, DOT_DIGITS * sizeof *dig) == 0) return i;
    }
    if (!add) return -1;
    int64_t limit = s->mem_budget > 0 ? s->mem_budget / 4 / GROUP_BYTES : INT64_MAX;
    if (*ndist >= limit) return -2;
    if (*ndist >= s->dcount_cap) {
        int64_t cap = grown_cap(s->dcount_cap, *ndist + 1);
        int fail = 0;
        GROW(s->ddig, (size_t)cap * DOT_DIGITS, &fail);
        GROW(s->dcount, (size_t)cap, &fail);
        GROW(s->drank, (size_t)cap, &fail);
        if (fail) return -3;
        s->dcount_cap = cap;
    }
    int64_t i = (*ndist)++;
    memcpy(s->ddig + (size_t)i * DOT_DIGITS, dig, DOT_DIGITS * sizeof *dig);
    s->dcount[i] = 0;
    s->dhash[k] = i + 1;
    return i;
}

/* Groups of equal exact logit, highest first (gstart, gdel). A stored row sorts its tokens. A
 * streamed row collects its distinct dots in one pass over its tokens, in a table kept within a
 * quarter of the memory budget (GROUP_BYTES per distinct dot), and sorts those: each group is
 * then one key, with its token count in dcount. */
static int ensure_groups(ws *s, const row *r, int32_t d, kvf_error *err) {
    if (s->groups_ready) return 0;
    s->ngroups = 0;
    if (s->stored) {
        if (ws_reserve_groups(s, r->L)) {
            if (kvf__oracle_halted()) return halt_error(err);
            return kvf_error_set(err, KVF_ENOMEM, "oracle: out of memory");
        }
        for (int64_t t = 0; t < r->L; t++) {
            s->keys[t].dig = s->dots + (size_t)t * DOT_DIGITS;
            s->keys[t].t = t;
        }
        if (r->sm_sign == 0) {
            s->gstart[s->ngroups++] = 0; /* sm_scale = 0: all logits are 0 */
        } else {
            qsort(s->keys, (size_t)r->L, sizeof(tok_key),
                  r->sm_sign > 0 ? cmp_dot_desc : cmp_dot_asc);
            for (int64_t i = 0; i < r->L; i++)
                if (i == 0 || digits_cmp(s->keys[i].dig, s->keys[i - 1].dig, DOT_DIGITS) != 0)
                    s->gstart[s->ngroups++] = i;
        }
        s->gstart[s->ngroups] = r->L;
        for (int64_t j = 0; j < s->ngroups; j++)
            s->gdel[j] = s->delta[s->keys[s->gstart[j]].t];
    } else {
        int64_t nd = 0;
        if (s->dhash_cap) memset(s->dhash, 0, s->dhash_cap * sizeof *s->dhash);
        uint32_t zero[DOT_DIGITS] = {0};
        if (r->sm_sign == 0) { /* sm_scale = 0: all logits are 0, one group of every token */
            (void)distinct_find(s, zero, 1, &nd);
            if (nd == 1) s->dcount[0] = r->L;
        } else {
            for (int64_t t0 = 0; t0 < r->L && nd >= 0; t0 += s->bt) {
                int64_t n = r->L - t0 < s->bt ? r->L - t0 : s->bt;
                double unused = 0;
                (void)block_dots(s, r, t0, t0 + n, &unused);
                s->blk0 = -1; /* the block's deltas and weights are gone */
                for (int64_t i = 0; i < n; i++) {
                    int64_t k = distinct_find(s, s->dots + (size_t)i * DOT_DIGITS, 1, &nd);
                    if (k == -2)
                        return kvf_error_set(
                            err, KVF_ELIMIT,
                            "oracle: o[%d][%d][%d] lies on a rounding boundary of a row of %lld "
                            "tokens with more than %lld distinct logits, and deciding it exactly "
                            "would pass the memory budget (KVF_MAX_MEMORY_MIB)",
                            (int)r->b, (int)r->h, (int)d, (long long)r->L, (long long)nd);
                    if (k < 0) return kvf_error_set(err, KVF_ENOMEM, "oracle: out of memory");
                    s->dcount[k]++;
                }
            }
        }
        if (kvf__oracle_halted()) return halt_error(err);
        if (nd < 1 || ws_reserve_groups(s, nd))
            return kvf__oracle_halted() ? halt_error(err)
                                        : kvf_error_set(err, KVF_ENOMEM, "oracle: out of memory");
        int fail = 0;
        GROW(s->ddelta, (size_t)(nd > s->ndelta ? nd : s->ndelta), &fail);
        if (fail) return kvf_error_set(err, KVF_ENOMEM, "oracle: out of memory");
        for (; s->ndelta < nd; s->ndelta++) {
            /* Polled like every loop that allocates through MPFR (mp_memory.c); ndelta still
             * counts exactly the initialised slots for ws_free. */
            if (kvf__oracle_halted()) return halt_error(err);
            mpfr_init2(s->ddelta[s->ndelta], LOGIT_PREC);
        }
        uint32_t tmp[DOT_DIGITS];
        for (int64_t i = 0; i < nd; i++) {
            const uint32_t *dig = s->ddig + (size_t)i * DOT_DIGITS;
            digits_sub(tmp, dig, s->dref, DOT_DIGITS);
            if (r->sm_sign == 0 || digits_is_zero(tmp, DOT_DIGITS)) {
                mpfr_set_ui(s->ddelta[i], 0, MPFR_RNDN);
            } else {
                digits_to_mpfr(s->ddelta[i], tmp, DOT_DIGITS, -r->dot_shift, s->z);
                mpfr_mul(s->ddelta[i], s->ddelta[i], s->smf, MPFR_RNDN);
            }
            s->keys[i].dig = dig;
            s->keys[i].t = i;
        }
        if (r->sm_sign != 0)
            qsort(s->keys, (size_t)nd, sizeof(tok_key),
                  r->sm_sign > 0 ? cmp_dot_desc : cmp_dot_asc);
        for (int64_t j = 0; j < nd; j++) {
            s->gstart[j] = j;
            s->drank[s->keys[j].t] = j;
            s->gdel[j] = s->ddelta[s->keys[j].t];
        }
        s->gstart[nd] = nd;
        s->ngroups = nd;
    }
    s->groups_ready = 1;
    s->gepoch++; /* exponentials cached for an earlier row are stale */
    s->gcache_a = -1;
    return 0;
}

/* S_j = sum over group j of (v_td - beta), exactly, for every group: partial sums are multiples
 * of 2^-134 of magnitude < 2^28 * 2^129, i.e. fewer than 300 significant bits, and
 * GROUP_SUM_PREC = 320. A streamed row finds each token's group through the table of distinct
 * dots, in one more pass over its tokens. */
static int group_sums(ws *s, const row *r, int32_t d, mpfr_srcptr beta, kvf_error *err) {
    for (int64_t j = 0; j < s->ngroups; j++)
        mpfr_set_ui(s->gsum[j], 0, MPFR_RNDN);
    if (s->stored) {
        for (int64_t j = 0; j < s->ngroups; j++) {
            if (kvf__oracle_halted()) return halt_error(err);
            for (int64_t i = s->gstart[j]; i < s->gstart[j + 1]; i++) {
                int64_t t = s->keys[i].t;
                kvf_bf16 vb = row_v(r, s->kvoff[t])[d];
                mpfr_add_d(s->gsum[j], s->gsum[j], s->vsc[t] * (double)kvf_bf16_to_f32(vb),
                           MPFR_RNDN);
            }
        }
    } else {
        for (int64_t t0 = 0; t0 < r->L; t0 += s->bt) {
            int64_t n = r->L - t0 < s->bt ? r->L - t0 : s->bt;
            double unused = 0;
            if (r->sm_sign != 0) (void)block_dots(s, r, t0, t0 + n, &unused);
            s->blk0 = -1;
            if (kvf__oracle_halted()) return halt_error(err);
            for (int64_t i = 0; i < n; i++) {
                int64_t j = 0, k = 0;
                if (r->sm_sign != 0) {
                    k = distinct_find(s, s->dots + (size_t)i * DOT_DIGITS, 0, &s->ngroups);
                    if (k < 0)
                        return kvf_error_set(err, KVF_EORACLE, "oracle: internal group error");
                    j = s->drank[k];
                }
                int64_t off =
                    r->sm_sign != 0 ? s->kvoff[i] : kvf_case_kv_offset(r->c, r->b, t0 + i, r->g, 0);
                kvf_bf16 vb = row_v(r, off)[d];
                double vs = !r->scaled        ? 1.0
                            : r->sm_sign != 0 ? s->vsc[i]
                                              : (double)kvf_case_v_scale(r->c, r->b, t0 + i, r->g);
                mpfr_add_d(s->gsum[j], s->gsum[j], vs * (double)kvf_bf16_to_f32(vb), MPFR_RNDN);
            }
        }
    }
    for (int64_t j = 0; j < s->ngroups; j++) {
        int64_t count = s->stored ? s->gstart[j + 1] - s->gstart[j] : s->dcount[s->keys[j].t];
        mpfr_set_prec(s->t1, GROUP_SUM_PREC);
        mpfr_mul_ui(s->t1, beta, (unsigned long)count, MPFR_RNDN);
        mpfr_sub(s->gsum[j], s->gsum[j], s->t1, MPFR_RNDN);
    }
    return 0;
}

static int oracle_fail(kvf_error *err, const row *r, int32_t d, long pmax) {
    if (d >= 0)
        return kvf_error_set(err, KVF_EORACLE,
                             "oracle: o[%d][%d][%d] could not be rounded with certainty within "
                             "max_precision = %ld bits",
                             (int)r->b, (int)r->h, (int)d, pmax);
    return kvf_error_set(err, KVF_EORACLE,
                         "oracle: lse[%d][%d] could not be rounded with certainty within "
                         "max_precision = %ld bits",
                         (int)r->b, (int)r->h, pmax);
}

/* Decides the sign of o_d - beta exactly (item 5 of the header): *side = -1, 0 or +1.
 * Starts at precision q0 and doubles up to qmax. */
static int boundary_side(int *side, ws *s, const row *r, int32_t d, mpfr_srcptr beta, long q0,
                         long qmax, counters *cnt, kvf_error *err) {
    int rc = ensure_groups(s, r, d, err);
    if (!rc) rc = group_sums(s, r, d, beta, err);
    if (rc) return rc;
    int64_t j0 = -1;
    for (int64_t j = 0; j < s->ngroups && j0 < 0; j++)
        if (!mpfr_zero_p(s->gsum[j])) j0 = j;
    if (j0 < 0) {
        *side = 0; /* every group's mean is beta: o == beta exactly */
        return 0;
    }
    /* sign(T) is also the sign of sum_{j >= j0} e^(s_j - s_a) S_j for any anchor a. Taking a as
     * the highest group within 2^19 of s_j0 lets columns with different j0 share the
     * exponentials (cached per (a, q)), while the leading term e^(s_j0 - s_a) S_j0 stays far
     * above everything declared negligible (s_j - s_a < -2^20: e^(...) < eta). The gap grows
     * as a decreases, so a binary search with exact differences finds a. */
    mpfr_srcptr dj0 = s->gdel[j0];
    int64_t lo = 0, hi = j0;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        mpfr_sub(s->gd, s->gdel[mid], dj0, MPFR_RNDN); /* exact */
        if (mpfr_cmp_ui_2exp(s->gd, 1, 19) <= 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    int64_t a = hi;
    mpfr_srcptr da = s->gdel[a];
    for (long q = q0 < 64 ? 64 : q0;; q *= 2) {
        if (q > cnt->maxp) cnt->maxp = q;
        if (s->gcache_a != a || s->gcache_q != q) {
            s->gepoch++;
            s->gcache_a = a;
            s->gcache_q = q;
        }
        size_t nterms = 0;
        mpfr_set_prec(s->absum, BOUND_PREC);
        mpfr_set_prec(s->neglsum, BOUND_PREC);
        mpfr_set_ui(s->absum, 0, MPFR_RNDN);
        mpfr_set_ui(s->neglsum, 0, MPFR_RNDN);
        for (int64_t j = j0; j < s->ngroups; j++) {
            if (kvf__oracle_halted()) return halt_error(err);
            mpfr_ptr sj = s->gsum[j];
            if (mpfr_zero_p(sj)) continue;
            if (s->gstamp[j] != s->gepoch && s->gstamp[j] != -s->gepoch) {
                /* s_j - s_a = delta_j - delta_a <= 0, exact in LOGIT_PREC (item 1). */
                mpfr_sub(s->gd, s->gdel[j], da, MPFR_RNDN);
                if (mpfr_cmp_si_2exp(s->gd, -1, NEGL_LOG2) < 0) {
                    s->gstamp[j] = -s->gepoch;
                } else {
                    mpfr_set_prec(s->gexp[j], q);
                    mpfr_exp(s->gexp[j], s->gd, MPFR_RNDN);
                    s->gstamp[j] = s->gepoch;
                }
            }
            if (s->gstamp[j] == -s->gepoch) { /* negligible: e^(s_j - s_a) < eta */
                mpfr_set_prec(s->t1, BOUND_PREC);
                mpfr_abs(s->t1, sj, MPFR_RNDU);
                mpfr_add(s->neglsum, s->neglsum, s->t1, MPFR_RNDU);
                continue;
            }
            mpfr_ptr term = s->gterm[j];
            mpfr_set_prec(term, q + GROUP_SUM_PREC);
            mpfr_mul(term, s->gexp[j], sj, MPFR_RNDN); /* exact */
            s->gptrs[nterms++] = term;
            mpfr_set_prec(s->t1, BOUND_PREC);
            mpfr_abs(s->t1, term, MPFR_RNDU);
            mpfr_add(s->absum, s->absum, s->t1, MPFR_RNDU);
        }
        mpfr_set_prec(s->tsum, q);
        mpfr_sum(s->tsum, s->gptrs, nterms, MPFR_RNDN);
        /* |T - T_hat| <= u |T_hat| + 2u sum |e_hat S| + eta sum_negligible |S|, and the
         * j0 term is in the sum (never negligible), so T_hat can exceed the bound. */
        mpfr_set_prec(s->bound, BOUND_PREC);
        mpfr_set_prec(s->t2, BOUND_PREC);
        mpfr_abs(s->t2, s->tsum, MPFR_RNDU);
        mpfr_mul_2ui(s->bound, s->absum, 1, MPFR_RNDU);
        mpfr_add(s->bound, s->bound, s->t2, MPFR_RNDU);
        mpfr_mul_2si(s->bound, s->bound, -q, MPFR_RNDU);
        mpfr_mul(s->t1, s->neglsum, s->eta, MPFR_RNDU);
        mpfr_add(s->bound, s->bound, s->t1, MPFR_RNDU);
        if (mpfr_cmpabs(s->tsum, s->bound) > 0) {
            *side = mpfr_sgn(s->tsum) > 0 ? 1 : -1;
            return 0;
        }
        if (q >= qmax) return oracle_fail(err, r, d, qmax);
        cnt->retries++;
    }
}

static int ceil_log2_u64(uint64_t x) {
    int lg = 0;
    while (lg < 63 && ((uint64_t)1 << lg) < x)
        lg++;
    return lg;
}

/* Pass (a) at precision p: the weights of every token, block by block; Z_hat = RN_p(sum w_hat)
 * and R_hat = RN_p(sum of the w_hat other than the reference token's, which is exactly 1);
 * n_neg; and the double sums behind A_up for the listed columns, in token order (finished by
 * column_abs_up). A stored row sums its weights with one mpfr_sum. A streamed row adds each
 * block's weights to an exact accumulator: every weight is at most 1 with its last bit at or
 * above 2^low, and the sum is below 2^28, so 31 - low bits hold every partial sum exactly;
 * Z_hat and R_hat are then the same single roundings of the same exact sums. */
static int weights_pass(ws *s, row *r, int32_t nlist, long p) {
    for (int32_t i = 0; i < nlist; i++)
        s->araw[s->list[i]] = 0;
    r->n_neg = 0;
    long low = 1 - p; /* the reference token's w = 1 holds bits down to 2^(1 - p) */
    mpfr_set_prec(s->zacc, 64);
    mpfr_set_ui(s->zacc, 0, MPFR_RNDN);
    for (int64_t t0 = 0; t0 < r->L; t0 += s->bt) {
        int64_t n;
        int rc = block_at(s, r, t0, p, &n);
        if (rc) return rc;
        size_t k = 1;
        if (!s->stored) s->ptrs[0] = s->zacc;
        for (int64_t i = 0; i < n; i++) {
            r->n_neg += s->negl[i];
            if (s->negl[i]) continue;
            mpfr_ptr w = s->w[i];
            if (!s->stored) {
                long e = (long)mpfr_get_exp(w) - p;
                low = e < low ? e : low;
                s->ptrs[k++] = w;
            } else if (t0 + i == r->ref) {
                s->ptrs[0] = w;
            } else {
                s->ptrs[k++] = w;
            }
            double a = s->wup[i], vs = s->vsc[i];
            const kvf_bf16 *vr = row_v(r, s->kvoff[i]);
            /* vs |v| is exact (item 6), so each term is one product, as without scales. */
            for (int32_t j = 0; j < nlist; j++) {
                int32_t d = s->list[j];
                s->araw[d] += a * (vs * fabs((double)kvf_bf16_to_f32(vr[d])));
            }
        }
        if (s->stored) {
            mpfr_set_prec(s->zsum, p);
            mpfr_set_prec(s->rsum, p);
            mpfr_sum(s->zsum, s->ptrs, k, MPFR_RNDN);
            mpfr_sum(s->rsum, s->ptrs + 1, k - 1, MPFR_RNDN);
            return 0; /* one block */
        }
        mpfr_set_prec(s->ztmp, 31 - low);
        mpfr_sum(s->ztmp, s->ptrs, k, MPFR_RNDN); /* exact */
        mpfr_swap(s->zacc, s->ztmp);
        if (kvf__oracle_halted()) return KVF_EINTR;
    }
    mpfr_set_prec(s->zsum, p);
    mpfr_set(s->zsum, s->zacc, MPFR_RNDN);
    mpfr_set_prec(s->ztmp, mpfr_get_prec(s->zacc));
    mpfr_sub_ui(s->ztmp, s->zacc, 1, MPFR_RNDN); /* exact: 2^0 is within the accumulator's bits */
    mpfr_set_prec(s->rsum, p);
    mpfr_set(s->rsum, s->ztmp, MPFR_RNDN);
    return 0;
}

/* A_up[d] >= sum_t w_hat_t |v_td| for the listed columns, from weights_pass's double sums: each
 * product and sum of nonnegative terms is off by a factor (1 +- 2^-53) or, for subnormal
 * results, by at most 2^-1075, so the true sum is below S_double * (1 - 2^-53)^-(L+1) +
 * L * 2^-1074. For L < 2^28 the factor is below 1 + 2^-24; we use 1 + 2^-19, which also absorbs
 * the rounding of the multiplication that applies it, and add L * 2^-1073. */
static void column_abs_up(ws *s, const row *r, int32_t nlist) {
    double floor_term = ldexp((double)r->L, -1073);
    for (int32_t i = 0; i < nlist; i++) {
        int32_t d = s->list[i];
        double up = s->araw[d] * (1.0 + ldexp(1.0, -19)) + floor_term;
        s->aup[d] = nextafter(up, INFINITY);
    }
}

/* Pass (b): N_hat for the listed columns: the exact sum of w_hat_t * v_td with each product's
 * bits below 2^F_d dropped. w_hat_t = W 2^wexp_t with W < 2^p held in nc 32-bit chunks, and
 * v = +-V 2^y (V < 2^8), so a product is the integer W V (nc + 1 digits of 32 bits, formed with
 * carries) at bit wexp_t + y. At relative bit b = wexp_t + y - F >= 0 the digits, shifted by
 * b mod 32, become nc + 2 increments below 2^33, one per slot, so 2^28 tokens keep every slot
 * below 2^63. With b < 0 the product is shifted right (truncated toward zero, < 2^F lost) and
 * counted. F_d = e_d - 2p - ceil(log2 L) - 40 with A_up < 2^e_d: the total truncation stays
 * below L 2^F_d <= 2^(e_d - 2p - 40), far below u A_up, and the p + 38 bits of room under
 * u A_up / L keep nearly every product whole (the truncating path is the slow one). No product
 * exceeds A_up and W >= 2^(p-1), so b < p + lg + 41 and `slots` covers every increment; the
 * sum stays below 2^(2p + lg + 40) relative to 2^F, well inside 32 slots bits with its sign.
 * The sum is exact, so its order does not matter: a streamed row adds block by block. */
static int accumulate_pass(ws *s, const row *r, int32_t nlist, long p, size_t *slots_out) {
    /* A scaled row's weights carry the v scale: W < 2^(p + 24), W >= 2^(p + 23) (item 6), and
     * the products still stay below A_up, so b < p + lg + 41 holds as stated. */
    size_t nc = (size_t)(chunk_bits(r, p) + 31) / 32;
    int lg = ceil_log2_u64((uint64_t)r->L);
    size_t slots = (size_t)(p + lg + 40) / 32 + nc + 3;
    int fail = 0;
    if (RESERVE(s->acc, s->acc_cap, (size_t)nlist * slots, &fail) ||
        RESERVE(s->digbuf, s->digbuf_cap, nc + 2, &fail))
        return KVF_ENOMEM;
    memset(s->acc, 0, (size_t)nlist * slots * sizeof(int64_t));
    for (int32_t i = 0; i < nlist; i++) {
        int32_t d = s->list[i];
        int e;
        frexp(s->aup[d], &e); /* aup < 2^e */
        s->fexp[i] = (long)e - 2 * p - lg - 40;
        s->ntrunc[i] = 0;
    }
    for (int64_t t0 = 0; t0 < r->L; t0 += s->bt) {
        int64_t n;
        int rc = block_at(s, r, t0, p, &n);
        if (rc) return rc;
        uint32_t *x = s->digbuf; /* the product's digits */
        for (int64_t t = 0; t < n; t++) {
            if (!(t & 255) && kvf__oracle_halted()) return KVF_EINTR; /* the caller says why */
            if (s->negl[t]) continue;
            long wx = s->wexp[t];
            const uint32_t *ch = s->chunks + (size_t)t * nc;
            const kvf_bf16 *vr = row_v(r, s->kvoff[t]);
            for (int32_t i = 0; i < nlist; i++) {
                kvf_bf16 vb = vr[s->list[i]];
                if (!(vb & 0x7FFFu)) continue;
                uint32_t vm;
                long y;
                int64_t m = -(int64_t)bf16_split(vb, &vm, &y); /* 0 or -1: (a ^ m) - m negates */
                long b = wx + y - s->fexp[i];
                int64_t *acc = s->acc + (size_t)i * slots;
                if (nc == 2 && b >= 0) {
                    /* The common case (p <= 64) unrolled: the same digits and increments. */
                    uint64_t v0 = (uint64_t)ch[0] * vm, v1 = (uint64_t)ch[1] * vm + (v0 >> 32);
                    size_t j = (size_t)(b >> 5);
                    int sh = (int)(b & 31);
                    if (j + 4 > slots) return KVF_EORACLE; /* impossible by the bound above */
                    uint64_t y0 = (v0 & M32) << sh, y1 = (v1 & M32) << sh, y2 = (v1 >> 32) << sh;
                    acc[j] += ((int64_t)(y0 & M32) ^ m) - m;
                    acc[j + 1] += ((int64_t)((y1 & M32) + (y0 >> 32)) ^ m) - m;
                    acc[j + 2] += ((int64_t)((y2 & M32) + (y1 >> 32)) ^ m) - m;
                    acc[j + 3] += ((int64_t)(y2 >> 32) ^ m) - m;
                    continue;
                }
                uint64_t carry = 0;
                for (size_t k = 0; k < nc; k++) {
                    uint64_t v = (uint64_t)ch[k] * vm + carry; /* < 2^40 */
                    x[k] = (uint32_t)v;
                    carry = v >> 32;
                }
                x[nc] = (uint32_t)carry;
                if (b >= 0) {
                    size_t j = (size_t)(b >> 5);
                    int sh = (int)(b & 31);
                    if (j + nc + 2 > slots) return KVF_EORACLE; /* impossible by the bound above */
                    uint64_t prev = 0;
                    for (size_t k = 0; k <= nc; k++) {
                        uint64_t v = (uint64_t)x[k] << sh; /* < 2^63 */
                        int64_t inc = (int64_t)((v & M32) + prev);
                        acc[j + k] += (inc ^ m) - m;
                        prev = v >> 32;
                    }
                    acc[j + nc + 1] += ((int64_t)prev ^ m) - m;
                } else {
                    s->ntrunc[i]++;
                    uint64_t rs = (uint64_t)-b;
                    if (rs >= 32 * (nc + 1)) continue; /* all of it below 2^F */
                    size_t wsh = (size_t)(rs >> 5);
                    int bs = (int)(rs & 31);
                    for (size_t k = 0; k + wsh <= nc; k++) {
                        uint64_t v = x[k + wsh] >> bs;
                        if (bs && k + wsh + 1 <= nc)
                            v |= ((uint64_t)x[k + wsh + 1] << (32 - bs)) & M32;
                        acc[k] += ((int64_t)v ^ m) - m;
                    }
                }
            }
        }
    }
    *slots_out = slots;
    return 0;
}

/* Tries to certify o_d from this pass (item 4). Returns 1 when done (outputs written), 0 when
 * more precision is needed, or a negative error. */
static int column_certify(ws *s, const row *r, int32_t i, size_t slots, long p, long pmax,
                          counters *cnt, kvf_error *err) {
    int32_t d = s->list[i];
    /* N_hat exactly. */
    int fail = 0;
    if (RESERVE(s->digbuf, s->digbuf_cap, slots, &fail)) return KVF_ENOMEM;
    int64_t carry = digits_normalize(s->digbuf, s->acc + (size_t)i * slots, slots);
    /* |N_hat| < 2^(2p + lg + 40) relative to 2^F while the slots hold 32 slots >= 2p + lg + 105
     * bits, so the carry is the sign and agrees with the top bit; anything else is a bug. */
    if (carry != -(int64_t)(s->digbuf[slots - 1] >> 31))
        return kvf_error_set(err, KVF_EORACLE, "oracle: internal accumulator overflow");
    mpfr_set_prec(s->nhat, (mpfr_prec_t)(32 * slots + 32));
    digits_to_mpfr(s->nhat, s->digbuf, slots, s->fexp[i], s->z);
    mpfr_set_prec(s->ohat, p);
    mpfr_div(s->ohat, s->nhat, s->zsum, MPFR_RNDN);

    /* E = u (5 C_up + 2 |o_hat|) + 2 tau + 4 n_neg eta (A_up + V), all rounded upward. */
    mpfr_set_prec(s->chat, BOUND_PREC);
    mpfr_set_prec(s->bound, BOUND_PREC);
    mpfr_set_prec(s->t1, BOUND_PREC);
    mpfr_set_prec(s->t2, BOUND_PREC);
    mpfr_set_d(s->t1, s->aup[d], MPFR_RNDU);
    mpfr_div(s->chat, s->t1, s->zsum, MPFR_RNDU);
    mpfr_mul_ui(s->bound, s->chat, 5, MPFR_RNDU);
    mpfr_abs(s->t2, s->ohat, MPFR_RNDU);
    mpfr_mul_2ui(s->t2, s->t2, 1, MPFR_RNDU);
    mpfr_add(s->bound, s->bound, s->t2, MPFR_RNDU);
    mpfr_mul_2si(s->bound, s->bound, -p, MPFR_RNDU);
    mpfr_set_si_2exp(s->t1, s->ntrunc[i], s->fexp[i] + 1, MPFR_RNDU); /* 2 tau */
    mpfr_add(s->bound, s->bound, s->t1, MPFR_RNDU);
    if (r->n_neg) {
        mpfr_set_d(s->t1, s->aup[d], MPFR_RNDU);
        mpfr_add_d(s->t1, s->t1, r->vmax, MPFR_RNDU);
        mpfr_mul_si(s->t1, s->t1, r->n_neg, MPFR_RNDU);
        mpfr_mul_2ui(s->t1, s->t1, 2, MPFR_RNDU);
        mpfr_mul(s->t1, s->t1, s->eta, MPFR_RNDU);
        mpfr_add(s->bound, s->bound, s->t1, MPFR_RNDU);
    }
    mpfr_set_prec(s->lo, p);
    mpfr_set_prec(s->hi, p);
    mpfr_sub(s->lo, s->ohat, s->bound, MPFR_RNDD);
    mpfr_add(s->hi, s->ohat, s->bound, MPFR_RNDU);
    double rl = round_to_format(s->lo, 8, s->scratch);
    double rh = round_to_format(s->hi, 8, s->scratch);
    kvf_bf16 bl = bf16_bits_of(rl), bh = bf16_bits_of(rh);

    int32_t idx = d; /* the row's output arrays start at d = 0 */
    double zd = mpfr_get_d(s->zsum, MPFR_RNDN);
    r->o_cond[idx] = s->araw[d] / zd;
    if (bl == bh) {
        r->o_rounded[idx] = bh;
        r->o_exact[idx] = mpfr_get_d(s->ohat, MPFR_RNDN);
        return 1;
    }
    if (bf16_index(bh) - bf16_index(bl) != 1) return 0; /* two boundaries inside: refine */

    /* One boundary beta = (rl + rh) / 2 lies inside; the overflow threshold counts 2^128 as the
     * value above the largest finite bf16. Exact in 64 bits (adjacent values). */
    mpfr_set_prec(s->beta, 64);
    mpfr_set_prec(s->t1, 64);
    if (isinf(rh))
        mpfr_set_ui_2exp(s->beta, 1, 128, MPFR_RNDN);
    else
        mpfr_set_d(s->beta, rh, MPFR_RNDN);
    if (isinf(rl))
        mpfr_set_si_2exp(s->t1, -1, 128, MPFR_RNDN);
    else
        mpfr_set_d(s->t1, rl, MPFR_RNDN);
    mpfr_add(s->beta, s->beta, s->t1, MPFR_RNDN);
    mpfr_div_2ui(s->beta, s->beta, 1, MPFR_RNDN);
    int side = 0;
    int rc = boundary_side(&side, s, r, d, s->beta, p, pmax, cnt, err);
    if (rc) return rc;
    if (side > 0) {
        r->o_rounded[idx] = bh;
        r->o_exact[idx] = mpfr_get_d(s->ohat, MPFR_RNDN);
    } else if (side < 0) {
        r->o_rounded[idx] = bl;
        r->o_exact[idx] = mpfr_get_d(s->ohat, MPFR_RNDN);
    } else {
        /* An exact tie: to even; an exact zero is +0. */
        cnt->ties++;
        if (mpfr_zero_p(s->beta))
            r->o_rounded[idx] = 0x0000u;
        else
            r->o_rounded[idx] = (bl & 1u) ? bh : bl;
        r->o_exact[idx] = mpfr_get_d(s->beta, MPFR_RNDN);
    }
    return 1;
}

/* Tries to certify lse from this pass. 1 when done, 0 when more precision is needed.
 * ln Z = log1p(R) keeps the bound relative when lse is tiny (m = 0, other tokens far below). */
static int lse_certify(ws *s, const row *r, long p) {
    mpfr_set_prec(s->lse_l, p);
    mpfr_set_prec(s->lse_y, p);
    mpfr_set_prec(s->ln2, p);
    mpfr_set_prec(s->lam, p);
    mpfr_log1p(s->lse_l, s->rsum, MPFR_RNDN);
    mpfr_add(s->lse_y, s->m, s->lse_l, MPFR_RNDN);
    mpfr_const_log2(s->ln2, MPFR_RNDN);
    mpfr_div(s->lam, s->lse_y, s->ln2, MPFR_RNDN);
    /* E = u (5 |y| + 6 l) + 3 n_neg eta (l >= 0). */
    mpfr_set_prec(s->bound, BOUND_PREC);
    mpfr_set_prec(s->t1, BOUND_PREC);
    mpfr_abs(s->t1, s->lse_y, MPFR_RNDU);
    mpfr_mul_ui(s->bound, s->t1, 5, MPFR_RNDU);
    mpfr_mul_ui(s->t1, s->lse_l, 6, MPFR_RNDU);
    mpfr_add(s->bound, s->bound, s->t1, MPFR_RNDU);
    mpfr_mul_2si(s->bound, s->bound, -p, MPFR_RNDU);
    if (r->n_neg) {
        mpfr_mul_si(s->t1, s->eta, r->n_neg, MPFR_RNDU);
        mpfr_mul_ui(s->t1, s->t1, 3, MPFR_RNDU);
        mpfr_add(s->bound, s->bound, s->t1, MPFR_RNDU);
    }
    mpfr_set_prec(s->lo, p);
    mpfr_set_prec(s->hi, p);
    mpfr_sub(s->lo, s->lam, s->bound, MPFR_RNDD);
    mpfr_add(s->hi, s->lam, s->bound, MPFR_RNDU);
    /* Z >= 1, so lse >= m / ln 2: with m >= 0 the lower end can be raised to 0 (which rounds to
     * +0, as any lse in [0, hi] does when hi rounds to +0). */
    if (mpfr_sgn(s->m) >= 0 && mpfr_sgn(s->lo) < 0) mpfr_set_ui(s->lo, 0, MPFR_RNDN);
    float fl = (float)round_to_format(s->lo, 24, s->scratch);
    float fh = (float)round_to_format(s->hi, 24, s->scratch);
    if (kvf_f32_bits(fl) != kvf_f32_bits(fh)) return 0;
    *r->lse_rounded = fh;
    *r->lse_exact = mpfr_get_d(s->lam, MPFR_RNDN);
    return 1;
}

static void row_fill_nan(const row *r) {
    for (int32_t d = 0; d < r->D; d++) {
        r->o_rounded[d] = KVF_BF16_QNAN;
        r->o_exact[d] = NAN;
        r->o_cond[d] = NAN;
    }
    *r->lse_rounded = NAN;
    *r->lse_exact = NAN;
}

static int row_compute(ws *s, row *r, long p0, long pmax, counters *cnt, kvf_error *err) {
    const kvf_case *c = r->c;
    int32_t D = r->D;
    kvf_oracle_row *info = r->info;
    memset(info, 0, sizeof *info);
    info->length = r->L;
    if (r->L == 0) {
        for (int32_t d = 0; d < D; d++) {
            r->o_rounded[d] = 0x0000u;
            r->o_exact[d] = 0;
            r->o_cond[d] = 0;
        }
        *r->lse_rounded = -INFINITY;
        *r->lse_exact = -INFINITY;
        return 0;
    }
    if (r->L > MAX_ROW_TOKENS)
        return kvf_error_set(err, KVF_ELIMIT,
                             "oracle: sequence %d has %lld tokens, more than the oracle's limit "
                             "of %lld",
                             (int)r->b, (long long)r->L, (long long)MAX_ROW_TOKENS);
    /* A row whose per-token values fit in the store limit is one block, kept for the whole
     * row; a longer one streams in blocks of that size (row_store.h). */
    const int64_t fit = kvf__row_store_bytes / KVF_ORACLE_MPFR_TOKEN_BYTES;
    s->stored = r->L <= fit;
    s->bt = s->stored ? r->L : (fit > 0 ? fit : 1);
    s->blk0 = -1;
    s->blk_p = 0;
    if (ws_reserve_tokens(s, s->bt) || ws_reserve_cols(s, D) || kvf__oracle_halted()) {
        if (kvf__oracle_halted()) return halt_error(err);
        return kvf_error_set(err, KVF_ENOMEM, "oracle: out of memory for a row of %lld tokens",
                             (long long)r->L);
    }
    s->groups_ready = 0;
    s->raw_abs_max = s->kdeq_abs_max = 0;
    r->scaled = c->quant.granularity != KVF_SCALE_NONE;
    r->dot_shift = r->scaled ? DOT_SHIFT_SCALED : DOT_SHIFT;

    /* q, decoded once per row. */
    const kvf_bf16 *qr = c->q + ((size_t)r->b * c->num_qo_heads + r->h) * (size_t)D;
    int bad_qk = 0;
    for (int32_t d = 0; d < D; d++) {
        if (bf16_nonfinite(qr[d])) bad_qk = 1;
        s->qneg[d] = (unsigned char)bf16_split(qr[d], &s->qm[d], &s->qe[d]);
        s->qabs[d] = bf16_nonfinite(qr[d]) ? 0 : fabs((double)kvf_bf16_to_f32(qr[d]));
    }

    /* Pass 0: exact dots, the largest and smallest (first in token order, as copies: a streamed
     * row keeps no dot), and the magnitudes the row flags need. Which columns hold a nonzero or
     * a non-finite v, and the largest finite |v|: the common all-finite case is one branch-free
     * pass over magnitude bits (ordered like the values); only a row with a NaN or an infinity
     * takes the classifying pass. */
    double abs_dot_max = 0;
    int64_t tmax = 0, tmin = 0;
    uint32_t dmax[DOT_DIGITS], dmin[DOT_DIGITS];
    uint16_t magmax = 0;
    for (int32_t d = 0; d < D; d++)
        s->colmag[d] = 0;
    for (int64_t t0 = 0; t0 < r->L; t0 += s->bt) {
        int64_t n = r->L - t0 < s->bt ? r->L - t0 : s->bt;
        bad_qk |= block_dots(s, r, t0, t0 + n, &abs_dot_max);
        if (kvf__oracle_halted()) return halt_error(err);
        for (int64_t i = 0; i < n; i++) {
            const uint32_t *dt = s->dots + (size_t)i * DOT_DIGITS;
            if (t0 + i == 0) {
                memcpy(dmax, dt, sizeof dmax);
                memcpy(dmin, dt, sizeof dmin);
            } else {
                if (digits_cmp(dt, dmax, DOT_DIGITS) > 0) {
                    tmax = t0 + i;
                    memcpy(dmax, dt, sizeof dmax);
                }
                if (digits_cmp(dt, dmin, DOT_DIGITS) < 0) {
                    tmin = t0 + i;
                    memcpy(dmin, dt, sizeof dmin);
                }
            }
            const kvf_bf16 *vr = row_v(r, s->kvoff[i]);
            for (int32_t d = 0; d < D; d++) {
                uint16_t mg = vr[d] & 0x7FFFu;
                s->colmag[d] |= mg;
                magmax = mg > magmax ? mg : magmax;
            }
        }
    }
    if (s->stored) s->blk0 = 0; /* the dots stay; the deltas follow below */
    for (int32_t d = 0; d < D; d++)
        s->colstate[d] = s->colmag[d] ? COL_NONZERO : 0;
    if (magmax >= 0x7F80u) {
        magmax = 0;
        for (int32_t d = 0; d < D; d++)
            s->colstate[d] = 0;
        for (int64_t t = 0; t < r->L; t++) {
            if (!(t & 255) && kvf__oracle_halted()) return halt_error(err);
            const kvf_bf16 *vr = row_v(r, kvf_case_kv_offset(c, r->b, t, r->g, 0));
            for (int32_t d = 0; d < D; d++) {
                kvf_bf16 vb = vr[d];
                uint16_t mg = vb & 0x7FFFu;
                if (bf16_nonfinite(vb)) {
                    s->colstate[d] |= kvf_bf16_is_nan(vb) ? COL_NAN
                                      : (vb & 0x8000u)    ? COL_NINF
                                                          : COL_PINF;
                } else if (mg) {
                    s->colstate[d] |= COL_NONZERO;
                    if (mg > magmax) magmax = mg;
                }
            }
        }
    }
    double vmax = (double)kvf_bf16_to_f32(magmax);
    double kscale_max = 1.0;
    if (r->scaled) {
        /* The largest |v_scale_t v_td| (finite v), and the largest k scale: exact products. */
        vmax = 0;
        for (int64_t t = 0; t < r->L; t++) {
            if (!(t & 255) && kvf__oracle_halted()) return halt_error(err);
            const kvf_bf16 *vr = row_v(r, kvf_case_kv_offset(c, r->b, t, r->g, 0));
            double vs = (double)kvf_case_v_scale(c, r->b, t, r->g);
            double ks = (double)kvf_case_k_scale(c, r->b, t, r->g);
            if (ks > kscale_max) kscale_max = ks;
            for (int32_t d = 0; d < D; d++) {
                if (bf16_nonfinite(vr[d])) continue;
                double a = vs * fabs((double)kvf_bf16_to_f32(vr[d]));
                if (a > vmax) vmax = a;
            }
        }
    }
    r->vmax = vmax;
    info->v_abs_max = vmax;
    if (bad_qk) {
        /* A NaN or infinity in q or k makes the logits undefined (inf - inf, 0 * inf). */
        info->nonfinite_input = 1;
        row_fill_nan(r);
        return 0;
    }

    /* The largest logit m (and the smallest, for logit_abs_max). */
    double sm = (double)c->sm_scale;
    r->sm_sign = sm > 0 ? 1 : sm < 0 ? -1 : 0;
    r->ref = r->sm_sign >= 0 ? tmax : tmin;
    memcpy(s->dref, r->sm_sign >= 0 ? dmax : dmin, sizeof s->dref);
    mpfr_set_d(s->smf, sm, MPFR_RNDN); /* exact: an f32 */
    uint32_t tmp[DOT_DIGITS];
    double logit_abs = 0;
    for (int k = 0; k < 2; k++) {
        memcpy(tmp, k ? dmin : dmax, sizeof tmp);
        digits_to_mpfr(s->m, tmp, DOT_DIGITS, -r->dot_shift, s->z);
        mpfr_mul(s->m, s->m, s->smf, MPFR_RNDN);      /* exact (item 1) */
        double a = fabs(mpfr_get_d(s->m, MPFR_RNDA)); /* magnitude rounded up */
        if (a > logit_abs) logit_abs = a;
    }
    memcpy(tmp, s->dref, sizeof tmp);
    digits_to_mpfr(s->m, tmp, DOT_DIGITS, -r->dot_shift, s->z);
    mpfr_mul(s->m, s->m, s->smf, MPFR_RNDN);
    r->all_zero_logits = mpfr_zero_p(s->m) && logit_abs == 0;
    info->logit_abs_max = logit_abs;
    info->dot_abs_max = fabs(sm) * abs_dot_max;
    /* Overflow class (docs/oracle.md): an fp32 kernel holds s * log2(e) (after or before the
     * scale) and differences of two logits, so logits need |s| log2 e < 2^127; its unnormalised
     * output accumulators reach up to L * max|v|. */
    double scale_up = fabs(sm) > 1 ? fabs(sm) : 1.0;
    if (abs_dot_max * scale_up * 1.4426950408889634 >= ldexp(1.0, 127))
        info->overflow |= KVF_ORACLE_OVERFLOW_LOGITS;
    /* A kernel may also pre-scale q by sm_scale, log2(e) or their folded product (strict's
     * model, K2) before any dot product: that product overflows on its own when a q element
     * is near the bf16 maximum, whatever k holds. The folded constant is itself rounded (up
     * to u above the exact product), and an fp32 product reaches inf from 2^128 - 2^103 on;
     * 2^128 (1 - 2^-22) leaves room for both. */
    double q_abs_max = 0;
    for (int32_t d = 0; d < D; d++)
        if (s->qabs[d] > q_abs_max) q_abs_max = s->qabs[d];
    /* The folded constant alone (|sm_scale| log2 e) overflows the same way: max(1, |q|). */
    if ((q_abs_max > 1 ? q_abs_max : 1.0) * scale_up * 1.4426950408889634 >=
        ldexp(1.0 - 0x1p-22, 128))
        info->overflow |= KVF_ORACLE_OVERFLOW_LOGITS;
    if ((double)r->L * vmax >= ldexp(1.0, 127)) info->overflow |= KVF_ORACLE_OVERFLOW_ACCUM;
    /* A kernel may fold the key scale into sm_scale (log2 e included), as FlashInfer does:
     * the folded f32 constant overflows by itself (docs/oracle.md, "overflow class"). */
    if (kscale_max * scale_up * 1.4426950408889634 >= ldexp(1.0 - 0x1p-22, 128))
        info->overflow |= KVF_ORACLE_OVERFLOW_LOGITS;
    /* ... and then forms the unscaled dot q.k8 in f32, which must hold it; a kernel that
     * dequantizes instead needs k_scale k8 itself in f32 (an exact product rounds to inf from
     * 2^128 (1 - 2^-25) on). */
    if (s->raw_abs_max * scale_up * 1.4426950408889634 >= ldexp(1.0, 127) ||
        s->kdeq_abs_max >= ldexp(1.0 - 0x1p-25, 128))
        info->overflow |= KVF_ORACLE_OVERFLOW_LOGITS;

    /* delta_t = sm * (dot_t - dot_ref) * 2^-266, exact: once for a stored row, in every pass
     * for a streamed one (block_at). */
    if (s->stored) {
        (void)block_deltas(s, r, r->L);
        if (kvf__oracle_halted()) return halt_error(err);
    }

    /* Columns that need no arithmetic. */
    int32_t nlist = 0;
    for (int32_t d = 0; d < D; d++) {
        unsigned st = s->colstate[d];
        if (st & (COL_NAN | COL_PINF | COL_NINF)) {
            /* Every weight is a positive real, so one infinite v makes o infinite; NaN, or
             * infinities of both signs, make it undefined. */
            info->nonfinite_input = 1;
            int nan = (st & COL_NAN) || ((st & COL_PINF) && (st & COL_NINF));
            r->o_rounded[d] = nan               ? KVF_BF16_QNAN
                              : (st & COL_PINF) ? KVF_BF16_POS_INF
                                                : KVF_BF16_NEG_INF;
            r->o_exact[d] = nan ? NAN : (st & COL_PINF) ? INFINITY : -INFINITY;
            r->o_cond[d] = nan ? NAN : INFINITY;
        } else if (!(st & COL_NONZERO)) {
            r->o_rounded[d] = 0x0000u; /* every v is +-0: o is exactly 0 */
            r->o_exact[d] = 0;
            r->o_cond[d] = 0;
        } else {
            s->list[nlist++] = d;
        }
    }

    /* lse exactly when it is rational (header item 5): all logits 0 and L a power of two. */
    int lse_done = 0;
    if (r->all_zero_logits && (r->L & (r->L - 1)) == 0) {
        int k = ceil_log2_u64((uint64_t)r->L);
        *r->lse_rounded = (float)k;
        *r->lse_exact = (double)k;
        lse_done = 1;
    }

    for (long p = p0;; p = 2 * p > pmax ? pmax : 2 * p) {
        if (p > cnt->maxp) cnt->maxp = p;
        int rc = weights_pass(s, r, nlist, p);
        if (kvf__oracle_halted()) return halt_error(err);
        if (rc) return kvf_error_set(err, rc, "oracle: out of memory for the weights");
        if (!lse_done) lse_done = lse_certify(s, r, p);
        if (nlist) {
            column_abs_up(s, r, nlist);
            size_t slots = 0;
            rc = accumulate_pass(s, r, nlist, p, &slots);
            if (kvf__oracle_halted()) return halt_error(err);
            if (rc == KVF_ENOMEM) return kvf_error_set(err, rc, "oracle: out of memory");
            if (rc) return kvf_error_set(err, rc, "oracle: internal accumulator window exceeded");
            int32_t keep = 0;
            for (int32_t i = 0; i < nlist; i++) {
                if (kvf__oracle_halted()) return halt_error(err);
                rc = column_certify(s, r, i, slots, p, pmax, cnt, err);
                if (rc == KVF_ENOMEM) return kvf_error_set(err, rc, "oracle: out of memory");
                if (rc < 0) return rc; /* err already says why */
                if (rc == 0) s->list[keep++] = s->list[i];
            }
            nlist = keep;
        }
        if (lse_done && nlist == 0) return 0;
        if (p >= pmax) return oracle_fail(err, r, nlist ? s->list[0] : -1, pmax);
        cnt->retries += nlist + !lse_done;
    }
}

/* ---- driver ------------------------------------------------------------------------------- */

typedef struct worker {
    job *j;
    counters cnt;
    int is_thread;
} worker;

static void *worker_main(void *arg) {
    worker *wk = arg;
    job *j = wk->j;
    const kvf_case *c = j->c;
    kvf_oracle_result *out = j->out;
    /* Item 2: the widest exponent range MPFR allows, restored on the way out. */
    mpfr_exp_t old_emin = mpfr_get_emin(), old_emax = mpfr_get_emax();
    mpfr_set_emin(mpfr_get_emin_min());
    mpfr_set_emax(mpfr_get_emax_max());
    /* GMP memory of this thread is capped at the memory budget (mp_memory.c). */
    kvf__mp_begin(j->mp_cap);
    ws s;
    ws_init(&s);
    s.mem_budget = j->mp_cap;
    kvf__fast_ws *fs = j->fast ? kvf__fast_ws_new() : NULL;
    long nrows = (long)c->batch_size * c->num_qo_heads;
    int32_t G = c->num_qo_heads / c->num_kv_heads;
    /* With the fast path the unit of work is a kv group: its G rows read the same keys and
     * values, which oracle_fast.c decodes once for all of them. Item `it` is rows it * G to
     * it * G + G - 1 in every thread (one whose fast workspace could not be allocated computes
     * them all with MPFR). */
    long per = j->fast ? G : 1, nitems = nrows / per;
    kvf_error err;
    kvf_error_clear(&err);
    for (;;) {
        if (atomic_load(&j->stop)) break;
        long it = atomic_fetch_add(&j->next_row, 1);
        if (it >= nitems) break;
        const unsigned char *done = NULL;
        int rc = 0;
        if (kvf__oracle_halted()) {
            rc = halt_error(&err);
            goto failed;
        }
        if (fs) {
            /* Ziv's first pass in double (oracle_fast.c); a row it cannot certify is computed
             * again below from scratch. */
            done = kvf__fast_group(fs, c, (int32_t)(it / c->num_kv_heads),
                                   (int32_t)(it % c->num_kv_heads), out);
        }
        for (long ri = it * per; ri < (it + 1) * per && rc == 0; ri++) {
            if (done && done[ri - it * per]) {
                wk->cnt.fast_rows++;
                continue;
            }
            if (j->handed) wk->cnt.fallback_rows++;
            row r = {0};
            r.c = c;
            r.b = (int32_t)(ri / c->num_qo_heads);
            r.h = (int32_t)(ri % c->num_qo_heads);
            r.g = r.h / G;
            r.D = c->head_dim;
            r.L = kvf_case_seq_len(c, r.b);
            r.o_rounded = out->o_rounded + (size_t)ri * r.D;
            r.o_exact = out->o_exact + (size_t)ri * r.D;
            r.o_cond = out->o_cond + (size_t)ri * r.D;
            r.lse_rounded = out->lse_rounded + ri;
            r.lse_exact = out->lse_exact + ri;
            r.info = out->rows + ri;
            rc = row_compute(&s, &r, j->p0, j->pmax, &wk->cnt, &err);
        }
    failed:
        if (rc) {
            pthread_mutex_lock(&j->lock);
            if (!j->rc) {
                j->rc = rc;
                j->err = err;
            }
            pthread_mutex_unlock(&j->lock);
            atomic_store(&j->stop, 1);
            break;
        }
    }
    ws_free(&s);
    kvf__fast_ws_free(fs);
    kvf__mp_end();
    mpfr_set_emin(old_emin);
    mpfr_set_emax(old_emax);
    if (wk->is_thread) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
    return NULL;
}

void kvf_oracle_thread_done(void) {
    mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
}

/* A scaled case's keys within the FP8 range, 2^-16 <= |k| < 2^16 or 0 (item 6: the exact dot's
 * digits hold no other), every referenced one: a case built by hand may hold others, and is
 * refused for every row rather than answered where the fast path happens to certify. */
static int check_scaled_keys(const kvf_case *c, kvf_error *err) {
    for (int32_t b = 0; b < c->batch_size; b++)
        for (int64_t t = 0; t < kvf_case_seq_len(c, b); t++)
            for (int32_t g = 0; g < c->num_kv_heads; g++) {
                const kvf_bf16 *kr = c->k_cache + kvf_case_kv_offset(c, b, t, g, 0);
                for (int32_t d = 0; d < c->head_dim; d++) {
                    double a = fabs((double)kvf_bf16_to_f32(kr[d]));
                    if (a != 0 && isfinite(a) && !(a >= 0x1p-16 && a < 0x1p16))
                        return kvf_error_set(
                            err, KVF_EINVAL,
                            "oracle: sequence %d of a scaled case reads a k value outside the "
                            "FP8 range (a magnitude below 2^-16 or from 2^16 on)",
                            (int)b);
                }
            }
    return 0;
}

/* The fields the oracle indexes with, checked so that a malformed case is an error and never
 * an out-of-bounds read (kvf_case_validate does the full job, with limits). */
static int check_case(const kvf_case *c, kvf_error *err) {
    if (!c) return kvf_error_set(err, KVF_EINVAL, "oracle: case is NULL");
    if (c->num_qo_heads <= 0 || c->num_kv_heads <= 0 || c->head_dim <= 0 || c->page_size <= 0 ||
        c->batch_size < 0 || c->num_pages < 0)
        return kvf_error_set(err, KVF_EINVAL, "oracle: case shape has a nonpositive dimension");
    if (c->num_qo_heads % c->num_kv_heads)
        return kvf_error_set(err, KVF_EINVAL,
                             "oracle: num_qo_heads %d is not a multiple of num_kv_heads %d",
                             (int)c->num_qo_heads, (int)c->num_kv_heads);
    if (!isfinite(c->sm_scale))
        return kvf_error_set(err, KVF_EINVAL, "oracle: sm_scale is not finite");
    int rc = kvf_kv_quant_check(&c->quant, err);
    if (rc) return rc;
    if (kvf_case_scale_count(c) > 0 && (!c->k_scale || !c->v_scale))
        return kvf_error_set(err, KVF_EINVAL, "oracle: the case has a granularity but no scales");
    if (c->quant.granularity && c->head_dim >= (1 << 30))
        return kvf_error_set(err, KVF_ELIMIT, "oracle: a scaled case's head_dim is past 2^30");
    if (c->batch_size == 0) return 0;
    if (!c->kv_indptr || !c->kv_last_page_len || !c->q)
        return kvf_error_set(err, KVF_EINVAL, "oracle: case arrays are missing");
    if (c->kv_indptr[0] != 0)
        return kvf_error_set(err, KVF_EINVAL, "oracle: kv_indptr[0] is %d, not 0",
                             (int)c->kv_indptr[0]);
    for (int32_t b = 0; b < c->batch_size; b++) {
        int32_t lo = c->kv_indptr[b], hi = c->kv_indptr[b + 1];
        if (hi < lo)
            return kvf_error_set(err, KVF_EINVAL, "oracle: kv_indptr decreases at %d", (int)b);
        if (hi > lo) {
            int32_t last = c->kv_last_page_len[b];
            if (last < 1 || last > c->page_size)
                return kvf_error_set(err, KVF_EINVAL,
                                     "oracle: kv_last_page_len[%d] = %d is outside [1, %d]", (int)b,
                                     (int)last, (int)c->page_size);
            if (!c->kv_indices || !c->k_cache || !c->v_cache)
                return kvf_error_set(err, KVF_EINVAL, "oracle: case arrays are missing");
        }
        for (int32_t i = lo; i < hi; i++)
            if (c->kv_indices[i] < 0 || c->kv_indices[i] >= c->num_pages)
                return kvf_error_set(err, KVF_EINVAL,
                                     "oracle: kv_indices[%d] = %d is outside [0, %lld)", (int)i,
                                     (int)c->kv_indices[i], (long long)c->num_pages);
    }
    return c->quant.granularity ? check_scaled_keys(c, err) : 0;
}

void kvf_oracle_result_free(kvf_oracle_result *r) {
    if (!r) return;
    free(r->o_rounded);
    free(r->o_exact);
    free(r->o_cond);
    free(r->lse_rounded);
    free(r->lse_exact);
    free(r->rows);
    memset(r, 0, sizeof *r);
}

int kvf_oracle_run(kvf_oracle_result *out, const kvf_case *c, const kvf_oracle_opts *opts,
                   kvf_error *err) {
    memset(out, 0, sizeof *out);
    int rc = check_case(c, err);
    if (rc) return rc;
    kvf__mp_install();
    kvf_limits lim;
    kvf_limits_default(&lim);
    int64_t max_memory = 0, max_work = 0;
    if ((rc = kvf_limits_budgets(&lim, &max_memory, &max_work, err))) return rc;
    kvf_oracle_opts def;
    if (!opts) {
        kvf_oracle_opts_default(&def);
        opts = &def;
    }
    long p0 = opts->initial_precision < MIN_WORK_PREC ? MIN_WORK_PREC : opts->initial_precision;
    long pmax = opts->max_precision > p0 ? opts->max_precision : p0;
    /* The bounds treat n_neg * eta < 2^(28 - 2^20) as far below u = 2^-p: keep p <= 2^19. */
    if (pmax > MAX_WORK_PREC) pmax = MAX_WORK_PREC;
    if (p0 > pmax) p0 = pmax;

    size_t nrows = (size_t)c->batch_size * (size_t)c->num_qo_heads;
    size_t nel = nrows * (size_t)c->head_dim;
    out->batch_size = c->batch_size;
    out->num_qo_heads = c->num_qo_heads;
    out->head_dim = c->head_dim;
    out->o_rounded = malloc(nel * sizeof(kvf_bf16) + 1);
    out->o_exact = malloc(nel * sizeof(double) + 1);
    out->o_cond = malloc(nel * sizeof(double) + 1);
    out->lse_rounded = malloc(nrows * sizeof(float) + 1);
    out->lse_exact = malloc(nrows * sizeof(double) + 1);
    out->rows = calloc(nrows + 1, sizeof(kvf_oracle_row));
    if (!out->o_rounded || !out->o_exact || !out->o_cond || !out->lse_rounded || !out->lse_exact ||
        !out->rows) {
        kvf_oracle_result_free(out);
        return kvf_error_set(err, KVF_ENOMEM, "oracle: out of memory for %zu outputs", nel);
    }

    job j;
    memset(&j, 0, sizeof j);
    j.c = c;
    j.out = out;
    j.p0 = p0;
    j.pmax = pmax;
    j.mp_cap = max_memory;
    /* The fast path knows one key and one value scale per kv group (docs/oracle.md, "Scaled
     * caches"): per-token scales take the MPFR path for every row. */
    j.handed = opts->path != KVF_ORACLE_MPFR;
    j.fast = j.handed && c->quant.granularity != KVF_SCALE_TOKEN;
    atomic_init(&j.next_row, 0);
    atomic_init(&j.stop, 0);
    pthread_mutex_init(&j.lock, NULL);

    int nthreads = opts->threads > 1 ? opts->threads : 1;
    if (!mpfr_buildopt_tls_p()) nthreads = 1; /* exponent range and caches are process-wide */
    if ((size_t)nthreads > nrows) nthreads = nrows ? (int)nrows : 1;
    if (nthreads > 256) nthreads = 256;
    /* Each thread holds the working memory of the longest row it meets: no more threads than
     * the memory budget has room for (docs/case-format.md, "Budgets"). */
    int64_t row_bytes =
        KVF_ORACLE_THREAD_BYTES(kvf_case_max_seq_len(c), c->num_qo_heads / c->num_kv_heads);
    if (row_bytes > 0 && nthreads > 1 && (int64_t)nthreads * row_bytes > max_memory)
        nthreads = max_memory / row_bytes > 1 ? (int)(max_memory / row_bytes) : 1;

    worker wk[256];
    pthread_t tid[256];
    int started = 0;
    for (int i = 0; i < nthreads; i++) {
        memset(&wk[i], 0, sizeof wk[i]);
        wk[i].j = &j;
    }
    /* The calling thread is worker 0; the others are threads. A thread that cannot be started
     * just leaves its share to the rest. */
    for (int i = 1; i < nthreads; i++) {
        wk[i].is_thread = 1;
        if (pthread_create(&tid[i], NULL, worker_main, &wk[i]) != 0) break;
        started = i;
    }
    worker_main(&wk[0]);
    for (int i = 1; i <= started; i++)
        pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&j.lock);

    for (int i = 0; i < nthreads; i++) {
        if (wk[i].cnt.maxp > out->max_precision_used) out->max_precision_used = wk[i].cnt.maxp;
        out->ziv_retries += wk[i].cnt.retries;
        out->exact_ties += wk[i].cnt.ties;
        out->fast_rows += wk[i].cnt.fast_rows;
        out->fallback_rows += wk[i].cnt.fallback_rows;
    }
    if (j.rc) {
        if (err) *err = j.err;
        kvf_oracle_result_free(out);
        return j.rc;
    }
    return 0;
}
