/* The page's tables: owns the key figures, worst elements, out-of-model panel and findings
 * (tables.c). Used by page.c, which places them. Each writes one section of the page to f.
 * Private to reports/. */
#ifndef KVFUZZ_REPORTS_TABLES_H
#define KVFUZZ_REPORTS_TABLES_H

#include <stdio.h>

#include "report_internal.h"

/* Key figures per series under its primary rule, then every series' verdict under every
 * rule. */
void kvf__figures_table(FILE *f, const kvf__rmodel *m);

/* The in-model elements that use most of their rule's headroom. */
void kvf__worst_table(FILE *f, const kvf__rmodel *m);

/* Rows out of the input model: counted apart from the figures, with their worst elements. */
void kvf__out_of_model_panel(FILE *f, const kvf__rmodel *m);

/* The findings directories and each finding with its links and attribution. */
void kvf__findings_table(FILE *f, const kvf__rmodel *m);

#endif
