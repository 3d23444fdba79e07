/* A correct CPU decode kernel as a kvfuzz plugin: fp32 logits, softmax with the maximum
 * subtracted, weights normalised before P.V, bf16 round-to-nearest-even store, base-2 lse.
 * It reads FP8 caches too (e4m3, e5m2, scales of every granularity), dequantized in fp32 as
 * value times scale (docs/plugins.md, "FP8 caches").
 * Beside it, three mutants of it (role KVF_PLUGIN_ROLE_MUTANT), each with one deliberate bug,
 * for the plugin's own benchmark. Build it against an installed kvfuzz (see CMakeLists.txt
 * here), then:
 *   kvfuzz kernels --kernel ./libkvf_example_cpu.so
 *   kvfuzz fuzz --kernel ./libkvf_example_cpu.so:example-cpu --time 60
 *   kvfuzz mutants --kernel ./libkvf_example_cpu.so --budget 10 */
#include <kvfuzz/plugin_helpers.h> /* includes kvfuzz/plugin.h */
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int supports(const kvf_plugin_kernel *self, const kvf_plugin_shape *s, char *why,
                    size_t why_size) {
    (void)self, (void)s, (void)why, (void)why_size;
    return 1; /* any shape kvfuzz generates */
}

/* Which bug a kernel carries: its entry's `user` (BUG_NONE for the correct kernel). */
enum { BUG_NONE, BUG_NATURAL_LOG_LSE, BUG_HEAD_MODULO, BUG_TRUNC_STORE };
static const int bug_none = BUG_NONE, bug_natural_log = BUG_NATURAL_LOG_LSE,
                 bug_head_modulo = BUG_HEAD_MODULO, bug_trunc_store = BUG_TRUNC_STORE;

/* The state is the bug: run() sees its kernel only through it. */
static int create(const kvf_plugin_kernel *self, void **state, char *msg, size_t msg_size) {
    (void)msg, (void)msg_size;
    *state = self->user;
    return KVF_PLUGIN_OK;
}

/* Round toward zero: the classic wrong bf16 store. */
static uint16_t trunc_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}

static int run(void *state, const kvf_plugin_args *a, char *msg, size_t msg_size) {
    const int bug = state ? *(const int *)state : BUG_NONE; /* no create(): the correct one */
    const kvf_plugin_shape *s = a->shape;
    const int32_t hq = s->num_qo_heads, d = s->head_dim;
    float *logits = malloc((size_t)(s->max_seq_len > 0 ? s->max_seq_len : 1) * sizeof *logits);
    float *acc = malloc((size_t)d * sizeof *acc);
    if (!logits || !acc) {
        free(logits);
        free(acc);
        strncpy(msg, "out of memory for scratch", msg_size);
        return KVF_PLUGIN_NOMEM;
    }
    for (int32_t b = 0; b < s->batch_size; b++) {
        const int64_t len = kvf_plugin_seq_len_args(a, b);
        for (int32_t h = 0; h < hq; h++) {
            const uint16_t *qh = kvf_plugin_q_row(a, b, h);
            uint16_t *oh = kvf_plugin_o_row(a, b, h);
            float *lse = kvf_plugin_lse_at(a, b, h);
            if (len == 0) { /* an empty sequence: o = 0, lse = -inf */
                for (int32_t i = 0; i < d; i++)
                    oh[i] = 0;
                *lse = -INFINITY;
                continue;
            }
            const int32_t kh =
                bug == BUG_HEAD_MODULO ? h % s->num_kv_heads : kvf_plugin_kv_head(s, h);
            float m = -INFINITY;
            for (int64_t t = 0; t < len; t++) {
                const int64_t page = kvf_plugin_token_page(a, b, t, s->page_size);
                const int64_t slot = t % s->page_size;
                const float ks = kvf_plugin_kv_scale(a, 0, s->scale_granularity, page, slot, kh,
                                                     s->page_size, s->num_kv_heads);
                float dot = 0.0f;
                for (int32_t i = 0; i < d; i++) {
                    float k = kvf_plugin_kv_value(a, 0, s->k_dtype, page, slot, kh, i);
                    if (s->scale_granularity) k *= ks; /* dequantized in fp32 */
                    dot += kvf_plugin_bf16_to_f32(qh[i]) * k;
                }
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
                const int64_t page = kvf_plugin_token_page(a, b, t, s->page_size);
                const int64_t slot = t % s->page_size;
                const float vs = kvf_plugin_kv_scale(a, 1, s->scale_granularity, page, slot, kh,
                                                     s->page_size, s->num_kv_heads);
                const float p = logits[t] / z;
                for (int32_t i = 0; i < d; i++) {
                    float v = kvf_plugin_kv_value(a, 1, s->v_dtype, page, slot, kh, i);
                    if (s->scale_granularity) v *= vs;
                    acc[i] += p * v;
                }
            }
            for (int32_t i = 0; i < d; i++)
                oh[i] =
                    bug == BUG_TRUNC_STORE ? trunc_bf16(acc[i]) : kvf_plugin_f32_to_bf16(acc[i]);
            *lse =
                bug == BUG_NATURAL_LOG_LSE ? m + logf(z) : (m + logf(z)) * 1.44269504088896340736f;
        }
    }
    free(logits);
    free(acc);
    return KVF_PLUGIN_OK;
}

