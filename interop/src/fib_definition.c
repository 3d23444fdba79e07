/* FIB definitions (fib.h): the gqa_paged_decode signature, reading a definition and writing
 * the one FIB gives a shape. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/json_io.h"
#include "fib_internal.h"
#include "kvfuzz/file.h"
#include "kvfuzz/safetensors.h"

/* FIB's DType names (flashinfer_bench/data/definition.py); float8_e4m3 is the older spelling. */
static const char *const fib_dtypes[] = {
    "float32",     "float16", "bfloat16", "float8_e4m3fn", "float8_e4m3", "float8_e5m2",
    "float4_e2m1", "int64",   "int32",    "int16",         "int8",        "bool"};

const kvf__fib_tensor kvf__fib_inputs[IN_COUNT] = {
    {"q", "bfloat16", KVF_ST_BF16, 3, {"batch_size", "num_qo_heads", "head_dim"}},
    {"k_cache", "bfloat16", KVF_ST_BF16, 4, {"num_pages", "page_size", "num_kv_heads", "head_dim"}},
    {"v_cache", "bfloat16", KVF_ST_BF16, 4, {"num_pages", "page_size", "num_kv_heads", "head_dim"}},
    {"kv_indptr", "int32", KVF_ST_I32, 1, {"len_indptr"}},
    {"kv_indices", "int32", KVF_ST_I32, 1, {"num_kv_indices"}},
    {"kv_last_page_len", "int32", KVF_ST_I32, 1, {"batch_size"}},
    {"sm_scale", "float32", KVF_ST_F32, -1, {0}},
};

const kvf__fib_tensor kvf__fib_outputs[2] = {
    {"output", "bfloat16", KVF_ST_BF16, 3, {"batch_size", "num_qo_heads", "head_dim"}},
    {"lse", "float32", KVF_ST_F32, 2, {"batch_size", "num_qo_heads"}},
};

static const char *const const_axes[4] = {"num_qo_heads", "num_kv_heads", "head_dim", "page_size"};
static const char *const var_axes[4] = {"batch_size", "num_pages", "len_indptr", "num_kv_indices"};

const char *kvf__fib_get_str(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Python's str.strip() for ASCII: the span of s without leading and trailing blanks. */
static void strip_blanks(const char **b, const char **e) {
    while (*b < *e && **b && strchr(" \t\n\r\v\f", **b))
        (*b)++;
    while (*e > *b && (*e)[-1] && strchr(" \t\n\r\v\f", (*e)[-1]))
        (*e)--;
}

int kvf__fib_lax_uint(json_t *v, int64_t *out) {
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return *out >= 0;
    }
    if (json_is_boolean(v)) {
        *out = json_is_true(v);
        return 1;
    }
    if (json_is_real(v)) {
        double x = json_real_value(v);
        if (!isfinite(x) || x != floor(x) || x <= -1) return 0;
        *out = x >= 0x1p63 ? INT64_MAX : (int64_t)x;
        return 1;
    }
    if (!json_is_string(v)) return 0;
    const char *b = json_string_value(v), *e = b + json_string_length(v);
    strip_blanks(&b, &e);
    int negative = b < e && *b == '-';
    if (b < e && (*b == '+' || *b == '-')) b++;
    /* digit groups joined by single underscores */
    uint64_t x = 0;
    int digits = 0, clamped = 0;
    for (; b < e; b++) {
        if (*b >= '0' && *b <= '9') {
            if (x > (UINT64_MAX - 9) / 10) clamped = 1;
            x = clamped ? x : x * 10 + (uint64_t)(*b - '0');
            digits++;
        } else if (*b == '_' && digits && b + 1 < e && b[1] >= '0' && b[1] <= '9' && b[-1] != '_') {
            continue;
        } else {
            break;
        }
    }
    if (!digits) return 0;
    if (b < e && *b == '.') { /* "20.0" reads as 20, "20." does not */
        if (++b == e) return 0;
        for (; b < e && *b == '0'; b++)
            ;
    }
    if (b != e || (negative && x != 0)) return 0;
    *out = clamped || x > INT64_MAX ? INT64_MAX : (int64_t)x;
    return 1;
}

