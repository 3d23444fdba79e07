/* The kernel worker process (runner.h describes its use): created by the runner with fork(),
 * it creates the kernel once, answers ready, then serves the cases the parent sends over the
 * socket (wire.h) until the socket closes or a kernel error leaves its state untrusted.
 *
 * Never returns: the process ends with _exit. */
#ifndef KVF_FUZZ_WORKER_H
#define KVF_FUZZ_WORKER_H

#include <sys/types.h>

#include "kvfuzz/runner.h"

void kvf__worker_main(int fd, const kvf_runner_opts *opts, pid_t parent);

#endif
