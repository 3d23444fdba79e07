/* Text for HTML and SVG: owns kvf__html_escape (escape.c). Used by every file that writes the
 * page: svg.c, charts.c, heatmaps.c, tables.c and page.c. Private to reports/. */
#ifndef KVFUZZ_REPORTS_ESCAPE_H
#define KVFUZZ_REPORTS_ESCAPE_H

#include <stdio.h>

/* Writes s to f with < > & " ' escaped, so that any text (a series name, a rule, a path) is
 * safe both between tags and inside a quoted attribute; NULL writes nothing. */
void kvf__html_escape(FILE *f, const char *s);

#endif
