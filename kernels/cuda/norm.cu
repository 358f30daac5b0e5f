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

}  // namespace zt::cuda
