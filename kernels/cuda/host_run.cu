// One checked run of the CUDA buffer host (host_cuda_internal.cuh): the prepare kernel, the
// descriptor's run() and the post kernel enqueued on the host's stream, then, after one
// synchronization, every check of kernel_host.h on what the post kernel brought back; and the
// slow paths that find where a failed check failed (which byte, which page), paid only then.
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host_cuda_internal.cuh"

namespace kvf_cuda_host {

// ---- locating a failed check (slow paths) ----------------------------------------------------

// Names the byte `at` of `in`: a data byte is an input change, a guard byte an out-of-bounds
// write next to the buffer it guards.
static int name_in_byte(Host *h, size_t at, unsigned char was, unsigned char now, kvf_error *err) {
    const Layout &L = h->L;
    const struct {
        const char *name;
        size_t at, bytes;
    } buf[6] = {{"q", L.q, L.q_b},
                {"kv_indptr", L.ip, L.ip_b},
                {"kv_indices", L.ix, L.ix_b},
                {"kv_last_page_len", L.ll, L.ll_b},
                {"k_scale", L.ks, L.ks_b},
                {"v_scale", L.vs, L.vs_b}};
    for (int i = 0; i < 6; ++i) {
        const size_t beg = buf[i].at - kG, end = buf[i].at + buf[i].bytes + kG;
        if (at < beg || at >= end) continue;
        if (at >= buf[i].at && at < buf[i].at + buf[i].bytes)
            return kvf_error_set(err, KVF_EINPUTMOD,
                                 "the kernel modified its input %s at byte %zu (0x%02x became "
                                 "0x%02x)",
                                 buf[i].name, at - buf[i].at, was, now);
        const int after = at >= buf[i].at;
        const size_t dist = after ? at - (buf[i].at + buf[i].bytes) + 1 : buf[i].at - at;
        // The wording of kvf__host_check_guard, so findings read alike on both hosts.
        return kvf_error_set(err, KVF_EOOBWRITE,
                             "the kernel wrote outside %s: byte %zu %s it changed (guard byte "
                             "0x%02x became 0x%02x)",
                             buf[i].name, dist, after ? "past its end" : "before its start", was,
                             now);
    }
    return kvf_error_set(err, KVF_EOOBWRITE,
                         "the kernel wrote into the padding between its input buffers (byte %zu, "
                         "0x%02x became 0x%02x)",
                         at, was, now);
}

static int locate_in_change(Host *h, kvf_error *err) {
    const size_t n = h->L.in_b;
    unsigned char *now = (unsigned char *)malloc(n);
    if (!now) return kvf_error_set(err, KVF_EINPUTMOD, "the kernel modified its inputs");
    const cudaError_t e = cudaMemcpy(now, h->d_io, n, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        free(now);
        return kvf__cuda_fail(err, e, "Reading back a changed input");
    }
    const unsigned char *was = (const unsigned char *)h->h_up;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; ++i)
        if (now[i] != was[i]) rc = name_in_byte(h, i, was[i], now[i], err);
    free(now);
    // Equal bytes and a changed checksum: the kernel wrote and then restored them.
    return rc ? rc
              : kvf_error_set(err, KVF_EINPUTMOD, "the kernel modified its inputs during the run");
}

// Element i of a page as the pool holds it: a bf16's bits or an FP8 byte.
static unsigned page_elem(const unsigned char *page, int64_t i, int fp8) {
    if (fp8) return page[i];
    uint16_t x;
    memcpy(&x, page + 2 * i, sizeof x);
    return x;
}

// Compares device page `p` of both pools with what it must hold (the case's page image, or
// poison for a page the case does not read); have and want hold page_bytes each.
static int locate_in_page(Host *h, int64_t p, int32_t used, unsigned char *have,
                          unsigned char *want, kvf_error *err) {
    const kvf_case *c = h->c;
    const int64_t pe = (int64_t)(h->page_bytes / (h->fp8 ? 1 : 2));
    for (int which = 0; which < 2; ++which) {
        const unsigned char *pool = (const unsigned char *)(which ? h->d_v : h->d_k);
        KVF_CUDA_TRY(cudaMemcpy(have, pool + (size_t)p * h->page_bytes, h->page_bytes,
                                cudaMemcpyDeviceToHost),
                     "Reading back a page");
        page_bytes_of(h, c, which, p, used, want);
        for (int64_t i = 0; i < pe; ++i) {
            const unsigned was = page_elem(want, i, h->fp8), now = page_elem(have, i, h->fp8);
            if (was == now) continue;
            const int64_t slot = i / ((int64_t)c->num_kv_heads * c->head_dim);
            return kvf_error_set(err, KVF_EINPUTMOD,
                                 "the kernel modified its input %s at page %lld slot %lld kv "
                                 "head %lld d %lld (0x%0*x became 0x%0*x)",
                                 which ? "v_cache" : "k_cache", (long long)p, (long long)slot,
                                 (long long)(i / c->head_dim % c->num_kv_heads),
                                 (long long)(i % c->head_dim), h->fp8 ? 2 : 4, was, h->fp8 ? 2 : 4,
                                 now);
        }
    }
    return 0;
}