int kvf__fib_lax_number(json_t *v, double *out) {
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return 1;
    }
    if (json_is_boolean(v)) {
        *out = json_is_true(v);
        return 1;
    }
    if (!json_is_string(v)) return 0;
    const char *b = json_string_value(v), *e = b + json_string_length(v);
    strip_blanks(&b, &e);
    char buf[128];
    size_t n = 0;
    for (const char *p = b; p < e; p++) {
        if (*p == 'x' || *p == 'X' || *p == 'p' || *p == 'P' || !*p) return 0; /* no hex */
        /* an underscore only between digits, as Python's float() takes it */
        if (*p == '_') {
            if (p == b || p + 1 == e || p[-1] < '0' || p[-1] > '9' || p[1] < '0' || p[1] > '9')
                return 0;
            continue;
        }
        if (n + 1 == sizeof buf) return 0;
        buf[n++] = *p;
    }
    buf[n] = 0;
    if (!n) return 0;
    char *end;
    double x = strtod(buf, &end);
    if (*end) return 0;
    *out = x;
    return 1;
}

int kvf__fib_axis_kind(json_t *axis, int64_t *value) {
    if (!json_is_object(axis)) return 0;
    json_t *type = json_object_get(axis, "type");
    int is_uint = kvf__fib_lax_uint(json_object_get(axis, "value"), value);
    if (!type) return is_uint ? 'c' : 'v';
    const char *t = json_string_value(type);
    if (t && strcmp(t, "const") == 0) return is_uint ? 'c' : 0;
    if (t && strcmp(t, "var") == 0) return 'v';
    return 0;
}

const char *kvf__fib_input_type(json_t *desc) {
    if (!json_is_object(desc)) return NULL;
    json_t *type = json_object_get(desc, "type");
    if (type) return json_string_value(type);
    const char *path = kvf__fib_get_str(desc, "path"), *key = kvf__fib_get_str(desc, "tensor_key");
    double x;
    if (path && *path && key && *key) return "safetensors";
    if (kvf__fib_lax_number(json_object_get(desc, "value"), &x)) return "scalar";
    return "random";
}

static int known_fib_dtype(const char *s) {
    for (size_t i = 0; i < sizeof fib_dtypes / sizeof fib_dtypes[0]; i++)
        if (strcmp(s, fib_dtypes[i]) == 0) return 1;
    return 0;
}

