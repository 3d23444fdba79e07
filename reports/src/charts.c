/* The one-dimensional charts of the page: octave histograms drawn as grouped bars with log
 * counts (ULP distances, rule margins) and the rel error CDF. Every series is drawn on the same
 * axes as the others: ranges are computed over all series before anything is drawn. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "charts.h"
#include "escape.h"
#include "svg.h"

/* ------------------------------------------------------------------------------------------ */
/* Grouped bars with log counts                                                                */
/* ------------------------------------------------------------------------------------------ */

typedef struct bars {
    const char *id, *title, *note, *xlabel;
    size_t nbins;
    char (*labels)[40]; /* short axis label per bin */
    char (*ranges)[64]; /* what the bin holds, for the tooltip */
    size_t ns;
    const kvf__rseries **ss;
    int64_t *counts; /* [ns][nbins] */
    double marker;   /* a vertical line at this bin position (left edge = index), or -1 */
    const char *marker_label;
} bars;

/* The bars as given, one group of ns bars per bin. */
static int draw_bars_fit(FILE *out, const bars *b) {
    kvf__chart c;
    if (kvf__chart_open(&c, KVF__CHART_W, 310)) return -1;
    const double left = 64, right = 16, top = 30, bottom = 58;
    const double pw = KVF__CHART_W - left - right, ph = c.h - top - bottom;
    int64_t maxc = 0;
    for (size_t i = 0; i < b->ns * b->nbins; i++)
        if (b->counts[i] > maxc) maxc = b->counts[i];
    fprintf(c.f, "<rect class=\"plot\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n",
            left, top, pw, ph);
    if (maxc == 0 || b->nbins == 0) {
        kvf__svg_no_data(&c, "no elements");
    } else {
        /* Log counts: the axis starts at 0.5 so a bin holding one element is still visible. */
        double ylo = log10(0.5), yhi = log10((double)maxc) + 0.15;
        for (int k = 0; k <= (int)yhi; k++) {
            double y = top + ph - (k - ylo) / (yhi - ylo) * ph;
            char lab[32];
            if (k < 5)
                snprintf(lab, sizeof lab, "%.0f", pow(10, k));
            else
                kvf__pow_label(lab, sizeof lab, 10, k);
            fprintf(c.f, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>",
                    left, left + pw, y, y);
            kvf__svg_text(c.f, left - 6, y + 4, "end", "tick", lab);
        }
        double bw = pw / (double)b->nbins, gw = bw * 0.84 / (double)b->ns;
        size_t every = (b->nbins + 23) / 24;
        /* Thinned labels, but a folded first bin ("≤...") always says so, and its neighbours
         * then make room rather than print over it (the "0" bin beside "≤2⁻²⁴"). */
        size_t forced = b->nbins;
        for (size_t j = 0; j < b->nbins; j++)
            if (strncmp(b->labels[j], "\u2264", 3) == 0) forced = j;
        size_t gap = every > 2 ? every : 2;
        for (size_t j = 0; j < b->nbins; j++) {
            int near =
                forced < b->nbins && j != forced && (j > forced ? j - forced : forced - j) < gap;
            if ((j % every == 0 && !near) || j == forced)
                kvf__svg_text(c.f, left + (j + 0.5) * bw, top + ph + 15, "middle", "tick",
                              b->labels[j]);
            for (size_t s = 0; s < b->ns; s++) {
                int64_t n = b->counts[s * b->nbins + j];
                if (n <= 0) continue;
                double h = (log10((double)n) - ylo) / (yhi - ylo) * ph;
                double x = left + j * bw + bw * 0.08 + s * gw;
                fprintf(c.f,
                        "<rect class=\"mark\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                        "height=\"%.2f\" fill=\"%s\"><title>",
                        x, top + ph - h, gw, h, b->ss[s]->color);
                kvf__html_escape(c.f, b->ss[s]->name);
                fprintf(c.f, ": %s: %" PRId64 "</title></rect>\n", b->ranges[j], n);
                c.marks++;
            }
        }
        if (b->marker >= 0) {
            double x = left + b->marker * bw;
            fprintf(c.f, "<line class=\"limit\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>",
                    x, x, top, top + ph);
            int right_side = x < left + pw * 0.75; /* keep the label inside the plot */
            kvf__svg_text(c.f, right_side ? x + 4 : x - 4, top + 12, right_side ? "start" : "end",
                          "tick", b->marker_label);
        }
    }
    kvf__svg_text(c.f, left + pw / 2, c.h - 12, "middle", "axis", b->xlabel);
    kvf__svg_text(c.f, 14, top + ph / 2, "middle", "axis vert", "elements (log)");
    kvf__svg_legend(&c, b->ss, b->ns, left, 18);
    return kvf__chart_figure(&c, out, b->id, b->title, b->note, b->title);
}

