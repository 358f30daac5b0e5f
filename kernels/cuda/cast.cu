// fp32 <-> bf16 casts on the GPU: checks and launches of the kernels in cast_kernels.cuh, the 8-wide
// ones over the bulk when both pointers are 16-byte aligned, the scalar one for the rest.
#include "kernels/cuda/cast.h"

#include "kernels/cuda/cast_kernels.cuh"
#include "kernels/cuda/common.cuh"

namespace zt::cuda {

namespace {

using detail::casts::bf16_to_f32_scalar;
using detail::casts::bf16_to_f32_vec8;
using detail::casts::f32_to_bf16_scalar;
using detail::casts::f32_to_bf16_vec8;
using detail::casts::kThreads;

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
    if (n8 > 0)
      f32_to_bf16_vec8<<<detail::grid_for(n8, kThreads), kThreads, 0, stream>>>(reinterpret_cast<uint4*>(d),
                                                                                reinterpret_cast<const float4*>(s), n8);
    if (tail > 0)
      f32_to_bf16_scalar<<<detail::grid_for(tail, kThreads), kThreads, 0, stream>>>(d + 8 * n8, s + 8 * n8, tail);
  } else if (dst.dtype == DType::kF32 && src.dtype == DType::kBF16) {
    auto* d = static_cast<float*>(dst.data);
    const auto* s = static_cast<const std::uint16_t*>(src.data);
    if (n8 > 0)
      bf16_to_f32_vec8<<<detail::grid_for(n8, kThreads), kThreads, 0, stream>>>(reinterpret_cast<float4*>(d),
                                                                                reinterpret_cast<const uint4*>(s), n8);
    if (tail > 0)
      bf16_to_f32_scalar<<<detail::grid_for(tail, kThreads), kThreads, 0, stream>>>(d + 8 * n8, s + 8 * n8, tail);
  } else {
    ZT_CHECK(false, "cast from {} to {} is not supported", dtype_name(src.dtype), dtype_name(dst.dtype));
  }
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
