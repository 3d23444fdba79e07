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
    {"k_scale", "float32", KVF_ST_F32, 1, {KVF__FIB_SCALE_AXIS}},
    {"v_scale", "float32", KVF_ST_F32, 1, {KVF__FIB_SCALE_AXIS}},
};

/* k_cache and v_cache of the FP8 definitions, by kvf_kv_dtype (KVF_KV_E4M3, KVF_KV_E5M2). */
static const kvf__fib_tensor fp8_caches[2][2] = {
    {{"k_cache",
      "float8_e4m3fn",
      KVF_ST_F8_E4M3,
      4,
      {"num_pages", "page_size", "num_kv_heads", "head_dim"}},
     {"v_cache",
      "float8_e4m3fn",
      KVF_ST_F8_E4M3,
      4,
      {"num_pages", "page_size", "num_kv_heads", "head_dim"}}},
    {{"k_cache",
      "float8_e5m2",
      KVF_ST_F8_E5M2,
      4,
      {"num_pages", "page_size", "num_kv_heads", "head_dim"}},
     {"v_cache",
      "float8_e5m2",
      KVF_ST_F8_E5M2,
      4,
      {"num_pages", "page_size", "num_kv_heads", "head_dim"}}},
};

const kvf__fib_tensor *kvf__fib_input(int in, int kv_dtype) {
    if ((in == IN_K || in == IN_V) && kvf_kv_dtype_is_fp8(kv_dtype))
        return &fp8_caches[kv_dtype - KVF_KV_E4M3][in - IN_K];
    return &kvf__fib_inputs[in];
}

int kvf__fib_takes(int in, int has_last, int kv_dtype) {
    if (in == IN_LAST) return has_last;
    if (in == IN_K_SCALE || in == IN_V_SCALE) return kvf_kv_dtype_is_fp8(kv_dtype);
    return in >= 0 && in < IN_COUNT;
}

const char *kvf__fib_kv_dtype_name(int kv_dtype) {
    return kvf_kv_dtype_is_fp8(kv_dtype) ? fp8_caches[kv_dtype - KVF_KV_E4M3][0].dtype : "bfloat16";
}

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

/* The input names a definition takes, in order, comma-separated. */
static void signature(char *buf, size_t n, int has_last, int kv_dtype) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < IN_COUNT && at < n; i++)
        if (kvf__fib_takes(i, has_last, kv_dtype))
            at +=
                (size_t)snprintf(buf + at, n - at, "%s%s", at ? ", " : "", kvf__fib_inputs[i].name);
}

int kvf__fib_quant_covered(const kvf_kv_quant *q) {
    return kvf_kv_dtype_is_fp8(q->k_dtype) && q->v_dtype == q->k_dtype &&
           q->granularity == KVF_SCALE_TENSOR;
}

