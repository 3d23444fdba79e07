/* The oracle's fast path: the rows of one kv group in double arithmetic with a running error
 * bound, each returned only when the bound settles every rounding (Ziv's first pass; the MPFR
 * path is the second). The group's keys and values are decoded once for its G q heads.
 * docs/oracle.md, "The fast path", has the proof; the step numbers F1-F7 below refer to it.
 *
 * Notation as in oracle.c: s_t = sm * dot_t, w_t = e^(s_t - s_ref), Z = sum w_t >= 1 (the
 * reference token has w = 1 exactly), N_d = sum w_t v_td, o_d = N_d / Z,
 * lse = (s_ref + ln Z) / ln 2, u = 2^-53. The identity for lse holds for any reference token,
 * so the reference need only be an approximate argmax.
 *
 * Every error bound below is a short expression (at most a dozen operations) in nonnegative
 * doubles evaluated with round to nearest, so its computed value is at least its exact value
 * times (1 - u)^12; UP() multiplies by 1 + 2^-40, which more than covers that and its own
 * rounding. Absolute floors of 2^-1000 cover underflow inside the bound arithmetic; they are
 * far below every bf16 (2^-134) and f32 (2^-150) rounding boundary gap that matters.
 *
 * Scaled caches (tensor and per-head scales; docs/oracle.md, "Scaled caches"): the group's
 * logit scale is sm_scale k_scale, exact in double, and o is v_scale N / Z with one more
 * rounding; columns that need a boundary decision go to the MPFR path. */
#include "oracle_fast.h"

#include <math.h>
#include <mpfr.h>
#include <stdlib.h>
#include <string.h>

#include "fastmath.h"
#include "mp_memory.h"
#include "row_store.h"

#define FAST_MAX_TOKENS ((int64_t)1 << 28) /* as the MPFR path's limit; keeps L u <= 2^-25 */
#define NEGL_X (-700.0)                    /* x < -700: w < e^-699.99 < ETA (F4) */
#define ETA 0x1p-1009
#define EPS_MAX 0x1p-20  /* a larger logit error makes the bounds useless: MPFR path */
#define MAX_CANDIDATES 8 /* tokens that might hold max |s| and need an exact evaluation */
#define LSB_NONE 100000  /* no nonzero element */
#define UP(x) ((x) * (1 + 0x1p-40))
#define FLOOR 0x1p-1000

/* Four doubles as one vector (GCC and Clang vector extension): element-wise IEEE operations,
 * SSE2 pairs or one AVX register. */
typedef double v4d __attribute__((vector_size(32)));

/* Where the compiler supports it (GCC on x86-64 with ifunc), the hot function is also built
 * for AVX2 and chosen at load time; the arithmetic is the same element-wise IEEE operations
 * (no fused multiply-add: AVX2 does not imply FMA), so results are identical. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define KVF__HOT __attribute__((target_clones("avx2", "default")))
#else
#define KVF__HOT
#endif
/* clang (the libFuzzer builds) does not link target_clones on an extern function (clang 14):
 * the same two copies there by a target attribute on one of them and a run-time check, as
 * core/src/gen_draw2.c does. KVF_ORACLE_NO_COPIES builds the one plain copy. */
#if defined(__clang__) && defined(__x86_64__) && !defined(KVF_ORACLE_NO_COPIES)
#define KVF__FAST_COPIES 1
#endif

/* Inexact tokens a head keeps while its dots stream by, as candidates for the largest |logit|
 * (F1); more live candidates than this send the head to MPFR. */
#define CAND_CAP 64

typedef struct head {
    double zhat, dz, kappa, negl; /* F5 */
    int live;                     /* still certifiable */
    int exact_dots;               /* every dot exact: logits can be grouped exactly (F8) */
    int64_t ref;                  /* the reference token */
    /* F1, gathered in token order while the dots stream by (pass 1) */
    double lower;      /* max_t |dot_hat_t| - 2 e_t so far */
    double best_exact; /* max RU(|sm dot_t|) over the exact tokens that were candidates */
    double dref, eref; /* dot_hat and e of the reference token */
    int all_exact, all_zero, cand_overflow, ncand;
    int64_t cand_t[CAND_CAP];  /* inexact candidates ... */
    double cand_key[CAND_CAP]; /* ... and their |dot_hat| + 2 e */
    /* F4-F5, summed in token order (pass 2) */
    double rsum, epsmax;
    int64_t n_neg;
} head;

typedef struct tok {
    double dot;
    int64_t t;
} tok;

struct kvf__fast_ws {
    /* Per-token values, kept only for a row whose tokens fit in kvf__row_store_bytes (stored);
     * a longer row recomputes them in each pass (docs/oracle.md, "Memory"). */
    int stored;
    int64_t cap;               /* tokens x heads (dot, derr, w) */
    int64_t kcap;              /* tokens (kvoff) */
    int64_t *kvoff;            /* [L] element offset of (token, kv head, d = 0) */
    double *dot;               /* [G][L] the dot q.k_t in double */
    double *derr;              /* [G][L] bound on |dot_hat - dot| (0: exact) */
    double *w;                 /* [G][L] weight, 0 for a negligible token */
    double *tdot, *tderr, *tw; /* [G] one token's dots, errors and weights (streamed rows) */
    int64_t dcap;              /* dims x heads */
    double *qd, *qa;           /* [G][D] q and |q| as doubles */
    double *nacc, *aacc;       /* [G][D] N_hat and A_hat */
    double *xd, *xa;           /* [D] the current key or value row and its magnitudes */
    uint16_t *colmag;          /* [D] OR of |v| bits per column */
    tok *order;                /* [L] tokens sorted by dot (groups of equal logits, F8) */
    double *gs;                /* [L] S_j per group (F8) */
    int64_t *gt;               /* [L] a token of group j */
    int64_t ocap;
    int32_t order_head; /* the head `order` was built for, -1 none */
    int32_t hcap;
    head *hs;            /* [G] */
    unsigned char *done; /* [G] */
    int *qlsb;           /* [G] */
    double *abs_dot_max; /* [G] */
    /* The group's scales (docs/oracle.md, "Scaled caches"): tensor and per-head scales are one
     * key scale and one value scale per kv group. sm is the logit scale sm_scale k_scale
     * (exact in double: 48 significant bits), vsc the value scale; 1 and sm_scale without
     * scales. kmag_max: the largest |k| bits of the group's keys. */
    int scaled;
    double sm, ksc, vsc;
    uint16_t kmag_max;
    mpfr_t ex;     /* exact dot (640 bits) */
    mpfr_t gx, gy; /* exact group sums (320 bits, F8) */
};