/* Bars stay at least about 4 px wide: with many bins and several series (140 octaves of 3
 * series gave 2 px bars), neighbouring bins are merged k at a time, counts summed, each merged
 * bin labelled by its first bin and its tooltip naming the whole span. */
static int draw_bars(FILE *out, const bars *b) {
    const double usable = KVF__CHART_W - 64 - 16;
    size_t k = 1;
    while (b->nbins / k > 1 &&
           usable / (double)((b->nbins + k - 1) / k) * 0.84 / (double)(b->ns ? b->ns : 1) < 4.0)
        k++;
    if (k == 1) return draw_bars_fit(out, b);
    size_t nb = (b->nbins + k - 1) / k;
    bars m = *b;
    m.nbins = nb;
    m.labels = calloc(nb, sizeof *m.labels);
    m.ranges = calloc(nb, sizeof *m.ranges);
    m.counts = calloc((b->ns ? b->ns : 1) * nb, sizeof *m.counts);
    int rc = -1;
    if (m.labels && m.ranges && m.counts) {
        for (size_t j = 0; j < nb; j++) {
            size_t first = j * k, last = first + k - 1 < b->nbins ? first + k - 1 : b->nbins - 1;
            /* A folded first bin keeps saying so. */
            size_t lab = first;
            for (size_t i = first; i <= last; i++)
                if (strncmp(b->labels[i], "\u2264", 3) == 0) lab = i;
            snprintf(m.labels[j], sizeof m.labels[j], "%s", b->labels[lab]);
            snprintf(m.ranges[j], sizeof m.ranges[j], "%.28s to %.28s", b->ranges[first],
                     b->ranges[last]);
            for (size_t s = 0; s < b->ns; s++)
                for (size_t i = first; i <= last; i++)
                    m.counts[s * nb + j] += b->counts[s * b->nbins + i];
        }
        if (b->marker >= 0) m.marker = b->marker / (double)k;
        rc = draw_bars_fit(out, &m);
    }
    free(m.labels);
    free(m.ranges);
    free(m.counts);
    return rc;
}

/* Octave bins for a non-negative histogram: [zero] + octaves lo..hi + [inf] + [nan], with
 * lo/hi the union over the given histograms. */
typedef struct octbins {
    int has_zero, has_inf, has_nan;
    int lo, hi; /* hi < lo: no finite positive values */
    int folded; /* octaves below lo were folded into the first one */
    size_t n;
} octbins;

static int floor4(int64_t q) {
    return (int)(q >= 0 ? q / 4 : -((-q + 3) / 4));
}

static void octbins_scan(octbins *ob, const kvf__hist *h) {
    if (h->zero) ob->has_zero = 1;
    if (h->inf) ob->has_inf = 1;
    if (h->nan) ob->has_nan = 1;
    kvf__map_iter it13 = {0};
    int64_t key13;
    const void *val13;
    while (kvf__map_next(&h->buckets, &it13, &key13, &val13)) {
        int k = floor4(key13);
        if (ob->hi < ob->lo) {
            ob->lo = ob->hi = k;
        } else {
            if (k < ob->lo) ob->lo = k;
            if (k > ob->hi) ob->hi = k;
        }
    }
}

static size_t octbins_count(octbins *ob) {
    ob->n = (size_t)ob->has_zero + (ob->hi >= ob->lo ? (size_t)(ob->hi - ob->lo + 1) : 0) +
            (size_t)ob->has_inf + (size_t)ob->has_nan;
    return ob->n;
}

