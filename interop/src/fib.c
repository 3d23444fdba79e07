/* FlashInfer-Bench datasets (fib.h): definitions and workloads in, workloads and blobs out. */
#include "kvfuzz/fib.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kvfuzz/file.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/safetensors.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the safetensors blobs are written straight from memory: little-endian hosts only"
#endif

/* FIB's DType names (flashinfer_bench/data/definition.py); float8_e4m3 is the older spelling. */
static const char *const fib_dtypes[] = {
    "float32",     "float16", "bfloat16", "float8_e4m3fn", "float8_e4m3", "float8_e5m2",
    "float4_e2m1", "int64",   "int32",    "int16",         "int8",        "bool"};

typedef struct tensor_want {
    const char *name;
    const char *dtype; /* FIB's name */
    int st_dtype;      /* the safetensors dtype it is stored as */
    int rank;          /* -1: a scalar (shape null) */
    const char *shape[4];
} tensor_want;

enum { IN_Q, IN_K, IN_V, IN_INDPTR, IN_INDICES, IN_LAST, IN_SCALE, IN_COUNT };

static const tensor_want inputs_want[IN_COUNT] = {
    {"q", "bfloat16", KVF_ST_BF16, 3, {"batch_size", "num_qo_heads", "head_dim"}},
    {"k_cache", "bfloat16", KVF_ST_BF16, 4, {"num_pages", "page_size", "num_kv_heads", "head_dim"}},
    {"v_cache", "bfloat16", KVF_ST_BF16, 4, {"num_pages", "page_size", "num_kv_heads", "head_dim"}},
    {"kv_indptr", "int32", KVF_ST_I32, 1, {"len_indptr"}},
    {"kv_indices", "int32", KVF_ST_I32, 1, {"num_kv_indices"}},
    {"kv_last_page_len", "int32", KVF_ST_I32, 1, {"batch_size"}},
    {"sm_scale", "float32", KVF_ST_F32, -1, {0}},
};

static const tensor_want outputs_want[2] = {
    {"output", "bfloat16", KVF_ST_BF16, 3, {"batch_size", "num_qo_heads", "head_dim"}},
    {"lse", "float32", KVF_ST_F32, 2, {"batch_size", "num_qo_heads"}},
};

static const char *const const_axes[4] = {"num_qo_heads", "num_kv_heads", "head_dim", "page_size"};
static const char *const var_axes[4] = {"batch_size", "num_pages", "len_indptr", "num_kv_indices"};

