/* A correct CPU decode kernel as a kvfuzz plugin: fp32 logits, softmax with the maximum
 * subtracted, weights normalised before P.V, bf16 round-to-nearest-even store, base-2 lse.
 * Build it against an installed kvfuzz (see CMakeLists.txt here), then:
 *   kvfuzz kernels --kernel ./libkvf_example_cpu.so
 *   kvfuzz fuzz --kernel ./libkvf_example_cpu.so:example-cpu --time 60 */
#include <kvfuzz/plugin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static float bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1); /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

static int supports(const kvf_plugin_kernel *self, const kvf_plugin_shape *s, char *why,
                    size_t why_size) {
    (void)self, (void)s, (void)why, (void)why_size;
    return 1; /* any shape kvfuzz generates */
}

static int run(void *state, const kvf_plugin_args *a, char *msg, size_t msg_size) {
    (void)state;
    const kvf_plugin_shape *s = a->shape;
    const int32_t hq = s->num_qo_heads, d = s->head_dim, group = hq / s->num_kv_heads;
    float *logits = malloc((size_t)(s->max_seq_len > 0 ? s->max_seq_len : 1) * sizeof *logits);
    float *acc = malloc((size_t)d * sizeof *acc);
    if (!logits || !acc) {
        free(logits);
        free(acc);
        strncpy(msg, "out of memory for scratch", msg_size);
        return KVF_PLUGIN_NOMEM;
    }
    for (int32_t b = 0; b < s->batch_size; b++) {
        const int32_t beg = a->kv_indptr[b], pages = a->kv_indptr[b + 1] - beg;
        const int64_t len =
            pages == 0 ? 0 : (int64_t)(pages - 1) * s->page_size + a->kv_last_page_len[b];
        for (int32_t h = 0; h < hq; h++) {
            const uint16_t *qh = a->q + b * a->q_stride_batch + h * a->q_stride_head;
            uint16_t *oh = a->o + b * a->o_stride_batch + h * a->o_stride_head;
            float *lse = a->lse + b * a->lse_stride_batch + h;
            if (len == 0) { /* an empty sequence: o = 0, lse = -inf */
                for (int32_t i = 0; i < d; i++)
                    oh[i] = 0;
                *lse = -INFINITY;
                continue;
            }
            const int64_t head_off = (int64_t)(h / group) * a->kv_stride_head;
            float m = -INFINITY;
            for (int64_t t = 0; t < len; t++) {
                const int64_t page = a->kv_indices[beg + t / s->page_size];
                const uint16_t *k = a->k_cache + page * a->kv_stride_page +
                                    (t % s->page_size) * a->kv_stride_slot + head_off;
                float dot = 0.0f;
                for (int32_t i = 0; i < d; i++)
                    dot += bf16_to_f32(qh[i]) * bf16_to_f32(k[i]);
                logits[t] = dot * a->sm_scale;
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
                const int64_t page = a->kv_indices[beg + t / s->page_size];
                const uint16_t *v = a->v_cache + page * a->kv_stride_page +
                                    (t % s->page_size) * a->kv_stride_slot + head_off;
                const float p = logits[t] / z;
                for (int32_t i = 0; i < d; i++)
                    acc[i] += p * bf16_to_f32(v[i]);
            }
            for (int32_t i = 0; i < d; i++)
                oh[i] = f32_to_bf16(acc[i]);
            *lse = (m + logf(z)) * 1.44269504088896340736f;
        }
    }
    free(logits);
    free(acc);
    return KVF_PLUGIN_OK;
}

static const kvf_plugin_kernel kernels[] = {{
    .struct_size = sizeof(kvf_plugin_kernel),
    .name = "example-cpu",
    .description = "example plugin: fp32 softmax then P.V, bf16 round-to-nearest-even store",
    .device = KVF_PLUGIN_DEVICE_CPU,
    .role = KVF_PLUGIN_ROLE_UNDER_TEST,
    .supports = supports,
    .run = run,
}};

static const kvf_plugin plugin = {
    .abi_version = KVF_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(kvf_plugin),
    .name = "kvfuzz example CPU plugin",
    .kernel_struct_size = sizeof(kvf_plugin_kernel),
    .num_kernels = 1,
    .kernels = kernels,
};

const kvf_plugin *kvf_plugin_v1(void) {
    return &plugin;
}
