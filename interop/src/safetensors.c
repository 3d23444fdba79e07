/* The safetensors reader and writer (safetensors.h). The header is parsed with jansson; every
 * size is checked against the bytes actually present before anything points into them. */
#include "kvfuzz/json_io.h"
#include "kvfuzz/safetensors.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/file.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[KVF_ST_DTYPE_COUNT] = {
    [KVF_ST_BOOL] = {"BOOL", 1},       [KVF_ST_U8] = {"U8", 1},
    [KVF_ST_I8] = {"I8", 1},           [KVF_ST_F8_E5M2] = {"F8_E5M2", 1},
    [KVF_ST_F8_E4M3] = {"F8_E4M3", 1}, [KVF_ST_I16] = {"I16", 2},
    [KVF_ST_U16] = {"U16", 2},         [KVF_ST_F16] = {"F16", 2},
    [KVF_ST_BF16] = {"BF16", 2},       [KVF_ST_I32] = {"I32", 4},
    [KVF_ST_U32] = {"U32", 4},         [KVF_ST_F32] = {"F32", 4},
    [KVF_ST_F64] = {"F64", 8},         [KVF_ST_I64] = {"I64", 8},
    [KVF_ST_U64] = {"U64", 8},
};

#define LFS_MAGIC "version https://git-lfs.github.com/spec/v1"
#define META_KEY "__metadata__"

const char *kvf_st_dtype_name(int dtype) {
    return dtype >= 0 && dtype < KVF_ST_DTYPE_COUNT ? dtypes[dtype].name : NULL;
}

