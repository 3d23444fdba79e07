#include "kvfuzz/case.h"

#include "case_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void kvf_limits_default(kvf_limits *limits) {
    limits->max_batch = 4096;
    limits->max_qo_heads = 255;
    limits->max_head_dim = 1024;
    limits->max_page_size = 1024;
    limits->max_pool_pages = INT32_MAX;
    limits->max_table_entries = 1 << 22;
    limits->max_tokens = 1 << 24;
    limits->max_pool_bytes = (int64_t)8 << 30;
    limits->max_resident_bytes = (int64_t)1 << 30;
    limits->max_memory_bytes = 0; /* the budgets' defaults (cost.c, kvf_case_cost) */
    limits->max_work = 0;
}

/* Large caches are reserved, not committed: an 8 GiB pool whose few referenced pages are
 * written costs only those pages. Anonymous mappings read as zero until written. Small ones
 * (most generated cases) come from the heap instead: a fresh mapping per case costs two system
 * calls and a fault per OS page, which for a pool of a few pages is most of building it. The
 * size alone says which (kvf_case_free). */
static void *reserve(size_t bytes, int zero) {
    if (bytes == 0) return NULL;
    if (bytes <= KVF_CASE_HEAP_POOL_BYTES) return zero ? calloc(1, bytes) : malloc(bytes);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void release_reserved(void *p, size_t bytes) {
    if (!p || !bytes) return;
    if (bytes <= KVF_CASE_HEAP_POOL_BYTES)
        free(p);
    else
        munmap(p, bytes);
}

static int check_shape(int32_t hq, int32_t hk, int32_t d, int32_t s, int32_t batch,
                       const kvf_limits *lim, kvf_error *err) {
    if (hq < 1)
        return kvf_error_set(err, KVF_EINVAL, "num_qo_heads must be at least 1, got %d", hq);
    if (hq > lim->max_qo_heads)
        return kvf_error_set(err, KVF_ELIMIT, "num_qo_heads %d exceeds the limit of %d", hq,
                             lim->max_qo_heads);
    if (hk < 1)
        return kvf_error_set(err, KVF_EINVAL, "num_kv_heads must be at least 1, got %d", hk);
    if (hq % hk != 0)
        return kvf_error_set(err, KVF_EINVAL,
                             "num_qo_heads %d is not a multiple of num_kv_heads %d", hq, hk);
    if (d < 1) return kvf_error_set(err, KVF_EINVAL, "head_dim must be at least 1, got %d", d);
    if (d > lim->max_head_dim)
        return kvf_error_set(err, KVF_ELIMIT, "head_dim %d exceeds the limit of %d", d,
                             lim->max_head_dim);
    if (s < 1) return kvf_error_set(err, KVF_EINVAL, "page_size must be at least 1, got %d", s);
    if (s > lim->max_page_size)
        return kvf_error_set(err, KVF_ELIMIT, "page_size %d exceeds the limit of %d", s,
                             lim->max_page_size);
    if (batch < 0)
        return kvf_error_set(err, KVF_EINVAL, "batch_size must not be negative, got %d", batch);
    if (batch > lim->max_batch)
        return kvf_error_set(err, KVF_ELIMIT, "batch_size %d exceeds the limit of %d", batch,
                             lim->max_batch);
    return 0;
}

static int check_pool(int64_t num_pages, int64_t page_elems, const kvf_limits *lim,
                      kvf_error *err) {
    if (num_pages < 0)
        return kvf_error_set(err, KVF_EINVAL, "num_pages must not be negative, got %lld",
                             (long long)num_pages);
    if (num_pages > lim->max_pool_pages || num_pages > (int64_t)INT32_MAX + 1)
        return kvf_error_set(err, KVF_ELIMIT, "num_pages %lld exceeds the limit of %lld",
                             (long long)num_pages, (long long)lim->max_pool_pages);
    /* page_elems <= 1024*255*1024 < 2^28 and num_pages <= 2^31: the product fits in int64. */
    int64_t bytes = num_pages * page_elems * 2;
    if (bytes > lim->max_pool_bytes)
        return kvf_error_set(err, KVF_ELIMIT,
                             "the page pool needs %lld bytes per cache, past the limit of %lld",
                             (long long)bytes, (long long)lim->max_pool_bytes);
    return 0;
}

int kvf_case_alloc(kvf_case *out, int32_t hq, int32_t hk, int32_t d, int32_t s, int32_t batch,
                   int64_t table_entries, int64_t num_pages, const kvf_limits *lim,
                   kvf_error *err) {
    return kvf__case_alloc(out, hq, hk, d, s, batch, table_entries, num_pages, 1, lim, err);
}

int kvf__case_alloc(kvf_case *out, int32_t hq, int32_t hk, int32_t d, int32_t s, int32_t batch,
                    int64_t table_entries, int64_t num_pages, int zero_caches,
                    const kvf_limits *lim, kvf_error *err) {
    memset(out, 0, sizeof *out);
    int rc = check_shape(hq, hk, d, s, batch, lim, err);
    if (rc) return rc;
    if (table_entries < 0 || table_entries > lim->max_table_entries)
        return kvf_error_set(err, table_entries < 0 ? KVF_EINVAL : KVF_ELIMIT,
                             "the page table has %lld entries, outside [0, %lld]",
                             (long long)table_entries, (long long)lim->max_table_entries);
    int64_t page_elems = (int64_t)s * hk * d;
    rc = check_pool(num_pages, page_elems, lim, err);
    if (rc) return rc;
    int64_t q_bytes = (int64_t)batch * hq * d * 2;
    if (q_bytes > lim->max_resident_bytes)
        return kvf_error_set(err, KVF_ELIMIT, "q needs %lld bytes, past the resident limit of %lld",
                             (long long)q_bytes, (long long)lim->max_resident_bytes);

    out->num_qo_heads = hq;
    out->num_kv_heads = hk;
    out->head_dim = d;
    out->page_size = s;
    out->batch_size = batch;
    out->num_pages = num_pages;
    out->sm_scale = (float)(1.0 / sqrt((double)d));
    out->kv_indptr = calloc((size_t)batch + 1, sizeof(int32_t));
    out->kv_indices = calloc(table_entries ? (size_t)table_entries : 1, sizeof(int32_t));
    out->kv_last_page_len = calloc(batch ? (size_t)batch : 1, sizeof(int32_t));
    out->q = calloc(q_bytes ? (size_t)q_bytes / 2 : 1, sizeof(kvf_bf16));
    out->pool_bytes = (size_t)(num_pages * page_elems * 2);
    out->k_cache = reserve(out->pool_bytes, zero_caches);
    out->v_cache = reserve(out->pool_bytes, zero_caches);
    if (!out->kv_indptr || !out->kv_indices || !out->kv_last_page_len || !out->q ||
        (out->pool_bytes && (!out->k_cache || !out->v_cache))) {
        kvf_case_free(out);
        return kvf_error_set(err, KVF_ENOMEM, "could not allocate a case of %lld pool bytes",
                             (long long)num_pages * page_elems * 2);
    }
    out->kv_indptr[batch] = (int32_t)table_entries;
    return 0;
}

int kvf__case_scale_limit(int64_t n, const kvf_limits *lim, kvf_error *err) {
    if (n > KVF_CASE_MAX_SCALES || n * 4 > lim->max_pool_bytes)
        return kvf_error_set(err, KVF_ELIMIT,
                             "per-token scales of %lld page slots and KV heads are past the limit "
                             "of %lld (2^24, or max_pool_bytes / 4)",
                             (long long)n, (long long)KVF_CASE_MAX_SCALES);
    return 0;
}

int kvf_case_set_quant(kvf_case *c, const kvf_kv_quant *quant, const kvf_limits *lim,
                       kvf_error *err) {
    int rc = kvf_kv_quant_check(quant, err);
    if (rc) return rc;
    c->quant = *quant;
    int64_t n = kvf_case_scale_count(c);
    if ((rc = kvf__case_scale_limit(n, lim, err))) return rc;
    if (!n) return 0;
    c->scale_bytes = (size_t)n * sizeof(float);
    c->k_scale = reserve(c->scale_bytes, 1);
    c->v_scale = reserve(c->scale_bytes, 1);
    if (!c->k_scale || !c->v_scale)
        return kvf_error_set(err, KVF_ENOMEM, "could not allocate two %zu-byte scale arrays",
                             c->scale_bytes);
    return 0;
}

/* The values and scales a sequence reads, for quantized caches: element images of the
 * dtype's bytes, scales finite and positive. */
static int check_quant_values(const kvf_case *c, kvf_error *err) {
    int rc = kvf_kv_quant_check(&c->quant, err);
    if (rc || kvf_kv_quant_is_plain(&c->quant)) return rc;
    if (kvf_case_scale_count(c) > 0 && (!c->k_scale || !c->v_scale))
        return kvf_error_set(err, KVF_EINVAL, "the case has a scale granularity but no scales");
    const int dts[2] = {c->quant.k_dtype, c->quant.v_dtype};
    const kvf_bf16 *caches[2] = {c->k_cache, c->v_cache};
    const float *scales[2] = {c->k_scale, c->v_scale};
    static const char *const names[2] = {"k", "v"};
    for (int32_t b = 0; b < c->batch_size; b++) {
        int64_t len = kvf_case_seq_len(c, b);
        for (int64_t t = 0; t < len; t++) {
            for (int32_t g = 0; g < c->num_kv_heads; g++) {
                for (int w = 0; w < 2; w++) {
                    if (c->quant.granularity) {
                        float sc = scales[w][kvf_case_scale_index(c, b, t, g)];
                        if (!(isfinite(sc) && sc > 0))
                            return kvf_error_set(err, KVF_EINVAL,
                                                 "%s_scale of sequence %d token %lld kv head %d is "
                                                 "%g, not finite and positive",
                                                 names[w], b, (long long)t, g, (double)sc);
                    }
                    if (!kvf_kv_dtype_is_fp8(dts[w])) continue;
                    const kvf_bf16 *row = caches[w] + kvf_case_kv_offset(c, b, t, g, 0);
                    for (int32_t d = 0; d < c->head_dim; d++) {
                        uint8_t byte;
                        if (!kvf_fp8_from_bf16_exact(row[d], dts[w], &byte))
                            return kvf_error_set(
                                err, KVF_EINVAL,
                                "%s_cache of sequence %d token %lld kv head %d d %d holds bf16 "
                                "0x%04x, which is not an %s value",
                                names[w], b, (long long)t, g, d, row[d], kvf_kv_dtype_name(dts[w]));
                    }
                }
            }
        }
    }
    return 0;
}

int kvf_case_validate(const kvf_case *c, const kvf_limits *lim, kvf_error *err) {
    int rc = check_shape(c->num_qo_heads, c->num_kv_heads, c->head_dim, c->page_size, c->batch_size,
                         lim, err);
    if (rc) return rc;
    rc = kvf_layout_check(&c->layout, err);
    if (rc) return rc;
    kvf_strides st;
    kvf_layout_strides(&c->layout, c->num_qo_heads, c->num_kv_heads, c->head_dim, c->page_size,
                       &st);
    rc = check_pool(c->num_pages, st.kv_page, lim, err);
    if (rc) return rc;
    if (!isfinite(c->sm_scale))
        return kvf_error_set(err, KVF_EINVAL, "sm_scale must be finite, got %g",
                             (double)c->sm_scale);
    if (c->kv_indptr[0] != 0)
        return kvf_error_set(err, KVF_EINVAL, "kv_indptr[0] must be 0, got %d", c->kv_indptr[0]);
    int64_t tokens = 0;
    for (int32_t b = 0; b < c->batch_size; b++) {
        int32_t lo = c->kv_indptr[b], hi = c->kv_indptr[b + 1];
        if (hi < lo)
            return kvf_error_set(err, KVF_EINVAL, "kv_indptr decreases at sequence %d (%d then %d)",
                                 b, lo, hi);
        int32_t last = c->kv_last_page_len[b];
        if (hi > lo && (last < 1 || last > c->page_size))
            return kvf_error_set(err, KVF_EINVAL,
                                 "kv_last_page_len[%d] = %d is outside [1, page_size %d]", b, last,
                                 c->page_size);
        if (hi == lo && last != 0)
            return kvf_error_set(
                err, KVF_EINVAL,
                "kv_last_page_len[%d] = %d but sequence %d has no pages (must be 0)", b, last, b);
        if (hi > lo) tokens += (int64_t)(hi - lo - 1) * c->page_size + last;
    }
    int64_t entries = c->kv_indptr[c->batch_size];
    if (entries > lim->max_table_entries)
        return kvf_error_set(err, KVF_ELIMIT,
                             "the page table has %lld entries, past the limit of %lld",
                             (long long)entries, (long long)lim->max_table_entries);
    if (tokens > lim->max_tokens)
        return kvf_error_set(err, KVF_ELIMIT, "the case has %lld tokens, past the limit of %lld",
                             (long long)tokens, (long long)lim->max_tokens);
    for (int64_t i = 0; i < entries; i++) {
        int32_t id = c->kv_indices[i];
        if (id < 0 || id >= c->num_pages)
            return kvf_error_set(err, KVF_EINVAL,
                                 "kv_indices[%lld] = %d is outside the page pool [0, %lld)",
                                 (long long)i, id, (long long)c->num_pages);
    }
    return check_quant_values(c, err);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int kvf_case_set_resident(kvf_case *c, const int64_t *extra, int64_t num_extra, kvf_error *err) {
    int64_t entries = c->kv_indptr[c->batch_size];
    int64_t n = entries + num_extra;
    int64_t *pages = malloc((size_t)(n ? n : 1) * sizeof *pages);
    int64_t *table = malloc((size_t)(entries ? entries : 1) * sizeof *table);
    if (!pages || !table) {
        free(pages);
        free(table);
        return kvf_error_set(err, KVF_ENOMEM, "could not allocate the resident page list");
    }
    for (int64_t i = 0; i < entries; i++)
        table[i] = c->kv_indices[i];
    qsort(table, (size_t)entries, sizeof *table, cmp_i64);
    int extra_sorted = 1;
    for (int64_t i = 1; i < num_extra && extra_sorted; i++)
        extra_sorted = extra[i - 1] <= extra[i];
    if (extra_sorted) {
        /* The generator's extra pages come ascending (all the unreferenced pages of a small
         * pool, up to millions): merged with the sorted table, not sorted again. */
        int64_t i = 0, j = 0, k = 0;
        while (i < entries || j < num_extra)
            pages[k++] =
                j == num_extra || (i < entries && table[i] <= extra[j]) ? table[i++] : extra[j++];
    } else {
        memcpy(pages, table, (size_t)entries * sizeof *pages);
        for (int64_t i = 0; i < num_extra; i++)
            pages[entries + i] = extra[i];
        qsort(pages, (size_t)n, sizeof *pages, cmp_i64);
    }
    free(table);
    int64_t unique = 0;
    for (int64_t i = 0; i < n; i++)
        if (unique == 0 || pages[unique - 1] != pages[i]) pages[unique++] = pages[i];
    free(c->resident_pages);
    c->resident_pages = pages;
    c->num_resident_pages = unique;
    return 0;
}

void kvf_case_free(kvf_case *c) {
    if (!c) return;
    free(c->kv_indptr);
    free(c->kv_indices);
    free(c->kv_last_page_len);
    free(c->q);
    release_reserved(c->k_cache, c->pool_bytes);
    release_reserved(c->v_cache, c->pool_bytes);
    free(c->resident_pages);
    release_reserved(c->k_scale, c->scale_bytes);
    release_reserved(c->v_scale, c->scale_bytes);
    memset(c, 0, sizeof *c);
}

int64_t kvf_case_total_tokens(const kvf_case *c) {
    int64_t t = 0;
    for (int32_t b = 0; b < c->batch_size; b++)
        t += kvf_case_seq_len(c, b);
    return t;
}

int64_t kvf_case_max_seq_len(const kvf_case *c) {
    int64_t m = 0;
    for (int32_t b = 0; b < c->batch_size; b++) {
        int64_t l = kvf_case_seq_len(c, b);
        if (l > m) m = l;
    }
    return m;
}
