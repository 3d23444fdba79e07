/* The .kvfz v1 codec (layout in docs/case-format.md) and spec housekeeping.
 *
 * The decoder reads through a bounds-checked cursor: every read names the field it wants, so a
 * truncated or malformed file is rejected with a sentence naming the first field that does not
 * fit. Reserved bytes must be zero and nothing may follow the last section, which makes the
 * encoding canonical (encode(decode(b)) == b). */
#include "kvfuzz/spec.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvfuzz/env.h"
#include "kvfuzz/file.h"

#define HEADER_MAGIC "KVFZ"
#define SECTION_OVERRIDES 0x01u
#define SECTION_EXPLICIT 0x02u
#define SECTION_ORIGIN 0x04u
#define OVERRIDE_RECORD_BYTES 13u

typedef struct reader {
    const uint8_t *p;
    size_t left;
    size_t offset;
    kvf_error *err;
} reader;

static int need(reader *r, size_t n, const char *field) {
    if (r->left < n)
        return kvf_error_set(r->err, KVF_EFORMAT,
                             "the file ends inside %s (byte %zu needs %zu more bytes, %zu left)",
                             field, r->offset, n, r->left);
    return 0;
}

static void advance(reader *r, size_t n) {
    r->p += n;
    r->left -= n;
    r->offset += n;
}

static int read_u8(reader *r, uint8_t *v, const char *field) {
    int rc = need(r, 1, field);
    if (rc) return rc;
    *v = r->p[0];
    advance(r, 1);
    return 0;
}

static int read_u16(reader *r, uint16_t *v, const char *field) {
    int rc = need(r, 2, field);
    if (rc) return rc;
    *v = (uint16_t)(r->p[0] | (r->p[1] << 8));
    advance(r, 2);
    return 0;
}

static int read_u32(reader *r, uint32_t *v, const char *field) {
    int rc = need(r, 4, field);
    if (rc) return rc;
    *v = (uint32_t)r->p[0] | ((uint32_t)r->p[1] << 8) | ((uint32_t)r->p[2] << 16) |
         ((uint32_t)r->p[3] << 24);
    advance(r, 4);
    return 0;
}

static int read_u64(reader *r, uint64_t *v, const char *field) {
    uint32_t lo, hi;
    int rc = read_u32(r, &lo, field);
    if (rc) return rc;
    rc = read_u32(r, &hi, field);
    if (rc) return rc;
    *v = ((uint64_t)hi << 32) | lo;
    return 0;
}

static int read_zero(reader *r, size_t n, const char *field) {
    int rc = need(r, n, field);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++)
        if (r->p[i])
            return kvf_error_set(r->err, KVF_EFORMAT, "%s at byte %zu must be zero, got 0x%02x",
                                 field, r->offset + i, r->p[i]);
    advance(r, n);
    return 0;
}

static int read_bf16_array(reader *r, kvf_bf16 *dst, int64_t n, const char *field) {
    int rc = need(r, (size_t)n * 2, field);
    if (rc) return rc;
    for (int64_t i = 0; i < n; i++)
        dst[i] = (kvf_bf16)(r->p[2 * i] | (r->p[2 * i + 1] << 8));
    advance(r, (size_t)n * 2);
    return 0;
}

typedef struct writer {
    uint8_t *p;
    size_t size, cap;
    int failed;
} writer;