static int locate_pool_change(Host *h, const CheckResult *r, kvf_error *err) {
    const char *which = r->before[0] != r->after[0] ? "k_cache" : "v_cache";
    if (!h->pools_known)
        return kvf_error_set(err, KVF_EINPUTMOD, "the kernel modified its input %s", which);
    unsigned char *have = (unsigned char *)malloc(2 * h->page_bytes);
    if (!have) return kvf_error_set(err, KVF_EINPUTMOD, "the kernel modified its input %s", which);
    unsigned char *want = have + h->page_bytes;
    int rc = 0;
    for (int64_t i = 0; i < h->num_read_pages && !rc; ++i)
        rc = locate_in_page(h, h->pages[i], h->page_used[i], have, want, err);
    // Not in a page the case reads: the whole-pool checksum saw a poisoned page change.
    if (!rc && (size_t)h->num_pages * h->page_bytes <= kWholePoolCheckBytes) {
        unsigned char *read = (unsigned char *)calloc((size_t)h->num_pages + 1, 1);
        for (int64_t i = 0; read && i < h->num_read_pages; ++i)
            read[h->pages[i]] = 1;
        for (int64_t p = 0; read && p < h->num_pages && !rc; ++p)
            if (!read[p]) rc = locate_in_page(h, p, 0, have, want, err);
        free(read);
    }
    free(have);
    if (!rc) rc = kvf_error_set(err, KVF_EINPUTMOD, "the kernel modified its input %s", which);
    return rc;
}

// ---- one checked run -------------------------------------------------------------------------

// Enqueues slot k's run on the loaded inputs with fresh poison: the prepare kernel, run(), the
// post kernel, all on the host's stream; what the finish needs goes into h->q. Returns only the
// host's own errors (a failed prepare launch); run()'s status and launch errors are the
// finish's to report, after the synchronization, as a run reports them.
int checked_enqueue(Host *h, int k, kvf_error *err) {
    Slot *s = &h->slots[k];
    if (s->rc) {
        if (err) *err = s->why;
        return s->rc;
    }
    const Layout &L = h->L;
    CheckParams cp = check_params(h);
    const int64_t pool_vecs = cp.whole_vecs > 0 ? cp.whole_vecs : cp.n_ids * cp.page_vec;
    int64_t most = pool_vecs > cp.in_vecs ? pool_vecs : cp.in_vecs;
    const int64_t items[] = {(int64_t)((L.out_b + L.ws_region) / 4), cp.n_ids,
                             cp.n_poison * cp.poison_vec, 2 * cp.n_scatter * cp.page_vec};
    for (int64_t x : items)
        if (x > most) most = x;
    // What the prepare kernel reads from host memory goes one vector per thread: each read
    // waits a PCIe round trip, so the threads in flight set the speed, not the device's memory.
    const int64_t host_vecs = cp.in_vecs + cp.n_ids + cp.n_poison + 2 * cp.n_scatter * cp.page_vec;
    dev_mark(h->t, kPrepare, h->stream);
    KVF_CUDA_TRY(launch_prepare(h, &cp, most, host_vecs), "Launching the prepare kernel");
    dev_mark(h->t, kRunDev, h->stream);
    if (h->verify_pool && h->pools_known && h->num_pages > 0) {
        const int vr = pools_verify(h, err);
        if (vr) return vr;
    }
    kvf_plugin_args a;
    fill_args(h, s, &a);
    Enqueued &q = h->q;
    q.k = k;
    memset(q.msg, 0, sizeof q.msg);
    host_mark(h->t, kCalls);
    q.st = h->graph_phase == kEager ? s->desc->run(s->state, &a, q.msg, sizeof q.msg - 1)
                                    : graph_run(h, s, &a, &q);
    host_mark(h->t, kRunCall);
    dev_mark(h->t, kPost, h->stream);
    // The kernel's own launch errors first: they are the kernel's, not the host's.
    cudaError_t &e = q.e;
    e = cudaGetLastError();
    if (e == cudaSuccess) {
        most = pool_vecs > cp.in_vecs ? pool_vecs : cp.in_vecs;
        const int64_t out_vecs = (int64_t)(L.out_b / 16);
        if ((int64_t)L.ws_region > most) most = (int64_t)L.ws_region;
        if (out_vecs > most) most = out_vecs;
        e = launch_post(h, &cp, most, out_vecs);
    }
    dev_mark(h->t, kDevicePhases, h->stream);
    host_mark(h->t, kCalls);
    return 0;
}

