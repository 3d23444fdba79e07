// The split plan's schedule on the host and the device (split_schedule.cuh).
#include <string.h>

#include "device_buffer.cuh"
#include "split_schedule.cuh"

cudaError_t kvf__cuda_sched_init(kvf__cuda_sched *s) {
    memset(s, 0, sizeof *s);
    return cudaEventCreateWithFlags(&s->uploaded, cudaEventDisableTiming);
}

void kvf__cuda_sched_destroy(kvf__cuda_sched *s) {
    if (s->captured || s->graph_host) (void)cudaStreamSynchronize(s->stream);
    if (s->upload_recorded) (void)cudaEventSynchronize(s->uploaded);
    if (s->host) cudaFreeHost(s->host);
    cudaEventDestroy(s->uploaded);
    if (s->dev) cudaFree(s->dev);
    if (s->graph_host) cudaFreeHost(s->graph_host);
    if (s->graph_dev) cudaFree(s->graph_dev);
}

int kvf__cuda_sched_stage(kvf__cuda_sched *s, const int32_t *sched, size_t len, kvf_error *err) {
    // host_len entries fit in the host buffer, so a longer schedule never reaches the memcmp.
    if (len == s->host_len && memcmp(sched, s->host, len * sizeof(int32_t)) == 0) return 0;
    if (s->captured) {
        // A CUDA graph's launch reads this schedule (its kernels' arguments and grid are the
        // capture's): the graph keeps these buffers, consistent with its launch, and this plan
        // takes new ones. Replays in flight are waited for first: the stream, as the graph's
        // event cannot be waited on outside the graph. The graph kept before is released: a
        // plan serves one captured graph at a time.
        KVF_CUDA_TRY(cudaStreamSynchronize(s->stream), "Waiting for the captured schedule upload");
        if (s->graph_host) cudaFreeHost(s->graph_host);
        if (s->graph_dev) cudaFree(s->graph_dev);
        s->graph_host = s->host, s->graph_dev = s->dev;
        s->host = NULL, s->dev = NULL;
        s->host_cap_bytes = s->dev_cap_bytes = 0;
        s->captured = 0, s->upload_recorded = 0; // the event belongs to the graph's buffers
    }
    s->host_len = 0; // until the new schedule is in place: a failure here re-uploads
    // No enqueued upload may still read the host copy.
    if (s->upload_recorded)
        KVF_CUDA_TRY(cudaEventSynchronize(s->uploaded), "Waiting for the schedule upload");
    // At least 1024 entries, so that small schedules never reallocate.
    const size_t bytes = (len < 512 ? 512 : len) * sizeof(int32_t);
    int rc = kvf__cuda_pinned_grow((void **)&s->host, &s->host_cap_bytes, bytes,
                                   "Allocating the pinned split schedule", err);
    if (!rc)
        rc = kvf__cuda_dev_grow(&s->dev, &s->dev_cap_bytes, len * sizeof(int32_t),
                                "Allocating the split schedule", err);
    if (rc) return rc;
    memcpy(s->host, sched, len * sizeof(int32_t));
    s->host_len = len;
    s->dirty = 1;
    return 0;
}

int kvf__cuda_sched_ready_on(kvf__cuda_sched *s, cudaStream_t st, kvf_error *err) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    KVF_CUDA_TRY(cudaStreamIsCapturing(st, &capture), "Asking whether the stream is capturing");
    if (capture == cudaStreamCaptureStatusActive) {
        // Into the graph, changed or not: every replay uploads the schedule its captured launch
        // was planned with (stage() leaves these buffers to the graph once a plan changes it);
        // no event: one recorded under a capture belongs to the graph and cannot be waited on.
        if (s->host_len > 0)
            KVF_CUDA_TRY(cudaMemcpyAsync(s->dev, s->host, s->host_len * sizeof(int32_t),
                                         cudaMemcpyHostToDevice, st),
                         "Capturing the split schedule's upload");
        s->dirty = 0;
        s->captured = 1;
        s->stream = st;
        return 0;
    }
    if (s->dirty) {
        KVF_CUDA_TRY(cudaMemcpyAsync(s->dev, s->host, s->host_len * sizeof(int32_t),
                                     cudaMemcpyHostToDevice, st),
                     "Uploading the split schedule");
        KVF_CUDA_TRY(cudaEventRecord(s->uploaded, st), "Uploading the split schedule");
        s->dirty = 0;
        s->upload_recorded = 1;
        s->captured = 0; // an eager upload: its event serves again
        s->stream = st;
    } else if (s->upload_recorded && st != s->stream) {
        KVF_CUDA_TRY(cudaStreamWaitEvent(st, s->uploaded, 0),
                     "Ordering the launch after the schedule upload");
    }
    return 0;
}
