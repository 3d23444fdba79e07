/* A small, correct CUDA paged-decode kernel as a kvfuzz plugin: one block per (sequence, query
 * head), four warps that each walk every fourth token with an fp32 online softmax, merged at the
 * end. It reads only the tokens a sequence owns (masking by token index, never by value), so the
 * NaN kvfuzz keeps in unused slots and pages never reaches it. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

#include <kvfuzz/plugin_helpers.h> /* includes kvfuzz/plugin.h; its helpers run on the device */

#define WARPS 4
#define MAX_D 256 /* eight fp32 accumulators per lane */

__global__ void __launch_bounds__(WARPS * 32)
    decode(kvf_plugin_args a, int hq, int hk, int d, int page) {
    const int b = blockIdx.x, h = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int kh = h / (hq / hk), per_lane = d / 32;
    /* args.shape is a host pointer: the page size comes as an argument. */
    const int64_t len = kvf_plugin_seq_len(a.kv_indptr, a.kv_last_page_len, page, b);
    const uint16_t *q = kvf_plugin_q_row(&a, b, h);
    /* Logits in base 2 (scaled by log2 e) so one exp2f per token serves softmax and lse. */
    const float scale = a.sm_scale * 1.4426950408889634f;
    float qv[MAX_D / 32], acc[MAX_D / 32], m = -INFINITY, l = 0.0f;
    /* Loops over MAX_D / 32 with a guard, unrolled, keep qv and acc in registers. */
#pragma unroll
    for (int i = 0; i < MAX_D / 32; i++) {
        qv[i] = i < per_lane ? kvf_plugin_bf16_to_f32(q[lane + 32 * i]) : 0.0f;
        acc[i] = 0.0f;
    }
    for (int64_t t = warp; t < len; t += WARPS) {
        const uint16_t *k = kvf_plugin_k_token(&a, b, t, kh, page);
        const uint16_t *v = kvf_plugin_v_token(&a, b, t, kh, page);
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < MAX_D / 32; i++)
            if (i < per_lane) s += qv[i] * kvf_plugin_bf16_to_f32(k[lane + 32 * i]);
        for (int off = 16; off; off /= 2)
            s += __shfl_xor_sync(0xffffffffu, s, off);
        s *= scale;
        const float m_new = fmaxf(m, s);
        const float shrink = exp2f(m - m_new), p = exp2f(s - m_new); /* exp2f(-inf) is 0 */
        l = l * shrink + p;
#pragma unroll
        for (int i = 0; i < MAX_D / 32; i++)
            if (i < per_lane)
                acc[i] = acc[i] * shrink + p * kvf_plugin_bf16_to_f32(v[lane + 32 * i]);
        m = m_new;
    }
    /* Merge the warps' states: rescale each to the block maximum, then sum. */
    __shared__ float sm[WARPS], sl[WARPS], so[WARPS][MAX_D];
    if (lane == 0) {
        sm[warp] = m;
        sl[warp] = l;
    }
#pragma unroll
    for (int i = 0; i < MAX_D / 32; i++)
        if (i < per_lane) so[warp][lane + 32 * i] = acc[i];
    __syncthreads();
    float mb = -INFINITY;
    for (int w = 0; w < WARPS; w++)
        mb = fmaxf(mb, sm[w]);
    float lb = 0.0f, wgt[WARPS];
    for (int w = 0; w < WARPS; w++) {
        wgt[w] = sm[w] == -INFINITY ? 0.0f : exp2f(sm[w] - mb); /* a warp that saw no token */
        lb += sl[w] * wgt[w];
    }
    uint16_t *o = kvf_plugin_o_row(&a, b, h);
    for (int x = threadIdx.x; x < d; x += blockDim.x) {
        float sum = 0.0f;
        for (int w = 0; w < WARPS; w++)
            sum += so[w][x] * wgt[w];
        o[x] = len ? kvf_plugin_f32_to_bf16(sum / lb) : 0; /* an empty sequence: o = 0 */
    }
    if (threadIdx.x == 0) *kvf_plugin_lse_at(&a, b, h) = len ? mb + log2f(lb) : -INFINITY;
}

static void say(char *buf, size_t size, const char *text) {
    if (buf && size) snprintf(buf, size, "%s", text);
}

static int supports(const kvf_plugin_kernel *self, const kvf_plugin_shape *s, char *why,
                    size_t why_size) {
    (void)self;
    if (s->head_dim % 32 != 0 || s->head_dim > MAX_D) {
        say(why, why_size, "head dim must be a multiple of 32 up to 256");
        return 0;
    }
    if (s->num_kv_heads <= 0 || s->num_qo_heads % s->num_kv_heads != 0) {
        say(why, why_size, "Hq must be a multiple of Hk");
        return 0;
    }
    if (s->num_kv_heads > 65535 || s->num_qo_heads > 65535) {
        say(why, why_size, "more heads than a grid's y dimension holds");
        return 0;
    }
    return 1;
}

static int run(void *state, const kvf_plugin_args *a, char *msg, size_t msg_size) {
    (void)state;
    const kvf_plugin_shape *s = a->shape;
    if (s->batch_size == 0) return KVF_PLUGIN_OK;
    dim3 grid((unsigned)s->batch_size, (unsigned)s->num_qo_heads);
    decode<<<grid, WARPS * 32, 0, (cudaStream_t)a->stream>>>(*a, s->num_qo_heads, s->num_kv_heads,
                                                             s->head_dim, s->page_size);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        say(msg, msg_size, cudaGetErrorString(e));
        return KVF_PLUGIN_ERROR;
    }
    return KVF_PLUGIN_OK;
}

static const kvf_plugin_kernel kernels[] = {{
    sizeof(kvf_plugin_kernel), "example-cuda",
    "one block per (sequence, head), fp32 online softmax in four warps", KVF_PLUGIN_DEVICE_CUDA,
    KVF_PLUGIN_ROLE_UNDER_TEST, NULL, supports, NULL, NULL, NULL, NULL, run, NULL,
    8,    /* concurrent_states: the kernel keeps no state, so a worker may run 8 cases at once */
    NULL, /* precision: f32 */
    NULL, /* promises: the defaults (placement, head-permutation, v-scaling) */
    NULL, /* models: not a mutant */
    0,    /* kv_dtypes: bf16 caches only */
    0,    /* scale_granularities: no scales */
}};

static const kvf_plugin plugin = {KVF_PLUGIN_ABI_VERSION,
                                  sizeof(kvf_plugin),
                                  "example-cuda",
                                  sizeof(kvf_plugin_kernel),
                                  1,
                                  kernels};

KVF_PLUGIN_EXPORT const kvf_plugin *kvf_plugin_v1(void) {
    return &plugin;
}