/* One tensor spec of the definition against what kvfuzz runs. */
static int check_spec(const char *def, const char *kind, json_t *spec, const kvf__fib_tensor *w,
                      kvf_error *err) {
    const char *dtype = kvf__fib_get_str(spec, "dtype");
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
    char jmsg[256];
    json_t *d = kvf_json_parse_text(text, size, jmsg, sizeof jmsg);
    if (!d) return kvf_error_set(err, KVF_EINVAL, "definition %s is not JSON: %s", what, jmsg);
    int rc = 0;
    const char *name = json_is_object(d) ? kvf__fib_get_str(d, "name") : NULL;
    const char *op_type = json_is_object(d) ? kvf__fib_get_str(d, "op_type") : NULL;
    if (!op_type && json_is_object(d))
        op_type = kvf__fib_get_str(d, "type"); /* older FIB datasets */
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
    kvf_json_key_list(inputs, have, sizeof have);
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
        if ((rc = check_spec(name, "input", json_object_get(inputs, kvf__fib_inputs[i].name),
                             &kvf__fib_inputs[i], err)))
            goto done;
    }
    kvf_json_key_list(outputs, have, sizeof have);
    if (strcmp(have, "output, lse") != 0) {
        rc = kvf_error_set(err, KVF_EINVAL,
                           "definition %s writes (%s); gqa_paged_decode writes (output, lse)", name,
                           have);
        goto done;
    }
    for (int i = 0; i < 2; i++)
        if ((rc = check_spec(name, "output", json_object_get(outputs, kvf__fib_outputs[i].name),
                             &kvf__fib_outputs[i], err)))
            goto done;
    int32_t *fields[4] = {&out->num_qo_heads, &out->num_kv_heads, &out->head_dim, &out->page_size};
    /* An axis without "type" is what FIB's own writer makes of AxisConst(value=20) and
     * AxisVar(): {"value": 20} and {}. */
    for (int i = 0; i < 4; i++) {
        int64_t v = 0;
        if (kvf__fib_axis_kind(json_object_get(axes, const_axes[i]), &v) != 'c' || v < 1 ||
            v > 65535) {
            rc = kvf_error_set(err, KVF_EINVAL,
                               "definition %s's axis %s is not const with a value in [1, 65535]",
                               name, const_axes[i]);
            goto done;
        }
        *fields[i] = (int32_t)v;
    }
    for (int i = 0; i < 4; i++) {
        int64_t v;
        int kind = kvf__fib_axis_kind(json_object_get(axes, var_axes[i]), &v);
        if (kind != 'v') {
            rc = kvf_error_set(
                err, KVF_EINVAL, "definition %s's axis %s is not var%s", name, var_axes[i],
                kind == 'c' && !json_object_get(json_object_get(axes, var_axes[i]), "type")
                    ? " (FIB reads an axis with an integer value and no type as "
                      "const)"
                    : "");
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

void kvf_fib_definition_name(char *out, size_t size, int32_t hq, int32_t hk, int32_t d, int32_t s) {
    snprintf(out, size, KVF_FIB_FAMILY "_h%d_kv%d_d%d_ps%d", hq, hk, d, s);
}

/* FIB's semantics in a torch reference of kvfuzz's own writing (docs/fib.md): fp32 logits and
 * softmax, lse in base 2, an empty sequence gives o = 0 and lse = -inf, and the last page's
 * length is clamped into [0, page_size] the way a slice clamps it. Page size 1 has no
 * kv_last_page_len (FIB's ps1 definitions take six inputs): REF_SIGNATURE and REF_LAST differ. */
#define REF_SIGNATURE_7 "kv_indices, kv_last_page_len, sm_scale):\n"
#define REF_SIGNATURE_6 "kv_indices, sm_scale):\n"
#define REF_LAST_7 "        last = min(max(int(kv_last_page_len[b]), 0), page_size)\n"
#define REF_LAST_6 "        last = page_size  # one-token pages are always full\n"
#define REFERENCE(SIGNATURE, LAST)                                                                 \
    "import math\n"                                                                                \
    "\n"                                                                                           \
    "import torch\n"                                                                               \
    "\n"                                                                                           \
    "\n"                                                                                           \
    "@torch.no_grad()\n"                                                                           \
    "def run(q, k_cache, v_cache, kv_indptr, " SIGNATURE                                           \
    "    batch_size, num_qo_heads, head_dim = q.shape\n"                                           \
    "    _, page_size, num_kv_heads, _ = k_cache.shape\n"                                          \
    "    group = num_qo_heads // num_kv_heads\n"                                                   \
    "    output = torch.zeros((batch_size, num_qo_heads, head_dim), dtype=torch.bfloat16, "        \
    "device=q.device)\n"                                                                           \
    "    lse = torch.full((batch_size, num_qo_heads), -math.inf, dtype=torch.float32, "            \
    "device=q.device)\n"                                                                           \
    "    for b in range(batch_size):\n"                                                            \
    "        start, end = int(kv_indptr[b]), int(kv_indptr[b + 1])\n"                              \
    "        if start >= end:\n"                                                                   \
    "            continue  # no tokens: output 0, lse -inf\n"                                      \
    "        pages = kv_indices[start:end].to(torch.long)\n" LAST                                  \
    "        tokens = (end - start - 1) * page_size + last\n"                                      \
    "        k = k_cache[pages].reshape(-1, num_kv_heads, head_dim)[:tokens].to(torch.float32)\n"  \
    "        v = v_cache[pages].reshape(-1, num_kv_heads, head_dim)[:tokens].to(torch.float32)\n"  \
    "        qb = q[b].to(torch.float32).reshape(num_kv_heads, group, head_dim)\n"                 \
    "        logits = torch.einsum(\"hgd,thd->hgt\", qb, k) * sm_scale\n"                          \
    "        lse[b] = (torch.logsumexp(logits, dim=-1) / math.log(2.0)).reshape(num_qo_heads)\n"   \
    "        weights = torch.softmax(logits, dim=-1)\n"                                            \
    "        o = torch.einsum(\"hgt,thd->hgd\", weights, v)\n"                                     \
    "        output[b] = o.reshape(num_qo_heads, head_dim).to(torch.bfloat16)\n"                   \
    "    return output, lse\n"

static const char reference_7[] = REFERENCE(REF_SIGNATURE_7, REF_LAST_7);
static const char reference_6[] = REFERENCE(REF_SIGNATURE_6, REF_LAST_6);

static json_t *tensor_spec(const kvf__fib_tensor *w, const char *description) {
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
        if (i != IN_LAST || s != 1)
            json_object_set_new(inputs, kvf__fib_inputs[i].name,
                                tensor_spec(&kvf__fib_inputs[i], in_desc[i]));
    json_t *outputs = json_object();
    json_object_set_new(outputs, "output", tensor_spec(&kvf__fib_outputs[0], "attention output"));
    json_object_set_new(
        outputs, "lse",
        tensor_spec(&kvf__fib_outputs[1], "log-sum-exp of the scaled logits, base 2"));
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
                  "reference", s == 1 ? reference_6 : reference_7);
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
