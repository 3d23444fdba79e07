/* The split-KV plan's implementation (declarations and contract: split_plan.h), with the
 * mutants of kernels/mutants.def that live in the plan as constant KVF_MUT(X) tests. Included
 * by split_plan.c (KVF_MUT_ACTIVE = KVF__MUT_NONE: the production plan, plain C) and by
 * cuda/mutants/decode_mutant.cu inside a mutant's namespace (as C++), so it is written in the
 * common subset of C and C++: explicit casts from void *, no designated initializers. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../mutants.h"
#include "split_plan_types.h"

#ifndef KVF_MUT_ACTIVE
#error "define KVF_MUT_ACTIVE (a kvf__mut_id) before including split_plan_algo.h"
#endif

// The caches' element types and scales (cuda_kernels.h): bf16 K and V without scales, or FP8 K
// and V (e4m3 or e5m2 each) with scales of any granularity or none. The mutants are bf16
// builds.
static int kvf__cuda_check_dtypes(const kvf_cuda_problem *pr, kvf_error *err) {
    const int32_t kd = pr->k_dtype, vd = pr->v_dtype, gr = pr->scale_granularity;
    if (kd < 0 || kd > 2 || vd < 0 || vd > 2 || gr < 0 || gr > 3)
        return kvf_error_set(err, KVF_EINVAL,
                             "k_dtype %d, v_dtype %d or scale_granularity %d is not a value "
                             "plugin.h defines.",
                             kd, vd, gr);
    if ((kd == 0) != (vd == 0))
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "The CUDA kernels take bf16 K and V caches or FP8 ones, not a bf16 "
                             "cache beside an FP8 one.");
    if (kd == 0 && gr != 0)
        return kvf_error_set(err, KVF_EINVAL, "bf16 caches come without scales.");
    if (KVF_MUT_ANY && !KVF_MUT_FP8 && kd != 0)
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "This CUDA mutant is built for bf16 caches only.");
    return 0;
}

int kvf__cuda_check_shape(const kvf_cuda_problem *pr, kvf_error *err) {
    if (pr->num_qo_heads < 1 || pr->num_kv_heads < 1)
        return kvf_error_set(err, KVF_EINVAL,
                             "num_qo_heads (%d) and num_kv_heads (%d) must be at least 1.",
                             pr->num_qo_heads, pr->num_kv_heads);
    if (pr->num_qo_heads % pr->num_kv_heads != 0)
        return kvf_error_set(err, KVF_EINVAL,
                             "num_qo_heads (%d) is not a multiple of num_kv_heads (%d).",
                             pr->num_qo_heads, pr->num_kv_heads);
    const int G = pr->num_qo_heads / pr->num_kv_heads;
    if (G > KVF_CUDA_MAX_GROUP)
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "GQA group %d (num_qo_heads / num_kv_heads) is above the CUDA "
                             "kernels' maximum of %d.",
                             G, KVF_CUDA_MAX_GROUP);
    if (pr->num_kv_heads > 65535)
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "num_kv_heads %d is above the CUDA kernels' maximum of 65535.",
                             pr->num_kv_heads);
    if (pr->head_dim != 64 && pr->head_dim != 128 && pr->head_dim != 256)
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "head_dim %d is not supported by the CUDA kernels (64, 128 or 256).",
                             pr->head_dim);
    // One instance set per mutant keeps the build short; the campaign meets D = 128 often.
    if (KVF_MUT_ANY && pr->head_dim != 128)
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "CUDA mutants are built for head_dim 128 only, not %d.", pr->head_dim);
    if ((KVF_MUT(GROUP_POW2) || KVF_MUT(HEAD_MODULO)) && pr->num_qo_heads > 65535)
        return kvf_error_set(err, KVF_EUNSUPPORTED, /* one CTA row per q head */
                             "num_qo_heads %d is above this mutant's maximum of 65535.",
                             pr->num_qo_heads);
    if (pr->page_size < 1)
        return kvf_error_set(err, KVF_EINVAL, "page_size %d must be at least 1.", pr->page_size);
    if (pr->page_size > KVF_CUDA_MAX_PAGE_SIZE)
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "page_size %d is above the CUDA kernels' maximum of %d.",
                             pr->page_size, KVF_CUDA_MAX_PAGE_SIZE);
    if (pr->batch_size < 0)
        return kvf_error_set(err, KVF_EINVAL, "batch_size %d is negative.", pr->batch_size);
    if (pr->batch_size > 65535)
        return kvf_error_set(err, KVF_EUNSUPPORTED,
                             "batch_size %d is above the CUDA kernels' maximum of 65535.",
                             pr->batch_size);
    if (pr->num_pages < 0 || pr->num_pages > (int64_t)INT32_MAX + 1)
        return kvf_error_set(err, KVF_EINVAL,
                             "num_pages %lld is outside [0, 2^31] (page ids are int32).",
                             (long long)pr->num_pages);
    if (!isfinite(pr->sm_scale)) return kvf_error_set(err, KVF_EINVAL, "sm_scale is not finite.");
    return kvf__cuda_check_dtypes(pr, err);
}

