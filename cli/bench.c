/* `kvfuzz bench`: times the CUDA decode kernels on device-resident inputs against a read
 * roofline measured in the same run.
 *
 * Method: inputs are generated deterministically (values by a hash on the device, page tables
 * shuffled on the host), every kernel is checked against the other implementation before it
 * is timed, L2 is flushed before every timed iteration by writing a buffer of 256 MiB (the
 * H200 has 60 MB of L2), and each iteration is timed with CUDA events around the launch alone.
 * The roofline is a streaming kernel that reads the same number of bytes once (16-byte loads
 * and a checksum), timed the same way; "fraction" is roofline time / kernel time. Bytes count
 * q, the K/V rows the case actually reads, o and lse. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "kvfuzz/kernel.h"

#ifdef KVF_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kvfuzz/cuda_kernels.h"
#endif

static void bench_help(FILE *f) {
    fprintf(
        f,
        "usage: kvfuzz bench [--kernel K[,K...]] [--preset P | --batch B --len L]\n"
        "                    [--heads HQ:HK] [--head-dim D] [--page-size S] [--iters N]\n"
        "                    [--warmup N] [--seed N] [--json]\n\n"
        "Times CUDA decode kernels on generated device-resident inputs and compares each with a\n"
        "streaming read of the same number of bytes measured in the same run (the read\n"
        "roofline). Before timing, every kernel's output is checked against the other CUDA\n"
        "kernel's (a disagreement beyond 1e-2 absolute and relative fails the run).\n\n"
        "  --kernel K        cuda, cuda-naive, or a comma-separated list (default: both)\n"
        "  --preset P        seed:  batch 1, 51 pages of 64, the last holding 2 (3202 tokens),\n"
        "                    Hq 20, Hk 4, D 128 (the seed case file's workload)\n"
        "                    sweep: batch {1,8,32,128} x length {512,4096,32768} (seed shape)\n"
        "                    mixed: batch 64, lengths log-uniform in [1, 16384] plus two empty\n"
        "                    sequences (seed shape)\n"
        "                    (default: seed, unless --batch/--len are given)\n"
        "  --batch B         sequences (1..65535), with --len: a single custom workload\n"
        "  --len L           tokens per sequence (0..1048576)\n"
        "  --heads HQ:HK     query and KV heads (default 20:4)\n"
        "  --head-dim D      64, 128 or 256 (default 128)\n"
        "  --page-size S     1..256 (default 64)\n"
        "  --iters N         timed iterations, median and min reported (default 50)\n"
        "  --warmup N        untimed iterations first (default 5)\n"
        "  --seed N          input seed (default 1)\n"
        "  --json            one JSON array instead of the table\n\n"
        "Columns: median and min microseconds per launch (split + merge for cuda), achieved\n"
        "GB/s of the bytes above, the roofline's median for the same bytes, and\n"
        "fraction = roofline time / kernel time. Exit 0, 1 when a check fails or the device\n"
        "errs, 2 on bad usage.\n");
}

typedef struct bench_workload {
    char name[48];
    int32_t batch;
    int32_t *lens; /* [batch] */
} bench_workload;

typedef struct bench_opts {
    int32_t hq, hk, d, s;
    int iters, warmup;
    uint64_t seed;
    int json;
    int kernels[2]; /* cuda, cuda-naive selected */
} bench_opts;