static void octbins_fill(const octbins *ob, const kvf__hist *h, int64_t *counts) {
    size_t base = (size_t)ob->has_zero;
    if (ob->has_zero) counts[0] += h->zero;
    kvf__map_iter it12 = {0};
    int64_t key12;
    const void *val12;
    while (kvf__map_next(&h->buckets, &it12, &key12, &val12)) {
        int k = floor4(key12);
        if (k < ob->lo) k = ob->lo; /* folded */
        counts[base + (size_t)(k - ob->lo)] += *(const int64_t *)val12;
    }
    size_t after = base + (ob->hi >= ob->lo ? (size_t)(ob->hi - ob->lo + 1) : 0);
    if (ob->has_inf) counts[after++] += h->inf;
    if (ob->has_nan) counts[after] += h->nan;
}

/* Labels: integer ranges for ULP distances, powers of two otherwise. */
static void octbins_labels(const octbins *ob, char (*labels)[40], char (*ranges)[64], int integers,
                           const char *nan_label) {
    size_t j = 0;
    if (ob->has_zero) {
        snprintf(labels[j], 40, "0");
        snprintf(ranges[j++], 64, "exactly 0");
    }
    for (int k = ob->lo; k <= ob->hi && ob->hi >= ob->lo; k++, j++) {
        if (integers && k < 10) {
            long long lo = 1ll << k, hi = (1ll << (k + 1)) - 1;
            snprintf(labels[j], 40, "%lld", lo);
            if (lo == hi)
                snprintf(ranges[j], 64, "%lld", lo);
            else
                snprintf(ranges[j], 64, "%lld to %lld", lo, hi);
        } else {
            char a[24], b[24];
            kvf__pow_label(a, sizeof a, 2, k);
            kvf__pow_label(b, sizeof b, 2, k + 1);
            if (k == ob->lo && ob->folded) {
                snprintf(labels[j], 40, "\u2264%s", a);
                snprintf(ranges[j], 64, "(0, %s)", b);
            } else {
                snprintf(labels[j], 40, "%s", a);
                snprintf(ranges[j], 64, "[%s, %s)", a, b);
            }
        }
    }
    if (ob->has_inf) {
        snprintf(labels[j], 40, "\u221e");
        snprintf(ranges[j++], 64, "infinite");
    }
    if (ob->has_nan) {
        snprintf(labels[j], 40, "%s", nan_label);
        snprintf(ranges[j], 64, "%s", integers ? "NaN on one side only" : "NaN");
    }
}

