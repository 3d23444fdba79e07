/* `kvfuzz bench`: times CUDA decode kernels, built in or from plugins, side by side in one
 * process against a read roofline measured in the same run.
 *
 * Method: every kernel runs through the CUDA buffer host (kernel_bench.h) on one set of device
 * buffers: K/V pools generated on the device (a hash of index and seed; page tables shuffled
 * on the host, one spare page, every slot no sequence reads poisoned with NaN), q and the index
 * arrays uploaded, guarded outputs and workspace. Before timing, each kernel runs once with the
 * host's checks (unwritten outputs, writes past its buffers, changed inputs) and its outputs are
 * compared with cuda-naive's, the simplest implementation. Timing then goes round robin: in
 * every iteration the roofline and each kernel in turn, each after a 256 MiB write that flushes
 * L2 (the H200 has 60 MB), each between two CUDA events around the descriptor's run() alone.
 * The roofline is a streaming kernel that reads the same number of bytes once (16-byte loads and
 * a checksum); "fraction" is roofline time / kernel time. Bytes count q, the K/V rows the case
 * actually reads, o and lse. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "kvfuzz/json_io.h"
#include "kvfuzz/kernel.h"

#ifdef KVF_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kvfuzz/cuda_kernels.h"
#include "kvfuzz/kernel_bench.h"
#endif

enum {
    BENCH_ORACLE = 256,
    BENCH_KERNEL,
    BENCH_PRESET,
    BENCH_BATCH,
    BENCH_LEN,
    BENCH_HEADS,
    BENCH_HEAD_DIM,
    BENCH_PAGE_SIZE,
    BENCH_ITERS,
    BENCH_WARMUP,
    BENCH_SEED,
    BENCH_JSON
};

/* --help names the plugin kernel limit in words. */
_Static_assert(KVF_PLUGIN_MAX_KERNELS == 4096u, "--help states the plugin kernel limit");

static const cli_option bench_options[] = {
    {"oracle", BENCH_ORACLE, NULL,
     "oracle throughput instead (first; kvfuzz bench --oracle --help)"},
    {"kernel", BENCH_KERNEL, "K",
     "a CUDA kernel: cuda, cuda-naive, cuda/mut=..., PATH.so (every CUDA\n"
     "kernel of a plugin, any number; a plugin lists at most 4096) or\n"
     "PATH.so:NAME; repeat it or give a comma-\n"
     "separated list (default: cuda and cuda-naive)"},
    {"preset", BENCH_PRESET, "P",
     "seed:  batch 1, 51 pages of 64, the last holding 2 (3202 tokens),\n"
     "Hq 20, Hk 4, D 128 (the seed case file's workload)\n"
     "sweep: batch {1,8,32,128} x length {512,4096,32768} (seed shape)\n"
     "mixed: batch 64, lengths log-uniform in [1, 16384] plus two empty\n"
     "sequences (seed shape)\n"
     "(default: seed, unless --batch/--len are given)"},
    {"batch", BENCH_BATCH, "B", "sequences (1..65535), with --len: a single custom workload"},
    {"len", BENCH_LEN, "L", "tokens per sequence (0..1048576)"},
    {"heads", BENCH_HEADS, "HQ:HK", "query and KV heads (default 20:4)"},
    {"head-dim", BENCH_HEAD_DIM, "D", "64, 128 or 256 (default 128)"},
    {"page-size", BENCH_PAGE_SIZE, "S", "1..256 (default 64)"},
    {"iters", BENCH_ITERS, "N", "timed iterations, median and min reported (default 50)"},
    {"warmup", BENCH_WARMUP, "N", "untimed iterations first (default 5)"},
    {"seed", BENCH_SEED, "N", "input seed (default 1)"},
    {"json", BENCH_JSON, NULL,
     "one JSON object instead of the table: the device, the settings and\n"
     "\"results\", one object per (workload, kernel)"},
    {0},
};

