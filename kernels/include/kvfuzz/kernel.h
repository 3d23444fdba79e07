/* The kernels under test as kvfuzz sees them, and the registry that finds them by name.
 *
 * Every kernel is described by a kvf_plugin_kernel (include/kvfuzz/plugin.h), the public plugin
 * ABI, and runs through kvfuzz's buffer host: kvfuzz owns, poisons and guards every buffer and
 * checks them after the run (kernel_host.h). Built-in kernels carry a static descriptor;
 * a plugin kernel names its shared library and is loaded, with kvf_kernel_create(), in the
 * process that runs it (the worker, after fork). Kernels that still drive their own device
 * buffers implement the case-level vtable (create/destroy/run on a kvf_case) instead.
 *
 * Ownership: the registry's kernels are static. kvf_kernel_resolve() allocates plugin and
 * Python kernels; kvf_kernel_free() releases them (static kernels are ignored). Output buffers
 * belong to the caller (o: kvf_case_o_elems bf16, lse: kvf_case_lse_elems floats, on the host);
 * a run that succeeds has written every element of both.
 * Errors: KVF_EUNSUPPORTED when the kernel does not handle the shape (not a finding),
 * KVF_EDEVICE for CUDA launch or API errors, KVF_EKERNEL when the kernel reported an error,
 * KVF_EUNWRITTEN / KVF_EOOBWRITE / KVF_EINPUTMOD for buffer violations found by the host,
 * KVF_ENOMEM; one sentence in err. */
#ifndef KVFUZZ_KERNEL_H
#define KVFUZZ_KERNEL_H

#include <stddef.h>

#include "kvfuzz/case.h"
#include "kvfuzz/plugin.h"

typedef enum kvf_device { KVF_DEVICE_CPU = 0, KVF_DEVICE_CUDA = 1 } kvf_device;

typedef struct kvf__plugin_ref kvf__plugin_ref; /* a plugin kernel's library and probe */

typedef struct kvf_kernel {
    const char *name;        /* registry key, e.g. "cpu-ref", "cuda", "cpu-splitkv/mut=..." */
    const char *description; /* one line */
    kvf_device device;
    const char *models; /* for mutants: the bug class modelled ("B03"); NULL otherwise */
    /* The case-level vtable, for kernels that manage their own device buffers. */
    int (*create)(void **state, kvf_error *err);
    void (*destroy)(void *state);
    int (*run)(void *state, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err);
    /* The descriptor, for kernels that run through the buffer host (NULL for the above, and
     * for a plugin kernel until it is loaded). */
    const kvf_plugin_kernel *desc;
    int role;                /* kvf_plugin_role */
    kvf__plugin_ref *plugin; /* a plugin kernel: which library, which kernel in it */
    /* Releases a kernel that kvf_kernel_resolve allocated; NULL for static ones. */
    void (*release)(struct kvf_kernel *self);
    /* Optional, with the case-level vtable: the two phases of a run whose phases overlap
     * (kvf_kernel_submit / kvf_kernel_collect; both or neither), and how many states one
     * process may run at once (0: 1). */
    int (*submit)(void *state, const kvf_case *c, kvf_error *err);
    int (*collect)(void *state, kvf_bf16 *o, float *lse, kvf_error *err);
    int concurrent_states;
    /* The precision model the kernel declares it implements (docs/precision.md): model text as
     * kvf_precision_parse reads it ("bf16-p", "bf16-partials+ftz"), owned by the kernel; NULL
     * declares the default model, f32. */
    const char *precision;
    /* The invariance relations the kernel promises, as kvf_relation_promises_parse reads them
     * (kvfuzz/relation.h), owned by the kernel; NULL promises the defaults. */
    const char *promises;
} kvf_kernel;

/* The relations k promises (a kvf_relation mask): its declaration over the defaults. A
 * declaration is checked when the kernel is loaded, so this cannot fail. */
unsigned kvf_kernel_promises(const kvf_kernel *k);

/* Registry of built-in kernels. Static objects; the registry never allocates. */
size_t kvf_kernel_count(void);
const kvf_kernel *kvf_kernel_at(size_t i);
const kvf_kernel *kvf_kernel_find(const char *name); /* NULL if unknown */