kvf__fast_ws *kvf__fast_ws_new(void) {
    kvf__fm_init();
    kvf__fast_ws *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    mpfr_init2(s->ex, 640);
    mpfr_init2(s->gx, 320);
    mpfr_init2(s->gy, 320);
    return s;
}

void kvf__fast_ws_free(kvf__fast_ws *s) {
    if (!s) return;
    free(s->kvoff);
    free(s->dot);
    free(s->derr);
    free(s->w);
    free(s->qd);
    free(s->qa);
    free(s->nacc);
    free(s->aacc);
    free(s->xd);
    free(s->xa);
    free(s->colmag);
    free(s->hs);
    free(s->order);
    free(s->gs);
    free(s->gt);
    free(s->done);
    free(s->qlsb);
    free(s->abs_dot_max);
    free(s->tdot);
    free(s->tderr);
    free(s->tw);
    mpfr_clear(s->ex);
    mpfr_clear(s->gx);
    mpfr_clear(s->gy);
    free(s);
}

static int grow(void **p, size_t n, size_t size) {
    void *q = realloc(*p, n * size + 1);
    if (!q) return 1;
    *p = q;
    return 0;
}

static int reserve(kvf__fast_ws *s, int64_t L, int32_t D, int32_t G) {
    if (G > s->hcap) {
        size_t n = (size_t)G;
        if (grow((void **)&s->hs, n, sizeof(head)) || grow((void **)&s->done, n, 1) ||
            grow((void **)&s->qlsb, n, sizeof(int)) || grow((void **)&s->abs_dot_max, n, 8) ||
            grow((void **)&s->tdot, n, 8) || grow((void **)&s->tderr, n, 8) ||
            grow((void **)&s->tw, n, 8))
            return 1;
        s->hcap = G;
    }
    /* A row is stored when its per-token values (kvoff, dot, derr and w per head, and F8's
     * order, gs and gt) fit in the limit. */
    s->stored = L * (24 * (int64_t)G + 40) <= kvf__row_store_bytes;
    /* Two capacities: a workspace that met a long row of a small group and then a wide group
     * has room for L * G values but not for L offsets, or the other way round. */
    if (s->stored && L > s->kcap) {
        if (grow((void **)&s->kvoff, (size_t)L, sizeof(int64_t))) return 1;
        s->kcap = L;
    }
    if (s->stored && L * G > s->cap) {
        size_t n = (size_t)(L * G);
        if (grow((void **)&s->dot, n, 8) || grow((void **)&s->derr, n, 8) ||
            grow((void **)&s->w, n, 8))
            return 1;
        s->cap = L * G;
    }
    if ((int64_t)D * G > s->dcap) {
        size_t n = (size_t)D * (size_t)G;
        if (grow((void **)&s->qd, n, 8) || grow((void **)&s->qa, n, 8) ||
            grow((void **)&s->nacc, n, 8) || grow((void **)&s->aacc, n, 8) ||
            grow((void **)&s->xd, n, 8) || grow((void **)&s->xa, n, 8) ||
            grow((void **)&s->colmag, n, sizeof(uint16_t)))
            return 1;
        s->dcap = (int64_t)D * G;
    }
    return 0;
}

/* Exponent of the lowest bit a finite nonzero bf16 can hold: M 2^e with M < 2^8 an integer
 * (oracle.c's bf16_split); LSB_NONE for +-0. */
static inline int bf16_lsb(kvf_bf16 x) {
    if (!(x & 0x7FFFu)) return LSB_NONE;
    int ef = (x >> 7) & 0xFF;
    return ef ? ef - 134 : -133;
}

/* RU(|sm * dot|) for a dot exact in double (F1): the product of a 24-bit and a 53-bit
 * significand is hi + lo exactly (lo is a multiple of 2^-467, far above the subnormals), so
 * |hi| is the answer when lo is 0 or of the opposite sign, and the next double up otherwise. */
static double abs_logit_up(double sm, double dot) {
    double hi = sm * dot, lo = fma(sm, dot, -hi);
    double a = fabs(hi);
    if (lo != 0 && (lo > 0) == (hi > 0)) a = nextafter(a, INFINITY);
    return a;
}

/* The same for a dot that is not exact in double: the exact dot in 640 bits (products are exact
 * doubles, multiples of 2^-266 below 2^256, so every partial sum has fewer than 530 significant
 * bits), times the 24-bit sm exactly, rounded away from zero: what the MPFR path computes. */
static double abs_logit_up_exact(kvf__fast_ws *s, const double *qd, const kvf_bf16 *kr, int32_t D,
                                 double sm) {
    mpfr_set_ui(s->ex, 0, MPFR_RNDN);
    for (int32_t d = 0; d < D; d++)
        mpfr_add_d(s->ex, s->ex, qd[d] * (double)kvf_bf16_to_f32(kr[d]), MPFR_RNDN);
    mpfr_mul_d(s->ex, s->ex, sm, MPFR_RNDN);
    return fabs(mpfr_get_d(s->ex, MPFR_RNDA));
}

/* Both ends of [x - e, x + e], rounded outward, and one double further out, so that an
 * interval whose ends round alike holds no rounding boundary (F7). */
static inline void interval(double x, double e, double *lo, double *hi) {
    *lo = kvf__next_down(kvf__next_down(x - e));
    *hi = kvf__next_up(kvf__next_up(x + e));
}

/* Row x[0..D) of bf16 as doubles and their magnitudes (exact conversions); returns the OR and
 * the maximum of the magnitude bits through *or_ and *max_, and the lowest exponent field of a
 * nonzero element (255 if none) through *minf. */
static inline void decode_row(const kvf_bf16 *restrict x, int32_t D, double *restrict xd,
                              double *restrict xa, uint16_t *max_, int *minf) {
    uint16_t mx = 0, mnz = 0x7FFF;
    for (int32_t d = 0; d < D; d++) {
        uint16_t mg = x[d] & 0x7FFFu;
        mx = mg > mx ? mg : mx;
        /* (mg - 1) & 0x7FFF: 0x7FFF for a zero, mg - 1 otherwise, so the minimum + 1 is the
         * smallest nonzero magnitude, whose exponent field is the smallest of the row's. */
        uint16_t z = (uint16_t)((mg - 1u) & 0x7FFFu);
        mnz = z < mnz ? z : mnz;
    }
    for (int32_t d = 0; d < D; d++) {
        double v = (double)kvf_bf16_to_f32(x[d]);
        xd[d] = v;
        xa[d] = fabs(v);
    }
    *max_ = mx;
    if (mnz == 0x7FFF) {
        *minf = 255;
    } else {
        int f = (mnz + 1) >> 7;
        *minf = f ? f : 1; /* subnormals hold bits down to 2^-133, as field 1 */
    }
}

