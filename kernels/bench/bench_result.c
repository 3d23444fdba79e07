/* A `kvfuzz bench` row: agreement with the reference, timing statistics, the check word and the
 * JSON (kvfuzz/bench_workload.h). */
#include <math.h>
#include <stdlib.h>

#include "kvfuzz/bench_workload.h"
#include "kvfuzz/bf16.h"

void kvf_bench_compare(const kvf_case *c, const kvf_bf16 *o, const float *lse,
                       const kvf_bf16 *o_ref, const float *lse_ref, kvf_bench_result *r) {
    r->agree = 1;
    r->max_abs_o = r->max_abs_lse = 0;
    for (int64_t i = 0; i < kvf_case_o_elems(c); i++) {
        float a = kvf_bf16_to_f32(o[i]), x = kvf_bf16_to_f32(o_ref[i]);
        double dlt = fabs((double)a - x);
        if (!isfinite(a) || !isfinite(x) || (dlt > 1e-2 && dlt > 1e-2 * fabs(x))) r->agree = 0;
        if (dlt > r->max_abs_o) r->max_abs_o = dlt;
    }
    for (int64_t i = 0; i < kvf_case_lse_elems(c); i++) {
        float a = lse[i], x = lse_ref[i];
        if (isinf(a) && isinf(x) && a == x) continue;
        double dlt = fabs((double)a - x);
        if (!isfinite(a) || !isfinite(x) || (dlt > 1e-3 && dlt > 1e-3 * fabs(x))) r->agree = 0;
        if (dlt > r->max_abs_lse) r->max_abs_lse = dlt;
    }
}

int64_t kvf_bench_bytes(const kvf_case *c) {
    const int64_t q_b = kvf_case_q_elems(c) * 2, lse_b = kvf_case_lse_elems(c) * 4;
    const int64_t rows = kvf_case_total_tokens(c) * c->num_kv_heads;
    const int64_t kb = kvf_kv_dtype_is_fp8(c->quant.k_dtype) ? 1 : 2;
    const int64_t vb = kvf_kv_dtype_is_fp8(c->quant.v_dtype) ? 1 : 2;
    /* The scales a kernel must read: one k and v scale per token row when per token, else the
     * whole (tiny) arrays. */
    const int64_t sc =
        c->quant.granularity == KVF_SCALE_TOKEN ? rows * 8 : kvf_case_scale_count(c) * 8;
    return q_b + rows * c->head_dim * (kb + vb) + sc + q_b + lse_b;
}

double kvf_bench_gbps(int64_t bytes, double us) {
    return bytes / (us * 1e3);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

void kvf_bench_median_min(float *ms, int n, double *median_us, double *min_us) {
    qsort(ms, (size_t)n, sizeof *ms, cmp_float);
    *median_us = 1e3 * (n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]));
    *min_us = 1e3 * ms[0];
}

void kvf_bench_result_timed(kvf_bench_result *r, double med_us, double min_us, double roof_us,
                            int64_t bytes) {
    r->med_us = med_us, r->min_us = min_us;
    r->gbps = kvf_bench_gbps(bytes, r->med_us);
    r->fraction = roof_us / r->med_us;
}

const char *kvf_bench_result_check(const kvf_bench_result *r) {
    return r->status == KVF_EUNSUPPORTED ? "unsupported"
           : r->status                   ? kvf_errname(r->status)
           : r->agree                    ? "ok"
                                         : "MISMATCH";
}

int kvf_bench_result_fails(const kvf_bench_result *r) {
    return (r->status != 0 && r->status != KVF_EUNSUPPORTED) || (r->status == 0 && !r->agree);
}

json_t *kvf_bench_json_root(const char *date, const kvf_bench_device *dev, int iters, int warmup,
                            size_t flush_bytes, json_t **results) {
    json_t *root = json_object();
    *results = json_array();
    int bad = !root || !*results || kvf_json_set(root, "date", json_string(date)) ||
              kvf_json_set(root, "gpu", json_string(dev->name)) ||
              kvf_json_set(root, "sms", json_integer(dev->sms)) ||
              kvf_json_set(root, "l2_bytes", json_integer(dev->l2_bytes)) ||
              kvf_json_set(root, "iters", json_integer(iters)) ||
              kvf_json_set(root, "warmup", json_integer(warmup)) ||
              kvf_json_set(root, "flush_bytes", json_integer((json_int_t)flush_bytes)) ||
              json_object_set(root, "results", *results);
    json_decref(*results); /* the root holds it; *results borrows */
    if (bad) {
        json_decref(root);
        *results = NULL;
        return NULL;
    }
    return root;
}

json_t *kvf_bench_json_row(const kvf_bench_workload *w, const kvf_bench_shape *shape,
                           const kvf_bench_result *r, int64_t tokens, int64_t bytes,
                           double roof_us) {
    const int timed = r->status == 0;
    /* Numbers only where they were measured: an untimed kernel has no time and no difference
     * from the reference (no 0 standing for "none"). */
    json_t *row = json_object();
    int bad =
        !row || kvf_json_set(row, "workload", json_string(w->name)) ||
        kvf_json_set(row, "kernel", json_string(r->kernel)) ||
        kvf_json_set(row, "batch", json_integer(w->batch)) ||
        kvf_json_set(row, "max_len", json_integer(kvf_bench_workload_max_len(w))) ||
        kvf_json_set(row, "tokens", json_integer(tokens)) ||
        kvf_json_set(row, "num_qo_heads", json_integer(shape->hq)) ||
        kvf_json_set(row, "num_kv_heads", json_integer(shape->hk)) ||
        kvf_json_set(row, "head_dim", json_integer(shape->d)) ||
        kvf_json_set(row, "page_size", json_integer(shape->s)) ||
        kvf_json_set(row, "kv_dtype", json_string(kvf_kv_dtype_name(shape->kv_dtype))) ||
        kvf_json_set(row, "scales", json_string(kvf_scale_granularity_name(shape->scale_gran))) ||
        kvf_json_set(row, "bytes", json_integer(bytes));
    if (!bad && timed)
        bad = kvf_json_set(row, "median_us", kvf_json_number(r->med_us)) ||
              kvf_json_set(row, "min_us", kvf_json_number(r->min_us)) ||
              kvf_json_set(row, "gb_per_s", kvf_json_number(r->gbps)) ||
              kvf_json_set(row, "fraction_of_roofline", kvf_json_number(r->fraction));
    bad =
        bad || kvf_json_set(row, "roofline_median_us", kvf_json_number(roof_us)) ||
        kvf_json_set(row, "roofline_gb_per_s", kvf_json_number(kvf_bench_gbps(bytes, roof_us))) ||
        kvf_json_set(row, "check", json_string(kvf_bench_result_check(r))) ||
        kvf_json_set(row, "max_abs_diff_o", timed ? kvf_json_number(r->max_abs_o) : json_null()) ||
        kvf_json_set(row, "max_abs_diff_lse",
                     timed ? kvf_json_number(r->max_abs_lse) : json_null()) ||
        kvf_json_set(row, "plan", json_string(r->plan));
    if (!bad && r->status) bad = kvf_json_set(row, "error", json_string(r->why));
    if (bad) {
        json_decref(row);
        return NULL;
    }
    return row;
}
