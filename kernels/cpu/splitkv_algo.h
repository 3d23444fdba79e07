/* The split-KV (flash-decoding) algorithm in fp32 C, the CPU mirror of kernels/cuda.
 *
 * Included by cpu_splitkv.c for the production kernel (KVF_MUT_ACTIVE = KVF__MUT_NONE).
 * cpu_mutant.c includes it again once per mutant with KVF_MUT_ACTIVE = KVF__MUT_<ID>
 * (kernels/mutants.def lists them; kernels/mutants.h defines KVF_MUT). Each bug is a constant
 * test `if (KVF_MUT(X))`: every branch compiles in every build, and the production object folds
 * them all away, so it carries no trace of them.
 *
 * Plan: each sequence is cut into chunks of `chunk` tokens (a multiple of the 32-token tile),
 * enough chunks that batch x kv-heads x chunks would fill 132 SMs twice. Within a chunk, tiles
 * of 32 tokens: the tile's logits (log2 domain), one rescale of the running state per tile,
 * then the weighted sum of v. Each chunk leaves an fp32 state (o, lse); the merge weights the
 * states by exp2(lse_i - max lse) and skips empty ones, so no -inf - -inf is ever formed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kvfuzz/fp8.h"
#include "kvfuzz/kernel.h"

#include "../mutants.h"

#ifndef KVF_SPLITKV_FN
#error "define KVF_SPLITKV_FN before including splitkv_algo.h"
#endif
#ifndef KVF_MUT_ACTIVE
#error "define KVF_MUT_ACTIVE (a kvf__mut_id) before including splitkv_algo.h"
#endif

#define SPLITKV_TILE 32
#define SPLITKV_VIRTUAL_SMS 132
#define LOG2E_F 1.44269504088896340736f

/* Mutants B12 / precision: a value kept in a bf16 register (round to nearest even). */
static inline float round_bf16(float x) {
    return kvf_bf16_to_f32(kvf_f32_to_bf16_rne(x));
}

static int64_t splitkv_chunk_tokens(const kvf_case *c) {
    int64_t max_len = kvf_case_max_seq_len(c);
    if (KVF_MUT(PLANNER_FIRST_SEQ)) {
        max_len = c->batch_size ? kvf_case_seq_len(c, 0) : 0; /* B05: planner sees request 0 */
        if (max_len == 0) max_len = 1;
    }
    int64_t work_items = (int64_t)c->batch_size * c->num_kv_heads;
    int64_t splits = (2 * SPLITKV_VIRTUAL_SMS + work_items - 1) / (work_items ? work_items : 1);
    if (splits < 1) splits = 1;
    int64_t chunk = (max_len + splits - 1) / splits;
    if (KVF_MUT(CHUNK_NOT_TILE_MULTIPLE)) {
        if (chunk < 1) chunk = 1; /* B09: chunk not a multiple of the tile */
    } else {
        chunk = (chunk + SPLITKV_TILE - 1) / SPLITKV_TILE * SPLITKV_TILE;
        if (chunk < SPLITKV_TILE) chunk = SPLITKV_TILE;
    }
    return chunk;
}

/* Sequence length as the kernel sees it. */
static int64_t splitkv_seq_len(const kvf_case *c, int32_t b) {
    int64_t n = c->kv_indptr[b + 1] - c->kv_indptr[b];
    if (n == 0) return 0;
    if (KVF_MUT(TAIL_SLOTS_READ)) return n * c->page_size; /* B03: bounds per page, not token */
    if (KVF_MUT(LAST_LEN_MODULO))
        return (n - 1) * c->page_size + c->kv_last_page_len[b] % c->page_size; /* B11 */
    if (KVF_MUT(EXTRA_PAGE))
        return n * c->page_size + c->kv_last_page_len[b]; /* B15: one page too many */
    return (n - 1) * c->page_size + c->kv_last_page_len[b];
}