/* F1 for one token, in pass 1: the statistics of head hd that need every dot (the largest
 * |dot| - 2e, exactness, the reference token, the candidates for the largest |logit|),
 * gathered in token order. A candidate is a token with |dot_hat| + 2e at least the largest
 * |dot_hat| - 2e; the running value is below the final one, so the tokens kept here include
 * every final candidate. Exact tokens are evaluated at once: one that the final bound excludes
 * has |dot| below a candidate's true |dot|, so including it leaves the maximum unchanged. */
static inline void head_observe(head *hd, int64_t t, double dot, double derr, double sm) {
    double v = fabs(dot) - 2 * derr;
    hd->lower = v > hd->lower ? v : hd->lower;
    hd->all_exact &= derr == 0;
    hd->all_zero &= dot == 0;
    if (t == 0 || (sm > 0 && dot > hd->dref) || (sm < 0 && dot < hd->dref)) {
        hd->ref = t;
        hd->dref = dot;
        hd->eref = derr;
    }
    if (sm == 0) return;
    double key = fabs(dot) + 2 * derr;
    if (key < hd->lower) return;
    if (derr == 0) {
        double a = abs_logit_up(sm, dot);
        hd->best_exact = a > hd->best_exact ? a : hd->best_exact;
        return;
    }
    if (hd->ncand == CAND_CAP) {
        int keep = 0;
        for (int i = 0; i < hd->ncand; i++)
            if (hd->cand_key[i] >= hd->lower) {
                hd->cand_t[keep] = hd->cand_t[i];
                hd->cand_key[keep++] = hd->cand_key[i];
            }
        hd->ncand = keep;
        if (keep == CAND_CAP) {
            hd->cand_overflow = 1;
            return;
        }
    }
    hd->cand_t[hd->ncand] = t;
    hd->cand_key[hd->ncand++] = key;
}

/* F1 after pass 1, for head hh: row data, the largest |logit|, the rational-lse test. 0: the
 * head goes to MPFR. */
static int head_prepare(kvf__fast_ws *s, const kvf_case *c, int32_t b, int32_t g, int32_t hh,
                        int64_t L, kvf_oracle_result *out) {
    const int32_t D = c->head_dim, G = c->num_qo_heads / c->num_kv_heads;
    const int64_t row = (int64_t)b * c->num_qo_heads + (int64_t)g * G + hh;
    kvf_oracle_row *info = out->rows + row;
    head *hd = &s->hs[hh];
    const double sm = s->sm, asm_ = fabs((double)c->sm_scale);

    /* Row data, computed as the MPFR path does (oracle.c, row_compute); v_abs_max and the
     * accumulator flag come with the values (kvf__fast_group). A scaled group's sums are the
     * unscaled ones times the key scale (rounding is monotone, so the maximum is the same). */
    double abs_dot_max = s->scaled ? s->abs_dot_max[hh] * s->ksc : s->abs_dot_max[hh];
    info->dot_abs_max = asm_ * abs_dot_max;
    double scale_up = asm_ > 1 ? asm_ : 1.0;
    if (abs_dot_max * scale_up * 1.4426950408889634 >= ldexp(1.0, 127))
        info->overflow |= KVF_ORACLE_OVERFLOW_LOGITS;
    /* The pre-scaled q test of the MPFR path (oracle.c, row_compute; strict's model K2): a q
     * element near the bf16 maximum times the folded scale overflows fp32 on its own. */
    double q_abs_max = 0;
    for (int32_t d = 0; d < D; d++) {
        double qa = fabs((double)kvf_bf16_to_f32(c->q[row * D + d]));
        if (qa > q_abs_max) q_abs_max = qa;
    }
    /* The folded constant alone (|sm_scale| log2 e) overflows the same way: max(1, |q|). */
    if ((q_abs_max > 1 ? q_abs_max : 1.0) * scale_up * 1.4426950408889634 >=
        ldexp(1.0 - 0x1p-22, 128))
        info->overflow |= KVF_ORACLE_OVERFLOW_LOGITS;
    /* The scaled cases' own conditions (oracle.c, row_compute): the folded key scale, the
     * unscaled dot, the dequantized key. Products of a bf16 and an f32 are exact in double. */
    if (s->scaled) {
        const double kscale_max = s->ksc > 1 ? s->ksc : 1.0;
        const double kdeq = (double)kvf_bf16_to_f32(s->kmag_max) * s->ksc;
        if (kscale_max * scale_up * 1.4426950408889634 >= ldexp(1.0 - 0x1p-22, 128) ||
            s->abs_dot_max[hh] * scale_up * 1.4426950408889634 >= ldexp(1.0, 127) ||
            kdeq >= ldexp(1.0 - 0x1p-25, 128))
            info->overflow |= KVF_ORACLE_OVERFLOW_LOGITS;
    }

    /* logit_abs_max = RU(max_t |s_t|) exactly (F1): the candidates whose dot is exact were
     * evaluated with an FMA in pass 1 (head_observe), the inexact ones are summed in MPFR. */
    if (sm != 0) {
        if (hd->cand_overflow) return 0;
        double best = hd->best_exact;
        int inexact = 0;
        for (int i = 0; i < hd->ncand; i++) {
            if (hd->cand_key[i] < hd->lower) continue;
            if (++inexact > MAX_CANDIDATES) return 0;
            int64_t t = hd->cand_t[i];
            double a = abs_logit_up_exact(s, s->qd + (size_t)hh * D,
                                          c->k_cache + kvf_case_kv_offset(c, b, t, g, 0), D, sm);
            best = a > best ? a : best;
        }
        info->logit_abs_max = best;
    }
    /* Every logit exactly 0 (known only when sm = 0 or every dot is exactly 0). With L a power
     * of two lse = log2 L exactly and the MPFR path says so; a row that might be such a row
     * but is not known to be goes there. */
    int zero_logits = sm == 0 || (hd->all_exact && hd->all_zero);
    int pow2 = (L & (L - 1)) == 0;
    if (pow2 && !zero_logits && !(hd->lower > 0)) return 0;
    hd->exact_dots = hd->all_exact || sm == 0;
    hd->rsum = 0;
    hd->epsmax = 0;
    hd->n_neg = 0;
    return 1;
}

