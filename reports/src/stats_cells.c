/* The statistics' counting primitives (stats_internal.h): the quarter-octave buckets, the
 * histograms and count maps they fill, and the class cells. Apart from stats.c so that what
 * fills them (stats_pending.c) and what owns them (stats.c) both depend on this file and not
 * on each other. */
#include <math.h>
#include <string.h>

#include "stats_internal.h"

/* ------------------------------------------------------------------------------------------ */
/* Buckets                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* The doubles nearest 2^(1/4), 2^(1/2) and 2^(3/4), written in hex so no libm is involved. */
static const double QUARTER_EDGE[4] = {1.0, 0x1.306fe0a31b715p+0, 0x1.6a09e667f3bcdp+0,
                                       0x1.ae89f995ad3adp+0};

int32_t kvf_stats_bucket(double v) {
    uint64_t bits;
    const int ex = kvf__normal_exponent(v, &bits);
    if (ex) { /* v = m 2^(ex - 1023), m in [1, 2) read straight from the bits */
        const uint64_t mbits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
        double m;
        memcpy(&m, &mbits, sizeof m);
        int j = (m >= QUARTER_EDGE[1]) + (m >= QUARTER_EDGE[2]) + (m >= QUARTER_EDGE[3]);
        return 4 * (ex - 1023) + j;
    }
    int e;
    double m = 2 * frexp(v, &e); /* v = m 2^(e-1), m in [1, 2): exact, subnormals included */
    int j = (m >= QUARTER_EDGE[1]) + (m >= QUARTER_EDGE[2]) + (m >= QUARTER_EDGE[3]);
    return 4 * (e - 1) + j;
}

double kvf_stats_bucket_lo(int32_t i) {
    int32_t k = i >= 0 ? i / 4 : -((-i + 3) / 4); /* floor(i / 4) */
    return ldexp(QUARTER_EDGE[i - 4 * k], k);
}

int kvf__counts_merge(kvf__map *dst, const kvf__map *src) {
    for (size_t i = 0; i < src->cap; i++) {
        if (!src->used[i]) continue;
        int64_t *c = kvf__map_get(dst, src->keys[i], 1);
        if (!c) return -1;
        if (kvf__count_add(c, *(const int64_t *)(src->vals + i * src->vsize))) return KVF__OVERFLOW;
    }
    return 0;
}

int kvf__hist_merge(kvf__hist *dst, const kvf__hist *src) {
    if (kvf__count_add(&dst->total, src->total) || kvf__count_add(&dst->zero, src->zero) ||
        kvf__count_add(&dst->inf, src->inf) || kvf__count_add(&dst->nan, src->nan))
        return KVF__OVERFLOW;
    return kvf__counts_merge(&dst->buckets, &src->buckets);
}

/* ------------------------------------------------------------------------------------------ */
/* Cells                                                                                       */
/* ------------------------------------------------------------------------------------------ */

static void cell_init(kvf__cell *c) {
    memset(c, 0, sizeof *c);
}

/* bits: round(1024 log2(ulps + 1)), computed once per element by the caller. */
void kvf__cell_add(kvf__cell *c, const kvf_element_error *e, int finite_pair, int mismatch,
                   int64_t bits) {
    c->n++;
    if (e->fails) c->fails++;
    if (mismatch) c->nonfinite++;
    if (e->ulps >= 0) {
        c->bits_n++;
        c->bits_sum += bits;
        if (e->ulps > c->max_ulps) c->max_ulps = e->ulps;
    }
    if (finite_pair && e->abs_error > c->max_abs) c->max_abs = e->abs_error;
    if (e->margin > c->max_margin) c->max_margin = e->margin;
}

int kvf__cell_merge(kvf__cell *dst, const kvf__cell *src) {
    if (kvf__count_add(&dst->n, src->n) || kvf__count_add(&dst->fails, src->fails) ||
        kvf__count_add(&dst->nonfinite, src->nonfinite) ||
        kvf__count_add(&dst->bits_n, src->bits_n) || kvf__count_add(&dst->bits_sum, src->bits_sum))
        return KVF__OVERFLOW;
    if (src->max_ulps > dst->max_ulps) dst->max_ulps = src->max_ulps;
    if (src->max_abs > dst->max_abs) dst->max_abs = src->max_abs;
    if (src->max_margin > dst->max_margin) dst->max_margin = src->max_margin;
    return 0;
}

kvf__cell *kvf__cell_get(kvf__map *m, int64_t key) {
    kvf__cell *c = kvf__map_get(m, key, 1);
    if (c && c->n == 0) cell_init(c); /* a fresh, zeroed value */
    return c;
}
