/* The chart builders: owns the histograms and the rel error CDF (charts.c) and the density and
 * heatmaps (heatmaps.c). Used by page.c, which lays them out. Each writes one figure (a section
 * holding its heading, note and inline SVG) to f and returns -1 when it could not. Private to
 * reports/. */
#ifndef KVFUZZ_REPORTS_CHARTS_H
#define KVFUZZ_REPORTS_CHARTS_H

#include <stdio.h>

#include "report_internal.h"

/* An octave histogram over the series, as grouped bars with log counts: which = 0..3 picks
 * abs/rel/ulp/margin of output `out` (0 o, 1 lse) from each series' group for `rule` (NULL: the
 * primary group). integers labels the bins as integer ranges (ULP distances); limit_line marks
 * margin 1, the allowance, and folds the tiny margins into the first bin. */
int kvf__hist_chart(FILE *f, const kvf__rmodel *m, const char *id, const char *title,
                    const char *note, const char *xlabel, const char *rule, int out, int which,
                    int integers, int limit_line);

/* The CDF of o's rel error, one curve per series. */
int kvf__cdf_chart(FILE *f, const kvf__rmodel *m);

/* o's abs error against |exact|: a 2-D density, one panel per series on shared axes. */
int kvf__density_chart(FILE *f, const kvf__rmodel *m);

/* Mean bits of error of output `out` by one coordinate class (KVF_CLASS_HEAD, _DIM, _SEQLEN):
 * rows are series, columns the class's keys. */
int kvf__class_heatmap(FILE *f, const kvf__rmodel *m, int out, int kind, const char *id,
                       const char *title, const char *note, const char *xlabel);

/* Mean bits of error of o by page size and the slot of the last token in its page, one panel
 * per series. */
int kvf__slot_heatmap(FILE *f, const kvf__rmodel *m);

#endif