/* One kernel entry: the correct kernel (a reference, the controls of its benchmark) or a
 * mutant with the bug class it models. */
#define EXAMPLE_KERNEL(NAME, DESCRIPTION, ROLE, BUG, MODELS)                                       \
    {                                                                                              \
        .struct_size = sizeof(kvf_plugin_kernel), .name = (NAME), .description = (DESCRIPTION),    \
        .device = KVF_PLUGIN_DEVICE_CPU, .role = (ROLE), .user = (void *)(BUG),                    \
        .supports = supports, .create = create, .run = run, .models = (MODELS),                    \
        .kv_dtypes = KVF_PLUGIN_KV_E4M3 | KVF_PLUGIN_KV_E5M2,                                      \
        .scale_granularities =                                                                     \
            KVF_PLUGIN_SCALE_TENSOR | KVF_PLUGIN_SCALE_HEAD | KVF_PLUGIN_SCALE_TOKEN,              \
    }

static const kvf_plugin_kernel kernels[] = {
    EXAMPLE_KERNEL("example-cpu",
                   "example plugin: fp32 softmax then P.V, bf16 round-to-nearest-even store",
                   KVF_PLUGIN_ROLE_REFERENCE, &bug_none, NULL),
    EXAMPLE_KERNEL("example-cpu/mut=natural-log-lse", "lse in natural log, base 2 specified",
                   KVF_PLUGIN_ROLE_MUTANT, &bug_natural_log, "lse-base"),
    EXAMPLE_KERNEL("example-cpu/mut=head-modulo", "q head h reads kv head h % Hk, not h / G",
                   KVF_PLUGIN_ROLE_MUTANT, &bug_head_modulo, "gqa-map"),
    EXAMPLE_KERNEL("example-cpu/mut=trunc-store", "the bf16 store truncates",
                   KVF_PLUGIN_ROLE_MUTANT, &bug_trunc_store, "rounding"),
};

static const kvf_plugin plugin = {
    .abi_version = KVF_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(kvf_plugin),
    .name = "kvfuzz example CPU plugin",
    .kernel_struct_size = sizeof(kvf_plugin_kernel),
    .num_kernels = sizeof kernels / sizeof kernels[0],
    .kernels = kernels,
};

/* Exported even when built with -fvisibility=hidden. */
KVF_PLUGIN_EXPORT const kvf_plugin *kvf_plugin_v1(void) {
    return &plugin;
}