static void bench_help(FILE *f) {
    fprintf(
        f,
        "usage: kvfuzz bench [--kernel K]... [--preset P | --batch B --len L]\n"
        "                    [--heads HQ:HK] [--head-dim D] [--page-size S] [--iters N]\n"
        "                    [--warmup N] [--seed N] [--json]\n"
        "       kvfuzz bench --oracle ...   (oracle throughput: kvfuzz bench --oracle --help)\n\n"
        "Times CUDA decode kernels side by side on the same device-resident inputs and compares\n"
        "each with a streaming read of the same number of bytes measured in the same run (the\n"
        "read roofline). Every kernel runs through kvfuzz's buffer host (NaN-poisoned pools,\n"
        "guarded outputs); before timing each is checked by the host and against cuda-naive\n"
        "(a disagreement beyond 1e-2 absolute and relative, or any host check, fails the "
        "run).\n\n");
    cli_print_options(f, bench_options);
    fprintf(f,
            "\nColumns: median and min microseconds per run() (split + merge for cuda), achieved\n"
            "GB/s of the bytes above, the roofline's median for the same bytes,\n"
            "fraction = roofline time / kernel time, the check, and the kernel's plan facts\n"
            "(describe()). A kernel that does not support the shape gets a row saying so. Exit 0,\n"
            "1 when a check fails or the device errs, 2 on bad usage or when the kernels cannot\n"
            "start (no usable GPU, or a kvfuzz built without CUDA).\n");
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
    kvf_kernel_list kernels; /* grows: PATH.so adds every CUDA kernel of a plugin */
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

#define FLUSH_BYTES ((size_t)256 << 20)

static int cuda_ok(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return 1;
    fprintf(stderr, "kvfuzz bench: %s failed: %s (%s).\n", what, cudaGetErrorName(e),
            cudaGetErrorString(e));
    return 0;
}

/* The descriptor of a kernel, a plugin's loaded into this process (bench runs kernels in
 * process: timings through a worker would measure the pipe). */
static const kvf_plugin_kernel *bench_desc(const kvf_kernel *k) {
    const kvf_plugin_kernel *d = NULL;
    kvf_error err = {0};
    if (kvf_kernel_load_descriptor(k, &d, &err)) {
        fprintf(stderr, "kvfuzz bench: %s\n", err.msg);
        return NULL;
    }
    return d;
}

typedef struct bench_run {
    kvf_bench_host *host;
    cudaStream_t stream;
    const kvf_plugin_kernel **descs; /* [timed + 1]: the timed ones, then cuda-naive */
    int n, timed, ref;
    void *flush;
    uint32_t *sink;
    cudaEvent_t *ev; /* [iters][timed + 1][2] */
    json_t *results; /* --json: one object per row, written at the end */
    int json_bad;    /* out of memory building them */
    int first_row;   /* no row printed yet (it also seeds the first workload's page table) */
} bench_run;

typedef struct bench_result {
    const char *kernel;
    int status; /* 0, or the KVF_E* of the host's check */
    char why[KVF_ERROR_MSG_MAX];
    char plan[160];
    double med_us, min_us, gbps, fraction;
    double max_abs_o, max_abs_lse;
    int agree;
} bench_result;

static uint16_t bf16_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even (finite inputs) */
    return (uint16_t)(u >> 16);
}

static float bf16f(kvf_bf16 h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void median_min(float *ms, int n, double *median_us, double *min_us) {
    qsort(ms, (size_t)n, sizeof *ms, cmp_float);
    *median_us = 1e3 * (n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]));
    *min_us = 1e3 * ms[0];
}

/* Times the roofline and every runnable kernel round robin: iteration i runs entry 0 (the
 * roofline), then each kernel, each after an L2 flush and between its own two events. */
static int time_round_robin(bench_run *br, const bench_opts *o, const int *runnable,
                            const void *roof, int64_t bytes, double *med, double *mn) {
    const int entries = br->timed + 1;
    kvf_error err = {0};
    for (int i = 0; i < o->warmup + o->iters; i++) {
        const int t = i - o->warmup;
        for (int e = 0; e < entries; e++) {
            if (e > 0 && !runnable[e - 1]) continue;
            if (!cuda_ok(cudaMemsetAsync(br->flush, i & 0xFF, FLUSH_BYTES, br->stream), "L2 flush"))
                return -1;
            cudaEvent_t *ev = br->ev + 2 * ((size_t)(t < 0 ? 0 : t) * entries + e);
            if (t >= 0 && !cuda_ok(cudaEventRecord(ev[0], br->stream), "event")) return -1;
            int rc = e == 0 ? kvf_cuda_roofline_launch(roof, bytes, br->sink, br->stream, &err)
                            : kvf_bench_host_launch(br->host, e - 1, &err);
            if (rc) {
                fprintf(stderr, "kvfuzz bench: %s\n", err.msg);
                return -1;
            }
            if (t >= 0 && !cuda_ok(cudaEventRecord(ev[1], br->stream), "event")) return -1;
        }
    }
    if (!cuda_ok(cudaStreamSynchronize(br->stream), "timed launches")) return -1;
    float *ms = malloc(sizeof(float) * (size_t)o->iters);
    if (!ms) return -1;
    for (int e = 0; e < entries; e++) {
        if (e > 0 && !runnable[e - 1]) continue;
        for (int t = 0; t < o->iters; t++) {
            cudaEvent_t *ev = br->ev + 2 * ((size_t)t * entries + e);
            if (!cuda_ok(cudaEventElapsedTime(&ms[t], ev[0], ev[1]), "event time")) {
                free(ms);
                return -1;
            }
        }
        median_min(ms, o->iters, &med[e], &mn[e]);
    }
    free(ms);
    return 0;
}

