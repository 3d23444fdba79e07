/* Quantized caches in the expansion (kvfuzz/spec.h, kvf_quant_recipe): the values drawn as for
 * bf16 are rounded to each cache's FP8 dtype in place (their bf16 images), and the scales are
 * drawn from their own stream, so a recipe's values are the bf16 recipe's, rounded. */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gen_internal.h"
#include "gen_quant.h"
#include "kvfuzz/fp8.h"

/* bf16 bits -> the image of the nearest FP8 value, per dtype: one lookup per element. */
static kvf_bf16 rounded[KVF_KV_DTYPE_COUNT][1u << 16];
static pthread_once_t rounded_once = PTHREAD_ONCE_INIT;

static void rounded_init(void) {
    for (int dt = KVF_KV_E4M3; dt <= KVF_KV_E5M2; dt++)
        for (uint32_t h = 0; h < (1u << 16); h++)
            rounded[dt][h] =
                kvf_fp8_to_bf16(kvf_fp8_from_f32(kvf_bf16_to_f32((kvf_bf16)h), dt), dt);
}

static void round_page(kvf_bf16 *page, int64_t n, int dtype) {
    const kvf_bf16 *lut = rounded[dtype];
    for (int64_t i = 0; i < n; i++)
        page[i] = lut[page[i]];
}

static float draw_scale(float base, const kvf_quant_recipe *q, kvf_prng *r) {
    double s = base;
    if (q->spread) s = ldexp(s, (int)kvf_prng_below(r, 2u * q->spread + 1) - (int)q->spread);
    if (q->fine) s *= 1.0 + (double)(kvf_prng_next(r) >> 41) * 0x1p-23;
    float f = (float)s;
    if (f == 0) f = FLT_TRUE_MIN;
    if (isinf(f)) f = FLT_MAX;
    return f;
}

