/* Cases into FIB workloads and blobs (fib.h, docs/fib.md "Export"). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fib_internal.h"
#include "kvfuzz/file.h"
#include "kvfuzz/safetensors.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the safetensors blobs are written straight from memory: little-endian hosts only"
#endif

int kvf_fib_check_exportable(const kvf_case *c, kvf_error *err) {
    /* A blob holds the whole pool: refuse pools a FIB run could not load either. */
    if (c->pool_bytes > ((size_t)1 << 30))
        return kvf_error_set(err, KVF_ELIMIT,
                             "the case's page pool is %zu bytes per cache; a FIB blob holds every "
                             "page, and kvfuzz writes at most 1 GiB per cache",
                             c->pool_bytes);
    /* The FP8 definitions take both caches in one FP8 dtype and one scale for each: any other
     * quantization would lose its scales or dtypes on the way, and be another operation. */
    const kvf_kv_quant *q = &c->quant;
    if (!kvf_kv_quant_is_plain(q) && !kvf__fib_quant_covered(q)) {
        char text[96];
        const char *why;
        kvf_kv_quant_text(q, text, sizeof text);
        if (q->k_dtype != q->v_dtype)
            why = "its caches differ in dtype, and an FP8 definition holds both in one";
        else if (q->granularity == KVF_SCALE_NONE)
            why = "its FP8 caches have no scales, and the FP8 definitions take k_scale and v_scale";
        else
            why = q->granularity == KVF_SCALE_HEAD
                      ? "its scales are per KV head, and the FP8 definitions take one scale per "
                        "cache"
                      : "its scales are per page slot and KV head, and the FP8 definitions take "
                        "one scale per cache";
        return kvf_error_set(err, KVF_EINVAL,
                             "the case's quantization (%s) has no FlashInfer-Bench definition: %s",
                             text, why);
    }
    /* No smaller valid shape keeps the case: num_kv_indices must equal kv_indptr[-1], so a
     * page-table entry could only come with a page for some sequence, another case. */
    if (c->batch_size == 0 || c->kv_indptr[c->batch_size] == 0)
        return kvf_error_set(err, KVF_EINVAL,
                             "the case has no page-table entry (%s), and FIB's validator requires "
                             "num_kv_indices, which must equal kv_indptr[-1], to be positive; a "
                             "batch with one sequence that has a page beside the empty ones "
                             "exports",
                             c->batch_size ? "every sequence is empty" : "its batch is empty");
    return 0;
}

/* One output as DefaultEvaluator sees it: 0, or 1 when the kernel's tensor holds an inf, 2 a
 * NaN (inf is tested first); else folds its maxima into ev and sets *exceeds. */
static int evaluate_output(int64_t n, const kvf_bf16 *o, const float *lse, const kvf_bf16 *ref_o,
                           const float *ref_lse, kvf_fib_evaluation *ev, int *exceeds) {
    int inf = 0, nan = 0;
    for (int64_t i = 0; i < n; i++) {
        float a = o ? kvf_bf16_to_f32(o[i]) : lse[i];
        inf |= isinf(a);
        nan |= isnan(a);
    }
    if (inf || nan) return inf ? 1 : 2;
    if (n == 0) return 0; /* compute_error_stats: (0.0, 0.0), which max() keeps out */
    const float atol = 1e-2f, rtol = 1e-2f, eps = 1e-8f; /* torch casts them to float32 */
    float max_abs = 0, max_rel = 0;
    int abs_nan = 0, rel_nan = 0;
    for (int64_t i = 0; i < n; i++) {
        float a = o ? kvf_bf16_to_f32(o[i]) : lse[i];
        float r = o ? kvf_bf16_to_f32(ref_o[i]) : ref_lse[i];
        float abs = fabsf(a - r);
        float rel = abs / (fabsf(r) + eps);
        *exceeds |= abs > atol && rel > rtol;
        abs_nan |= isnan(abs);
        rel_nan |= isnan(rel);
        if (abs > max_abs) max_abs = abs;
        if (rel > max_rel) max_rel = rel;
    }
    /* torch's max is NaN when an element is; Python's max(running, NaN) keeps running. */
    if (!abs_nan && max_abs > ev->max_absolute_error) ev->max_absolute_error = max_abs;
    if (!rel_nan && max_rel > ev->max_relative_error) ev->max_relative_error = max_rel;
    return 0;
}

