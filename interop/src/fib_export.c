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
    /* FlashInfer-Bench's paged decode definitions take bf16 caches without scales: exporting
     * the images of FP8 bytes would drop the quantization silently. */
    if (!kvf_kv_quant_is_plain(&c->quant)) {
        char text[96];
        kvf_kv_quant_text(&c->quant, text, sizeof text);
        return kvf_error_set(err, KVF_EINVAL,
                             "the case has quantized caches (%s), and FlashInfer-Bench's paged "
                             "decode definitions take bf16 k_cache and v_cache without scales",
                             text);
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
    /* One-token pages are always full: FIB's page-size-1 definitions have no kv_last_page_len
     * (it is the last input before sm_scale, so leaving it out is dropping the last tensor). */
    int ntensors = c->page_size == 1 ? IN_COUNT - 2 : IN_COUNT - 1;
    rc = kvf_st_write(path, t, (size_t)ntensors, mk, mv, spec->has_origin ? 2 : 0, err);
    if (rc) return rc;
    json_t *in = json_object();
    for (int i = 0; i < ntensors; i++) {
        json_object_set_new(in, kvf__fib_inputs[i].name,
                            json_pack("{s:s, s:s, s:s}", "type", "safetensors", "path", rel,
                                      "tensor_key", kvf__fib_inputs[i].name));
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
