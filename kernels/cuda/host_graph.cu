// The graph-replay relation's run on the CUDA buffer host (kvf_host_graph_replay in
// kernel_host.h; docs/invariance.md): how serving engines call a decode kernel. run() is
// captured in a CUDA graph on one case and launched, then the next case of the same shape class
// is written into the same buffers, plan() is called again and the graph is replayed. Both
// launches are checked runs (host_run.cu); only how run() is reached differs (graph_run).
#include <cuda_runtime.h>

#include <stdio.h>
#include <string.h>

#include "host_cuda_internal.cuh"

namespace kvf_cuda_host {

int graph_run(Host *h, Slot *s, const kvf_plugin_args *a, Enqueued *q) {
    const size_t cap = sizeof q->msg - 1;
    if (h->graph_phase == kCapture) {
        cudaError_t e = cudaStreamBeginCapture(h->stream, cudaStreamCaptureModeGlobal);
        if (e != cudaSuccess) {
            snprintf(q->msg, cap, "a CUDA graph capture could not begin on the stream: %s",
                     cudaGetErrorName(e));
            (void)cudaGetLastError();
            return KVF_PLUGIN_ERROR;
        }
        char said[KVF_ERROR_MSG_MAX] = {0};
        const int st = s->desc->run(s->state, a, said, sizeof said - 1);
        cudaGraph_t g = NULL;
        e = cudaStreamEndCapture(h->stream, &g);
        if (st != KVF_PLUGIN_OK || e != cudaSuccess) {
            if (g) (void)cudaGraphDestroy(g);
            (void)cudaGetLastError();
            if (e == cudaSuccess) {
                memcpy(q->msg, said, sizeof said < sizeof q->msg ? sizeof said : sizeof q->msg);
                return st;
            }
            snprintf(q->msg, cap, "run() could not be captured in a CUDA graph (%s)%s%.300s",
                     cudaGetErrorName(e), said[0] ? ": " : "", said);
            return KVF_PLUGIN_ERROR;
        }
        e = cudaGraphInstantiate(&h->graph_exec, g, 0);
        (void)cudaGraphDestroy(g);
        if (e != cudaSuccess) {
            h->graph_exec = NULL;
            snprintf(q->msg, cap,
                     "the CUDA graph captured from run() could not be instantiated: %s",
                     cudaGetErrorName(e));
            (void)cudaGetLastError();
            return KVF_PLUGIN_ERROR;
        }
    }
    const cudaError_t e = cudaGraphLaunch(h->graph_exec, h->stream);
    if (e != cudaSuccess) {
        snprintf(q->msg, cap, "launching the CUDA graph captured from run() failed: %s",
                 cudaGetErrorName(e));
        (void)cudaGetLastError();
        return KVF_PLUGIN_ERROR;
    }
    return KVF_PLUGIN_OK;
}

// The shape class of a replay: what a captured launch may depend on besides the lengths.
static int same_class(const kvf_case *a, const kvf_case *b) {
    return a->batch_size == b->batch_size && a->num_qo_heads == b->num_qo_heads &&
           a->num_kv_heads == b->num_kv_heads && a->head_dim == b->head_dim &&
           a->page_size == b->page_size && a->num_pages == b->num_pages &&
           a->sm_scale == b->sm_scale &&
           a->kv_indptr[a->batch_size] <= b->kv_indptr[b->batch_size] &&
           a->quant.k_dtype == b->quant.k_dtype && a->quant.v_dtype == b->quant.v_dtype &&
           a->quant.granularity == b->quant.granularity;
}

// Says which of the two launches a failure came from.
static int on_capture(int rc, kvf_error *err) {
    if (rc && err && err->code) {
        char msg[KVF_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg,
                 "in the launch that captured the graph (the shorter batch): %.320s", err->msg);
        snprintf(err->msg, sizeof err->msg, "%s", msg);
    }
    return rc;
}

// Plans c and lists its pages so that the capture's layout leaves room for it: the floors.
static int size_for(Host *h, const kvf_case *c, kvf_error *err) {
    int rc = kvf__host_check_case(c, err);
    if (rc) return rc;
    kvf_kernel_shape(c, &h->shape);
    plan_slots(h, c);
    if (h->slots[0].rc) {
        if (err) *err = h->slots[0].why;
        return h->slots[0].rc;
    }
    rc = read_pages(h, c, err);
    if (rc) return rc;
    h->floor_entries = c->kv_indptr[c->batch_size];
    h->floor_ws = h->slots[0].ws_bytes;
    h->floor_read_pages = h->num_read_pages;
    return 0;
}

static int launch_checked(Host *h, GraphPhase phase, kvf_bf16 *o, float *lse, kvf_error *err) {
    h->graph_phase = phase;
    int rc = checked_enqueue(h, 0, err);
    return rc ? rc : checked_finish(h, o, lse, err);
}

} // namespace kvf_cuda_host

using namespace kvf_cuda_host;

extern "C" int kvf__cuda_host_graph_replay(void *hv, const kvf_case *capture, const kvf_case *c,
                                           kvf_bf16 *o, float *lse, kvf_error *err) {
    Host *h = (Host *)hv;
    if (!h || !capture || !c || !o || !lse)
        return kvf_error_set(err, KVF_EINVAL, "NULL host, case or output buffer");
    if (h->submitted)
        return kvf_error_set(err, KVF_EINVAL, "a run was submitted and not yet collected");
    if (!same_class(capture, c))
        return kvf_error_set(err, KVF_EINVAL,
                             "a graph is replayed only on a case of its shape class: the same "
                             "batch, heads, head dim, page size, pool, sm_scale, cache dtypes and "
                             "scale granularity, and a table no shorter than the capture's");
    (void)cudaGetLastError();
    h->pool_touched = 0;
    int rc = size_for(h, c, err);
    if (!rc) rc = load_case(h, capture, err);
    void *const io = h->d_io;
    // The capture's outputs go through o and lse too: the same sizes, overwritten below.
    if (!rc) rc = on_capture(launch_checked(h, kCapture, o, lse, err), err);
    if (!rc) {
        h->floor_ws = h->L.ws_bytes;
        h->pool_touched = 0;
        rc = load_case(h, c, err);
        if (!rc && h->d_io != io)
            rc = kvf_error_set(err, KVF_EKERNEL,
                               "%s asked for more workspace when planned again on the same case "
                               "(the graph's buffers cannot move)",
                               h->slots[0].desc->name);
        if (!rc) rc = launch_checked(h, kReplay, o, lse, err);
    }
    if (h->graph_exec) (void)cudaGraphExecDestroy(h->graph_exec);
    h->graph_exec = NULL;
    h->graph_phase = kEager;
    h->floor_entries = h->floor_read_pages = 0;
    h->floor_ws = 0;
    if (rc && rc != KVF_EUNSUPPORTED) after_failure(h);
    if (rc == KVF_EINPUTMOD) h->pool_clean = 0; // the kernel wrote into the pools
    return rc;
}