/* A host case for the workload: table, q and lengths; the pools are generated on the device. */
static int build_case(const bench_workload *w, const bench_opts *o, int first_row, kvf_case *c) {
    const int32_t B = w->batch, S = o->s;
    memset(c, 0, sizeof *c);
    c->num_qo_heads = o->hq, c->num_kv_heads = o->hk, c->head_dim = o->d, c->page_size = S;
    c->batch_size = B;
    c->sm_scale = (float)(1.0 / sqrt((double)o->d));
    c->kv_indptr = malloc(sizeof(int32_t) * (size_t)(B + 1));
    c->kv_last_page_len = malloc(sizeof(int32_t) * (size_t)(B > 0 ? B : 1));
    if (!c->kv_indptr || !c->kv_last_page_len) return -1;
    int64_t total_pages = 0;
    c->kv_indptr[0] = 0;
    for (int32_t b = 0; b < B; b++) {
        int32_t len = w->lens[b];
        int32_t n = len == 0 ? 0 : (len + S - 1) / S;
        c->kv_last_page_len[b] = len == 0 ? 0 : len - (n - 1) * S;
        total_pages += n;
        if (total_pages > INT32_MAX) {
            fprintf(stderr, "kvfuzz bench: workload %s needs more than 2^31-1 pages.\n", w->name);
            return -1;
        }
        c->kv_indptr[b + 1] = (int32_t)total_pages;
    }
    const int64_t pages = total_pages, pool_pages = pages + 1; /* one unreferenced page */
    c->num_pages = pool_pages;
    c->kv_indices = malloc(sizeof(int32_t) * (size_t)(pages > 0 ? pages : 1));
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)pool_pages);
    c->q = malloc(sizeof(kvf_bf16) * (size_t)(kvf_case_q_elems(c) > 0 ? kvf_case_q_elems(c) : 1));
    if (!c->kv_indices || !perm || !c->q) {
        free(perm);
        return -1;
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
    memcpy(c->kv_indices, perm, sizeof(int32_t) * (size_t)pages);
    free(perm);
    /* q ~ U(-1, 1) like K and V: logits of order 0.3 with the default scale. */
    uint64_t qs = o->seed * 3 + 3;
    for (int64_t i = 0; i < kvf_case_q_elems(c); i++)
        c->q[i] = bf16_of((float)((double)(splitmix(&qs) >> 11) / 4503599627370496.0 - 1.0));
    return 0;
}

/* Compares kernel outputs with the reference's; non-finite values fail (both lse -inf is the
 * empty sequence). */
static void compare(const kvf_case *c, const kvf_bf16 *o, const float *lse, const kvf_bf16 *o_ref,
                    const float *lse_ref, bench_result *r) {
    r->agree = 1;
    r->max_abs_o = r->max_abs_lse = 0;
    for (int64_t i = 0; i < kvf_case_o_elems(c); i++) {
        float a = bf16f(o[i]), x = bf16f(o_ref[i]);
        double dlt = fabs((double)a - x);
        if (!isfinite(a) || !isfinite(x) || (dlt > 1e-2 && dlt > 1e-2 * fabs(x))) r->agree = 0;
        if (dlt > r->max_abs_o) r->max_abs_o = dlt;
    }
    for (int64_t i = 0; i < kvf_case_lse_elems(c); i++) {
        float a = lse[i], x = lse_ref[i];
        if (isinf(a) && isinf(x) && a == x) continue;
        double dlt = fabs((double)a - x);
        if (!isfinite(a) || !isfinite(x) || (dlt > 1e-3 && dlt > 1e-3 * fabs(x))) r->agree = 0;
        if (dlt > r->max_abs_lse) r->max_abs_lse = dlt;
    }
}