// Validates the host page-table metadata and returns the sequence lengths the kernel sees in
// len[] (B entries).
static int kvf__split_lengths(const kvf_cuda_problem *pr, int64_t *len, kvf_error *err) {
    const int32_t *ip = pr->kv_indptr, *last = pr->kv_last_page_len;
    if (pr->batch_size > 0 && ip[0] != 0)
        return kvf_error_set(err, KVF_EINVAL, "kv_indptr[0] is %d, not 0.", ip[0]);
    for (int32_t b = 0; b < pr->batch_size; ++b) {
        if (ip[b + 1] < ip[b])
            return kvf_error_set(err, KVF_EINVAL, "kv_indptr decreases at index %d (%d < %d).",
                                 b + 1, ip[b + 1], ip[b]);
        const int64_t n = (int64_t)ip[b + 1] - ip[b];
        if (n > 0 && (last[b] < 1 || last[b] > pr->page_size))
            return kvf_error_set(err, KVF_EINVAL,
                                 "kv_last_page_len[%d] is %d, outside [1, page_size = %d].", b,
                                 last[b], pr->page_size);
        if (n == 0 && (last[b] < 0 || last[b] > pr->page_size))
            return kvf_error_set(err, KVF_EINVAL,
                                 "kv_last_page_len[%d] is %d for an empty sequence, outside "
                                 "[0, page_size = %d].",
                                 b, last[b], pr->page_size);
        if (KVF_MUT(TAIL_SLOTS_READ))
            len[b] = n * pr->page_size; // B03: bounds per page, not per token
        else if (KVF_MUT(LAST_LEN_MODULO))
            len[b] = n == 0 ? 0 : (n - 1) * pr->page_size + last[b] % pr->page_size; // B11
        else if (KVF_MUT(EXTRA_PAGE))
            len[b] = n == 0 ? 0 : n * pr->page_size + last[b]; // B15: one page too many
        else
            len[b] = n == 0 ? 0 : (n - 1) * pr->page_size + last[b];
        if (len[b] > KVF_CUDA_MAX_SEQ_LEN)
            return kvf_error_set(err, KVF_EUNSUPPORTED,
                                 "Sequence %d has %lld tokens, above the CUDA kernels' maximum "
                                 "of 2^30.",
                                 b, (long long)len[b]);
    }
    return 0;
}

// The shape and the pointers; then, into a malloc'd *len_out (B entries, at least one
// allocated), the checked lengths.
static int kvf__split_checked_lengths(const kvf_cuda_problem *pr, int64_t **len_out,
                                      kvf_error *err) {
    *len_out = NULL;
    int rc = kvf__cuda_check_shape(pr, err);
    if (rc) return rc;
    if (pr->batch_size > 0 && (!pr->kv_indptr || !pr->kv_last_page_len))
        return kvf_error_set(err, KVF_EINVAL, "kv_indptr and kv_last_page_len must be given.");
    const int32_t B = pr->batch_size;
    int64_t *len = (int64_t *)malloc(sizeof(int64_t) * (size_t)(B > 0 ? B : 1));
    if (!len) return kvf_error_set(err, KVF_ENOMEM, "Out of host memory for sequence lengths.");
    rc = kvf__split_lengths(pr, len, err);
    if (rc) {
        free(len);
        return rc;
    }
    *len_out = len;
    return 0;
}

int kvf__cuda_check_problem(const kvf_cuda_problem *pr, kvf_error *err) {
    int64_t *len = NULL;
    const int rc = kvf__split_checked_lengths(pr, &len, err);
    free(len);
    return rc;
}

float kvf__cuda_scale_log2(float sm_scale) {
    // The folded constant is rounded once (in double first), then one rounding per logit:
    // s2 = (q.k) * c, c = fl(sm_scale * log2 e).
    if (KVF_MUT(SCALE_TWICE)) return (float)((double)sm_scale * sm_scale * 1.4426950408889634);
    return (float)((double)sm_scale * 1.4426950408889634);
}

