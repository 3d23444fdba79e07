/* A case as JSON (kvfuzz/case_json.h). */
#include "kvfuzz/case_json.h"

#include <math.h>
#include <stdio.h>

#include "kvfuzz/json_io.h"

void kvf_value_summary_add(kvf_value_summary *s, kvf_bf16 x) {
    s->count++;
    if (kvf_bf16_is_nan(x)) {
        s->nan++;
        return;
    }
    if (kvf_bf16_is_inf(x)) {
        s->inf++;
        return;
    }
    double v = kvf_bf16_to_f32(x);
    if (v == 0) s->zero++;
    if (s->count - s->nan - s->inf == 1 || v < s->min) s->min = v;
    if (s->count - s->nan - s->inf == 1 || v > s->max) s->max = v;
    s->sum += v;
    s->sum_abs += fabs(v);
}

json_t *kvf_value_summary_json(const kvf_value_summary *s) {
    int64_t finite = s->count - s->nan - s->inf;
    json_t *o = json_object();
    if (!o) return NULL;
    int bad =
        kvf_json_set(o, "count", json_integer(s->count)) ||
        kvf_json_set(o, "nan", json_integer(s->nan)) ||
        kvf_json_set(o, "inf", json_integer(s->inf)) ||
        kvf_json_set(o, "zero", json_integer(s->zero)) ||
        kvf_json_set(o, "min", finite ? kvf_json_number(s->min) : json_null()) ||
        kvf_json_set(o, "max", finite ? kvf_json_number(s->max) : json_null()) ||
        kvf_json_set(o, "mean", finite ? kvf_json_number(s->sum / (double)finite) : json_null()) ||
        kvf_json_set(o, "mean_abs",
                     finite ? kvf_json_number(s->sum_abs / (double)finite) : json_null());
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* bf16 values as an array of 4-digit hex strings (their bits). */
static json_t *hex_array(const kvf_bf16 *x, int64_t n) {
    json_t *a = json_array();
    for (int64_t i = 0; a && i < n; i++) {
        char hex[8];
        snprintf(hex, sizeof hex, "%04x", x[i]);
        if (kvf_json_push(a, json_string(hex))) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *i32_array(const int32_t *x, int64_t n) {
    json_t *a = json_array();
    for (int64_t i = 0; a && i < n; i++)
        if (kvf_json_push(a, json_integer(x[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* file, format_version, shape, sizes, sm_scale, lengths and the page table. */
static int add_shape(json_t *root, const char *path, const kvf_spec *spec, const kvf_case *c) {
    json_t *shape = json_object(), *lens = json_array();
    char bits[16];
    snprintf(bits, sizeof bits, "%08x", kvf_f32_bits(c->sm_scale));
    int bad = kvf_json_set(root, "file", json_string(path)) ||
              kvf_json_set(root, "format_version",
                           json_integer(spec->recipe.expansion == KVF_EXPANSION_2 ? 2 : 1));
    int sbad = kvf_json_set(root, "shape", shape); /* owned by root now (or released) */
    bad = bad || sbad || kvf_json_set(shape, "num_qo_heads", json_integer(c->num_qo_heads)) ||
          kvf_json_set(shape, "num_kv_heads", json_integer(c->num_kv_heads)) ||
          kvf_json_set(shape, "group", json_integer(c->num_qo_heads / c->num_kv_heads)) ||
          kvf_json_set(shape, "head_dim", json_integer(c->head_dim)) ||
          kvf_json_set(shape, "page_size", json_integer(c->page_size)) ||
          kvf_json_set(root, "batch_size", json_integer(c->batch_size)) ||
          kvf_json_set(root, "num_pages", json_integer(c->num_pages)) ||
          kvf_json_set(root, "sm_scale", kvf_json_number((double)c->sm_scale)) ||
          kvf_json_set(root, "sm_scale_bits", json_string(bits)) ||
          kvf_json_set(root, "total_tokens", json_integer(kvf_case_total_tokens(c)));
    int lbad = kvf_json_set(root, "seq_lens", lens);
    bad = bad || lbad;
    for (int32_t b = 0; !bad && b < c->batch_size; b++)
        bad = kvf_json_push(lens, json_integer(kvf_case_seq_len(c, b)));
    return bad || kvf_json_set(root, "kv_indptr", i32_array(c->kv_indptr, c->batch_size + 1)) ||
           kvf_json_set(root, "kv_indices",
                        i32_array(c->kv_indices, c->kv_indptr[c->batch_size])) ||
           kvf_json_set(root, "kv_last_page_len", i32_array(c->kv_last_page_len, c->batch_size));
}

/* The recipe: page-table strategy, logits, poison, page ids, seed and the value
 * distributions. */
static int add_recipe(json_t *root, const kvf_recipe *rp) {
    json_t *recipe = json_object();
    int rbad = kvf_json_set(root, "recipe", recipe);
    int bad = rbad || kvf_json_set(recipe, "table", json_string(kvf_table_name(rp->table))) ||
              kvf_json_set(recipe, "logits", json_string(kvf_logits_name(rp->logits))) ||
              kvf_json_set(recipe, "poison", json_integer(rp->poison)) ||
              kvf_json_set(recipe, "page_id_base", json_integer(rp->page_id_base)) ||
              kvf_json_set(recipe, "spare_pages", json_integer(rp->spare_pages)) ||
              /* A seed past 2^63 does not fit jansson's integer: its decimal digits then. */
              kvf_json_set(recipe, "seed",
                           rp->seed <= (uint64_t)INT64_MAX ? json_integer((json_int_t)rp->seed)
                                                           : json_real((double)rp->seed));
    const kvf_dist *dists[3] = {&rp->q, &rp->k, &rp->v};
    const char *names[3] = {"q", "k", "v"};
    for (int i = 0; !bad && i < 3; i++) {
        json_t *d = json_object();
        bad = kvf_json_set(recipe, names[i], d) ||
              kvf_json_set(d, "dist", json_string(kvf_dist_name(dists[i]->kind))) ||
              kvf_json_set(d, "log2_scale", json_integer(dists[i]->log2_scale)) ||
              kvf_json_set(d, "param", json_integer(dists[i]->param));
    }
    return bad;
}

/* The single-value overrides and whether the case carries explicit tensors. */
static int add_overrides(json_t *root, const kvf_spec *spec) {
    json_t *overrides = json_array();
    int bad = kvf_json_set(root, "overrides", overrides);
    for (uint32_t i = 0; !bad && i < spec->num_overrides; i++) {
        json_t *ov = json_object();
        bad = kvf_json_push(overrides, ov) ||
              kvf_json_set(ov, "target", json_integer(spec->overrides[i].target)) ||
              kvf_json_set(ov, "index", json_integer((json_int_t)spec->overrides[i].index)) ||
              kvf_json_set(ov, "value", json_integer(spec->overrides[i].value));
    }
    return bad || kvf_json_set(root, "explicit_tensors", json_boolean(spec->has_explicit));
}

/* Where an imported case came from (import-fib). */
static int add_origin(json_t *root, const kvf_origin *og) {
    json_t *origin = json_object(), *rnd = json_array();
    static const struct {
        unsigned bit;
        const char *name;
    } inputs[] = {{KVF_ORIGIN_RANDOM_Q, "q"},
                  {KVF_ORIGIN_RANDOM_K, "k_cache"},
                  {KVF_ORIGIN_RANDOM_V, "v_cache"}};
    int bad = kvf_json_set(root, "origin", origin) ||
              kvf_json_set(origin, "definition", json_string(og->definition)) ||
              kvf_json_set(origin, "workload_uuid", json_string(og->workload_uuid)) ||
              kvf_json_set(origin, "random_inputs", rnd) ||
              kvf_json_set(origin, "random_seed", json_integer((json_int_t)og->random_seed));
    for (size_t i = 0; !bad && i < sizeof inputs / sizeof inputs[0]; i++)
        if (og->random_inputs & inputs[i].bit)
            bad = kvf_json_push(rnd, json_string(inputs[i].name));
    return bad;
}

/* The summaries of q and of the k and v values sequences use, and the resident pages. */
/* The buffers' layout, when it is not the dense one: its text and the strides it gives. */
static int add_layout(json_t *root, const kvf_case *c) {
    if (kvf_layout_is_dense(&c->layout)) return 0;
    char text[160];
    kvf_layout_text(&c->layout, text, sizeof text);
    kvf_strides s;
    kvf_layout_strides(&c->layout, c->num_qo_heads, c->num_kv_heads, c->head_dim, c->page_size, &s);
    json_t *l = json_pack(
        "{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "text", text, "kv_order",
        c->layout.kv_order ? "HND" : "NHD", "q_stride_batch", (json_int_t)s.q_batch,
        "q_stride_head", (json_int_t)s.q_head, "o_stride_batch", (json_int_t)s.o_batch,
        "o_stride_head", (json_int_t)s.o_head, "lse_stride_batch", (json_int_t)s.lse_batch,
        "kv_stride_page", (json_int_t)s.kv_page, "kv_stride_slot", (json_int_t)s.kv_slot,
        "kv_stride_head", (json_int_t)s.kv_head, "view_offset", (json_int_t)c->layout.view_offset);
    return !l || json_object_set_new(root, "layout", l) != 0;
}

/* Quantized caches: the dtypes, the granularity, the recipe's bases and the scales themselves
 * (tensor and per-head ones; per-slot ones as their range over the slots sequences read). */
static json_t *float_array(const float *x, int64_t n) {
    json_t *a = json_array();
    for (int64_t i = 0; a && i < n; i++)
        if (kvf_json_push(a, json_real((double)x[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static int add_quant(json_t *root, const kvf_spec *spec, const kvf_case *c) {
    if (kvf_kv_quant_is_plain(&c->quant)) return 0;
    char text[96];
    kvf_kv_quant_text(&c->quant, text, sizeof text);
    json_t *q = json_object();
    int bad = kvf_json_set(root, "quant", q) || kvf_json_set(q, "text", json_string(text)) ||
              kvf_json_set(q, "k_dtype", json_string(kvf_kv_dtype_name(c->quant.k_dtype))) ||
              kvf_json_set(q, "v_dtype", json_string(kvf_kv_dtype_name(c->quant.v_dtype))) ||
              kvf_json_set(q, "granularity",
                           json_string(kvf_scale_granularity_name(c->quant.granularity)));
    if (bad || !c->quant.granularity) return bad;
    const kvf_quant_recipe *r = &spec->quant;
    bad = kvf_json_set(q, "k_scale_base", json_real((double)r->k_scale)) ||
          kvf_json_set(q, "v_scale_base", json_real((double)r->v_scale)) ||
          kvf_json_set(q, "spread", json_integer(r->spread)) ||
          kvf_json_set(q, "fine", json_boolean(r->fine));
    if (bad) return bad;
    if (c->quant.granularity != KVF_SCALE_TOKEN)
        return kvf_json_set(q, "k_scale", float_array(c->k_scale, kvf_case_scale_count(c))) ||
               kvf_json_set(q, "v_scale", float_array(c->v_scale, kvf_case_scale_count(c)));
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {0, 0};
    for (int32_t b = 0; b < c->batch_size; b++)
        for (int64_t t = 0; t < kvf_case_seq_len(c, b); t++)
            for (int32_t g = 0; g < c->num_kv_heads; g++) {
                const double ks = kvf_case_k_scale(c, b, t, g), vs = kvf_case_v_scale(c, b, t, g);
                lo[0] = fmin(lo[0], ks), hi[0] = fmax(hi[0], ks);
                lo[1] = fmin(lo[1], vs), hi[1] = fmax(hi[1], vs);
            }
    if (hi[0] == 0) return 0; /* no token read */
    return kvf_json_set(q, "k_scale_read", json_pack("[f, f]", lo[0], hi[0])) ||
           kvf_json_set(q, "v_scale_read", json_pack("[f, f]", lo[1], hi[1]));
}

static int add_values(json_t *root, const kvf_case *c) {
    kvf_value_summary sq = {0}, sk = {0}, sv = {0};
    for (int64_t i = 0; i < kvf_case_q_elems(c); i++)
        kvf_value_summary_add(&sq, c->q[i]);
    for (int32_t b = 0; b < c->batch_size; b++)
        for (int64_t t = 0; t < kvf_case_seq_len(c, b); t++)
            for (int32_t g = 0; g < c->num_kv_heads; g++)
                for (int32_t d = 0; d < c->head_dim; d++) {
                    int64_t off = kvf_case_kv_offset(c, b, t, g, d);
                    kvf_value_summary_add(&sk, c->k_cache[off]);
                    kvf_value_summary_add(&sv, c->v_cache[off]);
                }
    json_t *values = json_object();
    int vbad = kvf_json_set(root, "values", values);
    return vbad || kvf_json_set(values, "q", kvf_value_summary_json(&sq)) ||
           kvf_json_set(values, "k_used", kvf_value_summary_json(&sk)) ||
           kvf_json_set(values, "v_used", kvf_value_summary_json(&sv)) ||
           kvf_json_set(root, "resident_pages", json_integer(c->num_resident_pages));
}

/* Every tensor value: q, and k and v of each resident page, as hex bits. */
static int add_tensors(json_t *root, const kvf_case *c) {
    int64_t pe = kvf_case_page_elems(c);
    json_t *pages = json_array();
    int bad = kvf_json_set(root, "q", hex_array(c->q, kvf_case_q_elems(c)));
    int pbad = kvf_json_set(root, "pages", pages); /* owned by root now (or released) */
    bad = bad || pbad;
    for (int64_t i = 0; !bad && i < c->num_resident_pages; i++) {
        int64_t page = c->resident_pages[i];
        json_t *pg = json_object();
        bad = kvf_json_push(pages, pg) || kvf_json_set(pg, "page", json_integer(page)) ||
              kvf_json_set(pg, "k", hex_array(c->k_cache + page * pe, pe)) ||
              kvf_json_set(pg, "v", hex_array(c->v_cache + page * pe, pe));
    }
    return bad;
}

json_t *kvf_case_json(const char *path, const kvf_spec *spec, const kvf_case *c, int full) {
    json_t *root = json_object();
    int bad = !root || add_shape(root, path, spec, c) || add_recipe(root, &spec->recipe) ||
              add_overrides(root, spec) || (spec->has_origin && add_origin(root, &spec->origin)) ||
              add_layout(root, c) || add_quant(root, spec, c) || add_values(root, c) ||
              (full && add_tensors(root, c));
    if (bad) {
        json_decref(root);
        return NULL;
    }
    return root;
}