static void print_row(bench_run *br, const bench_workload *w, const bench_opts *o,
                      const kvf_case *c, const bench_result *r, double roof_us, int64_t bytes) {
    int32_t maxlen = 0;
    for (int32_t b = 0; b < w->batch; b++)
        if (w->lens[b] > maxlen) maxlen = w->lens[b];
    const char *check = r->status == KVF_EUNSUPPORTED ? "unsupported"
                        : r->status                   ? kvf_errname(r->status)
                        : r->agree                    ? "ok"
                                                      : "MISMATCH";
    const int timed = r->status == 0;
    if (o->json) {
        /* Numbers only where they were measured: an untimed kernel has no time and no
         * difference from the reference (no 0 standing for "none"). */
        json_t *row = json_object();
        int bad = !row || kvf_json_set(row, "workload", json_string(w->name)) ||
                  kvf_json_set(row, "kernel", json_string(r->kernel)) ||
                  kvf_json_set(row, "batch", json_integer(w->batch)) ||
                  kvf_json_set(row, "max_len", json_integer(maxlen)) ||
                  kvf_json_set(row, "tokens", json_integer(kvf_case_total_tokens(c))) ||
                  kvf_json_set(row, "num_qo_heads", json_integer(o->hq)) ||
                  kvf_json_set(row, "num_kv_heads", json_integer(o->hk)) ||
                  kvf_json_set(row, "head_dim", json_integer(o->d)) ||
                  kvf_json_set(row, "page_size", json_integer(o->s)) ||
                  kvf_json_set(row, "bytes", json_integer(bytes));
        if (!bad && timed)
            bad = kvf_json_set(row, "median_us", kvf_json_number(r->med_us)) ||
                  kvf_json_set(row, "min_us", kvf_json_number(r->min_us)) ||
                  kvf_json_set(row, "gb_per_s", kvf_json_number(r->gbps)) ||
                  kvf_json_set(row, "fraction_of_roofline", kvf_json_number(r->fraction));
        bad = bad || kvf_json_set(row, "roofline_median_us", kvf_json_number(roof_us)) ||
              kvf_json_set(row, "roofline_gb_per_s", kvf_json_number(bytes / (roof_us * 1e3))) ||
              kvf_json_set(row, "check", json_string(check)) ||
              kvf_json_set(row, "max_abs_diff_o",
                           timed ? kvf_json_number(r->max_abs_o) : json_null()) ||
              kvf_json_set(row, "max_abs_diff_lse",
                           timed ? kvf_json_number(r->max_abs_lse) : json_null()) ||
              kvf_json_set(row, "plan", json_string(r->plan));
        if (!bad && r->status) bad = kvf_json_set(row, "error", json_string(r->why));
        if (bad || kvf_json_push(br->results, row)) {
            if (bad) json_decref(row);
            br->json_bad = 1;
        }
    } else if (timed) {
        printf("%-14s %-14s %6d %7d %10.2f %10.2f %8.1f %10.2f %8.1f %6.3f  %-8s %s\n", w->name,
               r->kernel, w->batch, maxlen, r->med_us, r->min_us, r->gbps, roof_us,
               bytes / (roof_us * 1e3), r->fraction, check, r->plan);
    } else {
        printf("%-14s %-14s %6d %7d  %s: %s\n", w->name, r->kernel, w->batch, maxlen, check,
               r->why);
    }
}

/* One workload: inputs, a checked run of every kernel and the reference, the timings. Returns
 * 0, 1 when a check failed, -1 on a device error. */
