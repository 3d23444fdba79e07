/* The timed part of `kvfuzz bench` (kvfuzz/bench_session.h): CUDA kernels round robin against a
 * read roofline, on one CUDA buffer host. Built only with CUDA; the guard keeps it out of the
 * CPU-only copies the libFuzzer builds compile of this library (fuzz/CMakeLists.txt). */
#ifdef KVF_HAVE_CUDA
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kvfuzz/bench_session.h"
#include "kvfuzz/cuda_kernels.h"
#include "kvfuzz/kernel_bench.h"

struct kvf_bench_session {
    kvf_bench_settings st;
    kvf_bench_host *host;
    cudaStream_t stream;
    const kvf_plugin_kernel **descs; /* [timed + 1]: the timed ones, then cuda-naive */
    int n, timed, ref;
    void *flush;
    uint32_t *sink;
    cudaEvent_t *ev; /* [iters][timed + 1][2] */
    int nev;
    kvf_bench_result *res; /* [timed]: the last workload's rows */
};

static int cuda_ok(cudaError_t e, const char *what, kvf_error *err) {
    if (e == cudaSuccess) return 1;
    kvf_error_set(err, KVF_EDEVICE, "%s failed: %s (%s).", what, cudaGetErrorName(e),
                  cudaGetErrorString(e));
    return 0;
}

int kvf_bench_session_create(kvf_bench_session **out, const kvf_kernel *const *kernels, size_t n,
                             const kvf_bench_settings *settings, kvf_error *err) {
    *out = NULL;
    const kvf_kernel *naive = kvf_kernel_find("cuda-naive");
    kvf_bench_session *s = calloc(1, sizeof *s);
    if (s) s->descs = calloc(n + 1, sizeof *s->descs);
    if (s) s->res = calloc(n + 1, sizeof *s->res);
    if (!s || !s->descs || !s->res) {
        kvf_bench_session_destroy(s);
        return kvf_error_set(err, KVF_ENOMEM, "out of memory for the kernels");
    }
    s->st = *settings;
    for (size_t i = 0; i < n; i++) {
        int rc = kvf_kernel_load_descriptor(kernels[i], &s->descs[s->n], err);
        if (rc) {
            kvf_bench_session_destroy(s);
            return rc;
        }
        if (s->descs[s->n] == naive->desc) s->ref = s->n;
        s->n++;
    }
    s->timed = s->n;
    if (s->descs[s->ref] != naive->desc) { /* an untimed reference of its own */
        s->ref = s->n;
        s->descs[s->n++] = naive->desc;
    }
    *out = s;
    return 0;
}

int kvf_bench_session_start(kvf_bench_session *s, kvf_error *err) {
    int rc = kvf_bench_host_create(s->descs, s->n, &s->host, err);
    if (!rc) s->stream = (cudaStream_t)kvf_bench_host_stream(s->host);
    return rc;
}

int kvf_bench_session_prepare(kvf_bench_session *s, kvf_bench_device *dev, kvf_error *err) {
    const int events = s->st.iters * (s->timed + 1) * 2;
    s->ev = calloc((size_t)events, sizeof *s->ev);
    if (!s->ev) return kvf_error_set(err, KVF_ENOMEM, "out of host memory for the timing events");
    if (!cuda_ok(cudaMalloc(&s->flush, KVF_BENCH_FLUSH_BYTES), "allocating the L2 flush buffer",
                 err) ||
        !cuda_ok(
            cudaMalloc((void **)&s->sink, sizeof(uint32_t) * (size_t)kvf_cuda_roofline_sink_len()),
            "allocating", err))
        return KVF_EDEVICE;
    for (; s->nev < events; s->nev++)
        if (!cuda_ok(cudaEventCreate(&s->ev[s->nev]), "creating events", err)) return KVF_EDEVICE;
    struct cudaDeviceProp prop;
    int d = 0;
    cudaGetDevice(&d);
    if (!cuda_ok(cudaGetDeviceProperties(&prop, d), "device query", err)) return KVF_EDEVICE;
    snprintf(dev->name, sizeof dev->name, "%s", prop.name);
    dev->sms = prop.multiProcessorCount;
    dev->l2_bytes = prop.l2CacheSize;
    return 0;
}

