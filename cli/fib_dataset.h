/* The FlashInfer-Bench dataset kvfuzz export-fib writes (docs/fib.md): the definitions of the
 * findings' shapes, one workload and one trace per finding, and the solution records the traces
 * name, gathered while the findings run and written at the end. */
#ifndef KVF_CLI_FIB_DATASET_H
#define KVF_CLI_FIB_DATASET_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/kernel.h"
#include "kvfuzz/oracle.h"
#include "kvfuzz/outcome.h"
#include "kvfuzz/runner.h"
#include "kvfuzz/spec.h"

#define MAX_KERNELS 32 /* each holds a worker process while the export runs */
#define MAX_DEFS 64

/* One author's traces of one definition: traces/<author>/gqa_paged/<def>.jsonl, the layout
 * FIB's add_traces writes and its validator reads (it skips any other). */
typedef struct trace_file {
    char author[KVF_ORIGIN_NAME_MAX + 1];
    char *text; /* JSONL so far */
    size_t len;
} trace_file;

typedef struct def_lines {
    char name[KVF_ORIGIN_NAME_MAX + 1];
    int32_t hq, hk, d, s;
    char *workloads; /* JSONL text so far */
    size_t wlen;
    trace_file traces[MAX_KERNELS]; /* one per author: at most one per kernel */
    size_t ntraces;
} def_lines;

/* A solution record the traces of one kernel on one definition name (FIB resolves a trace's
 * solution by name among solutions/<author>/<op_type>/<def>/<name>.json). */
typedef struct solution_rec {
    const kvf_kernel *kernel;
    const json_t *solution; /* a FIB solution kernel's own record, as its file holds it; or NULL */
    const def_lines *def;
    char author[KVF_ORIGIN_NAME_MAX + 1];
    char name[KVF_ORIGIN_NAME_MAX + 1];
} solution_rec;

typedef struct fib_dataset {
    def_lines defs[MAX_DEFS];
    size_t ndefs;
    solution_rec solutions[MAX_DEFS * MAX_KERNELS];
    size_t nsolutions;
    char **uuids;
    size_t nuuids;
} fib_dataset;

/* One finding's run, as its trace records it. */
typedef struct fib_run {
    const char *finding;  /* the finding's file name */
    const char *kernel;   /* the kernel's name */
    const json_t *report; /* the finding's report, or NULL */
    const kvf_spec *spec;
    const kvf_case *c;
    const kvf_run_result *res;
    const kvf_outcome *out;
    const kvf_oracle_result *oracle; /* when res->status is KVF_RUN_OK */
    const kvf_bf16 *o;
    const float *lse;
} fib_run;

/* The definition of c's shape, made on first use; NULL past MAX_DEFS. */
def_lines *fib_dataset_def_for(fib_dataset *ds, const kvf_case *c);
/* The solution record of kernel kern (solution: its FIB record, or NULL) on dl; NULL when full. */
const solution_rec *fib_dataset_solution_for(fib_dataset *ds, const kvf_kernel *kern,
                                             const json_t *solution, const def_lines *dl);
/* The trace file of `author` for definition dl; NULL past MAX_KERNELS. */
trace_file *fib_dataset_trace_file_for(def_lines *dl, const char *author);
/* A uuid not used yet in this export, for a finding's file name `base` (or a case's origin). */
void fib_dataset_pick_uuid(fib_dataset *ds, const kvf_spec *spec, const char *base, int is_finding,
                           char *out, size_t n);
/* Appends the workload wl to dl's workloads and the run's trace, naming sol, to tf: -1 when out
 * of memory. */
int fib_dataset_add_trace(def_lines *dl, trace_file *tf, const solution_rec *sol, json_t *wl,
                          const fib_run *run);
/* Writes the dataset into dir (definitions that have workloads, their workloads and traces, the
 * solution records); *ndefs counts the definitions. A failure is reported as `cmd`'s usage
 * error, whose status it returns. */
int fib_dataset_write(const fib_dataset *ds, const char *cmd, const char *dir, size_t *ndefs);
void fib_dataset_free(fib_dataset *ds);

#endif