/* The page-table entry of token t of sequence b. */
static int64_t splitkv_entry(const kvf_case *c, int32_t b, int64_t t) {
    int64_t entry = c->kv_indptr[b] + t / c->page_size;
    if (KVF_MUT(EXTRA_PAGE) && entry >= c->kv_indptr[c->batch_size])
        entry = 0; /* past the table: whatever is there */
    return entry;
}

/* Address of (token t of sequence b, kv head g, dim 0) in a cache. */
static const kvf_bf16 *splitkv_row(const kvf_case *c, const kvf_bf16 *cache, int32_t b, int64_t t,
                                   int32_t g) {
    int64_t entry = splitkv_entry(c, b, t);
    int64_t slot = t % c->page_size;
    if (KVF_MUT(PAGE_SIZE_128) && c->page_size > 128)
        slot = t % 128; /* B18: slot arithmetic sized for S <= 128 */
    int64_t page = c->kv_indices[entry];
    int64_t off = ((page * c->page_size + slot) * c->num_kv_heads + g) * c->head_dim;
    if (KVF_MUT(INT32_OFFSET)) {
        /* B10: the element offset computed in 32 bits wraps; stay inside the mapping the way a
         * GPU would stay inside its allocation (reading some other page). */
        int64_t pool = c->num_pages * kvf_case_page_elems(c);
        off = (((int64_t)(int32_t)(uint32_t)off) % pool + pool) % pool;
    }
    return cache + off;
}

/* Quantized caches (docs/plugins.md, "FP8 caches"), as FlashInfer reads them: the key scale of
 * a tensor or KV head folded into the logit scale, a per-slot one multiplying the dot; the
 * value scale of a tensor or head multiplying the output, a per-slot one the weight. */
static int splitkv_scale_kv_head(const kvf_case *c, int32_t h, int32_t g) {
    return KVF_MUT(SCALE_Q_HEAD) ? h % c->num_kv_heads : g;
}

static float splitkv_scale(const kvf_case *c, const float *scales, int32_t b, int64_t t,
                           int32_t sg) {
    if (!c->quant.granularity) return 1.0f;
    if (c->quant.granularity != KVF_SCALE_TOKEN) return scales[kvf_case_scale_index(c, b, t, sg)];
    if (KVF_MUT(TOKEN_SCALE_SLOT)) t -= t % c->page_size; /* the page's first slot */
    /* The slot's scale beside the row the kernel reads (a mutant's extra page included). */
    int64_t page = c->kv_indices[splitkv_entry(c, b, t)];
    return scales[kvf_case_slot_scale_index(c, page, t % c->page_size, sg)];
}

/* A cache element as the kernel decodes it: the case's image, or a mutant's misreading of
 * the byte behind it. */
static inline float splitkv_elem(kvf_bf16 x, int dtype) {
    if (!(KVF_MUT(E4M3_AS_E5M2) || KVF_MUT(FP8_SUBNORMAL_FLUSH)) || !kvf_kv_dtype_is_fp8(dtype))
        return kvf_bf16_to_f32(x);
    uint8_t byte;
    if (!kvf_fp8_from_bf16_exact(x, dtype, &byte)) return kvf_bf16_to_f32(x);
    if (KVF_MUT(E4M3_AS_E5M2))
        return dtype == KVF_KV_E4M3 ? kvf_fp8_to_f32(byte, KVF_KV_E5M2) : kvf_bf16_to_f32(x);
    /* A zero exponent field read as zero. */
    const int mbits = dtype == KVF_KV_E4M3 ? 3 : 2;
    return ((byte & 0x7F) >> mbits) == 0 ? 0.0f : kvf_bf16_to_f32(x);
}

/* Mutant v-scale-fp16-weights: a value held in fp16 (11 significant bits, subnormals from
 * 2^-14 on a 2^-24 grid, past 65504 infinite). */
