/* FlashInfer-Bench Solution JSON files (solution.h). */

#include "kvfuzz/file.h"
#include "kvfuzz/fp8.h"
#include "kvfuzz/json_io.h"
#include "solution.h"

#include <errno.h>
#include <glob.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFINITION_FAMILY "gqa_paged_decode"

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void kvf__solution_free(kvf__solution *s) {
    if (!s) return;
    if (s->dir) (void)kvf_remove_tree(s->dir);
    free(s->name);
    free(s->definition);
    free(s->language);
    free(s->dir);
    free(s->entry_file);
    free(s->function);
    free(s->definition_path);
    memset(s, 0, sizeof *s);
}

static const char *get_string(json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* A source path must stay inside the folder: relative, no "..", no empty component. */
static int safe_relative(const char *path) {
    if (!*path || path[0] == '/') return 0;
    for (const char *p = path; *p;) {
        const char *end = strchr(p, '/');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 0 || (n == 2 && p[0] == '.' && p[1] == '.')) return 0;
        p += n + (end ? 1 : 0);
    }
    return 1;
}

static int write_source(const char *dir, const char *rel, const char *content, size_t size,
                        kvf_error *err) {
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, rel) >= sizeof path)
        return kvf_error_set(err, KVF_EINVAL, "source path %s is too long", rel);
    /* Folders along the way (sources may live in packages). */
    for (char *slash = strchr(path + strlen(dir) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = 0;
        if (mkdir(path, 0700) != 0 && errno != EEXIST) {
            int e = errno;
            *slash = '/';
            return kvf_error_set(err, KVF_EIO, "cannot create %s: %s", path, strerror(e));
        }
        *slash = '/';
    }
    FILE *f = fopen(path, "wx");
    if (!f) return kvf_error_set(err, KVF_EIO, "cannot write %s: %s", path, strerror(errno));
    int bad = fwrite(content, 1, size, f) != size;
    bad |= fclose(f) != 0;
    if (bad) return kvf_error_set(err, KVF_EIO, "cannot write %s", path);
    return 0;
}

/* gqa_paged_decode_h32_kv8_d128_ps1 fixes Hq 32, Hk 8, D 128, S 1; other names fix nothing. */
static void shape_from_name(kvf__solution *s) {
    int hq, hk, d, ps, n = 0;
    const char *rest = s->definition + strlen(DEFINITION_FAMILY);
    if (sscanf(rest, "_h%d_kv%d_d%d_ps%d%n", &hq, &hk, &d, &ps, &n) == 4 && rest[n] == 0 &&
        hq > 0 && hk > 0 && d > 0 && ps > 0) {
        s->num_qo_heads = hq;
        s->num_kv_heads = hk;
        s->head_dim = d;
        s->page_size = ps;
    }
}

/* The definition file for `def`, looked for as solution.h says; NULL when there is none. */
static char *find_definition(const char *solution_path, const char *def) {
    char dir[PATH_MAX], pattern[PATH_MAX + 64];
    if (!realpath(solution_path, dir)) return NULL;
    char *slash = strrchr(dir, '/');
    if (!slash) return NULL;
    *slash = 0;
    snprintf(pattern, sizeof pattern, "%s/%s.json", dir, def);
    if (access(pattern, R_OK) == 0) return dup_str(pattern);
    for (;;) {
        const char *forms[2] = {"%s/definitions/%s.json", "%s/definitions/*/%s.json"};
        /* Both names match only themselves: a folder named "data[1]" is not "data1". */
        char ldir[PATH_MAX], ldef[PATH_MAX];
        if (kvf_glob_escape(dir, ldir, sizeof ldir) || kvf_glob_escape(def, ldef, sizeof ldef))
            return NULL;
        for (int f = 0; f < 2; f++) {
            snprintf(pattern, sizeof pattern, forms[f], ldir, ldef);
            glob_t g;
            if (glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0) {
                char *hit = dup_str(g.gl_pathv[0]);
                globfree(&g);
                return hit;
            }
            globfree(&g);
        }
        slash = strrchr(dir, '/');
        if (!slash || slash == dir) return NULL;
        *slash = 0;
    }
}

/* A JSON file read like a case file (kvf_read_file_max): a FIFO or a device is refused, not
 * waited on or read to its end; duplicate keys are refused. 0, or a code with one sentence. */
static int load_json(const char *path, const char *what, json_t **out, kvf_error *err) {
    char *text;
    size_t n;
    int rc = kvf_read_file_max(path, (size_t)16 << 20, &text, &n, err);
    if (rc) return rc;
    char msg[256];
    *out = kvf_json_parse_text(text, n, msg, sizeof msg);
    free(text);
    return *out ? 0 : kvf_error_set(err, KVF_EINVAL, "%s %s is not JSON: %s", what, path, msg);
}

/* The caches' dtype of a definition: bf16, or one FP8 dtype for both caches, which the
 * signature's scales (num_args 10 or 11) come with. */
