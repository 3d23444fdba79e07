/* A FlashInfer-Bench dataset built in memory and written at once, as `kvfuzz export-fib` makes
 * it from findings (docs/fib.md): the definitions of the findings' shapes, one workload and one
 * trace per finding, and the solution records the traces name, in the layout FIB's validator
 * reads (definitions/gqa_paged/<def>.json, workloads/gqa_paged/<def>.jsonl,
 * traces/<author>/gqa_paged/<def>.jsonl, solutions/<author>/gqa_paged/<def>/<name>.json; the
 * blobs are kvf_fib_export's, kvfuzz/fib.h). A dataset is written into a new folder beside its
 * destination and renamed to it at the end, so that a run that fails part way leaves no half
 * dataset and an existing one is never mixed with a new one.
 *
 * Ownership: kvf_fib_dataset is a plain struct (large: keep it static or on the heap, zeroed),
 * whose workload and trace text and uuids kvf_fib_dataset_free releases. It borrows what a
 * kvf_fib_kernel_ref points to (names, a solution record) until it is written and freed. JSON
 * values passed to kvf_fib_dataset_add_trace are borrowed, except the evaluation, which it
 * takes; kvf_fib_trace_evaluation returns a new reference, or NULL when memory ran out.
 * Errors: 0 or a negative KVF_E* code with one sentence in err: KVF_ENOMEM, KVF_EIO (a file or
 * folder that cannot be written, created or moved), KVF_EINVAL (a destination that exists and
 * is not an empty folder). */
#ifndef KVFUZZ_FIB_DATASET_H
#define KVFUZZ_FIB_DATASET_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/fib.h"

#define KVF_FIB_MAX_KERNELS 32 /* kernels of one export (each a solution record per shape) */
#define KVF_FIB_MAX_DEFS 64    /* shapes of one export */

/* One author's traces of one definition: traces/<author>/gqa_paged/<def>.jsonl, the layout
 * FIB's add_traces writes and its validator reads (it skips any other). */
typedef struct kvf_fib_trace_file {
    char author[KVF_ORIGIN_NAME_MAX + 1];
    char *text; /* JSONL so far */
    size_t len;
} kvf_fib_trace_file;

/* A definition of the export: its shape and cache dtype, workloads and traces so far. */
typedef struct kvf_fib_def {
    char name[KVF_ORIGIN_NAME_MAX + 1];
    int32_t hq, hk, d, s;
    int kv_dtype;    /* kvf_kv_dtype of both caches: bf16, or FP8 with a scale each */
    char *workloads; /* JSONL text so far */
    size_t wlen;
    kvf_fib_trace_file traces[KVF_FIB_MAX_KERNELS]; /* one per author: at most one per kernel */
    size_t ntraces;
} kvf_fib_def;

/* A kernel as the dataset names it. */
typedef struct kvf_fib_kernel_ref {
    const void *id;          /* its identity: one solution record per (id, definition) */
    const char *name;        /* kvfuzz's name for it */
    const char *plugin_path; /* a plugin kernel's library (left out of the record's name); NULL */
    int cuda;                /* its target hardware: cuda, else cpu */
    const json_t *solution;  /* a FIB solution kernel's own record, as its file holds it; NULL */
} kvf_fib_kernel_ref;

/* The solution record the traces of one kernel on one definition name (FIB resolves a trace's
 * solution by name among solutions/<author>/<op_type>/<def>/<name>.json). */
typedef struct kvf_fib_solution {
    kvf_fib_kernel_ref kernel;
    const kvf_fib_def *def;
    char author[KVF_ORIGIN_NAME_MAX + 1];
    char name[KVF_ORIGIN_NAME_MAX + 1];
} kvf_fib_solution;

typedef struct kvf_fib_dataset {
    kvf_fib_def defs[KVF_FIB_MAX_DEFS];
    size_t ndefs;
    kvf_fib_solution solutions[KVF_FIB_MAX_DEFS * KVF_FIB_MAX_KERNELS];
    size_t nsolutions;
    char **uuids;
    size_t nuuids;
} kvf_fib_dataset;

/* The definition of c's shape and cache dtype (kvfuzz's FP8 definition of the shape for FP8
 * caches; c must pass kvf_fib_check_exportable), made on first use; NULL past
 * KVF_FIB_MAX_DEFS. */
