// Sum of squares on the GPU: launches of the kernels in norm_kernels.cuh (whose header says how
// they work).
#include "kernels/cuda/norm.h"

#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/norm_kernels.cuh"

namespace zt::cuda {

namespace {

using detail::norm::final_sums;
using detail::norm::kPartialBlocks;
using detail::norm::kThreads;
using detail::norm::kViewsPerLaunch;
using detail::norm::partial_sums;
using detail::norm::SquareSumViews;

// partial_sums over views[first..] of element type T and access width kVec (the launcher's
// grouping), kViewsPerLaunch at a time.
template <typename T, int kVec>
void launch_partials(cudaStream_t stream, double* partials, const std::vector<TensorView>& xs,
                     const std::vector<int>& slots) {
  for (std::size_t begin = 0; begin < slots.size(); begin += kViewsPerLaunch) {
    const std::size_t count = std::min<std::size_t>(kViewsPerLaunch, slots.size() - begin);
    SquareSumViews<T> views{};
    for (std::size_t k = 0; k < count; ++k) {
      const int slot = slots[begin + k];
      views.x[k] = detail::act_data<T>(xs[static_cast<std::size_t>(slot)]);
      views.n[k] = xs[static_cast<std::size_t>(slot)].numel();
      views.slot[k] = slot;
    }
    partial_sums<T, kVec><<<dim3(kPartialBlocks, static_cast<unsigned>(count)), kThreads, 0, stream>>>(partials, views);
    ZT_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

std::vector<double> sum_of_squares_each(const ExecContext& ctx, const std::vector<TensorView>& xs) {
  const cudaStream_t stream = detail::stream_of(ctx);
  for (const TensorView& x : xs) {
    detail::check_on_gpu(x, "x");
    ZT_CHECK(x.dtype == DType::kF32 || x.dtype == DType::kBF16, "sum_of_squares of {} is not supported",
             dtype_name(x.dtype));
  }
  std::vector<double> totals(xs.size(), 0.0);
  if (xs.empty()) return totals;
  // A row of partials a view, then a total a view (an empty view's partials and total are 0). The
  // views go in launches by element type and access width: each view's own blocks, in its own order,
  // whatever it shares a launch with. F32 pairs hold doubles.
  const auto count = static_cast<std::int64_t>(xs.size());
  Buffer scratch = detail::resources_of(ctx).scratch(DType::kF32, kernel_scratch::sum_of_squares_floats(count));
  auto* partials = static_cast<double*>(scratch.data());
  double* sums = partials + count * kPartialBlocks;
  std::vector<int> f32_wide, f32_narrow, bf16_wide, bf16_narrow;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const bool bf16 = xs[i].dtype == DType::kBF16;
    const bool wide = bf16 ? detail::wide_vec_aligned(detail::act_data<__nv_bfloat16>(xs[i]))
                           : detail::wide_vec_aligned(detail::act_data<float>(xs[i]));
    (bf16 ? (wide ? bf16_wide : bf16_narrow) : (wide ? f32_wide : f32_narrow)).push_back(static_cast<int>(i));
  }
  launch_partials<float, detail::kWideVec<float>>(stream, partials, xs, f32_wide);
  launch_partials<float, 1>(stream, partials, xs, f32_narrow);
  launch_partials<__nv_bfloat16, detail::kWideVec<__nv_bfloat16>>(stream, partials, xs, bf16_wide);
  launch_partials<__nv_bfloat16, 1>(stream, partials, xs, bf16_narrow);
  final_sums<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(sums, partials);
  ZT_CUDA_CHECK_LAUNCH();
  ZT_CUDA_CHECK(cudaMemcpyAsync(totals.data(), sums, static_cast<std::size_t>(count) * sizeof(double),
                                cudaMemcpyDeviceToHost, stream));
  ZT_CUDA_CHECK(cudaStreamSynchronize(stream));
  return totals;
}

double sum_of_squares(const ExecContext& ctx, TensorView x) { return sum_of_squares_each(ctx, {x})[0]; }

exact_sum::SquareSum exact_sum_of_squares(const ExecContext& ctx, const std::vector<TensorView>& xs) {
  using detail::norm::exact_final_sum;
  using detail::norm::exact_partial_sums;
  using detail::norm::kExactBlocks;
  using detail::norm::kExactWords;
  const cudaStream_t stream = detail::stream_of(ctx);
  for (const TensorView& x : xs) {
    detail::check_on_gpu(x, "x");
    ZT_CHECK(x.dtype == DType::kF32 || x.dtype == DType::kBF16, "exact_sum_of_squares of {} is not supported",
             dtype_name(x.dtype));
    ZT_CHECK(x.numel() < exact_sum::kValuesBetweenCarries * 2, "exact_sum_of_squares: a view of {} values", x.numel());
  }
  exact_sum::SquareSum total;
  if (xs.empty()) return total;
  // One partials block, reused view after view (the stream orders them), then each view's words.
  const auto count = static_cast<std::int64_t>(xs.size());
  Buffer scratch = detail::resources_of(ctx).scratch(DType::kF32, kernel_scratch::exact_sum_of_squares_floats(count));
  auto* partials = static_cast<std::uint64_t*>(scratch.data());
  std::uint64_t* sums = partials + kExactWords * kExactBlocks;
  ZT_CUDA_CHECK(
      cudaMemsetAsync(sums, 0, static_cast<std::size_t>(count * kExactWords) * sizeof(std::uint64_t), stream));
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const TensorView& x = xs[i];
    if (x.numel() == 0) continue;
    detail::dispatch_activation(x.dtype, [&](auto type) {
      using T = typename decltype(type)::type;
      exact_partial_sums<T>
          <<<kExactBlocks, detail::norm::kThreads, 0, stream>>>(partials, detail::act_data<T>(x), x.numel());
    });
    ZT_CUDA_CHECK_LAUNCH();
    exact_final_sum<<<1, detail::norm::kThreads, 0, stream>>>(sums + kExactWords * i, partials, kExactBlocks);
    ZT_CUDA_CHECK_LAUNCH();
  }
  std::vector<std::uint64_t> words(static_cast<std::size_t>(count * kExactWords));
  ZT_CUDA_CHECK(
      cudaMemcpyAsync(words.data(), sums, words.size() * sizeof(std::uint64_t), cudaMemcpyDeviceToHost, stream));
  ZT_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (std::int64_t i = 0; i < count; ++i) {
    exact_sum::SquareSum view;
    for (int k = 0; k < exact_sum::kDigits; ++k) view.digit[k] = words[static_cast<std::size_t>(i * kExactWords + k)];
    view.nonfinite = words[static_cast<std::size_t>(i * kExactWords + exact_sum::kDigits)];
    exact_sum::normalize(view.digit);
    exact_sum::add(total, view);
  }
  return total;
}

}  // namespace zt::cuda