int32_t kvf__cuda_split_group(const kvf_cuda_problem *pr) {
    // One CTA per q head, each mapped to a kv head by the mutant (decode.cuh: head_per_cta).
    if (KVF_MUT(GROUP_POW2) || KVF_MUT(HEAD_MODULO)) return 1;
    return pr->num_qo_heads / pr->num_kv_heads;
}

// The number of splits of sequence b with chunks of chunk_tokens tokens, at least 1.
static int64_t kvf__split_count(const int64_t *len, int32_t b, int64_t chunk_tokens) {
    int64_t s = (len[b] + chunk_tokens - 1) / chunk_tokens;
    if (KVF_MUT(PLANNER_FIRST_SEQ))
        s = (len[0] + chunk_tokens - 1) / chunk_tokens; // B05: launch sized from request 0
    if (KVF_MUT(EMPTY_CHUNK_ZERO_LSE) && len[b] > 0 && len[b] % chunk_tokens == 0)
        s += 1; // B16: a split past the end
    return s < 1 ? 1 : s;
}

/* CTAs of the split kernel with chunks of c tiles: every sequence has at least one. */
static int64_t kvf__split_ctas(const int64_t *len, int32_t B, int32_t Hk, int64_t T, int64_t c) {
    int64_t n = 0;
    for (int32_t b = 0; b < B; ++b) {
        const int64_t t = (len[b] + T - 1) / T;
        n += t > c ? (t + c - 1) / c : 1;
    }
    return n * Hk;
}

/* Tiles per chunk when the (sequence, kv head) pairs alone leave slots of the wave free. Measured
 * on an H200 over batch 1..64 and lengths 512..32768 (docs/performance.md, "Choosing the chunk"):
 * 1. Equal work per CTA over one wave of slots, so that mixed lengths give CTAs of similar work.
 * 2. Below KVF__SPLIT_MIN_TILES tiles, a CTA's fixed costs (the dependent loads before its first
 *    tile, its epilogue, one more partial state to merge) outweigh a second CTA per SM: one CTA
 *    per SM, with up to twice the tiles, was as fast or faster everywhere.
 * 3. Equal chunks that spill a few CTAs into a second wave leave that wave nearly idle: a chunk
 *    at most a quarter longer that fits one wave is taken instead. Further than that (mixed
 *    lengths, whose CTAs differ in work anyway) the longer CTAs cost more than the tail. */
