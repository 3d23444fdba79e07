/* Opening a plugin library and checking its descriptor against the ABI (plugin.h). Internal to
 * kernels/. Used in the process that runs a plugin kernel (the worker) and in the probe
 * process that lists kernels and answers supports() for the parent (plugin_probe.h).
 *
 * Ownership: kvf__plugin_open fills a caller-owned kvf__plugin_lib; the library stays loaded
 * until kvf__plugin_close. Errors: KVF_ENOTFOUND (no such file, no such kernel), KVF_EINVAL
 * (not a shared object, no entry point, unknown ABI version, descriptor too small, no kernels,
 * a malformed or duplicate kernel entry), each with one sentence naming the library. */
#ifndef KVFUZZ_PLUGIN_LOAD_H
#define KVFUZZ_PLUGIN_LOAD_H

#include "kvfuzz/error.h"
#include "kvfuzz/plugin.h"

typedef struct kvf__plugin_lib {
    void *handle;
    const kvf_plugin *desc;
} kvf__plugin_lib;

int kvf__plugin_open(const char *path, kvf__plugin_lib *lib, kvf_error *err);
void kvf__plugin_close(kvf__plugin_lib *lib);

/* The i-th kernel (the descriptor's own stride), or NULL past the end. */
const kvf_plugin_kernel *kvf__plugin_kernel_at(const kvf_plugin *p, uint32_t i);
/* Its concurrent_states, 0 for an entry that ends before the field. */
int32_t kvf__plugin_kernel_states(const kvf_plugin_kernel *k);
/* Its declared precision model, or NULL (also for an entry whose struct_size ends before it). */
const char *kvf__plugin_kernel_precision(const kvf_plugin_kernel *k);
/* The bug class a mutant models, or NULL (also for an entry whose struct_size ends before it). */
const char *kvf__plugin_kernel_models(const kvf_plugin_kernel *k);
/* Its declared promises, or NULL (also for an entry whose struct_size ends before them). */
const char *kvf__plugin_kernel_promises(const kvf_plugin_kernel *k);
/* Its kv_dtypes and scale_granularities masks, 0 for an entry that ends before them. */
uint32_t kvf__plugin_kernel_kv_dtypes(const kvf_plugin_kernel *k);
uint32_t kvf__plugin_kernel_scale_granularities(const kvf_plugin_kernel *k);
/* supports() behind the dtype gate: 0 with the reason when the shape's cache dtypes or scale
 * granularity are outside the kernel's masks (supports() is then not called), else its answer. */
int kvf__plugin_kernel_supports(const kvf_plugin_kernel *k, const kvf_plugin_shape *shape,
                                char *why, size_t why_size);
/* Text a plugin wrote (a supports() reason, a create(), plan() or run() message) made fit for
 * one line of a report: each control character (a newline, a tab, an escape) becomes a space,
 * and trailing spaces go. Other bytes, UTF-8 included, stay. */
void kvf__plugin_text_flatten(char *s);
/* The most concurrent_states kvfuzz accepts. */
#define KVF_PLUGIN_MAX_STATES 64

/* By name: its index, or -1. */
int kvf__plugin_kernel_index(const kvf_plugin *p, const char *name);

#endif
