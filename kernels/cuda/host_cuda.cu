// The CUDA buffer host's life and entry points (host_internal.h, for kernel_host.h's
// KVF_PLUGIN_DEVICE_CUDA descriptors): creating a host (its stream, the check kernels'
// capacity, every descriptor's state), a run in the two phases of kvf_host_submit /
// kvf_host_collect, describe and destroy. host_cuda_internal.cuh describes the host's memory and
// lists the files that load a case (host_pools.cu), run and check it (host_run.cu) and hold the
// device check kernels (host_checks.cu).
#include <cuda_runtime.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host_cuda_internal.cuh"
#include "kvfuzz/cuda_kernels.h"

namespace kvf_cuda_host {

// Adds the device phases of a synchronized run; every 5 s of runs, prints the sums so far (a
// worker may be killed at any moment: no report at exit).
static void timing_end_run(Timing &t) {
    if (!t.on) return;
    if (t.pending) {
        for (int i = 0; i < kDevicePhases; ++i) {
            float ms = 0;
            if (cudaEventElapsedTime(&ms, t.ev[i], t.ev[i + 1]) == cudaSuccess)
                t.dev[i] += 1e-3 * ms;
        }
        (void)cudaGetLastError();
        t.pending = 0;
    }
    t.runs++;
    const double now = now_s();
    if (t.next_report == 0) t.next_report = now + 5;
    if (now < t.next_report) return;
    t.next_report = now + 5;
    const double us = 1e6 / (double)t.runs;
    fprintf(stderr,
            "kvfuzz cuda host %d: %lld runs; host microseconds per run: plans %.1f, images %.1f, "
            "pools %.1f, calls %.1f (of them run() %.1f), waiting %.1f, checks %.1f; device: "
            "prepare %.1f, run %.1f, post %.1f\n",
            (int)getpid(), t.runs, t.host[kPlan] * us, t.host[kImages] * us, t.host[kPools] * us,
            (t.host[kCalls] + t.host[kRunCall]) * us, t.host[kRunCall] * us, t.host[kWait] * us,
            t.host[kChecks] * us, t.dev[kPrepare] * us, t.dev[kRunDev] * us, t.dev[kPost] * us);
}

int host_create(const kvf_plugin_kernel *const *descs, int n, Host **out, kvf_error *err) {
    *out = NULL;
    char why[256];
    if (!kvf_cuda_runtime_available(why, sizeof why))
        return kvf_error_set(err, KVF_EDEVICE, "%s", why);
    Host *h = (Host *)calloc(1, sizeof *h);
    Slot *slots = (Slot *)calloc((size_t)n, sizeof *slots);
    if (!h || !slots) {
        free(h);
        free(slots);
        return kvf_error_set(err, KVF_ENOMEM, "out of host memory for the CUDA buffer host");
    }
    h->slots = slots;
    const char *verify = getenv("KVF_CUDA_VERIFY_POOL");
    h->verify_pool = verify && *verify && strcmp(verify, "0") != 0;
    const char *timing = getenv("KVF_CUDA_HOST_TIMING");
    h->t.on = timing && *timing && strcmp(timing, "0") != 0;
    if (h->t.on) {
        h->t.events = 1;
        for (int i = 0; i <= kDevicePhases; ++i)
            if (cudaEventCreate(&h->t.ev[i]) != cudaSuccess) h->t.events = 0;
        (void)cudaGetLastError();
    }
    h->stage_bytes = kStageBytes;
    const char *stage = getenv("KVF_CUDA_STAGE_BYTES");
    int rc = 0;
    if (stage && *stage) {
        char *end = NULL;
        errno = 0;
        const unsigned long long v = strtoull(stage, &end, 10);
        if (errno || *end || stage[0] == '-' || v < 32 || v > (1ull << 30) || v % 16)
            rc = kvf_error_set(err, KVF_EINVAL,
                               "KVF_CUDA_STAGE_BYTES must be a multiple of 16 from 32 to 2^30, "
                               "got \"%s\"",
                               stage);
        h->stage_bytes = (size_t)v;
    }
    if (!rc) {
        const cudaError_t e = cudaStreamCreateWithFlags(&h->stream, cudaStreamNonBlocking);
        if (e != cudaSuccess) rc = kvf__cuda_fail(err, e, "Creating a CUDA stream");
    }
    if (!rc) {
        int blocks = 0;
        const cudaError_t e = coop_capacity(&blocks);
        if (e != cudaSuccess)
            rc = kvf__cuda_fail(err, e, "Querying the device for the check kernels");
        else if (blocks < 1)
            rc = kvf_error_set(err, KVF_EDEVICE, "the check kernels fit on no multiprocessor");
        h->coop_blocks = blocks;
    }
    for (int i = 0; i < n && !rc; ++i) {
        Slot *s = &h->slots[i];
        s->desc = descs[i];
        if (s->desc->create) {
            char msg[KVF_ERROR_MSG_MAX] = {0};
            const int st = s->desc->create(s->desc, &s->state, msg, sizeof msg - 1);
            if (st != KVF_PLUGIN_OK) {
                rc = kvf__host_create_failed(s->desc, st, msg, err);
                break; // no state to destroy
            }
        }
        h->n = i + 1;
        // A create() that failed inside CUDA without saying so leaves its error here.
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) rc = kvf__cuda_fail(err, e, "Creating the kernel's state");
    }
    if (rc) {
        kvf__cuda_host_destroy(h);
        return rc;
    }
    *out = h;
    return 0;
}