// Waits for what checked_enqueue queued, then makes every check of kernel_host.h; o and lse
// receive the outputs.
int checked_finish(Host *h, kvf_bf16 *o, float *lse, kvf_error *err) {
    const Enqueued &q = h->q;
    Slot *s = &h->slots[q.k];
    const Layout &L = h->L;
    cudaError_t e = q.e;
    // Another host's work since the enqueue is none of this run's time.
    if (h->t.on) h->t.last = now_s();
    // The stream, not the device: other streams' work (a plugin's own) is none of this run's.
    const cudaError_t se = cudaStreamSynchronize(h->stream);
    host_mark(h->t, kWait);
    h->t.pending = h->t.events && e == cudaSuccess && se == cudaSuccess;
    if (e == cudaSuccess) e = se;
    if (e != cudaSuccess)
        return kvf_error_set(err, KVF_EDEVICE, "%s failed on the device: %s (%s)", s->desc->name,
                             cudaGetErrorName(e), cudaGetErrorString(e));
    int rc = kvf__host_status(s->desc, q.st, q.msg, "run", err);
    const unsigned char *down = (const unsigned char *)h->h_down + kResBytes;
    // The outputs go back whatever the checks find, so a finding shows what was written.
    if (L.o_b) memcpy(o, down + L.o, L.o_b);
    if (L.lse_b) memcpy(lse, down + L.lse, L.lse_b);
    if (rc) return rc;
    CheckResult r;
    memcpy(&r, h->h_down, sizeof r);
    if (!rc) rc = kvf__host_check_guard(down, kG, "o", "before", err);
    if (!rc) rc = kvf__host_check_guard(down + L.o + L.o_b, kG, "o", "after", err);
    if (!rc) rc = kvf__host_check_guard(down + L.lse - kG, kG, "lse", "before", err);
    if (!rc) rc = kvf__host_check_guard(down + L.lse + L.lse_b, kG, "lse", "after", err);
    if (!rc && r.ws_first != kNone) {
        const int after = r.ws_first >= kG;
        const size_t dist = after ? (size_t)r.ws_first - kG - L.ws_bytes + 1 : kG - r.ws_first;
        rc = kvf_error_set(err, KVF_EOOBWRITE,
                           "the kernel wrote outside the workspace: byte %zu %s it changed", dist,
                           after ? "past its end" : "before its start");
    }
    if (!rc && r.before[2] != r.after[2]) rc = locate_in_change(h, err);
    if (!rc && (r.before[0] != r.after[0] || r.before[1] != r.after[1]))
        rc = locate_pool_change(h, &r, err);
    if (!rc) rc = kvf__host_check_outputs(h->c, o, lse, err);
    return rc;
}

// Runs slot k once on the loaded inputs with fresh poison, then every check of kernel_host.h.
int checked_run(Host *h, int k, kvf_bf16 *o, float *lse, kvf_error *err) {
    const int rc = checked_enqueue(h, k, err);
    return rc ? rc : checked_finish(h, o, lse, err);
}

// After a failure past the first change to the pools nothing is known about what reached
// them: poison them whole next time. Copies still queued may read the pinned buffers the next
// run refills, and a pending error must not be blamed on the next run.
void after_failure(Host *h) {
    if (h->pool_touched) h->pool_clean = 0;
    (void)cudaStreamSynchronize(h->stream);
    (void)cudaGetLastError();
}

} // namespace kvf_cuda_host