kvf_fib_def *kvf_fib_dataset_def_for(kvf_fib_dataset *ds, const kvf_case *c);

/* The solution record of kernel k on def, made on first use; NULL when the table is full. Its
 * name is unique in the export (FIB's TraceSet refuses two solutions of one name): a FIB
 * solution keeps its own when it can, a kvfuzz kernel gets kvfuzz-<kernel>-<shape>; its author
 * is the solution's, else kvfuzz. */
const kvf_fib_solution *kvf_fib_dataset_solution_for(kvf_fib_dataset *ds,
                                                     const kvf_fib_kernel_ref *k,
                                                     const kvf_fib_def *def);

/* The trace file of `author` for def; NULL past KVF_FIB_MAX_KERNELS. */
kvf_fib_trace_file *kvf_fib_dataset_trace_file_for(kvf_fib_def *def, const char *author);

/* A workload uuid not used yet in this export, into out: a finding's file name `base` without
 * its .kvfz (a fuzzed case is a workload of its own, whatever it was mutated from), a case as
 * imported from FIB its origin's uuid (is_finding 0); "-2", "-3", ... added to one taken. */
void kvf_fib_dataset_pick_uuid(kvf_fib_dataset *ds, const kvf_spec *spec, const char *base,
                               int is_finding, char *out, size_t n);

/* Appends the workload to def's workloads (a trace line without solution or evaluation) and the
 * trace of solution sol with `evaluation` (taken) to tf. */
int kvf_fib_dataset_add_trace(kvf_fib_def *def, kvf_fib_trace_file *tf, const kvf_fib_solution *sol,
                              const json_t *workload, json_t *evaluation, kvf_error *err);

/* How a run ended, as FIB's evaluator records it. */
typedef enum kvf_fib_run_end {
    KVF_FIB_RUN_OK = 0,  /* outputs: PASSED or INCORRECT_NUMERICAL */
    KVF_FIB_RUN_TIMEOUT, /* TIMEOUT */
    KVF_FIB_RUN_ERROR,   /* RUNTIME_ERROR */
} kvf_fib_run_end;

/* One run of a workload, for its trace's evaluation. */
typedef struct kvf_fib_trace_run {
    kvf_fib_run_end end;
    const char *log; /* why a run without outputs ended */
    const kvf_case *c;
    const kvf_bf16 *o, *ref_o; /* with KVF_FIB_RUN_OK: the kernel's outputs and the reference */
    const float *lse, *ref_lse;
} kvf_fib_trace_run;

/* What FIB's evaluator would record for the run (kvf_fib_evaluate against the reference, the
 * status, an environment of hardware kvfuzz, a timestamp; PASSED carries FIB's default
 * performance of 0), with `extra` (taken; may be NULL) as correctness.extra.kvfuzz, or for a run
 * without outputs in the log's place. */
json_t *kvf_fib_trace_evaluation(const kvf_fib_trace_run *run, json_t *extra);

/* The FIB solution record a kernel name refers to: for FILE.json a JSON object with a "spec"
 * object and a "sources" array, as its file holds it (a new reference); NULL for anything else. */
json_t *kvf_fib_solution_record(const char *kernel);

/* Writes the dataset into dir: the definitions that have workloads, their workloads and traces
 * files, and the solution records their traces name; *ndefs counts those definitions. */
int kvf_fib_dataset_write(const kvf_fib_dataset *ds, const char *dir, size_t *ndefs,
                          kvf_error *err);

void kvf_fib_dataset_free(kvf_fib_dataset *ds);

/* The folder to write a dataset for final_dir into: "<final_dir>.partial-<pid>", created into
 * partial. KVF_EINVAL ("DIR exists and is not an empty folder") when final_dir is something
 * else than an empty folder, KVF_EIO ("cannot create the dataset folder DIR"). */
int kvf_fib_dataset_begin(const char *final_dir, char *partial, size_t n, kvf_error *err);

/* Moves the written dataset into final_dir (an empty folder there is replaced): KVF_EIO
 * "cannot move the dataset into DIR: <why>". */
int kvf_fib_dataset_publish(const char *partial, const char *final_dir, kvf_error *err);

#endif
