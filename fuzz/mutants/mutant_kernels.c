/* Which kernels the mutant benchmark runs (kvfuzz/mutant_bench.h): the device's mutants, its
 * production kernels and the caller's controls. */
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/mutant_bench.h"

int kvf_mutant_bench_kernels(kvf_device dev, const kvf_kernel_list *extras,
                             kvf_mutant_entry **mutants, size_t *nmutants,
                             kvf_mutant_entry **controls, size_t *ncontrols, kvf_error *err) {
    const size_t n = kvf_kernel_count() + extras->count;
    *nmutants = *ncontrols = 0;
    *mutants = calloc(n + 1, sizeof **mutants);
    *controls = calloc(n + 1, sizeof **controls);
    if (!*mutants || !*controls) {
        free(*mutants);
        free(*controls);
        *mutants = *controls = NULL;
        return kvf_error_set(err, KVF_ENOMEM, "out of memory for the list of kernels");
    }
    for (size_t i = 0; i < n; i++) {
        const int builtin = i < kvf_kernel_count();
        const kvf_kernel *k = builtin ? kvf_kernel_at(i) : extras->items[i - kvf_kernel_count()];
        kvf_mutant_entry e = {k, {0}};
        if (builtin && k->device != dev) continue;
        if (builtin && k->models)
            (*mutants)[(*nmutants)++] = e;
        else if (!builtin || strcmp(k->name, "cuda-naive") != 0)
            (*controls)[(*ncontrols)++] = e;
    }
    return 0;
}

size_t kvf_mutant_keep_controls(kvf_kernel_list *extras, size_t before) {
    const size_t n = extras->count - before;
    size_t kept = before;
    for (size_t j = before; j < extras->count; j++) {
        if (n > 1 && extras->items[j]->role != KVF_PLUGIN_ROLE_REFERENCE)
            kvf_kernel_free(extras->items[j]);
        else
            extras->items[kept++] = extras->items[j];
    }
    extras->count = kept;
    return kept - before;
}

int kvf_mutant_plugin_kernels(const kvf_kernel_list *plugin, const kvf_kernel_list *extras,
                              kvf_mutant_entry **mutants, size_t *nmutants,
                              kvf_mutant_entry **controls, size_t *ncontrols, kvf_error *err) {
    *nmutants = *ncontrols = 0;
    *mutants = calloc(plugin->count + 1, sizeof **mutants);
    *controls = calloc(plugin->count + extras->count + 1, sizeof **controls);
    if (!*mutants || !*controls) {
        free(*mutants);
        free(*controls);
        *mutants = *controls = NULL;
        return kvf_error_set(err, KVF_ENOMEM, "out of memory for the list of kernels");
    }
    for (size_t i = 0; i < plugin->count; i++) {
        const kvf_kernel *k = plugin->items[i];
        const kvf_mutant_entry e = {k, {0}};
        if (k->role == KVF_PLUGIN_ROLE_MUTANT)
            (*mutants)[(*nmutants)++] = e;
        else if (k->role == KVF_PLUGIN_ROLE_REFERENCE)
            (*controls)[(*ncontrols)++] = e;
    }
    for (size_t i = 0; i < extras->count; i++)
        (*controls)[(*ncontrols)++] = (kvf_mutant_entry){extras->items[i], {0}};
    if (*nmutants == 0)
        return kvf_error_set(err, KVF_EINVAL,
                             "the kernels given list no mutant (a kernel of role "
                             "KVF_PLUGIN_ROLE_MUTANT, docs/plugins.md)");
    return 0;
}
