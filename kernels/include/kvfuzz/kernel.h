/* The interface every kernel under test implements, and the registry that finds them by name.
 *
 * A kernel is a small vtable. Callers own the output buffers (o: kvf_case_o_elems bf16, lse:
 * kvf_case_lse_elems floats, both on the host); a kernel writes every element of both on
 * success. Per-kernel state (device buffers, plans, workspaces) lives behind `state`, created
 * once with create() and reused across run() calls; destroy() releases it.
 * Errors: KVF_EUNSUPPORTED when the kernel cannot run this shape (not a finding), KVF_EDEVICE
 * for CUDA launch or API errors (a kernel-error finding), KVF_ENOMEM; one sentence in err. */
#ifndef KVFUZZ_KERNEL_H
#define KVFUZZ_KERNEL_H

#include <stddef.h>

#include "kvfuzz/case.h"

typedef enum kvf_device { KVF_DEVICE_CPU = 0, KVF_DEVICE_CUDA = 1 } kvf_device;

typedef struct kvf_kernel {
    const char *name;        /* registry key, e.g. "cpu-ref", "cuda", "cpu-splitkv/mut=..." */
    const char *description; /* one line */
    kvf_device device;
    const char *models;      /* for mutants: the bug class modelled ("B03"); NULL otherwise */
    int (*create)(void **state, kvf_error *err);
    void (*destroy)(void *state);
    int (*run)(void *state, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err);
} kvf_kernel;

/* Registry. Kernels are static objects; the registry never allocates. */
size_t kvf_kernel_count(void);
const kvf_kernel *kvf_kernel_at(size_t i);
const kvf_kernel *kvf_kernel_find(const char *name); /* NULL if unknown */

/* Whether a CUDA device is usable in this process (built with CUDA and a GPU is present). When
 * not, writes the reason into `why` (may be NULL). */
int kvf_cuda_available(char *why, size_t why_size);

/* Convenience: create, run once, destroy. */
int kvf_kernel_run_once(const kvf_kernel *kernel, const kvf_case *c, kvf_bf16 *o, float *lse,
                        kvf_error *err);

#endif