/* Times the roofline and every runnable kernel round robin: iteration i runs entry 0 (the
 * roofline), then each kernel, each after an L2 flush and between its own two events; med and
 * mn receive each entry's median and minimum. */
static int time_round_robin(kvf_bench_session *s, const int *runnable, const void *roof,
                            int64_t bytes, double *med, double *mn, kvf_error *err) {
    const int entries = s->timed + 1, iters = s->st.iters;
    for (int i = 0; i < s->st.warmup + iters; i++) {
        const int t = i - s->st.warmup;
        for (int e = 0; e < entries; e++) {
            if (e > 0 && !runnable[e - 1]) continue;
            if (!cuda_ok(cudaMemsetAsync(s->flush, i & 0xFF, KVF_BENCH_FLUSH_BYTES, s->stream),
                         "L2 flush", err))
                return KVF_EDEVICE;
            cudaEvent_t *ev = s->ev + 2 * ((size_t)(t < 0 ? 0 : t) * entries + e);
            if (t >= 0 && !cuda_ok(cudaEventRecord(ev[0], s->stream), "event", err))
                return KVF_EDEVICE;
            int rc = e == 0 ? kvf_cuda_roofline_launch(roof, bytes, s->sink, s->stream, err)
                            : kvf_bench_host_launch(s->host, e - 1, err);
            if (rc) return rc;
            if (t >= 0 && !cuda_ok(cudaEventRecord(ev[1], s->stream), "event", err))
                return KVF_EDEVICE;
        }
    }
    if (!cuda_ok(cudaStreamSynchronize(s->stream), "timed launches", err)) return KVF_EDEVICE;
    float *ms = malloc(sizeof(float) * (size_t)iters);
    if (!ms) return kvf_error_set(err, KVF_ENOMEM, "out of host memory for the timings");
    for (int e = 0; e < entries; e++) {
        if (e > 0 && !runnable[e - 1]) continue;
        for (int t = 0; t < iters; t++) {
            cudaEvent_t *ev = s->ev + 2 * ((size_t)t * entries + e);
            if (!cuda_ok(cudaEventElapsedTime(&ms[t], ev[0], ev[1]), "event time", err)) {
                free(ms);
                return KVF_EDEVICE;
            }
        }
        kvf_bench_median_min(ms, iters, &med[e], &mn[e]);
    }
    free(ms);
    return 0;
}

/* A checked run of every kernel (the host's checks), each timed one's row started, and the
 * timed ones' agreement with the reference; runnable[k] says which passed the checks. */
static int check_all(kvf_bench_session *s, const kvf_bench_workload *w, const kvf_case *c,
                     kvf_bf16 **outs_o, float **outs_lse, int *runnable, kvf_error *err) {
    const size_t q_b = (size_t)kvf_case_q_elems(c) * 2, lse_b = (size_t)kvf_case_lse_elems(c) * 4;
    for (int k = 0; k < s->n; k++) {
        outs_o[k] = malloc(q_b + 2);
        outs_lse[k] = malloc(lse_b + 4);
        if (!outs_o[k] || !outs_lse[k])
            return kvf_error_set(err, KVF_ENOMEM, "out of host memory for the outputs of %s",
                                 w->name);
        kvf_error e = {0};
        int st = kvf_bench_host_check(s->host, k, outs_o[k], outs_lse[k], &e);
        if (k < s->timed) {
            kvf_bench_result *r = &s->res[k];
            r->kernel = s->descs[k]->name;
            r->status = st;
            snprintf(r->why, sizeof r->why, "%s", e.msg);
            kvf_bench_host_describe(s->host, k, r->plan, sizeof r->plan);
            runnable[k] = st == 0;
        } else if (st) {
            return kvf_error_set(err, st, "the reference %s fails on %s: %s", s->descs[k]->name,
                                 w->name, e.msg);
        }
        if (st == KVF_EDEVICE) /* the context may be gone: no kernel after it runs */
            return kvf_error_set(err, st, "kernel %s on workload %s: %s; the run ends there",
                                 s->descs[k]->name, w->name, e.msg);
    }
    for (int k = 0; k < s->timed; k++)
        if (runnable[k])
            kvf_bench_compare(c, outs_o[k], outs_lse[k], outs_o[s->ref], outs_lse[s->ref],
                              &s->res[k]);
    return 0;
}

