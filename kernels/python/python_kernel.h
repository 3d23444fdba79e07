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
 * Environment: KVF_PYTHON (the interpreter; default /usr/bin/python3 where it exists, else
 * python3 on the PATH), KVF_PYTHON_WORKER (the worker script; default: installed beside the
 * executable in ../share/kvfuzz/python, else the source tree's), KVF_PYTHON_DEVICE (cpu or
 * cuda; default cuda when torch sees a GPU).
 *
 * Ownership: kvf__python_kernel_make allocates the kernel, its descriptor, its strings and, for
 * a solution, a private temporary folder holding the solution's sources; the caller owns them
 * all and releases them with kvf__python_kernel_free (which removes the folder). The worker
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
 * function exist and that the function takes nine arguments. Errors, each with one sentence:
 * KVF_ENOTFOUND (no interpreter, no torch, no module, no function, no such file, no worker
 * script), KVF_EINVAL (a malformed spec or JSON, a wrong language, an entry point or source
 * file missing from the solution, a module that fails to import, a wrong signature),
 * KVF_ENOMEM, KVF_EIO. */
int kvf__python_kernel_make(const char *spec, kvf_kernel **out, kvf_error *err);

/* Releases a kernel from kvf__python_kernel_make (NULL is fine). */
void kvf__python_kernel_free(kvf_kernel *k);

/* Whether a --kernel argument names a Python kernel (python:... or *.json). */
int kvf__python_kernel_spec(const char *spec);

#endif
