// FP8 cache elements on the device (docs/design.md §1, "KV dtypes and scales"): e4m3
// (float8_e4m3fn) and e5m2 bytes widened exactly. Every e4m3 and e5m2 value is an f16 value
// (normal or subnormal), an f32 value and a bf16 value, so each widening below is exact and the
// kernels compute on the cache's own values; NaN bytes widen to NaN.
//   e5m2 -> f16: the byte is the f16's high byte (same sign, exponent and bias), one byte
//                permute per pair;
//   e4m3 -> f16: cvt.rn.f16x2.e4m3x2 (sm_89 and newer), exact;
//   f16 -> f32 -> bf16: exact conversions.
// Shared by the split kernel (decode.cuh) and cuda-naive (naive.cu).
//
// The split kernel can widen without conversion instructions (a build with KVF_FP8_FAST_K/V,
// decode.cuh), whose issue rate on sm_90 is a quarter of the integer pipe's and an eighth of
// the FMA pipe's. They turned out not to bound its FP8 throughput: the widening below measured
// 4-5% slower than the conversions (docs/performance.md, "FP8 caches"), so it stays off:
//   fp8x4_to_bf16x4_fast places each byte's sign and magnitude bits where a bf16's sit, a bf16
//   whose value is the element's times 2^-bias (a subnormal bf16 for a subnormal element), and
//   multiplies by 2^bias (bias 120 for e4m3, 112 for e5m2) in one bf16x2 FMA: exact, as a power
//   of two times a bf16 whose result is a normal bf16, provided the FMA keeps subnormal
//   operands (PTX has no flush-to-zero for bf16; test_fp8_widen checks it on the device).
//   The NaN bytes (and e5m2's infinities) would widen to finite numbers there: fp8x4_special
//   finds them first, and the caller takes the conversion path for them.
// tests/test_fp8_widen.c checks both paths against the host's decoding for every byte.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

namespace kvf {

// Element types of a cache as the plugin ABI numbers them (plugin.h: shape.k_dtype).
constexpr int kDtypeBf16 = 0, kDtypeE4m3 = 1, kDtypeE5m2 = 2;

// Two FP8 elements (bits 0-7 and 8-15 of `two`, the lower address first) as an f16x2 word.
__device__ __forceinline__ uint32_t fp8x2_to_f16x2(uint32_t two, bool e5m2) {
    if (e5m2) return __byte_perm(two, 0u, 0x1404); // bytes [0, b0, 0, b1]
    const __half2_raw h =
        __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(two & 0xffffu), __NV_E4M3);
    return (uint32_t)h.x | (uint32_t)h.y << 16;
}

// The word read as an f16x2 in place: each half widens with a half selector, no shift.
__device__ __forceinline__ float2 f16x2_to_float2(uint32_t w) {
    return __half22float2(*reinterpret_cast<const __half2 *>(&w));
}

// Four FP8 elements (the bytes of w, lowest first) as f32. Callers in hot loops pass e5m2 as a
// constant (decode.cuh, fp8_format): a runtime flag makes the compiler issue both formats'
// instructions, predicated, for every word.
__device__ __forceinline__ float4 fp8x4_to_float4(uint32_t w, bool e5m2) {
    const float2 lo = f16x2_to_float2(fp8x2_to_f16x2(w, e5m2));
    const float2 hi = f16x2_to_float2(fp8x2_to_f16x2(w >> 16, e5m2));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
}

// Two FP8 elements (bits 0-15 of w) as f32.
__device__ __forceinline__ float2 fp8x2_to_float2(uint32_t w, bool e5m2) {
    return f16x2_to_float2(fp8x2_to_f16x2(w, e5m2));
}

// Four FP8 elements as two bf16x2 words (elements 0, 1 in .x; 2, 3 in .y), the MMA's operand
// form: exact, as every FP8 value is a bf16 value.
__device__ __forceinline__ uint2 fp8x4_to_bf16x4(uint32_t w, bool e5m2) {
    const float4 f = fp8x4_to_float4(w, e5m2);
    __nv_bfloat162 lo = __floats2bfloat162_rn(f.x, f.y), hi = __floats2bfloat162_rn(f.z, f.w);
    return make_uint2(*reinterpret_cast<uint32_t *>(&lo), *reinterpret_cast<uint32_t *>(&hi));
}

