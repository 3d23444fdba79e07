/* The .kvfz codec (layout in docs/case-format.md): kvf_spec_decode, kvf_spec_encode, the
 * origin-name rule both apply, and kvf_spec_equal, which compares canonical encodings.
 *
 * The decoder reads through a bounds-checked cursor: every read names the field it wants, so a
 * truncated or malformed file is rejected with a sentence naming the first field that does not
 * fit. Reserved bytes must be zero and nothing may follow the last section, which makes the
 * encoding canonical (encode(decode(b)) == b). The recipe's domain and budgets are checked by
 * kvf_recipe_check (recipe_check.c, cost.c) before any section is allocated. */
#include "kvfuzz/spec.h"

#include <stdlib.h>
#include <string.h>

#define HEADER_MAGIC "KVFZ"
#define SECTION_OVERRIDES 0x01u
#define SECTION_EXPLICIT 0x02u
#define SECTION_ORIGIN 0x04u
#define SECTION_LAYOUT 0x08u
#define SECTION_QUANT 0x10u
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

/* The layout section: the page order, three reserved zero bytes, nine paddings. The dense
 * layout is written as no section, so a section holding it is refused: every case has one
 * encoding. */
static int decode_layout(reader *r, kvf_layout *l) {
    uint32_t *const pads[] = {&l->q_head_pad,  &l->q_batch_pad,   &l->o_head_pad,
                              &l->o_batch_pad, &l->lse_batch_pad, &l->kv_row_pad,
                              &l->kv_mid_pad,  &l->kv_page_pad,   &l->view_offset};
    const size_t at = r->offset;
    int rc = read_u8(r, &l->kv_order, "the layout's page order");
    if (!rc) rc = read_zero(r, 3, "the layout's reserved bytes");
    for (size_t i = 0; !rc && i < sizeof pads / sizeof pads[0]; i++)
        rc = read_u32(r, pads[i], "the layout's paddings");
    if (!rc && kvf_layout_is_dense(l))
        return kvf_error_set(r->err, KVF_EFORMAT,
                             "the layout section at byte %zu holds the dense layout, which is "
                             "written as no section (clear bit 3 of the sections byte)",
                             at);
    return rc ? rc : kvf_layout_check(l, r->err);
}

/* The quantization section: k dtype, v dtype, granularity, spread, fine flag, three reserved
 * zero bytes, the base k and v scales. bf16 without scales is written as no section. */
static int decode_quant(reader *r, kvf_quant_recipe *q) {
    const size_t at = r->offset;
    uint32_t kbits = 0, vbits = 0;
    int rc = read_u8(r, &q->kv.k_dtype, "the k cache's dtype");
    if (!rc) rc = read_u8(r, &q->kv.v_dtype, "the v cache's dtype");
    if (!rc) rc = read_u8(r, &q->kv.granularity, "the scale granularity");
    if (!rc) rc = read_u8(r, &q->spread, "the scales' spread");
    if (!rc) rc = read_u8(r, &q->fine, "the scales' fine flag");
    if (!rc) rc = read_zero(r, 3, "the quantization's reserved bytes");
    if (!rc) rc = read_u32(r, &kbits, "the base k scale");
    if (!rc) rc = read_u32(r, &vbits, "the base v scale");
    if (rc) return rc;
    q->k_scale = kvf_f32_from_bits(kbits);
    q->v_scale = kvf_f32_from_bits(vbits);
    if (kvf_kv_quant_is_plain(&q->kv))
        return kvf_error_set(r->err, KVF_EFORMAT,
                             "the quantization section at byte %zu holds bf16 caches without "
                             "scales, which are written as no section (clear bit 4 of the "
                             "sections byte)",
                             at);
    return kvf_quant_recipe_check(q, r->err);
}

