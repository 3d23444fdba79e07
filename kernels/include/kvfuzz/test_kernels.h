/* Kernel lookup for the fuzzers: the registry's kernels plus deliberately broken or checking
 * CPU kernels that exist only to test kvfuzz itself. They are never listed by `kvfuzz kernels`
 * and are reachable only by their exact names, all starting with "test-":
 *   test-planted      cpu-ref handed each last page one slot longer than it is when the page
 *                     is not full: it reads an unused tail slot (bug classes B03/B15);
 *   test-crash        cpu-ref, but a wild write (segfault) on any case with an empty sequence;
 *   test-hang         cpu-ref, but never returns on any case with a one-token sequence;
 *   test-flaky        cpu-ref killed (SIGKILL) the first time it sees a case, as by the OOM
 *                     killer, and correct when the case runs again;
 *   test-overlap      cpu-ref that segfaults when another of its runs (another state in the
 *                     same worker) is in progress: states that interfere;
 *   test-pool-check   cpu-ref after checking that every slot no sequence reads holds the
 *                     buffer host's input poison (a kernel error otherwise): what a kernel is
 *                     handed;
 *   test-nostart      a kernel whose create() fails, as one whose device is missing does;
 *   test-device1-broken  cpu-ref whose create() fails in a worker pinned to device 1
 *                     (CUDA_VISIBLE_DEVICES=1): a dead GPU of a multi-device campaign;
 *   test-two-phase    cpu-ref in two phases (kvf_kernel_submit / _collect), as a CUDA kernel's
 *                     buffer host runs, with test-crash's and test-hang's triggers: the
 *                     worker's lanes driven from one thread, without a GPU.
 * Static objects; nothing is allocated. */
#ifndef KVFUZZ_TEST_KERNELS_H
#define KVFUZZ_TEST_KERNELS_H

#include <stddef.h>

#include "kvfuzz/kernel.h"

/* The registry's kernel of that name, else a test kernel of that name, else NULL. */
const kvf_kernel *kvf_fuzz_kernel_find(const char *name);

size_t kvf_test_kernel_count(void);
const kvf_kernel *kvf_test_kernel_at(size_t i);

#endif
