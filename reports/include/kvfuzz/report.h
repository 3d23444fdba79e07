/* Report writers (issue 6): from one or more stats files to summary.json, errors.csv,
 * index.html (one self-contained page of inline SVG charts) and a terminal summary. The
 * formats and what each chart shows are documented in docs/reports.md.
 *
 * Several inputs are drawn side by side on shared axes: every (input, kernel) pair is one
 * series, named by the kernel when that is unique across the inputs, else "<label>:<kernel>"
 * where label is the input's label, the stats file's own label, or the file's name.
 *
 * Ownership: the inputs are only read. Errors: KVF_EIO (an output or findings directory that
 * cannot be created, read or written), KVF_ENOMEM, KVF_EINVAL (no inputs), with one sentence. */
#ifndef KVFUZZ_REPORT_H
#define KVFUZZ_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "kvfuzz/stats.h"

#define KVF_REPORT_SUMMARY_FORMAT "kvfuzz-report-summary"
#define KVF_REPORT_SUMMARY_VERSION 1

typedef struct kvf_report_input {
    const kvf_stats *stats;
    const char *path;  /* where the stats were read from (shown in the report); may be NULL */
    const char *label; /* NULL: the stats' label, else the file name without .json */
} kvf_report_input;

typedef struct kvf_report_opts {
    const char *out_dir;      /* created if missing (one level); NULL: terminal summary only */
    const char *findings_dir; /* NULL: the findings directories the inputs recorded */
    const char *title;        /* NULL: "kvfuzz error report" */
    FILE *terminal;           /* where the short summary goes; NULL: nowhere */
} kvf_report_opts;

/* What was written, for the caller's last line. */
typedef struct kvf_report_result {
    size_t series;
    size_t findings;
    long html_bytes; /* size of index.html; 0 when no out_dir */
    double seconds;  /* wall time spent generating */
} kvf_report_result;

/* Writes out_dir/summary.json, out_dir/errors.csv, out_dir/index.html and, for worst elements
 * whose case bytes were embedded, out_dir/cases/<hash>.kvfz; each file atomically. Prints the
 * terminal summary to opts->terminal. result may be NULL. */
int kvf_report_write(const kvf_report_input *inputs, size_t n, const kvf_report_opts *opts,
                     kvf_report_result *result, kvf_error *err);

#endif