static int cache_dtype(kvf__solution *s, json_t *inputs, kvf_error *err) {
    int dts[2];
    static const char *const caches[2] = {"k_cache", "v_cache"};
    for (int w = 0; w < 2; w++) {
        const char *dt = get_string(json_object_get(inputs, caches[w]), "dtype");
        /* No dtype: bf16, as every definition kvfuzz took before FP8 ones. */
        dts[w] = !dt || strcmp(dt, "bfloat16") == 0 ? KVF_KV_BF16 : kvf_kv_dtype_parse(dt);
        if (dts[w] < 0)
            return kvf_error_set(err, KVF_EINVAL, "definition %s gives %s the dtype %s",
                                 s->definition, caches[w], dt);
    }
    if (dts[0] != dts[1])
        return kvf_error_set(err, KVF_EINVAL,
                             "definition %s gives k_cache and v_cache different dtypes",
                             s->definition);
    const int fp8 = kvf_kv_dtype_is_fp8(dts[0]), scaled = s->num_args >= 10;
    if (fp8 != scaled)
        return kvf_error_set(err, KVF_EINVAL,
                             "definition %s has %s caches %s k_scale and v_scale; kvfuzz runs "
                             "bf16 caches without scales and FP8 caches with one scale each",
                             s->definition, kvf_kv_dtype_name(dts[0]), scaled ? "with" : "without");
    s->kv_dtype = dts[0];
    return 0;
}

/* Checks a definition's signature against kvfuzz's call and takes its const axes. */
static int check_definition(kvf__solution *s, const char *path, kvf_error *err) {
    static const char *const want9 =
        "q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale";
    static const char *const want8 = "q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale";
    /* FP8 definitions (docs/fib.md): one f32 scale per cache after sm_scale. */
    static const char *const want11 = "q, k_cache, v_cache, kv_indptr, kv_indices, "
                                      "kv_last_page_len, sm_scale, k_scale, v_scale";
    static const char *const want10 =
        "q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale, k_scale, v_scale";
    json_t *d;
    int lrc = load_json(path, "definition", &d, err);
    if (lrc) return lrc;
    int rc = 0;
    const char *name = get_string(d, "name");
    json_t *inputs = json_object_get(d, "inputs"), *outputs = json_object_get(d, "outputs");
    json_t *axes = json_object_get(d, "axes");
    char have[512];
    if (name && strcmp(name, s->definition) != 0) {
        rc = kvf_error_set(err, KVF_EINVAL, "definition file %s defines %s, not %s", path, name,
                           s->definition);
        goto done;
    }
    if (!json_is_object(inputs) || !json_is_object(outputs)) {
        rc =
            kvf_error_set(err, KVF_EINVAL, "definition %s has no inputs and outputs objects", path);
        goto done;
    }
    kvf_json_key_list(inputs, have, sizeof have);
    if (strcmp(have, want9) == 0) {
        s->num_args = 9;
    } else if (strcmp(have, want8) == 0) {
        s->num_args = 8;
    } else if (strcmp(have, want11) == 0) {
        s->num_args = 11;
    } else if (strcmp(have, want10) == 0) {
        s->num_args = 10;
    } else {
        rc = kvf_error_set(err, KVF_EINVAL,
                           "definition %s takes (%s); kvfuzz calls (%s) with the outputs after",
                           s->definition, have, want9);
        goto done;
    }
    kvf_json_key_list(outputs, have, sizeof have);
    if (strcmp(have, "output, lse") != 0) {
        rc =
            kvf_error_set(err, KVF_EINVAL, "definition %s writes (%s); kvfuzz passes (output, lse)",
                          s->definition, have);
        goto done;
    }
    static const char *const names[4] = {"num_qo_heads", "num_kv_heads", "head_dim", "page_size"};
    int32_t *fields[4] = {&s->num_qo_heads, &s->num_kv_heads, &s->head_dim, &s->page_size};
    for (int i = 0; i < 4 && json_is_object(axes); i++) {
        json_t *ax = json_object_get(axes, names[i]);
        const char *type = get_string(ax, "type");
        json_t *value = json_object_get(ax, "value");
        if (type && strcmp(type, "const") == 0 && json_is_integer(value))
            *fields[i] = (int32_t)json_integer_value(value);
    }
    if ((rc = cache_dtype(s, inputs, err))) goto done;
    /* Without kv_last_page_len every last page is full: well defined for one-token pages. */
    if ((s->num_args == 8 || s->num_args == 10) && s->page_size != 1) {
        rc = kvf_error_set(err, KVF_EINVAL,
                           "definition %s has no kv_last_page_len input, which kvfuzz can leave "
                           "out only for page size 1",
                           s->definition);
        goto done;
    }
done:
    json_decref(d);
    return rc;
}