size_t kvf_st_dtype_size(int dtype) {
    return dtype >= 0 && dtype < KVF_ST_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

int kvf_st_dtype_parse(const char *name) {
    for (int i = 0; i < KVF_ST_DTYPE_COUNT; i++)
        if (strcmp(dtypes[i].name, name) == 0) return i;
    return -1;
}

int kvf_st_is_lfs_pointer(const uint8_t *bytes, size_t size) {
    size_t n = strlen(LFS_MAGIC);
    return size >= n && memcmp(bytes, LFS_MAGIC, n) == 0;
}

void kvf_st_free(kvf_st_file *f) {
    if (!f) return;
    for (size_t i = 0; i < f->count; i++)
        free(f->tensors[i].name);
    free(f->tensors);
    for (size_t i = 0; i < f->meta_count; i++) {
        free(f->meta_keys[i]);
        free(f->meta_values[i]);
    }
    free(f->meta_keys);
    free(f->meta_values);
    free(f->owned);
    memset(f, 0, sizeof *f);
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

typedef struct range {
    uint64_t begin, end;
    size_t index;
} range;

static int cmp_range(const void *a, const void *b) {
    const range *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int parse_metadata(kvf_st_file *out, json_t *meta, const char *what, kvf_error *err) {
    if (!json_is_object(meta))
        return kvf_error_set(err, KVF_EFORMAT, "%s: " META_KEY " is not an object", what);
    size_t n = json_object_size(meta);
    out->meta_keys = calloc(n ? n : 1, sizeof *out->meta_keys);
    out->meta_values = calloc(n ? n : 1, sizeof *out->meta_values);
    if (!out->meta_keys || !out->meta_values)
        return kvf_error_set(err, KVF_ENOMEM, "%s: out of memory reading the metadata", what);
    const char *key;
    json_t *v;
    json_object_foreach(meta, key, v) {
        if (!json_is_string(v))
            return kvf_error_set(err, KVF_EFORMAT,
                                 "%s: metadata value of \"%.64s\" is not a string", what, key);
        out->meta_keys[out->meta_count] = dup_str(key);
        out->meta_values[out->meta_count] = dup_str(json_string_value(v));
        if (!out->meta_keys[out->meta_count] || !out->meta_values[out->meta_count]) {
            free(out->meta_keys[out->meta_count]);
            free(out->meta_values[out->meta_count]);
            return kvf_error_set(err, KVF_ENOMEM, "%s: out of memory reading the metadata", what);
        }
        out->meta_count++;
    }
    return 0;
}

/* One header entry: dtype, shape, offsets, and the byte range they must agree on. */
static int parse_entry(kvf_st_tensor *t, range *r, const char *key, json_t *e, uint64_t data_size,
                       const char *what, kvf_error *err) {
    if (!json_is_object(e))
        return kvf_error_set(err, KVF_EFORMAT, "%s: tensor \"%.64s\" is not an object", what, key);
    json_t *dt = json_object_get(e, "dtype"), *shape = json_object_get(e, "shape");
    json_t *offs = json_object_get(e, "data_offsets");
    if (!json_is_string(dt) || !json_is_array(shape) || !json_is_array(offs))
        return kvf_error_set(err, KVF_EFORMAT,
                             "%s: tensor \"%.64s\" lacks a dtype string, a shape list or "
                             "data_offsets",
                             what, key);
    if (json_object_size(e) != 3)
        return kvf_error_set(err, KVF_EFORMAT,
                             "%s: tensor \"%.64s\" has members besides dtype, shape and "
                             "data_offsets",
                             what, key);
    t->dtype = kvf_st_dtype_parse(json_string_value(dt));
    if (t->dtype < 0)
        return kvf_error_set(err, KVF_EFORMAT,
                             "%s: tensor \"%.64s\" has the unknown dtype \"%.32s\"", what, key,
                             json_string_value(dt));
    size_t rank = json_array_size(shape);
    if (rank > KVF_ST_MAX_RANK)
        return kvf_error_set(err, KVF_EFORMAT, "%s: tensor \"%.64s\" has rank %zu, past %d", what,
                             key, rank, KVF_ST_MAX_RANK);
    t->rank = (int)rank;
    uint64_t elems = 1;
    int overflow = 0;
    for (size_t i = 0; i < rank; i++) {
        json_t *d = json_array_get(shape, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return kvf_error_set(err, KVF_EFORMAT,
                                 "%s: tensor \"%.64s\"'s shape entry %zu is not a non-negative "
                                 "integer",
                                 what, key, i);
        uint64_t v = (uint64_t)json_integer_value(d);
        t->shape[i] = (int64_t)v;
        if (v && elems > UINT64_MAX / v) overflow = 1;
        if (!overflow) elems *= v;
    }
    if (json_array_size(offs) != 2 || !json_is_integer(json_array_get(offs, 0)) ||
        !json_is_integer(json_array_get(offs, 1)) ||
        json_integer_value(json_array_get(offs, 0)) < 0 ||
        json_integer_value(json_array_get(offs, 1)) < 0)
        return kvf_error_set(err, KVF_EFORMAT,
                             "%s: tensor \"%.64s\"'s data_offsets is not [begin, end] with "
                             "non-negative integers",
                             what, key);
    r->begin = (uint64_t)json_integer_value(json_array_get(offs, 0));
    r->end = (uint64_t)json_integer_value(json_array_get(offs, 1));
    if (r->end < r->begin)
        return kvf_error_set(err, KVF_EFORMAT,
                             "%s: tensor \"%.64s\"'s data_offsets [%llu, %llu] end before they "
                             "begin",
                             what, key, (unsigned long long)r->begin, (unsigned long long)r->end);
    if (r->end > data_size)
        return kvf_error_set(err, KVF_EFORMAT,
                             "%s: tensor \"%.64s\"'s data_offsets [%llu, %llu] run past the %llu "
                             "data bytes of the file",
                             what, key, (unsigned long long)r->begin, (unsigned long long)r->end,
                             (unsigned long long)data_size);
    uint64_t esize = kvf_st_dtype_size(t->dtype);
    if (overflow || elems > UINT64_MAX / esize || elems * esize != r->end - r->begin)
        return kvf_error_set(err, KVF_EFORMAT,
                             "%s: tensor \"%.64s\" is %s of shape with %s%llu elements but its "
                             "data_offsets hold %llu bytes",
                             what, key, dtypes[t->dtype].name, overflow ? "over " : "",
                             (unsigned long long)(overflow ? UINT64_MAX : elems),
                             (unsigned long long)(r->end - r->begin));
    t->elems = (int64_t)elems;
    t->nbytes = r->end - r->begin;
    return 0;
}

int kvf_st_parse(kvf_st_file *out, const uint8_t *bytes, size_t size, const char *what,
                 kvf_error *err) {
    memset(out, 0, sizeof *out);
    if (kvf_st_is_lfs_pointer(bytes, size))
        return kvf_error_set(err, KVF_EFORMAT,
                             "%s is a Git LFS pointer, not the tensor data (run `git lfs pull` in "
                             "the dataset first)",
                             what);
    if (size < 8)
        return kvf_error_set(err, KVF_EFORMAT,
                             "%s is not a safetensors file: %zu bytes, shorter than the 8-byte "
                             "header size",
                             what, size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | bytes[i];
    if (n > KVF_ST_MAX_HEADER)
        return kvf_error_set(err, KVF_ELIMIT,
                             "%s: the safetensors header is %llu bytes, over the limit of 100 MB",
                             what, (unsigned long long)n);
    if (n > size - 8)
        return kvf_error_set(err, KVF_EFORMAT,
                             "%s: the safetensors header claims %llu bytes but the file has %zu "
                             "after the size",
                             what, (unsigned long long)n, size - 8);
    if (n < 2 || bytes[8] != '{')
        return kvf_error_set(err, KVF_EFORMAT,
                             "%s: the safetensors header does not start with a JSON object", what);
    char jmsg[256];
    json_t *h = kvf_json_parse_text((const char *)bytes + 8, (size_t)n, jmsg, sizeof jmsg);
    if (!h)
        return kvf_error_set(err, KVF_EFORMAT, "%s: the safetensors header is not JSON: %s", what,
                             jmsg);
    int rc = 0;
    range *ranges = NULL;
    if (!json_is_object(h)) {
        rc = kvf_error_set(err, KVF_EFORMAT, "%s: the safetensors header is not a JSON object",
                           what);
        goto done;
    }
    const uint8_t *data = bytes + 8 + n;
    uint64_t data_size = size - 8 - n;
    size_t count = json_object_size(h) - (json_object_get(h, META_KEY) ? 1 : 0);
    out->tensors = calloc(count ? count : 1, sizeof *out->tensors);
    ranges = calloc(count ? count : 1, sizeof *ranges);
    if (!out->tensors || !ranges) {
        rc = kvf_error_set(err, KVF_ENOMEM, "%s: out of memory reading the header", what);
        goto done;
    }
    const char *key;
    json_t *e;
    json_object_foreach(h, key, e) {
        if (strcmp(key, META_KEY) == 0) {
            if ((rc = parse_metadata(out, e, what, err))) goto done;
            continue;
        }
        kvf_st_tensor *t = &out->tensors[out->count];
        range *r = &ranges[out->count];
        if ((rc = parse_entry(t, r, key, e, data_size, what, err))) goto done;
        if (!(t->name = dup_str(key))) {
            rc = kvf_error_set(err, KVF_ENOMEM, "%s: out of memory reading the header", what);
            goto done;
        }
        t->data = data + r->begin;
        r->index = out->count++;
    }
    /* The ranges must tile [0, data_size) exactly, as the reference reader demands. */
    qsort(ranges, out->count, sizeof *ranges, cmp_range);
    uint64_t at = 0;
    for (size_t i = 0; i < out->count; i++) {
        const char *name = out->tensors[ranges[i].index].name;
        if (ranges[i].begin < at) {
            rc = kvf_error_set(err, KVF_EFORMAT,
                               "%s: tensor \"%.64s\"'s data_offsets [%llu, %llu] overlap the "
                               "tensor before it, which ends at %llu",
                               what, name, (unsigned long long)ranges[i].begin,
                               (unsigned long long)ranges[i].end, (unsigned long long)at);
            goto done;
        }
        if (ranges[i].begin > at) {
            rc = kvf_error_set(err, KVF_EFORMAT,
                               "%s: tensor \"%.64s\"'s data_offsets start at %llu, leaving a gap "
                               "after byte %llu",
                               what, name, (unsigned long long)ranges[i].begin,
                               (unsigned long long)at);
            goto done;
        }
        at = ranges[i].end;
    }
    if (at != data_size) {
        rc = kvf_error_set(err, KVF_EFORMAT,
                           "%s: %llu data bytes follow the last tensor, which ends at %llu", what,
                           (unsigned long long)(data_size - at), (unsigned long long)at);
        goto done;
    }
done:
    free(ranges);
    json_decref(h);
    if (rc) kvf_st_free(out);
    return rc;
}

int kvf_st_load(kvf_st_file *out, const char *path, size_t max_size, kvf_error *err) {
    memset(out, 0, sizeof *out);
    char *buf;
    size_t n;
    int rc = kvf_read_file_max(path, max_size, &buf, &n, err);
    if (rc) return rc;
    rc = kvf_st_parse(out, (const uint8_t *)buf, n, path, err);
    if (rc) {
        free(buf);
        return rc;
    }
    out->owned = (uint8_t *)buf;
    out->owned_bytes = n;
    return 0;
}

const kvf_st_tensor *kvf_st_find(const kvf_st_file *f, const char *name) {
    for (size_t i = 0; i < f->count; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

const char *kvf_st_meta(const kvf_st_file *f, const char *key) {
    for (size_t i = 0; i < f->meta_count; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
    return NULL;
}

static uint64_t out_bytes(const kvf_st_out *t) {
    uint64_t n = kvf_st_dtype_size(t->dtype);
    for (int i = 0; i < t->rank; i++)
        n *= (uint64_t)t->shape[i];
    return n;
}

int kvf_st_encode(const kvf_st_out *tensors, size_t count, const char *const *meta_keys,
                  const char *const *meta_values, size_t meta_count, uint8_t **out,
                  size_t *out_size, kvf_error *err) {
    json_t *h = json_object();
    int rc = 0;
    char *text = NULL;
    if (!h) return kvf_error_set(err, KVF_ENOMEM, "out of memory building a safetensors header");
    if (meta_count) {
        json_t *m = json_object();
        for (size_t i = 0; m && i < meta_count; i++)
            json_object_set_new(m, meta_keys[i], json_string(meta_values[i]));
        if (!m || json_object_set_new(h, META_KEY, m)) goto oom;
    }
    uint64_t at = 0;
    for (size_t i = 0; i < count; i++) {
        const kvf_st_out *t = &tensors[i];
        if (!kvf_st_dtype_name(t->dtype) || t->rank < 0 || t->rank > KVF_ST_MAX_RANK ||
            strcmp(t->name, META_KEY) == 0 || json_object_get(h, t->name)) {
            rc = kvf_error_set(err, KVF_EFORMAT,
                               "tensor \"%.64s\" has a dtype, rank or name that cannot be written",
                               t->name);
            goto done;
        }
        json_t *shape = json_array();
        for (int d = 0; shape && d < t->rank; d++)
            json_array_append_new(shape, json_integer(t->shape[d]));
        uint64_t nb = out_bytes(t);
        json_t *e = json_pack("{s:s, s:o, s:[I, I]}", "dtype", kvf_st_dtype_name(t->dtype), "shape",
                              shape, "data_offsets", (json_int_t)at, (json_int_t)(at + nb));
        if (!e || json_object_set_new(h, t->name, e)) goto oom;
        at += nb;
    }
    text = json_dumps(h, JSON_COMPACT);
    if (!text) goto oom;
    size_t hn = strlen(text), padded = (hn + 7) / 8 * 8;
    size_t total = 8 + padded + (size_t)at;
    uint8_t *buf = malloc(total ? total : 1);
    if (!buf) goto oom;
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    memcpy(buf + 8, text, hn);
    memset(buf + 8 + hn, ' ', padded - hn);
    uint8_t *p = buf + 8 + padded;
    for (size_t i = 0; i < count; i++) {
        uint64_t nb = out_bytes(&tensors[i]);
        if (nb) memcpy(p, tensors[i].data, (size_t)nb);
        p += nb;
    }
    *out = buf;
    *out_size = total;
    goto done;
oom:
    rc = kvf_error_set(err, KVF_ENOMEM, "out of memory building a safetensors file");
done:
    free(text);
    json_decref(h);
    return rc;
}

int kvf_st_write(const char *path, const kvf_st_out *tensors, size_t count,
                 const char *const *meta_keys, const char *const *meta_values, size_t meta_count,
                 kvf_error *err) {
    uint8_t *buf;
    size_t n;
    int rc = kvf_st_encode(tensors, count, meta_keys, meta_values, meta_count, &buf, &n, err);
    if (rc) return rc;
    rc = kvf_write_atomic_bytes(path, buf, n, err);
    free(buf);
    return rc;
}