static uint64_t splitmix(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int add_workload(bench_workload **w, int *n, const char *name, int32_t batch,
                        const int32_t *lens) {
    bench_workload *nw = realloc(*w, (size_t)(*n + 1) * sizeof *nw);
    if (!nw) return -1;
    *w = nw;
    bench_workload *x = &nw[*n];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->batch = batch;
    x->lens = malloc(sizeof(int32_t) * (size_t)(batch > 0 ? batch : 1));
    if (!x->lens) return -1;
    memcpy(x->lens, lens, sizeof(int32_t) * (size_t)batch);
    (*n)++;
    return 0;
}

static int add_uniform(bench_workload **w, int *n, const char *name, int32_t batch, int32_t len) {
    int32_t *lens = malloc(sizeof(int32_t) * (size_t)batch);
    if (!lens) return -1;
    for (int32_t b = 0; b < batch; b++)
        lens[b] = len;
    int rc = add_workload(w, n, name, batch, lens);
    free(lens);
    return rc;
}

static void free_workloads(bench_workload *w, int n) {
    for (int i = 0; i < n; i++)
        free(w[i].lens);
    free(w);
}

#ifdef KVF_HAVE_CUDA

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

typedef struct bench_dev {
    kvf_bf16 *q, *k, *v, *o, *o_ref;
    float *lse, *lse_ref;
    int32_t *indptr, *indices, *last;
    void *flush;
    uint32_t *sink;
    cudaStream_t stream;
    cudaEvent_t *ev; /* 2 per iteration */
} bench_dev;

#define FLUSH_BYTES ((size_t)256 << 20)

static int cuda_ok(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return 1;
    fprintf(stderr, "kvfuzz bench: %s failed: %s.\n", what, cudaGetErrorString(e));
    return 0;
}

/* Times `iters` launches of either a plan (plan != NULL) or the roofline over `bytes` of
 * `roof_buf`; median and min in microseconds. Returns 0 or -1 (message printed). */
static int time_launches(bench_dev *dv, const bench_opts *o, kvf_cuda_plan *plan,
                         const kvf_cuda_tensors *t, const void *roof_buf, int64_t bytes,
                         double *median_us, double *min_us) {
    kvf_error err = {0};
    int total = o->warmup + o->iters;
    float *ms = malloc(sizeof(float) * (size_t)o->iters);
    if (!ms) return -1;
    for (int i = 0; i < total; i++) {
        /* Flush L2: write more than its size so the launch reads from HBM. */
        if (!cuda_ok(cudaMemsetAsync(dv->flush, i & 0xFF, FLUSH_BYTES, dv->stream), "L2 flush"))
            goto fail;
        int timed = i >= o->warmup;
        if (timed && !cuda_ok(cudaEventRecord(dv->ev[2 * (i - o->warmup)], dv->stream), "event"))
            goto fail;
        int rc = plan ? kvf_cuda_plan_launch(plan, t, dv->stream, &err)
                      : kvf_cuda_roofline_launch(roof_buf, bytes, dv->sink, dv->stream, &err);
        if (rc) {
            fprintf(stderr, "kvfuzz bench: %s\n", err.msg);
            goto fail;
        }
        if (timed &&
            !cuda_ok(cudaEventRecord(dv->ev[2 * (i - o->warmup) + 1], dv->stream), "event"))
            goto fail;
    }
    if (!cuda_ok(cudaStreamSynchronize(dv->stream), "timed launches")) goto fail;
    for (int i = 0; i < o->iters; i++)
        if (!cuda_ok(cudaEventElapsedTime(&ms[i], dv->ev[2 * i], dv->ev[2 * i + 1]), "event time"))
            goto fail;
    qsort(ms, (size_t)o->iters, sizeof *ms, cmp_float);
    *median_us =
        1e3 * (o->iters % 2 ? ms[o->iters / 2] : 0.5 * (ms[o->iters / 2 - 1] + ms[o->iters / 2]));
    *min_us = 1e3 * ms[0];
    free(ms);
    return 0;
fail:
    free(ms);
    return -1;
}

static float bf16f(kvf_bf16 h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

typedef struct bench_result {
    const char *kernel;
    double med_us, min_us, gbps, roof_us, roof_gbps, fraction;
    int64_t bytes;
    kvf_cuda_plan_info info;
    int check_ok;
    double max_abs_o, max_abs_lse;
} bench_result;

/* Runs one workload: inputs, reference outputs of both kernels, checks, timings. */
static int bench_one(const bench_workload *w, const bench_opts *o, bench_dev *dv, int first_row) {
    const int32_t B = w->batch, Hq = o->hq, Hk = o->hk, D = o->d, S = o->s;
    int rc = -1;
    int32_t *indptr = malloc(sizeof(int32_t) * (size_t)(B + 1));
    int32_t *last = malloc(sizeof(int32_t) * (size_t)(B > 0 ? B : 1));
    int32_t *indices = NULL;
    kvf_bf16 *o_host[2] = {NULL, NULL};
    float *lse_host[2] = {NULL, NULL};
    kvf_cuda_plan *plans[2] = {NULL, NULL};
    void *roof = NULL;
    bench_result res[2];
    memset(res, 0, sizeof res);
    memset(dv, 0, offsetof(bench_dev, flush));
    if (!indptr || !last) goto out;

    /* Page table: pages per sequence, then a shuffled assignment of pool ids. */
    int64_t tokens = 0, total_pages = 0;
    indptr[0] = 0;
    for (int32_t b = 0; b < B; b++) {
        int32_t len = w->lens[b];
        int32_t n = len == 0 ? 0 : (len + S - 1) / S;
        last[b] = len == 0 ? 0 : len - (n - 1) * S;
        total_pages += n;
        indptr[b + 1] = total_pages > INT32_MAX ? INT32_MAX : (int32_t)total_pages;
        tokens += len;
    }
    if ((int64_t)indptr[B] != total_pages) {
        fprintf(stderr, "kvfuzz bench: workload %s needs more than 2^31-1 pages.\n", w->name);
        goto out;
    }
    const int64_t pages = indptr[B];
    const int64_t pool_pages = pages + 1; /* one unreferenced page, as in the seed workload */
    indices = malloc(sizeof(int32_t) * (size_t)(pages > 0 ? pages : 1));
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)pool_pages);
    if (!indices || !perm) {
        free(perm);
        goto out;
    }
    uint64_t st = o->seed * 0x9e3779b97f4a7c15ull + (uint64_t)first_row;
    for (int64_t i = 0; i < pool_pages; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = pool_pages - 1; i > 0; i--) {
        int64_t j = (int64_t)(splitmix(&st) % (uint64_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    memcpy(indices, perm, sizeof(int32_t) * (size_t)pages);
    free(perm);

    const int64_t page_elems = (int64_t)S * Hk * D;
    const size_t pool_b = (size_t)(pool_pages * page_elems * 2);
    const size_t q_b = (size_t)B * Hq * D * 2, lse_b = (size_t)B * Hq * 4;
    const int64_t bytes = (int64_t)q_b + tokens * Hk * D * 2 * 2 + (int64_t)q_b + (int64_t)lse_b;
    if (!cuda_ok(cudaMalloc((void **)&dv->k, pool_b), "allocating the K pool") ||
        !cuda_ok(cudaMalloc((void **)&dv->v, pool_b), "allocating the V pool") ||
        !cuda_ok(cudaMalloc((void **)&dv->q, q_b + 16), "allocating q") ||
        !cuda_ok(cudaMalloc((void **)&dv->o, q_b + 16), "allocating o") ||
        !cuda_ok(cudaMalloc((void **)&dv->o_ref, q_b + 16), "allocating o") ||
        !cuda_ok(cudaMalloc((void **)&dv->lse, lse_b + 16), "allocating lse") ||
        !cuda_ok(cudaMalloc((void **)&dv->lse_ref, lse_b + 16), "allocating lse") ||
        !cuda_ok(cudaMalloc((void **)&dv->indptr, sizeof(int32_t) * (size_t)(B + 1)),
                 "allocating") ||
        !cuda_ok(cudaMalloc((void **)&dv->indices, sizeof(int32_t) * (size_t)(pages + 1)),
                 "allocating") ||
        !cuda_ok(cudaMalloc((void **)&dv->last, sizeof(int32_t) * (size_t)(B + 1)), "allocating") ||
        !cuda_ok(cudaMalloc(&roof, (size_t)((bytes + 15) / 16 * 16)),
                 "allocating the roofline buffer"))
        goto out;
    kvf_error err = {0};
    /* q and K ~ U(-1, 1) give logits of order 0.3 with the default scale, V ~ U(-1, 1). */
    if (kvf_cuda_fill_bf16(dv->k, pool_pages * page_elems, o->seed * 3 + 1, 1.0f, dv->stream,
                           &err) ||
        kvf_cuda_fill_bf16(dv->v, pool_pages * page_elems, o->seed * 3 + 2, 1.0f, dv->stream,
                           &err) ||
        kvf_cuda_fill_bf16(dv->q, (int64_t)B * Hq * D, o->seed * 3 + 3, 1.0f, dv->stream, &err)) {
        fprintf(stderr, "kvfuzz bench: %s\n", err.msg);
        goto out;
    }
    if (!cuda_ok(cudaMemsetAsync(roof, 0x5A, (size_t)((bytes + 15) / 16 * 16), dv->stream),
                 "fill") ||
        !cuda_ok(cudaMemcpy(dv->indptr, indptr, sizeof(int32_t) * (size_t)(B + 1),
                            cudaMemcpyHostToDevice),
                 "upload") ||
        !cuda_ok(cudaMemcpy(dv->indices, indices, sizeof(int32_t) * (size_t)pages,
                            cudaMemcpyHostToDevice),
                 "upload") ||
        !cuda_ok(cudaMemcpy(dv->last, last, sizeof(int32_t) * (size_t)B, cudaMemcpyHostToDevice),
                 "upload") ||
        !cuda_ok(cudaDeviceSynchronize(), "generating inputs"))
        goto out;

    kvf_cuda_problem pr = {Hq,     Hk,  D, S, B, pool_pages, (float)(1.0 / sqrt((double)D)),
                           indptr, last};
    kvf_cuda_tensors t[2];
    for (int k = 0; k < 2; k++) {
        t[k].q = dv->q, t[k].k_cache = dv->k, t[k].v_cache = dv->v;
        t[k].kv_indptr = dv->indptr, t[k].kv_indices = dv->indices,
        t[k].kv_last_page_len = dv->last;
        t[k].o = k ? dv->o_ref : dv->o;
        t[k].lse = k ? dv->lse_ref : dv->lse;
        o_host[k] = malloc(q_b + 2);
        lse_host[k] = malloc(lse_b + 4);
        if (!o_host[k] || !lse_host[k]) goto out;
        if (kvf_cuda_plan_create(&plans[k], k ? KVF_CUDA_ALGO_NAIVE : KVF_CUDA_ALGO_SPLITKV,
                                 &err) ||
            kvf_cuda_plan_prepare(plans[k], &pr, &err)) {
            fprintf(stderr, "kvfuzz bench: %s\n", err.msg);
            goto out;
        }
        /* Poisoned outputs: an element a kernel forgets stays NaN and fails the check. */
        if (!cuda_ok(cudaMemsetAsync(t[k].o, 0xFF, q_b, dv->stream), "poisoning o") ||
            !cuda_ok(cudaMemsetAsync(t[k].lse, 0xFF, lse_b, dv->stream), "poisoning lse"))
            goto out;
        if (kvf_cuda_plan_launch(plans[k], &t[k], dv->stream, &err)) {
            fprintf(stderr, "kvfuzz bench: %s\n", err.msg);
            goto out;
        }
        if (!cuda_ok(cudaStreamSynchronize(dv->stream), "running the kernel") ||
            !cuda_ok(cudaMemcpy(o_host[k], t[k].o, q_b, cudaMemcpyDeviceToHost), "download") ||
            !cuda_ok(cudaMemcpy(lse_host[k], t[k].lse, lse_b, cudaMemcpyDeviceToHost), "download"))
            goto out;
    }
    /* Cross-check: both implementations, every element, non-finite values fail. */
    double max_o = 0, max_lse = 0;
    int agree = 1;
    for (size_t i = 0; i < q_b / 2; i++) {
        float a = bf16f(o_host[0][i]), r = bf16f(o_host[1][i]);
        double dlt = fabs((double)a - r);
        if (!isfinite(a) || !isfinite(r) || (dlt > 1e-2 && dlt > 1e-2 * fabs(r))) agree = 0;
        if (dlt > max_o) max_o = dlt;
    }
    for (size_t i = 0; i < lse_b / 4; i++) {
        float a = lse_host[0][i], r = lse_host[1][i];
        if (isinf(a) && isinf(r) && a == r) continue; /* both -inf: empty sequence */
        double dlt = fabs((double)a - r);
        if (!isfinite(a) || !isfinite(r) || (dlt > 1e-3 && dlt > 1e-3 * fabs(r))) agree = 0;
        if (dlt > max_lse) max_lse = dlt;
    }

    double roof_med, roof_min;
    if (time_launches(dv, o, NULL, NULL, roof, bytes, &roof_med, &roof_min)) goto out;
    static const char *names[2] = {"cuda", "cuda-naive"};
    for (int k = 0; k < 2; k++) {
        if (!o->kernels[k]) continue;
        bench_result *r = &res[k];
        r->kernel = names[k];
        if (time_launches(dv, o, plans[k], &t[k], NULL, 0, &r->med_us, &r->min_us)) goto out;
        kvf_cuda_plan_get_info(plans[k], &r->info);
        r->bytes = bytes;
        r->gbps = bytes / (r->med_us * 1e3);
        r->roof_us = roof_med;
        r->roof_gbps = bytes / (roof_med * 1e3);
        r->fraction = roof_med / r->med_us;
        r->check_ok = agree;
        r->max_abs_o = max_o, r->max_abs_lse = max_lse;
    }
    for (int k = 0; k < 2; k++) {
        if (!o->kernels[k]) continue;
        const bench_result *r = &res[k];
        int32_t maxlen = 0;
        for (int32_t b = 0; b < B; b++)
            if (w->lens[b] > maxlen) maxlen = w->lens[b];
        if (o->json) {
            printf("%s  {\"workload\": ", first_row ? "" : ",\n");
            cli_json_string(stdout, w->name);
            printf(", \"kernel\": \"%s\", \"batch\": %d, \"max_len\": %d, \"tokens\": %lld, "
                   "\"num_qo_heads\": %d, \"num_kv_heads\": %d, \"head_dim\": %d, "
                   "\"page_size\": %d, \"bytes\": %lld, \"median_us\": %.3f, \"min_us\": %.3f, "
                   "\"gb_per_s\": %.1f, \"roofline_median_us\": %.3f, \"roofline_gb_per_s\": %.1f, "
                   "\"fraction_of_roofline\": %.4f, \"ctas\": %lld, \"max_splits\": %d, "
                   "\"chunk_tokens\": %d, \"check\": %s, \"max_abs_diff_o\": %.3g, "
                   "\"max_abs_diff_lse\": %.3g}",
                   r->kernel, B, maxlen, (long long)tokens, Hq, Hk, D, S, (long long)r->bytes,
                   r->med_us, r->min_us, r->gbps, r->roof_us, r->roof_gbps, r->fraction,
                   (long long)r->info.ctas, r->info.max_splits, r->info.chunk_tokens,
                   r->check_ok ? "true" : "false", r->max_abs_o, r->max_abs_lse);
        } else {
            printf("%-14s %-10s %6d %7d %10.2f %10.2f %8.1f %10.2f %8.1f %6.3f %6lld %6d  %s\n",
                   w->name, r->kernel, B, maxlen, r->med_us, r->min_us, r->gbps, r->roof_us,
                   r->roof_gbps, r->fraction, (long long)r->info.ctas, r->info.max_splits,
                   r->check_ok ? "ok" : "MISMATCH");
        }
        first_row = 0;
    }
    fflush(stdout);
    rc = agree ? 0 : 1;
out:
    for (int k = 0; k < 2; k++) {
        kvf_cuda_plan_destroy(plans[k]);
        free(o_host[k]);
        free(lse_host[k]);
    }
    void *bufs[] = {dv->q,       dv->k,      dv->v,       dv->o,    dv->o_ref, dv->lse,
                    dv->lse_ref, dv->indptr, dv->indices, dv->last, roof};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) cudaFree(bufs[i]);
    free(indptr);
    free(last);
    free(indices);
    return rc;
}

static int run_bench(bench_workload *w, int nw, const bench_opts *o) {
    char why[256];
    if (!kvf_cuda_runtime_available(why, sizeof why)) {
        fprintf(stderr, "kvfuzz bench: %s\n", why);
        return KVF_EXIT_FINDINGS;
    }
    bench_dev dv;
    memset(&dv, 0, sizeof dv);
    int rc = KVF_EXIT_FINDINGS;
    dv.ev = calloc((size_t)o->iters * 2, sizeof *dv.ev);
    if (!dv.ev) return rc;
    int nev = 0;
    if (!cuda_ok(cudaStreamCreateWithFlags(&dv.stream, cudaStreamNonBlocking), "stream") ||
        !cuda_ok(cudaMalloc(&dv.flush, FLUSH_BYTES), "allocating the L2 flush buffer") ||
        !cuda_ok(
            cudaMalloc((void **)&dv.sink, sizeof(uint32_t) * (size_t)kvf_cuda_roofline_sink_len()),
            "allocating"))
        goto out;
    for (; nev < o->iters * 2; nev++)
        if (!cuda_ok(cudaEventCreate(&dv.ev[nev]), "creating events")) goto out;

    struct cudaDeviceProp prop;
    int dev = 0;
    cudaGetDevice(&dev);
    if (!cuda_ok(cudaGetDeviceProperties(&prop, dev), "device query")) goto out;
    char date[16];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", localtime(&now));
    if (o->json) {
        printf("{\"date\": \"%s\", \"gpu\": ", date);
        cli_json_string(stdout, prop.name);
        printf(", \"sms\": %d, \"l2_bytes\": %d, \"iters\": %d, \"warmup\": %d, "
               "\"flush_bytes\": %zu, \"results\": [\n",
               prop.multiProcessorCount, prop.l2CacheSize, o->iters, o->warmup, FLUSH_BYTES);
    } else {
        printf(
            "kvfuzz bench  %s  %s (%d SMs, %d MB L2)  Hq %d Hk %d D %d S %d  iters %d, warmup %d, "
            "L2 flushed (%zu MiB written) before each\n",
            date, prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, o->hq, o->hk, o->d,
            o->s, o->iters, o->warmup, FLUSH_BYTES >> 20);
        printf("%-14s %-10s %6s %7s %10s %10s %8s %10s %8s %6s %6s %6s  %s\n", "workload", "kernel",
               "batch", "len", "median_us", "min_us", "GB/s", "roof_us", "roofGB/s", "frac", "ctas",
               "splits", "check");
    }
    rc = 0;
    for (int i = 0; i < nw; i++) {
        int r = bench_one(&w[i], o, &dv, i == 0);
        if (r < 0) {
            rc = KVF_EXIT_FINDINGS;
            break;
        }
        if (r > 0) rc = KVF_EXIT_FINDINGS;
    }
    if (o->json) printf("\n]}\n");
out:
    for (int i = 0; i < nev; i++)
        cudaEventDestroy(dv.ev[i]);
    free(dv.ev);
    if (dv.flush) cudaFree(dv.flush);
    if (dv.sink) cudaFree(dv.sink);
    if (dv.stream) cudaStreamDestroy(dv.stream);
    return rc;
}
#endif

int kvf_cmd_bench(int argc, char **argv) {
    const char *cmd = "bench";
    bench_opts o = {20, 4, 128, 64, 50, 5, 1, 0, {1, 1}};
    const char *preset = NULL;
    int64_t batch = -1, len = -1, v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            bench_help(stdout);
            return KVF_EXIT_OK;
        }
        if (strcmp(a, "--json") == 0) {
            o.json = 1;
            continue;
        }
        if (a[0] != '-' || a[1] != '-')
            return cli_usage_error(cmd, "unexpected argument \"%s\" (see `kvfuzz bench --help`)",
                                   a);
        if (i + 1 >= argc) return cli_usage_error(cmd, "%s needs a value", a);
        const char *val = argv[++i];
        if (strcmp(a, "--kernel") == 0) {
            o.kernels[0] = o.kernels[1] = 0;
            char buf[128];
            snprintf(buf, sizeof buf, "%s", val);
            for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                if (strcmp(tok, "cuda") == 0)
                    o.kernels[0] = 1;
                else if (strcmp(tok, "cuda-naive") == 0)
                    o.kernels[1] = 1;
                else
                    return cli_usage_error(
                        cmd, "unknown kernel \"%s\": bench times cuda and cuda-naive", tok);
            }
            if (!o.kernels[0] && !o.kernels[1])
                return cli_usage_error(cmd, "--kernel names no kernel");
        } else if (strcmp(a, "--preset") == 0) {
            if (strcmp(val, "seed") && strcmp(val, "sweep") && strcmp(val, "mixed"))
                return cli_usage_error(cmd, "unknown preset \"%s\" (seed, sweep or mixed)", val);
            preset = val;
        } else if (strcmp(a, "--batch") == 0) {
            if (cli_parse_i64(val, 1, 65535, &batch))
                return cli_usage_error(cmd, "--batch must be an integer in [1, 65535], not \"%s\"",
                                       val);
        } else if (strcmp(a, "--len") == 0) {
            if (cli_parse_i64(val, 0, 1 << 20, &len))
                return cli_usage_error(cmd, "--len must be an integer in [0, 1048576], not \"%s\"",
                                       val);
        } else if (strcmp(a, "--heads") == 0) {
            int hq, hk;
            char tail;
            if (sscanf(val, "%d:%d%c", &hq, &hk, &tail) != 2 || hq < 1 || hk < 1 || hq > 1024 ||
                hq % hk != 0 || hq / hk > 16)
                return cli_usage_error(cmd,
                                       "--heads must be HQ:HK with HK dividing HQ and a group of "
                                       "at most 16, not \"%s\"",
                                       val);
            o.hq = hq, o.hk = hk;
        } else if (strcmp(a, "--head-dim") == 0) {
            if (cli_parse_i64(val, 64, 256, &v) || (v != 64 && v != 128 && v != 256))
                return cli_usage_error(cmd, "--head-dim must be 64, 128 or 256, not \"%s\"", val);
            o.d = (int32_t)v;
        } else if (strcmp(a, "--page-size") == 0) {
            if (cli_parse_i64(val, 1, 256, &v))
                return cli_usage_error(
                    cmd, "--page-size must be an integer in [1, 256], not \"%s\"", val);
            o.s = (int32_t)v;
        } else if (strcmp(a, "--iters") == 0) {
            if (cli_parse_i64(val, 1, 100000, &v))
                return cli_usage_error(cmd, "--iters must be an integer in [1, 100000], not \"%s\"",
                                       val);
            o.iters = (int)v;
        } else if (strcmp(a, "--warmup") == 0) {
            if (cli_parse_i64(val, 0, 100000, &v))
                return cli_usage_error(
                    cmd, "--warmup must be an integer in [0, 100000], not \"%s\"", val);
            o.warmup = (int)v;
        } else if (strcmp(a, "--seed") == 0) {
            if (cli_parse_u64(val, &o.seed))
                return cli_usage_error(cmd, "--seed must be a non-negative integer, not \"%s\"",
                                       val);
        } else {
            return cli_usage_error(cmd, "unknown option \"%s\" (see `kvfuzz bench --help`)", a);
        }
    }
    if ((batch >= 0) != (len >= 0)) return cli_usage_error(cmd, "--batch and --len go together");
    if (batch >= 0 && preset)
        return cli_usage_error(cmd, "give either --preset or --batch/--len, not both");

    bench_workload *w = NULL;
    int nw = 0, oom = 0;
    char name[48];
    if (batch >= 0) {
        snprintf(name, sizeof name, "b%lld-l%lld", (long long)batch, (long long)len);
        oom |= add_uniform(&w, &nw, name, (int32_t)batch, (int32_t)len);
    } else if (!preset || strcmp(preset, "seed") == 0) {
        /* The seed case file's length (corpus/seeds/00-seed-h20kv4.kvfz): 51 pages of 64, the
         * last holding 2 tokens, so the benchmark and the case file are one workload. */
        oom |= add_uniform(&w, &nw, "seed", 1, 50 * 64 + 2);
    } else if (strcmp(preset, "sweep") == 0) {
        static const int32_t bs[] = {1, 8, 32, 128}, ls[] = {512, 4096, 32768};
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++) {
                snprintf(name, sizeof name, "b%d-l%d", bs[i], ls[j]);
                oom |= add_uniform(&w, &nw, name, bs[i], ls[j]);
            }
    } else {
        /* Mixed: lengths log-uniform in [1, 16384], two empty sequences among them. */
        int32_t lens[64];
        uint64_t st = o.seed ^ 0x6d69786564ull;
        for (int b = 0; b < 64; b++) {
            double u = (double)(splitmix(&st) >> 11) / 9007199254740992.0;
            lens[b] = (int32_t)floor(pow(16384.0, u));
        }
        lens[5] = 0, lens[40] = 0;
        oom |= add_workload(&w, &nw, "mixed", 64, lens);
    }
    if (oom) {
        free_workloads(w, nw);
        fprintf(stderr, "kvfuzz bench: out of host memory.\n");
        return KVF_EXIT_FINDINGS;
    }
#ifdef KVF_HAVE_CUDA
    int rc = run_bench(w, nw, &o);
#else
    fprintf(stderr, "kvfuzz bench: this kvfuzz was built without CUDA; bench times the CUDA "
                    "kernels only.\n");
    int rc = KVF_EXIT_FINDINGS;
#endif
    free_workloads(w, nw);
    return rc;
}