static void put(writer *w, const void *src, size_t n) {
    if (w->failed) return;
    if (w->size + n > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->size + n)
            cap *= 2;
        uint8_t *p = realloc(w->p, cap);
        if (!p) {
            w->failed = 1;
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    memcpy(w->p + w->size, src, n);
    w->size += n;
}

static void put_u8(writer *w, uint8_t v) {
    put(w, &v, 1);
}
static void put_u16(writer *w, uint16_t v) {
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(w, b, 2);
}
static void put_u32(writer *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(w, b, 4);
}
static void put_u64(writer *w, uint64_t v) {
    put_u32(w, (uint32_t)v);
    put_u32(w, (uint32_t)(v >> 32));
}
static void put_bf16_array(writer *w, const kvf_bf16 *src, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        put_u16(w, src[i]);
}

/* ---- budgets (docs/case-format.md, "Budgets") ------------------------------------------- */

void kvf_recipe_cost(const kvf_recipe *rp, kvf_case_cost *out) {
    /* Every factor is bounded by the recipe's field widths (B < 2^16, Hq, Hk < 2^8, D, S < 2^16,
     * pages per sequence < 2^16), so no product below leaves int64. */
    const int64_t hq = rp->num_qo_heads, hk = rp->num_kv_heads ? rp->num_kv_heads : 1;
    const int64_t d = rp->head_dim, s = rp->page_size, b = rp->batch_size;
    const int64_t g = hq / hk > 0 ? hq / hk : 1;
    int64_t tokens = 0, longest = 0, entries = 0;
    for (uint32_t i = 0; i < rp->batch_size; i++) {
        int64_t n = rp->num_pages[i];
        int64_t len = n ? (n - 1) * s + rp->last_page_len[i] : 0;
        tokens += len;
        entries += n;
        if (len > longest) longest = len;
    }
    const int64_t rows = b * hq, elems = rows * d, page_bytes = s * hk * d * 2;
    /* Referenced pages (at most one per table entry), their spares and the poisoned
     * neighbours of a sparse pool (at most 64), in both caches. */
    int64_t pages = entries + rp->spare_pages + 64;
    int64_t tensors = elems * 2 + (entries + 3 * b + 1) * 4 + pages * page_bytes * 2;
    out->tensor_bytes = 2 * tensors;
    out->oracle_bytes = elems * KVF_ORACLE_ELEM_BYTES + rows * KVF_ORACLE_ROW_BYTES +
                        KVF_ORACLE_THREAD_BYTES(longest, g) + d * 256;
    out->kernel_bytes = 2 * (elems * 2 + rows * 4) + elems * 8 + longest * 16;
    out->memory_bytes = out->tensor_bytes + out->oracle_bytes + out->kernel_bytes;
    out->work = hq * (tokens * (d + 64) + b * d);
}

int kvf_limits_budgets(const kvf_limits *lim, int64_t *max_memory, int64_t *max_work,
                       kvf_error *err) {
    int64_t mib = KVF_DEFAULT_MAX_MEMORY_BYTES >> 20, work = KVF_DEFAULT_MAX_WORK;
    int rc = 0;
    /* The environment table (env.c) says what each accepts; unset or empty is the default. */
    if (lim->max_memory_bytes <= 0) rc = kvf_env_int("KVF_MAX_MEMORY_MIB", mib, &mib, err);
    if (!rc && lim->max_work <= 0) rc = kvf_env_int("KVF_MAX_WORK", work, &work, err);
    if (rc) return rc;
    *max_memory = lim->max_memory_bytes > 0 ? lim->max_memory_bytes : mib << 20;
    *max_work = lim->max_work > 0 ? lim->max_work : work;
    return 0;
}

static double gib(int64_t bytes) {
    return (double)bytes / (double)((int64_t)1 << 30);
}

int kvf_explicit_pool_budget(const kvf_recipe *rp, int64_t pool, const kvf_limits *lim,
                             kvf_error *err) {
    /* The explicit pool is held twice (the spec and the case) on top of the recipe's estimate,
     * which counts only referenced pages. */
    int64_t max_memory = 0, max_work = 0;
    int rc = kvf_limits_budgets(lim, &max_memory, &max_work, err);
    if (rc) return rc;
    kvf_case_cost cost;
    kvf_recipe_cost(rp, &cost);
    int64_t page_elems = (int64_t)rp->page_size * rp->num_kv_heads * rp->head_dim;
    int64_t explicit_bytes = pool * page_elems * 2 * 2 * 2;
    if (cost.memory_bytes + explicit_bytes > max_memory)
        return kvf_error_set(err, KVF_ELIMIT,
                             "the case with its explicit pool of %lld pages needs about %.2f GiB, "
                             "past the memory budget of %.2f GiB (KVF_MAX_MEMORY_MIB raises it)",
                             (long long)pool, gib(cost.memory_bytes + explicit_bytes),
                             gib(max_memory));
    return 0;
}

static int check_budgets(const kvf_recipe *rp, const kvf_limits *lim, kvf_error *err) {
    int64_t max_memory, max_work;
    int rc = kvf_limits_budgets(lim, &max_memory, &max_work, err);
    if (rc) return rc;
    kvf_case_cost c;
    kvf_recipe_cost(rp, &c);
    if (c.memory_bytes > max_memory)
        return kvf_error_set(err, KVF_ELIMIT,
                             "the case needs about %.2f GiB (tensors %.2f, oracle %.2f, kernel "
                             "buffers %.2f), past the memory budget of %.2f GiB "
                             "(KVF_MAX_MEMORY_MIB raises it)",
                             gib(c.memory_bytes), gib(c.tensor_bytes), gib(c.oracle_bytes),
                             gib(c.kernel_bytes), gib(max_memory));
    if (c.work > max_work)
        return kvf_error_set(err, KVF_ELIMIT,
                             "the case needs %lld units of oracle work, past the work budget of "
                             "%lld (KVF_MAX_WORK raises it)",
                             (long long)c.work, (long long)max_work);
    return 0;
}

/* Shared by the decoder and kvf_case_build (for hand-made specs): the recipe's own domain. */
int kvf_recipe_check(const kvf_recipe *rp, const kvf_limits *lim, kvf_error *err) {
    if (rp->expansion > KVF_EXPANSION_2)
        return kvf_error_set(err, KVF_EINVAL, "expansion %u is not one of the 2 known",
                             rp->expansion);
    if (rp->num_qo_heads < 1 || rp->num_kv_heads < 1)
        return kvf_error_set(err, KVF_EINVAL,
                             "num_qo_heads (%u) and num_kv_heads (%u) must be at least 1",
                             rp->num_qo_heads, rp->num_kv_heads);
    if (rp->num_qo_heads % rp->num_kv_heads)
        return kvf_error_set(err, KVF_EINVAL,
                             "num_qo_heads %u is not a multiple of num_kv_heads %u",
                             rp->num_qo_heads, rp->num_kv_heads);
    if (rp->num_qo_heads > lim->max_qo_heads)
        return kvf_error_set(err, KVF_ELIMIT, "num_qo_heads %u exceeds the limit of %d",
                             rp->num_qo_heads, lim->max_qo_heads);
    if (rp->head_dim < 1 || rp->head_dim > lim->max_head_dim)
        return kvf_error_set(err, rp->head_dim < 1 ? KVF_EINVAL : KVF_ELIMIT,
                             "head_dim %u is outside [1, %d]", rp->head_dim, lim->max_head_dim);
    if (rp->page_size < 1 || rp->page_size > lim->max_page_size)
        return kvf_error_set(err, rp->page_size < 1 ? KVF_EINVAL : KVF_ELIMIT,
                             "page_size %u is outside [1, %d]", rp->page_size, lim->max_page_size);
    if (rp->batch_size > lim->max_batch)
        return kvf_error_set(err, KVF_ELIMIT, "batch_size %u exceeds the limit of %d",
                             rp->batch_size, lim->max_batch);
    if (rp->table >= KVF_TABLE_COUNT)
        return kvf_error_set(err, KVF_EINVAL, "page-table strategy %u is not one of the %d known",
                             rp->table, KVF_TABLE_COUNT);
    if (rp->logits >= KVF_LOGITS_COUNT)
        return kvf_error_set(err, KVF_EINVAL, "logit pattern %u is not one of the %d known",
                             rp->logits, KVF_LOGITS_COUNT);
    if (rp->poison & ~KVF_POISON_ALL)
        return kvf_error_set(err, KVF_EINVAL, "poison flags 0x%02x use undefined bits", rp->poison);
    if (rp->table != KVF_TABLE_HIGH_IDS && rp->page_id_base != 0)
        return kvf_error_set(err, KVF_EINVAL,
                             "page_id_base is %u but only the high-ids table uses it (must be 0)",
                             rp->page_id_base);
    if (rp->page_id_base > (uint32_t)INT32_MAX)
        return kvf_error_set(err, KVF_EINVAL, "page_id_base %u is past the int32 page-id range",
                             rp->page_id_base);
    if (!isfinite(rp->sm_scale))
        return kvf_error_set(err, KVF_EINVAL, "sm_scale must be finite, got %g",
                             (double)rp->sm_scale);
    const kvf_dist *dists[3] = {&rp->q, &rp->k, &rp->v};
    const char *names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        if (dists[i]->kind >= KVF_DIST_COUNT)
            return kvf_error_set(err, KVF_EINVAL, "%s distribution %u is not one of the %d known",
                                 names[i], dists[i]->kind, KVF_DIST_COUNT);
        if (dists[i]->log2_scale < -126)
            return kvf_error_set(err, KVF_EINVAL, "%s scale exponent %d is below -126", names[i],
                                 dists[i]->log2_scale);
    }
    int64_t pages = 0, tokens = 0;
    for (uint32_t b = 0; b < rp->batch_size; b++) {
        uint16_t n = rp->num_pages[b], last = rp->last_page_len[b];
        if (n == 0 && last != 0)
            return kvf_error_set(err, KVF_EINVAL,
                                 "sequence %u has no pages but last_page_len %u (must be 0)", b,
                                 last);
        if (n > 0 && (last < 1 || last > rp->page_size))
            return kvf_error_set(err, KVF_EINVAL,
                                 "sequence %u's last_page_len %u is outside [1, page_size %u]", b,
                                 last, rp->page_size);
        pages += n;
        if (n) tokens += (int64_t)(n - 1) * rp->page_size + last;
    }
    if (pages > lim->max_table_entries)
        return kvf_error_set(err, KVF_ELIMIT,
                             "the page table has %lld entries, past the limit of %lld",
                             (long long)pages, (long long)lim->max_table_entries);
    if (tokens > lim->max_tokens)
        return kvf_error_set(err, KVF_ELIMIT, "the case has %lld tokens, past the limit of %lld",
                             (long long)tokens, (long long)lim->max_tokens);
    return check_budgets(rp, lim, err);
}