/* F2-F4 for one token of head hd, in pass 2: its weight (0: negligible), with the sums of F5
 * in token order. x_hat = RN(sm RN(dot_t - dot_ref)) <= 0 by the choice of ref, and
 * |x_hat - x| <= u |x_hat| + |sm| (u |Delta_hat| + e_t + e_ref) = eps_t. Returns -1 when the
 * logit error is too large for the bounds (the head goes to MPFR). */
static inline double head_weight(head *hd, int64_t t, double dot, double derr, double sm,
                                 double asm_) {
    if (t == hd->ref) return 1.0; /* x = 0 exactly */
    double delta = dot - hd->dref;
    double x = sm * delta;
    double eps = UP(KVF__U * fabs(x) + asm_ * (KVF__U * fabs(delta) + derr + hd->eref));
    if (x + eps < NEGL_X) {
        hd->n_neg++;
        return 0;
    }
    if (eps > EPS_MAX) return -1;
    hd->epsmax = eps > hd->epsmax ? eps : hd->epsmax;
    double w = kvf__exp(x); /* x in [-700 - 2^-20, 0] */
    hd->rsum += w;
    return w;
}

/* F4-F6 for head hh after pass 2: the sums' bounds and lse. 0: the head goes to MPFR. */
static int head_finish(kvf__fast_ws *s, const kvf_case *c, int32_t b, int32_t g, int32_t hh,
                       int64_t L, kvf_oracle_result *out) {
    const int32_t G = c->num_qo_heads / c->num_kv_heads;
    const int64_t row = (int64_t)b * c->num_qo_heads + (int64_t)g * G + hh;
    head *hd = &s->hs[hh];
    const double sm = s->sm, asm_ = fabs(sm);
    const double rsum = hd->rsum, dref = hd->dref, eref = hd->eref;
    /* |w_hat - w| <= rho w with rho = e^eps (1 + KVF__EXP_ERR) - 1, below
     * (eps + KVF__EXP_ERR)(1 + 2^-18) for eps <= 2^-20; kappa = rho / (1 - rho) bounds it
     * relative to w_hat. g = (L + 1) u >= gamma_L, the summation factor of L terms. */
    const double rho = UP((hd->epsmax + KVF__EXP_ERR) * (1 + 0x1p-18));
    hd->kappa = UP(rho * (1 + 0x1p-19));
    const double gsum = UP((double)(L + 1) * KVF__U);
    hd->negl = (double)hd->n_neg * ETA;

    /* F5: Z_hat = RN(1 + R_hat), R_hat = RN-sum of the other weights. */
    const double r_up = UP(rsum * (1 + 2 * gsum));
    const double dr = UP(gsum * r_up + hd->kappa * r_up + hd->negl) + FLOOR;
    hd->zhat = 1.0 + rsum;
    hd->dz = UP(KVF__U * hd->zhat + dr);
    if (!(hd->dz <= 0.25 * hd->zhat)) return 0; /* so Z, Z_hat >= 3/4 Z_hat > 0 */

    /* F6: lse. */
    float *lse_rounded = out->lse_rounded + row;
    double *lse_exact = out->lse_exact + row;
    int zero_logits = sm == 0 || (hd->all_exact && hd->all_zero);
    (void)c;
    if (zero_logits && (L & (L - 1)) == 0) {
        int k = 0;
        while (((int64_t)1 << k) < L)
            k++;
        *lse_rounded = (float)k;
        *lse_exact = (double)k;
        return 1;
    }
    double ell, eell;
    if (rsum <= 0.5) {
        ell = kvf__log1p_small(rsum);
        eell = UP(KVF__SERIES_ERR * ell + dr) + FLOOR;
    } else {
        /* ln has derivative 1/xi between Z and Z_hat, both at least max(1, Z_hat - dZ). */
        double le, zl = hd->zhat - hd->dz;
        ell = kvf__log_ge1(hd->zhat, &le);
        eell = UP(le + hd->dz / (zl > 1 ? zl : 1.0));
    }
    double shi = sm * dref, slo = fma(sm, dref, -shi); /* exact: shi + slo = sm dot_ref */
    double es = UP(asm_ * eref);
    double t1 = slo + ell;
    double y = shi + t1;
    double lam = y * kvf__fm.log2e;
    double elam =
        UP((es + eell + KVF__U * fabs(t1) + 2 * KVF__U * fabs(y)) * 1.4427 + KVF__U * fabs(lam)) +
        FLOOR;
    double lo, hi;
    interval(lam, elam, &lo, &hi);
    float fl = kvf__f32_rne(lo), fh = kvf__f32_rne(hi);
    if (kvf_f32_bits(fl) != kvf_f32_bits(fh)) return 0;
    *lse_rounded = fh;
    *lse_exact = lam;
    return 1;
}

static int cmp_tok(const void *a, const void *b) {
    double x = ((const tok *)a)->dot, y = ((const tok *)b)->dot;
    return x < y ? -1 : x > y;
}

/* F8: the side of o_d against a rounding boundary beta inside its interval: o_d - beta =
 * T / Z with T = sum_j w_j S_j over the groups j of equal logit (w_j their common weight),
 * S_j = sum_{t in j} (v_td - beta), computed exactly. Every S_j = 0: o_d = beta exactly
 * (*side = 0); all nonzero S_j of one sign: that sign; otherwise the sign of an approximation
 * T_hat when |T_hat| exceeds its error bound *t_err. Returns 0 when none of these is certain
 * (logits not known exactly, T_hat within its bound): the row goes to MPFR. *t_hat and *t_err
 * are set whenever 1 is returned. */
