/* The split-KV (flash-decoding) algorithm in fp32 C, the CPU mirror of kernels/cuda.
 *
 * Included by cpu_splitkv.c for the production kernel. Mutant builds include it again with a
 * KVF_MUTANT_* macro defined and KVF_SPLITKV_FN renamed, which compiles one deliberate bug in;
 * without such a macro every hook below expands to the correct code.
 *
 * Plan: each sequence is cut into chunks of `chunk` tokens (a multiple of the 32-token tile),
 * enough chunks that batch x kv-heads x chunks would fill 132 SMs twice. Within a chunk, tiles
 * of 32 tokens: the tile's logits (log2 domain), one rescale of the running state per tile,
 * then the weighted sum of v. Each chunk leaves an fp32 state (o, lse); the merge weights the
 * states by exp2(lse_i - max lse) and skips empty ones, so no -inf - -inf is ever formed. */
#include <math.h>
#include <stdlib.h>

#include "kvfuzz/kernel.h"

#ifndef KVF_SPLITKV_FN
#error "define KVF_SPLITKV_FN before including splitkv_algo.h"
#endif

#define SPLITKV_TILE 32
#define SPLITKV_VIRTUAL_SMS 132
#define LOG2E_F 1.44269504088896340736f

static int64_t splitkv_chunk_tokens(const kvf_case *c) {
    int64_t max_len = kvf_case_max_seq_len(c);
    int64_t work_items = (int64_t)c->batch_size * c->num_kv_heads;
    int64_t splits = (2 * SPLITKV_VIRTUAL_SMS + work_items - 1) / (work_items ? work_items : 1);
    if (splits < 1) splits = 1;
    int64_t chunk = (max_len + splits - 1) / splits;
    chunk = (chunk + SPLITKV_TILE - 1) / SPLITKV_TILE * SPLITKV_TILE;
    return chunk < SPLITKV_TILE ? SPLITKV_TILE : chunk;
}

/* One chunk [t0, t1) of sequence b for q head h: fp32 state out (o_part[d], lse_part). An
 * empty chunk leaves lse_part = -inf and o_part = 0. */
static void splitkv_chunk(const kvf_case *c, int32_t b, int32_t h, int64_t t0, int64_t t1,
                          float *o_part, float *lse_part, float *tile_s) {
    const int32_t d = c->head_dim, g = h / (c->num_qo_heads / c->num_kv_heads);
    const kvf_bf16 *qh = c->q + ((int64_t)b * c->num_qo_heads + h) * d;
    const float scale_log2 = c->sm_scale * LOG2E_F;
    float m = -INFINITY, l = 0.0f;
    for (int32_t i = 0; i < d; i++)
        o_part[i] = 0.0f;
    for (int64_t tile = t0; tile < t1; tile += SPLITKV_TILE) {
        int64_t n = t1 - tile < SPLITKV_TILE ? t1 - tile : SPLITKV_TILE;
        float tile_max = -INFINITY;
        for (int64_t j = 0; j < n; j++) {
            const kvf_bf16 *k = c->k_cache + kvf_case_kv_offset(c, b, tile + j, g, 0);
            float dot = 0.0f;
            for (int32_t i = 0; i < d; i++)
                dot += kvf_bf16_to_f32(qh[i]) * kvf_bf16_to_f32(k[i]);
            tile_s[j] = dot * scale_log2;
            if (tile_s[j] > tile_max) tile_max = tile_s[j];
        }
        float m_new = tile_max > m ? tile_max : m;
        float alpha = exp2f(m - m_new); /* m = -inf on the first tile: alpha = 0, state is 0 */
        l *= alpha;
        for (int32_t i = 0; i < d; i++)
            o_part[i] *= alpha;
        for (int64_t j = 0; j < n; j++) {
            float p = exp2f(tile_s[j] - m_new);
            const kvf_bf16 *v = c->v_cache + kvf_case_kv_offset(c, b, tile + j, g, 0);
            l += p;
            for (int32_t i = 0; i < d; i++)
                o_part[i] += p * kvf_bf16_to_f32(v[i]);
        }
        m = m_new;
    }
    if (l > 0.0f) {
        for (int32_t i = 0; i < d; i++)
            o_part[i] /= l;
        *lse_part = m + log2f(l);
    } else {
        *lse_part = -INFINITY;
    }
}

static int KVF_SPLITKV_FN(void *state, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    (void)state;
    const int32_t hq = c->num_qo_heads, d = c->head_dim;
    const int64_t chunk = splitkv_chunk_tokens(c);
    const int64_t max_chunks = (kvf_case_max_seq_len(c) + chunk - 1) / chunk;
    float *o_parts = malloc((size_t)((max_chunks ? max_chunks : 1) * d) * sizeof *o_parts);
    float *lse_parts = malloc((size_t)(max_chunks ? max_chunks : 1) * sizeof *lse_parts);
    float *tile_s = malloc(SPLITKV_TILE * sizeof *tile_s);
    if (!o_parts || !lse_parts || !tile_s) {
        free(o_parts);
        free(lse_parts);
        free(tile_s);
        return kvf_error_set(err, KVF_ENOMEM, "cpu-splitkv could not allocate its workspace");
    }
    for (int32_t b = 0; b < c->batch_size; b++) {
        int64_t len = kvf_case_seq_len(c, b);
        int64_t nchunks = (len + chunk - 1) / chunk;
        for (int32_t h = 0; h < hq; h++) {
            for (int64_t k = 0; k < nchunks; k++) {
                int64_t t0 = k * chunk, t1 = t0 + chunk < len ? t0 + chunk : len;
                splitkv_chunk(c, b, h, t0, t1, o_parts + k * d, lse_parts + k, tile_s);
            }
            /* Merge: the largest lse first, so every weight is exp2 of a value <= 0. */
            float big = -INFINITY;
            for (int64_t k = 0; k < nchunks; k++)
                if (lse_parts[k] > big) big = lse_parts[k];
            kvf_bf16 *oh = o + ((int64_t)b * hq + h) * d;
            if (big == -INFINITY) {
                for (int32_t i = 0; i < d; i++)
                    oh[i] = 0;
                lse[(int64_t)b * hq + h] = -INFINITY;
                continue;
            }
            float wsum = 0.0f;
            for (int64_t k = 0; k < nchunks; k++)
                if (lse_parts[k] != -INFINITY) wsum += exp2f(lse_parts[k] - big);
            for (int32_t i = 0; i < d; i++) {
                float acc = 0.0f;
                for (int64_t k = 0; k < nchunks; k++)
                    if (lse_parts[k] != -INFINITY)
                        acc += exp2f(lse_parts[k] - big) * o_parts[k * d + i];
                oh[i] = kvf_f32_to_bf16_rne(acc / wsum);
            }
            lse[(int64_t)b * hq + h] = big + log2f(wsum);
        }
    }
    free(o_parts);
    free(lse_parts);
    free(tile_s);
    return 0;
}