static int decode_overrides(reader *r, kvf_spec *out) {
    uint32_t n;
    int rc;
    if ((rc = read_u32(r, &n, "the override count"))) return rc;
    if (n == 0)
        return kvf_error_set(r->err, KVF_EFORMAT,
                             "the overrides section is flagged but holds no overrides");
    if ((rc = need(r, (size_t)n * OVERRIDE_RECORD_BYTES, "the overrides"))) return rc;
    out->overrides = calloc(n, sizeof *out->overrides);
    if (!out->overrides)
        return kvf_error_set(r->err, KVF_ENOMEM, "could not allocate %u overrides", n);
    out->num_overrides = n;
    for (uint32_t i = 0; i < n; i++) {
        kvf_override *o = &out->overrides[i];
        read_u8(r, &o->target, "an override target");
        read_u64(r, &o->index, "an override index");
        read_u32(r, &o->value, "an override value");
        if (o->target < KVF_OVERRIDE_TABLE_ENTRY || o->target > KVF_OVERRIDE_V)
            return kvf_error_set(r->err, KVF_EFORMAT, "override %u has unknown target %u", i,
                                 o->target);
        if (o->target >= KVF_OVERRIDE_Q && o->value > 0xFFFFu)
            return kvf_error_set(r->err, KVF_EFORMAT,
                                 "override %u sets a bf16 value but 0x%x has more than 16 bits", i,
                                 o->value);
    }
    return 0;
}

/* The explicit section: the pool size, checked against the limits and the memory budget before
 * anything is allocated, then the page ids, q and both caches. Fills out->explicit_tensors as
 * it goes (the caller's kvf_spec_free releases it on an error). */