int kvf__hist_chart(FILE *f, const kvf__rmodel *m, const char *id, const char *title,
                    const char *note, const char *xlabel, const char *rule, int out, int which,
                    int integers, int limit_line) {
    const kvf__rseries **ss = malloc((m->nseries ? m->nseries : 1) * sizeof *ss);
    const kvf__hist **hs = malloc((m->nseries ? m->nseries : 1) * sizeof *hs);
    if (!ss || !hs) {
        free(ss);
        free(hs);
        return -1;
    }
    size_t ns = 0;
    octbins ob = {0, 0, 0, 0, -1, 0, 0};
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__group *g = rule ? kvf__rseries_group(&m->series[i], rule) : m->series[i].primary;
        if (!g) continue;
        const kvf__outstats *o = &g->out[out];
        const kvf__hist *h = which == 0   ? &o->abs
                             : which == 1 ? &o->rel
                             : which == 2 ? &o->ulp
                                          : &o->margin;
        ss[ns] = &m->series[i];
        hs[ns++] = h;
        octbins_scan(&ob, h);
    }
    if (limit_line && ob.hi >= ob.lo) {
        /* Margins far below 1 only say "tiny error" (subnormal outputs give 2^-126 under
         * fib), and must not squeeze the axis: margins below 2^-24, and the lowest 0.1% of
         * the non-zero margins, are folded into the first bin. The high end, where failures
         * are, is never folded. */
        int64_t total = 0, cum = 0;
        int span = ob.hi - ob.lo + 1;
        int64_t *per = calloc((size_t)span, sizeof *per);
        if (per) {
            for (size_t s = 0; s < ns; s++) {
                kvf__map_iter it11 = {0};
                int64_t key11;
                const void *val11;
                while (kvf__map_next(&hs[s]->buckets, &it11, &key11, &val11)) {
                    int64_t n = *(const int64_t *)val11;
                    per[floor4(key11) - ob.lo] += n;
                    total += n;
                }
            }
            int newlo = ob.lo;
            for (int k = 0; k < span; k++) {
                cum += per[k];
                if ((double)cum > 0.001 * (double)total) {
                    newlo = ob.lo + k;
                    break;
                }
            }
            if (newlo < -24) newlo = -24;
            if (newlo > ob.hi - 15) newlo = ob.hi - 15;
            if (newlo > ob.lo) {
                ob.lo = newlo;
                ob.folded = 1;
            }
            free(per);
        }
    }
    if (limit_line) {
        /* Keep octave 0 ([1, 2): the allowance itself) on the axis so the limit is drawn. */
        if (ob.hi < ob.lo) ob.lo = ob.hi = 0;
        if (ob.lo > 0) ob.lo = 0;
        if (ob.hi < 0) ob.hi = 0;
    }
    size_t nb = octbins_count(&ob);
    int64_t *counts = calloc((ns ? ns : 1) * (nb ? nb : 1), sizeof *counts);
    char(*labels)[40] = calloc(nb ? nb : 1, sizeof *labels);
    char(*ranges)[64] = calloc(nb ? nb : 1, sizeof *ranges);
    int rc = -1;
    if (counts && labels && ranges) {
        for (size_t s = 0; s < ns; s++)
            octbins_fill(&ob, hs[s], counts + s * nb);
        octbins_labels(&ob, labels, ranges, integers, "NaN");
        bars b = {id, title, note, xlabel, nb, labels, ranges, ns, ss, counts, -1, NULL};
        if (limit_line) {
            b.marker = (double)ob.has_zero + (double)(0 - ob.lo);
            b.marker_label = "allowance (margin 1)";
        }
        rc = draw_bars(f, &b);
    }
    free(counts);
    free(labels);
    free(ranges);
    free(ss);
    free(hs);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Rel error CDF                                                                               */
/* ------------------------------------------------------------------------------------------ */

/* Where the CDF is drawn: bucket positions lo..hi+1 on a log x axis right of a column for the
 * elements at or below lo, fractions ymin..1 on the y axis. */
typedef struct cdf_axes {
    int lo, hi;
    double ymin;
    double left, top, pw, ph;
    double zero_w; /* the column for "0 or below the axis" left of the log axis */
    double span;   /* hi + 1 - lo buckets */
} cdf_axes;

static double cdf_x(const cdf_axes *a, double q) {
    return a->left + a->zero_w + (q - a->lo) / a->span * (a->pw - a->zero_w);
}

static double cdf_y(const cdf_axes *a, double p) {
    return a->top + a->ph - (p - a->ymin) / (1 - a->ymin) * a->ph;
}

/* The x axis starts where the 0.5% smallest non-zero errors end (what lies below is folded
 * into the curve's starting level) and runs to the largest error: the tail is what matters.
 * -1 when memory runs out. */