static int bench_one(bench_run *br, const bench_workload *w, const bench_opts *o) {
    kvf_case c;
    kvf_error err = {0};
    int rc = -1;
    void *roof = NULL;
    /* As many entries as kernels (and the reference): a plugin may add thousands. */
    const size_t nk = (size_t)br->n;
    kvf_bf16 **outs_o = calloc(nk, sizeof *outs_o);
    float **outs_lse = calloc(nk, sizeof *outs_lse);
    bench_result *res = calloc(nk, sizeof *res);
    int *runnable = calloc(nk, sizeof *runnable);
    double *med = calloc(nk + 1, sizeof *med), *mn = calloc(nk + 1, sizeof *mn);
    memset(&c, 0, sizeof c);
    if (!outs_o || !outs_lse || !res || !runnable || !med || !mn) {
        fprintf(stderr, "kvfuzz bench: out of host memory.\n");
        goto out;
    }
    if (build_case(w, o, br->first_row, &c)) goto out;
    const int64_t tokens = kvf_case_total_tokens(&c);
    const size_t q_b = (size_t)kvf_case_q_elems(&c) * 2, lse_b = (size_t)kvf_case_lse_elems(&c) * 4;
    const int64_t bytes =
        (int64_t)q_b + tokens * o->hk * o->d * 2 * 2 + (int64_t)q_b + (int64_t)lse_b;
    if (kvf_bench_host_load_generated(br->host, &c, o->seed, &err)) {
        fprintf(stderr, "kvfuzz bench: %s\n", err.msg);
        goto out;
    }
    /* Checked runs: the host's checks for each kernel, then agreement with the reference. */
    for (int k = 0; k < br->n; k++) {
        outs_o[k] = malloc(q_b + 2);
        outs_lse[k] = malloc(lse_b + 4);
        if (!outs_o[k] || !outs_lse[k]) goto out;
        kvf_error e = {0};
        int st = kvf_bench_host_check(br->host, k, outs_o[k], outs_lse[k], &e);
        if (k < br->timed) {
            res[k].kernel = br->descs[k]->name;
            res[k].status = st;
            snprintf(res[k].why, sizeof res[k].why, "%s", e.msg);
            kvf_bench_host_describe(br->host, k, res[k].plan, sizeof res[k].plan);
            runnable[k] = st == 0;
        } else if (st) {
            fprintf(stderr, "kvfuzz bench: the reference %s fails on %s: %s\n", br->descs[k]->name,
                    w->name, e.msg);
            goto out;
        }
        if (st == KVF_EDEVICE) goto out; /* the context may be gone */
    }
    for (int k = 0; k < br->timed; k++)
        if (runnable[k])
            compare(&c, outs_o[k], outs_lse[k], outs_o[br->ref], outs_lse[br->ref], &res[k]);
    if (!cuda_ok(cudaMalloc(&roof, (size_t)((bytes + 15) / 16 * 16)),
                 "allocating the roofline buffer") ||
        !cuda_ok(cudaMemsetAsync(roof, 0x5A, (size_t)((bytes + 15) / 16 * 16), br->stream), "fill"))
        goto out;
    if (time_round_robin(br, o, runnable, roof, bytes, med, mn)) goto out;
    rc = 0;
    for (int k = 0; k < br->timed; k++) {
        bench_result *r = &res[k];
        if (runnable[k]) {
            r->med_us = med[k + 1], r->min_us = mn[k + 1];
            r->gbps = bytes / (r->med_us * 1e3);
            r->fraction = med[0] / r->med_us;
        }
        if (r->status != 0 && r->status != KVF_EUNSUPPORTED) rc = 1;
        if (r->status == 0 && !r->agree) rc = 1;
        print_row(br, w, o, &c, r, med[0], bytes);
        br->first_row = 0;
    }
    fflush(stdout);
out:
    for (size_t k = 0; k < nk && outs_o && outs_lse; k++) {
        free(outs_o[k]);
        free(outs_lse[k]);
    }
    free(outs_o);
    free(outs_lse);
    free(res);
    free(runnable);
    free(med);
    free(mn);
    if (roof) cudaFree(roof);
    /* The host keeps its buffers for the next workload; the case is bench's own. */
    free(c.kv_indptr);
    free(c.kv_indices);
    free(c.kv_last_page_len);
    free(c.q);
    return rc;
}

