// Element-wise adds on the GPU: launches of the kernels in residual_kernels.cuh (whose header says
// how they work).
#include "kernels/cuda/residual.h"

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/residual_kernels.cuh"

namespace zt::cuda {

namespace {

using detail::residual::accumulate_bf16;
using detail::residual::add_vec;
using detail::residual::kThreads;

// out = a + b over n elements, picking the vector kernel for the aligned bulk.
template <typename T>
void launch_add(cudaStream_t stream, T* out, const T* a, const T* b, std::int64_t n) {
  constexpr int kWide = detail::kWideVec<T>;
  const bool vec = detail::wide_vec_aligned(out) && detail::wide_vec_aligned(a) && detail::wide_vec_aligned(b);
  const std::int64_t groups = vec ? n / kWide : 0, bulk = kWide * groups;
  if (groups > 0) add_vec<T, kWide><<<detail::grid_for(groups, kThreads), kThreads, 0, stream>>>(out, a, b, groups);
  if (n > bulk) {
    add_vec<T, 1>
        <<<detail::grid_for(n - bulk, kThreads), kThreads, 0, stream>>>(out + bulk, a + bulk, b + bulk, n - bulk);
  }
  ZT_CUDA_CHECK_LAUNCH();
}

// dst (bf16) += src (fp32), the vector kernel for the aligned bulk.
void launch_accumulate_bf16(cudaStream_t stream, __nv_bfloat16* dst, const float* src, std::int64_t n) {
  constexpr int kWide = detail::kWideVec<__nv_bfloat16>;
  const bool vec = detail::wide_vec_aligned(dst) && detail::wide_vec_aligned(src);
  const std::int64_t groups = vec ? n / kWide : 0, bulk = kWide * groups;
  if (groups > 0) accumulate_bf16<kWide><<<detail::grid_for(groups, kThreads), kThreads, 0, stream>>>(dst, src, groups);
  if (n > bulk) {
    accumulate_bf16<1><<<detail::grid_for(n - bulk, kThreads), kThreads, 0, stream>>>(dst + bulk, src + bulk, n - bulk);
  }
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void residual_forward(const ExecContext& ctx, TensorView out, TensorView a, TensorView b) {
  const cudaStream_t stream = detail::stream_of(ctx);
  for (const auto* v : {&out, &a, &b}) detail::check_on_gpu(*v, "residual operand");
  const DType dtype = detail::activation_dtype("residual_forward", {out, a, b});
  ZT_CHECK(a.numel() == out.numel() && b.numel() == out.numel(), "residual_forward: element counts differ");
  if (out.numel() == 0) return;
  detail::dispatch_activation(dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    launch_add(stream, detail::act_data<T>(out), detail::act_data<T>(a), detail::act_data<T>(b), out.numel());
  });
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
    launch_add<float>(stream, dst.as<float>(), dst.as<float>(), src.as<float>(), n);
  } else {
    ZT_CHECK(dst.dtype == DType::kBF16, "accumulate_into: dst must be F32 or BF16");
    launch_accumulate_bf16(stream, detail::act_data<__nv_bfloat16>(dst), src.as<float>(), n);
  }
}

void scale(const ExecContext& ctx, TensorView x, float factor) {
  const cudaStream_t stream = detail::stream_of(ctx);
  detail::check_on_gpu(x, "x");
  ZT_CHECK(x.dtype == DType::kF32, "scale: x must be F32");
  const std::int64_t n = x.numel();
  if (n == 0) return;
  detail::residual::scale_f32<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(x.as<float>(), factor, n);
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
