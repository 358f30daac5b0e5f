// fp32 <-> bf16 cast kernels on the GPU, device code only (launched by cast.cu; run on the CPU by
// the SIMT emulation tests, tests/emulation/). The rounding is f32_to_bf16's (device_helpers.cuh),
// the CPU's algorithm, so results match the CPU cast bit for bit, NaN payloads and signs included.
// Memory-bound: 16-byte accesses on the wide side (4 floats, or 8 bf16 values) for the vec8
// kernels, which the launcher takes only when both pointers are 16-byte aligned.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::casts {

constexpr int kThreads = 256;

__global__ void f32_to_bf16_scalar(std::uint16_t* dst, const float* src, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    dst[i] = f32_to_bf16(src[i]);
}

__global__ void bf16_to_f32_scalar(float* dst, const std::uint16_t* src, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    dst[i] = bf16_to_f32(src[i]);
}

// Eight elements per thread: two float4 loads, one 16-byte store of 8 bf16 (and the reverse).
__global__ void f32_to_bf16_vec8(uint4* dst, const float4* src, std::int64_t n8) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n8;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const float4 a = src[2 * i], b = src[2 * i + 1];
    uint4 o;
    o.x = f32_to_bf16(a.x) | (static_cast<unsigned>(f32_to_bf16(a.y)) << 16);
    o.y = f32_to_bf16(a.z) | (static_cast<unsigned>(f32_to_bf16(a.w)) << 16);
    o.z = f32_to_bf16(b.x) | (static_cast<unsigned>(f32_to_bf16(b.y)) << 16);
    o.w = f32_to_bf16(b.z) | (static_cast<unsigned>(f32_to_bf16(b.w)) << 16);
    dst[i] = o;
  }
}

__device__ __forceinline__ float lo_half(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_half(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

__global__ void bf16_to_f32_vec8(float4* dst, const uint4* src, std::int64_t n8) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n8;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const uint4 w = src[i];
    dst[2 * i] = make_float4(lo_half(w.x), hi_half(w.x), lo_half(w.y), hi_half(w.y));
    dst[2 * i + 1] = make_float4(lo_half(w.z), hi_half(w.z), lo_half(w.w), hi_half(w.w));
  }
}

}  // namespace zt::cuda::detail::casts