void kvf_fib_evaluate(const kvf_case *c, const kvf_bf16 *o, const float *lse, const kvf_bf16 *ref_o,
                      const float *ref_lse, kvf_fib_evaluation *out) {
    memset(out, 0, sizeof *out);
    int exceeds = 0;
    for (int k = 0; k < 2; k++) {
        int stop =
            k == 0
                ? evaluate_output(kvf_case_o_elems(c), o, NULL, ref_o, NULL, out, &exceeds)
                : evaluate_output(kvf_case_lse_elems(c), NULL, lse, NULL, ref_lse, out, &exceeds);
        if (stop) {
            out->max_absolute_error = out->max_relative_error = stop == 1 ? INFINITY : NAN;
            out->stopped_at = k + 1;
            return;
        }
    }
    out->passed = !exceeds;
}

/* An FP8 cache's bytes from the bf16 images the case keeps (kvfuzz/fp8.h), into *out
 * (malloc'd). Only the pages holding data are converted: every other page is all zero bits, the
 * image of the byte 0. An element that is no image of the dtype's bytes is refused: the case
 * model puts none where a sequence reads, but the blob holds every element. */
static int fp8_bytes(const kvf_case *c, const kvf_bf16 *images, int dtype, const char *name,
                     uint8_t **out, kvf_error *err) {
    const int64_t pe = kvf_case_page_elems(c), n = c->num_pages * pe;
    uint8_t *bytes = calloc((size_t)(n ? n : 1), 1);
    int16_t *table = malloc(65536 * sizeof *table); /* image -> byte, -1: no image */
    if (!bytes || !table) {
        free(bytes);
        free(table);
        return kvf_error_set(err, KVF_ENOMEM, "out of memory writing the FP8 %s", name);
    }
    for (uint32_t b = 0; b < 65536; b++) {
        uint8_t x;
        table[b] = kvf_fp8_from_bf16_exact((kvf_bf16)b, dtype, &x) ? (int16_t)x : -1;
    }
    for (int64_t r = 0; r < c->num_resident_pages; r++) {
        const int64_t base = c->resident_pages[r] * pe;
        for (int64_t i = base; i < base + pe; i++) {
            if (table[images[i]] < 0) {
                free(bytes);
                free(table);
                return kvf_error_set(err, KVF_EINVAL,
                                     "%s element %" PRId64 " holds bf16 0x%04x, which is not an "
                                     "%s value",
                                     name, i, images[i], kvf_kv_dtype_name(dtype));
            }
            bytes[i] = (uint8_t)table[images[i]];
        }
    }
    free(table);
    *out = bytes;
    return 0;
}

/* The blob's tensors for case c: every input the definition of its shape and cache dtype takes
 * but sm_scale (a scalar in the workload), in the definition's order; FP8 caches from their
 * bytes in fp8[2]. Returns how many. */
static int blob_tensors(const kvf_case *c, int kv_dtype, uint8_t *const fp8[2],
                        kvf_st_out t[IN_COUNT]) {
    const int64_t B = c->batch_size, entries = c->kv_indptr[B];
    const int64_t pool[4] = {c->num_pages, c->page_size, c->num_kv_heads, c->head_dim};
    int n = 0;
    for (int i = 0; i < IN_COUNT; i++) {
        if (i == IN_SCALE || !kvf__fib_takes(i, c->page_size != 1, kv_dtype)) continue;
        const kvf__fib_tensor *w = kvf__fib_input(i, kv_dtype);
        kvf_st_out *o = &t[n++];
        memset(o, 0, sizeof *o);
        o->name = w->name;
        o->dtype = w->st_dtype;
        o->rank = w->rank;
        switch (i) {
        case IN_Q:
            o->shape[0] = B, o->shape[1] = c->num_qo_heads, o->shape[2] = c->head_dim;
            o->data = c->q;
            break;
        case IN_K:
        case IN_V:
            memcpy(o->shape, pool, sizeof pool);
            o->data = fp8[i - IN_K] ? (const void *)fp8[i - IN_K]
                                    : (const void *)(i == IN_K ? c->k_cache : c->v_cache);
            break;
        case IN_INDPTR:
            o->shape[0] = B + 1, o->data = c->kv_indptr;
            break;
        case IN_INDICES:
            o->shape[0] = entries, o->data = c->kv_indices;
            break;
        case IN_LAST:
            o->shape[0] = B, o->data = c->kv_last_page_len;
            break;
        default: /* k_scale, v_scale: one each */
            o->shape[0] = 1, o->data = i == IN_K_SCALE ? c->k_scale : c->v_scale;
            break;
        }
    }
    return n;
}

