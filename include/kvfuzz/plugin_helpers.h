/* Optional helpers for kvfuzz plugin authors, header-only, installed beside kvfuzz/plugin.h.
 *
 * What every plugin otherwise writes again: bf16 <-> f32 conversions (round to nearest, ties
 * to even, NaN kept a quiet NaN), a sequence's length from the index arrays, the address of a
 * q/o row, an lse element and a K/V row from the strides in kvf_plugin_args, and the export
 * macro for the entry point. Nothing here is part of the ABI: a plugin that does its own is as
 * good. Every function is static inline, computes offsets in int64_t (an int32 offset wraps on
 * a large pool: a page stride of 1,077,120 elements passes 2^31 at page 1,994), and depends on
 * nothing but plugin.h and the C standard library. The header compiles as C11, as C++ and
 * under nvcc, where the functions are __host__ __device__ so a CUDA kernel calls them too;
 * but args->shape is a host pointer even for a CUDA kernel, so the two functions that read
 * through it (kvf_plugin_seq_len_args, kvf_plugin_kv_head) are for host code only. The rest
 * take the page size as an argument and work on the device with args passed by value.
 *
 *   #include <kvfuzz/plugin_helpers.h>
 *   KVF_PLUGIN_EXPORT const kvf_plugin *kvf_plugin_v1(void) { return &my_plugin; }
 *
 * A CPU kernel's inner loop with them:
 *   const int64_t len = kvf_plugin_seq_len_args(a, b);
 *   const uint16_t *q = kvf_plugin_q_row(a, b, h);
 *   const uint16_t *k = kvf_plugin_k_token(a, b, t, kvf_plugin_kv_head(a->shape, h), S);
 *   float x = kvf_plugin_bf16_to_f32(q[i]) * kvf_plugin_bf16_to_f32(k[i]); ...
 *   kvf_plugin_o_row(a, b, h)[i] = kvf_plugin_f32_to_bf16(acc[i]);
 *   *kvf_plugin_lse_at(a, b, h) = lse;
 * and for FP8 caches, kvf_plugin_kv_value and kvf_plugin_kv_scale read an element and its
 * scale whatever the dtype. */
#ifndef KVFUZZ_PLUGIN_HELPERS_H
#define KVFUZZ_PLUGIN_HELPERS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "plugin.h"

/* Marks the entry point as exported: C linkage under C++ and default visibility, so a library
 * built with -fvisibility=hidden (or CUDA_VISIBILITY_PRESET hidden) still exports
 * kvf_plugin_v1 and nothing else. */
#ifdef __cplusplus
#define KVF_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))
#else
#define KVF_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* Host and device under nvcc, plain static inline elsewhere. */
#ifdef __CUDACC__
#define KVF_PLUGIN_INLINE static inline __host__ __device__
#else
#define KVF_PLUGIN_INLINE static inline
#endif

/* ---- bf16 ---------------------------------------------------------------------------------- */

/* Exact: a bf16 value is the top half of an f32. Through memcpy, which compilers reduce to a
 * move, since a union or pointer cast is not portable between C and C++. */