static int boundary_side(kvf__fast_ws *s, const kvf_case *c, int32_t hh, int64_t L, int32_t d,
                         double beta, int *side, double *t_hat, double *t_err) {
    /* Groups need every token's dot and weight at hand: a streamed row goes to MPFR, and so
     * does a scaled group (its boundaries are the MPFR path's, section "Scaled caches"). */
    if (!s->stored || !s->hs[hh].exact_dots || s->scaled) return 0;
    const double *dot = s->dot + hh * L;
    if (s->order_head != hh) {
        if (L > s->ocap) {
            if (grow((void **)&s->order, (size_t)L, sizeof(tok)) ||
                grow((void **)&s->gs, (size_t)L, 8) || grow((void **)&s->gt, (size_t)L, 8))
                return 0;
            s->ocap = L;
        }
        /* sm = 0 makes every logit 0: one group, which equal dots give too (all 0 * dot). */
        int one = c->sm_scale == 0;
        for (int64_t t = 0; t < L; t++) {
            s->order[t].dot = one ? 0.0 : dot[t];
            s->order[t].t = t;
        }
        qsort(s->order, (size_t)L, sizeof *s->order, cmp_tok);
        s->order_head = hh;
    }
    /* S_j exactly. beta and every v are multiples of 2^m; a group's terms and n_j beta (exact:
     * at most 9 significant bits times n_j < 2^28) summed in order stay below
     * q = sum |v| + n_j |beta|, so the double sum is exact when q < 2^(m + 53). Otherwise
     * the sum is taken in 320-bit MPFR, exact as in the MPFR path (multiples of 2^-134 below
     * 2^157), and S_j is kept as its nearest double (relative error u, counted below). S0 =
     * sum_j S_j, exact in the same 320 bits, is accumulated alongside. */
    int mb = kvf__lsb_exp(beta == 0 ? 1.0 : beta);
    int pos = 0, neg = 0;
    const double *w = s->w + hh * L;
    double tsum = 0, tabs = 0, tneg = 0;
    int64_t ngroups = 0;
    mpfr_set_ui(s->gy, 0, MPFR_RNDN);
    for (int64_t i = 0; i < L;) {
        int64_t j = i;
        double sum = 0, q = 0;
        int m = beta == 0 ? LSB_NONE : mb;
        for (; j < L && s->order[j].dot == s->order[i].dot; j++) {
            kvf_bf16 vb = c->v_cache[s->kvoff[s->order[j].t] + d];
            double v = (double)kvf_bf16_to_f32(vb);
            sum += v;
            q += fabs(v);
            int e = bf16_lsb(vb);
            m = e < m ? e : m;
        }
        double nb = (double)(j - i) * beta;
        q += fabs(nb);
        sum -= nb;
        if (m == LSB_NONE || q * (1 + 0x1p-30) < kvf__fm_pow2i(m + 53)) {
            mpfr_add_d(s->gy, s->gy, sum, MPFR_RNDN);
        } else {
            mpfr_set_ui(s->gx, 0, MPFR_RNDN);
            for (int64_t k = i; k < j; k++)
                mpfr_add_d(s->gx, s->gx,
                           (double)kvf_bf16_to_f32(c->v_cache[s->kvoff[s->order[k].t] + d]),
                           MPFR_RNDN);
            mpfr_sub_d(s->gx, s->gx, nb, MPFR_RNDN);
            mpfr_add(s->gy, s->gy, s->gx, MPFR_RNDN);
            sum = mpfr_get_d(s->gx, MPFR_RNDN); /* 0 iff S_j = 0: |S_j| >= 2^-134 otherwise */
        }
        pos |= sum > 0;
        neg |= sum < 0;
        s->gs[ngroups] = sum;
        s->gt[ngroups] = s->order[i].t;
        /* Tokens of one group have the same dot, hence the same x_hat and w_hat (0: a
         * negligible group, true weight below ETA). */
        double wj = w[s->order[i].t];
        tsum += wj * sum;
        tabs += wj * fabs(sum);
        if (wj == 0) tneg += fabs(sum);
        ngroups++;
        i = j;
    }
    if (!(pos && neg)) {
        *side = pos ? 1 : neg ? -1 : 0;
        if (!pos && !neg) { /* o = beta exactly */
            *t_hat = 0;
            *t_err = 0;
            return 1;
        }
    }
    /* |T_hat - T| <= gamma_n sum w_hat |S_hat| (products and sums, n = groups + 1) +
     * u sum w_hat |S_hat| (S_j rounded to double) + kappa sum w_hat |S| (the weights) +
     * ETA sum_negligible |S| + n 2^-1074 (underflow); gt = (n + 3) u covers the first two. */
    const double gt = (double)(ngroups + 3) * KVF__U;
    double bound = UP((gt + s->hs[hh].kappa) * tabs * (1 + 0x1p-30) + ETA * tneg * 1.01 +
                      (double)ngroups * 0x1p-1074) +
                   FLOOR;
    *t_hat = tsum;
    *t_err = bound;
    if (!(pos && neg)) return 1;
    if (fabs(tsum) > bound) {
        *side = tsum > 0 ? 1 : -1;
        return 1;
    }
    /* T_hat within its bound: the weights may differ by less than their error (logits within
     * about 2^-45 of each other). T = S0 + sum_j (w_j - 1) S_j, and expm1 of the shifted
     * logits keeps its relative accuracy however small they are. */
    const double s0 = mpfr_get_d(s->gy, MPFR_RNDN); /* relative error u */
    const double sm = (double)c->sm_scale, asm_ = fabs(sm);
    const double dref = s->dot[hh * L + s->hs[hh].ref], kappa = s->hs[hh].kappa;
    double t2 = 0, a2 = 0, e2 = 0;
    for (int64_t j = 0; j < ngroups; j++) {
        double sj = s->gs[j];
        if (sj == 0) continue;
        int64_t t = s->gt[j];
        double em1, err;
        if (w[t] == 0) { /* negligible: w - 1 in (-1, -1 + ETA) */
            em1 = -1;
            err = ETA;
        } else {
            double delta = s->dot[hh * L + t] - dref;
            double x = sm * delta;
            if (fabs(x) < 0x1p-10) {
                /* e^x - 1 = x sum_i x^i / (i+1)!, to x^6: truncation below |x|^7 / 5040,
                 * Horner and the final product within 16u relative; and the error eps of
                 * x_hat moves e^x - 1 by at most 1.01 eps (the derivative is e^xi <= 1.01). */
                const double *ec = kvf__fm.ec;
                double p = ec[6];
                p = p * x + ec[5];
                p = p * x + ec[4];
                p = p * x + ec[3];
                p = p * x + ec[2];
                p = p * x + 1.0;
                em1 = x * p;
                double eps = UP(KVF__U * fabs(x) + asm_ * KVF__U * fabs(delta));
                err = 1.01 * eps + 16.2 * KVF__U * fabs(em1);
            } else {
                em1 = w[t] - 1.0; /* |w_hat - w| <= rho w <= kappa, then one rounding */
                err = kappa + KVF__U * fabs(em1);
            }
        }
        t2 += em1 * sj;
        a2 += fabs(em1 * sj);
        /* S_hat_j is within u |S_hat_j| of S_j; |w - 1| <= |em1| + err. */
        e2 += err * fabs(sj) * (1 + 2 * KVF__U) + KVF__U * fabs(em1 * sj);
    }
    /* t = s0 + t2: the rounded S0 (u |s0|), the final addition (u |t|), the sum of n products
     * (gamma_n a2). */
    double t3 = s0 + t2;
    double bound3 =
        UP(gt * a2 * (1 + 0x1p-30) + e2 + KVF__U * fabs(s0) + KVF__U * fabs(t3)) + FLOOR;
    if (!(fabs(t3) > bound3)) return 0;
    *side = t3 > 0 ? 1 : -1;
    *t_hat = t3;
    *t_err = bound3;
    return 1;
}