/* Fills one cache's scales over the pages listed (per-token) or its Hk (per-head). */
static void draw_scales(kvf_case *c, float *dst, float base, const kvf_quant_recipe *q,
                        const int64_t *pages, int64_t npages, kvf_prng *r) {
    switch (q->kv.granularity) {
    case KVF_SCALE_TENSOR:
        dst[0] = base;
        break;
    case KVF_SCALE_HEAD:
        for (int32_t g = 0; g < c->num_kv_heads; g++)
            dst[g] = draw_scale(base, q, r);
        break;
    case KVF_SCALE_TOKEN: {
        const int64_t per_page = (int64_t)c->page_size * c->num_kv_heads;
        for (int64_t i = 0; i < npages; i++)
            for (int64_t j = 0; j < per_page; j++)
                dst[pages[i] * per_page + j] = draw_scale(base, q, r);
        break;
    }
    default:
        break;
    }
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int kvf__gen_quantize(kvf_case *c, const kvf_spec *s, const int64_t *extra, int64_t num_extra,
                      const kvf_limits *lim, kvf_error *err) {
    const kvf_quant_recipe *q = &s->quant;
    if (kvf_quant_recipe_is_plain(q)) return 0;
    int rc = kvf_quant_recipe_check(q, err);
    if (!rc) rc = kvf_case_set_quant(c, &q->kv, lim, err);
    if (rc) return rc;
    /* Every page that holds data: the referenced ones and the poisoned extra ones, ascending
     * (the per-token scales are drawn in page order). */
    int64_t n = c->num_resident_pages + num_extra;
    int64_t *pages = malloc((size_t)(n ? n : 1) * sizeof *pages);
    if (!pages) return kvf_error_set(err, KVF_ENOMEM, "out of memory quantizing the caches");
    for (int64_t i = 0; i < c->num_resident_pages; i++)
        pages[i] = c->resident_pages[i];
    for (int64_t i = 0; i < num_extra; i++)
        pages[c->num_resident_pages + i] = extra[i];
    qsort(pages, (size_t)n, sizeof *pages, cmp_i64);
    int64_t u = 0;
    for (int64_t i = 0; i < n; i++)
        if (!u || pages[u - 1] != pages[i]) pages[u++] = pages[i];
    pthread_once(&rounded_once, rounded_init);
    const int64_t pe = kvf_case_page_elems(c);
    for (int64_t i = 0; i < u; i++) {
        if (kvf_kv_dtype_is_fp8(q->kv.k_dtype))
            round_page(c->k_cache + pages[i] * pe, pe, q->kv.k_dtype);
        if (kvf_kv_dtype_is_fp8(q->kv.v_dtype))
            round_page(c->v_cache + pages[i] * pe, pe, q->kv.v_dtype);
    }
    kvf_prng r;
    kvf_prng_seed_stream(&r, s->recipe.seed, KVF__STREAM_SCALES);
    draw_scales(c, c->k_scale, q->k_scale, q, pages, u, &r);
    draw_scales(c, c->v_scale, q->v_scale, q, pages, u, &r);
    free(pages);
    return 0;
}

int kvf__gen_quantize_explicit(kvf_case *c, const kvf_spec *s, const kvf_limits *lim,
                               kvf_error *err) {
    const kvf_quant_recipe *q = &s->quant;
    if (kvf_quant_recipe_is_plain(q)) return 0;
    int rc = kvf_quant_recipe_check(q, err);
    if (!rc && q->kv.granularity != KVF_SCALE_TENSOR)
        rc = kvf_error_set(err, KVF_EINVAL,
                           "explicit tensors take tensor scales only, not %s scales",
                           kvf_scale_granularity_name(q->kv.granularity));
    if (!rc) rc = kvf_case_set_quant(c, &q->kv, lim, err);
    if (rc) return rc;
    c->k_scale[0] = q->k_scale;
    c->v_scale[0] = q->v_scale;
    const int64_t n = c->num_pages * kvf_case_page_elems(c);
    const int dts[2] = {q->kv.k_dtype, q->kv.v_dtype};
    const kvf_bf16 *caches[2] = {c->k_cache, c->v_cache};
    static const char *const names[2] = {"k_cache", "v_cache"};
    pthread_once(&rounded_once, rounded_init);
    for (int w = 0; w < 2; w++) {
        if (!kvf_kv_dtype_is_fp8(dts[w])) continue;
        /* An image is its own rounding, and a NaN image is one: NaN bytes round to +-NaN. */
        const kvf_bf16 *lut = rounded[dts[w]];
        for (int64_t i = 0; i < n; i++) {
            kvf_bf16 b = caches[w][i];
            uint8_t byte;
            if (lut[b] != b && !kvf_fp8_from_bf16_exact(b, dts[w], &byte))
                return kvf_error_set(err, KVF_EINVAL,
                                     "explicit %s element %lld holds bf16 0x%04x, which is not an "
                                     "%s value",
                                     names[w], (long long)i, b, kvf_kv_dtype_name(dts[w]));
        }
    }
    return 0;
}

/* The other FP8 dtype. */
static uint8_t other_fp8(uint8_t dt) {
    return (uint8_t)(KVF_KV_E4M3 + KVF_KV_E5M2 - dt);
}

/* dt when the set holds it, else the other FP8 dtype. */
static uint8_t fp8_within(uint8_t dt, unsigned set) {
    return kvf_kv_dtypes_has(set, dt) ? dt : other_fp8(dt);
}

void kvf_recipe_draw_quant(kvf_quant_recipe *q, kvf_recipe *rp, kvf_prng *r) {
    kvf_recipe_draw_quant_in(q, rp, r, KVF_KV_DTYPES_ALL);
}

void kvf_recipe_draw_quant_seeded(kvf_quant_recipe *q, kvf_recipe *rp, unsigned kv_dtypes) {
    kvf_prng qr;
    kvf_prng_seed_stream(&qr, rp->seed, KVF__STREAM_QUANT);
    (void)kvf_prng_below(&qr, 4); /* kvf_spec_random's one-in-four, as it draws it */
    kvf_recipe_draw_quant_in(q, rp, &qr, kv_dtypes);
}

void kvf_recipe_draw_quant_in(kvf_quant_recipe *q, kvf_recipe *rp, kvf_prng *r,
                              unsigned kv_dtypes) {
    memset(q, 0, sizeof *q);
    /* Every draw is made whatever the set, so a restricted draw keeps the stream's order. */
    q->kv.k_dtype = fp8_within((uint8_t)(KVF_KV_E4M3 + kvf_prng_below(r, 2)), kv_dtypes);
    q->kv.v_dtype =
        fp8_within(kvf_prng_below(r, 4) ? q->kv.k_dtype : other_fp8(q->kv.k_dtype), kv_dtypes);
    static const uint8_t grans[8] = {KVF_SCALE_NONE,   KVF_SCALE_TENSOR, KVF_SCALE_TENSOR,
                                     KVF_SCALE_TENSOR, KVF_SCALE_HEAD,   KVF_SCALE_HEAD,
                                     KVF_SCALE_TOKEN,  KVF_SCALE_TOKEN};
    q->kv.granularity = grans[kvf_prng_below(r, 8)];
    int64_t pool_pages = kvf_recipe_entries(rp) + rp->spare_pages;
    if (q->kv.granularity == KVF_SCALE_TOKEN &&
        (rp->page_id_base || pool_pages * rp->page_size * rp->num_kv_heads > (1 << 20)))
        q->kv.granularity = KVF_SCALE_HEAD;
    /* Values toward the dtypes' edges: the largest (saturating) or the subnormals. */
    kvf_dist *dists[2] = {&rp->k, &rp->v};
    const int dts[2] = {q->kv.k_dtype, q->kv.v_dtype};
    for (int w = 0; w < 2; w++) {
        uint64_t e = kvf_prng_below(r, 4);
        int top = dts[w] == KVF_KV_E4M3 ? 8 : 15, sub = dts[w] == KVF_KV_E4M3 ? -8 : -15;
        if (e == 0) dists[w]->log2_scale = (int8_t)(top - 1 + (int)kvf_prng_below(r, 3));
        if (e == 1) dists[w]->log2_scale = (int8_t)(sub - 1 + (int)kvf_prng_below(r, 3));
    }
    if (q->kv.granularity == KVF_SCALE_NONE) {
        q->k_scale = q->v_scale = 1.0f;
        return;
    }
    float *bases[2] = {&q->k_scale, &q->v_scale};
    for (int w = 0; w < 2; w++) {
        uint64_t where = kvf_prng_below(r, 8);
        int e = where == 0   ? 100 + (int)kvf_prng_below(r, 28)  /* near overflow */
                : where == 1 ? -149 + (int)kvf_prng_below(r, 30) /* near underflow */
                             : (int)kvf_prng_below(r, 17) - 8;
        double m = kvf_prng_below(r, 2) ? 1.0 : 1.0 + (double)(kvf_prng_next(r) >> 41) * 0x1p-23;
        float f = (float)ldexp(m, e);
        *bases[w] = f > 0 && isfinite(f) ? f : 1.0f;
    }
    if (q->kv.granularity != KVF_SCALE_TENSOR) {
        uint64_t s = kvf_prng_below(r, 4);
        q->spread = s < 2    ? 0
                    : s == 2 ? (uint8_t)(1 + kvf_prng_below(r, 4))
                             : (uint8_t)(10 + kvf_prng_below(r, 31));
        q->fine = (uint8_t)kvf_prng_below(r, 2);
    }
}
