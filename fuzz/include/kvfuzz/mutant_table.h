/* The mutant benchmark's text table (docs/mutants.md), as `kvfuzz mutants` prints it while the
 * benchmark goes (kvfuzz/mutant_bench.h): the column header, a row per mutant as it completes,
 * the controls' lines, then the seed table and the counts. The JSON counterpart is
 * kvf_mutant_bench_json.
 *
 * Ownership: everything is the caller's and only read; the text goes to the caller's FILE.
 * Errors: none reported (a write error stays in the FILE's error indicator). */
#ifndef KVFUZZ_MUTANT_TABLE_H
#define KVFUZZ_MUTANT_TABLE_H

#include <stdio.h>

#include "kvfuzz/mutant_bench.h"

/* The column names. */
void kvf_mutant_table_header(FILE *f);

/* A mutant's row: name, class, the kvfuzz verdict with its seconds, cases and finding, each
 * rule's time to its finding ("missed"), and (b) and (c). A mutant judged under a model other
 * than f32 gets a second line naming it (model_text, the caller's words for the model and where
 * it came from, else the model's name) and its finding's attribution. */
void kvf_mutant_table_mutant(FILE *f, const kvf_mutant_result *m, const char *model_text);

/* The line that opens the controls, which ran controls_budget seconds each. */
void kvf_mutant_table_controls(FILE *f, double controls_budget);

/* A control's line: its finding or none, after how many cases and seconds, its model when not
 * f32, and the attribution. */
void kvf_mutant_table_control(FILE *f, const kvf_mutant_result *c);

/* After the run: the seed table (when there were seed cases; seeds_dir names their folder), the
 * per-rule counts and the overall line. */
void kvf_mutant_table_summary(FILE *f, const kvf_mutant_bench *b, const char *seeds_dir);

#endif