static inline int64_t bf16_index(kvf_bf16 x) {
    return (x & 0x8000u) ? -(int64_t)(x & 0x7FFFu) - 1 : (int64_t)x;
}

/* F5, F7: the columns of head hh. 0: the head goes to MPFR. */
static int head_columns(kvf__fast_ws *s, const kvf_case *c, int64_t row, int32_t hh, int64_t L,
                        double vmax, kvf_oracle_result *out) {
    const int32_t D = c->head_dim;
    const head *hd = &s->hs[hh];
    const double *na = s->nacc + (size_t)hh * D, *aa = s->aacc + (size_t)hh * D;
    kvf_bf16 *o_rounded = out->o_rounded + row * D;
    double *o_exact = out->o_exact + row * D, *o_cond = out->o_cond + row * D;
    const double gsum = UP((double)(L + 1) * KVF__U);
    const double ltiny = (double)L * 0x1p-1074; /* L half-ulps of the subnormals, twice */
    const double zhat = hd->zhat, dz = hd->dz;
    const double zlow = (zhat - dz) * (1 - 0x1p-40);
    /* Per column (F5): A_up = (A_hat + ltiny)(1 + 2g), dN = (g + kappa) A_up + negl V +
     * 2 ltiny, |o| <= (|N_hat| + dN) / zlow, E = (dN + |o|_up dZ) / Z_hat + 1.01 u |o_hat|.
     * These are evaluated with the row's constants folded in and reciprocals of Z_hat and
     * zlow (each RN, relative error u) instead of divisions: about twelve roundings of
     * nonnegative quantities, all covered by the final factor 1 + 2^-38. */
    const double ka = (gsum + hd->kappa) * (1 + 2 * gsum);
    const double dn0 = ka * ltiny + hd->negl * vmax + 2 * ltiny + FLOOR;
    const double izh = 1.0 / zhat, izl = 1.0 / zlow;
    for (int32_t d = 0; d < D; d++) {
        if (!s->colmag[d]) { /* every v is +-0: o is exactly +0 (section 7) */
            o_rounded[d] = 0x0000u;
            o_exact[d] = 0;
            o_cond[d] = 0;
            continue;
        }
        double nh = na[d], ah = aa[d];
        double dn = ah * ka + dn0;
        double oabs = (fabs(nh) + dn) * izl;
        double o = nh / zhat;
        double ao = fabs(o);
        double e = ((dn + oabs * dz) * izh + 1.01 * KVF__U * ao) * (1 + 0x1p-38) + FLOOR;
        if (s->scaled) {
            /* The value scale, one more rounding: o = v_scale N / Z, the bound scaled with it
             * (its own rounding inside 2^-50), plus u |o| and an underflow of 2^-1074. */
            o *= s->vsc;
            ao = fabs(o);
            e = e * s->vsc * (1 + 0x1p-50) + KVF__U * ao + 0x1p-1074;
            ah *= s->vsc;
        }
        /* [lo, hi] strictly contains [o - e, o + e] whatever the rounding of the two ends:
         * the widening 4u (e + |o|) exceeds the rounding error u |o +- e'| (F7). */
        double ew = e * (1 + 4 * KVF__U) + 4 * KVF__U * ao + 0x1p-1070;
        double lo = o - ew, hi = o + ew;
        kvf_bf16 bl = kvf__bf16_rne(lo), bh = kvf__bf16_rne(hi);
        o_cond[d] = ah * izh;
        o_exact[d] = o;
        if (bl == bh) {
            o_rounded[d] = bh;
            continue;
        }
        int side;
        double t_hat, t_err;
        if (bf16_index(bh) - bf16_index(bl) == 1 && (bh & 0x7FFFu) < 0x7F80u) {
            /* One boundary between two adjacent results (not the overflow threshold): its side
             * decides (F8). beta is their midpoint, exact in double, or 0 between -0 and +0. */
            double rl = (double)kvf_bf16_to_f32(bl), rh = (double)kvf_bf16_to_f32(bh);
            double beta = (rl + rh) / 2;
            if (!boundary_side(s, c, hh, L, d, beta, &side, &t_hat, &t_err)) return 0;
            if (side > 0) {
                o_rounded[d] = bh;
            } else if (side < 0) {
                o_rounded[d] = bl;
            } else { /* an exact tie: to even; an exact zero is +0 (as the MPFR path) */
                o_rounded[d] = beta == 0 ? 0x0000u : (bl & 1u) ? bh : bl;
                o_exact[d] = beta;
            }
            continue;
        }
        /* An interval around 0 spans many bf16 values, however small E is: the weighted values
         * cancel. o = T / Z with T for beta = 0 (F8), whose error is relative to the
         * cancelled sum, not to C: either o is exactly 0 (+0, as the MPFR path), or the
         * interval from T_hat settles the rounding. */
        if (!(lo <= 0 && hi >= 0)) return 0;
        if (!boundary_side(s, c, hh, L, d, 0.0, &side, &t_hat, &t_err)) return 0;
        if (side == 0) {
            o_rounded[d] = 0x0000u;
            o_exact[d] = 0;
            continue;
        }
        double o2 = t_hat / zhat;
        double oab = UP((fabs(t_hat) + t_err) / zlow);
        double e2 = UP((t_err + oab * dz) / zhat + 1.01 * KVF__U * fabs(o2)) + FLOOR;
        interval(o2, e2, &lo, &hi);
        bl = kvf__bf16_rne(lo);
        bh = kvf__bf16_rne(hi);
        if (bl != bh) return 0;
        o_rounded[d] = bh;
        o_exact[d] = o2;
    }
    return 1;
}