// describe() of slot k for the loaded case.
void describe_slot(Host *h, int k, char *buf, size_t buf_size) {
    if (!buf || !buf_size) return;
    buf[0] = 0;
    if (!h || k < 0 || k >= h->n) return;
    const Slot *s = &h->slots[k];
    if (s->desc->describe && s->rc == 0) s->desc->describe(s->state, buf, buf_size);
    buf[buf_size - 1] = 0;
}

} // namespace kvf_cuda_host

using namespace kvf_cuda_host;

// ---------------------------------------------------------------------------------------------
// Entry points (host_internal.h)

extern "C" int kvf__cuda_host_create(const kvf_plugin_kernel *desc, void **out, kvf_error *err) {
    *out = NULL;
    Host *h = NULL;
    const int rc = host_create(&desc, 1, &h, err);
    if (!rc) *out = h;
    return rc;
}

// A failure ends the run here, whichever phase it came from.
static int end_failed_run(Host *h, int rc) {
    if (rc && rc != KVF_EUNSUPPORTED) after_failure(h);
    if (rc == KVF_EINPUTMOD) h->pool_clean = 0; // the kernel wrote into the pools
    return rc;
}

extern "C" int kvf__cuda_host_submit(void *hv, const kvf_case *c, kvf_error *err) {
    Host *h = (Host *)hv;
    if (!h || !c) return kvf_error_set(err, KVF_EINVAL, "NULL host or case");
    if (h->submitted)
        return kvf_error_set(err, KVF_EINVAL, "a run was submitted and not yet collected");
    // A failed API call of an earlier run (already reported) must not be blamed on this one.
    (void)cudaGetLastError();
    h->pool_touched = 0;
    if (h->t.on) h->t.last = now_s();
    int rc = load_case(h, c, err);
    if (!rc) rc = checked_enqueue(h, 0, err);
    if (!rc) {
        h->submitted = 1;
        return 0;
    }
    host_mark(h->t, kChecks);
    timing_end_run(h->t);
    return end_failed_run(h, rc);
}

extern "C" int kvf__cuda_host_collect(void *hv, kvf_bf16 *o, float *lse, kvf_error *err) {
    Host *h = (Host *)hv;
    if (!h || !h->submitted) return kvf_error_set(err, KVF_EINVAL, "no run was submitted");
    if (h->c->batch_size > 0 && (!o || !lse)) {
        // The run is queued all the same: let it end before the buffers are reused.
        (void)cudaStreamSynchronize(h->stream);
        h->submitted = 0;
        return kvf_error_set(err, KVF_EINVAL, "NULL output buffer");
    }
    h->submitted = 0;
    const int rc = checked_finish(h, o, lse, err);
    host_mark(h->t, kChecks);
    timing_end_run(h->t);
    return end_failed_run(h, rc);
}

extern "C" int kvf__cuda_host_run(void *hv, const kvf_case *c, kvf_bf16 *o, float *lse,
                                  kvf_error *err) {
    Host *h = (Host *)hv;
    if (!h || !c || (c->batch_size > 0 && (!o || !lse)))
        return kvf_error_set(err, KVF_EINVAL, "NULL host, case or output buffer");
    const int rc = kvf__cuda_host_submit(h, c, err);
    return rc ? rc : kvf__cuda_host_collect(h, o, lse, err);
}

extern "C" void kvf__cuda_host_describe(void *h, char *buf, size_t buf_size) {
    describe_slot((Host *)h, 0, buf, buf_size);
}

extern "C" void kvf__cuda_host_destroy(void *hv) {
    Host *h = (Host *)hv;
    if (!h) return;
    if (h->stream) cudaStreamSynchronize(h->stream);
    for (int i = 0; i < h->n; ++i)
        if (h->slots[i].desc->destroy) h->slots[i].desc->destroy(h->slots[i].state);
    if (h->stream) cudaStreamDestroy(h->stream);
    for (int i = 0; h->t.events && i <= kDevicePhases; ++i)
        cudaEventDestroy(h->t.ev[i]);
    void *dev[] = {h->d_k, h->d_v, h->d_io, h->d_stage};
    for (void *d : dev)
        if (d) cudaFree(d);
    void *pinned[] = {h->h_up, h->h_down};
    for (void *p : pinned)
        if (p) cudaFreeHost(p);
    free(h->written);
    free(h->pages);
    free(h->page_used);
    free(h->img);
    free(h->page_sort);
    free(h->slots);
    free(h);
}
