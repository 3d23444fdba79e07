/* Cases into FIB workloads and blobs (fib.h, docs/fib.md "Export"). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
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
    int rc = kvf_mkdirs(dir, err);
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
