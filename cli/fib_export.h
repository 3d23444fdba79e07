/* kvfuzz export-fib in two files (docs/fib.md): cmd_fib_export.c parses the options and
 * writes the dataset; fib_export_item.c takes one finding into it (its kernel started under its
 * precision model, the run again, the workload and trace) and prints its line. The first calls
 * the second, never the other way. */
#ifndef KVFUZZ_CLI_FIB_EXPORT_H
#define KVFUZZ_CLI_FIB_EXPORT_H

#include "cli.h"
#include "kvfuzz/fib_dataset.h"
#include "kvfuzz/finding_fib.h"

#define CLI_EXPORT_CMD "export-fib"

typedef struct cli_export_kernel {
    const kvf_kernel *kernel;
    kvf_runner *runner;
    char spec[512];
    kvf_rule rules[KVF_FINDING_FIB_RULES]; /* strict and fa under the kernel's model, and fib */
    json_t *solution; /* a FIB solution kernel's own record, as its file holds it; else NULL */
} cli_export_kernel;

typedef struct cli_export_state {
    const char *out_dir;   /* where files are written: the partial folder */
    const char *shown_dir; /* the dataset folder named by -o, for messages */
    const char *kernel_override;
    const char *precision; /* --precision, or NULL: each kernel's declared model */
    double deadline;
    kvf_limits limits;
    kvf_oracle_opts oopts;
    kvf_rule rules[KVF_FINDING_FIB_RULES]; /* as given (each cli_export_kernel holds its own) */
    cli_export_kernel kernels[KVF_FIB_MAX_KERNELS];
    size_t nkernels;
    kvf_fib_dataset ds;
} cli_export_state;

/* One finding into the dataset: its kernel (started on first use), the run again, its
 * workload, blob and trace, and its line. 0, or the exit status after one sentence. */
int cli_export_one(cli_export_state *st, const char *path);

/* Stops and releases the kernels the export started. */
void cli_export_free_kernels(cli_export_state *st);

#endif
