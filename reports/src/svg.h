/* SVG primitives shared by the chart builders: owns the chart frame (a buffered <svg> inside
 * its figure section), text, series legends and power-of-ten/two tick labels (svg.c). Used by
 * charts.c and heatmaps.c. Private to reports/. */
#ifndef KVFUZZ_REPORTS_SVG_H
#define KVFUZZ_REPORTS_SVG_H

#include <stddef.h>
#include <stdio.h>

#include "report_internal.h"

/* Every chart is this wide (px); the page scales it down on narrow screens. */
#define KVF__CHART_W 960

typedef struct kvf__chart {
    FILE *f; /* the body, buffered so the opening tag can carry the final mark count */
    char *buf;
    size_t size;
    int marks; /* elements of class "mark" drawn: the page's self-check counts them */
    int w, h;
} kvf__chart;

/* Starts a w x h chart whose body is written to c->f. -1 (errno set) on failure. */
int kvf__chart_open(kvf__chart *c, int w, int h);

/* Ends the chart and writes it to out as a figure: a section "sec-ID" with the title and note,
 * then the <svg> (id ID, aria-label LABEL, data-marks the mark count). The section is closed
 * even when the chart cannot be (-1). */
int kvf__chart_figure(kvf__chart *c, FILE *out, const char *id, const char *title, const char *note,
                      const char *label);

/* One <text> element, s escaped. */
void kvf__svg_text(FILE *f, double x, double y, const char *anchor, const char *cls, const char *s);

/* A chart with nothing to draw says why in its middle. */
void kvf__svg_no_data(kvf__chart *c, const char *why);

/* Series swatches and names in a row from (x, y). */
void kvf__svg_legend(kvf__chart *c, const kvf__rseries *const *ss, size_t ns, double x, double y);

/* "BASE" followed by k in superscript digits (UTF-8), e.g. 2⁻¹⁰. */
void kvf__pow_label(char *buf, size_t size, int base, int k);

#endif
