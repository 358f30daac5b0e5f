// Sum of squares on the GPU: launches of the kernels in norm_kernels.cuh (whose header says how
// they work).
#include "kernels/cuda/norm.h"

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/norm_kernels.cuh"

namespace zt::cuda {

namespace {

using detail::norm::final_sum;
using detail::norm::kPartialBlocks;
using detail::norm::kThreads;
using detail::norm::partial_sums;

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
  // One partials block (reused view after view: the stream orders each view's kernels after the
  // last one's final_sum), then a total per view. F32 pairs hold doubles.
  const auto count = static_cast<std::int64_t>(xs.size());
  Buffer scratch = detail::resources_of(ctx).scratch(DType::kF32, 2 * (kPartialBlocks + count));
  auto* partials = static_cast<double*>(scratch.data());
  double* sums = partials + kPartialBlocks;
  ZT_CUDA_CHECK(cudaMemsetAsync(sums, 0, static_cast<std::size_t>(count) * sizeof(double), stream));
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const TensorView& x = xs[i];
    const std::int64_t n = x.numel();
    if (n == 0) continue;  // its total stays 0
    detail::dispatch_activation(x.dtype, [&](auto type) {
      using T = typename decltype(type)::type;
      const T* p = detail::act_data<T>(x);
      if (detail::wide_vec_aligned(p)) {
        partial_sums<T, detail::kWideVec<T>><<<kPartialBlocks, kThreads, 0, stream>>>(partials, p, n);
      } else {
        partial_sums<T, 1><<<kPartialBlocks, kThreads, 0, stream>>>(partials, p, n);
      }
    });
    ZT_CUDA_CHECK_LAUNCH();
    final_sum<<<1, kThreads, 0, stream>>>(sums + i, partials, kPartialBlocks);
    ZT_CUDA_CHECK_LAUNCH();
  }
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
  Buffer scratch = detail::resources_of(ctx).scratch(DType::kF32, 2 * kExactWords * (kExactBlocks + count));
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
