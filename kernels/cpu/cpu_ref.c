/* cpu-ref: FlashInfer-Bench's reference semantics in plain C. Everything in fp32: logits as
 * fp32 dot products times sm_scale, softmax with the maximum subtracted, natural exp/log,
 * attention weights normalised before P.V, bf16 round-to-nearest-even at the end, lse
 * converted to base 2. Quantized caches are dequantized in fp32 (value times scale) first.
 * Only tokens inside each sequence's length are ever read. */
#include <math.h>
#include <stdlib.h>

#include "kvfuzz/builtin_kernel.h"

/* A cache element dequantized as FlashInfer-Bench's reference does: value times scale in f32. */
static float dequant(kvf_bf16 x, float scale, const kvf_case *c) {
    return c->quant.granularity ? kvf_bf16_to_f32(x) * scale : kvf_bf16_to_f32(x);
}

int kvf__cpu_ref_compute(const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    const int32_t hq = c->num_qo_heads, d = c->head_dim, group = hq / c->num_kv_heads;
    int64_t max_len = kvf_case_max_seq_len(c);
    float *logits = malloc((size_t)(max_len ? max_len : 1) * sizeof *logits);
    float *acc = malloc((size_t)d * sizeof *acc);
    if (!logits || !acc) {
        free(logits);
        free(acc);
        return kvf_error_set(err, KVF_ENOMEM, "cpu-ref could not allocate its scratch");
    }
    for (int32_t b = 0; b < c->batch_size; b++) {
        int64_t len = kvf_case_seq_len(c, b);
        for (int32_t h = 0; h < hq; h++) {
            const kvf_bf16 *qh = c->q + ((int64_t)b * hq + h) * d;
            kvf_bf16 *oh = o + ((int64_t)b * hq + h) * d;
            int32_t g = h / group;
            if (len == 0) {
                for (int32_t i = 0; i < d; i++)
                    oh[i] = 0;
                lse[(int64_t)b * hq + h] = -INFINITY;
                continue;
            }
            float m = -INFINITY;
            for (int64_t t = 0; t < len; t++) {
                const kvf_bf16 *k = c->k_cache + kvf_case_kv_offset(c, b, t, g, 0);
                const float ks = kvf_case_k_scale(c, b, t, g);
                float dot = 0.0f;
                for (int32_t i = 0; i < d; i++)
                    dot += kvf_bf16_to_f32(qh[i]) * dequant(k[i], ks, c);
                logits[t] = dot * c->sm_scale;
                if (logits[t] > m) m = logits[t];
            }
            float z = 0.0f;
            for (int64_t t = 0; t < len; t++) {
                logits[t] = expf(logits[t] - m);
                z += logits[t];
            }
            for (int32_t i = 0; i < d; i++)
                acc[i] = 0.0f;
            for (int64_t t = 0; t < len; t++) {
                const kvf_bf16 *v = c->v_cache + kvf_case_kv_offset(c, b, t, g, 0);
                const float vs = kvf_case_v_scale(c, b, t, g);
                float p = logits[t] / z;
                for (int32_t i = 0; i < d; i++)
                    acc[i] += p * dequant(v[i], vs, c);
            }
            for (int32_t i = 0; i < d; i++)
                oh[i] = kvf_f32_to_bf16_rne(acc[i]);
            lse[(int64_t)b * hq + h] = (m + logf(z)) * 1.44269504088896340736f;
        }
    }
    free(logits);
    free(acc);
    return 0;
}

#define CPU_REF_DESCRIPTION                                                                        \
    "FlashInfer-Bench reference semantics: fp32 softmax then P.V, bf16 RNE store"
static int cpu_ref_run(void *state, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    (void)state;
    return kvf__cpu_ref_compute(c, o, lse, err);
}

static const kvf__case_kernel cpu_ref_impl = {cpu_ref_run, 0};
static const kvf_plugin_kernel cpu_ref_desc =
    KVF_BUILTIN_CPU_DESC_QUANT("cpu-ref", CPU_REF_DESCRIPTION, cpu_ref_impl);

const kvf_kernel kvf_kernel_cpu_ref = {
    .name = "cpu-ref",
    .description = CPU_REF_DESCRIPTION,
    .device = KVF_DEVICE_CPU,
    .desc = &cpu_ref_desc,
    .role = KVF_PLUGIN_ROLE_REFERENCE,
    /* each sequence is computed on its own, in one order whatever the batch holds */
    .promises = "batch-invariance",
};