/* F1 for one token: the dots of the G heads with the key row at kr, and their error bounds,
 * into dot[hh * stride] and derr[hh * stride]; the magnitude sums also raise abs_dot_max when
 * `observe` is set. Products of two bf16 are exact doubles (16-bit significands, exponents in
 * [-266, 256]); the four-lane sum of D of them is off by at most gamma_D sum |p| (Higham 3.1:
 * no product passes through more than D additions), and sum |p| is below abs_sum (1 + 2^-30),
 * abs_sum being the same tree over |p|. gdot = (D + 1) u >= gamma_D (1 + 2^-30) for
 * D < 2^16. The sum is exact when every partial sum fits in 53 bits: all products are
 * multiples of 2^(qlsb + klsb), and no partial sum exceeds sum |p|. abs_sum is computed
 * exactly as the MPFR path does (same lanes, same order), so dot_abs_max and the overflow flag
 * come out bit-identical. Pass 2 of a streamed row calls this again for the same token, and
 * gets the same bits (the same IEEE operations in the same order). Returns 1 when the key row
 * holds a NaN or an infinity. */
static inline __attribute__((always_inline)) int token_dots(kvf__fast_ws *s, const kvf_bf16 *kr,
                                                            int32_t D, int32_t G, double gdot,
                                                            int observe, double *dot_out,
                                                            double *derr_out, int64_t stride) {
    double *restrict kd = s->xd, *restrict ka = s->xa;
    uint16_t kmag;
    int kfield;
    decode_row(kr, D, kd, ka, &kmag, &kfield);
    if (kmag >= 0x7F80u) return 1;
    if (observe && kmag > s->kmag_max) s->kmag_max = kmag;
    for (int32_t hh = 0; hh < G; hh++) {
        const double *restrict qd = s->qd + (size_t)hh * D, *restrict qa = s->qa + (size_t)hh * D;
        /* Four lanes, element d in lane d mod 4, as the MPFR path sums its abs_sum: one
         * 4-wide vector per sum, each lane an ordinary IEEE double. */
        v4d l = {0, 0, 0, 0}, a = {0, 0, 0, 0};
        int32_t d = 0;
        for (; d + 4 <= D; d += 4) {
            v4d q4, k4, qa4, ka4;
            memcpy(&q4, qd + d, sizeof q4);
            memcpy(&k4, kd + d, sizeof k4);
            memcpy(&qa4, qa + d, sizeof qa4);
            memcpy(&ka4, ka + d, sizeof ka4);
            l += q4 * k4;
            a += qa4 * ka4;
        }
        /* The last D mod 4 elements, d a multiple of 4 here, go to lanes 0, 1, 2 in order.
         * Named lanes, not l[d & 3]: a vector indexed by a variable goes through memory on
         * every element (a store-forwarding stall each), a fifth of this function's time on
         * the head dimensions fuzzing draws that are not multiples of 4 (1, 3, ...). Same
         * operations, same bits. */
        const int32_t rest = D - d;
        if (rest > 0) {
            l[0] += qd[d] * kd[d];
            a[0] += qa[d] * ka[d];
        }
        if (rest > 1) {
            l[1] += qd[d + 1] * kd[d + 1];
            a[1] += qa[d + 1] * ka[d + 1];
        }
        if (rest > 2) {
            l[2] += qd[d + 2] * kd[d + 2];
            a[2] += qa[d + 2] * ka[d + 2];
        }
        double dot = (l[0] + l[1]) + (l[2] + l[3]), asum = (a[0] + a[1]) + (a[2] + a[3]);
        if (observe && asum > s->abs_dot_max[hh]) s->abs_dot_max[hh] = asum;
        int qlsb = s->qlsb[hh];
        int exact = qlsb == LSB_NONE || kfield == 255 ||
                    asum * (1 + 0x1p-30) < kvf__fm_pow2i(qlsb + (kfield - 134) + 53);
        dot_out[hh * stride] = dot;
        derr_out[hh * stride] = exact ? 0.0 : asum * gdot;
    }
    return 0;
}