/* Whether a CUDA device is usable in this process (built with CUDA and a GPU is present). When
 * not, writes the reason into `why` (may be NULL). */
int kvf_cuda_available(char *why, size_t why_size);

/* ---- running a kernel ----------------------------------------------------------------------- */

/* Creates the kernel's per-process state: loads a plugin kernel's library (so call it in the
 * process that runs the kernel), then creates its buffer host or calls its create(). */
int kvf_kernel_create(const kvf_kernel *k, void **state, kvf_error *err);
/* Runs the kernel on one case, writing o and lse. */
int kvf_kernel_run(const kvf_kernel *k, void *state, const kvf_case *c, kvf_bf16 *o, float *lse,
                   kvf_error *err);
void kvf_kernel_destroy(const kvf_kernel *k, void *state); /* NULL state is fine */
/* A run in two phases, for one thread that keeps several states' devices busy at once (the
 * worker's lanes): submit starts the case on the state and returns before the device has run
 * it; collect waits for it and returns what kvf_kernel_run would have (a submit's error comes
 * back from its collect too), writing o and lse. The case must stay alive and unchanged until
 * the collect, and each submit is followed by one collect before the state's next submit or
 * run. Only for states of which kvf_kernel_overlaps says 1 (kernels run through the CUDA
 * buffer host, and case-level kernels with submit and collect); others get KVF_EINVAL. */
int kvf_kernel_overlaps(const kvf_kernel *k, void *state);
int kvf_kernel_submit(const kvf_kernel *k, void *state, const kvf_case *c, kvf_error *err);
int kvf_kernel_collect(const kvf_kernel *k, void *state, kvf_bf16 *o, float *lse, kvf_error *err);
/* How many states of the kernel one process may hold and run at once, each from its own
 * thread (the descriptor's concurrent_states, plugin.h), asked of a created state; at least 1.
 * Kernels with only the case-level vtable answer their concurrent_states, or 1. */
int kvf_kernel_concurrent_states(const kvf_kernel *k, void *state);
/* The kernel's plan facts for the last case run, one line into buf ("" when it has none). */
void kvf_kernel_describe(const kvf_kernel *k, void *state, char *buf, size_t buf_size);

/* The graph-replay relation's second run (kvf_host_graph_replay in kvfuzz/kernel_host.h): run()
 * captured in a CUDA graph on `capture`, then planned and replayed on c, writing c's o and lse.
 * Only kernels run through the CUDA buffer host; others are KVF_EUNSUPPORTED. */
int kvf_kernel_graph_replay(const kvf_kernel *k, void *state, const kvf_case *capture,
                            const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err);
/* Whether k's host lays out buffer layouts other than the dense one (kvfuzz/layout.h): the CPU
 * buffer host does (CPU plugins, built-in CPU kernels, Python kernels); the CUDA buffer host
 * declines them (KVF_EUNSUPPORTED), so campaigns of CUDA kernels draw none. */
int kvf_kernel_takes_layouts(const kvf_kernel *k);
/* The graph-replay relation's run of c (kvfuzz/relation.h): its capture case derived with
 * seed under lim, then kvf_kernel_graph_replay; what the campaign's worker and an in-process
 * runner both run. */
int kvf_kernel_graph_relation_run(const kvf_kernel *k, void *state, const kvf_case *c,
                                  uint64_t seed, const kvf_limits *lim, kvf_bf16 *o, float *lse,
                                  kvf_error *err);
/* Whether k takes quantized caches (FP8 dtypes and scales, docs/plugins.md "FP8 caches"), so
 * that campaigns draw them: a descriptor's kv_dtypes and scale_granularities name some; a
 * plugin kernel (masks in its probe) accepts a small FP8 shape with tensor scales, or declines
 * the same shape in bf16 too. Case-level kernels read bf16 only. */
int kvf_kernel_takes_quant(const kvf_kernel *k);
/* Whether k may compile itself anew for each shape it meets (a Python kernel on a GPU: Triton
 * and torch.compile specialise on shapes), so that campaigns draw its shapes from a shape set.
 * On the CPU a Python kernel runs torch eagerly, and a set would only narrow its shapes. */
