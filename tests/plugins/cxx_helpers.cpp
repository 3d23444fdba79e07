// Test plugin in C++: kvfuzz/plugin_helpers.h compiles as C++ (-Wall -Wextra -Werror), and
// KVF_PLUGIN_EXPORT gives the entry point C linkage and default visibility under
// -fvisibility=hidden, so kvfuzz finds kvf_plugin_v1 (tests/plugin_many_test.sh builds it
// with the C++ compiler when there is one and lists it with `kvfuzz kernels`).
#include <kvfuzz/plugin_helpers.h>

#include <cmath>
#include <cstdio>
#include <vector>

static int cxx_supports(const kvf_plugin_kernel *, const kvf_plugin_shape *, char *, size_t) {
    return 1;
}

// A correct kernel (fp32 softmax, then P.V), written with the helpers.
static int cxx_run(void *, const kvf_plugin_args *a, char *msg, size_t msg_size) {
    const kvf_plugin_shape *s = a->shape;
    std::vector<float> p;
    try {
        p.resize((size_t)(s->max_seq_len > 0 ? s->max_seq_len : 1));
    } catch (...) {
        std::snprintf(msg, msg_size, "out of memory for the weights");
        return KVF_PLUGIN_NOMEM;
    }
    for (int32_t b = 0; b < s->batch_size; b++) {
        const int64_t len = kvf_plugin_seq_len_args(a, b);
        for (int32_t h = 0; h < s->num_qo_heads; h++) {
            const int32_t kh = kvf_plugin_kv_head(s, h);
            const uint16_t *q = kvf_plugin_q_row(a, b, h);
            float m = -INFINITY, z = 0.0f;
            for (int64_t t = 0; t < len; t++) {
                const uint16_t *k = kvf_plugin_k_row(
                    a, kvf_plugin_token_page(a, b, t, s->page_size), t % s->page_size, kh);
                float dot = 0.0f;
                for (int32_t i = 0; i < s->head_dim; i++)
                    dot += kvf_plugin_bf16_to_f32(q[i]) * kvf_plugin_bf16_to_f32(k[i]);
                p[(size_t)t] = dot * a->sm_scale;
                m = std::fmax(m, p[(size_t)t]);
            }
            for (int64_t t = 0; t < len; t++)
                z += p[(size_t)t] = std::exp(p[(size_t)t] - m);
            uint16_t *o = kvf_plugin_o_row(a, b, h);
            for (int32_t i = 0; i < s->head_dim; i++) {
                float acc = 0.0f;
                for (int64_t t = 0; t < len; t++)
                    acc += p[(size_t)t] / z *
                           kvf_plugin_bf16_to_f32(kvf_plugin_v_token(a, b, t, kh, s->page_size)[i]);
                o[i] = kvf_plugin_f32_to_bf16(acc);
            }
            *kvf_plugin_lse_at(a, b, h) =
                len ? (m + std::log(z)) * 1.44269504088896340736f : -INFINITY;
        }
    }
    return KVF_PLUGIN_OK;
}

static kvf_plugin_kernel cxx_kernel() {
    kvf_plugin_kernel k = {};
    k.struct_size = sizeof k;
    k.name = "cxx";
    k.description = "the helper header from C++";
    k.device = KVF_PLUGIN_DEVICE_CPU;
    k.role = KVF_PLUGIN_ROLE_UNDER_TEST;
    k.supports = cxx_supports;
    k.run = cxx_run;
    return k;
}

static const kvf_plugin_kernel kernels[] = {cxx_kernel()};

static kvf_plugin cxx_plugin() {
    kvf_plugin p = {};
    p.abi_version = KVF_PLUGIN_ABI_VERSION;
    p.struct_size = sizeof p;
    p.name = "kvfuzz C++ helper test plugin";
    p.kernel_struct_size = sizeof(kvf_plugin_kernel);
    p.num_kernels = 1;
    p.kernels = kernels;
    return p;
}

static const kvf_plugin plugin = cxx_plugin();

KVF_PLUGIN_EXPORT const kvf_plugin *kvf_plugin_v1(void) {
    return &plugin;
}