static int run_bench(bench_workload *w, int nw, const bench_opts *o) {
    char why[256];
    if (!kvf_cuda_runtime_available(why, sizeof why))
        return cli_usage_error("bench", "the CUDA kernels cannot start: %s", why);
    bench_run br;
    memset(&br, 0, sizeof br);
    br.first_row = 1;
    json_t *root = NULL;
    const kvf_kernel *naive = kvf_kernel_find("cuda-naive");
    br.descs = calloc(o->kernels.count + 1, sizeof *br.descs);
    if (!br.descs) return cli_usage_error("bench", "out of memory for the kernels");
    for (size_t i = 0; i < o->kernels.count; i++) {
        br.descs[br.n] = bench_desc(o->kernels.items[i]);
        if (!br.descs[br.n]) { /* bench_desc said why */
            free(br.descs);
            return KVF_EXIT_USAGE;
        }
        if (br.descs[br.n] == naive->desc) br.ref = br.n;
        br.n++;
    }
    br.timed = br.n;
    if (br.descs[br.ref] != naive->desc) { /* an untimed reference of its own */
        br.ref = br.n;
        br.descs[br.n++] = naive->desc;
    }
    int rc = KVF_EXIT_FINDINGS, nev = 0;
    kvf_error err = {0};
    if (kvf_bench_host_create(br.descs, br.n, &br.host, &err)) {
        free(br.descs);
        return cli_usage_error("bench", "the kernels cannot start: %s", err.msg);
    }
    br.stream = (cudaStream_t)kvf_bench_host_stream(br.host);
    const int events = o->iters * (br.timed + 1) * 2;
    br.ev = calloc((size_t)events, sizeof *br.ev);
    if (!br.ev) goto out;
    if (!cuda_ok(cudaMalloc(&br.flush, FLUSH_BYTES), "allocating the L2 flush buffer") ||
        !cuda_ok(
            cudaMalloc((void **)&br.sink, sizeof(uint32_t) * (size_t)kvf_cuda_roofline_sink_len()),
            "allocating"))
        goto out;
    for (; nev < events; nev++)
        if (!cuda_ok(cudaEventCreate(&br.ev[nev]), "creating events")) goto out;

    struct cudaDeviceProp prop;
    int dev = 0;
    cudaGetDevice(&dev);
    if (!cuda_ok(cudaGetDeviceProperties(&prop, dev), "device query")) goto out;
    char date[16];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", localtime(&now));
    if (o->json) {
        root = json_object();
        br.results = json_array();
        br.json_bad = !root || !br.results || kvf_json_set(root, "date", json_string(date)) ||
                      kvf_json_set(root, "gpu", json_string(prop.name)) ||
                      kvf_json_set(root, "sms", json_integer(prop.multiProcessorCount)) ||
                      kvf_json_set(root, "l2_bytes", json_integer(prop.l2CacheSize)) ||
                      kvf_json_set(root, "iters", json_integer(o->iters)) ||
                      kvf_json_set(root, "warmup", json_integer(o->warmup)) ||
                      kvf_json_set(root, "flush_bytes", json_integer((json_int_t)FLUSH_BYTES)) ||
                      json_object_set(root, "results", br.results);
    } else {
        printf("kvfuzz bench  %s  %s (%d SMs, %d MB L2)  Hq %d Hk %d D %d S %d  iters %d, warmup "
               "%d, round robin, L2 flushed (%zu MiB written) before each run\n",
               date, prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, o->hq, o->hk,
               o->d, o->s, o->iters, o->warmup, FLUSH_BYTES >> 20);
        printf("%-14s %-14s %6s %7s %10s %10s %8s %10s %8s %6s  %-8s %s\n", "workload", "kernel",
               "batch", "len", "median_us", "min_us", "GB/s", "roof_us", "roofGB/s", "frac",
               "check", "plan");
    }
    rc = 0;
    for (int i = 0; i < nw; i++) {
        int r = bench_one(&br, &w[i], o);
        if (r < 0) {
            rc = KVF_EXIT_FINDINGS;
            break;
        }
        if (r > 0) rc = KVF_EXIT_FINDINGS;
    }
    /* The rows measured, also after a device error ended the run early. */
    if (o->json && (br.json_bad || kvf_json_dump(root, stdout, 1))) {
        fprintf(stderr, "kvfuzz bench: %s\n",
                br.json_bad ? "out of memory building the JSON" : "cannot write the JSON");
        rc = KVF_EXIT_FINDINGS;
    }
out:
    json_decref(br.results);
    json_decref(root);
    for (int i = 0; i < nev; i++)
        cudaEventDestroy(br.ev[i]);
    free(br.ev);
    if (br.flush) cudaFree(br.flush);
    if (br.sink) cudaFree(br.sink);
    kvf_bench_host_destroy(br.host);
    free(br.descs);
    return rc;
}
#endif