int kvf_fib_export(const char *root, const char *def_name, const char *uuid, const kvf_spec *spec,
                   const kvf_case *c, char **line, kvf_error *err) {
    *line = NULL;
    if (!kvf_origin_name_ok(def_name) || !kvf_origin_name_ok(uuid))
        return kvf_error_set(err, KVF_EINVAL, "%.80s / %.80s cannot name a FIB blob", def_name,
                             uuid);
    int rc = kvf_fib_check_exportable(c, err);
    if (rc) return rc;
    /* Names are at most KVF_ORIGIN_NAME_MAX characters, so the relative paths fit. */
    char rel_dir[512], rel[1024], dir[PATH_MAX], path[PATH_MAX];
    snprintf(rel_dir, sizeof rel_dir, "blob/workloads/" KVF_FIB_OP_TYPE "/%.128s", def_name);
    snprintf(rel, sizeof rel, "%s/%.128s_%.128s.safetensors", rel_dir, def_name, uuid);
    if ((size_t)snprintf(dir, sizeof dir, "%s/%s", root, rel_dir) >= sizeof dir ||
        (size_t)snprintf(path, sizeof path, "%s/%s", root, rel) >= sizeof path)
        return kvf_error_set(err, KVF_EIO, "the dataset path %.80s is too long", root);
    rc = kvf_mkdirs(dir, err);
    if (rc) return rc;
    const int kv_dtype = kvf__fib_case_kv_dtype(c);
    uint8_t *fp8[2] = {NULL, NULL};
    if (kvf_kv_dtype_is_fp8(kv_dtype) &&
        ((rc = fp8_bytes(c, c->k_cache, kv_dtype, "k_cache", &fp8[0], err)) ||
         (rc = fp8_bytes(c, c->v_cache, kv_dtype, "v_cache", &fp8[1], err)))) {
        free(fp8[0]);
        return rc;
    }
    kvf_st_out t[IN_COUNT];
    int ntensors = blob_tensors(c, kv_dtype, fp8, t);
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
    rc = kvf_st_write(path, t, (size_t)ntensors, mk, mv, spec->has_origin ? 2 : 0, err);
    free(fp8[0]);
    free(fp8[1]);
    if (rc) return rc;
    /* Every input but sm_scale is in the blob, in the definition's order. */
    json_t *in = json_object();
    for (int i = 0; i < IN_COUNT; i++) {
        if (!kvf__fib_takes(i, c->page_size != 1, kv_dtype)) continue;
        if (i == IN_SCALE)
            json_object_set_new(
                in, "sm_scale",
                json_pack("{s:s, s:f}", "type", "scalar", "value", (double)c->sm_scale));
        else
            json_object_set_new(in, kvf__fib_inputs[i].name,
                                json_pack("{s:s, s:s, s:s}", "type", "safetensors", "path", rel,
                                          "tensor_key", kvf__fib_inputs[i].name));
    }
    const int64_t B = c->batch_size;
    json_t *w =
        json_pack("{s:s, s:{s:I, s:I, s:I, s:I}, s:o}", "uuid", uuid, "axes", "batch_size",
                  (json_int_t)B, "num_pages", (json_int_t)c->num_pages, "len_indptr",
                  (json_int_t)(B + 1), "num_kv_indices", (json_int_t)c->kv_indptr[B], "inputs", in);
    *line = w ? json_dumps(w, JSON_COMPACT) : NULL;
    json_decref(w);
    if (!*line) return kvf_error_set(err, KVF_ENOMEM, "out of memory writing workload %s", uuid);
    return 0;
}
