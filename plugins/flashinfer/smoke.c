/* kvf_plugin_smoke: loads a CUDA decode plugin, runs each of its kernels on a few fixed cases
 * and compares o and lse with a double-precision CPU reference.
 *
 *   kvf_plugin_smoke PLUGIN.so [KERNEL|all] [RANDOM_CASES]
 *
 * RANDOM_CASES adds that many random shapes (head dims 64/128/256, groups 1-6 and 8, page
 * sizes 1 to 256, batches up to 48) after the fixed cases, and a summary per kernel counts
 * the cases its plan split and the largest errors with and without a split. Two FP8 cases come
 * last (e4m3 with one scale per cache, e5m2 without scales), for the kernels whose kv_dtypes
 * and scale_granularities take them; they stay out of the summary.
 * It stands in for kvfuzz's own plugin host where that is not available: buffers are laid out
 * as kvfuzz lays them out (NHD pages, NaN in unused slots and unreferenced pages, outputs
 * poisoned with NaN before the run and followed by a guard), and each line reports the plan
 * (describe()), the largest error of o in bf16 ulps of the exact value, the largest lse error,
 * whether outputs were left unwritten or the guard touched, and the mean time of one run.
 * Exit status: 0 when every kernel ran every case it supports without an error, an unwritten
 * output or guard damage (errors of o are reported, not judged: that is kvfuzz's job), 1
 * otherwise, 2 on usage or load errors. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/plugin.h"

#define GUARD 256 /* bytes after each output */

typedef struct smoke_case {
    const char *name;
    int hq, hk, d, s, b;
    int lens[8];     /* b lengths; when lens[0] < 0 every length is drawn from [1, -lens[0]] */
    int extra_pages; /* unreferenced pages in the pool */
    int ones;        /* q = k = 1: equal logits, o is the mean of v */
} smoke_case;

/* An FP8 case: both caches in one FP8 type (kvf_plugin_shape codes: 1 e4m3, 2 e5m2), their
 * bytes drawn uniformly among the codes of magnitude up to max_code (so values spread over
 * the binades), with one f32 scale per cache (scaled) or none. */
typedef struct fp8_spec {
    int dtype, scaled;
    float k_scale, v_scale;
    int max_code;
} fp8_spec;

static const smoke_case cases[] = {
    {"seed h20/kv4 d128 ps64 3200 tok", 20, 4, 128, 64, 1, {3200}, 1, 0},
    {"d64 ps1 g1 256 tok", 8, 8, 64, 1, 1, {256}, 4, 0},
    {"mixed g4 d128 ps16", 32, 8, 128, 16, 6, {1, 63, 64, 65, 0, 700}, 3, 0},
    {"g8 d256 ps32 b3", 16, 2, 256, 32, 3, {1000, 17, 4096}, 2, 0},
    {"g6 d64 ps8 b40", 24, 4, 64, 8, 40, {-500}, 5, 0},
    {"g5 d256 ps16 b2", 10, 2, 256, 16, 2, {5000, 31}, 1, 0},
    {"g3 d128 ps64 b128", 12, 4, 128, 64, 128, {-2000}, 2, 0},
    {"g2 d128 ps128 32k tok", 16, 8, 128, 128, 1, {32768}, 1, 0},
    {"g5 d128 ps64 b64", 20, 4, 128, 64, 64, {-3200}, 1, 0},
    {"d64 ps1 g1 256 tok q=k=1", 1, 1, 64, 1, 1, {256}, 1, 1},
    {"g4 d128 ps16 b4 q=k=1", 16, 4, 128, 16, 4, {4000, 1000, 300, 2}, 1, 1},
    {"g7 unsupported", 28, 4, 128, 16, 1, {100}, 1, 0},
};