static inline float round_fp16(float x) {
    if (!isfinite(x) || x == 0.0f) return x;
    int e;
    (void)frexpf(x, &e); /* |x| in [2^(e-1), 2^e) */
    int q = e - 1 < -14 ? -24 : e - 11;
    float r = ldexpf(nearbyintf(ldexpf(x, -q)), q);
    return fabsf(r) > 65504.0f ? copysignf(INFINITY, x) : r;
}

static int32_t splitkv_kv_head(const kvf_case *c, int32_t h) {
    int32_t group = c->num_qo_heads / c->num_kv_heads;
    if (KVF_MUT(HEAD_MODULO)) return h % c->num_kv_heads; /* h % Hk instead of h / G */
    if (KVF_MUT(GROUP_POW2)) {
        int32_t p2 = 1;
        while (p2 < group)
            p2 *= 2; /* B08: a head tile sized for power-of-two groups */
        int32_t g = h / p2;
        return g < c->num_kv_heads ? g : c->num_kv_heads - 1;
    }
    return h / group;
}

/* One chunk [t0, t1) of sequence b for q head h: fp32 state out (o_part[d], lse_part). An
 * empty chunk leaves lse_part = -inf and o_part = 0. */
static void splitkv_chunk(const kvf_case *c, int32_t b, int32_t h, int64_t t0, int64_t t1,
                          int64_t len, float *o_part, float *lse_part, float *tile_s) {
    const int32_t d = c->head_dim, g = splitkv_kv_head(c, h);
    /* B14: every request reads request 0's q. */
    const kvf_bf16 *qh = KVF_MUT(BATCH_INDEX) ? c->q + (int64_t)h * d
                                              : c->q + ((int64_t)b * c->num_qo_heads + h) * d;
    float scale_log2 =
        KVF_MUT(SCALE_TWICE) ? c->sm_scale * c->sm_scale * LOG2E_F : c->sm_scale * LOG2E_F;
    const int per_token = c->quant.granularity == KVF_SCALE_TOKEN;
    const int32_t sg = splitkv_scale_kv_head(c, h, g);
    if (c->quant.granularity && !per_token) {
        const float ks = splitkv_scale(c, c->k_scale, b, 0, sg);
        scale_log2 *= ks; /* the fold */
        if (KVF_MUT(K_SCALE_TWICE)) scale_log2 *= ks;
    }
    const int kd = c->quant.k_dtype, vd = c->quant.v_dtype;
    float m = KVF_MUT(FINITE_MASK_SENTINEL) ? -5e4f : -INFINITY; /* B01: a finite "-inf" */
    float l = 0.0f;
    for (int32_t i = 0; i < d; i++)
        o_part[i] = 0.0f;
    for (int64_t tile = t0; tile < t1; tile += SPLITKV_TILE) {
        int64_t n = t1 - tile < SPLITKV_TILE ? t1 - tile : SPLITKV_TILE;
        if (KVF_MUT(CHUNK_NOT_TILE_MULTIPLE))
            n = len - tile < SPLITKV_TILE ? len - tile : SPLITKV_TILE; /* tile runs past chunk */
        float tile_max = -INFINITY;
        for (int64_t j = 0; j < n; j++) {
            const kvf_bf16 *k = splitkv_row(c, c->k_cache, b, tile + j, g);
            float dot = 0.0f;
            for (int32_t i = 0; i < d; i++) {
                dot += kvf_bf16_to_f32(qh[i]) * splitkv_elem(k[i], kd);
                if (KVF_MUT(BF16_QK)) dot = round_bf16(dot); /* q.k accumulated in bf16 */
            }
            if (per_token) {
                const float ks = splitkv_scale(c, c->k_scale, b, tile + j, sg);
                dot *= ks;
                if (KVF_MUT(K_SCALE_TWICE)) dot *= ks;
            }
            tile_s[j] = dot * scale_log2;
            if (tile_s[j] > tile_max) tile_max = tile_s[j];
        }
        float m_new = tile_max > m ? tile_max : m;
        if (KVF_MUT(NO_MAX_SUBTRACTION)) m_new = 0.0f; /* softmax without the running max */
        float alpha = exp2f(m - m_new); /* m = -inf on the first tile: alpha = 0, state is 0 */
        l *= alpha;
        for (int32_t i = 0; i < d; i++)
            o_part[i] *= alpha;
        for (int64_t jj = 0; jj < n; jj++) {
            /* odd KV heads sum their tokens last to first (head-order) */
            const int64_t j = KVF_MUT(HEAD_ORDER) && (g & 1) ? n - 1 - jj : jj;
            float p = exp2f(tile_s[j] - m_new);
            if (KVF_MUT_ROUNDS_P) p = round_bf16(p); /* B12: weights rounded before P.V */
            const kvf_bf16 *v = splitkv_row(c, c->v_cache, b, tile + j, g);
            l += p;
            /* A per-slot value scale weighs the token (the output's scale comes at the end). */
            float pv = per_token && !KVF_MUT(V_SCALE_IGNORED)
                           ? p * splitkv_scale(c, c->v_scale, b, tile + j, sg)
                           : p;
            if (KVF_MUT(V_SCALE_FP16_WEIGHTS) && c->quant.granularity)
                pv = round_fp16(per_token ? pv : p * splitkv_scale(c, c->v_scale, b, 0, sg));
            for (int32_t i = 0; i < d; i++) {
                o_part[i] += pv * splitkv_elem(v[i], vd);
                if (KVF_MUT_BF16_ACC) o_part[i] = round_bf16(o_part[i]); /* P.V in bf16 */
            }
        }
        if (KVF_MUT(TAIL_IN_DENOMINATOR))
            l += (float)(SPLITKV_TILE - n) * exp2f(0.0f - m_new); /* B13: zero-padded lanes */
        m = m_new;
    }
    if (l > 0.0f) {
        for (int32_t i = 0; i < d; i++) {
            o_part[i] /= l;
            if (KVF_MUT(BF16_PARTIALS)) o_part[i] = round_bf16(o_part[i]); /* B12: as bf16 */
        }
        *lse_part = m + log2f(l);
    } else {
        /* B16: an empty split reports lse 0 (weight 1). */
        *lse_part = KVF_MUT(EMPTY_CHUNK_ZERO_LSE) ? 0.0f : -INFINITY;
    }
}