/* One workload once its case is built: load, checks, roofline buffer, timing, rows. */
static int measure(kvf_bench_session *s, const kvf_bench_workload *w, const kvf_case *c,
                   kvf_bench_measure *m, kvf_error *err) {
    const size_t nk = (size_t)s->n; /* a plugin may add thousands */
    kvf_bf16 **outs_o = calloc(nk, sizeof *outs_o);
    float **outs_lse = calloc(nk, sizeof *outs_lse);
    int *runnable = calloc(nk, sizeof *runnable);
    double *med = calloc(nk + 1, sizeof *med), *mn = calloc(nk + 1, sizeof *mn);
    void *roof = NULL;
    const int64_t bytes = kvf_bench_bytes(c);
    int rc = KVF_ENOMEM;
    if (!outs_o || !outs_lse || !runnable || !med || !mn) {
        kvf_error_set(err, rc, "out of host memory.");
        goto out;
    }
    if ((rc = kvf_bench_host_load_generated(s->host, c, s->st.seed, err)) ||
        (rc = check_all(s, w, c, outs_o, outs_lse, runnable, err)))
        goto out;
    const size_t roof_b = (size_t)((bytes + 15) / 16 * 16);
    rc = KVF_EDEVICE;
    if (!cuda_ok(cudaMalloc(&roof, roof_b), "allocating the roofline buffer", err) ||
        !cuda_ok(cudaMemsetAsync(roof, 0x5A, roof_b, s->stream), "fill", err))
        goto out;
    if ((rc = time_round_robin(s, runnable, roof, bytes, med, mn, err))) goto out;
    for (int k = 0; k < s->timed; k++)
        if (runnable[k]) kvf_bench_result_timed(&s->res[k], med[k + 1], mn[k + 1], med[0], bytes);
    m->results = s->res;
    m->count = s->timed;
    m->roof_us = med[0];
    m->bytes = bytes;
    m->tokens = kvf_case_total_tokens(c);
out:
    for (size_t k = 0; k < nk && outs_o && outs_lse; k++) {
        free(outs_o[k]);
        free(outs_lse[k]);
    }
    free(outs_o);
    free(outs_lse);
    free(runnable);
    free(med);
    free(mn);
    if (roof) cudaFree(roof);
    return rc;
}

int kvf_bench_session_run(kvf_bench_session *s, const kvf_bench_workload *w, int first,
                          kvf_bench_measure *m, kvf_error *err) {
    memset(m, 0, sizeof *m);
    memset(s->res, 0, (size_t)s->timed * sizeof *s->res);
    kvf_case c;
    int rc = kvf_bench_case_build(&c, w, &s->st.shape, s->st.seed, first, err);
    if (rc) return rc;
    rc = measure(s, w, &c, m, err);
    /* The host keeps its buffers for the next workload; the case is the session's own. */
    kvf_case_free(&c);
    return rc;
}

void kvf_bench_session_destroy(kvf_bench_session *s) {
    if (!s) return;
    for (int i = 0; i < s->nev; i++)
        cudaEventDestroy(s->ev[i]);
    free(s->ev);
    if (s->flush) cudaFree(s->flush);
    if (s->sink) cudaFree(s->sink);
    kvf_bench_host_destroy(s->host);
    free(s->descs);
    free(s->res);
    free(s);
}

#endif