/* After the random shapes, so that these draw nothing the cases before them would have. */
static const struct {
    smoke_case c;
    fp8_spec f;
} fp8_cases[] = {
    /* 0x7E: e4m3's largest finite value (448); the scales map it near 1. */
    {{"seed e4m3 scales", 20, 4, 128, 64, 1, {3200}, 1, 0}, {1, 1, 0.0021f, 0.0023f, 0x7E}},
    /* 0x3C: e5m2's 1.0, so the values sit in [-1, 1] without a scale. */
    {{"mixed g4 d128 ps16 e5m2", 32, 8, 128, 16, 6, {1, 63, 64, 65, 0, 700}, 3, 0},
     {2, 0, 1.0f, 1.0f, 0x3C}},
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static double uniform(void) {
    return (double)(rng() >> 11) / 9007199254740992.0;
}

static uint16_t f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static double bf2d(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* An FP8 byte's value: e4m3 (float8_e4m3fn: bias 7, no infinities, 0x7F NaN) or e5m2 (bias
 * 15, IEEE-like). */
static double fp82d(uint8_t b, int dtype) {
    const int man_bits = dtype == 1 ? 3 : 2, bias = dtype == 1 ? 7 : 15;
    const int e = (b & 0x7f) >> man_bits, m = b & ((1 << man_bits) - 1);
    const double sign = b & 0x80 ? -1 : 1;
    if (dtype == 1 && (b & 0x7f) == 0x7f) return NAN;
    if (dtype == 2 && e == 31) return m ? NAN : sign * INFINITY;
    if (e == 0) return sign * ldexp(m, 1 - bias - man_bits);
    return sign * ldexp(m + (1 << man_bits), e - bias - man_bits);
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "smoke: %s: %s\n", #call, cudaGetErrorString(e_));                     \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

typedef struct built {
    kvf_plugin_shape shape;
    int32_t *indptr, *indices, *last;
    uint16_t *q, *k, *v; /* k and v hold bf16, or FP8 bytes when fp8.dtype is set */
    size_t q_elems, kv_elems;
    fp8_spec fp8;
    double *o_ref, *lse_ref; /* lse_ref base 2 */
    double *o_mag;           /* per element: sum p|v| / sum p, the scale of the row's terms */
} built;

/* Element off of cache k (which 0) or v (1) as the kernel is to read it: bf16, or the FP8
 * value times its scale. */
static double kv_value(const built *w, int which, size_t off) {
    if (!w->fp8.dtype) return bf2d((which ? w->v : w->k)[off]);
    const uint8_t b = ((const uint8_t *)(which ? w->v : w->k))[off];
    const double scale = w->fp8.scaled ? (which ? w->fp8.v_scale : w->fp8.k_scale) : 1.0;
    return scale * fp82d(b, w->fp8.dtype);
}

/* A random FP8 byte of magnitude code at most max_code. */
static uint8_t fp8_draw(int max_code) {
    return (uint8_t)((rng() % (uint64_t)(max_code + 1)) | (rng() & 1 ? 0x80 : 0));
}

static void build(const smoke_case *c, const fp8_spec *f, built *w) {
    memset(w, 0, sizeof *w);
    if (f) w->fp8 = *f;
    int32_t lens[256];
    int64_t entries = 0, tokens = 0, maxlen = 0;
    for (int b = 0; b < c->b; b++) {
        lens[b] = c->lens[0] < 0 ? 1 + (int32_t)(rng() % (uint64_t)(-c->lens[0])) : c->lens[b];
        entries += (lens[b] + c->s - 1) / c->s;
        tokens += lens[b];
        if (lens[b] > maxlen) maxlen = lens[b];
    }
    const int64_t pages = entries + c->extra_pages;
    const size_t page_elems = (size_t)c->s * c->hk * c->d;
    w->indptr = calloc((size_t)c->b + 1, 4);
    w->indices = calloc((size_t)entries + 1, 4);
    w->last = calloc((size_t)c->b, 4);
    /* A shuffled page table, so no kernel gets away with assuming contiguous pages. */
    int32_t *perm = malloc((size_t)pages * 4);
    for (int64_t i = 0; i < pages; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = pages - 1; i > 0; i--) {
        int64_t j = (int64_t)(rng() % (uint64_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    w->kv_elems = (size_t)pages * page_elems;
    w->k = malloc(w->kv_elems * 2);
    w->v = malloc(w->kv_elems * 2);
    uint8_t *k8 = (uint8_t *)w->k, *v8 = (uint8_t *)w->v;
    for (size_t i = 0; i < w->kv_elems; i++) {
        if (f)
            k8[i] = v8[i] = 0x7f; /* both FP8 types' NaN */
        else
            w->k[i] = w->v[i] = 0x7fc0; /* NaN: unreferenced pages and unused slots */
    }
    int64_t e = 0;
    for (int b = 0; b < c->b; b++) {
        int n = (lens[b] + c->s - 1) / c->s;
        w->indptr[b + 1] = w->indptr[b] + n;
        w->last[b] = n ? lens[b] - (n - 1) * c->s : 0;
        for (int p = 0; p < n; p++, e++) {
            w->indices[e] = perm[e];
            int used = p == n - 1 ? w->last[b] : c->s;
            for (int t = 0; t < used; t++)
                for (int h = 0; h < c->hk; h++)
                    for (int x = 0; x < c->d; x++) {
                        size_t off =
                            (size_t)perm[e] * page_elems + ((size_t)t * c->hk + h) * c->d + x;
                        if (f) {
                            k8[off] = fp8_draw(f->max_code);
                            v8[off] = fp8_draw(f->max_code);
                            continue;
                        }
                        w->k[off] = c->ones ? 0x3f80 : f2bf((float)(uniform() * 2 - 1));
                        w->v[off] = f2bf((float)(uniform() * 2 - 1));
                    }
        }
    }
    free(perm);
    w->q_elems = (size_t)c->b * c->hq * c->d;
    w->q = malloc(w->q_elems * 2 + 2);
    /* q scaled up so the softmax is peaked and cancellation in the merge shows. */
    for (size_t i = 0; i < w->q_elems; i++)
        w->q[i] = c->ones ? 0x3f80 : f2bf((float)((uniform() * 2 - 1) * 4));

    kvf_plugin_shape *s = &w->shape;
    s->struct_size = sizeof *s;
    s->num_qo_heads = c->hq;
    s->num_kv_heads = c->hk;
    s->head_dim = c->d;
    s->page_size = c->s;
    s->batch_size = c->b;
    s->num_pages = pages;
    s->num_entries = entries;
    s->total_tokens = tokens;
    s->max_seq_len = maxlen;
    s->sm_scale = (float)(1.0 / sqrt((double)c->d));
    if (f) {
        s->k_dtype = s->v_dtype = f->dtype;
        s->scale_granularity = f->scaled ? 1 : 0;
    }

    /* The reference: double precision from the bf16 inputs, lse in base 2. */
    w->o_ref = calloc(w->q_elems + 1, sizeof(double));
    w->lse_ref = calloc((size_t)c->b * c->hq + 1, sizeof(double));
    w->o_mag = calloc(w->q_elems + 1, sizeof(double));
    double *sc = malloc(((size_t)maxlen + 1) * sizeof(double));
    const int group = c->hq / c->hk;
    for (int b = 0; b < c->b; b++)
        for (int h = 0; h < c->hq; h++) {
            const int kh = h / group;
            const uint16_t *qv = w->q + ((size_t)b * c->hq + h) * c->d;
            double m = -INFINITY;
            for (int t = 0; t < lens[b]; t++) {
                int32_t pg = w->indices[w->indptr[b] + t / c->s];
                const size_t kv =
                    (size_t)pg * page_elems + ((size_t)(t % c->s) * c->hk + kh) * c->d;
                double acc = 0;
                for (int x = 0; x < c->d; x++)
                    acc += bf2d(qv[x]) * kv_value(w, 0, kv + x);
                sc[t] = acc * s->sm_scale;
                if (sc[t] > m) m = sc[t];
            }
            double sum = 0;
            double *o = w->o_ref + ((size_t)b * c->hq + h) * c->d;
            double *mag = w->o_mag + ((size_t)b * c->hq + h) * c->d;
            for (int t = 0; t < lens[b]; t++) {
                double p = exp(sc[t] - m);
                sum += p;
                int32_t pg = w->indices[w->indptr[b] + t / c->s];
                const size_t vv =
                    (size_t)pg * page_elems + ((size_t)(t % c->s) * c->hk + kh) * c->d;
                for (int x = 0; x < c->d; x++) {
                    const double v = kv_value(w, 1, vv + x);
                    o[x] += p * v;
                    mag[x] += p * fabs(v);
                }
            }
            if (lens[b] == 0) {
                w->lse_ref[(size_t)b * c->hq + h] = -INFINITY;
                continue;
            }
            for (int x = 0; x < c->d; x++) {
                o[x] /= sum;
                mag[x] /= sum;
            }
            w->lse_ref[(size_t)b * c->hq + h] = (m + log(sum)) / log(2.0);
        }
    free(sc);
}

static void release(built *w) {
    free(w->indptr);
    free(w->indices);
    free(w->last);
    free(w->q);
    free(w->k);
    free(w->v);
    free(w->o_ref);
    free(w->lse_ref);
    free(w->o_mag);
}

/* Distance in bf16 ulps at the exact value (the spacing of bf16 numbers around it), measured
 * no finer than at 1/64 of the row's magnitude sum(p|v|)/sum(p): below that, cancellation
 * among the terms makes any fp32 accumulation's error, not the kernel's, dominate. */
static double ulps(double got, double exact, double mag) {
    if (isnan(got)) return INFINITY;
    double a = fmax(fabs(exact), mag / 64);
    int ex;
    frexp(a < 0x1p-126 ? 0x1p-126 : a, &ex);
    return fabs(got - exact) / ldexp(1.0, ex - 8);
}

static void *dev_copy(const void *h, size_t n) {
    void *d = NULL;
    CK(cudaMalloc(&d, n ? n : 1));
    if (n) CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    return d;
}

/* Returns 1 when the kernel misbehaved on this case. */
typedef struct tally {
    int cases, split, over1;     /* cases run, cases planned split, cases with o > 1 ulp off */
    double max_split, max_whole; /* largest ulp error on split and on unsplit cases */
} tally;

/* The stride of the plugin's kernel table: the fields of a kernel entry that exist. */
static uint32_t kernel_struct_size;

/* Whether the kernel's descriptor takes the case's caches: kvfuzz gives a kernel only the
 * dtypes and scale granularities its kv_dtypes and scale_granularities name. */
static int kv_declared(const kvf_plugin_kernel *k, const kvf_plugin_shape *s) {
    if (!s->k_dtype && !s->v_dtype && !s->scale_granularity) return 1;
    if (kernel_struct_size < offsetof(kvf_plugin_kernel, scale_granularities) + sizeof(uint32_t))
        return 0;
    const uint32_t dt = (1u << s->k_dtype) | (1u << s->v_dtype) | 1u;
    return (k->kv_dtypes & dt) == (dt & ~1u) &&
           (!s->scale_granularity || (k->scale_granularities >> s->scale_granularity & 1u));
}

static int run_case(const kvf_plugin_kernel *k, void *state, const smoke_case *c, built *w,
                    tally *t) {
    char msg[256] = "", why[256] = "", desc[256] = "";
    const kvf_plugin_shape *s = &w->shape;
    if (!kv_declared(k, s)) {
        printf("%-20s %-32s not declared: its kv_dtypes / scale_granularities leave it out\n",
               k->name, c->name);
        return 0;
    }
    if (!k->supports(k, s, why, sizeof why)) {
        printf("%-20s %-32s unsupported: %s\n", k->name, c->name, why);
        return 0;
    }
    kvf_plugin_index idx = {w->indptr, w->indices, w->last};
    if (k->plan && k->plan(state, s, &idx, msg, sizeof msg) != KVF_PLUGIN_OK) {
        printf("%-20s %-32s plan failed: %s\n", k->name, c->name, msg);
        return 1;
    }
    size_t ws = k->workspace_bytes ? k->workspace_bytes(state, s) : 0;
    if (k->describe) k->describe(state, desc, sizeof desc);

    const size_t o_bytes = w->q_elems * 2, lse_bytes = (size_t)c->b * c->hq * 4;
    uint16_t *dq = dev_copy(w->q, w->q_elems * 2);
    const size_t kv_bytes = w->kv_elems * (w->fp8.dtype ? 1 : 2);
    uint16_t *dk = dev_copy(w->k, kv_bytes), *dv = dev_copy(w->v, kv_bytes);
    float *dks = NULL, *dvs = NULL;
    if (w->fp8.scaled) {
        dks = dev_copy(&w->fp8.k_scale, sizeof(float));
        dvs = dev_copy(&w->fp8.v_scale, sizeof(float));
    }
    int32_t *dip = dev_copy(w->indptr, ((size_t)c->b + 1) * 4);
    int32_t *dix = dev_copy(w->indices, (size_t)s->num_entries * 4);
    int32_t *dl = dev_copy(w->last, (size_t)c->b * 4);
    uint8_t *dout, *dlse, *dws = NULL;
    CK(cudaMalloc((void **)&dout, o_bytes + GUARD));
    CK(cudaMalloc((void **)&dlse, lse_bytes + GUARD));
    if (ws) CK(cudaMalloc((void **)&dws, ws));
    cudaStream_t stream;
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    kvf_plugin_args a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.shape = s;
    a.q = dq;
    a.q_stride_batch = (int64_t)c->hq * c->d;
    a.q_stride_head = c->d;
    a.k_cache = dk;
    a.v_cache = dv;
    a.kv_stride_page = (int64_t)c->s * c->hk * c->d;
    a.kv_stride_slot = (int64_t)c->hk * c->d;
    a.kv_stride_head = c->d;
    a.kv_indptr = dip;
    a.kv_indices = dix;
    a.kv_last_page_len = dl;
    a.sm_scale = s->sm_scale;
    a.o = (uint16_t *)dout;
    a.o_stride_batch = (int64_t)c->hq * c->d;
    a.o_stride_head = c->d;
    a.lse = (float *)dlse;
    a.lse_stride_batch = c->hq;
    a.workspace = dws;
    a.workspace_bytes = ws;
    a.stream = stream;
    a.k_scale = dks;
    a.v_scale = dvs;

    /* Poison: 0xffff is a bf16 NaN and 0xffffffff an f32 NaN, so unwritten outputs show. */
    CK(cudaMemsetAsync(dout, 0xff, o_bytes + GUARD, stream));
    CK(cudaMemsetAsync(dlse, 0xff, lse_bytes + GUARD, stream));
    if (ws) CK(cudaMemsetAsync(dws, 0xff, ws, stream));
    int bad = 0;
    int rc = k->run(state, &a, msg, sizeof msg);
    cudaError_t ce = cudaStreamSynchronize(stream);
    if (rc != KVF_PLUGIN_OK || ce != cudaSuccess) {
        printf("%-20s %-32s run failed: %s%s\n", k->name, c->name, msg,
               ce != cudaSuccess ? cudaGetErrorString(ce) : "");
        bad = 1;
        goto out;
    }
    {
        uint16_t *o = malloc(o_bytes + GUARD);
        uint8_t *lse = malloc(lse_bytes + GUARD);
        CK(cudaMemcpy(o, dout, o_bytes + GUARD, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(lse, dlse, lse_bytes + GUARD, cudaMemcpyDeviceToHost));
        double max_ulp = 0, max_abs = 0, max_lse = 0;
        size_t unwritten = 0, guard = 0, over8 = 0, empty_lse = 0;
        float empty_lse_value = 0;
        for (size_t i = 0; i < w->q_elems; i++) {
            if (o[i] == 0xffff) {
                unwritten++;
                continue;
            }
            double u = ulps(bf2d(o[i]), w->o_ref[i], w->o_mag[i]);
            if (u > 8) over8++;
            if (u > max_ulp) max_ulp = u;
            double ab = fabs(bf2d(o[i]) - w->o_ref[i]);
            if (ab > max_abs) max_abs = ab;
        }
        for (size_t i = 0; i < (size_t)c->b * c->hq; i++) {
            float f;
            memcpy(&f, lse + 4 * i, 4);
            uint32_t u;
            memcpy(&u, &f, 4);
            if (u == 0xffffffffu) {
                unwritten++;
                continue;
            }
            double ex = w->lse_ref[i];
            if (isinf(ex) && f != ex) { /* an empty sequence: lse must be -inf */
                empty_lse++;
                empty_lse_value = f;
                continue;
            }
            double err = fabs((double)f - ex);
            if (err > max_lse) max_lse = err;
        }
        for (size_t i = 0; i < GUARD; i++)
            guard += ((uint8_t *)o)[o_bytes + i] != 0xff || lse[lse_bytes + i] != 0xff;
        /* Mean time of one run() (plan excluded), as a plugin user would call it. */
        cudaEvent_t t0, t1;
        CK(cudaEventCreate(&t0));
        CK(cudaEventCreate(&t1));
        const int iters = 50;
        CK(cudaEventRecord(t0, stream));
        for (int i = 0; i < iters; i++)
            k->run(state, &a, msg, sizeof msg);
        CK(cudaEventRecord(t1, stream));
        CK(cudaEventSynchronize(t1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, t0, t1));
        cudaEventDestroy(t0);
        cudaEventDestroy(t1);
        char empty[64] = "";
        if (empty_lse)
            snprintf(empty, sizeof empty, "  empty-seq lse %g (x%zu)", empty_lse_value, empty_lse);
        printf("%-20s %-32s max_ulp %6.2f  >8ulp %5zu  max_abs %.3g  lse_err %.3g%s  "
               "unwritten %zu  guard %zu  %7.2f us  [%s]\n",
               k->name, c->name, max_ulp, over8, max_abs, max_lse, empty, unwritten, guard,
               1000.0 * ms / iters, desc);
        bad = unwritten || guard; /* large errors are findings to report, not smoke failures */
        const int split = strncmp(desc, "split=yes", 9) == 0;
        if (t) { /* FP8 cases stay out of the summary */
            t->cases++;
            t->split += split;
            t->over1 += max_ulp > 1;
            double *mx = split ? &t->max_split : &t->max_whole;
            if (max_ulp > *mx) *mx = max_ulp;
        }
        free(o);
        free(lse);
    }
out:
    cudaStreamDestroy(stream);
    cudaFree(dq);
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(dks);
    cudaFree(dvs);
    cudaFree(dip);
    cudaFree(dix);
    cudaFree(dl);
    cudaFree(dout);
    cudaFree(dlse);
    cudaFree(dws);
    return bad;
}

/* A random supported-looking shape: what FlashInfer's plan does across the space. */
static void random_case(smoke_case *c, int i) {
    static const int dims[] = {64, 128, 256}, groups[] = {1, 2, 3, 4, 5, 6, 8},
                     kvh[] = {1, 2, 4, 8}, pages[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    static char names[64];
    memset(c, 0, sizeof *c);
    snprintf(names, sizeof names, "random %d", i);
    c->name = names;
    c->d = dims[rng() % 3];
    c->hk = kvh[rng() % 4];
    c->hq = c->hk * groups[rng() % 7];
    c->s = pages[rng() % 9];
    c->b = 1 + (int)(rng() % 48);
    /* Keep the CPU reference's work (tokens x Hq x D) near 1e8 at most. */
    long cap = 100000000L / ((long)c->b * c->hq * c->d);
    long len = 1 + (long)(rng() % 8192);
    c->lens[0] = -(int)(len < cap ? len : (cap > 1 ? cap : 1));
    c->extra_pages = 1;
    c->ones = rng() % 8 == 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: kvf_plugin_smoke PLUGIN.so [KERNEL|all] [RANDOM_CASES]\n");
        return 2;
    }
    const char *only = argc >= 3 && strcmp(argv[2], "all") != 0 ? argv[2] : NULL;
    const int nrandom = argc == 4 ? atoi(argv[3]) : 0;
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "smoke: %s\n", dlerror());
        return 2;
    }
    kvf_plugin_entry_fn entry = (kvf_plugin_entry_fn)dlsym(lib, KVF_PLUGIN_ENTRY);
    const kvf_plugin *pl = entry ? entry() : NULL;
    if (!pl || pl->abi_version != KVF_PLUGIN_ABI_VERSION) {
        fprintf(stderr, "smoke: %s: no kvf_plugin_v1 descriptor of ABI 1\n", argv[1]);
        return 2;
    }
    int dev = 0;
    struct cudaDeviceProp prop;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));
    printf("plugin %s, %u kernels, device %s (%d SMs)\n", pl->name, pl->num_kernels, prop.name,
           prop.multiProcessorCount);
    enum { MAX_KERNELS = 16 };
    const kvf_plugin_kernel *ks[MAX_KERNELS];
    void *states[MAX_KERNELS];
    tally tallies[MAX_KERNELS];
    memset(tallies, 0, sizeof tallies);
    int failures = 0, nk = 0;
    for (uint32_t i = 0; i < pl->num_kernels && nk < MAX_KERNELS; i++) {
        const kvf_plugin_kernel *k =
            (const kvf_plugin_kernel *)((const char *)pl->kernels +
                                        (size_t)i * pl->kernel_struct_size);
        if (only && strcmp(k->name, only) != 0) continue;
        kernel_struct_size = pl->kernel_struct_size;
        char msg[256] = "";
        void *state = NULL;
        if (k->create && k->create(k, &state, msg, sizeof msg) != KVF_PLUGIN_OK) {
            printf("%s: create failed: %s\n", k->name, msg);
            failures++;
            continue;
        }
        ks[nk] = k;
        states[nk++] = state;
    }
    if (!nk && !failures) {
        fprintf(stderr, "smoke: no kernel named %s\n", only);
        return 2;
    }
    /* Cases outer, kernels inner: each case is built once and every kernel sees it. */
    const int nfixed = (int)(sizeof cases / sizeof cases[0]);
    const int nfp8 = (int)(sizeof fp8_cases / sizeof fp8_cases[0]);
    for (int ci = 0; ci < nfixed + nrandom + nfp8; ci++) {
        smoke_case rc;
        const smoke_case *c = &rc;
        const fp8_spec *f = NULL;
        if (ci < nfixed) {
            c = &cases[ci];
        } else if (ci < nfixed + nrandom) {
            random_case(&rc, ci - nfixed);
        } else {
            c = &fp8_cases[ci - nfixed - nrandom].c;
            f = &fp8_cases[ci - nfixed - nrandom].f;
        }
        built w;
        build(c, f, &w);
        for (int j = 0; j < nk; j++)
            failures += run_case(ks[j], states[j], c, &w, f ? NULL : &tallies[j]);
        release(&w);
    }
    for (int j = 0; j < nk; j++) {
        printf("summary %-20s cases %d  split %d  >1ulp %d  max ulp split %.2f  unsplit %.2f\n",
               ks[j]->name, tallies[j].cases, tallies[j].split, tallies[j].over1,
               tallies[j].max_split, tallies[j].max_whole);
        if (ks[j]->destroy) ks[j]->destroy(states[j]);
    }
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