static int cdf_window(const kvf__rmodel *m, int *lo_out, int *hi_out) {
    kvf__map all;
    kvf__map_init(&all, sizeof(int64_t));
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__group *g = m->series[i].primary;
        if (!g || g->out[0].rel.total == 0) continue;
        const kvf__map *b = &g->out[0].rel.buckets;
        kvf__map_iter it7 = {0};
        int64_t key7;
        const void *val7;
        while (kvf__map_next(b, &it7, &key7, &val7)) {
            int64_t *c = kvf__map_get(&all, key7, 1);
            if (!c) {
                kvf__map_free(&all);
                return -1;
            }
            *c += *(const int64_t *)val7;
        }
    }
    size_t nk;
    int64_t *keys = kvf__map_sorted_keys(&all, &nk);
    int lo, hi;
    if (nk == 0) {
        lo = kvf_stats_bucket(1e-4); /* only exact elements: any readable range */
        hi = lo + 16;
    } else {
        int64_t total = 0, cum = 0;
        for (size_t j = 0; j < nk; j++)
            total += *(const int64_t *)kvf__map_find(&all, keys[j]);
        lo = (int)keys[0];
        hi = (int)keys[nk - 1];
        for (size_t j = 0; j < nk; j++) {
            cum += *(const int64_t *)kvf__map_find(&all, keys[j]);
            if ((double)cum > 0.005 * (double)total) {
                lo = (int)keys[j];
                break;
            }
        }
        /* Relative errors below 2^-24 (f32's precision) say nothing about a kernel whose
         * output is bf16 or f32; FIB's +1e-8 in the denominator makes many of them (subnormal
         * outputs). */
        if (lo < -4 * 24) lo = -4 * 24;
        if (hi < lo) hi = lo;
        if (hi - lo < 16) lo = hi - 16;
    }
    free(keys);
    kvf__map_free(&all);
    *lo_out = lo;
    *hi_out = hi;
    return 0;
}

/* The lowest starting level of the curves (exact elements plus those below the window),
 * rounded down so that the y axis zooms on the part the curves use: most elements are exact. */
static double cdf_ymin(const kvf__rmodel *m, int lo) {
    double ymin = 1;
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__group *g = m->series[i].primary;
        if (!g || g->out[0].rel.total == 0) continue;
        const kvf__hist *h = &g->out[0].rel;
        int64_t below = h->zero;
        kvf__map_iter it6 = {0};
        int64_t key6;
        const void *val6;
        while (kvf__map_next(&h->buckets, &it6, &key6, &val6))
            if (key6 < lo) below += *(const int64_t *)val6;
        double start = (double)below / (double)h->total;
        if (start < ymin) ymin = start;
    }
    /* Steps of 0.05, never narrower than [0.8, 1]. */
    ymin = floor(ymin * 20) / 20;
    if (ymin > 0.8) ymin = 0.8;
    return ymin;
}

/* Grid lines and tick labels of both axes. */
static void cdf_ticks(kvf__chart *c, const cdf_axes *a) {
    /* Ticks at round fractions: a step from 0.01, 0.02, 0.05, 0.1, 0.2 giving at most 5 of
     * them, so the axis reads 0.8, 0.85, 0.9 ... rather than quarters of the zoomed range. */
    static const double steps[] = {0.01, 0.02, 0.05, 0.1, 0.2, 0.25};
    double step = 0.25;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if ((1 - a->ymin) / steps[i] <= 5.0 + 1e-9) {
            step = steps[i];
            break;
        }
    for (int t = 0; a->ymin + t * step <= 1 + 1e-9; t++) {
        double p = 1 - (double)((int)((1 - a->ymin) / step + 0.5) - t) * step;
        if (p < a->ymin - 1e-9) continue;
        char lab[16];
        snprintf(lab, sizeof lab, "%.2f", p);
        fprintf(c->f, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>",
                a->left, a->left + a->pw, cdf_y(a, p), cdf_y(a, p));
        kvf__svg_text(c->f, a->left - 6, cdf_y(a, p) + 4, "end", "tick", lab);
    }
    char lowlab[40], lowp[24];
    kvf__pow_label(lowp, sizeof lowp, 2, floor4(a->lo));
    snprintf(lowlab, sizeof lowlab, "\u2264%s", lowp);
    kvf__svg_text(c->f, a->left + a->zero_w / 2, a->top + a->ph + 15, "middle", "tick", lowlab);
    /* Decades: the bucket position of 10^k is 4 k log2(10); at most about 12 labels. */
    int klo = (int)ceil(a->lo / (4 * 3.321928094887362)),
        khi = (int)floor((a->hi + 1) / (4 * 3.321928094887362));
    int kstep = (khi - klo) / 12 + 1;
    for (int k = klo; k <= khi; k++) {
        double q = 4 * k * 3.321928094887362;
        fprintf(c->f, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>",
                cdf_x(a, q), cdf_x(a, q), a->top, a->top + a->ph);
        /* Keep clear of the "≤2⁻²⁴" label centred in the zero column. */
        if ((k - klo) % kstep || cdf_x(a, q) < a->left + a->zero_w + 36) continue;
        char lab[24];
        kvf__pow_label(lab, sizeof lab, 10, k);
        kvf__svg_text(c->f, cdf_x(a, q), a->top + a->ph + 15, "middle", "tick", lab);
    }
}

