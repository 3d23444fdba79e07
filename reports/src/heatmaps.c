/* The two-dimensional charts of the page, coloured on one heat scale: the density of abs error
 * against |exact|, and the mean bits of error by q head, head-dim index, sequence length and
 * position within the page. Each chart computes its ranges and colour scale over all series
 * before anything is drawn, so every series is shown on the same axes and colours. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "charts.h"
#include "escape.h"
#include "svg.h"

/* ------------------------------------------------------------------------------------------ */
/* Heat scale                                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* Sequential scale from pale yellow (t = 0) to dark purple (t = 1). */
static void heat(double t, char out[8]) {
    static const double anchor[5][3] = {
        {255, 244, 196}, {253, 190, 90}, {236, 110, 40}, {180, 35, 70}, {70, 10, 90}};
    if (!(t >= 0)) t = 0;
    if (t > 1) t = 1;
    double x = t * 4;
    int i = x >= 4 ? 3 : (int)x;
    double u = x - i;
    int rgb[3];
    for (int c = 0; c < 3; c++)
        rgb[c] = (int)lround(anchor[i][c] + u * (anchor[i + 1][c] - anchor[i][c]));
    snprintf(out, 8, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

/* Colour legend for a heat scale over [0, hi] with a unit, at (x, y), 160 px wide. */
static void heat_legend(kvf__chart *c, double x, double y, double hi, const char *unit, int logc) {
    for (int i = 0; i < 16; i++) {
        char col[8];
        heat(i / 15.0, col);
        fprintf(c->f,
                "<rect class=\"legend\" x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" "
                "fill=\"%s\"/>",
                x + i * 10, y, col);
    }
    char lo_s[32] = "0", hi_s[40];
    if (logc) {
        snprintf(lo_s, sizeof lo_s, "1");
        kvf__fmt_num(hi_s, sizeof hi_s, pow(10, hi));
    } else {
        kvf__fmt_num(hi_s, sizeof hi_s, hi);
    }
    kvf__svg_text(c->f, x, y + 22, "start", "tick", lo_s);
    kvf__svg_text(c->f, x + 160, y + 22, "end", "tick", hi_s);
    kvf__svg_text(c->f, x - 6, y + 9, "end", "tick", unit);
}

/* ------------------------------------------------------------------------------------------ */
/* Abs error against |exact|: 2-D density, one panel per series on shared axes                 */
/* ------------------------------------------------------------------------------------------ */

/* One axis of the density: a window of whole octaves plus separate "0" and "inf" cells. Real
 * runs span hundreds of octaves (subnormal inputs, log-uniform values up to 2^85) while
 * almost every element sits in a few dozen, so the window holds the central 99.8% of the
 * counts and whatever lies outside is folded into its edge cells, labelled "≤" and "≥". */
typedef struct axis2 {
    int has_zero, has_inf;
    int lo, hi;           /* the window; hi < lo: no finite octave at all */
    int clip_lo, clip_hi; /* octaves beyond the window were folded into its edges */
    int k;                /* octaves per cell: wide windows are coarsened to stay readable */
} axis2;

#define OCT_MIN (-1080)
#define OCT_N 2110 /* octaves -1080 .. 1029 cover every positive double */
#define DENS_TAIL 0.001
#define DENS_MIN_WIDTH 12

static void axis2_window(axis2 *a, const int64_t *w) {
    int64_t total = 0;
    int first = -1, last = -1;
    for (int i = 0; i < OCT_N; i++) {
        total += w[i];
        if (w[i] && first < 0) first = i;
        if (w[i]) last = i;
    }
    a->lo = 0;
    a->hi = -1;
    if (total == 0) return;
    int64_t cut = (int64_t)(DENS_TAIL * (double)total), cum = 0;
    int qlo = first, qhi = last;
    for (int i = first; i <= last; i++) {
        cum += w[i];
        if (cum > cut) {
            qlo = i;
            break;
        }
    }
    cum = 0;
    for (int i = last; i >= first; i--) {
        cum += w[i];
        if (cum > cut) {
            qhi = i;
            break;
        }
    }
    while (qhi - qlo + 1 < DENS_MIN_WIDTH && (qlo > first || qhi < last)) {
        if (qlo > first) qlo--;
        if (qhi - qlo + 1 < DENS_MIN_WIDTH && qhi < last) qhi++;
    }
    a->lo = qlo + OCT_MIN;
    a->hi = qhi + OCT_MIN;
    a->clip_lo = first < qlo;
    a->clip_hi = last > qhi;
}

/* At most max_cells cells of whole octaves each (a cell is never thinner than ~3 px). */
static void axis2_group(axis2 *a, int max_cells) {
    int n = a->hi >= a->lo ? a->hi - a->lo + 1 : 0;
    a->k = n > max_cells ? (n + max_cells - 1) / max_cells : 1;
}

static int axis2_groups(const axis2 *a) {
    return a->hi >= a->lo ? (a->hi - a->lo) / a->k + 1 : 0;
}

static int axis2_n(const axis2 *a) {
    return a->has_zero + axis2_groups(a) + a->has_inf;
}

/* Cell index of an octave (clamped into the window) or of a sentinel. */
static int axis2_pos(const axis2 *a, int32_t oct) {
    if (oct == KVF_OCT_ZERO) return 0;
    if (oct == KVF_OCT_INF) return axis2_n(a) - 1;
    int o = oct < a->lo ? a->lo : oct > a->hi ? a->hi : oct;
    return a->has_zero + (o - a->lo) / a->k;
}

/* Axis label (the cell's lower edge) and, with range != 0, what the cell holds. */
static void axis2_label(const axis2 *a, int idx, char *buf, size_t size, int range) {
    if (a->has_zero && idx == 0) {
        snprintf(buf, size, "0");
        return;
    }
    if (a->has_inf && idx == axis2_n(a) - 1) {
        snprintf(buf, size, "\u221e");
        return;
    }
    int g = idx - a->has_zero, first = g == 0, last = g == axis2_groups(a) - 1;
    int lo = a->lo + g * a->k, hi = lo + a->k < a->hi + 1 ? lo + a->k : a->hi + 1;
    char p[24], q[24];
    kvf__pow_label(p, sizeof p, 2, lo);
    kvf__pow_label(q, sizeof q, 2, hi);
    if (!range)
        snprintf(buf, size, "%s%s",
                 first && a->clip_lo  ? "\u2264"
                 : last && a->clip_hi ? "\u2265"
                                      : "",
                 p);
    else if (first && a->clip_lo)
        snprintf(buf, size, "(0, %s)%s", q, last && a->clip_hi ? " and above" : "");
    else if (last && a->clip_hi)
        snprintf(buf, size, "\u2265%s", p);
    else
        snprintf(buf, size, "[%s, %s)", p, q);
}

/* The density's panels share their axes, cell sizes and colour scale. */
typedef struct dens_layout {
    axis2 ax, ay;
    double left, top, ph, pw, gap;
    double cw, chh; /* one cell */
    double lmax;    /* log10 of the largest cell count: the top of the colour scale */
} dens_layout;

/* Per-octave counts of |exact| (wx) and of the abs error (wy) over every series, which choose
 * the shared windows; returns the number of series drawn. */
static size_t dens_scan(const kvf__rmodel *m, dens_layout *d, int64_t *wx, int64_t *wy) {
    size_t ns = 0;
    for (size_t i = 0; i < m->nseries; i++) {
        if (!m->series[i].primary) continue;
        ns++;
        const kvf__map *dm = &m->series[i].primary->out[0].dens;
        kvf__map_iter it10 = {0};
        int64_t key10;
        const void *val10;
        while (kvf__map_next(dm, &it10, &key10, &val10)) {
            int64_t n = *(const int64_t *)val10;
            int32_t ao = KVF_DENS_ABS(key10), xo = KVF_DENS_EXACT(key10);
            if (ao == KVF_OCT_ZERO)
                d->ay.has_zero = 1;
            else if (ao == KVF_OCT_INF)
                d->ay.has_inf = 1;
            else if (ao >= OCT_MIN && ao < OCT_MIN + OCT_N)
                wy[ao - OCT_MIN] += n;
            if (xo == KVF_OCT_ZERO)
                d->ax.has_zero = 1;
            else if (xo == KVF_OCT_INF)
                d->ax.has_inf = 1;
            else if (xo >= OCT_MIN && xo < OCT_MIN + OCT_N)
                wx[xo - OCT_MIN] += n;
        }
    }
    return ns;
}

/* Fold every series into the shared window before anything is drawn, so the colour scale is
 * the maximum over what is actually shown: agg[i] maps row * 65536 + column to a count. -1
 * when memory runs out. */
static int dens_fold(const kvf__rmodel *m, const dens_layout *d, kvf__map *agg, int64_t *maxc) {
    for (size_t i = 0; i < m->nseries; i++) {
        if (!m->series[i].primary) continue;
        const kvf__map *dm = &m->series[i].primary->out[0].dens;
        kvf__map_iter it9 = {0};
        int64_t key9;
        const void *val9;
        while (kvf__map_next(dm, &it9, &key9, &val9)) {
            int64_t key = (int64_t)axis2_pos(&d->ay, KVF_DENS_ABS(key9)) * 65536 +
                          axis2_pos(&d->ax, KVF_DENS_EXACT(key9));
            int64_t *c = kvf__map_get(&agg[i], key, 1);
            if (!c) return -1;
            *c += *(const int64_t *)val9;
            if (*c > *maxc) *maxc = *c;
        }
    }
    return 0;
}

/* Reference: abs = 2^-8 |exact|, half an ulp of bf16 at the top of a binade; cells above it
 * hold errors larger than correct rounding could make. */
static void dens_ref_line(kvf__chart *c, const dens_layout *d, double x0) {
    const axis2 *ax = &d->ax, *ay = &d->ay;
    if (!(ax->hi >= ax->lo && ay->hi >= ay->lo)) return;
    double xa = fmax(ax->lo, ay->lo + 8), xb = fmin(ax->hi + 1, ay->hi + 1 + 8);
    if (!(xa < xb)) return;
    double X1 = x0 + (ax->has_zero + (xa - ax->lo) / ax->k) * d->cw;
    double X2 = x0 + (ax->has_zero + (xb - ax->lo) / ax->k) * d->cw;
    double Y1 = d->top + d->ph - (ay->has_zero + (xa - 8 - ay->lo) / ay->k) * d->chh;
    double Y2 = d->top + d->ph - (ay->has_zero + (xb - 8 - ay->lo) / ay->k) * d->chh;
    fprintf(c->f,
            "<line class=\"ref\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
            "y2=\"%.1f\"><title>abs error = 2\u207b\u2078 |exact| (one bf16 "
            "ulp at the top of a binade)</title></line>\n",
            X1, Y1, X2, Y2);
}

/* One series' panel at x0, from its folded counts; the first panel also labels the y axis. */
static void dens_panel(kvf__chart *c, const dens_layout *d, const kvf__rseries *s,
                       const kvf__map *cells, double x0, int first) {
    const double top = d->top, ph = d->ph, pw = d->pw, cw = d->cw, chh = d->chh;
    int nx = axis2_n(&d->ax), ny = axis2_n(&d->ay);
    fprintf(c->f,
            "<rect class=\"plot\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
            "height=\"%.1f\"/>\n",
            x0, top, pw, ph);
    fprintf(c->f,
            "<rect class=\"legend\" x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" "
            "fill=\"%s\"/>",
            x0, top - 19, s->color);
    kvf__svg_text(c->f, x0 + 14, top - 10, "start", "lg", s->name);
    kvf__map_iter it8 = {0};
    int64_t key8;
    const void *val8;
    while (kvf__map_next(cells, &it8, &key8, &val8)) {
        int64_t n = *(const int64_t *)val8;
        int px_i = (int)(key8 % 65536), py_i = (int)(key8 / 65536);
        char col[8], xl[64], yl[64];
        heat(d->lmax > 0 ? log10((double)n) / d->lmax : 1, col);
        axis2_label(&d->ax, px_i, xl, sizeof xl, 1);
        axis2_label(&d->ay, py_i, yl, sizeof yl, 1);
        /* Hundreds of octaves make cells thinner than a pixel: draw at least 3 px. */
        double rw = fmax(cw, 3), rh = fmax(chh, 3);
        fprintf(c->f,
                "<rect class=\"mark\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                "height=\"%.2f\" fill=\"%s\"><title>",
                x0 + (px_i + 0.5) * cw - rw / 2, top + ph - (py_i + 0.5) * chh - rh / 2, rw, rh,
                col);
        kvf__html_escape(c->f, s->name);
        fprintf(c->f, ": |x| %s, abs %s: %" PRId64 "</title></rect>\n", xl, yl, n);
        c->marks++;
    }
    dens_ref_line(c, d, x0);
    int nlab = (int)(pw / 48) > 2 ? (int)(pw / 48) : 2; /* ~48 px per label */
    int every = (nx + nlab - 1) / nlab;
    for (int k = 0; k < nx; k += every) {
        char lab[64];
        axis2_label(&d->ax, k, lab, sizeof lab, 0);
        kvf__svg_text(c->f, x0 + (k + 0.5) * cw, top + ph + 14, "middle", "tick", lab);
    }
    if (first) {
        int everyy = (ny + 9) / 10;
        for (int k = 0; k < ny; k += everyy) {
            char lab[64];
            axis2_label(&d->ay, k, lab, sizeof lab, 0);
            kvf__svg_text(c->f, d->left - 6, top + ph - (k + 0.5) * chh + 4, "end", "tick", lab);
        }
    }
}

int kvf__density_chart(FILE *f, const kvf__rmodel *m) {
    dens_layout d = {.ax = {0, 0, 0, -1, 0, 0, 1},
                     .ay = {0, 0, 0, -1, 0, 0, 1},
                     .left = 64,
                     .top = 30,
                     .ph = 260,
                     .gap = 24};
    const double bottom = 56;
    int64_t *wx = calloc(OCT_N, sizeof *wx), *wy = calloc(OCT_N, sizeof *wy);
    kvf__map *agg = calloc(m->nseries ? m->nseries : 1, sizeof *agg);
    int rc = -1;
    if (!wx || !wy || !agg) goto out;
    for (size_t i = 0; i < m->nseries; i++)
        kvf__map_init(&agg[i], sizeof(int64_t));
    size_t ns = dens_scan(m, &d, wx, wy);
    d.pw = ns ? (KVF__CHART_W - d.left - 16 - d.gap * (double)(ns - 1)) / (double)ns
              : KVF__CHART_W - d.left - 16;
    if (d.pw > 420) d.pw = 420;
    axis2_window(&d.ax, wx);
    axis2_window(&d.ay, wy);
    axis2_group(&d.ax, (int)(d.pw / 3) - d.ax.has_zero - d.ax.has_inf);
    axis2_group(&d.ay, (int)(d.ph / 3) - d.ay.has_zero - d.ay.has_inf);
    int64_t maxc = 0;
    if (dens_fold(m, &d, agg, &maxc)) goto out;
    kvf__chart c;
    if (kvf__chart_open(&c, KVF__CHART_W, (int)(d.top + d.ph + bottom))) goto out;
    int nx = axis2_n(&d.ax), ny = axis2_n(&d.ay);
    if (maxc == 0 || nx == 0 || ny == 0) {
        kvf__svg_no_data(&c, "no elements");
    } else {
        d.cw = d.pw / nx;
        d.chh = d.ph / ny;
        d.lmax = log10((double)maxc);
        size_t panel = 0;
        for (size_t i = 0; i < m->nseries; i++) {
            if (!m->series[i].primary) continue;
            double x0 = d.left + (double)panel++ * (d.pw + d.gap);
            dens_panel(&c, &d, &m->series[i], &agg[i], x0, panel == 1);
        }
        heat_legend(&c, KVF__CHART_W - 16 - 160, c.h - 26, d.lmax, "elements (log)", 1);
    }
    kvf__svg_text(c.f, d.left + 200, c.h - 12, "middle", "axis", "|exact value| (octaves)");
    kvf__svg_text(c.f, 14, d.top + d.ph / 2, "middle", "axis vert", "abs error (octaves)");
    rc = kvf__chart_figure(
        &c, f, "abs-vs-exact", "o: abs error against |exact|",
        "Density of o elements by the octave of |exact| (x) and of |a - r| (y); colour is "
        "the element count on a log scale shared by all panels. The axes hold the central "
        "99.8% of the elements; cells labelled \u2264 or \u2265 also hold everything beyond. "
        "The error is measured from the correctly rounded value, so a correctly rounded "
        "element is in the 0 row. One bf16 ulp is between 2\u207b\u2078 and 2\u207b\u2077 "
        "of |exact|: the dashed line abs = 2\u207b\u2078 |exact| is one ulp at the top of a "
        "binade, and cells on or above it hold elements one ulp or more off, which a correct "
        "fp32 kernel also produces on long sequences (the strict rule allows them).",
        "o abs error against |exact|");
out:
    for (size_t i = 0; agg && i < m->nseries; i++)
        kvf__map_free(&agg[i]);
    free(agg);
    free(wx);
    free(wy);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Heatmaps                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static double cell_bits(const kvf__cell *c) {
    return c->bits_n ? (double)c->bits_sum / KVF_BITS_SCALE / (double)c->bits_n : NAN;
}

static void cell_rect(kvf__chart *c, double x, double y, double w, double h, const kvf__cell *cell,
                      double hi, const char *series, const char *what, const char *rule) {
    char col[8], abs[24], margin[24];
    double bits = cell_bits(cell);
    if (isnan(bits))
        snprintf(col, sizeof col, "#222222"); /* only non-finite mismatches: no distance */
    else
        heat(hi > 0 ? bits / hi : 0, col);
    kvf__fmt_num(abs, sizeof abs, cell->max_abs);
    kvf_margin_text(margin, sizeof margin, cell->max_margin);
    fprintf(c->f,
            "<rect class=\"mark\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
            "fill=\"%s\"><title>",
            x, y, w, h, col);
    kvf__html_escape(c->f, series);
    /* Tooltips are most of the page's bytes: keep them terse. */
    fprintf(c->f,
            ", %s: n %" PRId64 ", bits %.3g, max ulp %" PRId64 ", max abs %s, NaN/inf %" PRId64
            ", %" PRId64 " fail ",
            what, cell->n, isnan(bits) ? 0.0 : bits, cell->max_ulps, abs, cell->nonfinite,
            cell->fails);
    kvf__html_escape(c->f, rule);
    fprintf(c->f, ", max margin %s</title></rect>\n", margin);
    c->marks++;
}

/* Rows are series, columns the keys of one coordinate class (union over the series). */
int kvf__class_heatmap(FILE *f, const kvf__rmodel *m, int out, int kind, const char *id,
                       const char *title, const char *note, const char *xlabel) {
    int64_t kmax = -1;
    double hi = 0;
    size_t nrows = 0;
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__group *g = m->series[i].primary;
        if (!g) continue;
        nrows++;
        const kvf__map *mp = &g->out[out].by[kind];
        kvf__map_iter it4 = {0};
        int64_t key4;
        const void *val4;
        while (kvf__map_next(mp, &it4, &key4, &val4)) {
            if (key4 > kmax) kmax = key4;
            double b = cell_bits((const kvf__cell *)val4);
            if (b > hi) hi = b;
        }
    }
    if (hi < 1) hi = 1; /* below one bit, colour differences mean little */
    size_t longest = 8;
    for (size_t i = 0; i < m->nseries; i++)
        if (strlen(m->series[i].name) > longest) longest = strlen(m->series[i].name);
    const double left = fmin(30 + 6.6 * (double)longest, 330), right = 16, top = 14, rowh = 22,
                 bottom = 64;
    kvf__chart c;
    if (kvf__chart_open(&c, KVF__CHART_W, (int)(top + rowh * (double)(nrows ? nrows : 1) + bottom)))
        return -1;
    double pw = KVF__CHART_W - left - right;
    if (kmax < 0) {
        kvf__svg_no_data(&c, "no elements");
    } else {
        double cw = pw / (double)(kmax + 1);
        size_t row = 0;
        for (size_t i = 0; i < m->nseries; i++) {
            const kvf__rseries *s = &m->series[i];
            if (!s->primary) continue;
            double y = top + (double)row++ * rowh;
            fprintf(c.f,
                    "<rect class=\"plot\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                    "height=\"%.1f\"/>",
                    left, y, pw, rowh - 3);
            fprintf(c.f,
                    "<rect class=\"legend\" x=\"6\" y=\"%.1f\" width=\"10\" height=\"10\" "
                    "fill=\"%s\"/>",
                    y + 5, s->color);
            kvf__svg_text(c.f, 20, y + 14, "start", "lg", s->name);
            const kvf__map *mp = &s->primary->out[out].by[kind];
            kvf__map_iter it3 = {0};
            int64_t key3;
            const void *val3;
            while (kvf__map_next(mp, &it3, &key3, &val3)) {
                int64_t k = key3;
                char what[64];
                if (kind == KVF_CLASS_SEQLEN)
                    snprintf(what, sizeof what, k == 0 ? "empty sequences" : "lengths %lld to %lld",
                             k ? 1ll << (k - 1) : 0ll, k ? (1ll << k) - 1 : 0ll);
                else
                    snprintf(what, sizeof what, "%s %lld", kind == KVF_CLASS_HEAD ? "q head" : "d",
                             (long long)k);
                cell_rect(&c, left + (double)k * cw, y, cw, rowh - 3, (const kvf__cell *)val3, hi,
                          s->name, what, s->primary->rule);
            }
        }
        double ylab = top + rowh * (double)nrows + 12;
        int64_t every = (kmax + 24) / 24;
        for (int64_t k = 0; k <= kmax; k += every) {
            char lab[32];
            if (kind == KVF_CLASS_SEQLEN)
                snprintf(lab, sizeof lab, "%lld", k ? 1ll << (k - 1) : 0ll);
            else
                snprintf(lab, sizeof lab, "%lld", (long long)k);
            kvf__svg_text(c.f, left + (k + 0.5) * cw, ylab, "middle", "tick", lab);
        }
        heat_legend(&c, KVF__CHART_W - right - 160, c.h - 26, hi, "mean bits of error", 0);
    }
    kvf__svg_text(c.f, left + pw / 2 - 100, c.h - 12, "middle", "axis", xlabel);
    return kvf__chart_figure(&c, f, id, title, note, title);
}

/* One panel per series: rows are page sizes, columns the slot of the row's last token. */
int kvf__slot_heatmap(FILE *f, const kvf__rmodel *m) {
    int32_t sizes[64];
    int nsizes = 0;
    int64_t smax = 0;
    double hi = 0;
    size_t npanels = 0;
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__group *g = m->series[i].primary;
        if (!g) continue;
        npanels++;
        const kvf__map *mp = &g->out[0].by[KVF_CLASS_SLOT];
        kvf__map_iter it2 = {0};
        int64_t key2;
        const void *val2;
        while (kvf__map_next(mp, &it2, &key2, &val2)) {
            int32_t S = (int32_t)(key2 / 65536);
            int seen = 0;
            for (int k = 0; k < nsizes; k++)
                seen |= sizes[k] == S;
            if (!seen && nsizes < 64) sizes[nsizes++] = S;
            if (S > smax) smax = S;
            double b = cell_bits((const kvf__cell *)val2);
            if (b > hi) hi = b;
        }
    }
    for (int a = 1; a < nsizes; a++) /* insertion sort: a handful of page sizes */
        for (int b = a; b > 0 && sizes[b] < sizes[b - 1]; b--) {
            int32_t t = sizes[b];
            sizes[b] = sizes[b - 1];
            sizes[b - 1] = t;
        }
    if (hi < 1) hi = 1;
    const double left = 110, right = 16, rowh = 14, head = 22, gap = 30, bottom = 48;
    double panel_h = head + rowh * (nsizes ? nsizes : 1);
    kvf__chart c;
    if (kvf__chart_open(&c, KVF__CHART_W,
                        (int)(8 + (panel_h + gap) * (double)(npanels ? npanels : 1) + bottom)))
        return -1;
    double pw = KVF__CHART_W - left - right;
    if (nsizes == 0) {
        kvf__svg_no_data(&c, "no non-empty sequences");
    } else {
        double cw = pw / (double)smax;
        size_t panel = 0;
        for (size_t i = 0; i < m->nseries; i++) {
            const kvf__rseries *s = &m->series[i];
            if (!s->primary) continue;
            double y0 = 8 + (double)panel++ * (panel_h + gap);
            fprintf(c.f,
                    "<rect class=\"legend\" x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" "
                    "fill=\"%s\"/>",
                    left, y0 + 2, s->color);
            kvf__svg_text(c.f, left + 14, y0 + 11, "start", "lg", s->name);
            for (int r = 0; r < nsizes; r++) {
                double y = y0 + head + r * rowh;
                char lab[32];
                snprintf(lab, sizeof lab, "page size %d", (int)sizes[r]);
                kvf__svg_text(c.f, left - 6, y + rowh - 3, "end", "tick", lab);
                fprintf(c.f,
                        "<rect class=\"plot\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                        "height=\"%.1f\"/>",
                        left, y, cw * sizes[r], rowh - 2);
            }
            const kvf__map *mp = &s->primary->out[0].by[KVF_CLASS_SLOT];
            kvf__map_iter it1 = {0};
            int64_t key1;
            const void *val1;
            while (kvf__map_next(mp, &it1, &key1, &val1)) {
                int32_t S = (int32_t)(key1 / 65536), slot = (int32_t)(key1 % 65536);
                int r = 0;
                while (r < nsizes && sizes[r] != S)
                    r++;
                if (r == nsizes) continue; /* past 64 distinct sizes: not drawn (never seen) */
                char what[64];
                snprintf(what, sizeof what, "page size %d, last token in slot %d%s", (int)S,
                         (int)slot, slot == S - 1 ? " (full last page)" : "");
                cell_rect(&c, left + slot * cw, y0 + head + r * rowh, cw > 1 ? cw : 1, rowh - 2,
                          (const kvf__cell *)val1, hi, s->name, what, s->primary->rule);
            }
        }
        int64_t step = 1;
        while (smax / step > 16)
            step *= 2;
        for (int64_t k = 0; k < smax; k += step) {
            char lab[24];
            snprintf(lab, sizeof lab, "%lld", (long long)k);
            kvf__svg_text(c.f, left + (k + 0.5) * cw, c.h - bottom + 10, "middle", "tick", lab);
        }
        heat_legend(&c, KVF__CHART_W - right - 160, c.h - 28, hi, "mean bits of error", 0);
    }
    kvf__svg_text(c.f, left + pw / 2 - 100, c.h - 10, "middle", "axis",
                  "slot of the last token in its page, (L - 1) mod page size");
    return kvf__chart_figure(
        &c, f, "heat-slot", "o: error by position within page",
        "Mean bits of error log2(ulps + 1) of o, by the page size (rows) and the slot that "
        "the sequence's last token occupies in its last page (columns; the rightmost cell "
        "of a row is a full last page). Page-table and last-page-length bugs show up here.",
        "o error by position within page");
}