int kvf__fib_case_kv_dtype(const kvf_case *c) {
    return kvf_kv_quant_is_plain(&c->quant) ? KVF_KV_BF16 : c->quant.k_dtype;
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
        int scale = w == &kvf__fib_inputs[IN_K_SCALE] || w == &kvf__fib_inputs[IN_V_SCALE];
        return kvf_error_set(err, KVF_EINVAL,
                             "definition %s's %s %s does not have the shape %s%s%s %s "
                             "gqa_paged_decode gives it",
                             def, kind, w->name, w->rank < 0 ? "null" : "[", want,
                             w->rank < 0 ? "" : "]", scale ? "kvfuzz's FP8" : "FIB's");
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
    char have[512], want[2][256];
    kvf_json_key_list(inputs, have, sizeof have);
    /* The caches' dtype picks the signature: FP8 caches come with their scales. */
    const char *kdt = kvf__fib_get_str(json_object_get(inputs, "k_cache"), "dtype");
    out->kv_dtype = kdt && strcmp(kdt, "float8_e4m3fn") == 0 ? KVF_KV_E4M3
                    : kdt && strcmp(kdt, "float8_e5m2") == 0 ? KVF_KV_E5M2
                                                             : KVF_KV_BF16;
    for (int last = 0; last < 2; last++)
        signature(want[last], sizeof want[last], last, out->kv_dtype);
    out->has_last_page_len = strcmp(have, want[1]) == 0;
    if (strncmp(name, KVF_FIB_FAMILY, strlen(KVF_FIB_FAMILY)) != 0 ||
        (!out->has_last_page_len && strcmp(have, want[0]) != 0)) {
        if (out->kv_dtype == KVF_KV_BF16)
            rc = kvf_error_set(err, KVF_EINVAL,
                               "definition %s is not paged decode: kvfuzz imports " KVF_FIB_FAMILY
                               " definitions taking (%s) (FP8 caches add k_scale, v_scale), and "
                               "this one takes (%s)",
                               name, want[1], have);
        else
            rc = kvf_error_set(err, KVF_EINVAL,
                               "definition %s is not paged decode as kvfuzz runs it: kvfuzz "
                               "imports " KVF_FIB_FAMILY " definitions with %s caches taking (%s), "
                               "and this one takes (%s)",
                               name, kdt, want[1], have);
        goto done;
    }
    const char *vdt = kvf__fib_get_str(json_object_get(inputs, "v_cache"), "dtype");
    if (out->kv_dtype != KVF_KV_BF16 && vdt && strcmp(vdt, kdt) != 0) {
        rc = kvf_error_set(err, KVF_EINVAL,
                           "definition %s's k_cache is %s and its v_cache %.32s; kvfuzz's FP8 "
                           "definitions hold both caches in one dtype",
                           name, kdt, vdt);
        goto done;
    }
    for (int i = 0; i < IN_COUNT; i++) {
        if (!kvf__fib_takes(i, out->has_last_page_len, out->kv_dtype)) continue;
        if ((rc = check_spec(name, "input", json_object_get(inputs, kvf__fib_inputs[i].name),
                             kvf__fib_input(i, out->kv_dtype), err)))
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
    /* One scale per cache: k = k_scale * k_cache over the whole pool. */
    int64_t nscales = 0;
    if (out->kv_dtype != KVF_KV_BF16 &&
        (kvf__fib_axis_kind(json_object_get(axes, KVF__FIB_SCALE_AXIS), &nscales) != 'c' ||
         nscales != 1)) {
        rc = kvf_error_set(err, KVF_EINVAL,
                           "definition %s's axis " KVF__FIB_SCALE_AXIS
                           " is not const with the value 1 (kvfuzz's FP8 definitions take one "
                           "k_scale and one v_scale per cache)",
                           name);
        goto done;
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

void kvf_fib_definition_name(char *out, size_t size, int32_t hq, int32_t hk, int32_t d, int32_t s,
                             int kv_dtype) {
    snprintf(out, size, KVF_FIB_FAMILY "_h%d_kv%d_d%d_ps%d%s%s", hq, hk, d, s,
             kvf_kv_dtype_is_fp8(kv_dtype) ? "_fp8_" : "",
             kvf_kv_dtype_is_fp8(kv_dtype) ? kvf_kv_dtype_name(kv_dtype) : "");
}

/* FIB's semantics in a torch reference of kvfuzz's own writing (docs/fib.md): fp32 logits and
 * softmax, lse in base 2, an empty sequence gives o = 0 and lse = -inf, and the last page's
 * length is clamped into [0, page_size] the way a slice clamps it. Page size 1 has no
 * kv_last_page_len (FIB's ps1 definitions take six inputs): REF_SIGNATURE and REF_LAST differ.
 * FP8 caches take k_scale and v_scale and are dequantized first (REF_DEQUANT), in float32,
 * the precision the rest computes in; the rest is the bf16 reference, word for word, so the two
 * differ only where the scales are. */
#define REF_SIGNATURE_7 "kv_indices, kv_last_page_len, sm_scale):\n"
#define REF_SIGNATURE_6 "kv_indices, sm_scale):\n"
#define REF_SIGNATURE_9 "kv_indices, kv_last_page_len, sm_scale, k_scale, v_scale):\n"
#define REF_SIGNATURE_8 "kv_indices, sm_scale, k_scale, v_scale):\n"
#define REF_LAST_7 "        last = min(max(int(kv_last_page_len[b]), 0), page_size)\n"
#define REF_LAST_6 "        last = page_size  # one-token pages are always full\n"
#define REF_DEQUANT                                                                                \
    "    # k = k_scale * k_cache and v = v_scale * v_cache, each product rounded to float32\n"     \
    "    k_cache = k_cache.to(torch.float32) * k_scale\n"                                          \
    "    v_cache = v_cache.to(torch.float32) * v_scale\n"
#define REFERENCE(SIGNATURE, DEQUANT, LAST)                                                        \
    "import math\n"                                                                                \
    "\n"                                                                                           \
    "import torch\n"                                                                               \
    "\n"                                                                                           \
    "\n"                                                                                           \
    "@torch.no_grad()\n"                                                                           \
    "def run(q, k_cache, v_cache, kv_indptr, " SIGNATURE DEQUANT                                   \
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

static const char reference_7[] = REFERENCE(REF_SIGNATURE_7, "", REF_LAST_7);
static const char reference_6[] = REFERENCE(REF_SIGNATURE_6, "", REF_LAST_6);
static const char reference_9[] = REFERENCE(REF_SIGNATURE_9, REF_DEQUANT, REF_LAST_7);
static const char reference_8[] = REFERENCE(REF_SIGNATURE_8, REF_DEQUANT, REF_LAST_6);

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

char *kvf_fib_definition_json(int32_t hq, int32_t hk, int32_t d, int32_t s, int kv_dtype) {
    if (kv_dtype < 0 || kv_dtype >= KVF_KV_DTYPE_COUNT) return NULL;
    const int fp8 = kvf_kv_dtype_is_fp8(kv_dtype);
    char name[160];
    kvf_fib_definition_name(name, sizeof name, hq, hk, d, s, kv_dtype);
    json_t *axes = json_pack(
        "{s:{s:s, s:s}, s:{s:s, s:i}, s:{s:s, s:i}, s:{s:s, s:i}, s:{s:s, s:s}, s:{s:s, s:i}, "
        "s:{s:s, s:s}, s:{s:s, s:s}}",
        "batch_size", "type", "var", "description", "sequences in the batch", "num_qo_heads",
        "type", "const", "value", hq, "num_kv_heads", "type", "const", "value", hk, "head_dim",
        "type", "const", "value", d, "num_pages", "type", "var", "description",
        "pages in the KV-cache pool", "page_size", "type", "const", "value", s, "len_indptr",
        "type", "var", "description", "batch_size + 1", "num_kv_indices", "type", "var",
        "description", "page-table entries, kv_indptr[-1]");
    if (fp8)
        json_object_set_new(axes, KVF__FIB_SCALE_AXIS,
                            json_pack("{s:s, s:i, s:s}", "type", "const", "value", 1, "description",
                                      "scales per cache: one for the whole cache"));
    static const char *const in_desc[IN_COUNT] = {
        "one query token per sequence",
        "paged key cache (NHD)",
        "paged value cache (NHD)",
        "sequence b's pages are kv_indices[kv_indptr[b]:kv_indptr[b + 1]]",
        "page ids into k_cache and v_cache",
        "tokens in each sequence's last page",
        "softmax scale",
        "key scale: the keys are k_scale * k_cache",
        "value scale: the values are v_scale * v_cache"};
    static const char *const fp8_desc[2] = {"paged key cache (NHD), scaled by k_scale",
                                            "paged value cache (NHD), scaled by v_scale"};
    json_t *inputs = json_object();
    for (int i = 0; i < IN_COUNT; i++)
        if (kvf__fib_takes(i, s != 1, kv_dtype))
            json_object_set_new(
                inputs, kvf__fib_inputs[i].name,
                tensor_spec(kvf__fib_input(i, kv_dtype),
                            fp8 && (i == IN_K || i == IN_V) ? fp8_desc[i - IN_K] : in_desc[i]));
    json_t *outputs = json_object();
    json_object_set_new(outputs, "output", tensor_spec(&kvf__fib_outputs[0], "attention output"));
    json_object_set_new(
        outputs, "lse",
        tensor_spec(&kvf__fib_outputs[1], "log-sum-exp of the scaled logits, base 2"));
    char desc[512], tag[64];
    int at = snprintf(desc, sizeof desc,
                      "Batched GQA decode over a paged KV cache: %d query heads sharing %d KV "
                      "heads, head dim %d, page size %d.",
                      hq, hk, d, s);
    if (fp8)
        snprintf(desc + at, sizeof desc - (size_t)at,
                 " The caches hold %s values with one float32 scale each: the keys are k_scale "
                 "* k_cache, the values v_scale * v_cache.",
                 kvf__fib_kv_dtype_name(kv_dtype));
    snprintf(tag, sizeof tag, "quantization:%s", kvf__fib_kv_dtype_name(kv_dtype));
    /* FIB's own gqa_paged definitions have no FP8 variant: kvfuzz's are drafts there. */
    json_t *tags = fp8 ? json_pack("[s, s, s]", "stage:decode", "status:draft", tag)
                       : json_pack("[s, s]", "stage:decode", "status:verified");
    const char *reference =
        fp8 ? (s == 1 ? reference_8 : reference_9) : (s == 1 ? reference_6 : reference_7);
    json_t *def =
        json_pack("{s:s, s:s, s:s, s:o, s:o, s:[s, s], s:o, s:o, s:s}", "name", name, "op_type",
                  KVF_FIB_OP_TYPE, "description", desc, "tags", tags, "axes", axes, "constraints",
                  "len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()",
                  "inputs", inputs, "outputs", outputs, "reference", reference);
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