static int64_t recipe_table_entries(const kvf_recipe *rp) {
    int64_t n = 0;
    for (uint32_t b = 0; b < rp->batch_size; b++)
        n += rp->num_pages[b];
    return n;
}

void kvf_spec_free(kvf_spec *s) {
    if (!s) return;
    free(s->recipe.num_pages);
    free(s->recipe.last_page_len);
    free(s->overrides);
    free(s->explicit_tensors.kv_indices);
    free(s->explicit_tensors.q);
    free(s->explicit_tensors.k_cache);
    free(s->explicit_tensors.v_cache);
    memset(s, 0, sizeof *s);
}

int kvf_spec_set_batch(kvf_spec *s, uint16_t batch, kvf_error *err) {
    kvf_recipe *rp = &s->recipe;
    uint16_t *np = realloc(rp->num_pages, (batch ? batch : 1) * sizeof *np);
    if (!np) return kvf_error_set(err, KVF_ENOMEM, "could not allocate the sequence list");
    rp->num_pages = np;
    uint16_t *nl = realloc(rp->last_page_len, (batch ? batch : 1) * sizeof *nl);
    if (!nl) return kvf_error_set(err, KVF_ENOMEM, "could not allocate the sequence list");
    rp->last_page_len = nl;
    for (uint32_t b = rp->batch_size; b < batch; b++) {
        np[b] = 1;
        nl[b] = rp->page_size ? rp->page_size : 1;
    }
    rp->batch_size = batch;
    return 0;
}

