// FP8 cache elements on the device (docs/design.md §1, "KV dtypes and scales"): e4m3
// (float8_e4m3fn) and e5m2 bytes widened exactly. Every e4m3 and e5m2 value is an f16 value
// (normal or subnormal), an f32 value and a bf16 value, so each widening below is exact and the
// kernels compute on the cache's own values; NaN bytes widen to NaN.
//   e5m2 -> f16: the byte is the f16's high byte (same sign, exponent and bias), one byte
//                permute per pair;
//   e4m3 -> f16: cvt.rn.f16x2.e4m3x2 (sm_89 and newer), exact;
//   f16 -> f32 -> bf16: exact conversions.
// Shared by the split kernel (decode.cuh) and cuda-naive (naive.cu).
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

__device__ __forceinline__ float2 f16x2_to_float2(uint32_t w) {
    __half2_raw r;
    r.x = (unsigned short)(w & 0xffffu), r.y = (unsigned short)(w >> 16);
    return __half22float2(__half2(r));
}

// Four FP8 elements (the bytes of w, lowest first) as f32.
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

// One FP8 element as f32.
__device__ __forceinline__ float fp8_to_float(uint8_t b, bool e5m2) {
    return fp8x2_to_float2(b, e5m2).x;
}

} // namespace kvf
