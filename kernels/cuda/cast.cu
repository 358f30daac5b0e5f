// fp32 <-> bf16 casts on the GPU. Memory-bound: 16-byte accesses on the wide side (4 floats, or
// 8 bf16 values) when both pointers are 16-byte aligned, a scalar kernel otherwise.
#include "kernels/cuda/cast.h"

#include "kernels/cuda/common.cuh"

namespace zt::cuda {

namespace {

using detail::bf16_to_f32;
using detail::f32_to_bf16;

__global__ void f32_to_bf16_scalar(std::uint16_t* dst, const float* src, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * blockDim.x)
    dst[i] = f32_to_bf16(src[i]);
}

__global__ void bf16_to_f32_scalar(float* dst, const std::uint16_t* src, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * blockDim.x)
    dst[i] = bf16_to_f32(src[i]);
}

// Eight elements per thread: two float4 loads, one 16-byte store of 8 bf16 (and the reverse).
__global__ void f32_to_bf16_vec8(uint4* dst, const float4* src, std::int64_t n8) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n8; i += std::int64_t{gridDim.x} * blockDim.x) {
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
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n8; i += std::int64_t{gridDim.x} * blockDim.x) {
    const uint4 w = src[i];
    dst[2 * i] = make_float4(lo_half(w.x), hi_half(w.x), lo_half(w.y), hi_half(w.y));
    dst[2 * i + 1] = make_float4(lo_half(w.z), hi_half(w.z), lo_half(w.w), hi_half(w.w));
  }
}

constexpr int kThreads = 256;

}  // namespace

void cast(const ExecContext& ctx, TensorView dst, TensorView src) {
  const cudaStream_t stream = detail::stream_of(ctx);
  detail::check_on_gpu(dst, "dst");
  detail::check_on_gpu(src, "src");
  ZT_CHECK(dst.numel() == src.numel(), "cast of {} elements into {}", src.numel(), dst.numel());
  const std::int64_t n = src.numel();
  if (n == 0) return;
  if (dst.dtype == src.dtype) {
    ZT_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, src.size_bytes(), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  const bool vec = detail::aligned16(dst.data) && detail::aligned16(src.data);
  const std::int64_t n8 = vec ? n / 8 : 0;  // elements [8 n8, n) go through the scalar kernel
  const std::int64_t tail = n - 8 * n8;
  if (dst.dtype == DType::kBF16 && src.dtype == DType::kF32) {
    auto* d = static_cast<std::uint16_t*>(dst.data);
    const auto* s = static_cast<const float*>(src.data);
    if (n8 > 0) f32_to_bf16_vec8<<<detail::grid_for(n8, kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<uint4*>(d), reinterpret_cast<const float4*>(s), n8);
    if (tail > 0) f32_to_bf16_scalar<<<detail::grid_for(tail, kThreads), kThreads, 0, stream>>>(d + 8 * n8, s + 8 * n8, tail);
  } else if (dst.dtype == DType::kF32 && src.dtype == DType::kBF16) {
    auto* d = static_cast<float*>(dst.data);
    const auto* s = static_cast<const std::uint16_t*>(src.data);
    if (n8 > 0) bf16_to_f32_vec8<<<detail::grid_for(n8, kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<float4*>(d), reinterpret_cast<const uint4*>(s), n8);
    if (tail > 0) bf16_to_f32_scalar<<<detail::grid_for(tail, kThreads), kThreads, 0, stream>>>(d + 8 * n8, s + 8 * n8, tail);
  } else {
    ZT_CHECK(false, "cast from {} to {} is not supported", dtype_name(src.dtype), dtype_name(dst.dtype));
  }
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