int64_t kvf_recipe_seq_len(const kvf_recipe *rp, uint32_t b) {
    return rp->num_pages[b] ? (int64_t)(rp->num_pages[b] - 1) * rp->page_size + rp->last_page_len[b]
                            : 0;
}

void kvf_recipe_set_seq_len(kvf_recipe *rp, uint32_t b, int64_t len) {
    if (len <= 0) {
        rp->num_pages[b] = 0;
        rp->last_page_len[b] = 0;
        return;
    }
    int64_t s = rp->page_size, n = (len + s - 1) / s;
    if (n > 65535) n = 65535, len = n * s;
    rp->num_pages[b] = (uint16_t)n;
    rp->last_page_len[b] = (uint16_t)(len - (n - 1) * s);
}

static int decode_dist(reader *r, kvf_dist *d, const char *field) {
    uint8_t scale = 0;
    int rc = read_u8(r, &d->kind, field);
    if (!rc) rc = read_u8(r, &scale, field);
    if (!rc) rc = read_u8(r, &d->param, field);
    d->log2_scale = (int8_t)scale;
    return rc;
}

static int name_char_ok(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '.' || ch == '-';
}

int kvf_origin_name_ok(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if (!name_char_ok(s[n])) return 0;
    return n >= 1 && n <= KVF_ORIGIN_NAME_MAX;
}

/* A length byte (1..KVF_ORIGIN_NAME_MAX) and that many name characters. */
static int decode_name(reader *r, char *dst, const char *field) {
    uint8_t n;
    int rc = read_u8(r, &n, field);
    if (rc) return rc;
    if (n < 1 || n > KVF_ORIGIN_NAME_MAX)
        return kvf_error_set(r->err, KVF_EFORMAT, "%s at byte %zu has length %u, outside [1, %d]",
                             field, r->offset - 1, n, KVF_ORIGIN_NAME_MAX);
    if ((rc = need(r, n, field))) return rc;
    /* Every one of the n bytes, a NUL included, must be a name character: a shorter string
     * would encode to other bytes. */
    for (uint8_t i = 0; i < n; i++)
        if (!name_char_ok((char)r->p[i]))
            return kvf_error_set(r->err, KVF_EFORMAT,
                                 "%s at byte %zu holds a character outside [A-Za-z0-9_.-]", field,
                                 r->offset + i);
    memcpy(dst, r->p, n);
    dst[n] = 0;
    advance(r, n);
    return 0;
}

