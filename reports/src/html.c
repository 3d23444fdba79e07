/* index.html: one self-contained page. Every chart is inline SVG drawn here in C, so the page
 * needs no script to be read and nothing from the network. One small inline script checks the
 * page itself (each chart's mark count against its data-marks attribute, and any script error)
 * and writes the verdict into #kvf-status, which the browser test reads.
 *
 * Every series is drawn on the same axes as the others: ranges and colour scales are computed
 * over all series before anything is drawn. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

#define W 960 /* chart width in px */

/* ------------------------------------------------------------------------------------------ */
/* Text and colour                                                                             */
/* ------------------------------------------------------------------------------------------ */

/* "2" followed by k in superscript digits (UTF-8), e.g. 2⁻¹⁰. */
/* Text for HTML, escaped; NULL writes nothing. */
static void html_escape(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&#39;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

static void pow_label(char *buf, size_t size, int base, int k) {
    static const char *const sup[10] = {"\u2070", "\u00b9", "\u00b2", "\u00b3", "\u2074",
                                        "\u2075", "\u2076", "\u2077", "\u2078", "\u2079"};
    char digits[16];
    snprintf(digits, sizeof digits, "%d", k < 0 ? -k : k);
    size_t n = (size_t)snprintf(buf, size, "%d%s", base, k < 0 ? "\u207b" : "");
    for (const char *d = digits; *d && n + 4 < size; d++)
        n += (size_t)snprintf(buf + n, size - n, "%s", sup[*d - '0']);
}

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

/* ------------------------------------------------------------------------------------------ */
/* Chart frame                                                                                 */
/* ------------------------------------------------------------------------------------------ */

typedef struct chart {
    FILE *f; /* the body, buffered so the opening tag can carry the final mark count */
    char *buf;
    size_t size;
    int marks;
    int w, h;
} chart;

static int chart_open(chart *c, int w, int h) {
    memset(c, 0, sizeof *c);
    c->w = w;
    c->h = h;
    c->f = open_memstream(&c->buf, &c->size);
    return c->f ? 0 : -1;
}

static int chart_close(chart *c, FILE *out, const char *id, const char *label) {
    if (fclose(c->f) != 0) {
        free(c->buf);
        return -1;
    }
    fprintf(out,
            "<svg class=\"chart\" id=\"%s\" data-marks=\"%d\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" "
            "aria-label=\"",
            id, c->marks, c->w, c->h, c->w, c->h);
    html_escape(out, label);
    fprintf(out, "\">\n%s</svg>\n", c->buf);
    free(c->buf);
    return 0;
}

static void text(FILE *f, double x, double y, const char *anchor, const char *cls, const char *s) {
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" class=\"%s\">", x, y, anchor, cls);
    html_escape(f, s);
    fputs("</text>\n", f);
}

static void no_data(chart *c, const char *why) {
    text(c->f, c->w / 2.0, c->h / 2.0, "middle", "nodata", why);
}

/* Series swatches along the top of a chart. */
static void legend(chart *c, const kvf__rseries *const *ss, size_t ns, double x, double y) {
    for (size_t i = 0; i < ns; i++) {
        fprintf(c->f,
                "<rect class=\"legend\" x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" "
                "fill=\"%s\"/>",
                x, y - 9, ss[i]->color);
        text(c->f, x + 14, y, "start", "lg", ss[i]->name);
        x += 24 + 7.0 * (double)strlen(ss[i]->name);
    }
}

static void section(FILE *f, const char *id, const char *title, const char *note) {
    fprintf(f, "<section class=\"fig\" id=\"sec-%s\"><h3>", id);
    html_escape(f, title);
    fputs("</h3><p class=\"note\">", f);
    html_escape(f, note);
    fputs("</p>\n", f);
}

/* Colour legend for a heat scale over [0, hi] with a unit, at (x, y), 160 px wide. */
static void heat_legend(chart *c, double x, double y, double hi, const char *unit, int logc) {
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
    text(c->f, x, y + 22, "start", "tick", lo_s);
    text(c->f, x + 160, y + 22, "end", "tick", hi_s);
    text(c->f, x - 6, y + 9, "end", "tick", unit);
}

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

static int draw_bars_fit(FILE *out, const bars *b);

/* Bars stay at least about 4 px wide: with many bins and several series (140 octaves of 3
 * series gave 2 px bars), neighbouring bins are merged k at a time, counts summed, each merged
 * bin labelled by its first bin and its tooltip naming the whole span. */
