/* The kernels `kvfuzz bench` times (kvfuzz/bench_workload.h): CUDA kernels only. */
#include <stdio.h>
#include <string.h>

#include "kvfuzz/bench_workload.h"

/* One name of the list: its CUDA kernels kept, any other freed. */
static int add_one(kvf_kernel_list *list, const char *spec, kvf_error *err) {
    const size_t before = list->count;
    /* No test kernels (the resolver's `extra`): they have no descriptor for bench to time. */
    int rc = kvf_kernel_resolve_list(spec, NULL, list, err);
    if (rc) return rc;
    const size_t n = list->count - before;
    size_t kept = before;
    for (size_t i = before; i < list->count; i++) {
        const kvf_kernel *k = list->items[i];
        if (k->device == KVF_DEVICE_CUDA) {
            list->items[kept++] = k;
            continue;
        }
        /* PATH.so: its CUDA kernels; a kernel named alone must be one. */
        if (n == 1) rc = kvf_error_set(err, KVF_EINVAL, "%s is not a CUDA kernel", k->name);
        kvf_kernel_free(k);
    }
    list->count = kept;
    return rc;
}

int kvf_bench_add_kernels(kvf_kernel_list *list, const char *specs, kvf_error *err) {
    char buf[KVF_BENCH_KERNELS_MAX];
    if (strlen(specs) >= sizeof buf)
        return kvf_error_set(err, KVF_EINVAL, "the kernel list is too long");
    snprintf(buf, sizeof buf, "%s", specs);
    int rc = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save))
        rc = add_one(list, tok, err);
    return rc;
}

int kvf_bench_default_kernels(kvf_kernel_list *list, kvf_error *err) {
    if (list->count) return 0;
    const char *dflt[2] = {"cuda", "cuda-naive"};
    for (int i = 0; i < 2; i++) {
        const kvf_kernel *k = kvf_kernel_find(dflt[i]);
        int rc = k ? kvf_kernel_list_push(list, k, err) : 0;
        if (rc) return rc;
    }
    return 0;
}
