/* The case model: one paged GQA decode problem (docs/design.md §1), its size limits and its
 * validation.
 *
 * A kvf_case owns every array it points to; kvf_case_free() releases them. Cases come from
 * kvf_case_build() (spec.h: recipe expansion or explicit tensors) or are assembled by hand with
 * kvf_case_alloc() and then checked with kvf_case_validate(). Nothing here talks to a device. */
#ifndef KVFUZZ_CASE_H
#define KVFUZZ_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "kvfuzz/bf16.h"
#include "kvfuzz/error.h"
#include "kvfuzz/kv_quant.h"
#include "kvfuzz/layout.h"

/* Size limits, checked before any allocation. Every field is an inclusive maximum. */
typedef struct kvf_limits {
    int32_t max_batch;          /* sequences per case */
    int32_t max_qo_heads;       /* Hq */
    int32_t max_head_dim;       /* D */
    int32_t max_page_size;      /* S */
    int64_t max_pool_pages;     /* P, the page pool size (page ids are < P) */
    int64_t max_table_entries;  /* kv_indptr[B], all page-table entries together */
    int64_t max_tokens;         /* sum of sequence lengths */
    int64_t max_pool_bytes;     /* bytes of one of k_cache / v_cache (address space reserved) */
    int64_t max_resident_bytes; /* bytes actually written: referenced + poisoned pages, q */
    /* Budgets on what a case costs to judge, estimated from its shape before anything is
     * allocated (kvf_case_cost in spec.h; docs/case-format.md, "Budgets"). 0 means the
     * default: KVF_MAX_MEMORY_MIB / KVF_MAX_WORK when set, else the built-in values. */
    int64_t max_memory_bytes; /* tensors, oracle and kernel buffers of one case */
    int64_t max_work;         /* oracle work units of one case */
} kvf_limits;

/* Defaults: up to 8 GiB of address space per cache (page ids past 65536 for the seed shape,
 * where 32-bit element offsets overflow) with at most 1 GiB of it written. */
void kvf_limits_default(kvf_limits *limits);

/* Caches up to this size are heap blocks, larger ones anonymous mappings (core/src/case.c). */
#define KVF_CASE_HEAP_POOL_BYTES ((size_t)1 << 20)

typedef struct kvf_case {
    int32_t num_qo_heads; /* Hq */
    int32_t num_kv_heads; /* Hk, divides Hq */
    int32_t head_dim;     /* D */
    int32_t page_size;    /* S */
    int32_t batch_size;   /* B */
    int64_t num_pages;    /* P: pool size; valid page ids are [0, P) */
    float sm_scale;

    int32_t *kv_indptr;        /* [B+1] */
    int32_t *kv_indices;       /* [kv_indptr[B]] */
    int32_t *kv_last_page_len; /* [B] */

    kvf_bf16 *q;       /* [B][Hq][D] */
    kvf_bf16 *k_cache; /* [P][S][Hk][D], NHD; pages never written read as +0 */
    kvf_bf16 *v_cache; /* [P][S][Hk][D] */
    size_t pool_bytes; /* bytes of each cache (P*S*Hk*D*2): up to KVF_CASE_HEAP_POOL_BYTES on
                          the heap, above that a lazily committed mapping */

    /* Pages that hold data (referenced pages and poisoned unreferenced ones), ascending and
     * unique. A device kernel needs to upload only these; every other page is all zero bits. */
    int64_t *resident_pages;
    int64_t num_resident_pages;

    /* How a kernel's buffers lay these tensors out (kvfuzz/layout.h): the arrays above are
     * always dense; the buffer hosts apply the layout. All zero (kvf_case_alloc): dense. */
    kvf_layout layout;

    /* The caches' dtypes and scales (kvfuzz/kv_quant.h). An FP8 cache keeps the bf16 images of
     * its bytes in k_cache / v_cache (kvfuzz/fp8.h), so whoever reads values reads exact ones
     * and the buffer hosts turn them back into bytes; the scales multiply them. All zero
     * (kvf_case_alloc): bf16 caches without scales, k_scale and v_scale NULL. */
    kvf_kv_quant quant;
    float *k_scale, *v_scale; /* kvf_case_scale_count floats each: [1], [Hk] or [P][S][Hk] */
    size_t scale_bytes;       /* bytes of each */
} kvf_case;

/* Element counts. */
static inline int64_t kvf_case_q_elems(const kvf_case *c) {
    return (int64_t)c->batch_size * c->num_qo_heads * c->head_dim;
}
static inline int64_t kvf_case_page_elems(const kvf_case *c) {
    return (int64_t)c->page_size * c->num_kv_heads * c->head_dim;
}
static inline int64_t kvf_case_o_elems(const kvf_case *c) {
    return kvf_case_q_elems(c);
}
static inline int64_t kvf_case_lse_elems(const kvf_case *c) {
    return (int64_t)c->batch_size * c->num_qo_heads;
}
/* Length in tokens of sequence b (0 for a sequence with no pages). Valid cases only. */
static inline int64_t kvf_case_seq_len(const kvf_case *c, int32_t b) {
    int32_t n = c->kv_indptr[b + 1] - c->kv_indptr[b];
    return n == 0 ? 0 : (int64_t)(n - 1) * c->page_size + c->kv_last_page_len[b];
}
/* Offset of element (token t of sequence b, kv head g, dim d) in k_cache / v_cache. 64-bit on
 * purpose: page * page_elems overflows 32 bits for page ids past 65535 at the seed shape. */