static int decode_origin(reader *r, kvf_origin *o) {
    int rc;
    if ((rc = decode_name(r, o->definition, "the origin's definition name")) ||
        (rc = decode_name(r, o->workload_uuid, "the origin's workload uuid")) ||
        (rc = read_u8(r, &o->random_inputs, "the origin's random-input flags")))
        return rc;
    if (o->random_inputs & ~KVF_ORIGIN_RANDOM_ALL)
        return kvf_error_set(r->err, KVF_EFORMAT,
                             "the origin's random-input flags 0x%02x use undefined bits",
                             o->random_inputs);
    if ((rc = read_zero(r, 3, "the origin's reserved bytes")) ||
        (rc = read_u64(r, &o->random_seed, "the origin's random seed")))
        return rc;
    return 0;
}

int kvf_spec_decode(kvf_spec *out, const uint8_t *data, size_t size, const kvf_limits *lim,
                    kvf_error *err) {
    memset(out, 0, sizeof *out);
    reader r = {data, size, 0, err};
    kvf_recipe *rp = &out->recipe;
    int rc = need(&r, 4, "the magic number");
    if (rc) return rc;
    if (memcmp(r.p, HEADER_MAGIC, 4) != 0)
        return kvf_error_set(err, KVF_EFORMAT, "the file does not start with the magic \"KVFZ\"");
    advance(&r, 4);
    uint8_t version, sections;
    if ((rc = read_u8(&r, &version, "the version"))) return rc;
    /* The version names the expansion (docs/case-format.md); the layout is the same. */
    if (version != KVF_EXPANSION_1 && version != KVF_EXPANSION_2)
        return kvf_error_set(err, KVF_EFORMAT,
                             "format version %u is not supported (this reader knows versions 1 "
                             "and 2)",
                             version);
    rp->expansion = version;
    if ((rc = read_u8(&r, &sections, "the section flags"))) return rc;
    if (sections & ~(SECTION_OVERRIDES | SECTION_EXPLICIT | SECTION_ORIGIN))
        return kvf_error_set(err, KVF_EFORMAT, "section flags 0x%02x use undefined bits", sections);
    uint32_t scale_bits;
    uint16_t batch;
    if ((rc = read_zero(&r, 2, "the reserved header bytes")) ||
        (rc = read_u8(&r, &rp->num_qo_heads, "num_qo_heads")) ||
        (rc = read_u8(&r, &rp->num_kv_heads, "num_kv_heads")) ||
        (rc = read_u16(&r, &rp->head_dim, "head_dim")) ||
        (rc = read_u16(&r, &rp->page_size, "page_size")) ||
        (rc = read_u16(&r, &batch, "batch_size")) ||
        (rc = read_u8(&r, &rp->table, "the page-table strategy")) ||
        (rc = read_u8(&r, &rp->logits, "the logit pattern")) ||
        (rc = read_u8(&r, &rp->poison, "the poison flags")) ||
        (rc = read_zero(&r, 1, "the reserved recipe byte")) ||
        (rc = read_u32(&r, &rp->page_id_base, "page_id_base")) ||
        (rc = read_u16(&r, &rp->spare_pages, "spare_pages")) ||
        (rc = read_zero(&r, 2, "the reserved recipe bytes")) ||
        (rc = read_u32(&r, &scale_bits, "sm_scale")) ||
        (rc = decode_dist(&r, &rp->q, "the q distribution")) ||
        (rc = decode_dist(&r, &rp->k, "the k distribution")) ||
        (rc = decode_dist(&r, &rp->v, "the v distribution")) ||
        (rc = read_zero(&r, 3, "the reserved distribution bytes")) ||
        (rc = read_u64(&r, &rp->seed, "the seed")))
        goto fail;
    rp->sm_scale = kvf_f32_from_bits(scale_bits);
    if (batch > lim->max_batch) {
        rc = kvf_error_set(err, KVF_ELIMIT, "batch_size %u exceeds the limit of %d", batch,
                           lim->max_batch);
        goto fail;
    }
    if ((rc = need(&r, (size_t)batch * 4, "the per-sequence page counts"))) goto fail;
    if ((rc = kvf_spec_set_batch(out, batch, err))) goto fail;
    for (uint32_t b = 0; b < batch; b++) {
        read_u16(&r, &rp->num_pages[b], "a page count");
        read_u16(&r, &rp->last_page_len[b], "a last-page length");
    }
    if ((rc = kvf_recipe_check(rp, lim, err))) goto fail;

    if (sections & SECTION_OVERRIDES) {
        uint32_t n;
        if ((rc = read_u32(&r, &n, "the override count"))) goto fail;
        if (n == 0) {
            rc = kvf_error_set(err, KVF_EFORMAT,
                               "the overrides section is flagged but holds no overrides");
            goto fail;
        }
        if ((rc = need(&r, (size_t)n * OVERRIDE_RECORD_BYTES, "the overrides"))) goto fail;
        out->overrides = calloc(n, sizeof *out->overrides);
        if (!out->overrides) {
            rc = kvf_error_set(err, KVF_ENOMEM, "could not allocate %u overrides", n);
            goto fail;
        }
        out->num_overrides = n;
        for (uint32_t i = 0; i < n; i++) {
            kvf_override *o = &out->overrides[i];
            read_u8(&r, &o->target, "an override target");
            read_u64(&r, &o->index, "an override index");
            read_u32(&r, &o->value, "an override value");
            if (o->target < KVF_OVERRIDE_TABLE_ENTRY || o->target > KVF_OVERRIDE_V) {
                rc = kvf_error_set(err, KVF_EFORMAT, "override %u has unknown target %u", i,
                                   o->target);
                goto fail;
            }
            if (o->target >= KVF_OVERRIDE_Q && o->value > 0xFFFFu) {
                rc = kvf_error_set(err, KVF_EFORMAT,
                                   "override %u sets a bf16 value but 0x%x has more than 16 bits",
                                   i, o->value);
                goto fail;
            }
        }
    }
    if (sections & SECTION_EXPLICIT) {
        kvf_explicit *ex = &out->explicit_tensors;
        uint32_t pool;
        if ((rc = read_u32(&r, &pool, "the explicit pool size"))) goto fail;
        int64_t entries = recipe_table_entries(rp);
        int64_t page_elems = (int64_t)rp->page_size * rp->num_kv_heads * rp->head_dim;
        int64_t q_elems = (int64_t)rp->batch_size * rp->num_qo_heads * rp->head_dim;
        if (pool > (uint32_t)INT32_MAX || (int64_t)pool > lim->max_pool_pages ||
            (int64_t)pool * page_elems * 2 > lim->max_pool_bytes ||
            ((int64_t)pool * page_elems * 2) * 2 + q_elems * 2 > lim->max_resident_bytes) {
            rc = kvf_error_set(err, KVF_ELIMIT,
                               "the explicit pool of %u pages exceeds the size limits", pool);
            goto fail;
        }
        if ((rc = kvf_explicit_pool_budget(rp, pool, lim, err))) goto fail;
        ex->num_pages = pool;
        size_t want = (size_t)entries * 4 + (size_t)q_elems * 2 + (size_t)pool * page_elems * 4;
        if ((rc = need(&r, want, "the explicit tensors"))) goto fail;
        ex->kv_indices = malloc((size_t)(entries ? entries : 1) * 4);
        ex->q = malloc((size_t)(q_elems ? q_elems : 1) * 2);
        int64_t pool_elems = (int64_t)pool * page_elems;
        ex->k_cache = malloc((size_t)(pool_elems > 0 ? pool_elems : 1) * 2);
        ex->v_cache = malloc((size_t)(pool_elems > 0 ? pool_elems : 1) * 2);
        if (!ex->kv_indices || !ex->q || !ex->k_cache || !ex->v_cache) {
            rc = kvf_error_set(err, KVF_ENOMEM, "could not allocate the explicit tensors");
            goto fail;
        }
        for (int64_t i = 0; i < entries; i++) {
            uint32_t id;
            read_u32(&r, &id, "an explicit page id");
            ex->kv_indices[i] = (int32_t)id;
        }
        read_bf16_array(&r, ex->q, q_elems, "explicit q");
        read_bf16_array(&r, ex->k_cache, pool * page_elems, "explicit k_cache");
        read_bf16_array(&r, ex->v_cache, pool * page_elems, "explicit v_cache");
        out->has_explicit = 1;
    }
    if ((sections & SECTION_ORIGIN) && (rc = decode_origin(&r, &out->origin))) goto fail;
    out->has_origin = (sections & SECTION_ORIGIN) != 0;
    if (r.left) {
        rc = kvf_error_set(err, KVF_EFORMAT, "%zu unexpected bytes follow the case at byte %zu",
                           r.left, r.offset);
        goto fail;
    }
    return 0;
fail:
    kvf_spec_free(out);
    return rc;
}