static int draw_bars(FILE *out, const bars *b) {
    const double usable = W - 64 - 16;
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

static int draw_bars_fit(FILE *out, const bars *b) {
    chart c;
    if (chart_open(&c, W, 310)) return -1;
    const double left = 64, right = 16, top = 30, bottom = 58;
    const double pw = W - left - right, ph = c.h - top - bottom;
    int64_t maxc = 0;
    for (size_t i = 0; i < b->ns * b->nbins; i++)
        if (b->counts[i] > maxc) maxc = b->counts[i];
    fprintf(c.f, "<rect class=\"plot\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n",
            left, top, pw, ph);
    if (maxc == 0 || b->nbins == 0) {
        no_data(&c, "no elements");
    } else {
        /* Log counts: the axis starts at 0.5 so a bin holding one element is still visible. */
        double ylo = log10(0.5), yhi = log10((double)maxc) + 0.15;
        for (int k = 0; k <= (int)yhi; k++) {
            double y = top + ph - (k - ylo) / (yhi - ylo) * ph;
            char lab[32];
            if (k < 5)
                snprintf(lab, sizeof lab, "%.0f", pow(10, k));
            else
                pow_label(lab, sizeof lab, 10, k);
            fprintf(c.f, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>",
                    left, left + pw, y, y);
            text(c.f, left - 6, y + 4, "end", "tick", lab);
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
                text(c.f, left + (j + 0.5) * bw, top + ph + 15, "middle", "tick", b->labels[j]);
            for (size_t s = 0; s < b->ns; s++) {
                int64_t n = b->counts[s * b->nbins + j];
                if (n <= 0) continue;
                double h = (log10((double)n) - ylo) / (yhi - ylo) * ph;
                double x = left + j * bw + bw * 0.08 + s * gw;
                fprintf(c.f,
                        "<rect class=\"mark\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                        "height=\"%.2f\" fill=\"%s\"><title>",
                        x, top + ph - h, gw, h, b->ss[s]->color);
                html_escape(c.f, b->ss[s]->name);
                fprintf(c.f, ": %s: %" PRId64 "</title></rect>\n", b->ranges[j], n);
                c.marks++;
            }
        }
        if (b->marker >= 0) {
            double x = left + b->marker * bw;
            fprintf(c.f, "<line class=\"limit\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>",
                    x, x, top, top + ph);
            int right_side = x < left + pw * 0.75; /* keep the label inside the plot */
            text(c.f, right_side ? x + 4 : x - 4, top + 12, right_side ? "start" : "end", "tick",
                 b->marker_label);
        }
    }
    text(c.f, left + pw / 2, c.h - 12, "middle", "axis", b->xlabel);
    text(c.f, 14, top + ph / 2, "middle", "axis vert", "elements (log)");
    legend(&c, b->ss, b->ns, left, 18);
    section(out, b->id, b->title, b->note);
    int rc = chart_close(&c, out, b->id, b->title);
    fputs("</section>\n", out);
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
            pow_label(a, sizeof a, 2, k);
            pow_label(b, sizeof b, 2, k + 1);
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

/* One histogram chart over the series: which = 0..3 picks abs/rel/ulp/margin of output `out`
 * from each series' group for `rule` (NULL: the primary group). */
static int hist_chart(FILE *f, const kvf__rmodel *m, const char *id, const char *title,
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
    pow_label(p, sizeof p, 2, lo);
    pow_label(q, sizeof q, 2, hi);
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

static int density_chart(FILE *f, const kvf__rmodel *m) {
    axis2 ax = {0, 0, 0, -1, 0, 0, 1}, ay = {0, 0, 0, -1, 0, 0, 1};
    int64_t *wx = calloc(OCT_N, sizeof *wx), *wy = calloc(OCT_N, sizeof *wy);
    kvf__map *agg = calloc(m->nseries ? m->nseries : 1, sizeof *agg);
    int rc = -1;
    if (!wx || !wy || !agg) goto out;
    for (size_t i = 0; i < m->nseries; i++)
        kvf__map_init(&agg[i], sizeof(int64_t));
    size_t ns = 0;
    for (size_t i = 0; i < m->nseries; i++) {
        if (!m->series[i].primary) continue;
        ns++;
        const kvf__map *d = &m->series[i].primary->out[0].dens;
        kvf__map_iter it10 = {0};
        int64_t key10;
        const void *val10;
        while (kvf__map_next(d, &it10, &key10, &val10)) {
            int64_t n = *(const int64_t *)val10;
            int32_t ao = KVF_DENS_ABS(key10), xo = KVF_DENS_EXACT(key10);
            if (ao == KVF_OCT_ZERO)
                ay.has_zero = 1;
            else if (ao == KVF_OCT_INF)
                ay.has_inf = 1;
            else if (ao >= OCT_MIN && ao < OCT_MIN + OCT_N)
                wy[ao - OCT_MIN] += n;
            if (xo == KVF_OCT_ZERO)
                ax.has_zero = 1;
            else if (xo == KVF_OCT_INF)
                ax.has_inf = 1;
            else if (xo >= OCT_MIN && xo < OCT_MIN + OCT_N)
                wx[xo - OCT_MIN] += n;
        }
    }
    const double left = 64, top = 30, bottom = 56, gap = 24, ph = 260;
    double pw = ns ? (W - left - 16 - gap * (double)(ns - 1)) / (double)ns : W - left - 16;
    if (pw > 420) pw = 420;
    axis2_window(&ax, wx);
    axis2_window(&ay, wy);
    axis2_group(&ax, (int)(pw / 3) - ax.has_zero - ax.has_inf);
    axis2_group(&ay, (int)(ph / 3) - ay.has_zero - ay.has_inf);
    /* Fold every series into the shared window before anything is drawn, so the colour scale
     * is the maximum over what is actually shown. */
    int64_t maxc = 0;
    for (size_t i = 0; i < m->nseries; i++) {
        if (!m->series[i].primary) continue;
        const kvf__map *d = &m->series[i].primary->out[0].dens;
        kvf__map_iter it9 = {0};
        int64_t key9;
        const void *val9;
        while (kvf__map_next(d, &it9, &key9, &val9)) {
            int64_t key = (int64_t)axis2_pos(&ay, KVF_DENS_ABS(key9)) * 65536 +
                          axis2_pos(&ax, KVF_DENS_EXACT(key9));
            int64_t *c = kvf__map_get(&agg[i], key, 1);
            if (!c) goto out;
            *c += *(const int64_t *)val9;
            if (*c > maxc) maxc = *c;
        }
    }
    chart c;
    if (chart_open(&c, W, (int)(top + ph + bottom))) goto out;
    int nx = axis2_n(&ax), ny = axis2_n(&ay);
    if (maxc == 0 || nx == 0 || ny == 0) {
        no_data(&c, "no elements");
    } else {
        double cw = pw / nx, chh = ph / ny, lmax = log10((double)maxc);
        size_t panel = 0;
        for (size_t i = 0; i < m->nseries; i++) {
            const kvf__rseries *s = &m->series[i];
            if (!s->primary) continue;
            double x0 = left + (double)panel++ * (pw + gap);
            fprintf(c.f,
                    "<rect class=\"plot\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                    "height=\"%.1f\"/>\n",
                    x0, top, pw, ph);
            fprintf(c.f,
                    "<rect class=\"legend\" x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" "
                    "fill=\"%s\"/>",
                    x0, top - 19, s->color);
            text(c.f, x0 + 14, top - 10, "start", "lg", s->name);
            const kvf__map *d = &agg[i];
            kvf__map_iter it8 = {0};
            int64_t key8;
            const void *val8;
            while (kvf__map_next(d, &it8, &key8, &val8)) {
                int64_t n = *(const int64_t *)val8;
                int px_i = (int)(key8 % 65536), py_i = (int)(key8 / 65536);
                char col[8], xl[64], yl[64];
                heat(lmax > 0 ? log10((double)n) / lmax : 1, col);
                axis2_label(&ax, px_i, xl, sizeof xl, 1);
                axis2_label(&ay, py_i, yl, sizeof yl, 1);
                /* Hundreds of octaves make cells thinner than a pixel: draw at least 3 px. */
                double rw = fmax(cw, 3), rh = fmax(chh, 3);
                fprintf(c.f,
                        "<rect class=\"mark\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                        "height=\"%.2f\" fill=\"%s\"><title>",
                        x0 + (px_i + 0.5) * cw - rw / 2, top + ph - (py_i + 0.5) * chh - rh / 2, rw,
                        rh, col);
                html_escape(c.f, s->name);
                fprintf(c.f, ": |x| %s, abs %s: %" PRId64 "</title></rect>\n", xl, yl, n);
                c.marks++;
            }
            /* Reference: abs = 2^-8 |exact|, half an ulp of bf16 at the top of a binade; cells
             * above it hold errors larger than correct rounding could make. */
            if (ax.hi >= ax.lo && ay.hi >= ay.lo) {
                double xa = fmax(ax.lo, ay.lo + 8), xb = fmin(ax.hi + 1, ay.hi + 1 + 8);
                if (xa < xb) {
                    double X1 = x0 + (ax.has_zero + (xa - ax.lo) / ax.k) * cw;
                    double X2 = x0 + (ax.has_zero + (xb - ax.lo) / ax.k) * cw;
                    double Y1 = top + ph - (ay.has_zero + (xa - 8 - ay.lo) / ay.k) * chh;
                    double Y2 = top + ph - (ay.has_zero + (xb - 8 - ay.lo) / ay.k) * chh;
                    fprintf(c.f,
                            "<line class=\"ref\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                            "y2=\"%.1f\"><title>abs error = 2\u207b\u2078 |exact| (one bf16 "
                            "ulp at the top of a binade)</title></line>\n",
                            X1, Y1, X2, Y2);
                }
            }
            int nlab = (int)(pw / 48) > 2 ? (int)(pw / 48) : 2; /* ~48 px per label */
            int every = (nx + nlab - 1) / nlab;
            for (int k = 0; k < nx; k += every) {
                char lab[64];
                axis2_label(&ax, k, lab, sizeof lab, 0);
                text(c.f, x0 + (k + 0.5) * cw, top + ph + 14, "middle", "tick", lab);
            }
            if (panel == 1) {
                int everyy = (ny + 9) / 10;
                for (int k = 0; k < ny; k += everyy) {
                    char lab[64];
                    axis2_label(&ay, k, lab, sizeof lab, 0);
                    text(c.f, left - 6, top + ph - (k + 0.5) * chh + 4, "end", "tick", lab);
                }
            }
        }
        heat_legend(&c, W - 16 - 160, c.h - 26, lmax, "elements (log)", 1);
    }
    text(c.f, left + 200, c.h - 12, "middle", "axis", "|exact value| (octaves)");
    text(c.f, 14, top + ph / 2, "middle", "axis vert", "abs error (octaves)");
    section(f, "abs-vs-exact", "o: abs error against |exact|",
            "Density of o elements by the octave of |exact| (x) and of |a - r| (y); colour is "
            "the element count on a log scale shared by all panels. The axes hold the central "
            "99.8% of the elements; cells labelled \u2264 or \u2265 also hold everything beyond. "
            "The error is measured from the correctly rounded value, so a correctly rounded "
            "element is in the 0 row. One bf16 ulp is between 2\u207b\u2078 and 2\u207b\u2077 "
            "of |exact|: the dashed line abs = 2\u207b\u2078 |exact| is one ulp at the top of a "
            "binade, and cells on or above it hold elements one ulp or more off, which a correct "
            "fp32 kernel also produces on long sequences (the strict rule allows them).");
    rc = chart_close(&c, f, "abs-vs-exact", "o abs error against |exact|");
    fputs("</section>\n", f);
out:
    for (size_t i = 0; agg && i < m->nseries; i++)
        kvf__map_free(&agg[i]);
    free(agg);
    free(wx);
    free(wy);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Rel error CDF                                                                               */
/* ------------------------------------------------------------------------------------------ */

/* The x axis starts where the 0.5% smallest non-zero errors end (what lies below is folded
 * into the curve's starting level) and runs to the largest error: the tail is what matters. */
static int cdf_chart(FILE *f, const kvf__rmodel *m) {
    kvf__map all;
    kvf__map_init(&all, sizeof(int64_t));
    int any = 0;
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__group *g = m->series[i].primary;
        if (!g || g->out[0].rel.total == 0) continue;
        any = 1;
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

    /* Starting levels: exact elements plus those below the window. */
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
    /* Zoom on the part of the axis the curves use (most elements are exact), in steps of 0.05,
     * never narrower than [0.8, 1]. */
    ymin = floor(ymin * 20) / 20;
    if (ymin > 0.8) ymin = 0.8;

    const double left = 64, right = 16, top = 30, bottom = 56;
    chart c;
    if (chart_open(&c, W, 300)) return -1;
    double pw = W - left - right, ph = c.h - top - bottom;
    double zero_w = 44; /* a column for "0 or below the axis" left of the log axis */
    double span = (double)(hi + 1 - lo);
    fprintf(c.f, "<rect class=\"plot\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n",
            left, top, pw, ph);
#define CDF_X(q) (left + zero_w + ((q)-lo) / span * (pw - zero_w))
#define CDF_Y(p) (top + ph - ((p)-ymin) / (1 - ymin) * ph)
    /* Ticks at round fractions: a step from 0.01, 0.02, 0.05, 0.1, 0.2 giving at most 5 of
     * them, so the axis reads 0.8, 0.85, 0.9 ... rather than quarters of the zoomed range. */
    static const double steps[] = {0.01, 0.02, 0.05, 0.1, 0.2, 0.25};
    double step = 0.25;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if ((1 - ymin) / steps[i] <= 5.0 + 1e-9) {
            step = steps[i];
            break;
        }
    for (int t = 0; ymin + t * step <= 1 + 1e-9; t++) {
        double p = 1 - (double)((int)((1 - ymin) / step + 0.5) - t) * step;
        if (p < ymin - 1e-9) continue;
        char lab[16];
        snprintf(lab, sizeof lab, "%.2f", p);
        fprintf(c.f, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", left,
                left + pw, CDF_Y(p), CDF_Y(p));
        text(c.f, left - 6, CDF_Y(p) + 4, "end", "tick", lab);
    }
    char lowlab[40], lowp[24];
    pow_label(lowp, sizeof lowp, 2, lo >= 0 ? lo / 4 : -((-lo + 3) / 4));
    snprintf(lowlab, sizeof lowlab, "\u2264%s", lowp);
    text(c.f, left + zero_w / 2, top + ph + 15, "middle", "tick", lowlab);
    /* Decades: the bucket position of 10^k is 4 k log2(10); at most about 12 labels. */
    int klo = (int)ceil(lo / (4 * 3.321928094887362)),
        khi = (int)floor((hi + 1) / (4 * 3.321928094887362));
    int kstep = (khi - klo) / 12 + 1;
    for (int k = klo; k <= khi; k++) {
        double q = 4 * k * 3.321928094887362;
        fprintf(c.f, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>",
                CDF_X(q), CDF_X(q), top, top + ph);
        /* Keep clear of the "≤2⁻²⁴" label centred in the zero column. */
        if ((k - klo) % kstep || CDF_X(q) < left + zero_w + 36) continue;
        char lab[24];
        pow_label(lab, sizeof lab, 10, k);
        text(c.f, CDF_X(q), top + ph + 15, "middle", "tick", lab);
    }
    const kvf__rseries **ss = malloc((m->nseries ? m->nseries : 1) * sizeof *ss);
    if (!ss) {
        fclose(c.f);
        free(c.buf);
        return -1;
    }
    size_t ns = 0;
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__rseries *s = &m->series[i];
        const kvf__group *g = s->primary;
        if (!g || g->out[0].rel.total == 0) continue;
        ss[ns++] = s;
        const kvf__hist *h = &g->out[0].rel;
        double total = (double)h->total, cum = (double)h->zero;
        kvf__map_iter it5 = {0};
        int64_t key5;
        const void *val5;
        while (kvf__map_next(&h->buckets, &it5, &key5, &val5))
            if (key5 < lo) cum += (double)*(const int64_t *)val5;
        fprintf(c.f, "<path class=\"mark cdf\" stroke=\"%s\" d=\"M%.1f,%.2f L%.1f,%.2f", s->color,
                left, CDF_Y(cum / total), left + zero_w, CDF_Y(cum / total));
        for (int q = lo; q <= hi; q++) {
            const int64_t *n = kvf__map_find(&h->buckets, q);
            if (!n) continue;
            /* Within a bucket the CDF rises linearly from its left to its right edge. */
            fprintf(c.f, " L%.1f,%.2f", CDF_X(q), CDF_Y(cum / total));
            cum += (double)*n;
            fprintf(c.f, " L%.1f,%.2f", CDF_X(q + 1), CDF_Y(cum / total));
        }
        fprintf(c.f, " L%.1f,%.2f\"><title>", left + pw, CDF_Y(cum / total));
        html_escape(c.f, s->name);
        fprintf(c.f, ": %.6g of %" PRId64 " elements have a finite rel error</title></path>\n",
                cum / total, h->total);
        c.marks++;
    }
#undef CDF_X
#undef CDF_Y
    if (!any) no_data(&c, "no elements");
    legend(&c, ss, ns, left, 18);
    free(ss);
    text(c.f, left + pw / 2, c.h - 12, "middle", "axis", "rel error |a - r| / (|r| + 1e-8)");
    text(c.f, 14, top + ph / 2, "middle", "axis vert", "fraction \u2264 x");
    section(f, "rel-cdf", "o: rel error CDF",
            "Fraction of o elements whose rel error is at most x (log x axis; the leftmost "
            "column holds the elements with no error and the smallest 0.5% of the errors, or at "
            "least those below 2\u207b\u00b2\u2074). The y axis "
            "is zoomed to the range the curves use. A curve that ends below 1 has NaN or "
            "infinite errors.");
    int rc = chart_close(&c, f, "rel-cdf", "o rel error CDF");
    fputs("</section>\n", f);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Heatmaps                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static double cell_bits(const kvf__cell *c) {
    return c->bits_n ? (double)c->bits_sum / KVF_BITS_SCALE / (double)c->bits_n : NAN;
}

static void cell_rect(chart *c, double x, double y, double w, double h, const kvf__cell *cell,
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
    html_escape(c->f, series);
    /* Tooltips are most of the page's bytes: keep them terse. */
    fprintf(c->f,
            ", %s: n %" PRId64 ", bits %.3g, max ulp %" PRId64 ", max abs %s, NaN/inf %" PRId64
            ", %" PRId64 " fail ",
            what, cell->n, isnan(bits) ? 0.0 : bits, cell->max_ulps, abs, cell->nonfinite,
            cell->fails);
    html_escape(c->f, rule);
    fprintf(c->f, ", max margin %s</title></rect>\n", margin);
    c->marks++;
}

/* Rows are series, columns the keys of one coordinate class (union over the series). */
static int class_heatmap(FILE *f, const kvf__rmodel *m, int out, int kind, const char *id,
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
    chart c;
    if (chart_open(&c, W, (int)(top + rowh * (double)(nrows ? nrows : 1) + bottom))) return -1;
    double pw = W - left - right;
    if (kmax < 0) {
        no_data(&c, "no elements");
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
            text(c.f, 20, y + 14, "start", "lg", s->name);
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
            text(c.f, left + (k + 0.5) * cw, ylab, "middle", "tick", lab);
        }
        heat_legend(&c, W - right - 160, c.h - 26, hi, "mean bits of error", 0);
    }
    text(c.f, left + pw / 2 - 100, c.h - 12, "middle", "axis", xlabel);
    section(f, id, title, note);
    int rc = chart_close(&c, f, id, title);
    fputs("</section>\n", f);
    return rc;
}

/* One panel per series: rows are page sizes, columns the slot of the row's last token. */
static int slot_heatmap(FILE *f, const kvf__rmodel *m) {
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
    chart c;
    if (chart_open(&c, W, (int)(8 + (panel_h + gap) * (double)(npanels ? npanels : 1) + bottom)))
        return -1;
    double pw = W - left - right;
    if (nsizes == 0) {
        no_data(&c, "no non-empty sequences");
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
            text(c.f, left + 14, y0 + 11, "start", "lg", s->name);
            for (int r = 0; r < nsizes; r++) {
                double y = y0 + head + r * rowh;
                char lab[32];
                snprintf(lab, sizeof lab, "page size %d", (int)sizes[r]);
                text(c.f, left - 6, y + rowh - 3, "end", "tick", lab);
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
            text(c.f, left + (k + 0.5) * cw, c.h - bottom + 10, "middle", "tick", lab);
        }
        heat_legend(&c, W - right - 160, c.h - 28, hi, "mean bits of error", 0);
    }
    text(c.f, left + pw / 2 - 100, c.h - 10, "middle", "axis",
         "slot of the last token in its page, (L - 1) mod page size");
    section(f, "heat-slot", "o: error by position within page",
            "Mean bits of error log2(ulps + 1) of o, by the page size (rows) and the slot that "
            "the sequence's last token occupies in its last page (columns; the rightmost cell "
            "of a row is a full last page). Page-table and last-page-length bugs show up here.");
    int rc = chart_close(&c, f, "heat-slot", "o error by position within page");
    fputs("</section>\n", f);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Tables                                                                                      */
/* ------------------------------------------------------------------------------------------ */

static void td_num(FILE *f, double x) {
    char b[32];
    kvf__fmt_num(b, sizeof b, x);
    fprintf(f, "<td class=\"n\">%s</td>", b);
}

/* A margin as everywhere else (kvf_margin_text): below 1 never rounded up to "1". */
static void td_margin(FILE *f, double m) {
    char b[32];
    kvf_margin_text(b, sizeof b, m);
    fprintf(f, "<td class=\"n\">%s</td>", b);
}

static void td_i64(FILE *f, int64_t x) {
    fprintf(f, "<td class=\"n\">%" PRId64 "</td>", x);
}

static void swatch(FILE *f, const kvf__rseries *s) {
    fprintf(f, "<td><span class=\"sw\" style=\"background:%s\"></span>", s->color);
    html_escape(f, s->name);
    fputs("</td>", f);
}

static void figures_table(FILE *f, const kvf__rmodel *m) {
    fputs("<section id=\"sec-figures\"><h2>Key figures</h2>\n<p class=\"note\">Per series under "
          "its primary rule (strict when judged, else the rule with the most elements). ULP "
          "distances are from the correctly rounded value; p99 is an upper bound read from its "
          "histogram bucket; bits = mean log2(ulps + 1); margin = error / allowance, above 1 "
          "fails; excess = the margin beyond the final rounding, the headroom a kernel actually "
          "uses (0 for the correctly rounded value, which always passes with margin 0). "
          "Failed counts kernel failures only; cases failing only on rows out of the input "
          "model are in their own column and panel, and every figure here is over in-model "
          "rows. o max abs is the largest |kernel - exact| in o's own units, so it is large on "
          "cases whose values reach 1e30 while o max ulp stays small. "
          "lse's ulp distance is huge where the exact lse is 0 or near it (a sum of "
          "exponentials near 1): an error of 1e-7 there is hundreds of millions of f32 ulps. "
          "The rules bound lse's error relative to its conditioning, so the margin, not the "
          "ulp distance, says how close a kernel came to failing.</p>\n"
          "<div class=\"tw\"><table><tr><th>series</th><th>rule</th><th>cases</th>"
          "<th>failed</th>"
          "<th>out of model</th>"
          "<th>o elements</th><th>o violations</th><th>o max ulp</th><th>o p99 ulp</th>"
          "<th>o bits</th><th>o max abs</th><th>lse violations</th>"
          "<th>lse max ulp</th><th>max margin</th><th>max excess</th>"
          "<th>NaN/inf mismatches</th>"
          "<th>run errors</th></tr>\n",
          f);
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__rseries *s = &m->series[i];
        const kvf__group *g = s->primary;
        fputs("<tr>", f);
        swatch(f, s);
        if (!g) {
            fputs("<td colspan=\"15\">no judged elements</td>", f);
        } else {
            const kvf__outstats *o = &g->out[0], *l = &g->out[1];
            fputs("<td>", f);
            html_escape(f, g->rule);
            fputs("</td>", f);
            td_i64(f, g->cases);
            kvf_verdict_counts vc;
            kvf__report_verdict(m, s, g, &vc);
            int64_t failed = kvf_verdict_counts_failed(&vc);
            fprintf(f, "<td class=\"n%s\">%" PRId64 "</td>", failed ? " bad" : "", failed);
            td_i64(f, g->out_of_model);
            td_i64(f, o->elements);
            td_i64(f, o->violations);
            td_i64(f, o->max_ulps);
            int64_t p99 = kvf__outstats_ulp_quantile(o, 0.99);
            if (p99 < 0)
                fputs("<td class=\"n\">NaN</td>", f);
            else
                td_i64(f, p99);
            td_num(f, kvf__outstats_mean_bits(o));
            td_num(f, o->max_abs);
            td_i64(f, l->violations);
            td_i64(f, l->max_ulps);
            td_margin(f, fmax(o->max_margin, l->max_margin));
            td_margin(f, fmax(o->max_excess, l->max_excess));
            td_i64(f, o->nonfinite + l->nonfinite);
        }
        fprintf(f, "<td class=\"n\">%" PRId64 "</td></tr>\n", kvf__rseries_run_errors(s));
    }
    fputs("</table></div>\n", f);
    /* Verdicts under every rule. */
    fputs("<h3>Verdicts by rule</h3><table><tr><th>series</th>", f);
    for (size_t r = 0; r < m->nrules; r++) {
        fputs("<th>", f);
        html_escape(f, m->rules[r]);
        fputs("</th>", f);
    }
    fputs("</tr>\n", f);
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__rseries *s = &m->series[i];
        fputs("<tr>", f);
        swatch(f, s);
        for (size_t r = 0; r < m->nrules; r++) {
            const kvf__group *g = kvf__rseries_group(s, m->rules[r]);
            if (!g) {
                fputs("<td>-</td>", f);
                continue;
            }
            kvf_verdict_counts vc;
            kvf__report_verdict(m, s, g, &vc);
            char sentence[1024];
            kvf__report_sentence(m, s, g, sentence, sizeof sentence);
            fprintf(f, "<td%s>", kvf_verdict_counts_failed(&vc) ? " class=\"bad\"" : "");
            html_escape(f, sentence);
            for (int c = 1; c < KVF_FINDING_CLASS_COUNT; c++)
                if (g->findings[c])
                    fprintf(f, "<br>%" PRId64 " %s", g->findings[c],
                            kvf_finding_class_name((kvf_finding_class)c));
            if (g->out_of_model)
                fprintf(f, "<br><span class=\"dim\">%" PRId64 " out of the model</span>",
                        g->out_of_model);
            if (g->rejects_rounded)
                fprintf(f,
                        "<br><span class=\"dim\">%" PRId64
                        " rejected although correctly rounded (benign)</span>",
                        g->rejects_rounded);
            fputs("</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</table></section>\n", f);
}

static void case_cell(FILE *f, const kvf__rmodel *m, const kvf__case_info *ci) {
    fputs("<td>", f);
    if (!ci) {
        fputs("-</td>", f);
        return;
    }
    char label[256];
    if (ci->path) {
        const char *base = strrchr(ci->path, '/') ? strrchr(ci->path, '/') + 1 : ci->path;
        snprintf(label, sizeof label, "%s", base);
    } else {
        snprintf(label, sizeof label, "%016" PRIx64, ci->hash);
    }
    char *link = kvf__report_case_link(m, ci);
    if (link) {
        fputs("<a href=\"", f);
        html_escape(f, link);
        fputs("\">", f);
        html_escape(f, label);
        fputs("</a>", f);
        free(link);
    } else {
        html_escape(f, label);
    }
    if (ci->has_hash) fprintf(f, " <span class=\"dim\">%016" PRIx64 "</span>", ci->hash);
    fputs("</td>", f);
}

/* Rows shown per series: in-model elements are the kernel's headroom and get more; out-of-model
 * rows usually repeat one overflowing case, so a few show what they look like. */
#define WORST_SHOWN 10
#define WORST_SHOWN_OUT_OF_MODEL 3

/* Rows of the worst elements of one series under one group, o and lse merged by rank; oom
 * picks the out-of-model statistics. */
static void worst_rows(FILE *f, const kvf__rmodel *m, const kvf__rseries *s, const kvf__group *g,
                       int oom) {
    const kvf__outstats *o = oom ? &g->oom[0] : &g->out[0], *l = oom ? &g->oom[1] : &g->out[1];
    const int limit = oom ? WORST_SHOWN_OUT_OF_MODEL : WORST_SHOWN;
    int io = 0, il = 0;
    for (int shown = 0; shown < limit && (io < o->worst_count || il < l->worst_count); shown++) {
        const kvf__worst *w;
        int is_lse;
        if (il >= l->worst_count ||
            (io < o->worst_count && kvf__worst_cmp(&o->worst[io], &l->worst[il]) <= 0)) {
            w = &o->worst[io++];
            is_lse = 0;
        } else {
            w = &l->worst[il++];
            is_lse = 1;
        }
        const kvf_element_error *e = &w->e;
        fputs("<tr>", f);
        swatch(f, s);
        fputs("<td>", f);
        html_escape(f, g->rule);
        fputs("</td>", f);
        case_cell(f, m, w->ci);
        fprintf(f, "<td>%s</td>", is_lse ? "lse" : "o");
        td_i64(f, e->b);
        td_i64(f, e->h);
        fputs(is_lse ? "<td class=\"n\">-</td>" : "", f);
        if (!is_lse) td_i64(f, e->d);
        td_i64(f, w->seq_len);
        td_i64(f, w->page_size);
        char a[40], r[40], x[40];
        snprintf(a, sizeof a, "%.6g", e->kernel_value);
        snprintf(r, sizeof r, "%.6g", e->rounded_value);
        snprintf(x, sizeof x, "%.9g", e->exact_value);
        fprintf(f, "<td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td>", a, r,
                x);
        td_num(f, e->abs_error);
        if (e->ulps < 0)
            fputs("<td class=\"n\">NaN/inf</td>", f);
        else
            td_i64(f, e->ulps);
        td_margin(f, e->margin);
        td_margin(f, e->excess_margin);
        /* Out of the model, a failure is not the kernel's: say so next to the verdict. */
        fprintf(f, "<td%s>%s</td></tr>\n", e->fails && !oom ? " class=\"bad\"" : "",
                e->fails ? (oom ? "fails (out of model)" : "fails") : "passes");
    }
}

static const char WORST_HEAD[] =
    "<div class=\"tw\"><table><tr><th>series</th><th>rule</th><th>case</th><th>out</th>"
    "<th>b</th><th>h</th>"
    "<th>d</th><th>L</th><th>page size</th><th>kernel</th><th>rounded</th><th>exact</th>"
    "<th>abs</th><th>ulps</th><th>margin</th><th>excess</th><th></th></tr>\n";

static void worst_table(FILE *f, const kvf__rmodel *m) {
    fputs("<section id=\"sec-worst\"><h2>Worst elements</h2>\n<p class=\"note\">The "
          "elements of in-model rows that use most of the rule's headroom (ranked by excess "
          "margin, then margin), per series under its primary rule, o and lse together "
          "(errors.csv has every kept element under every rule; rows out of the input model "
          "have their own panel). An element many ulps from the correctly rounded value can pass: "
          "where the terms of the weighted sum of v cancel, so that |o| is far below the mean "
          "|v| under the softmax weights, fp32 accumulation legitimately loses that much and "
          "the rules allow for it (docs/strict-rule.md). Case links open the case file: replay "
          "it with <code>kvfuzz replay --kernel K FILE</code>.</p>\n",
          f);
    fputs(WORST_HEAD, f);
    for (size_t i = 0; i < m->nseries; i++)
        if (m->series[i].primary) worst_rows(f, m, &m->series[i], m->series[i].primary, 0);
    fputs("</table></div></section>\n", f);
}

/* Rows out of the input model (logits an fp32 kernel cannot hold, non-finite inputs): counted
 * and shown here, never among a kernel's failures (docs/design.md, "The oracle"). */
static void out_of_model_panel(FILE *f, const kvf__rmodel *m) {
    fputs("<section id=\"sec-out-of-model\"><h2>Rows out of the input model</h2>\n"
          "<p class=\"note\">Rows whose logits leave the f32 range (the overflow class) or "
          "that read a non-finite input have no defined fp32 answer; their elements are counted "
          "here, apart from the figures above, and a case that fails only on them is not a "
          "kernel failure unless the run required it (<code>--require-overflow</code>).</p>\n",
          f);
    int any = 0;
    for (size_t i = 0; i < m->nseries; i++)
        for (size_t g = 0; g < m->series[i].ngroups; g++) {
            const kvf__group *gr = m->series[i].groups[g];
            any |= gr->oom[0].elements + gr->oom[1].elements > 0 || gr->out_of_model > 0;
        }
    if (!any) {
        fputs("<p>No judged element was on a row out of the model.</p></section>\n", f);
        return;
    }
    fputs("<table><tr><th>series</th><th>rule</th><th>cases failing only there</th>"
          "<th>overflow required</th><th>o elements</th><th>o violations</th>"
          "<th>lse elements</th><th>lse violations</th><th>NaN/inf mismatches</th></tr>\n",
          f);
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__rseries *s = &m->series[i];
        for (size_t g = 0; g < s->ngroups; g++) {
            const kvf__group *gr = s->groups[g];
            const kvf__outstats *o = &gr->oom[0], *l = &gr->oom[1];
            if (o->elements + l->elements == 0 && gr->out_of_model == 0) continue;
            fputs("<tr>", f);
            swatch(f, s);
            fputs("<td>", f);
            html_escape(f, gr->rule);
            fputs("</td>", f);
            td_i64(f, gr->out_of_model);
            fprintf(f, "<td>%s</td>", s->st->require_overflow ? "yes" : "no");
            td_i64(f, o->elements);
            td_i64(f, o->violations);
            td_i64(f, l->elements);
            td_i64(f, l->violations);
            td_i64(f, o->nonfinite + l->nonfinite);
            fputs("</tr>\n", f);
        }
    }
    fputs("</table>\n<h3>Their worst elements</h3>\n<p class=\"note\">The first few per "
          "series; errors.csv has all kept ones.</p>\n",
          f);
    fputs(WORST_HEAD, f);
    for (size_t i = 0; i < m->nseries; i++)
        if (m->series[i].primary) worst_rows(f, m, &m->series[i], m->series[i].primary, 1);
    fputs("</table></div></section>\n", f);
}

/* A run spread over several GPUs: the rate of each, and why one retired. */
static void source_devices(FILE *f, const kvf__source *src) {
    for (size_t k = 0; k < src->ndevices; k++) {
        const kvf_stats_device *d = &src->devices[k];
        fprintf(f, "%s device %d: %" PRId64 " cases (%.1f/s)", k ? ";" : " (", d->ordinal, d->cases,
                d->seconds > 0 ? (double)d->cases / d->seconds : 0.0);
        if (d->crashes || d->hangs || d->kernel_errors)
            fprintf(f, ", %" PRId64 " crash(es), %" PRId64 " hang(s), %" PRId64 " kernel error(s)",
                    d->crashes, d->hangs, d->kernel_errors);
        if (d->retired) {
            fprintf(f, ", <span class=\"bad\">retired after %.1f s</span>", d->seconds);
            if (d->why[0]) {
                fputs(": ", f);
                html_escape(f, d->why);
            }
        }
        if (k + 1 == src->ndevices) fputs(")", f);
    }
}

/* The answer first: one banner for the whole report and one line per series and rule. */
static void verdict_banner(FILE *f, const kvf__rmodel *m) {
    char detail[1024];
    kvf__failure failure = kvf__report_overall(m, detail, sizeof detail);
    static const char *const failure_names[] = {"none", "defect", "precision"};
    int fails = failure != KVF__FAILURE_NONE;
    /* A kernel whose every failure lies within a looser precision model still fails what it
     * declared (the same FAIL and data-verdict); data-failure and the line under the heading
     * say that no defect was found. */
    fprintf(f,
            "<section id=\"kvf-verdict\" class=\"verdict %s\" data-verdict=\"%s\" "
            "data-failure=\"%s\"><h2>Verdict: %s</h2>\n",
            fails ? "vfail" : "vpass", fails ? "fail" : "pass", failure_names[failure],
            fails ? "FAIL" : "PASS");
    if (detail[0]) {
        fputs("<p class=\"vdetail\">", f);
        html_escape(f, detail);
        fputs("</p>\n", f);
    }
    fputs("<ul>\n", f);
    for (size_t i = 0; i < m->nseries; i++) {
        const kvf__rseries *s = &m->series[i];
        for (size_t g = 0; g < s->ngroups; g++) {
            kvf_verdict_counts vc;
            kvf__report_verdict(m, s, s->groups[g], &vc);
            char sentence[1024], notes[1024];
            kvf__report_sentence(m, s, s->groups[g], sentence, sizeof sentence);
            kvf_verdict_counts_notes(&vc, "", notes, sizeof notes);
            fprintf(f, "<li data-series=\"%zu\" data-rule-verdict=\"%s\"><b>", i,
                    kvf_verdict_counts_failed(&vc) ? "fail" : "pass");
            html_escape(f, s->name);
            fputs("</b> under <b>", f);
            html_escape(f, s->groups[g]->rule);
            fputs("</b>: ", f);
            html_escape(f, sentence);
            /* One line per benign failure kind (the notes end each line with '\n'). */
            for (char *line = notes, *nl; *line; line = nl + 1) {
                nl = strchr(line, '\n');
                if (!nl) break;
                *nl = '\0';
                fputs("<br><span class=\"dim\">", f);
                html_escape(f, line);
                fputs("</span>", f);
            }
            fputs("</li>\n", f);
        }
        if (kvf__rseries_run_errors(s)) {
            fputs("<li data-rule-verdict=\"fail\"><b>", f);
            html_escape(f, s->name);
            fprintf(f,
                    "</b>: FAILS: %" PRId64 " run error(s) (kernel errors, crashes, hangs, "
                    "nondeterminism)</li>\n",
                    kvf__rseries_run_errors(s));
        }
    }
    fputs("</ul></section>\n", f);
}

/* The model strict and fa judged each series under (the kernel's declared model, or
 * --precision), which the rule names above carry when it is not f32. */
static void precision_note(FILE *f, const kvf__rmodel *m) {
    char shared[256];
    int models = kvf__report_precision_shared(m, shared, sizeof shared);
    if (!models) return;
    fputs("<p class=\"note\" id=\"kvf-precision\">Precision model judged by strict and fa "
          "(declared by the kernel, or given with --precision; a rule name carries it when it is "
          "not f32, as in strict:bf16-p):",
          f);
    if (models == 1) {
        fputs(" <b>", f);
        html_escape(f, shared);
        fputs("</b> for every series", f);
    } else {
        const char *sep = " ";
        for (size_t i = 0; i < m->nseries; i++) {
            char p[256];
            kvf__rseries_precision(&m->series[i], p, sizeof p);
            if (!p[0]) continue;
            fputs(sep, f);
            html_escape(f, m->series[i].name);
            fputs(" <b>", f);
            html_escape(f, p);
            fputs("</b>", f);
            sep = "; ";
        }
    }
    fputs(". Findings that fail it but lie within a looser model are attributed to that model "
          "(precision below what was declared), the others are defects.</p>\n",
          f);
}

static void link_or_dash(FILE *f, const char *href, const char *label) {
    if (!href) {
        fputs("-", f);
        return;
    }
    fputs("<a href=\"", f);
    html_escape(f, href);
    fputs("\">", f);
    html_escape(f, label);
    fputs("</a>", f);
}

/* The fuzzer's own sentence (or why the member could not be read) as the tooltip. */
static void attribution_cell(FILE *f, const kvf__rattribution *a) {
    static const char *const kinds[] = {"none", "precision", "defect", "malformed"};
    char cell[160];
    kvf__attr_cell(a, cell, sizeof cell);
    fprintf(f, "<td class=\"attr%s\" data-attribution=\"%s\"",
            a->kind == KVF__ATTR_PRECISION   ? " prec"
            : a->kind == KVF__ATTR_MALFORMED ? " bad"
                                             : "",
            kinds[a->kind]);
    const char *tip = a->error ? a->error : a->text;
    if (tip) {
        fputs(" title=\"", f);
        html_escape(f, tip);
        fputs("\"", f);
    }
    fputs(">", f);
    html_escape(f, cell);
    fputs("</td>", f);
}

static void findings_table(FILE *f, const kvf__rmodel *m) {
    fputs("<section id=\"sec-findings\"><h2>Findings</h2>\n", f);
    if (m->nfinding_dirs == 0) {
        fputs("<p class=\"note\">No findings directory: the stats files recorded none and "
              "<code>--findings DIR</code> was not given.</p></section>\n",
              f);
        return;
    }
    fprintf(f, "<p class=\"note\">%zu finding(s) in", m->nfindings);
    for (size_t i = 0; i < m->nfinding_dirs; i++) {
        fputs(" <code>", f);
        html_escape(f, m->finding_dirs[i]);
        fputs("</code>", f);
        if (m->finding_dir_notes[i]) {
            fputs(" (", f);
            html_escape(f, m->finding_dir_notes[i]);
            fputs(")", f);
        }
    }
    fputs(". Each is a case file and a JSON report named &lt;class&gt;-&lt;hash&gt;. "
          "Attribution: <i>precision</i> when a looser precision model than the one declared "
          "accepts the finding (the kernel fails what it declared, but no defect is shown; "
          "hover for the model's roundings), <i>defect</i> when none does or the finding was "
          "not attributed (crashes, older findings).</p>\n",
          f);
    for (size_t i = 0; i < m->nfindings; i++)
        if (m->findings[i].attr.error) {
            fputs("<p class=\"note bad attr-error\">", f);
            html_escape(f, m->findings[i].attr.error);
            fputs("; the finding counts as not attributed (a defect).</p>\n", f);
        }
    if (m->nfindings) {
        fputs("<table><tr><th>class</th><th>hash</th><th>case</th><th>report</th>"
              "<th>kernel</th><th>rule</th><th>attribution</th><th>detail</th></tr>\n",
              f);
        for (size_t i = 0; i < m->nfindings; i++) {
            const kvf__rfinding *fd = &m->findings[i];
            fputs("<tr><td>", f);
            html_escape(f, fd->cls);
            fputs("</td><td><code>", f);
            html_escape(f, fd->hash);
            fputs("</code></td><td>", f);
            link_or_dash(f, fd->kvfz, ".kvfz");
            fputs("</td><td>", f);
            link_or_dash(f, fd->json, ".json");
            fputs("</td><td>", f);
            html_escape(f, fd->kernel ? fd->kernel : "");
            fputs("</td><td>", f);
            html_escape(f, fd->rule ? fd->rule : "");
            fputs("</td>", f);
            attribution_cell(f, &fd->attr);
            fputs("<td>", f);
            html_escape(f, fd->detail ? fd->detail : "");
            fputs("</td></tr>\n", f);
        }
        fputs("</table>\n", f);
    }
    fputs("</section>\n", f);
}

/* ------------------------------------------------------------------------------------------ */
/* The page                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static const char CSS[] =
    "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;"
    "max-width:1000px;color:#222;padding:0 12px}\n"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px "
    "solid #ddd}h3{font-size:15px;margin:18px 0 2px}\n"
    ".note{color:#555;margin:2px 0 8px;font-size:13px}.dim{color:#888;font-size:12px}\n"
    "table{border-collapse:collapse;font-size:12.5px;margin:6px 0}"
    ".tw{overflow-x:auto;max-width:100%}.tw table{font-size:11.5px}"
    "td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}"
    "th{background:#f4f4f4}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".bad{color:#b00020;font-weight:600}\n"
    ".verdict{border:2px solid;border-radius:6px;padding:4px 14px;margin:12px 0}"
    ".verdict h2{border:0;margin:6px 0}.vpass{border-color:#2e933c;background:#eef8ef}"
    ".vfail{border-color:#b00020;background:#fdeef0}.vdetail{margin:2px 0 6px;font-weight:600}"
    ".prec{color:#8a5a00}\n"
    ".sw{display:inline-block;width:10px;height:10px;margin-right:6px;border-radius:2px}\n"
    "svg.chart{display:block;max-width:100%;height:auto}"
    "svg text{font:11px system-ui,sans-serif;fill:#333}svg text.axis{font-size:12px}"
    "svg text.vert{writing-mode:vertical-rl;transform-box:fill-box;transform-origin:center;"
    "transform:rotate(180deg)}svg text.nodata{font-size:14px;fill:#888}\n"
    "svg .plot{fill:#f6f6f6}svg .grid{stroke:#e2e2e2}svg .limit{stroke:#b00020;"
    "stroke-dasharray:5 3;stroke-width:1.5}svg .ref{stroke:#333;stroke-dasharray:4 3}"
    "svg .cdf{fill:none;stroke-width:2}svg rect.mark:hover{stroke:#000}\n"
    "#kvf-status{display:none}#kvf-errors{color:#b00020}\n";

/* Records script errors into the page itself, where a headless browser's --dump-dom sees them;
 * defined first so that it catches errors in everything after it. */
static const char JS_ERRORS[] =
    "<script>\n"
    "(function () {\n"
    "  function record(text) {\n"
    "    var li = document.createElement('li');\n"
    "    li.textContent = text;\n"
    "    (document.getElementById('kvf-errors') || document.body).appendChild(li);\n"
    "  }\n"
    "  window.onerror = function (msg, src, line) { record('error: ' + msg + ' at line ' + line); "
    "};\n"
    "  window.addEventListener('unhandledrejection', function (e) {\n"
    "    record('unhandled rejection: ' + e.reason);\n"
    "  });\n"
    "  var consoleError = console.error;\n"
    "  console.error = function () {\n"
    "    record('console.error: ' + Array.prototype.join.call(arguments, ' '));\n"
    "    consoleError.apply(console, arguments);\n"
    "  };\n"
    "})();\n"
    "</script>\n";

/* The self-check: every chart is present, has the marks its data-marks attribute promises and
 * takes up space on the page; no script error was recorded. */
static const char JS_CHECK[] =
    "<script>\n"
    "(function () {\n"
    "  var status = document.getElementById('kvf-status');\n"
    "  var charts = document.querySelectorAll('svg.chart');\n"
    "  var want = +status.getAttribute('data-charts'), bad = [], marks = 0;\n"
    "  charts.forEach(function (svg) {\n"
    "    var expected = +svg.getAttribute('data-marks');\n"
    "    var got = svg.querySelectorAll('.mark').length;\n"
    "    var box = svg.getBoundingClientRect();\n"
    "    marks += got;\n"
    "    if (got !== expected || !(box.width > 0 && box.height > 0))\n"
    "      bad.push(svg.id + ' ' + got + '/' + expected + ' marks ' +\n"
    "               Math.round(box.width) + 'x' + Math.round(box.height));\n"
    "  });\n"
    "  if (charts.length !== want) bad.push(charts.length + ' charts, expected ' + want);\n"
    "  var verdict = document.getElementById('kvf-verdict');\n"
    "  var vbox = verdict ? verdict.getBoundingClientRect() : null;\n"
    "  if (!vbox || !(vbox.height > 0) || vbox.top > charts[0].getBoundingClientRect().top)\n"
    "    bad.push('the verdict banner is missing, hidden or below the charts');\n"
    "  var errors = document.getElementById('kvf-errors').children.length;\n"
    "  var ok = bad.length === 0 && errors === 0;\n"
    "  status.setAttribute('data-state', ok ? 'ok' : 'fail');\n"
    "  status.textContent = (ok ? 'OK' : 'FAIL') + ' charts=' + charts.length + ' marks=' +\n"
    "      marks + ' errors=' + errors + ' verdict=' +\n"
    "      (verdict ? verdict.getAttribute('data-verdict') : 'none') +\n"
    "      (bad.length ? ' bad: ' + bad.join('; ') : '');\n"
    "})();\n"
    "</script>\n";

int kvf__report_write_html(FILE *f, const kvf__rmodel *m) {
    int charts = 0, rc = 0;
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
          f);
    html_escape(f, m->title);
    fprintf(f, "</title>\n<style>\n%s</style>\n%s</head><body>\n<h1>", CSS, JS_ERRORS);
    html_escape(f, m->title);
    fputs("</h1>\n", f);
    verdict_banner(f, m);
    fprintf(f, "<p class=\"note\">Generated %s from %zu stats file(s), %zu series:", m->generated,
            m->ninputs, m->nseries);
    for (size_t i = 0; i < m->nseries; i++) {
        fprintf(f, " <span class=\"sw\" style=\"background:%s\"></span>", m->series[i].color);
        html_escape(f, m->series[i].name);
    }
    fputs(".</p>\n", f);
    precision_note(f, m);
    fputs("<ul class=\"note\">", f);
    for (size_t i = 0; i < m->ninputs; i++) {
        const kvf_stats *st = m->inputs[i].stats;
        fputs("<li><b>", f);
        html_escape(f, m->labels[i]);
        fputs("</b>: <code>", f);
        html_escape(f, m->inputs[i].path ? m->inputs[i].path : "(in memory)");
        fprintf(f, "</code>, %zu run(s) merged", st->nsources);
        for (size_t s = 0; s < st->nsources && s < 3; s++) {
            fputs(s ? "; " : ": ", f);
            html_escape(f, st->sources[s].command ? st->sources[s].command : "?");
            fputs(" on ", f);
            html_escape(f, st->sources[s].host ? st->sources[s].host : "?");
            fputs(", last written ", f);
            html_escape(f, st->sources[s].written ? st->sources[s].written : "?");
            source_devices(f, &st->sources[s]);
        }
        if (st->nsources > 3) fputs("; ...", f);
        if (st->incomplete) fputs(" <span class=\"bad\">incomplete: memory ran out</span>", f);
        fputs("</li>\n", f);
    }
    fputs("</ul>\n", f);
    figures_table(f, m);
    out_of_model_panel(f, m);

    fputs("<h2>Error distributions</h2>\n<p class=\"note\">Each series is drawn from its primary "
          "rule's statistics (the error itself does not depend on the rule); all series share "
          "the axes and colour scales. Hover a mark for its numbers.</p>\n",
          f);
    rc |= hist_chart(f, m, "ulp-hist", "o: ULP distance histogram",
                     "o elements by their distance in bf16 units in the last place from the "
                     "correctly rounded value (0 = correctly rounded), log counts. Bins are "
                     "octaves labelled by their lower end; NaN counts a NaN on one side only.",
                     "ULP distance from the correctly rounded value (bf16)", NULL, 0, 2, 1, 0);
    charts++;
    rc |= density_chart(f, m);
    charts++;
    rc |= cdf_chart(f, m);
    charts++;
    for (size_t r = 0; r < m->nrules; r++) {
        char id[96], title[160];
        snprintf(id, sizeof id, "margin-%zu", r);
        snprintf(title, sizeof title, "Rule margin histogram: %s", m->rules[r]);
        rc |= hist_chart(f, m, id, title,
                         "o elements by the rule's margin: its error measure divided by its "
                         "allowance for that element. Elements right of the dashed line "
                         "(margin above 1) fail the rule; 0 means no error. Octave bins, log "
                         "counts; a first bin labelled \u2264 also holds every smaller margin.",
                         "margin (error / allowance)", m->rules[r], 0, 3, 0, 1);
        charts++;
    }
    rc |= class_heatmap(f, m, 0, KVF_CLASS_HEAD, "heat-head", "o: error by q head",
                        "Mean bits of error log2(ulps + 1) of o per query head (columns) for each "
                        "series (rows); black cells hold only NaN/inf mismatches. A GQA mapping "
                        "bug lights up whole groups of heads.",
                        "q head");
    charts++;
    rc |= slot_heatmap(f, m);
    charts++;
    rc |= class_heatmap(f, m, 0, KVF_CLASS_DIM, "heat-dim", "o: error by head-dim index",
                        "Mean bits of error of o per head-dim index d.", "head-dim index d");
    charts++;
    rc |= class_heatmap(f, m, 0, KVF_CLASS_SEQLEN, "heat-seqlen", "o: error by sequence length",
                        "Mean bits of error of o per sequence-length bucket [2^(k-1), 2^k) "
                        "(labelled by its lower end; 0 = empty sequences).",
                        "sequence length (tokens, bucket lower end)");
    charts++;
    rc |= hist_chart(f, m, "lse-hist", "lse: ULP distance histogram",
                     "lse elements by their distance in f32 units in the last place from the "
                     "correctly rounded base-2 lse, log counts; NaN counts a NaN on one side "
                     "only.",
                     "ULP distance from the correctly rounded value (f32)", NULL, 1, 2, 1, 0);
    charts++;

    worst_table(f, m);
    findings_table(f, m);
    fprintf(f,
            "<p id=\"kvf-status\" data-charts=\"%d\" data-state=\"pending\">page check did not "
            "run (scripts disabled?)</p>\n<ul id=\"kvf-errors\"></ul>\n%s</body></html>\n",
            charts, JS_CHECK);
    return rc || ferror(f) ? -1 : 0;
}