int kvf_kernel_compiles_per_shape(const kvf_kernel *k);
/* Whether kvf_kernel_graph_replay can apply to k: a CUDA kernel run through the buffer host. */
int kvf_kernel_can_graph_replay(const kvf_kernel *k);

/* Convenience: create, run once, destroy. */
int kvf_kernel_run_once(const kvf_kernel *kernel, const kvf_case *c, kvf_bf16 *o, float *lse,
                        kvf_error *err);

/* The shape of a case as the ABI describes it. */
void kvf_kernel_shape(const kvf_case *c, kvf_plugin_shape *shape);
/* Sets the shape's strides to the dense NHD layout's, from its heads, head dim and page size
 * (for a shape built by hand rather than from a case). */
void kvf_kernel_shape_dense_strides(kvf_plugin_shape *shape);

/* Whether the kernel handles this shape: 1 yes, 0 no (the reason in why), a negative KVF_E*
 * when it cannot be asked (a plugin's probe process died). Safe to call from several threads.
 * A plugin kernel is asked in a probe process, never loaded into the caller; answers are
 * remembered per shape. Kernels without a descriptor support every valid shape. */
int kvf_kernel_supports(const kvf_kernel *k, const kvf_plugin_shape *shape, char *why,
                        size_t why_size);

/* ---- finding kernels by name ---------------------------------------------------------------- */

/* Resolves one --kernel argument into kernels, appended to out[*count] (at most max):
 *   NAME                   a built-in kernel (kvf_kernel_find, then `extra` if not NULL);
 *   PATH.so                every kernel of a plugin, PATH.so:NAME one of them;
 *   python:MODULE:FUNCTION a Python function, FILE.json a FlashInfer-Bench solution.
 * A plugin is opened and checked in a probe process; every load failure (no such file, not a
 * shared object, no entry point, unknown ABI version, descriptor too small, no kernels,
 * duplicate names, no such kernel) is KVF_EINVAL or KVF_ENOTFOUND with one sentence.
 * Resolved plugin and Python kernels are owned by the caller (kvf_kernel_free). */
typedef const kvf_kernel *(*kvf_kernel_lookup_fn)(const char *name);
int kvf_kernel_resolve(const char *spec, kvf_kernel_lookup_fn extra, const kvf_kernel **out,
                       size_t max, size_t *count, kvf_error *err);
void kvf_kernel_free(const kvf_kernel *k);

/* A list of kernels that grows as kernels are added: a PATH.so names every kernel of its
 * plugin, and a plugin may list up to KVF_PLUGIN_MAX_KERNELS (plugin.h), so commands that take
 * PATH.so keep their kernels here rather than in a fixed array. Zero-initialise it; the
 * array is the list's own, the kernels the caller's (kvf_kernel_list_free releases both). */
typedef struct kvf_kernel_list {
    const kvf_kernel **items;
    size_t count, cap;
} kvf_kernel_list;

/* Appends one kernel: 0, or KVF_ENOMEM (with one sentence in err when err is not NULL). */
int kvf_kernel_list_push(kvf_kernel_list *list, const kvf_kernel *k, kvf_error *err);
/* kvf_kernel_resolve without a limit: appends every kernel spec names to list. On failure the
 * list holds what it held before. */
int kvf_kernel_resolve_list(const char *spec, kvf_kernel_lookup_fn extra, kvf_kernel_list *list,
                            kvf_error *err);
/* Releases every kernel in the list (kvf_kernel_free) and its array; the list reads empty. */
void kvf_kernel_list_free(kvf_kernel_list *list);

/* The kernel's descriptor: a built-in's own, or a plugin kernel's, loading (and checking) its
 * library in this process, where it stays loaded until exit. For commands that must call a
 * descriptor in process (bench times launches; a worker would time the pipe). Errors as
 * kvf_kernel_resolve's load errors; KVF_EINVAL for a kernel with only the case-level vtable. */
int kvf_kernel_load_descriptor(const kvf_kernel *k, const kvf_plugin_kernel **desc, kvf_error *err);

/* For a plugin kernel, the library path it was resolved from; NULL for any other kernel. */
const char *kvf_kernel_plugin_path(const kvf_kernel *k);

#endif