KVF_PLUGIN_INLINE float kvf_plugin_bf16_to_f32(uint16_t b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Round to nearest, ties to even, as kvfuzz's oracle rounds: adding 0x7fff plus the kept
 * part's lowest bit carries into the kept half exactly when the dropped half is above one
 * half, or equal to it with an odd kept half. Integer arithmetic on the bits, so it holds for
 * subnormals (no flush to zero, whatever the compiler's float flags), finite values that round
 * up to infinity (as IEEE rounding does) and infinities (unchanged). A NaN keeps its sign and
 * the top of its payload and gets the quiet bit: without it, a signalling NaN whose payload
 * lies in the dropped half would round to an infinity. */
KVF_PLUGIN_INLINE uint16_t kvf_plugin_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* ---- sequences ----------------------------------------------------------------------------- */

/* Tokens of sequence b: with n = kv_indptr[b+1] - kv_indptr[b] pages, (n-1) * page_size +
 * kv_last_page_len[b], or 0 when n == 0 (an empty sequence, whatever its last-page length). A
 * full last page has kv_last_page_len[b] == page_size. */
KVF_PLUGIN_INLINE int64_t kvf_plugin_seq_len(const int32_t *kv_indptr,
                                             const int32_t *kv_last_page_len, int32_t page_size,
                                             int32_t b) {
    const int64_t pages = (int64_t)kv_indptr[b + 1] - kv_indptr[b];
    return pages <= 0 ? 0 : (pages - 1) * page_size + kv_last_page_len[b];
}

/* The same from run()'s arguments (host code: it reads args->shape), and from plan()'s host
 * copies of the index arrays. */
KVF_PLUGIN_INLINE int64_t kvf_plugin_seq_len_args(const kvf_plugin_args *a, int32_t b) {
    return kvf_plugin_seq_len(a->kv_indptr, a->kv_last_page_len, a->shape->page_size, b);
}

KVF_PLUGIN_INLINE int64_t kvf_plugin_seq_len_index(const kvf_plugin_index *ix,
                                                   const kvf_plugin_shape *s, int32_t b) {
    return kvf_plugin_seq_len(ix->kv_indptr, ix->kv_last_page_len, s->page_size, b);
}

/* The KV head query head h reads: h / (Hq / Hk). Host code, or a shape copied to the device. */
KVF_PLUGIN_INLINE int32_t kvf_plugin_kv_head(const kvf_plugin_shape *s, int32_t h) {
    return h / (s->num_qo_heads / s->num_kv_heads);
}

/* The page that holds token t of sequence b (t < its length), page_size S tokens a page. */
KVF_PLUGIN_INLINE int64_t kvf_plugin_token_page(const kvf_plugin_args *a, int32_t b, int64_t t,
                                                int32_t page_size) {
    return a->kv_indices[(int64_t)a->kv_indptr[b] + t / page_size];
}

/* ---- rows ------------------------------------------------------------------------------------
 * Each takes the strides from args rather than assuming contiguous tensors: the ABI passes
 * strides, and a kernel that ignores them breaks on any padded or strided layout. A row is
 * head_dim contiguous elements. */

KVF_PLUGIN_INLINE const uint16_t *kvf_plugin_q_row(const kvf_plugin_args *a, int32_t b, int32_t h) {
    return a->q + (int64_t)b * a->q_stride_batch + (int64_t)h * a->q_stride_head;
}

KVF_PLUGIN_INLINE uint16_t *kvf_plugin_o_row(const kvf_plugin_args *a, int32_t b, int32_t h) {
    return a->o + (int64_t)b * a->o_stride_batch + (int64_t)h * a->o_stride_head;
}

KVF_PLUGIN_INLINE float *kvf_plugin_lse_at(const kvf_plugin_args *a, int32_t b, int32_t h) {
    return a->lse + (int64_t)b * a->lse_stride_batch + h;
}

/* K and V rows by page id, slot in the page and KV head. */
KVF_PLUGIN_INLINE const uint16_t *kvf_plugin_k_row(const kvf_plugin_args *a, int64_t page,
                                                   int64_t slot, int32_t kv_head) {
    return a->k_cache + page * a->kv_stride_page + slot * a->kv_stride_slot +
           (int64_t)kv_head * a->kv_stride_head;
}

KVF_PLUGIN_INLINE const uint16_t *kvf_plugin_v_row(const kvf_plugin_args *a, int64_t page,
                                                   int64_t slot, int32_t kv_head) {
    return a->v_cache + page * a->kv_stride_page + slot * a->kv_stride_slot +
           (int64_t)kv_head * a->kv_stride_head;
}

/* K and V rows of token t of sequence b: its page through the page table, its slot t % S. */
KVF_PLUGIN_INLINE const uint16_t *kvf_plugin_k_token(const kvf_plugin_args *a, int32_t b, int64_t t,
                                                     int32_t kv_head, int32_t page_size) {
    return kvf_plugin_k_row(a, kvf_plugin_token_page(a, b, t, page_size), t % page_size, kv_head);
}

KVF_PLUGIN_INLINE const uint16_t *kvf_plugin_v_token(const kvf_plugin_args *a, int32_t b, int64_t t,
                                                     int32_t kv_head, int32_t page_size) {
    return kvf_plugin_v_row(a, kvf_plugin_token_page(a, b, t, page_size), t % page_size, kv_head);
}

/* ---- FP8 caches ------------------------------------------------------------------------------
 * For a kernel that declares them (kv_dtypes, scale_granularities; docs/plugins.md "FP8
 * caches"): an FP8 cache's pointer is its bytes, at the same element strides. */

/* An FP8 byte's value, exactly (dtype 1 e4m3 = float8_e4m3fn: S.1111.111 NaN, no infinities;
 * 2 e5m2: S.11111.00 infinite, S.11111.xx NaN). */
KVF_PLUGIN_INLINE float kvf_plugin_fp8_to_f32(uint8_t x, int32_t dtype) {
    const int mbits = dtype == 1 ? 3 : 2, bias = dtype == 1 ? 7 : 15, emax = dtype == 1 ? 15 : 31;
    const int e = (x & 0x7F) >> mbits, m = x & ((1 << mbits) - 1);
    const float sign = (x & 0x80) ? -1.0f : 1.0f;
    if (e == emax && (dtype == 2 || m == (1 << mbits) - 1))
        return dtype == 2 && m == 0 ? sign * INFINITY : NAN;
    /* m 2^(1 - bias - mbits) for subnormals, (2^mbits + m) 2^(e - bias - mbits) otherwise;
     * exact: at most 4 significant bits, exponents within f32's normal range. */
    float v = (float)(e ? (1 << mbits) + m : m);
    int p = (e ? e : 1) - bias - mbits;
    for (; p > 0; p--)
        v *= 2.0f;
    for (; p < 0; p++)
        v *= 0.5f;
    return sign * v;
}

/* Element (page, slot, kv head, d) of K (which 0) or V (which 1) as a float, whatever the
 * cache's dtype (0 bf16, else FP8, shape->k_dtype / v_dtype), before any scale. */
KVF_PLUGIN_INLINE float kvf_plugin_kv_value(const kvf_plugin_args *a, int which, int32_t dtype,
                                            int64_t page, int64_t slot, int32_t kv_head,
                                            int32_t d) {
    const int64_t at = page * a->kv_stride_page + slot * a->kv_stride_slot +
                       (int64_t)kv_head * a->kv_stride_head + d;
    const void *base = which ? (const void *)a->v_cache : (const void *)a->k_cache;
    if (dtype == 0) return kvf_plugin_bf16_to_f32(((const uint16_t *)base)[at]);
    return kvf_plugin_fp8_to_f32(((const uint8_t *)base)[at], dtype);
}

/* The scale of (page, slot, kv head) in K (which 0) or V (which 1): 1 without scales
 * (granularity 0), else args->k_scale / v_scale at the granularity (shape->scale_granularity:
 * 1 tensor, 2 per KV head, 3 per page slot and KV head). */
KVF_PLUGIN_INLINE float kvf_plugin_kv_scale(const kvf_plugin_args *a, int which,
                                            int32_t granularity, int64_t page, int64_t slot,
                                            int32_t kv_head, int32_t page_size,
                                            int32_t num_kv_heads) {
    const float *sc = which ? a->v_scale : a->k_scale;
    switch (granularity) {
    case 1:
        return sc[0];
    case 2:
        return sc[kv_head];
    case 3:
        return sc[(page * page_size + slot) * num_kv_heads + kv_head];
    default:
        return 1.0f;
    }
}

#endif