// Four FP8 elements as two f16x2 words (elements 0, 1 in .x; 2, 3 in .y): one conversion (e4m3)
// or one byte permute (e5m2) a pair, exact. The split kernel's f16 scores take them (decode.cuh,
// "The scores in f16").
__device__ __forceinline__ uint2 fp8x4_to_f16x4(uint32_t w, bool e5m2) {
    return make_uint2(fp8x2_to_f16x2(w, e5m2), fp8x2_to_f16x2(w >> 16, e5m2));
}

// Nonzero when one of the four FP8 elements of w is one that fp8x4_to_bf16x4_fast does not
// widen: an e4m3 NaN (S.1111.111) or an e5m2 infinity or NaN (S.11111.xx). The byte's bits
// below the sign, masked to the exponent (and e4m3's mantissa), plus one unit carry into bit 7
// only when all are set, and never into the next byte. Callers may OR the sums of several
// words before the final mask: kvf::fp8_special_sum, then & 0x80808080.
__device__ __forceinline__ uint32_t fp8_special_sum(uint32_t w, bool e5m2) {
    return (w & (e5m2 ? 0x7C7C7C7Cu : 0x7F7F7F7Fu)) + (e5m2 ? 0x04040404u : 0x01010101u);
}
__device__ __forceinline__ uint32_t fp8x4_special(uint32_t w, bool e5m2) {
    return fp8_special_sum(w, e5m2) & 0x80808080u;
}

// PTX prmt in its default mode: a selector nibble of 8 + i replicates byte i's sign bit.
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t sel) {
    uint32_t d;
    asm("prmt.b32 %0, %1, 0, %2;" : "=r"(d) : "r"(a), "r"(sel));
    return d;
}

// x * s per bf16 half, rounded to nearest (exact for the operands below); -0 as the addend
// keeps the product's sign for zeros.
__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t x, uint32_t s) {
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(x), "r"(s), "r"(0x80008000u));
    return d;
}

// Four FP8 elements as two bf16x2 words, as fp8x4_to_bf16x4 gives them, for a word where
// fp8x4_special(w) is 0. Each half of prmt's result is a byte sign-extended to 16 bits; shifted
// left so that its 7 magnitude bits sit under a bf16's exponent and mantissa (4 for e4m3's
// 4-bit exponent, 5 for e5m2's 5), the mask keeps them and one sign bit.
__device__ __forceinline__ uint2 fp8x4_to_bf16x4_fast(uint32_t w, bool e5m2) {
    const int sh = e5m2 ? 5 : 4;
    const uint32_t keep = e5m2 ? 0x8FE08FE0u : 0x87F087F0u;
    const uint32_t pow2 = e5m2 ? 0x77807780u : 0x7B807B80u; // 2^112 or 2^120, each half
    const uint32_t lo = (prmt(w, 0x9180u) << sh) & keep;    // bytes 0, 1
    const uint32_t hi = (prmt(w, 0xB3A2u) << sh) & keep;    // bytes 2, 3
    return make_uint2(bf16x2_mul(lo, pow2), bf16x2_mul(hi, pow2));
}

// The same four elements as f32, from the bf16 words (a bf16 is an f32's high half).
__device__ __forceinline__ float4 fp8x4_to_float4_fast(uint32_t w, bool e5m2) {
    const uint2 b = fp8x4_to_bf16x4_fast(w, e5m2);
    return make_float4(__uint_as_float(b.x << 16), __uint_as_float(b.x & 0xffff0000u),
                       __uint_as_float(b.y << 16), __uint_as_float(b.y & 0xffff0000u));
}

// One FP8 element as f32.
__device__ __forceinline__ float fp8_to_float(uint8_t b, bool e5m2) {
    return fp8x2_to_float2(b, e5m2).x;
}

} // namespace kvf
