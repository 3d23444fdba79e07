/* The buffer host's dispatcher (kernel_host.h): kvf_host_* choose, per descriptor, the CPU
 * host (host_cpu.c) or the CUDA host (cuda/host_cuda.cu), both behind host_internal.h, and keep
 * a submitted run's case and submit error between kvf_host_submit and kvf_host_collect. */
#include <stdlib.h>

#include "host_internal.h"

struct kvf_host {
    int cuda;
    void *impl; /* the CPU or the CUDA host */
    /* A submitted run not yet collected: the case (a CPU host runs it in collect) and, when
     * the CUDA host's submit failed, its error. */
    const kvf_case *submitted;
    int submit_rc;
    kvf_error submit_err;
};

#ifndef KVF_HAVE_CUDA
/* Without CUDA no device descriptor can run; the dispatch below says so. */
int kvf__cuda_host_create(const kvf_plugin_kernel *desc, void **out, kvf_error *err) {
    (void)out;
    return kvf_error_set(err, KVF_EDEVICE, "%s is a CUDA kernel and kvfuzz was built without CUDA",
                         desc->name);
}
int kvf__cuda_host_run(void *h, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    (void)h, (void)c, (void)o, (void)lse;
    return kvf_error_set(err, KVF_EDEVICE, "kvfuzz was built without CUDA");
}
int kvf__cuda_host_submit(void *h, const kvf_case *c, kvf_error *err) {
    return kvf__cuda_host_run(h, c, NULL, NULL, err);
}
int kvf__cuda_host_collect(void *h, kvf_bf16 *o, float *lse, kvf_error *err) {
    return kvf__cuda_host_run(h, NULL, o, lse, err);
}
void kvf__cuda_host_describe(void *h, char *buf, size_t n) {
    (void)h;
    if (n) buf[0] = 0;
}
void kvf__cuda_host_destroy(void *h) {
    (void)h;
}
int kvf__cuda_host_graph_replay(void *h, const kvf_case *capture, const kvf_case *c, kvf_bf16 *o,
                                float *lse, kvf_error *err) {
    (void)h, (void)capture, (void)c, (void)o, (void)lse;
    return kvf_error_set(err, KVF_EDEVICE, "kvfuzz was built without CUDA");
}
#endif

int kvf_host_create(const kvf_plugin_kernel *desc, kvf_host **out, kvf_error *err) {
    kvf_host *h = calloc(1, sizeof *h);
    if (!h) return kvf_error_set(err, KVF_ENOMEM, "out of memory for the kernel host");
    h->cuda = desc->device == KVF_PLUGIN_DEVICE_CUDA;
    int rc = h->cuda ? kvf__cuda_host_create(desc, &h->impl, err)
                     : kvf__cpu_host_create(desc, &h->impl, err);
    if (rc) {
        free(h);
        return rc;
    }
    *out = h;
    return 0;
}

int kvf_host_run(kvf_host *h, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    if (h->submitted)
        return kvf_error_set(err, KVF_EINVAL, "a run was submitted and not yet collected");
    return h->cuda ? kvf__cuda_host_run(h->impl, c, o, lse, err)
                   : kvf__cpu_host_run(h->impl, c, o, lse, err);
}

int kvf_host_submit(kvf_host *h, const kvf_case *c, kvf_error *err) {
    if (h->submitted)
        return kvf_error_set(err, KVF_EINVAL, "a run was submitted and not yet collected");
    if (!c) return kvf_error_set(err, KVF_EINVAL, "NULL case");
    h->submitted = c;
    h->submit_rc = 0;
    kvf_error_clear(&h->submit_err);
    if (h->cuda) h->submit_rc = kvf__cuda_host_submit(h->impl, c, &h->submit_err);
    if (h->submit_rc && err) *err = h->submit_err;
    return h->submit_rc;
}

int kvf_host_collect(kvf_host *h, kvf_bf16 *o, float *lse, kvf_error *err) {
    const kvf_case *c = h->submitted;
    if (!c) return kvf_error_set(err, KVF_EINVAL, "no run was submitted");
    h->submitted = NULL;
    if (h->submit_rc) {
        if (err) *err = h->submit_err;
        return h->submit_rc;
    }
    return h->cuda ? kvf__cuda_host_collect(h->impl, o, lse, err)
                   : kvf__cpu_host_run(h->impl, c, o, lse, err);
}

int kvf_host_overlaps(const kvf_host *h) {
    return h->cuda;
}

void kvf_host_describe(kvf_host *h, char *buf, size_t buf_size) {
    if (h->cuda)
        kvf__cuda_host_describe(h->impl, buf, buf_size);
    else
        kvf__cpu_host_describe(h->impl, buf, buf_size);
}

void kvf_host_destroy(kvf_host *h) {
    if (!h) return;
    if (h->cuda)
        kvf__cuda_host_destroy(h->impl);
    else
        kvf__cpu_host_destroy(h->impl);
    free(h);
}

int kvf_host_graph_replay(kvf_host *h, const kvf_case *capture, const kvf_case *c, kvf_bf16 *o,
                          float *lse, kvf_error *err) {
    if (h->submitted)
        return kvf_error_set(err, KVF_EINVAL, "a run was submitted and not yet collected");
    if (!h->cuda)
        return kvf_error_set(
            err, KVF_EUNSUPPORTED,
            "graph replay applies to CUDA kernels only (this one runs on the CPU)");
    return kvf__cuda_host_graph_replay(h->impl, capture, c, o, lse, err);
}