/* Adds the kernels one --kernel token names; only CUDA kernels can be timed. */
static int add_kernels(const char *cmd, bench_opts *o, const char *spec) {
    const size_t before = o->kernels.count;
    kvf_error err = {0};
    /* No test kernels (the resolver's `extra`): they have no descriptor for bench to time. */
    if (kvf_kernel_resolve_list(spec, NULL, &o->kernels, &err))
        return cli_usage_error(cmd, "%s", err.msg);
    const size_t n = o->kernels.count - before;
    size_t kept = before;
    int rc = 0;
    for (size_t i = before; i < o->kernels.count; i++) {
        const kvf_kernel *k = o->kernels.items[i];
        if (k->device == KVF_DEVICE_CUDA) {
            o->kernels.items[kept++] = k;
            continue;
        }
        /* PATH.so: its CUDA kernels; a kernel named alone must be one. */
        if (n == 1) rc = cli_usage_error(cmd, "%s is not a CUDA kernel", k->name);
        kvf_kernel_free(k);
    }
    o->kernels.count = kept;
    return rc;
}

/* The workloads of --batch/--len or --preset (seed by default) into *w and *nw; nonzero when
 * out of memory (what was added stays in *w for free_workloads). */
static int build_workloads(const char *preset, int64_t batch, int64_t len, uint64_t seed,
                           bench_workload **w, int *nw) {
    int oom = 0;
    char name[48];
    if (batch >= 0) {
        snprintf(name, sizeof name, "b%lld-l%lld", (long long)batch, (long long)len);
        oom |= add_uniform(w, nw, name, (int32_t)batch, (int32_t)len);
    } else if (!preset || strcmp(preset, "seed") == 0) {
        /* The seed case file's length (corpus/seeds/00-seed-h20kv4.kvfz): 51 pages of 64, the
         * last holding 2 tokens, so the benchmark and the case file are one workload. */
        oom |= add_uniform(w, nw, "seed", 1, 50 * 64 + 2);
    } else if (strcmp(preset, "sweep") == 0) {
        static const int32_t bs[] = {1, 8, 32, 128}, ls[] = {512, 4096, 32768};
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++) {
                snprintf(name, sizeof name, "b%d-l%d", bs[i], ls[j]);
                oom |= add_uniform(w, nw, name, bs[i], ls[j]);
            }
    } else {
        /* Mixed: lengths log-uniform in [1, 16384], two empty sequences among them. */
        int32_t lens[64];
        uint64_t st = seed ^ 0x6d69786564ull;
        for (int b = 0; b < 64; b++) {
            double u = (double)(splitmix(&st) >> 11) / 9007199254740992.0;
            lens[b] = (int32_t)floor(pow(16384.0, u));
        }
        lens[5] = 0, lens[40] = 0;
        oom |= add_workload(w, nw, "mixed", 64, lens);
    }
    return oom;
}