#ifdef KVF__FAST_COPIES
static inline __attribute__((always_inline)) const unsigned char *
fast_group_body(kvf__fast_ws *s, const kvf_case *c, int32_t b, int32_t g, kvf_oracle_result *out) {
#else
KVF__HOT const unsigned char *kvf__fast_group(kvf__fast_ws *s, const kvf_case *c, int32_t b,
                                              int32_t g, kvf_oracle_result *out) {
#endif
    const int32_t D = c->head_dim, G = c->num_qo_heads / c->num_kv_heads;
    const int64_t L = kvf_case_seq_len(c, b);
    const int64_t row0 = (int64_t)b * c->num_qo_heads + (int64_t)g * G;
    if (reserve(s, L, D, G)) return NULL;
    s->order_head = -1;
    for (int32_t hh = 0; hh < G; hh++) {
        kvf_oracle_row *info = out->rows + row0 + hh;
        memset(info, 0, sizeof *info);
        info->length = L;
        s->done[hh] = 0;
        s->hs[hh].live = 1;
    }
    if (L == 0) { /* docs/oracle.md section 7: as the MPFR path */
        for (int32_t hh = 0; hh < G; hh++) {
            int64_t row = row0 + hh;
            for (int32_t d = 0; d < D; d++) {
                out->o_rounded[row * D + d] = 0x0000u;
                out->o_exact[row * D + d] = 0;
                out->o_cond[row * D + d] = 0;
            }
            out->lse_rounded[row] = -INFINITY;
            out->lse_exact[row] = -INFINITY;
            s->done[hh] = 1;
        }
        return s->done;
    }
    if (L > FAST_MAX_TOKENS) return s->done;

    /* q as doubles; the lowest bit any nonzero q can hold (F1). */
    for (int32_t hh = 0; hh < G; hh++) {
        const kvf_bf16 *qr = c->q + (size_t)(row0 + hh) * (size_t)D;
        double *qd = s->qd + (size_t)hh * D, *qa = s->qa + (size_t)hh * D;
        int qlsb = LSB_NONE;
        for (int32_t d = 0; d < D; d++) {
            if ((qr[d] & 0x7F80u) == 0x7F80u) s->hs[hh].live = 0; /* NaN or inf: MPFR's */
            qd[d] = (double)kvf_bf16_to_f32(qr[d]);
            qa[d] = fabs(qd[d]);
            int e = bf16_lsb(qr[d]);
            qlsb = e < qlsb ? e : qlsb;
        }
        s->qlsb[hh] = qlsb;
        s->abs_dot_max[hh] = 0;
    }

    for (int32_t hh = 0; hh < G; hh++) {
        head *hd = &s->hs[hh];
        hd->lower = 0;
        hd->best_exact = 0;
        hd->all_exact = 1;
        hd->all_zero = 1;
        hd->cand_overflow = 0;
        hd->ncand = 0;
        hd->ref = 0;
    }
    s->scaled = c->quant.granularity != KVF_SCALE_NONE;
    s->ksc = s->scaled ? (double)kvf_case_k_scale(c, b, 0, g) : 1.0;
    s->vsc = s->scaled ? (double)kvf_case_v_scale(c, b, 0, g) : 1.0;
    s->sm = (double)c->sm_scale * s->ksc; /* exact: 24 + 24 bits, exponent >= -298 */
    s->kmag_max = 0;
    const double sm = s->sm, asm_ = fabs(sm);

    /* Pass 1 (F1): dots, and what needs all of them (head_observe). */
    const double gdot = UP((double)(D + 1) * KVF__U);
    for (int64_t t = 0; t < L; t++) {
        /* A stop request: no row certified, and the caller sees the request (oracle.c). */
        if (!(t & 4095) && kvf__oracle_stop) return s->done;
        int64_t off = kvf_case_kv_offset(c, b, t, g, 0);
        double *dot = s->tdot, *derr = s->tderr;
        int64_t stride = 1;
        if (s->stored) {
            s->kvoff[t] = off;
            dot = s->dot + t;
            derr = s->derr + t;
            stride = L;
        }
        if (token_dots(s, c->k_cache + off, D, G, gdot, 1, dot, derr, stride))
            return s->done; /* NaN or inf in k: every head to MPFR */
        for (int32_t hh = 0; hh < G; hh++)
            if (s->hs[hh].live)
                head_observe(&s->hs[hh], t, dot[hh * stride], derr[hh * stride], sm);
    }
    int nlive = 0;
    for (int32_t hh = 0; hh < G; hh++) {
        if (s->hs[hh].live) s->hs[hh].live = head_prepare(s, c, b, g, hh, L, out);
        nlive += s->hs[hh].live;
    }
    if (!nlive) return s->done;

    /* Pass 2 (F2-F5): weights (from the stored dots, or the same dots recomputed), and v,
     * decoded once per token for every head: which columns are all +-0, the largest |v|, no
     * NaN or inf anywhere referenced, and N_hat_d and A_hat_d summed over tokens in order. */
    for (int32_t i = 0; i < D * G; i++) {
        s->nacc[i] = 0;
        s->aacc[i] = 0;
    }
    for (int32_t d = 0; d < D; d++)
        s->colmag[d] = 0;
    uint16_t magmax = 0;
    /* Not restrict: on a streamed row token_dots writes the same scratch for each token. */
    double *vd = s->xd, *va = s->xa;
    for (int64_t t = 0; t < L; t++) {
        if (!(t & 4095) && kvf__oracle_stop) {
            for (int32_t hh = 0; hh < G; hh++)
                s->done[hh] = 0;
            return s->done;
        }
        int64_t off;
        const double *dot, *derr;
        int64_t stride;
        if (s->stored) {
            off = s->kvoff[t];
            dot = s->dot + t;
            derr = s->derr + t;
            stride = L;
        } else {
            off = kvf_case_kv_offset(c, b, t, g, 0);
            (void)token_dots(s, c->k_cache + off, D, G, gdot, 0, s->tdot, s->tderr, 1);
            dot = s->tdot;
            derr = s->tderr;
            stride = 1;
        }
        for (int32_t hh = 0; hh < G; hh++) {
            double w = 0;
            if (s->hs[hh].live) {
                w = head_weight(&s->hs[hh], t, dot[hh * stride], derr[hh * stride], sm, asm_);
                if (w < 0) {
                    s->hs[hh].live = 0;
                    w = 0;
                }
            }
            s->tw[hh] = w;
            if (s->stored) s->w[hh * L + t] = w;
        }
        const kvf_bf16 *vr = c->v_cache + off;
        for (int32_t d = 0; d < D; d++)
            s->colmag[d] |= vr[d] & 0x7FFFu;
        uint16_t vmag;
        int vfield;
        decode_row(vr, D, vd, va, &vmag, &vfield);
        magmax = vmag > magmax ? vmag : magmax;
        for (int32_t hh = 0; hh < G; hh++) {
            double w = s->tw[hh];
            if (!s->hs[hh].live || w == 0) continue;
            double *restrict na = s->nacc + (size_t)hh * D, *restrict aa = s->aacc + (size_t)hh * D;
            for (int32_t d = 0; d < D; d++) {
                na[d] += w * vd[d];
                aa[d] += w * va[d];
            }
        }
    }
    if (magmax >= 0x7F80u) return s->done;
    const double vmax = (double)kvf_bf16_to_f32(magmax);
    const double vmax_scaled = vmax * s->vsc; /* exact */
    for (int32_t hh = 0; hh < G; hh++) {
        int64_t row = row0 + hh;
        kvf_oracle_row *info = out->rows + row;
        info->v_abs_max = vmax_scaled;
        if ((double)L * vmax_scaled >= ldexp(1.0, 127)) info->overflow |= KVF_ORACLE_OVERFLOW_ACCUM;
        if (s->hs[hh].live) s->hs[hh].live = head_finish(s, c, b, g, hh, L, out);
        if (s->hs[hh].live) s->done[hh] = (unsigned char)head_columns(s, c, row, hh, L, vmax, out);
    }
    return s->done;
}

#ifdef KVF__FAST_COPIES
__attribute__((target("avx2"))) static const unsigned char *
fast_group_avx2(kvf__fast_ws *s, const kvf_case *c, int32_t b, int32_t g, kvf_oracle_result *out) {
    return fast_group_body(s, c, b, g, out);
}

static const unsigned char *fast_group_plain(kvf__fast_ws *s, const kvf_case *c, int32_t b,
                                             int32_t g, kvf_oracle_result *out) {
    return fast_group_body(s, c, b, g, out);
}

const unsigned char *kvf__fast_group(kvf__fast_ws *s, const kvf_case *c, int32_t b, int32_t g,
                                     kvf_oracle_result *out) {
    return __builtin_cpu_supports("avx2") ? fast_group_avx2(s, c, b, g, out)
                                          : fast_group_plain(s, c, b, g, out);
}
#endif