static void encode_dist(writer *w, const kvf_dist *d) {
    put_u8(w, d->kind);
    put_u8(w, (uint8_t)d->log2_scale);
    put_u8(w, d->param);
}

int kvf_spec_encode(const kvf_spec *s, uint8_t **out_data, size_t *out_size, kvf_error *err) {
    const kvf_recipe *rp = &s->recipe;
    writer w = {0};
    put(&w, HEADER_MAGIC, 4);
    put_u8(&w, rp->expansion == KVF_EXPANSION_2 ? KVF_EXPANSION_2 : KVF_EXPANSION_1);
    put_u8(&w, (uint8_t)((s->num_overrides ? SECTION_OVERRIDES : 0) |
                         (s->has_explicit ? SECTION_EXPLICIT : 0) |
                         (s->has_origin ? SECTION_ORIGIN : 0)));
    put_u16(&w, 0);
    put_u8(&w, rp->num_qo_heads);
    put_u8(&w, rp->num_kv_heads);
    put_u16(&w, rp->head_dim);
    put_u16(&w, rp->page_size);
    put_u16(&w, rp->batch_size);
    put_u8(&w, rp->table);
    put_u8(&w, rp->logits);
    put_u8(&w, rp->poison);
    put_u8(&w, 0);
    put_u32(&w, rp->page_id_base);
    put_u16(&w, rp->spare_pages);
    put_u16(&w, 0);
    put_u32(&w, kvf_f32_bits(rp->sm_scale));
    encode_dist(&w, &rp->q);
    encode_dist(&w, &rp->k);
    encode_dist(&w, &rp->v);
    put_u8(&w, 0);
    put_u16(&w, 0);
    put_u64(&w, rp->seed);
    for (uint32_t b = 0; b < rp->batch_size; b++) {
        put_u16(&w, rp->num_pages[b]);
        put_u16(&w, rp->last_page_len[b]);
    }
    if (s->num_overrides) {
        put_u32(&w, s->num_overrides);
        for (uint32_t i = 0; i < s->num_overrides; i++) {
            put_u8(&w, s->overrides[i].target);
            put_u64(&w, s->overrides[i].index);
            put_u32(&w, s->overrides[i].value);
        }
    }
    if (s->has_explicit) {
        const kvf_explicit *ex = &s->explicit_tensors;
        int64_t entries = recipe_table_entries(rp);
        int64_t page_elems = (int64_t)rp->page_size * rp->num_kv_heads * rp->head_dim;
        put_u32(&w, (uint32_t)ex->num_pages);
        for (int64_t i = 0; i < entries; i++)
            put_u32(&w, (uint32_t)ex->kv_indices[i]);
        put_bf16_array(&w, ex->q, (int64_t)rp->batch_size * rp->num_qo_heads * rp->head_dim);
        put_bf16_array(&w, ex->k_cache, ex->num_pages * page_elems);
        put_bf16_array(&w, ex->v_cache, ex->num_pages * page_elems);
    }
    if (s->has_origin) {
        const kvf_origin *o = &s->origin;
        if (!kvf_origin_name_ok(o->definition) || !kvf_origin_name_ok(o->workload_uuid) ||
            (o->random_inputs & ~KVF_ORIGIN_RANDOM_ALL)) {
            free(w.p);
            return kvf_error_set(err, KVF_EINVAL,
                                 "the case's origin has a name outside [A-Za-z0-9_.-]{1,%d} or "
                                 "undefined random-input flags",
                                 KVF_ORIGIN_NAME_MAX);
        }
        put_u8(&w, (uint8_t)strlen(o->definition));
        put(&w, o->definition, strlen(o->definition));
        put_u8(&w, (uint8_t)strlen(o->workload_uuid));
        put(&w, o->workload_uuid, strlen(o->workload_uuid));
        put_u8(&w, o->random_inputs);
        put_u8(&w, 0);
        put_u16(&w, 0);
        put_u64(&w, o->random_seed);
    }
    if (w.failed) {
        free(w.p);
        return kvf_error_set(err, KVF_ENOMEM, "could not allocate the encoded case");
    }
    *out_data = w.p;
    *out_size = w.size;
    return 0;
}