static int KVF_SPLITKV_FN(void *state, const kvf_case *c, kvf_bf16 *o, float *lse, kvf_error *err) {
    (void)state;
    const int32_t hq = c->num_qo_heads, d = c->head_dim;
    const int64_t chunk = splitkv_chunk_tokens(c);
    int64_t max_len = 0;
    for (int32_t b = 0; b < c->batch_size; b++)
        if (splitkv_seq_len(c, b) > max_len) max_len = splitkv_seq_len(c, b);
    const int64_t max_chunks = (max_len + chunk - 1) / chunk + 1;
    float *o_parts = calloc((size_t)(max_chunks * d), sizeof *o_parts);
    float *lse_parts = malloc((size_t)max_chunks * sizeof *lse_parts);
    float *tile_s = malloc(SPLITKV_TILE * sizeof *tile_s);
    if (!o_parts || !lse_parts || !tile_s) {
        free(o_parts);
        free(lse_parts);
        free(tile_s);
        return kvf_error_set(err, KVF_ENOMEM, "cpu-splitkv could not allocate its workspace");
    }
    for (int64_t k = 0; k < max_chunks; k++)
        lse_parts[k] = -INFINITY;
    for (int32_t b = 0; b < c->batch_size; b++) {
        int64_t len = splitkv_seq_len(c, b);
        int64_t nchunks = (len + chunk - 1) / chunk;
        if (KVF_MUT(PLANNER_FIRST_SEQ)) {
            int64_t first = splitkv_seq_len(c, 0);
            nchunks = (first + chunk - 1) / chunk; /* launch sized by the planner's view */
            if (nchunks > max_chunks) nchunks = max_chunks;
        }
        if (KVF_MUT(EMPTY_CHUNK_ZERO_LSE) && len > 0 && len % chunk == 0)
            nchunks++; /* the heuristic adds a split past the end */
        int64_t merged_chunks = nchunks;
        if (KVF_MUT(STALE_SCRATCH))
            merged_chunks = (max_len + chunk - 1) / chunk; /* B17: merges splits never written */
        for (int32_t h = 0; h < hq; h++) {
            for (int64_t k = 0; k < nchunks; k++) {
                int64_t t0 = k * chunk, t1 = t0 + chunk < len ? t0 + chunk : len;
                if (t1 < t0) t1 = t0;
                splitkv_chunk(c, b, h, t0, t1, len, o_parts + k * d, lse_parts + k, tile_s);
            }
            /* B07: the last split's weight is missing from the normaliser. */
            int64_t weighted =
                KVF_MUT(MERGE_RACE) && merged_chunks > 1 ? merged_chunks - 1 : merged_chunks;
            /* Merge: the largest lse first, so every weight is exp2 of a value <= 0. */
            float big = -INFINITY;
            for (int64_t k = 0; k < merged_chunks; k++)
                if (lse_parts[k] > big) big = lse_parts[k];
            kvf_bf16 *oh = o + ((int64_t)b * hq + h) * d;
            /* B02 has no guard for a row with no state: it goes on to -inf - -inf. */
            if (!KVF_MUT(MERGE_EMPTY_NAN) && big == -INFINITY) {
                for (int32_t i = 0; i < d; i++)
                    oh[i] = 0;
                lse[(int64_t)b * hq + h] = KVF_MUT(FINITE_MASK_SENTINEL) ? -5e4f
                                           : KVF_MUT(EMPTY_SEQ_LSE_ZERO)
                                               ? 0.0f /* B04: empty request gets lse 0 */
                                               : -INFINITY;
                continue;
            }
            float out_scale = 1.0f;
            if (c->quant.granularity && c->quant.granularity != KVF_SCALE_TOKEN &&
                !KVF_MUT(V_SCALE_IGNORED) && !KVF_MUT(V_SCALE_FP16_WEIGHTS))
                out_scale = splitkv_scale(c, c->v_scale, b, 0,
                                          splitkv_scale_kv_head(c, h, splitkv_kv_head(c, h)));
            float wsum = 0.0f;
            for (int64_t k = 0; k < weighted; k++)
                /* B02: -inf - -inf = NaN for empty rows */
                if (KVF_MUT(MERGE_EMPTY_NAN) || lse_parts[k] != -INFINITY)
                    wsum += exp2f(lse_parts[k] - big);
            for (int32_t i = 0; i < d; i++) {
                float acc = 0.0f;
                for (int64_t k = 0; k < merged_chunks; k++)
                    if (lse_parts[k] != -INFINITY)
                        acc += exp2f(lse_parts[k] - big) * o_parts[k * d + i];
                if (KVF_MUT(MERGE_EMPTY_NAN) && merged_chunks == 0) acc = 0.0f / wsum;
                float y = acc / wsum;
                if (out_scale != 1.0f) y *= out_scale; /* the value scale of a tensor or head */
                /* truncation instead of RNE */
                oh[i] = KVF_MUT_TRUNC_STORE ? kvf_f32_to_bf16_trunc(y) : kvf_f32_to_bf16_rne(y);
            }
            if (KVF_MUT(SPLIT_LSE))
                lse[(int64_t)b * hq + h] = big; /* B06: lse of the largest split only */
            else if (KVF_MUT(NATURAL_LOG_LSE))
                lse[(int64_t)b * hq + h] = (big + log2f(wsum)) * 0.69314718055994530942f;
            else
                lse[(int64_t)b * hq + h] = big + log2f(wsum);
        }
    }
    free(o_parts);
    free(lse_parts);
    free(tile_s);
    return 0;
}
