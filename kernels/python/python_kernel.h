/* Python kernels: a decode-attention function written in Python (torch, Triton) run as a
 * kvfuzz kernel, through a persistent Python worker process (kvfuzz_worker.py).
 *
 * A Python kernel is a kvf_kernel whose descriptor (a KVF_PLUGIN_DEVICE_CPU kvf_plugin_kernel:
 * host pointers, as far as kvfuzz's buffer host is concerned) forwards each run to the worker:
 * the case's buffers are copied into one shared-memory arena, a small request goes over a
 * socket, the worker calls
 *   fn(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse)
 * (FlashInfer-Bench's destination-passing style; on the GPU when torch sees one), and what the
 * function did to every buffer, guard bytes and inputs included, is mirrored back onto the
 * host's buffers, so the host's own checks (unwritten output, out-of-bounds write, input
 * modified) judge the Python kernel as they judge any other. docs/python-kernels.md has the
 * whole contract.
 *
 * The function may declare its precision model (fn.kvfuzz_precision, into kvf_kernel.precision),
 * the shapes it handles (fn.kvfuzz_supports, asked through the descriptor's supports(); see
 * python_kernel.c for which Python process answers where) and the FP8 caches and scales it reads
 * (fn.kvfuzz_kv_dtypes, fn.kvfuzz_scale_granularities, into the descriptor's kv_dtypes and
 * scale_granularities: docs/python-kernels.md, "FP8 caches").
 *
 * Environment: KVF_PYTHON (the interpreter; default: the first of python3 on the PATH and
 * /usr/bin/python3 that imports torch, see kvf__python_choose), KVF_PYTHON_WORKER (the worker
 * script; default: installed beside the executable in ../share/kvfuzz/python, else the source
 * tree's), KVF_PYTHON_DEVICE (cpu or cuda; default cuda when torch sees a GPU).
 *
 * Ownership: kvf__python_kernel_make allocates the kernel, its descriptor, its strings (the
 * precision model included) and, for a solution, a private temporary folder holding the
 * solution's sources; for a function with a supports(), it starts a probe process that answers
 * it in the calling process. The caller owns them all and releases them with
 * kvf__python_kernel_free (which removes the folder and stops the probe). The worker
 * process belongs to the descriptor's state: started by create() in the process that runs the
 * kernel, stopped by destroy(), and killed by the kernel (PR_SET_PDEATHSIG) when that process
 * dies. */
#ifndef KVFUZZ_PYTHON_KERNEL_H
#define KVFUZZ_PYTHON_KERNEL_H

#include "kvfuzz/error.h"
#include "kvfuzz/kernel.h"

/* Builds a kernel for "python:MODULE:FUNCTION" (MODULE a dotted module name importable from the
 * working directory or PYTHONPATH, or a path ending in .py) or for the path of a
 * FlashInfer-Bench Solution JSON (language python or triton, destination-passing style).
 * Checks at once, in a short-lived python3 subprocess, that python3, torch, the module and the
 * function exist, that the function takes nine arguments and that its kvfuzz_precision (a
 * string of at most 63 characters of a-z, 0-9, '+', '-'), kvfuzz_supports (callable),
 * kvfuzz_kv_dtypes and kvfuzz_scale_granularities (FP8 dtypes and scales named together, a
 * torch with float8 dtypes, a function taking k_scale= and v_scale=) are well formed. The first
 * kernel loaded under the default interpreter prints, once per process, which interpreter that
 * is on stderr. Errors, each with one sentence: KVF_ENOTFOUND (no interpreter, no torch, no
 * float8 dtypes in a torch before 2.1 for a function declaring FP8 caches, no module, no
 * function, no such file, no worker script), KVF_EINVAL (a malformed spec or JSON, a wrong
 * language, an entry point or source file missing from the solution, a module that fails to
 * import, a wrong signature, a malformed attribute), KVF_ENOMEM, KVF_EIO. */
int kvf__python_kernel_make(const char *spec, kvf_kernel **out, kvf_error *err);

/* The interpreter Python kernels run under, into *python (the caller frees it): KVF_PYTHON when
 * set (*torch = -1, not probed), else the first of python3 on the PATH and /usr/bin/python3
 * that imports torch (*torch = 1), else python3 on the PATH, else /usr/bin/python3 (*torch =
 * 0). Each candidate is probed by one `python3 -c "import torch"` (killed after 60 s), once per
 * process and PATH/PYTHONPATH. Thread-safe. KVF_ENOTFOUND when KVF_PYTHON names no executable
 * or there is no python3 at all. torch may be NULL. */
int kvf__python_choose(char **python, int *torch, kvf_error *err);

/* Releases a kernel from kvf__python_kernel_make (NULL is fine). */
void kvf__python_kernel_free(kvf_kernel *k);

/* Whether a kernel from kvf__python_kernel_make runs its tensors on a GPU (where Triton and
 * torch.compile specialise on shapes), as its check found torch's device. */
int kvf__python_kernel_on_gpu(const kvf_kernel *k);

/* Whether a --kernel argument names a Python kernel (python:... or *.json). */
int kvf__python_kernel_spec(const char *spec);

#endif