static void *dup_bytes(const void *src, size_t n) {
    void *p = malloc(n ? n : 1);
    if (p && n) memcpy(p, src, n);
    return p;
}

int kvf_spec_copy(kvf_spec *dst, const kvf_spec *src, kvf_error *err) {
    *dst = *src;
    const kvf_recipe *rp = &src->recipe;
    size_t per_seq = (size_t)rp->batch_size * sizeof(uint16_t);
    dst->recipe.num_pages = dup_bytes(rp->num_pages, per_seq);
    dst->recipe.last_page_len = dup_bytes(rp->last_page_len, per_seq);
    dst->overrides = dup_bytes(src->overrides, src->num_overrides * sizeof *src->overrides);
    memset(&dst->explicit_tensors, 0, sizeof dst->explicit_tensors);
    int failed = !dst->recipe.num_pages || !dst->recipe.last_page_len || !dst->overrides;
    if (src->has_explicit && !failed) {
        const kvf_explicit *ex = &src->explicit_tensors;
        int64_t page_elems = (int64_t)rp->page_size * rp->num_kv_heads * rp->head_dim;
        size_t pool = (size_t)(ex->num_pages * page_elems * 2);
        dst->explicit_tensors.num_pages = ex->num_pages;
        dst->explicit_tensors.kv_indices =
            dup_bytes(ex->kv_indices, (size_t)recipe_table_entries(rp) * 4);
        dst->explicit_tensors.q =
            dup_bytes(ex->q, (size_t)rp->batch_size * rp->num_qo_heads * rp->head_dim * 2);
        dst->explicit_tensors.k_cache = dup_bytes(ex->k_cache, pool);
        dst->explicit_tensors.v_cache = dup_bytes(ex->v_cache, pool);
        failed = !dst->explicit_tensors.kv_indices || !dst->explicit_tensors.q ||
                 !dst->explicit_tensors.k_cache || !dst->explicit_tensors.v_cache;
    }
    if (failed) {
        kvf_spec_free(dst);
        return kvf_error_set(err, KVF_ENOMEM, "could not copy the case spec");
    }
    return 0;
}

