// The split plan's device state: its schedule (split_plan.h) in pinned host memory, for change
// detection and the upload, and on the device, where the split and merge kernels read it.
// Staging a schedule only marks it dirty when it changed; the next launch enqueues the upload
// on the launch's own stream ahead of the kernels (kvf__cuda_sched_ready_on), so a run pays no
// synchronous copy and no extra wait for it, and an unchanged schedule is not uploaded again.
// A launch captured into a CUDA graph always captures the upload; a plan() after it that
// changes the schedule moves to new buffers, so that the graph's replay keeps the schedule its
// captured grid and arguments were planned with: it recomputes the captured batch (right for
// the same schedule, wrong but in bounds for another: docs/invariance.md, "Graph replay").
//
// Ownership: the plan (plan.cuh) holds one kvf__cuda_sched, set up by kvf__cuda_sched_init and
// released by kvf__cuda_sched_destroy. Errors as device_buffer.cuh.
#ifndef KVFUZZ_CUDA_SPLIT_SCHEDULE_CUH
#define KVFUZZ_CUDA_SPLIT_SCHEDULE_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_error.cuh"

struct kvf__cuda_sched {
    int32_t *host; // pinned: the last staged schedule, host_len entries
    size_t host_len, host_cap_bytes;
    void *dev; // the device copy
    size_t dev_cap_bytes;
    int dirty;            // host is newer than dev
    cudaEvent_t uploaded; // recorded after the last upload: host is free to change
    int upload_recorded;  // and dev is complete once it fires
    cudaStream_t stream;  // where that upload was enqueued
    // The last upload was captured into a CUDA graph, which copies host (host_len entries at
    // the capture) to dev at every replay. A different schedule staged after it leaves both
    // buffers to the graph (graph_host, graph_dev, freed by the next such hand-over or by
    // destroy) and takes new ones, so that a replay stays consistent with its captured launch.
    int captured;
    int32_t *graph_host;
    void *graph_dev;
};

// Zeroes s and creates its event; returns the CUDA error.
cudaError_t kvf__cuda_sched_init(kvf__cuda_sched *s);
// Waits for an upload in flight, then frees everything.
void kvf__cuda_sched_destroy(kvf__cuda_sched *s);
// Makes `sched` (len entries) the schedule the next launch uploads, unless it equals the last.
int kvf__cuda_sched_stage(kvf__cuda_sched *s, const int32_t *sched, size_t len, kvf_error *err);
// Makes s->dev current for work enqueued next on st: uploads a staged schedule there, or
// orders st after the last upload when that went to another stream.
int kvf__cuda_sched_ready_on(kvf__cuda_sched *s, cudaStream_t st, kvf_error *err);

#endif
