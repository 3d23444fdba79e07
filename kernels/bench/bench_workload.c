/* `kvfuzz bench`'s workloads and the host case each is timed on (kvfuzz/bench_workload.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/bench_workload.h"
#include "kvfuzz/bf16.h"
#include "kvfuzz/env.h"

/* The workloads' own generator (not the case generator's): the mixed lengths, the page table's
 * shuffle and q, so that bench's inputs stay what they have been. */
static uint64_t splitmix(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int kvf_bench_preset_known(const char *name) {
    return name &&
           (strcmp(name, "seed") == 0 || strcmp(name, "sweep") == 0 || strcmp(name, "mixed") == 0);
}

int kvf_bench_parse_heads(const char *text, int32_t *hq, int32_t *hk) {
    const char *colon = strchr(text, ':');
    char hq_text[32];
    int64_t q = 0, k = 0;
    int ok = colon && (size_t)(colon - text) < sizeof hq_text;
    if (ok) {
        snprintf(hq_text, sizeof hq_text, "%.*s", (int)(colon - text), text);
        ok = kvf_parse_i64(hq_text, 1, 1024, &q) == 0 &&
             kvf_parse_i64(colon + 1, 1, 1024, &k) == 0 && q % k == 0 && q / k <= 16;
    }
    *hq = (int32_t)q, *hk = (int32_t)k;
    return ok ? 0 : -1;
}

int kvf_bench_parse_head_dim(const char *text, int32_t *d) {
    int64_t v = 0;
    int bad = kvf_parse_i64(text, 64, 256, &v) || (v != 64 && v != 128 && v != 256);
    *d = (int32_t)v;
    return bad ? -1 : 0;
}

static int add_workload(kvf_bench_workloads *w, const char *name, int32_t batch,
                        const int32_t *lens) {
    kvf_bench_workload *items = realloc(w->items, (size_t)(w->count + 1) * sizeof *items);
    if (!items) return -1;
    w->items = items;
    kvf_bench_workload *x = &items[w->count];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->batch = batch;
    x->lens = malloc(sizeof(int32_t) * (size_t)(batch > 0 ? batch : 1));
    if (!x->lens) return -1;
    memcpy(x->lens, lens, sizeof(int32_t) * (size_t)batch);
    w->count++;
    return 0;
}

static int add_uniform(kvf_bench_workloads *w, const char *name, int32_t batch, int32_t len) {
    int32_t *lens = malloc(sizeof(int32_t) * (size_t)(batch > 0 ? batch : 1));
    if (!lens) return -1;
    for (int32_t b = 0; b < batch; b++)
        lens[b] = len;
    int rc = add_workload(w, name, batch, lens);
    free(lens);
    return rc;
}

/* Mixed: lengths log-uniform in [1, 16384], two empty sequences among them. */
static int add_mixed(kvf_bench_workloads *w, uint64_t seed) {
    int32_t lens[64];
    uint64_t st = seed ^ 0x6d69786564ull;
    for (int b = 0; b < 64; b++) {
        double u = (double)(splitmix(&st) >> 11) / 9007199254740992.0;
        lens[b] = (int32_t)floor(pow(16384.0, u));
    }
    lens[5] = 0, lens[40] = 0;
    return add_workload(w, "mixed", 64, lens);
}

int kvf_bench_workloads_make(kvf_bench_workloads *w, const char *preset, int64_t batch, int64_t len,
                             uint64_t seed, kvf_error *err) {
    memset(w, 0, sizeof *w);
    if (batch < 0 && preset && !kvf_bench_preset_known(preset))
        return kvf_error_set(err, KVF_EINVAL, "unknown preset \"%s\" (seed, sweep or mixed)",
                             preset);
    int oom = 0;
    char name[48];
    if (batch >= 0) {
        snprintf(name, sizeof name, "b%lld-l%lld", (long long)batch, (long long)len);
        oom |= add_uniform(w, name, (int32_t)batch, (int32_t)len);
    } else if (!preset || strcmp(preset, "seed") == 0) {
        /* The seed case file's length (corpus/seeds/00-seed-h20kv4.kvfz): 51 pages of 64, the
         * last holding 2 tokens, so the benchmark and the case file are one workload. */
        oom |= add_uniform(w, "seed", 1, 50 * 64 + 2);
    } else if (strcmp(preset, "sweep") == 0) {
        static const int32_t bs[] = {1, 8, 32, 128}, ls[] = {512, 4096, 32768};
        for (int i = 0; i < 4 && !oom; i++)
            for (int j = 0; j < 3 && !oom; j++) {
                snprintf(name, sizeof name, "b%d-l%d", bs[i], ls[j]);
                oom |= add_uniform(w, name, bs[i], ls[j]);
            }
    } else {
        oom |= add_mixed(w, seed);
    }
    if (!oom) return 0;
    kvf_bench_workloads_free(w);
    return kvf_error_set(err, KVF_ENOMEM, "out of host memory.");
}

void kvf_bench_workloads_free(kvf_bench_workloads *w) {
    for (int i = 0; i < w->count; i++)
        free(w->items[i].lens);
    free(w->items);
    memset(w, 0, sizeof *w);
}

int32_t kvf_bench_workload_max_len(const kvf_bench_workload *w) {
    int32_t maxlen = 0;
    for (int32_t b = 0; b < w->batch; b++)
        if (w->lens[b] > maxlen) maxlen = w->lens[b];
    return maxlen;
}

/* kv_indptr and kv_last_page_len from the lengths; *pages the pages the sequences use. */
static int page_lengths(kvf_case *c, const kvf_bench_workload *w, int64_t *pages, kvf_error *err) {
    const int32_t B = w->batch, S = c->page_size;
    c->kv_indptr = malloc(sizeof(int32_t) * (size_t)(B + 1));
    c->kv_last_page_len = malloc(sizeof(int32_t) * (size_t)(B > 0 ? B : 1));
    if (!c->kv_indptr || !c->kv_last_page_len)
        return kvf_error_set(err, KVF_ENOMEM, "out of host memory for workload %s", w->name);
    int64_t total_pages = 0;
    c->kv_indptr[0] = 0;
    for (int32_t b = 0; b < B; b++) {
        int32_t len = w->lens[b];
        int32_t n = len == 0 ? 0 : (len + S - 1) / S;
        c->kv_last_page_len[b] = len == 0 ? 0 : len - (n - 1) * S;
        total_pages += n;
        if (total_pages > INT32_MAX)
            return kvf_error_set(err, KVF_ELIMIT, "workload %s needs more than 2^31-1 pages.",
                                 w->name);
        c->kv_indptr[b + 1] = (int32_t)total_pages;
    }
    *pages = total_pages;
    return 0;
}

int kvf_bench_case_build(kvf_case *c, const kvf_bench_workload *w, const kvf_bench_shape *shape,
                         uint64_t seed, int first, kvf_error *err) {
    memset(c, 0, sizeof *c);
    c->num_qo_heads = shape->hq, c->num_kv_heads = shape->hk, c->head_dim = shape->d;
    c->page_size = shape->s;
    c->batch_size = w->batch;
    c->sm_scale = (float)(1.0 / sqrt((double)shape->d));
    int64_t pages = 0;
    int rc = page_lengths(c, w, &pages, err);
    if (rc) {
        kvf_case_free(c);
        return rc;
    }
    const int64_t pool_pages = pages + 1; /* one unreferenced page */
    c->num_pages = pool_pages;
    c->kv_indices = malloc(sizeof(int32_t) * (size_t)(pages > 0 ? pages : 1));
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)pool_pages);
    c->q = malloc(sizeof(kvf_bf16) * (size_t)(kvf_case_q_elems(c) > 0 ? kvf_case_q_elems(c) : 1));
    if (!c->kv_indices || !perm || !c->q) {
        free(perm);
        kvf_case_free(c);
        return kvf_error_set(err, KVF_ENOMEM, "out of host memory for workload %s", w->name);
    }
    uint64_t st = seed * 0x9e3779b97f4a7c15ull + (uint64_t)first;
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
    /* FP8 caches: both K and V in the shape's dtype, the device fills them with values up to
     * 240 (kvf_cuda_fill_fp8), and scales near 1/240 bring them back to about U(-1, 1). */
    if (kvf_kv_dtype_is_fp8(shape->kv_dtype)) {
        kvf_kv_quant qt = {(uint8_t)shape->kv_dtype, (uint8_t)shape->kv_dtype,
                           (uint8_t)shape->scale_gran};
        kvf_limits lim;
        kvf_limits_default(&lim);
        rc = kvf_case_set_quant(c, &qt, &lim, err);
        if (rc) {
            kvf_case_free(c);
            return rc;
        }
        const int64_t n = kvf_case_scale_count(c);
        uint64_t ss = seed * 3 + 4;
        for (int64_t i = 0; i < n; i++) {
            const double u = (double)(splitmix(&ss) >> 11) / 9007199254740992.0;
            c->k_scale[i] = (float)((1.0 + 0.25 * u) / 240.0);
            c->v_scale[i] = (float)((1.25 - 0.25 * u) / 240.0);
        }
    }
    /* q ~ U(-1, 1) like K and V: logits of order 0.3 with the default scale. */
    uint64_t qs = seed * 3 + 3;
    for (int64_t i = 0; i < kvf_case_q_elems(c); i++)
        c->q[i] =
            kvf_f32_to_bf16_rne((float)((double)(splitmix(&qs) >> 11) / 4503599627370496.0 - 1.0));
    return 0;
}