#define KVF__SPLIT_MIN_TILES 16
static int64_t kvf__split_chunk_tiles(const int64_t *len, int32_t B, int32_t Hk, int64_t T,
                                      int64_t total_tiles, int64_t slots, int64_t num_sms) {
    const int64_t work = total_tiles * Hk;
    int64_t c = (work + slots - 1) / slots;
    if (c < KVF__SPLIT_MIN_TILES) c = (work + num_sms - 1) / num_sms;
    if (c < 1) c = 1;
    if (kvf__split_ctas(len, B, Hk, T, c) <= slots) return c;
    /* The CTA count falls as c grows: the smallest c' in (c, 5c/4] that fits, if any. */
    int64_t lo = c, hi = c + c / 4;
    if (kvf__split_ctas(len, B, Hk, T, hi) > slots) return c;
    while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (kvf__split_ctas(len, B, Hk, T, mid) <= slots)
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

/* Orders a schedule's n items longest first (by tiles, ties in sequence order): the split grid
 * dispatches its CTAs in item order, so when they overflow one wave of slots the long ones start
 * first and the short ones fill the gaps, instead of long ones starting last (list scheduling,
 * longest processing time first). Returns 0 when out of memory. */
typedef struct kvf__split_rank {
    int32_t tiles, at, item[4];
} kvf__split_rank;
static int kvf__split_rank_cmp(const void *a, const void *b) {
    const kvf__split_rank *x = (const kvf__split_rank *)a, *y = (const kvf__split_rank *)b;
    if (x->tiles != y->tiles) return x->tiles > y->tiles ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}
static int32_t kvf__split_item_tiles(const int32_t *item, int64_t T) {
    const int64_t toks = ((uint32_t)item[3] & 0x7fffffffu) - (int64_t)item[2];
    return (int32_t)((toks + T - 1) / T);
}
static int kvf__split_longest_first(int32_t *items, int64_t n, int64_t T) {
    int64_t i = 1;
    while (i < n &&
           kvf__split_item_tiles(items + 4 * i, T) <= kvf__split_item_tiles(items + 4 * (i - 1), T))
        ++i;
    if (i >= n) return 1; /* already in order (uniform batches): nothing to move */
    kvf__split_rank *r = (kvf__split_rank *)malloc(sizeof *r * (size_t)n);
    if (!r) return 0;
    for (i = 0; i < n; ++i) {
        r[i].tiles = kvf__split_item_tiles(items + 4 * i, T);
        r[i].at = (int32_t)i;
        memcpy(r[i].item, items + 4 * i, sizeof r[i].item);
    }
    qsort(r, (size_t)n, sizeof *r, kvf__split_rank_cmp);
    for (i = 0; i < n; ++i)
        memcpy(items + 4 * i, r[i].item, sizeof r[i].item);
    free(r);
    return 1;
}

/* The arithmetic form of a schedule's n items (split_item.h), or splits = 0: the form is taken
 * from sequence 0's items and kept only when it reproduces every item of the table. */
static kvf__split_form kvf__split_find_form(const int32_t *items, int64_t n, int32_t B,
                                            int32_t chunk_tokens) {
    kvf__split_form f;
    memset(&f, 0, sizeof f);
    if (B < 1 || n % B != 0) return f;
    const int32_t splits = (int32_t)(n / B);
    const int32_t pages = B > 1 ? items[4 * (int64_t)splits + 1] : 0;
    const int32_t len = (int32_t)((uint32_t)items[4 * (int64_t)splits - 1] & 0x7fffffffu);
    const int32_t single = (int32_t)((uint32_t)items[3] & 0x80000000u);
    for (int64_t i = 0; i < n; ++i) {
        int32_t it[4];
        kvf__split_form_item(splits, pages, len, chunk_tokens, single, (int32_t)i, it);
        if (memcmp(it, items + 4 * i, sizeof it) != 0) return f;
    }
    f.splits = splits, f.pages = pages, f.len = len, f.chunk_tokens = chunk_tokens;
    f.single = single;
    return f;
}

int kvf__cuda_split_build(const kvf_cuda_problem *pr, const kvf__cuda_split_device *dev,
                          kvf__cuda_split_plan *plan, kvf_error *err) {
    memset(plan, 0, sizeof *plan);
    if (dev->num_sms < 1 || dev->ctas_per_sm < 1 || dev->tile_tokens < 1)
        return kvf_error_set(err, KVF_EINVAL,
                             "The split plan needs at least one SM, CTA per SM and tile token "
                             "(%d, %d, %d given).",
                             dev->num_sms, dev->ctas_per_sm, dev->tile_tokens);
    int64_t *len = NULL;
    int rc = kvf__split_checked_lengths(pr, &len, err);
    if (rc) return rc;
    const int32_t B = pr->batch_size, Hk = pr->num_kv_heads;
    const int64_t T = dev->tile_tokens;
    // Split heuristic: aim for one wave of CTAs (num_sms * ctas_per_sm). With at least that
    // many (sequence, kv head) pairs, no split; otherwise chunks of equal tile count
    // (kvf__split_chunk_tiles), so that mixed lengths give CTAs of similar work (B16) and batch
    // 1 fills the GPU. Chunks are whole tiles, so a chunk boundary never cuts a tile (B09).
    int64_t total_tiles = 0, max_tiles = 0;
    for (int32_t b = 0; b < B; ++b) {
        const int64_t t = (len[b] + T - 1) / T;
        total_tiles += t;
        if (t > max_tiles) max_tiles = t;
    }
    if (KVF_MUT(PLANNER_FIRST_SEQ))
        total_tiles = max_tiles = B > 0 ? (len[0] + T - 1) / T : 0; // B05: sees request 0
    const int64_t slots = (int64_t)dev->num_sms * dev->ctas_per_sm;
    int64_t chunk_tiles;
    if ((int64_t)B * Hk >= slots || max_tiles == 0)
        chunk_tiles = max_tiles > 0 ? max_tiles : 1;
    else
        chunk_tiles = kvf__split_chunk_tiles(len, B, Hk, T, total_tiles, slots, dev->num_sms);
    // A forced chunk size (experiments, and tests that want many split boundaries).
    if (dev->force_chunk_tiles > 0) chunk_tiles = dev->force_chunk_tiles;
    if (chunk_tiles < 1) chunk_tiles = 1;
    if (chunk_tiles > max_tiles && max_tiles > 0) chunk_tiles = max_tiles;
    int64_t chunk_tokens = chunk_tiles * T; // <= 2^30 + T: fits int32
    if (KVF_MUT(CHUNK_NOT_TILE_MULTIPLE)) {
        // B09: the same heuristic counted in tokens, so a chunk is not a multiple of the tile.
        int64_t total_tok = 0, max_tok = 0;
        for (int32_t b = 0; b < B; ++b) {
            total_tok += len[b];
            if (len[b] > max_tok) max_tok = len[b];
        }
        chunk_tokens = (int64_t)B * Hk >= slots || max_tok == 0
                           ? max_tok
                           : (total_tok * Hk + slots - 1) / slots;
        if (chunk_tokens < 1) chunk_tokens = 1;
    }

    // Schedule: every sequence gets at least one item, so empty ones are written too (B04,
    // B05: the planner and the launch agree by construction, both read this table).
    int64_t n_items = 0;
    int32_t max_splits = 1;
    for (int32_t b = 0; b < B; ++b) {
        const int64_t s = kvf__split_count(len, b, chunk_tokens);
        if (s > max_splits) max_splits = (int32_t)s;
        n_items += s;
    }
    /* One CTA per item and kv head (or q head: kvf__cuda_split_group) in a 1-D grid. */
    const int64_t heads = kvf__cuda_split_group(pr) == 1 ? pr->num_qo_heads : Hk;
    if (n_items * heads > INT32_MAX) {
        free(len);
        return kvf_error_set(err, KVF_EUNSUPPORTED, "The split plan needs %lld CTAs, above 2^31-1.",
                             (long long)(n_items * heads));
    }
    const size_t items_at = ((size_t)B + 1 + 3) & ~(size_t)3;
    const size_t sched_len = items_at + 4 * (size_t)n_items;
    int32_t *sched = (int32_t *)calloc(sched_len, sizeof(int32_t));
    if (!sched) {
        free(len);
        return kvf_error_set(err, KVF_ENOMEM, "Out of host memory for the split schedule.");
    }
    int32_t *seq_first = sched, *items = sched + items_at;
    int64_t it = 0;
    for (int32_t b = 0; b < B; ++b) {
        const int64_t s = kvf__split_count(len, b, chunk_tokens);
        seq_first[b] = (int32_t)it;
        for (int64_t k = 0; k < s; ++k, ++it) {
            const int64_t beg = k * chunk_tokens;
            const int64_t end = beg + chunk_tokens < len[b] ? beg + chunk_tokens : len[b];
            items[4 * it] = b;
            items[4 * it + 1] = pr->kv_indptr[b];
            items[4 * it + 2] = (int32_t)beg;
            // end <= 2^30 (checked), so bit 31 is free for "only item of its sequence".
            // B17: when anything is merged, every sequence goes through the merge.
            const int single = KVF_MUT(STALE_SCRATCH) ? s == 1 && max_splits == 1 : s == 1;
            items[4 * it + 3] =
                (int32_t)((uint32_t)(end > beg ? end : beg) | (single ? 1u << 31 : 0u));
        }
    }
    seq_first[B] = (int32_t)it;
    free(len);
    if (n_items * Hk > slots && !kvf__split_longest_first(items, n_items, T)) {
        free(sched);
        return kvf_error_set(err, KVF_ENOMEM, "Out of host memory for the split schedule.");
    }
    plan->form = kvf__split_find_form(items, n_items, B, (int32_t)chunk_tokens);
    if (max_splits > 1) {
        size_t rows = (size_t)n_items * (size_t)pr->num_qo_heads;
        if (KVF_MUT(STALE_SCRATCH)) // B17: room for the rows the last merge reads past the end
            rows = ((size_t)n_items + (size_t)max_splits) * (size_t)pr->num_qo_heads;
        plan->ws_acc_bytes = rows * (size_t)pr->head_dim * sizeof(float);
        plan->ws_ml_at = (plan->ws_acc_bytes + 255) & ~(size_t)255;
        plan->ws_bytes = plan->ws_ml_at + rows * 2 * sizeof(float); // (m, l) pairs
    }
    plan->n_items = (int32_t)n_items;
    plan->sched = sched;
    plan->sched_len = sched_len;
    plan->items_at = items_at;
    plan->info.tile_tokens = (int32_t)T;
    plan->info.chunk_tokens = (int32_t)chunk_tokens;
    plan->info.max_splits = max_splits;
    plan->info.ctas = n_items * Hk;
    plan->info.merge = max_splits > 1;
    plan->info.num_sms = dev->num_sms;
    plan->info.ctas_per_sm = dev->ctas_per_sm;
    return 0;
}

void kvf__cuda_split_free(kvf__cuda_split_plan *plan) {
    free(plan->sched);
    plan->sched = NULL;
    plan->sched_len = 0;
}
