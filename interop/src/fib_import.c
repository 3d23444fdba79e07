/* FIB workloads into case specs (fib.h, docs/fib.md "Import"). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/json_io.h"
#include "fib_internal.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/safetensors.h"

#define MAX_BLOBS 16

typedef struct import_ctx {
    const kvf_fib_definition *def;
    const kvf_fib_import_opts *opts;
    const char *uuid;
    char paths[MAX_BLOBS][PATH_MAX];
    kvf_st_file blobs[MAX_BLOBS];
    int nblobs;
    size_t blob_bytes; /* of the blobs loaded so far */
    kvf_error *err;
} import_ctx;

static void ctx_free(import_ctx *x) {
    for (int i = 0; i < x->nblobs; i++)
        kvf_st_free(&x->blobs[i]);
}

/* Whether `rel` names a file outside the dataset root: an absolute path or one with a ".."
 * component. A trace file is input like any other, and its blob paths must not reach files the
 * user never pointed kvfuzz at. */
static int blob_path_leaves_root(const char *rel) {
    if (rel[0] == '/') return 1;
    for (const char *c = rel; *c;) {
        size_t n = strcspn(c, "/");
        if (n == 2 && c[0] == '.' && c[1] == '.') return 1;
        c += n;
        if (*c == '/') c++;
    }
    return 0;
}