static int decode_explicit(reader *r, kvf_spec *out, const kvf_limits *lim) {
    const kvf_recipe *rp = &out->recipe;
    kvf_explicit *ex = &out->explicit_tensors;
    uint32_t pool;
    int rc;
    if ((rc = read_u32(r, &pool, "the explicit pool size"))) return rc;
    int64_t entries = kvf_recipe_entries(rp);
    int64_t page_elems = kvf_recipe_page_elems(rp);
    int64_t q_elems = (int64_t)rp->batch_size * rp->num_qo_heads * rp->head_dim;
    if (pool > (uint32_t)INT32_MAX || (int64_t)pool > lim->max_pool_pages ||
        (int64_t)pool * page_elems * 2 > lim->max_pool_bytes ||
        ((int64_t)pool * page_elems * 2) * 2 + q_elems * 2 > lim->max_resident_bytes)
        return kvf_error_set(r->err, KVF_ELIMIT,
                             "the explicit pool of %u pages exceeds the size limits", pool);
    if ((rc = kvf_explicit_pool_budget(rp, pool, lim, r->err))) return rc;
    ex->num_pages = pool;
    size_t want = (size_t)entries * 4 + (size_t)q_elems * 2 + (size_t)pool * page_elems * 4;
    if ((rc = need(r, want, "the explicit tensors"))) return rc;
    ex->kv_indices = malloc((size_t)(entries ? entries : 1) * 4);
    ex->q = malloc((size_t)(q_elems ? q_elems : 1) * 2);
    int64_t pool_elems = (int64_t)pool * page_elems;
    ex->k_cache = malloc((size_t)(pool_elems > 0 ? pool_elems : 1) * 2);
    ex->v_cache = malloc((size_t)(pool_elems > 0 ? pool_elems : 1) * 2);
    if (!ex->kv_indices || !ex->q || !ex->k_cache || !ex->v_cache)
        return kvf_error_set(r->err, KVF_ENOMEM, "could not allocate the explicit tensors");
    for (int64_t i = 0; i < entries; i++) {
        uint32_t id = 0;
        if (read_u32(r, &id, "an explicit page id")) break; /* r->err holds why */
        ex->kv_indices[i] = (int32_t)id;
    }
    read_bf16_array(r, ex->q, q_elems, "explicit q");
    read_bf16_array(r, ex->k_cache, pool * page_elems, "explicit k_cache");
    read_bf16_array(r, ex->v_cache, pool * page_elems, "explicit v_cache");
    out->has_explicit = 1;
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
    if (sections &
        ~(SECTION_OVERRIDES | SECTION_EXPLICIT | SECTION_ORIGIN | SECTION_LAYOUT | SECTION_QUANT))
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

    if ((sections & SECTION_OVERRIDES) && (rc = decode_overrides(&r, out))) goto fail;
    if ((sections & SECTION_EXPLICIT) && (rc = decode_explicit(&r, out, lim))) goto fail;
    if ((sections & SECTION_ORIGIN) && (rc = decode_origin(&r, &out->origin))) goto fail;
    out->has_origin = (sections & SECTION_ORIGIN) != 0;
    if ((sections & SECTION_LAYOUT) && (rc = decode_layout(&r, &out->layout))) goto fail;
    if ((sections & SECTION_QUANT) && (rc = decode_quant(&r, &out->quant))) goto fail;
    /* Explicit caches carry their scales in the section's bases: one per cache. */
    if ((sections & SECTION_QUANT) && (sections & SECTION_EXPLICIT) &&
        out->quant.kv.granularity != KVF_SCALE_TENSOR) {
        rc = kvf_error_set(err, KVF_EFORMAT,
                           "a case with explicit tensors can have only tensor scales in its "
                           "quantization section, not %s scales",
                           kvf_scale_granularity_name(out->quant.kv.granularity));
        goto fail;
    }
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
                         (s->has_origin ? SECTION_ORIGIN : 0) |
                         (kvf_layout_is_dense(&s->layout) ? 0 : SECTION_LAYOUT) |
                         (kvf_quant_recipe_is_plain(&s->quant) ? 0 : SECTION_QUANT)));
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
        int64_t entries = kvf_recipe_entries(rp);
        int64_t page_elems = kvf_recipe_page_elems(rp);
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
    if (!kvf_layout_is_dense(&s->layout)) {
        const kvf_layout *l = &s->layout;
        if (kvf_layout_check(l, err)) {
            free(w.p);
            return err ? err->code : KVF_EINVAL;
        }
        put_u8(&w, l->kv_order);
        put_u8(&w, 0);
        put_u16(&w, 0);
        const uint32_t pads[] = {l->q_head_pad,  l->q_batch_pad,   l->o_head_pad,
                                 l->o_batch_pad, l->lse_batch_pad, l->kv_row_pad,
                                 l->kv_mid_pad,  l->kv_page_pad,   l->view_offset};
        for (size_t i = 0; i < sizeof pads / sizeof pads[0]; i++)
            put_u32(&w, pads[i]);
    }
    if (!kvf_quant_recipe_is_plain(&s->quant)) {
        const kvf_quant_recipe *q = &s->quant;
        int qrc = kvf_quant_recipe_check(q, err);
        if (!qrc && kvf_kv_quant_is_plain(&q->kv))
            qrc = kvf_error_set(err, KVF_EINVAL,
                                "the case's quantization recipe has bf16 caches without scales "
                                "but a base");
        if (!qrc && s->has_explicit && q->kv.granularity != KVF_SCALE_TENSOR)
            qrc = kvf_error_set(err, KVF_EINVAL,
                                "the case's explicit tensors come with %s scales; explicit caches "
                                "take tensor scales only (the bases)",
                                kvf_scale_granularity_name(q->kv.granularity));
        if (qrc) {
            free(w.p);
            return qrc;
        }
        put_u8(&w, q->kv.k_dtype);
        put_u8(&w, q->kv.v_dtype);
        put_u8(&w, q->kv.granularity);
        put_u8(&w, q->spread);
        put_u8(&w, q->fine);
        put_u8(&w, 0);
        put_u16(&w, 0);
        put_u32(&w, kvf_f32_bits(q->k_scale));
        put_u32(&w, kvf_f32_bits(q->v_scale));
    }
    if (w.failed) {
        free(w.p);
        return kvf_error_set(err, KVF_ENOMEM, "could not allocate the encoded case");
    }
    *out_data = w.p;
    *out_size = w.size;
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