static const char *get_str(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int known_fib_dtype(const char *s) {
    for (size_t i = 0; i < sizeof fib_dtypes / sizeof fib_dtypes[0]; i++)
        if (strcmp(s, fib_dtypes[i]) == 0) return 1;
    return 0;
}

static void key_list(json_t *obj, char *buf, size_t n) {
    const char *key;
    json_t *v;
    size_t at = 0;
    buf[0] = 0;
    json_object_foreach(obj, key, v) {
        if (at + 1 >= n) break;
        at += (size_t)snprintf(buf + at, n - at, "%s%.40s", at ? ", " : "", key);
    }
}

/* One tensor spec of the definition against what kvfuzz runs. */
static int check_spec(const char *def, const char *kind, json_t *spec, const tensor_want *w,
                      kvf_error *err) {
    const char *dtype = get_str(spec, "dtype");
    json_t *shape = json_object_get(spec, "shape");
    if (!json_is_object(spec) || !dtype)
        return kvf_error_set(err, KVF_EINVAL, "definition %s's %s %s has no dtype", def, kind,
                             w->name);
    if (!known_fib_dtype(dtype))
        return kvf_error_set(err, KVF_EINVAL,
                             "definition %s's %s %s has the unknown dtype \"%.32s\" (FIB knows "
                             "float32, float16, bfloat16, float8_e4m3fn, float8_e5m2, float4_e2m1, "
                             "int64, int32, int16, int8 and bool)",
                             def, kind, w->name, dtype);
    if (strcmp(dtype, w->dtype) != 0)
        return kvf_error_set(err, KVF_EINVAL,
                             "definition %s's %s %s is %s; kvfuzz runs gqa_paged_decode with %s %s",
                             def, kind, w->name, dtype, w->dtype, w->name);
    int ok = w->rank < 0 ? (shape == NULL || json_is_null(shape) ||
                            (json_is_array(shape) && json_array_size(shape) == 0))
                         : json_is_array(shape) && json_array_size(shape) == (size_t)w->rank;
    for (int i = 0; ok && i < w->rank; i++) {
        const char *ax = json_string_value(json_array_get(shape, (size_t)i));
        ok = ax && strcmp(ax, w->shape[i]) == 0;
    }
    if (!ok) {
        char want[160] = "";
        size_t at = 0;
        for (int i = 0; i < w->rank; i++)
            at += (size_t)snprintf(want + at, sizeof want - at, "%s%s", i ? ", " : "", w->shape[i]);
        return kvf_error_set(err, KVF_EINVAL,
                             "definition %s's %s %s does not have the shape %s%s%s FIB's "
                             "gqa_paged_decode gives it",
                             def, kind, w->name, w->rank < 0 ? "null" : "[", want,
                             w->rank < 0 ? "" : "]");
    }
    return 0;
}

int kvf_fib_definition_parse(kvf_fib_definition *out, const char *text, size_t size,
                             const char *what, kvf_error *err) {
    memset(out, 0, sizeof *out);
    json_error_t jerr;
    json_t *d = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
    if (!d)
        return kvf_error_set(err, KVF_EINVAL, "definition %s is not JSON: %s (line %d)", what,
                             jerr.text, jerr.line);
    int rc = 0;
    const char *name = json_is_object(d) ? get_str(d, "name") : NULL;
    const char *op_type = json_is_object(d) ? get_str(d, "op_type") : NULL;
    if (!op_type && json_is_object(d)) op_type = get_str(d, "type"); /* older FIB datasets */
    json_t *inputs = json_object_get(d, "inputs"), *outputs = json_object_get(d, "outputs");
    json_t *axes = json_object_get(d, "axes");
    if (!name || !kvf_origin_name_ok(name)) {
        rc = kvf_error_set(err, KVF_EINVAL,
                           "definition %s has no name of 1 to %d characters [A-Za-z0-9_.-]", what,
                           KVF_ORIGIN_NAME_MAX);
        goto done;
    }
    snprintf(out->name, sizeof out->name, "%s", name);
    if (!op_type || !kvf_origin_name_ok(op_type)) {
        rc = kvf_error_set(err, KVF_EINVAL, "definition %s has no op_type naming its folder", name);
        goto done;
    }
    snprintf(out->op_type, sizeof out->op_type, "%s", op_type);
    if (!json_is_object(inputs) || !json_is_object(outputs) || !json_is_object(axes)) {
        rc = kvf_error_set(err, KVF_EINVAL,
                           "definition %s lacks its axes, inputs or outputs object", name);
        goto done;
    }
    char have[512];
    key_list(inputs, have, sizeof have);
    static const char *const want7 =
        "q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale";
    static const char *const want6 = "q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale";
    out->has_last_page_len = strcmp(have, want7) == 0;
    if (strncmp(name, KVF_FIB_FAMILY, strlen(KVF_FIB_FAMILY)) != 0 ||
        (!out->has_last_page_len && strcmp(have, want6) != 0)) {
        rc = kvf_error_set(err, KVF_EINVAL,
                           "definition %s is not paged decode: kvfuzz imports " KVF_FIB_FAMILY
                           " definitions taking (%s), and this one takes (%s)",
                           name, want7, have);
        goto done;
    }
    for (int i = 0; i < IN_COUNT; i++) {
        if (i == IN_LAST && !out->has_last_page_len) continue;
        if ((rc = check_spec(name, "input", json_object_get(inputs, inputs_want[i].name),
                             &inputs_want[i], err)))
            goto done;
    }
    key_list(outputs, have, sizeof have);
    if (strcmp(have, "output, lse") != 0) {
        rc = kvf_error_set(err, KVF_EINVAL,
                           "definition %s writes (%s); gqa_paged_decode writes (output, lse)", name,
                           have);
        goto done;
    }
    for (int i = 0; i < 2; i++)
        if ((rc = check_spec(name, "output", json_object_get(outputs, outputs_want[i].name),
                             &outputs_want[i], err)))
            goto done;
    int32_t *fields[4] = {&out->num_qo_heads, &out->num_kv_heads, &out->head_dim, &out->page_size};
    for (int i = 0; i < 4; i++) {
        json_t *ax = json_object_get(axes, const_axes[i]);
        const char *type = get_str(ax, "type");
        json_t *v = json_object_get(ax, "value");
        if (!type || strcmp(type, "const") != 0 || !json_is_integer(v) ||
            json_integer_value(v) < 1 || json_integer_value(v) > 65535) {
            rc = kvf_error_set(err, KVF_EINVAL,
                               "definition %s's axis %s is not const with a value in [1, 65535]",
                               name, const_axes[i]);
            goto done;
        }
        *fields[i] = (int32_t)json_integer_value(v);
    }
    for (int i = 0; i < 4; i++) {
        const char *type = get_str(json_object_get(axes, var_axes[i]), "type");
        if (!type || strcmp(type, "var") != 0) {
            rc = kvf_error_set(err, KVF_EINVAL, "definition %s's axis %s is not var", name,
                               var_axes[i]);
            goto done;
        }
    }
    if (!out->has_last_page_len && out->page_size != 1) {
        rc = kvf_error_set(err, KVF_EINVAL,
                           "definition %s has no kv_last_page_len input, which only page size 1 "
                           "can do without (its page size is %d)",
                           name, out->page_size);
        goto done;
    }
done:
    json_decref(d);
    return rc;
}

int kvf_fib_definition_load(kvf_fib_definition *out, const char *path, kvf_error *err) {
    char *text;
    size_t n;
    memset(out, 0, sizeof *out);
    int rc = kvf_read_file_max(path, (size_t)64 << 20, &text, &n, err);
    if (rc) return rc;
    rc = kvf_fib_definition_parse(out, text, n, path, err);
    free(text);
    return rc;
}

/* ---- import --------------------------------------------------------------------------------- */

#define MAX_BLOBS 16

typedef struct import_ctx {
    const kvf_fib_definition *def;
    const kvf_fib_import_opts *opts;
    const char *uuid;
    char paths[MAX_BLOBS][PATH_MAX];
    kvf_st_file blobs[MAX_BLOBS];
    int nblobs;
    kvf_error *err;
} import_ctx;

static void ctx_free(import_ctx *x) {
    for (int i = 0; i < x->nblobs; i++)
        kvf_st_free(&x->blobs[i]);
}

static int load_blob(import_ctx *x, const char *rel, const kvf_st_file **out) {
    char path[PATH_MAX];
    const char *root = x->opts->root && *x->opts->root ? x->opts->root : ".";
    if ((size_t)snprintf(path, sizeof path, "%s/%s", rel[0] == '/' ? "" : root, rel) >= sizeof path)
        return kvf_error_set(x->err, KVF_EINVAL, "workload %s's blob path %.80s is too long",
                             x->uuid, rel);
    const char *p = rel[0] == '/' ? rel : path;
    for (int i = 0; i < x->nblobs; i++)
        if (strcmp(x->paths[i], p) == 0) {
            *out = &x->blobs[i];
            return 0;
        }
    if (x->nblobs == MAX_BLOBS)
        return kvf_error_set(x->err, KVF_ELIMIT, "workload %s reads more than %d blob files",
                             x->uuid, MAX_BLOBS);
    /* A blob holds at most what a case may hold (its tensors within the resident limit). */
    size_t max = (size_t)x->opts->limits.max_resident_bytes * 2 + ((size_t)64 << 20);
    int rc = kvf_st_load(&x->blobs[x->nblobs], p, max, x->err);
    if (rc) return rc;
    snprintf(x->paths[x->nblobs], PATH_MAX, "%s", p);
    *out = &x->blobs[x->nblobs++];
    return 0;
}

static void shape_text(char *buf, size_t n, int rank, const int64_t *shape) {
    size_t at = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (at < n) snprintf(buf + at, n - at, "]");
}

/* The stored tensor of input `in`, checked against the definition's dtype and the shape the
 * workload's axes give it. */
static int get_tensor(import_ctx *x, json_t *desc, int in, int rank, const int64_t *shape,
                      const kvf_st_tensor **out) {
    const tensor_want *w = &inputs_want[in];
    const char *path = get_str(desc, "path"), *key = get_str(desc, "tensor_key");
    if (!path || !*path || !key || !*key)
        return kvf_error_set(x->err, KVF_EINVAL,
                             "workload %s's input %s is safetensors without a path and tensor_key",
                             x->uuid, w->name);
    const kvf_st_file *f = NULL;
    int rc = load_blob(x, path, &f);
    if (rc) return rc;
    const kvf_st_tensor *t = kvf_st_find(f, key);
    if (!t)
        return kvf_error_set(x->err, KVF_EINVAL,
                             "workload %s's blob %.120s has no tensor \"%.40s\"", x->uuid, path,
                             key);
    int same = t->dtype == w->st_dtype && t->rank == rank;
    for (int i = 0; same && i < rank; i++)
        same = t->shape[i] == shape[i];
    /* A scalar may also be stored with shape [1]. */
    if (rank == 0 && t->dtype == w->st_dtype && t->rank == 1 && t->shape[0] == 1) same = 1;
    if (!same) {
        char have[160], want[160];
        shape_text(have, sizeof have, t->rank, t->shape);
        shape_text(want, sizeof want, rank, shape);
        return kvf_error_set(x->err, KVF_EINVAL,
                             "workload %s's %s is %s %s in %.100s, but the definition says %s %s",
                             x->uuid, w->name, kvf_st_dtype_name(t->dtype), have, path, w->dtype,
                             want);
    }
    *out = t;
    return 0;
}

static int32_t le_i32(const uint8_t *p) {
    return (int32_t)((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                     ((uint32_t)p[3] << 24));
}

static void fill_random(kvf_bf16 *dst, int64_t n, uint64_t seed, uint64_t stream) {
    kvf_prng rng;
    kvf_prng_seed_stream(&rng, seed, stream);
    for (int64_t i = 0; i < n; i++)
        dst[i] = kvf_f32_to_bf16_rne((float)kvf_prng_normal(&rng));
}

static int parse_random_meta(import_ctx *x, const kvf_st_file *f, kvf_origin *o) {
    const char *inputs = kvf_st_meta(f, "kvfuzz.random_inputs");
    const char *seed = kvf_st_meta(f, "kvfuzz.random_seed");
    if (!inputs && !seed) return 0;
    uint8_t bits = 0;
    char *end = NULL;
    int bad = !inputs || !seed || !*seed || *seed == '-';
    if (!bad) {
        char buf[64];
        snprintf(buf, sizeof buf, "%s", inputs);
        for (char *tok = strtok(buf, ","); tok && !bad; tok = strtok(NULL, ",")) {
            if (strcmp(tok, "q") == 0)
                bits |= KVF_ORIGIN_RANDOM_Q;
            else if (strcmp(tok, "k_cache") == 0)
                bits |= KVF_ORIGIN_RANDOM_K;
            else if (strcmp(tok, "v_cache") == 0)
                bits |= KVF_ORIGIN_RANDOM_V;
            else
                bad = 1;
        }
        errno = 0;
        unsigned long long v = strtoull(seed, &end, 10);
        bad |= errno != 0 || *end != 0 || strlen(inputs) >= sizeof buf;
        o->random_seed = v;
    }
    if (bad)
        return kvf_error_set(x->err, KVF_EINVAL,
                             "workload %s's blob metadata kvfuzz.random_inputs / "
                             "kvfuzz.random_seed is not a list of q, k_cache, v_cache and a seed",
                             x->uuid);
    o->random_inputs = bits;
    return 0;
}

static int axis_value(import_ctx *x, json_t *axes, const char *name, int64_t *v) {
    json_t *a = json_object_get(axes, name);
    if (!json_is_integer(a) || json_integer_value(a) < 0)
        return kvf_error_set(x->err, KVF_EINVAL,
                             "workload %s has no non-negative integer value for the axis %s",
                             x->uuid, name);
    *v = json_integer_value(a);
    return 0;
}

int kvf_fib_import(kvf_spec *out, const kvf_fib_definition *def, const char *line, size_t size,
                   const char *what, const kvf_fib_import_opts *opts, kvf_error *err) {
    memset(out, 0, sizeof *out);
    json_error_t jerr;
    json_t *root = json_loadb(line, size, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return kvf_error_set(err, KVF_EINVAL, "%s is not JSON: %s (column %d)", what, jerr.text,
                             jerr.column);
    import_ctx x = {.def = def, .opts = opts, .uuid = "?", .err = err};
    int rc = 0;
    json_t *w = json_object_get(root, "workload");
    if (!json_is_object(root)) {
        rc = kvf_error_set(err, KVF_EINVAL, "%s is not a JSON object", what);
        goto done;
    }
    if (w) {
        const char *dn = get_str(root, "definition");
        if (!dn || strcmp(dn, def->name) != 0) {
            rc = kvf_error_set(err, KVF_EINVAL, "%s is a workload of %.80s, not of %s", what,
                               dn ? dn : "no definition", def->name);
            goto done;
        }
    } else {
        w = root;
    }
    const char *uuid = get_str(w, "uuid");
    json_t *axes = json_object_get(w, "axes"), *inputs = json_object_get(w, "inputs");
    if (!json_is_object(w) || !uuid || !kvf_origin_name_ok(uuid)) {
        rc = kvf_error_set(err, KVF_EINVAL,
                           "%s has no workload uuid of 1 to %d characters [A-Za-z0-9_.-]", what,
                           KVF_ORIGIN_NAME_MAX);
        goto done;
    }
    x.uuid = uuid;
    if (!json_is_object(axes) || !json_is_object(inputs)) {
        rc = kvf_error_set(err, KVF_EINVAL, "workload %s has no axes and inputs objects", uuid);
        goto done;
    }
    int64_t batch, pool, len_indptr, entries;
    if ((rc = axis_value(&x, axes, "batch_size", &batch)) ||
        (rc = axis_value(&x, axes, "num_pages", &pool)) ||
        (rc = axis_value(&x, axes, "len_indptr", &len_indptr)) ||
        (rc = axis_value(&x, axes, "num_kv_indices", &entries)))
        goto done;
    if (len_indptr != batch + 1) {
        rc = kvf_error_set(err, KVF_EINVAL,
                           "workload %s has len_indptr %" PRId64 " but batch_size %" PRId64
                           " (FIB's constraint is len_indptr == batch_size + 1)",
                           uuid, len_indptr, batch);
        goto done;
    }
    const kvf_limits *lim = &opts->limits;
    int64_t hq = def->num_qo_heads, hk = def->num_kv_heads, d = def->head_dim, s = def->page_size;
    if (hq > 255 || hk > 255 || hq > lim->max_qo_heads || d > lim->max_head_dim ||
        s > lim->max_page_size || batch > 65535 || batch > lim->max_batch ||
        pool > lim->max_pool_pages || pool > INT32_MAX || entries > lim->max_table_entries) {
        rc = kvf_error_set(err, KVF_ELIMIT,
                           "workload %s (batch %" PRId64 ", %" PRId64 " pages of %" PRId64
                           ", %" PRId64 " table entries, %" PRId64 " q heads) exceeds kvfuzz's "
                           "case limits",
                           uuid, batch, pool, s, entries, hq);
        goto done;
    }
    int64_t page_elems = s * hk * d, q_elems = batch * hq * d;
    if (pool * page_elems * 2 > lim->max_pool_bytes ||
        pool * page_elems * 4 + q_elems * 2 > lim->max_resident_bytes) {
        rc = kvf_error_set(err, KVF_ELIMIT,
                           "workload %s's page pool of %" PRId64 " pages (%" PRId64
                           " bytes per cache) exceeds kvfuzz's size limits",
                           uuid, pool, pool * page_elems * 2);
        goto done;
    }
    /* Every input the workload describes must be one the definition has. */
    const char *key;
    json_t *desc;
    json_object_foreach(inputs, key, desc) {
        int known = 0;
        for (int i = 0; i < IN_COUNT; i++)
            known |=
                strcmp(key, inputs_want[i].name) == 0 && (i != IN_LAST || def->has_last_page_len);
        const char *type = get_str(desc, "type");
        if (!known) {
            rc = kvf_error_set(err, KVF_EINVAL, "workload %s has an input %.40s that %s does not",
                               uuid, key, def->name);
            goto done;
        }
        if (!type ||
            (strcmp(type, "random") && strcmp(type, "scalar") && strcmp(type, "safetensors"))) {
            rc = kvf_error_set(err, KVF_EINVAL,
                               "workload %s's input %s has type %.32s, not random, scalar or "
                               "safetensors",
                               uuid, key, type ? type : "(none)");
            goto done;
        }
    }
    int64_t shapes[IN_COUNT][4] = {
        {batch, hq, d}, {pool, s, hk, d}, {pool, s, hk, d}, {batch + 1}, {entries}, {batch}, {0}};
    const kvf_st_tensor *t[IN_COUNT] = {0};
    uint8_t random_bits = 0;
    for (int i = 0; i < IN_COUNT; i++) {
        if (i == IN_LAST && !def->has_last_page_len) continue;
        const tensor_want *wi = &inputs_want[i];
        desc = json_object_get(inputs, wi->name);
        const char *type = desc ? get_str(desc, "type") : "random"; /* absent: FIB draws it */
        if (strcmp(type, "safetensors") == 0) {
            if ((rc = get_tensor(&x, desc, i, wi->rank < 0 ? 0 : wi->rank, shapes[i], &t[i])))
                goto done;
            continue;
        }
        if (i == IN_SCALE && strcmp(type, "scalar") == 0) continue;
        if (i <= IN_V && strcmp(type, "random") == 0) {
            random_bits |= (uint8_t)(1u << i);
            continue;
        }
        if (strcmp(type, "random") == 0 && i >= IN_INDPTR && i <= IN_LAST)
            rc = kvf_error_set(
                err, KVF_EINVAL,
                "workload %s leaves %s random: FIB would fill it with randint(-1024, 1024), "
                "which is no valid page table%s; kvfuzz needs it stored in a blob",
                uuid, wi->name,
                i == IN_LAST ? " (FIB's decode tracing saves only kv_indptr, "
                               "kv_indices and sm_scale)"
                             : "");
        else
            rc = kvf_error_set(err, KVF_EINVAL,
                               "workload %s's %s is %s, which kvfuzz cannot take for it (%s)", uuid,
                               wi->name, type,
                               i == IN_SCALE ? "give a scalar value or a float32 tensor"
                                             : "give a tensor or leave it random");
        goto done;
    }
    /* The page table. */
    const uint8_t *ip = t[IN_INDPTR]->data, *ix = t[IN_INDICES]->data;
    if (le_i32(ip) != 0) {
        rc = kvf_error_set(err, KVF_EINVAL, "workload %s's kv_indptr[0] is %d, not 0", uuid,
                           le_i32(ip));
        goto done;
    }
    if (le_i32(ip + 4 * batch) != entries) {
        rc =
            kvf_error_set(err, KVF_EINVAL,
                          "workload %s's kv_indptr ends at %d but there are %" PRId64 " kv_indices",
                          uuid, le_i32(ip + 4 * batch), entries);
        goto done;
    }
    kvf_recipe *rp = &out->recipe;
    rp->num_qo_heads = (uint8_t)hq;
    rp->num_kv_heads = (uint8_t)hk;
    rp->head_dim = (uint16_t)d;
    rp->page_size = (uint16_t)s;
    rp->table = KVF_TABLE_CONTIGUOUS;
    rp->seed = opts->seed;
    if ((rc = kvf_spec_set_batch(out, (uint16_t)batch, err))) goto done;
    for (int64_t b = 0; b < batch; b++) {
        int32_t lo = le_i32(ip + 4 * b), hi = le_i32(ip + 4 * (b + 1));
        if (hi < lo || hi - lo > 65535) {
            rc = kvf_error_set(err, KVF_EINVAL,
                               "workload %s's kv_indptr gives sequence %" PRId64 " %d pages "
                               "(%d to %d), outside [0, 65535]",
                               uuid, b, hi - lo, lo, hi);
            goto done;
        }
        int32_t last = def->has_last_page_len ? le_i32(t[IN_LAST]->data + 4 * b) : 1;
        if (hi > lo && (last < 1 || last > s)) {
            rc = kvf_error_set(err, KVF_EINVAL,
                               "workload %s's kv_last_page_len[%" PRId64
                               "] is %d, outside 1..%" PRId64
                               " (the page size); FIB's reference would have clamped it "
                               "silently",
                               uuid, b, last, s);
            goto done;
        }
        rp->num_pages[b] = (uint16_t)(hi - lo);
        /* An empty sequence reads no page: FIB's reference gives o = 0, lse = -inf whatever its
         * kv_last_page_len, and kvfuzz's case model writes that as 0. */
        rp->last_page_len[b] = (uint16_t)(hi > lo ? last : 0);
    }
    float scale;
    if (t[IN_SCALE]) {
        scale = kvf_f32_from_bits((uint32_t)le_i32(t[IN_SCALE]->data));
    } else {
        json_t *v = json_object_get(json_object_get(inputs, "sm_scale"), "value");
        if (!json_is_number(v)) {
            rc = kvf_error_set(err, KVF_EINVAL, "workload %s's sm_scale scalar has no number value",
                               uuid);
            goto done;
        }
        scale = (float)json_number_value(v);
    }
    if (!isfinite(scale)) {
        rc = kvf_error_set(err, KVF_EINVAL, "workload %s's sm_scale %g is not a finite float32",
                           uuid, (double)scale);
        goto done;
    }
    rp->sm_scale = scale;
    if ((rc = kvf_recipe_check(rp, lim, err))) goto done;

    kvf_explicit *ex = &out->explicit_tensors;
    int64_t pool_elems = pool * page_elems;
    ex->num_pages = pool;
    ex->kv_indices = malloc((size_t)(entries ? entries : 1) * 4);
    ex->q = malloc((size_t)(q_elems ? q_elems : 1) * 2);
    ex->k_cache = malloc((size_t)(pool_elems ? pool_elems : 1) * 2);
    ex->v_cache = malloc((size_t)(pool_elems ? pool_elems : 1) * 2);
    if (!ex->kv_indices || !ex->q || !ex->k_cache || !ex->v_cache) {
        rc = kvf_error_set(err, KVF_ENOMEM, "out of memory importing workload %s", uuid);
        goto done;
    }
    out->has_explicit = 1;
    for (int64_t i = 0; i < entries; i++) {
        int32_t id = le_i32(ix + 4 * i);
        if (id < 0 || id >= pool) {
            rc = kvf_error_set(err, KVF_EINVAL,
                               "workload %s's kv_indices[%" PRId64 "] = %d is outside the page "
                               "pool [0, %" PRId64 ")",
                               uuid, i, id, pool);
            goto done;
        }
        ex->kv_indices[i] = id;
    }
    kvf_bf16 *dst[3] = {ex->q, ex->k_cache, ex->v_cache};
    int64_t counts[3] = {q_elems, pool_elems, pool_elems};
    for (int i = 0; i < 3; i++) {
        if (t[i])
            memcpy(dst[i], t[i]->data, (size_t)counts[i] * 2);
        else
            fill_random(dst[i], counts[i], opts->seed, (uint64_t)i + 1);
    }
    out->has_origin = 1;
    kvf_origin *o = &out->origin;
    snprintf(o->definition, sizeof o->definition, "%s", def->name);
    snprintf(o->workload_uuid, sizeof o->workload_uuid, "%s", uuid);
    o->random_inputs = random_bits;
    o->random_seed = opts->seed;
    /* A blob kvfuzz exported remembers which inputs an earlier import drew, and from what. */
    for (int i = 0; !random_bits && i < x.nblobs; i++)
        if (kvf_st_find(&x.blobs[i], get_str(json_object_get(inputs, "q"), "tensor_key")) ==
                t[IN_Q] &&
            (rc = parse_random_meta(&x, &x.blobs[i], o)))
            goto done;
done:
    ctx_free(&x);
    json_decref(root);
    if (rc) kvf_spec_free(out);
    return rc;
}

/* ---- export --------------------------------------------------------------------------------- */

void kvf_fib_definition_name(char *out, size_t size, int32_t hq, int32_t hk, int32_t d, int32_t s) {
    snprintf(out, size, KVF_FIB_FAMILY "_h%d_kv%d_d%d_ps%d", hq, hk, d, s);
}

/* FIB's semantics in a torch reference of kvfuzz's own writing (docs/fib.md): fp32 logits and
 * softmax, lse in base 2, an empty sequence gives o = 0 and lse = -inf, and the last page's
 * length is clamped into [0, page_size] the way a slice clamps it. */
static const char reference_py[] =
    "import math\n"
    "\n"
    "import torch\n"
    "\n"
    "\n"
    "@torch.no_grad()\n"
    "def run(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):\n"
    "    batch_size, num_qo_heads, head_dim = q.shape\n"
    "    _, page_size, num_kv_heads, _ = k_cache.shape\n"
    "    group = num_qo_heads // num_kv_heads\n"
    "    output = torch.zeros((batch_size, num_qo_heads, head_dim), dtype=torch.bfloat16, "
    "device=q.device)\n"
    "    lse = torch.full((batch_size, num_qo_heads), -math.inf, dtype=torch.float32, "
    "device=q.device)\n"
    "    for b in range(batch_size):\n"
    "        start, end = int(kv_indptr[b]), int(kv_indptr[b + 1])\n"
    "        if start >= end:\n"
    "            continue  # no tokens: output 0, lse -inf\n"
    "        pages = kv_indices[start:end].to(torch.long)\n"
    "        last = min(max(int(kv_last_page_len[b]), 0), page_size)\n"
    "        tokens = (end - start - 1) * page_size + last\n"
    "        k = k_cache[pages].reshape(-1, num_kv_heads, head_dim)[:tokens].to(torch.float32)\n"
    "        v = v_cache[pages].reshape(-1, num_kv_heads, head_dim)[:tokens].to(torch.float32)\n"
    "        qb = q[b].to(torch.float32).reshape(num_kv_heads, group, head_dim)\n"
    "        logits = torch.einsum(\"hgd,thd->hgt\", qb, k) * sm_scale\n"
    "        lse[b] = (torch.logsumexp(logits, dim=-1) / math.log(2.0)).reshape(num_qo_heads)\n"
    "        weights = torch.softmax(logits, dim=-1)\n"
    "        o = torch.einsum(\"hgt,thd->hgd\", weights, v)\n"
    "        output[b] = o.reshape(num_qo_heads, head_dim).to(torch.bfloat16)\n"
    "    return output, lse\n";

static json_t *tensor_spec(const tensor_want *w, const char *description) {
    json_t *shape;
    if (w->rank < 0) {
        shape = json_null();
    } else {
        shape = json_array();
        for (int i = 0; i < w->rank; i++)
            json_array_append_new(shape, json_string(w->shape[i]));
    }
    return json_pack("{s:o, s:s, s:s}", "shape", shape, "dtype", w->dtype, "description",
                     description);
}

char *kvf_fib_definition_json(int32_t hq, int32_t hk, int32_t d, int32_t s) {
    char name[160];
    kvf_fib_definition_name(name, sizeof name, hq, hk, d, s);
    json_t *axes = json_pack(
        "{s:{s:s, s:s}, s:{s:s, s:i}, s:{s:s, s:i}, s:{s:s, s:i}, s:{s:s, s:s}, s:{s:s, s:i}, "
        "s:{s:s, s:s}, s:{s:s, s:s}}",
        "batch_size", "type", "var", "description", "sequences in the batch", "num_qo_heads",
        "type", "const", "value", hq, "num_kv_heads", "type", "const", "value", hk, "head_dim",
        "type", "const", "value", d, "num_pages", "type", "var", "description",
        "pages in the KV-cache pool", "page_size", "type", "const", "value", s, "len_indptr",
        "type", "var", "description", "batch_size + 1", "num_kv_indices", "type", "var",
        "description", "page-table entries, kv_indptr[-1]");
    static const char *const in_desc[IN_COUNT] = {
        "one query token per sequence",
        "paged key cache (NHD)",
        "paged value cache (NHD)",
        "sequence b's pages are kv_indices[kv_indptr[b]:kv_indptr[b + 1]]",
        "page ids into k_cache and v_cache",
        "tokens in each sequence's last page",
        "softmax scale"};
    json_t *inputs = json_object();
    for (int i = 0; i < IN_COUNT; i++)
        json_object_set_new(inputs, inputs_want[i].name, tensor_spec(&inputs_want[i], in_desc[i]));
    json_t *outputs = json_object();
    json_object_set_new(outputs, "output", tensor_spec(&outputs_want[0], "attention output"));
    json_object_set_new(outputs, "lse",
                        tensor_spec(&outputs_want[1], "log-sum-exp of the scaled logits, base 2"));
    char desc[256];
    snprintf(desc, sizeof desc,
             "Batched GQA decode over a paged KV cache: %d query heads sharing %d KV heads, "
             "head dim %d, page size %d.",
             hq, hk, d, s);
    json_t *def =
        json_pack("{s:s, s:s, s:s, s:[s, s], s:o, s:[s, s], s:o, s:o, s:s}", "name", name,
                  "op_type", KVF_FIB_OP_TYPE, "description", desc, "tags", "stage:decode",
                  "status:verified", "axes", axes, "constraints", "len_indptr == batch_size + 1",
                  "num_kv_indices == kv_indptr[-1].item()", "inputs", inputs, "outputs", outputs,
                  "reference", reference_py);
    if (!def) return NULL;
    char *text = json_dumps(def, JSON_INDENT(2));
    json_decref(def);
    if (!text) return NULL;
    size_t n = strlen(text);
    char *with_nl = realloc(text, n + 2);
    if (!with_nl) {
        free(text);
        return NULL;
    }
    with_nl[n] = '\n';
    with_nl[n + 1] = 0;
    return with_nl;
}

static int mkdirs(const char *dir, kvf_error *err) {
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s", dir) >= sizeof path)
        return kvf_error_set(err, KVF_EIO, "the path %.80s is too long", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return kvf_error_set(err, KVF_EIO, "cannot create %s: %s", path, strerror(errno));
        *p = '/';
    }
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return kvf_error_set(err, KVF_EIO, "cannot create %s: %s", path, strerror(errno));
    return 0;
}

int kvf_fib_export(const char *root, const char *def_name, const char *uuid, const kvf_spec *spec,
                   const kvf_case *c, char **line, kvf_error *err) {
    *line = NULL;
    if (!kvf_origin_name_ok(def_name) || !kvf_origin_name_ok(uuid))
        return kvf_error_set(err, KVF_EINVAL, "%.80s / %.80s cannot name a FIB blob", def_name,
                             uuid);
    /* A blob holds the whole pool: refuse pools a FIB run could not load either. */
    if (c->pool_bytes > ((size_t)1 << 30))
        return kvf_error_set(err, KVF_ELIMIT,
                             "the case's page pool is %zu bytes per cache; a FIB blob holds every "
                             "page, and kvfuzz writes at most 1 GiB per cache",
                             c->pool_bytes);
    /* Names are at most KVF_ORIGIN_NAME_MAX characters, so the relative paths fit. */
    char rel_dir[512], rel[1024], dir[PATH_MAX], path[PATH_MAX];
    snprintf(rel_dir, sizeof rel_dir, "blob/workloads/" KVF_FIB_OP_TYPE "/%.128s", def_name);
    snprintf(rel, sizeof rel, "%s/%.128s_%.128s.safetensors", rel_dir, def_name, uuid);
    if ((size_t)snprintf(dir, sizeof dir, "%s/%s", root, rel_dir) >= sizeof dir ||
        (size_t)snprintf(path, sizeof path, "%s/%s", root, rel) >= sizeof path)
        return kvf_error_set(err, KVF_EIO, "the dataset path %.80s is too long", root);
    int rc = mkdirs(dir, err);
    if (rc) return rc;
    int64_t B = c->batch_size, entries = c->kv_indptr[B];
    kvf_st_out t[IN_COUNT - 1] = {
        {"q", KVF_ST_BF16, 3, {B, c->num_qo_heads, c->head_dim}, c->q},
        {"k_cache",
         KVF_ST_BF16,
         4,
         {c->num_pages, c->page_size, c->num_kv_heads, c->head_dim},
         c->k_cache},
        {"v_cache",
         KVF_ST_BF16,
         4,
         {c->num_pages, c->page_size, c->num_kv_heads, c->head_dim},
         c->v_cache},
        {"kv_indptr", KVF_ST_I32, 1, {B + 1}, c->kv_indptr},
        {"kv_indices", KVF_ST_I32, 1, {entries}, c->kv_indices},
        {"kv_last_page_len", KVF_ST_I32, 1, {B}, c->kv_last_page_len},
    };
    const char *mk[2] = {"kvfuzz.random_inputs", "kvfuzz.random_seed"};
    char inputs[64] = "", seed[32] = "";
    const char *mv[2] = {inputs, seed};
    if (spec->has_origin) {
        const kvf_origin *o = &spec->origin;
        snprintf(inputs, sizeof inputs, "%s%s%s%s%s",
                 (o->random_inputs & KVF_ORIGIN_RANDOM_Q) ? "q" : "",
                 (o->random_inputs & KVF_ORIGIN_RANDOM_Q) && (o->random_inputs & 6) ? "," : "",
                 (o->random_inputs & KVF_ORIGIN_RANDOM_K) ? "k_cache" : "",
                 (o->random_inputs & KVF_ORIGIN_RANDOM_K) && (o->random_inputs & 4) ? "," : "",
                 (o->random_inputs & KVF_ORIGIN_RANDOM_V) ? "v_cache" : "");
        snprintf(seed, sizeof seed, "%" PRIu64, o->random_seed);
    }
    rc = kvf_st_write(path, t, IN_COUNT - 1, mk, mv, spec->has_origin ? 2 : 0, err);
    if (rc) return rc;
    json_t *in = json_object();
    for (int i = 0; i < IN_COUNT - 1; i++) {
        json_object_set_new(in, inputs_want[i].name,
                            json_pack("{s:s, s:s, s:s}", "type", "safetensors", "path", rel,
                                      "tensor_key", inputs_want[i].name));
    }
    json_object_set_new(in, "sm_scale",
                        json_pack("{s:s, s:f}", "type", "scalar", "value", (double)c->sm_scale));
    json_t *w = json_pack("{s:s, s:{s:I, s:I, s:I, s:I}, s:o}", "uuid", uuid, "axes", "batch_size",
                          (json_int_t)B, "num_pages", (json_int_t)c->num_pages, "len_indptr",
                          (json_int_t)(B + 1), "num_kv_indices", (json_int_t)entries, "inputs", in);
    *line = w ? json_dumps(w, JSON_COMPACT) : NULL;
    json_decref(w);
    if (!*line) return kvf_error_set(err, KVF_ENOMEM, "out of memory writing workload %s", uuid);
    return 0;
}