static int load_blob(import_ctx *x, const char *rel, const kvf_st_file **out) {
    char path[PATH_MAX];
    const char *root = x->opts->root && *x->opts->root ? x->opts->root : ".";
    if (blob_path_leaves_root(rel))
        return kvf_error_set(x->err, KVF_EINVAL,
                             "workload %s's blob path %.80s leaves the dataset root (an absolute "
                             "path or a \"..\" component); FIB blob paths are relative to it",
                             x->uuid, rel);
    if ((size_t)snprintf(path, sizeof path, "%s/%s", root, rel) >= sizeof path)
        return kvf_error_set(x->err, KVF_EINVAL, "workload %s's blob path %.80s is too long",
                             x->uuid, rel);
    for (int i = 0; i < x->nblobs; i++)
        if (strcmp(x->paths[i], path) == 0) {
            *out = &x->blobs[i];
            return 0;
        }
    if (x->nblobs == MAX_BLOBS)
        return kvf_error_set(x->err, KVF_ELIMIT, "workload %s reads more than %d blob files",
                             x->uuid, MAX_BLOBS);
    /* The blobs of a workload hold at most what a case may hold (its tensors within the
     * resident limit), all of them together: each is read whole. */
    const size_t all = (size_t)x->opts->limits.max_resident_bytes * 2 + ((size_t)64 << 20);
    if (x->blob_bytes >= all)
        return kvf_error_set(x->err, KVF_ELIMIT,
                             "workload %s's blobs hold more than the %zu bytes a case may hold",
                             x->uuid, all);
    int rc = kvf_st_load(&x->blobs[x->nblobs], path, all - x->blob_bytes, x->err);
    if (rc) return rc;
    x->blob_bytes += x->blobs[x->nblobs].owned_bytes;
    snprintf(x->paths[x->nblobs], PATH_MAX, "%s", path);
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
    const kvf__fib_tensor *w = kvf__fib_input(in, x->def->kv_dtype);
    const char *path = kvf__fib_get_str(desc, "path"), *key = kvf__fib_get_str(desc, "tensor_key");
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

/* Values FIB's random inputs have: normal of variance 1 (torch.randn) rounded to bf16; for an
 * FP8 cache clamped to [-2, 2] first and rounded to the FP8 dtype (FIB's _rand_tensor), kept as
 * their bf16 images. */
static void fill_random(kvf_bf16 *dst, int64_t n, int dtype, uint64_t seed, uint64_t stream) {
    kvf_prng rng;
    kvf_prng_seed_stream(&rng, seed, stream);
    for (int64_t i = 0; i < n; i++) {
        double x = kvf_prng_normal(&rng);
        if (dtype == KVF_KV_BF16) {
            dst[i] = kvf_f32_to_bf16_rne((float)x);
            continue;
        }
        x = x < -2 ? -2 : x > 2 ? 2 : x;
        dst[i] = kvf_fp8_to_bf16(kvf_fp8_from_f32((float)x, dtype), dtype);
    }
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
    /* Workload.axes is Dict[str, NonNegativeInt]: what pydantic reads as one. */
    if (!kvf__fib_lax_uint(json_object_get(axes, name), v))
        return kvf_error_set(x->err, KVF_EINVAL,
                             "workload %s has no non-negative integer value for the axis %s",
                             x->uuid, name);
    return 0;
}

/* What one workload line gives the import: its JSON, its axes and the case's shape. */
typedef struct workload {
    const char *uuid;
    json_t *axes, *inputs;
    int64_t batch, pool, len_indptr, entries;
    int64_t hq, hk, d, s, page_elems, q_elems;
    const kvf_st_tensor *t[IN_COUNT];
    uint8_t random_bits;
} workload;

/* The workload object of `root` (a bare workload or a trace's), its uuid, axes and inputs. */
static int find_workload(import_ctx *x, workload *wl, json_t *root, const char *what) {
    const kvf_fib_definition *def = x->def;
    json_t *w = json_object_get(root, "workload");
    if (!json_is_object(root))
        return kvf_error_set(x->err, KVF_EINVAL, "%s is not a JSON object", what);
    if (w) {
        const char *dn = kvf__fib_get_str(root, "definition");
        if (!dn || strcmp(dn, def->name) != 0)
            return kvf_error_set(x->err, KVF_EINVAL, "%s is a workload of %.80s, not of %s", what,
                                 dn ? dn : "no definition", def->name);
    } else {
        w = root;
    }
    const char *uuid = kvf__fib_get_str(w, "uuid");
    json_t *axes = json_object_get(w, "axes"), *inputs = json_object_get(w, "inputs");
    if (!json_is_object(w) || !uuid || !kvf_origin_name_ok(uuid))
        return kvf_error_set(x->err, KVF_EINVAL,
                             "%s has no workload uuid of 1 to %d characters [A-Za-z0-9_.-]", what,
                             KVF_ORIGIN_NAME_MAX);
    x->uuid = wl->uuid = uuid;
    if (!json_is_object(axes) || !json_is_object(inputs))
        return kvf_error_set(x->err, KVF_EINVAL, "workload %s has no axes and inputs objects",
                             uuid);
    wl->axes = axes;
    wl->inputs = inputs;
    return 0;
}

/* The workload's axes, held to kvfuzz's case limits and, from the pool alone, to its memory
 * budget. */
static int read_axes(import_ctx *x, workload *wl) {
    const kvf_fib_definition *def = x->def;
    kvf_error *err = x->err;
    const char *uuid = wl->uuid;
    int rc;
    wl->batch = wl->pool = wl->len_indptr = wl->entries = 0; /* zeros only quiet gcc -O3 */
    if ((rc = axis_value(x, wl->axes, "batch_size", &wl->batch)) ||
        (rc = axis_value(x, wl->axes, "num_pages", &wl->pool)) ||
        (rc = axis_value(x, wl->axes, "len_indptr", &wl->len_indptr)) ||
        (rc = axis_value(x, wl->axes, "num_kv_indices", &wl->entries)))
        return rc;
    int64_t batch = wl->batch, pool = wl->pool, len_indptr = wl->len_indptr, entries = wl->entries;
    if (len_indptr - 1 != batch) /* both >= 0: batch + 1 could overflow */
        return kvf_error_set(err, KVF_EINVAL,
                             "workload %s has len_indptr %" PRId64 " but batch_size %" PRId64
                             " (FIB's constraint is len_indptr == batch_size + 1)",
                             uuid, len_indptr, batch);
    const kvf_limits *lim = &x->opts->limits;
    int64_t hq = def->num_qo_heads, hk = def->num_kv_heads, d = def->head_dim, s = def->page_size;
    if (hq > 255 || hk > 255 || hq > lim->max_qo_heads || d > lim->max_head_dim ||
        s > lim->max_page_size || batch > 65535 || batch > lim->max_batch ||
        pool > lim->max_pool_pages || pool > INT32_MAX || entries > lim->max_table_entries)
        return kvf_error_set(err, KVF_ELIMIT,
                             "workload %s (batch %" PRId64 ", %" PRId64 " pages of %" PRId64
                             ", %" PRId64 " table entries, %" PRId64 " q heads, %" PRId64
                             " kv heads, head dim %" PRId64 ") exceeds kvfuzz's case limits",
                             uuid, batch, pool, s, entries, hq, hk, d);
    int64_t page_elems = s * hk * d, q_elems = batch * hq * d;
    if (pool * page_elems * 2 > lim->max_pool_bytes ||
        pool * page_elems * 4 + q_elems * 2 > lim->max_resident_bytes)
        return kvf_error_set(err, KVF_ELIMIT,
                             "workload %s's page pool of %" PRId64 " pages (%" PRId64
                             " bytes per cache) exceeds kvfuzz's size limits",
                             uuid, pool, pool * page_elems * 2);
    wl->hq = hq;
    wl->hk = hk;
    wl->d = d;
    wl->s = s;
    wl->page_elems = page_elems;
    wl->q_elems = q_elems;
    /* The memory budget before any blob is read, from the pool alone (batch 0): the full check,
     * with the sequences' lengths, follows once the page table is known. */
    kvf_recipe shape = {.num_qo_heads = (uint8_t)hq,
                        .num_kv_heads = (uint8_t)hk,
                        .head_dim = (uint16_t)d,
                        .page_size = (uint16_t)s};
    return kvf_explicit_pool_budget(&shape, pool, lim, err);
}

/* Every input the workload describes must be one the definition has. */
static int check_input_names(import_ctx *x, const workload *wl) {
    const kvf_fib_definition *def = x->def;
    const char *key;
    json_t *desc;
    json_object_foreach(wl->inputs, key, desc) {
        int known = 0;
        for (int i = 0; i < IN_COUNT; i++)
            known |= strcmp(key, kvf__fib_inputs[i].name) == 0 &&
                     kvf__fib_takes(i, def->has_last_page_len, def->kv_dtype);
        const char *type = kvf__fib_input_type(desc);
        if (!known)
            return kvf_error_set(x->err, KVF_EINVAL,
                                 "workload %s has an input %.40s that %s does not", wl->uuid, key,
                                 def->name);
        if (!type ||
            (strcmp(type, "random") && strcmp(type, "scalar") && strcmp(type, "safetensors")))
            return kvf_error_set(x->err, KVF_EINVAL,
                                 "workload %s's input %s has type %.32s, not random, scalar or "
                                 "safetensors",
                                 wl->uuid, key, type ? type : "(none)");
    }
    return 0;
}

/* Each input's stored tensor, or which of q, k_cache and v_cache FIB would draw. */
static int get_inputs(import_ctx *x, workload *wl) {
    const char *uuid = wl->uuid;
    int64_t batch = wl->batch, pool = wl->pool, hq = wl->hq, hk = wl->hk, d = wl->d, s = wl->s;
    int64_t shapes[IN_COUNT][4] = {{batch, hq, d},
                                   {pool, s, hk, d},
                                   {pool, s, hk, d},
                                   {batch + 1},
                                   {wl->entries},
                                   {batch},
                                   {0},
                                   {1},
                                   {1}};
    wl->random_bits = 0;
    for (int i = 0; i < IN_COUNT; i++) {
        if (!kvf__fib_takes(i, x->def->has_last_page_len, x->def->kv_dtype)) continue;
        const kvf__fib_tensor *wi = &kvf__fib_inputs[i];
        json_t *desc = json_object_get(wl->inputs, wi->name);
        const char *type = desc ? kvf__fib_input_type(desc) : "random"; /* absent: FIB draws it */
        if (strcmp(type, "safetensors") == 0) {
            int rc = get_tensor(x, desc, i, wi->rank < 0 ? 0 : wi->rank, shapes[i], &wl->t[i]);
            if (rc) return rc;
            continue;
        }
        if (i == IN_SCALE && strcmp(type, "scalar") == 0) continue;
        if (i <= IN_V && strcmp(type, "random") == 0) {
            wl->random_bits |= (uint8_t)(1u << i);
            continue;
        }
        if (strcmp(type, "random") == 0 && i >= IN_INDPTR && i <= IN_LAST)
            return kvf_error_set(
                x->err, KVF_EINVAL,
                "workload %s leaves %s random: FIB would fill it with randint(-1024, 1024), "
                "which is no valid page table%s; kvfuzz needs it stored in a blob",
                uuid, wi->name,
                i == IN_LAST ? " (FIB's decode tracing saves only kv_indptr, "
                               "kv_indices and sm_scale)"
                             : "");
        if (strcmp(type, "random") == 0) /* k_scale, v_scale */
            return kvf_error_set(x->err, KVF_EINVAL,
                                 "workload %s leaves %s random: FIB would draw it with randn, "
                                 "which can be zero or negative, and the case model takes positive "
                                 "scales only; kvfuzz needs it stored in a blob",
                                 uuid, wi->name);
        return kvf_error_set(x->err, KVF_EINVAL,
                             "workload %s's %s is %s, which kvfuzz cannot take for it (%s)", uuid,
                             wi->name, type,
                             i == IN_SCALE     ? "give a scalar value or a float32 tensor"
                             : i >= IN_K_SCALE ? "give a float32 tensor of shape [1] in a blob"
                                               : "give a tensor or leave it random");
    }
    return 0;
}

/* The page table: the recipe's shape, batch and each sequence's pages. */
static int read_page_table(import_ctx *x, const workload *wl, kvf_spec *out) {
    kvf_error *err = x->err;
    const char *uuid = wl->uuid;
    int64_t batch = wl->batch, s = wl->s;
    const uint8_t *ip = wl->t[IN_INDPTR]->data;
    if (le_i32(ip) != 0)
        return kvf_error_set(err, KVF_EINVAL, "workload %s's kv_indptr[0] is %d, not 0", uuid,
                             le_i32(ip));
    if (le_i32(ip + 4 * batch) != wl->entries)
        return kvf_error_set(err, KVF_EINVAL,
                             "workload %s's kv_indptr ends at %d but there are %" PRId64
                             " kv_indices",
                             uuid, le_i32(ip + 4 * batch), wl->entries);
    kvf_recipe *rp = &out->recipe;
    rp->num_qo_heads = (uint8_t)wl->hq;
    rp->num_kv_heads = (uint8_t)wl->hk;
    rp->head_dim = (uint16_t)wl->d;
    rp->page_size = (uint16_t)s;
    rp->table = KVF_TABLE_CONTIGUOUS;
    rp->seed = x->opts->seed;
    int rc = kvf_spec_set_batch(out, (uint16_t)batch, err);
    if (rc) return rc;
    for (int64_t b = 0; b < batch; b++) {
        int32_t lo = le_i32(ip + 4 * b), hi = le_i32(ip + 4 * (b + 1));
        if (hi < lo || hi - lo > 65535)
            return kvf_error_set(err, KVF_EINVAL,
                                 "workload %s's kv_indptr gives sequence %" PRId64 " %d pages "
                                 "(%d to %d), outside [0, 65535]",
                                 uuid, b, hi - lo, lo, hi);
        int32_t last = x->def->has_last_page_len ? le_i32(wl->t[IN_LAST]->data + 4 * b) : 1;
        if (hi > lo && (last < 1 || last > s))
            return kvf_error_set(err, KVF_EINVAL,
                                 "workload %s's kv_last_page_len[%" PRId64
                                 "] is %d, outside 1..%" PRId64
                                 " (the page size); FIB's reference would have clamped it "
                                 "silently",
                                 uuid, b, last, s);
        rp->num_pages[b] = (uint16_t)(hi - lo);
        /* An empty sequence reads no page: FIB's reference gives o = 0, lse = -inf whatever its
         * kv_last_page_len, and kvfuzz's case model writes that as 0. */
        rp->last_page_len[b] = (uint16_t)(hi > lo ? last : 0);
    }
    return 0;
}

/* The softmax scale, stored or scalar, into the recipe. */
static int read_scale(import_ctx *x, const workload *wl, kvf_recipe *rp) {
    float scale;
    if (wl->t[IN_SCALE]) {
        scale = kvf_f32_from_bits((uint32_t)le_i32(wl->t[IN_SCALE]->data));
    } else {
        /* ScalarInput.value is Union[int, float, bool]: a number, or a string pydantic reads
         * as one; a boolean is no softmax scale. */
        json_t *v = json_object_get(json_object_get(wl->inputs, "sm_scale"), "value");
        double value;
        if (json_is_boolean(v) || !kvf__fib_lax_number(v, &value))
            return kvf_error_set(x->err, KVF_EINVAL,
                                 "workload %s's sm_scale scalar has no number value", wl->uuid);
        scale = (float)value;
    }
    if (!isfinite(scale))
        return kvf_error_set(x->err, KVF_EINVAL,
                             "workload %s's sm_scale %g is not a finite float32", wl->uuid,
                             (double)scale);
    rp->sm_scale = scale;
    return 0;
}

/* An FP8 definition's k_scale and v_scale into the spec's quantization: tensor scales whose
 * bases are the two values (kvfuzz/spec.h, kvf_quant_recipe), which the case model takes finite
 * and positive. */
static int read_kv_scales(import_ctx *x, const workload *wl, kvf_quant_recipe *q) {
    const int dtype = x->def->kv_dtype;
    if (!kvf_kv_dtype_is_fp8(dtype)) return 0;
    float v[2];
    for (int w = 0; w < 2; w++) {
        v[w] = kvf_f32_from_bits((uint32_t)le_i32(wl->t[IN_K_SCALE + w]->data));
        if (!(isfinite(v[w]) && v[w] > 0))
            return kvf_error_set(x->err, KVF_EINVAL,
                                 "workload %s's %s is %g; kvfuzz takes a finite, positive scale "
                                 "(the %s are %s * %s)",
                                 wl->uuid, kvf__fib_inputs[IN_K_SCALE + w].name, (double)v[w],
                                 w ? "values" : "keys", kvf__fib_inputs[IN_K_SCALE + w].name,
                                 w ? "v_cache" : "k_cache");
    }
    memset(q, 0, sizeof *q);
    q->kv.k_dtype = q->kv.v_dtype = (uint8_t)dtype;
    q->kv.granularity = KVF_SCALE_TENSOR;
    q->k_scale = v[0];
    q->v_scale = v[1];
    return kvf_quant_recipe_check(q, x->err);
}

/* The case's explicit tensors: the page indices, and q and the caches stored or drawn. */
static int fill_explicit(import_ctx *x, const workload *wl, kvf_spec *out) {
    kvf_explicit *ex = &out->explicit_tensors;
    int64_t pool = wl->pool, entries = wl->entries, q_elems = wl->q_elems;
    int64_t pool_elems = pool * wl->page_elems;
    ex->num_pages = pool;
    ex->kv_indices = malloc((size_t)(entries ? entries : 1) * 4);
    ex->q = malloc((size_t)(q_elems ? q_elems : 1) * 2);
    ex->k_cache = malloc((size_t)(pool_elems ? pool_elems : 1) * 2);
    ex->v_cache = malloc((size_t)(pool_elems ? pool_elems : 1) * 2);
    if (!ex->kv_indices || !ex->q || !ex->k_cache || !ex->v_cache)
        return kvf_error_set(x->err, KVF_ENOMEM, "out of memory importing workload %s", wl->uuid);
    out->has_explicit = 1;
    const uint8_t *ix = wl->t[IN_INDICES]->data;
    for (int64_t i = 0; i < entries; i++) {
        int32_t id = le_i32(ix + 4 * i);
        if (id < 0 || id >= pool)
            return kvf_error_set(x->err, KVF_EINVAL,
                                 "workload %s's kv_indices[%" PRId64 "] = %d is outside the page "
                                 "pool [0, %" PRId64 ")",
                                 wl->uuid, i, id, pool);
        ex->kv_indices[i] = id;
    }
    kvf_bf16 *dst[3] = {ex->q, ex->k_cache, ex->v_cache};
    int64_t counts[3] = {q_elems, pool_elems, pool_elems};
    for (int i = 0; i < 3; i++) {
        const int dtype = i == IN_Q ? KVF_KV_BF16 : x->def->kv_dtype;
        if (!wl->t[i]) {
            fill_random(dst[i], counts[i], dtype, x->opts->seed, (uint64_t)i + 1);
        } else if (dtype == KVF_KV_BF16) {
            memcpy(dst[i], wl->t[i]->data, (size_t)counts[i] * 2);
        } else { /* every byte is an FP8 value or NaN, and has its image */
            const uint8_t *bytes = wl->t[i]->data;
            kvf_bf16 image[256];
            for (int b = 0; b < 256; b++)
                image[b] = kvf_fp8_to_bf16((uint8_t)b, dtype);
            for (int64_t e = 0; e < counts[i]; e++)
                dst[i][e] = image[bytes[e]];
        }
    }
    return 0;
}

/* The case's origin: the definition, the workload and what was drawn from which seed. */
static int set_origin(import_ctx *x, const workload *wl, kvf_spec *out) {
    out->has_origin = 1;
    kvf_origin *o = &out->origin;
    snprintf(o->definition, sizeof o->definition, "%s", x->def->name);
    snprintf(o->workload_uuid, sizeof o->workload_uuid, "%s", wl->uuid);
    o->random_inputs = wl->random_bits;
    o->random_seed = x->opts->seed;
    /* A blob kvfuzz exported remembers which inputs an earlier import drew, and from what. */
    for (int i = 0; !wl->random_bits && i < x->nblobs; i++) {
        int rc;
        if (kvf_st_find(&x->blobs[i], kvf__fib_get_str(json_object_get(wl->inputs, "q"),
                                                       "tensor_key")) == wl->t[IN_Q] &&
            (rc = parse_random_meta(x, &x->blobs[i], o)))
            return rc;
    }
    return 0;
}

int kvf_fib_import(kvf_spec *out, const kvf_fib_definition *def, const char *line, size_t size,
                   const char *what, const kvf_fib_import_opts *opts, kvf_error *err) {
    memset(out, 0, sizeof *out);
    char jmsg[256];
    json_t *root = kvf_json_parse_text(line, size, jmsg, sizeof jmsg);
    if (!root) return kvf_error_set(err, KVF_EINVAL, "%s is not JSON: %s", what, jmsg);
    import_ctx x = {.def = def, .opts = opts, .uuid = "?", .err = err};
    workload wl = {0};
    int rc = find_workload(&x, &wl, root, what);
    if (!rc) rc = read_axes(&x, &wl);
    if (!rc) rc = check_input_names(&x, &wl);
    if (!rc) rc = get_inputs(&x, &wl);
    if (!rc) rc = read_page_table(&x, &wl, out);
    if (!rc) rc = read_scale(&x, &wl, &out->recipe);
    if (!rc) rc = read_kv_scales(&x, &wl, &out->quant);
    if (!rc) rc = kvf_recipe_check(&out->recipe, &opts->limits, err);
    /* The budget the case file will be held to when read, before the pool is allocated. */
    if (!rc) rc = kvf_explicit_pool_budget(&out->recipe, wl.pool, &opts->limits, err);
    if (!rc) rc = fill_explicit(&x, &wl, out);
    if (!rc) rc = set_origin(&x, &wl, out);
    ctx_free(&x);
    json_decref(root);
    if (rc) kvf_spec_free(out);
    return rc;
}