int kvf_spec_equal(const kvf_spec *a, const kvf_spec *b) {
    uint8_t *ea = NULL, *eb = NULL;
    size_t na = 0, nb = 0;
    /* The canonical encoding holds every field, so equal encodings mean equal specs. */
    int same = kvf_spec_encode(a, &ea, &na, NULL) == 0 && kvf_spec_encode(b, &eb, &nb, NULL) == 0 &&
               na == nb && memcmp(ea, eb, na) == 0;
    free(ea);
    free(eb);
    return same;
}

int kvf_case_load(const char *path, kvf_spec *spec_out, kvf_case *case_out, const kvf_limits *lim,
                  kvf_error *err) {
    char *text;
    size_t size;
    /* A case file holds at most its explicit tensors (q and the resident pages of both
     * caches, within max_resident_bytes) plus a table and a header. */
    const size_t max_file = (size_t)lim->max_resident_bytes * 2 + ((size_t)64 << 20);
    /* The case a file holds takes at least twice its size (the case and the kernel's copy,
     * docs/case-format.md, "Budgets"): a larger file is refused before it is read. */
    int64_t max_memory = 0, max_work = 0;
    int brc = kvf_limits_budgets(lim, &max_memory, &max_work, err);
    if (brc) return brc;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (int64_t)st.st_size > max_memory / 2)
        return kvf_error_set(err, KVF_ELIMIT,
                             "%s is %.2f GiB; the case it holds needs at least twice that, past "
                             "the memory budget of %.2f GiB (KVF_MAX_MEMORY_MIB raises it)",
                             path, (double)st.st_size / (double)(1 << 30),
                             (double)max_memory / (double)(1 << 30));
    int rrc = kvf_read_file_max(path, max_file, &text, &size, err);
    if (rrc) return rrc;
    uint8_t *buf = (uint8_t *)text;
    kvf_spec spec;
    int rc = kvf_spec_decode(&spec, buf, size, lim, err);
    free(buf);
    if (rc) return rc;
    if (case_out) rc = kvf_case_build(case_out, &spec, lim, err);
    if (!rc && spec_out)
        *spec_out = spec;
    else
        kvf_spec_free(&spec);
    return rc;
}

int kvf_spec_save(const kvf_spec *s, const char *path, kvf_error *err) {
    uint8_t *data;
    size_t size;
    int rc = kvf_spec_encode(s, &data, &size, err);
    if (rc) return rc;
    rc = kvf_write_atomic_bytes(path, data, size, err);
    free(data);
    return rc;
}