static inline int64_t kvf_case_kv_offset(const kvf_case *c, int32_t b, int64_t t, int32_t g,
                                         int32_t d) {
    int64_t page = c->kv_indices[c->kv_indptr[b] + t / c->page_size];
    int64_t slot = t % c->page_size;
    return ((page * c->page_size + slot) * c->num_kv_heads + g) * c->head_dim + d;
}

/* Scales per cache (0 without scales). */
static inline int64_t kvf_case_scale_count(const kvf_case *c) {
    return kvf_kv_quant_scale_count(&c->quant, c->num_kv_heads, c->page_size, c->num_pages);
}
/* Index into per-token k_scale / v_scale of (page, slot, KV head g). */
static inline int64_t kvf_case_slot_scale_index(const kvf_case *c, int64_t page, int64_t slot,
                                                int32_t g) {
    return (page * c->page_size + slot) * c->num_kv_heads + g;
}
/* Index into k_scale / v_scale of token t of sequence b, KV head g. Valid cases with scales. */
static inline int64_t kvf_case_scale_index(const kvf_case *c, int32_t b, int64_t t, int32_t g) {
    switch (c->quant.granularity) {
    case KVF_SCALE_HEAD:
        return g;
    case KVF_SCALE_TOKEN: {
        int64_t page = c->kv_indices[c->kv_indptr[b] + t / c->page_size];
        return kvf_case_slot_scale_index(c, page, t % c->page_size, g);
    }
    default:
        return 0;
    }
}
/* The scale of token t of sequence b, KV head g, in k (1 without scales). */
static inline float kvf_case_k_scale(const kvf_case *c, int32_t b, int64_t t, int32_t g) {
    return c->quant.granularity ? c->k_scale[kvf_case_scale_index(c, b, t, g)] : 1.0f;
}
static inline float kvf_case_v_scale(const kvf_case *c, int32_t b, int64_t t, int32_t g) {
    return c->quant.granularity ? c->v_scale[kvf_case_scale_index(c, b, t, g)] : 1.0f;
}

/* Allocates the arrays of a case with the given shape, batch, table size and pool size:
 * indptr/indices/last_len zeroed, q zeroed, caches reserved lazily (zero pages). Shape fields
 * are set; sm_scale is set to 1/sqrt(D). Checks limits first: KVF_ELIMIT or KVF_EINVAL with a
 * sentence naming the field, KVF_ENOMEM if the system refuses. On error *out is left empty
 * (safe to kvf_case_free). */
int kvf_case_alloc(kvf_case *out, int32_t num_qo_heads, int32_t num_kv_heads, int32_t head_dim,
                   int32_t page_size, int32_t batch_size, int64_t table_entries, int64_t num_pages,
                   const kvf_limits *limits, kvf_error *err);

/* The most scales of one cache (per-token scales: P x S x Hk): every buffer host copies them
 * whole for each run, so they stay within 64 MiB per cache whatever the pool's size. */
#define KVF_CASE_MAX_SCALES ((int64_t)1 << 24)

/* Sets a case's dtypes and scale granularity and allocates its scales (zeroed; the caller
 * fills them): KVF_EINVAL for a field out of its domain, KVF_ELIMIT when per-token scales would
 * pass KVF_CASE_MAX_SCALES or max_pool_bytes / 4, KVF_ENOMEM. Call after kvf_case_alloc, once. */
int kvf_case_set_quant(kvf_case *c, const kvf_kv_quant *quant, const kvf_limits *limits,
                       kvf_error *err);

/* Full validation of docs/design.md §1: shapes, indptr monotone and starting at 0, page ids in
 * range, last-page lengths in [1, S] for non-empty sequences (and 0 allowed for empty ones),
 * sm_scale finite, the layout in its domain, limits (the pool's bytes at the layout's page
 * stride included); for quantized caches, every element a sequence reads an image of its
 * dtype's bytes and every scale it reads finite and positive. Returns 0 or KVF_EINVAL / KVF_ELIMIT
 * with one sentence. */
int kvf_case_validate(const kvf_case *c, const kvf_limits *limits, kvf_error *err);

/* Recomputes resident_pages from the page table plus the extra pages given (may be NULL/0). */
int kvf_case_set_resident(kvf_case *c, const int64_t *extra_pages, int64_t num_extra,
                          kvf_error *err);

/* Releases everything and zeroes the struct. NULL and already-freed cases are fine. */
void kvf_case_free(kvf_case *c);

/* Total tokens and largest sequence length. */
int64_t kvf_case_total_tokens(const kvf_case *c);
int64_t kvf_case_max_seq_len(const kvf_case *c);

#endif