/* One series' curve, a single mark. */
static void cdf_curve(kvf__chart *c, const cdf_axes *a, const kvf__rseries *s) {
    const kvf__hist *h = &s->primary->out[0].rel;
    double total = (double)h->total, cum = (double)h->zero;
    kvf__map_iter it5 = {0};
    int64_t key5;
    const void *val5;
    while (kvf__map_next(&h->buckets, &it5, &key5, &val5))
        if (key5 < a->lo) cum += (double)*(const int64_t *)val5;
    fprintf(c->f, "<path class=\"mark cdf\" stroke=\"%s\" d=\"M%.1f,%.2f L%.1f,%.2f", s->color,
            a->left, cdf_y(a, cum / total), a->left + a->zero_w, cdf_y(a, cum / total));
    for (int q = a->lo; q <= a->hi; q++) {
        const int64_t *n = kvf__map_find(&h->buckets, q);
        if (!n) continue;
        /* Within a bucket the CDF rises linearly from its left to its right edge. */
        fprintf(c->f, " L%.1f,%.2f", cdf_x(a, q), cdf_y(a, cum / total));
        cum += (double)*n;
        fprintf(c->f, " L%.1f,%.2f", cdf_x(a, q + 1), cdf_y(a, cum / total));
    }
    fprintf(c->f, " L%.1f,%.2f\"><title>", a->left + a->pw, cdf_y(a, cum / total));
    kvf__html_escape(c->f, s->name);
    fprintf(c->f, ": %.6g of %" PRId64 " elements have a finite rel error</title></path>\n",
            cum / total, h->total);
    c->marks++;
}

int kvf__cdf_chart(FILE *f, const kvf__rmodel *m) {
    cdf_axes a = {0};
    if (cdf_window(m, &a.lo, &a.hi)) return -1;
    a.ymin = cdf_ymin(m, a.lo);
    const double right = 16, bottom = 56;
    a.left = 64;
    a.top = 30;
    const kvf__rseries **ss = malloc((m->nseries ? m->nseries : 1) * sizeof *ss);
    if (!ss) return -1;
    kvf__chart c;
    if (kvf__chart_open(&c, KVF__CHART_W, 300)) {
        free(ss);
        return -1;
    }
    a.pw = KVF__CHART_W - a.left - right;
    a.ph = c.h - a.top - bottom;
    a.zero_w = 44;
    a.span = (double)(a.hi + 1 - a.lo);
    fprintf(c.f, "<rect class=\"plot\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n",
            a.left, a.top, a.pw, a.ph);
    cdf_ticks(&c, &a);
    size_t ns = 0;
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__rseries *s = &m->series[i];
        if (!s->primary || s->primary->out[0].rel.total == 0) continue;
        ss[ns++] = s;
        cdf_curve(&c, &a, s);
    }
    if (ns == 0) kvf__svg_no_data(&c, "no elements");
    kvf__svg_legend(&c, ss, ns, a.left, 18);
    free(ss);
    kvf__svg_text(c.f, a.left + a.pw / 2, c.h - 12, "middle", "axis",
                  "rel error |a - r| / (|r| + 1e-8)");
    kvf__svg_text(c.f, 14, a.top + a.ph / 2, "middle", "axis vert", "fraction \u2264 x");
    return kvf__chart_figure(
        &c, f, "rel-cdf", "o: rel error CDF",
        "Fraction of o elements whose rel error is at most x (log x axis; the leftmost "
        "column holds the elements with no error and the smallest 0.5% of the errors, or at "
        "least those below 2\u207b\u00b2\u2074). The y axis "
        "is zoomed to the range the curves use. A curve that ends below 1 has NaN or "
        "infinite errors.",
        "o rel error CDF");
}