int kvf__solution_load(const char *path, kvf__solution *out, kvf_error *err) {
    memset(out, 0, sizeof *out);
    if (access(path, R_OK) != 0)
        return kvf_error_set(err, KVF_ENOTFOUND, "cannot read solution %s: %s", path,
                             strerror(errno));
    json_t *root;
    int lrc = load_json(path, "solution", &root, err);
    if (lrc) return lrc;
    int rc = 0;
    json_t *spec = json_object_get(root, "spec"), *sources = json_object_get(root, "sources");
    const char *name = get_string(root, "name"), *definition = get_string(root, "definition");
    if (!json_is_object(root) || !name || !*name) {
        rc = kvf_error_set(err, KVF_EINVAL, "solution %s has no name", path);
        goto done;
    }
    if (!definition || !*definition) {
        rc = kvf_error_set(err, KVF_EINVAL, "solution %s names no definition", name);
        goto done;
    }
    if (strncmp(definition, DEFINITION_FAMILY, strlen(DEFINITION_FAMILY)) != 0) {
        rc = kvf_error_set(err, KVF_EINVAL,
                           "solution %s solves %s, which is not a " DEFINITION_FAMILY " definition",
                           name, definition);
        goto done;
    }
    if (!json_is_object(spec)) {
        rc = kvf_error_set(err, KVF_EINVAL, "solution %s has no spec object", name);
        goto done;
    }
    const char *language = get_string(spec, "language");
    if (!language) {
        rc = kvf_error_set(err, KVF_EINVAL, "solution %s names no spec.language", name);
        goto done;
    }
    if (strcmp(language, "python") != 0 && strcmp(language, "triton") != 0) {
        rc = kvf_error_set(err, KVF_EINVAL,
                           "solution %s is written in %s; kvfuzz runs python and triton "
                           "solutions (build a %s kernel as a plugin)",
                           name, language, language);
        goto done;
    }
    const char *entry = get_string(spec, "entry_point");
    const char *sep = entry ? strstr(entry, "::") : NULL;
    if (!entry || !*entry) {
        rc = kvf_error_set(
            err, KVF_EINVAL,
            "solution %s has no entry point (spec.entry_point, \"file.py::function\")", name);
        goto done;
    }
    if (!sep || sep == entry || !sep[2] || sep - entry < 4 || strncmp(sep - 3, ".py", 3) != 0) {
        rc =
            kvf_error_set(err, KVF_EINVAL,
                          "solution %s's entry point %s is not \"file.py::function\"", name, entry);
        goto done;
    }
    json_t *dps = json_object_get(spec, "destination_passing_style");
    if (dps && !json_is_true(dps)) {
        rc = kvf_error_set(err, KVF_EINVAL,
                           "solution %s returns its outputs (destination_passing_style is not "
                           "true); kvfuzz calls solutions in destination-passing style",
                           name);
        goto done;
    }
    if (!json_is_array(sources) || json_array_size(sources) == 0) {
        rc = kvf_error_set(err, KVF_EINVAL, "solution %s has no sources", name);
        goto done;
    }
    char entry_file[PATH_MAX];
    snprintf(entry_file, sizeof entry_file, "%.*s", (int)(sep - entry), entry);
    int have_entry = 0;
    size_t i;
    json_t *src;
    json_array_foreach(sources, i, src) {
        const char *sp = get_string(src, "path");
        json_t *content = json_object_get(src, "content");
        if (!sp || !json_is_string(content)) {
            rc = kvf_error_set(err, KVF_EINVAL,
                               "solution %s's source %zu is not {\"path\", \"content\"}", name, i);
            goto done;
        }
        if (!safe_relative(sp)) {
            rc = kvf_error_set(err, KVF_EINVAL, "solution %s's source path %s leaves its folder",
                               name, sp);
            goto done;
        }
        have_entry |= strcmp(sp, entry_file) == 0;
    }
    if (!have_entry) {
        rc = kvf_error_set(err, KVF_EINVAL,
                           "solution %s has no source file %s, which its entry point %s names",
                           name, entry_file, entry);
        goto done;
    }

    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/kvfuzz-solution-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        rc = kvf_error_set(err, KVF_EIO, "cannot create a folder for solution %s: %s", name,
                           strerror(errno));
        goto done;
    }
    if (!(out->dir = dup_str(dir)) || !(out->name = dup_str(name)) ||
        !(out->definition = dup_str(definition)) || !(out->language = dup_str(language)) ||
        !(out->entry_file = dup_str(entry_file)) || !(out->function = dup_str(sep + 2))) {
        rc = kvf_error_set(err, KVF_ENOMEM, "out of memory");
        goto done;
    }
    json_array_foreach(sources, i, src) {
        json_t *content = json_object_get(src, "content");
        if ((rc = write_source(dir, get_string(src, "path"), json_string_value(content),
                               json_string_length(content), err)))
            goto done;
    }
    shape_from_name(out);
    out->num_args = 9;
    out->definition_path = find_definition(path, definition);
    if (out->definition_path) rc = check_definition(out, out->definition_path, err);
done:
    json_decref(root);
    if (rc) kvf__solution_free(out);
    return rc;
}
