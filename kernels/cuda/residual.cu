// Element-wise adds on the GPU (memory-bound): float4 accesses when every pointer is 16-byte
// aligned, scalar otherwise. Each element is one rounding, so results equal the CPU's bit for bit.
#include "kernels/cuda/residual.h"

#include "kernels/cuda/common.cuh"

namespace zt::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void add_f32(float* out, const float* a, const float* b, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = a[i] + b[i];
}

__global__ void add_f32x4(float4* out, const float4* a, const float4* b, std::int64_t n4) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n4; i += std::int64_t{gridDim.x} * blockDim.x) {
    const float4 x = a[i], y = b[i];
    out[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

__global__ void accumulate_bf16(std::uint16_t* dst, const float* src, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * blockDim.x)
    dst[i] = detail::f32_to_bf16(detail::bf16_to_f32(dst[i]) + src[i]);
}

// out = a + b over n floats, picking the vector kernel for the aligned bulk.
void launch_add(cudaStream_t stream, float* out, const float* a, const float* b, std::int64_t n) {
  const bool vec = detail::aligned16(out) && detail::aligned16(a) && detail::aligned16(b);
  const std::int64_t n4 = vec ? n / 4 : 0;
  if (n4 > 0) {
    add_f32x4<<<detail::grid_for(n4, kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<float4*>(out), reinterpret_cast<const float4*>(a), reinterpret_cast<const float4*>(b), n4);
  }
  if (n > 4 * n4) {
    add_f32<<<detail::grid_for(n - 4 * n4, kThreads), kThreads, 0, stream>>>(out + 4 * n4, a + 4 * n4, b + 4 * n4,
                                                                              n - 4 * n4);
  }
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void residual_forward(const ExecContext& ctx, TensorView out, TensorView a, TensorView b) {
  const cudaStream_t stream = detail::stream_of(ctx);
  for (const auto* v : {&out, &a, &b}) {
    detail::check_on_gpu(*v, "residual operand");
    ZT_CHECK(v->dtype == DType::kF32, "residual_forward is fp32 only");
  }
  ZT_CHECK(a.numel() == out.numel() && b.numel() == out.numel(), "residual_forward: element counts differ");
  if (out.numel() == 0) return;
  launch_add(stream, out.as<float>(), a.as<float>(), b.as<float>(), out.numel());
}

void accumulate_into(const ExecContext& ctx, TensorView dst, TensorView src) {
  const cudaStream_t stream = detail::stream_of(ctx);
  detail::check_on_gpu(dst, "dst");
  detail::check_on_gpu(src, "src");
  ZT_CHECK(src.dtype == DType::kF32, "accumulate_into: src must be F32");
  ZT_CHECK(dst.numel() == src.numel(), "accumulate_into: {} elements into {}", src.numel(), dst.numel());
  const std::int64_t n = dst.numel();
  if (n == 0) return;
  if (dst.dtype == DType::kF32) {
    launch_add(stream, dst.as<float>(), dst.as<float>(), src.as<float>(), n);
  } else {
    ZT_CHECK(dst.dtype == DType::kBF16, "accumulate_into: dst must be F32 or BF16");
    accumulate_bf16<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<std::uint16_t*>(dst.data),
                                                                            src.as<float>(), n);
    ZT_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace zt::cuda