int kvf_cmd_bench(int argc, char **argv) {
    const char *cmd = "bench";
    if (argc > 1 && strcmp(argv[1], "--oracle") == 0) /* cli/bench_oracle.c */
        return kvf_cmd_bench_oracle(argc - 1, argv + 1);
    bench_opts o;
    memset(&o, 0, sizeof o);
    o.hq = 20, o.hk = 4, o.d = 128, o.s = 64, o.iters = 50, o.warmup = 5, o.seed = 1;
    const char *preset = NULL;
    int64_t batch = -1, len = -1, v;
    cli_parser p;
    cli_parser_init(&p, cmd, argc, argv, bench_options);
    const char *val;
    for (int key; (key = cli_next(&p, &val)) != CLI_END;) {
        int rc = 0;
        switch (key) {
        case CLI_HELP:
            bench_help(stdout);
            break;
        case CLI_ERROR:
            rc = KVF_EXIT_USAGE;
            break;
        case BENCH_ORACLE:
            rc = cli_usage_error(cmd, "--oracle selects the oracle benchmark and comes first "
                                      "(see kvfuzz bench --oracle --help)");
            break;
        case BENCH_JSON:
            o.json = 1;
            break;
        case BENCH_KERNEL: {
            char buf[1024];
            if (strlen(val) >= sizeof buf) {
                rc = cli_usage_error(cmd, "--kernel is too long");
                break;
            }
            snprintf(buf, sizeof buf, "%s", val);
            for (char *tok = strtok(buf, ","); tok && !rc; tok = strtok(NULL, ","))
                rc = add_kernels(cmd, &o, tok);
            break;
        }
        case BENCH_PRESET:
            if (strcmp(val, "seed") && strcmp(val, "sweep") && strcmp(val, "mixed"))
                rc = cli_usage_error(cmd, "unknown preset \"%s\" (seed, sweep or mixed)", val);
            preset = val;
            break;
        case BENCH_BATCH:
            rc = cli_opt_i64(cmd, "--batch", val, 1, 65535, &batch);
            break;
        case BENCH_LEN:
            rc = cli_opt_i64(cmd, "--len", val, 0, 1 << 20, &len);
            break;
        case BENCH_HEADS: {
            const char *colon = strchr(val, ':');
            char hq_text[32];
            int64_t hq = 0, hk = 0;
            int ok = colon && (size_t)(colon - val) < sizeof hq_text;
            if (ok) {
                snprintf(hq_text, sizeof hq_text, "%.*s", (int)(colon - val), val);
                ok = cli_parse_i64(hq_text, 1, 1024, &hq) == 0 &&
                     cli_parse_i64(colon + 1, 1, 1024, &hk) == 0 && hq % hk == 0 && hq / hk <= 16;
            }
            if (!ok)
                rc = cli_usage_error(cmd,
                                     "--heads must be HQ:HK with HK dividing HQ and a group of "
                                     "at most 16, not \"%s\"",
                                     val);
            o.hq = (int32_t)hq, o.hk = (int32_t)hk;
            break;
        }
        case BENCH_HEAD_DIM:
            if (cli_parse_i64(val, 64, 256, &v) || (v != 64 && v != 128 && v != 256))
                rc = cli_usage_error(cmd, "--head-dim must be 64, 128 or 256, not \"%s\"", val);
            o.d = (int32_t)v;
            break;
        case BENCH_PAGE_SIZE:
            rc = cli_opt_i64(cmd, "--page-size", val, 1, 256, &v);
            o.s = (int32_t)v;
            break;
        case BENCH_ITERS:
            rc = cli_opt_i64(cmd, "--iters", val, 1, 100000, &v);
            o.iters = (int)v;
            break;
        case BENCH_WARMUP:
            rc = cli_opt_i64(cmd, "--warmup", val, 0, 100000, &v);
            o.warmup = (int)v;
            break;
        case BENCH_SEED:
            rc = cli_opt_u64(cmd, "--seed", val, &o.seed);
            break;
        }
        if (key == CLI_HELP || rc) {
            kvf_kernel_list_free(&o.kernels);
            return key == CLI_HELP ? KVF_EXIT_OK : rc;
        }
    }
    char **rest;
    if (cli_operands(&p, &rest))
        return cli_usage_error(cmd, "unexpected argument \"%s\" (see `kvfuzz bench --help`)",
                               rest[0]);
    if ((batch >= 0) != (len >= 0)) return cli_usage_error(cmd, "--batch and --len go together");
    if (o.kernels.count == 0) {
        const char *dflt[2] = {"cuda", "cuda-naive"};
        for (int i = 0; i < 2; i++) {
            const kvf_kernel *k = kvf_kernel_find(dflt[i]);
            if (k && kvf_kernel_list_push(&o.kernels, k, NULL))
                return cli_usage_error(cmd, "out of memory for the kernel list");
        }
    }
    if (batch >= 0 && preset)
        return cli_usage_error(cmd, "give either --preset or --batch/--len, not both");

    bench_workload *w = NULL;
    int nw = 0;
    const int oom = build_workloads(preset, batch, len, o.seed, &w, &nw);
    if (oom) {
        free_workloads(w, nw);
        fprintf(stderr, "kvfuzz bench: out of host memory.\n");
        return KVF_EXIT_FINDINGS;
    }
#ifdef KVF_HAVE_CUDA
    int rc = run_bench(w, nw, &o);
#else
    int rc = cli_usage_error(cmd, "the CUDA kernels cannot start: this kvfuzz was built without "
                                  "CUDA, and bench times the CUDA kernels only");
#endif
    free_workloads(w, nw);
    kvf_kernel_list_free(&o.kernels); /* plugin kernels; built-in ones are static */
    return rc;
}
