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

double sum_of_squares(const ExecContext& ctx, TensorView x) {
  const cudaStream_t stream = detail::stream_of(ctx);
  detail::check_on_gpu(x, "x");
  ZT_CHECK(x.dtype == DType::kF32 || x.dtype == DType::kBF16, "sum_of_squares of {} is not supported",
           dtype_name(x.dtype));
  const std::int64_t n = x.numel();
  if (n == 0) return 0.0;
  // Partials, then the total in the last slot: one scratch block, one copy back. F32 pairs hold doubles.
  Buffer scratch = detail::resources_of(ctx).scratch(DType::kF32, 2 * (kPartialBlocks + 1));
  auto* partials = static_cast<double*>(scratch.data());
  if (x.dtype == DType::kF32) {
    partial_sums<<<kPartialBlocks, kThreads, 0, stream>>>(partials, x.as<float>(), n);
  } else {
    partial_sums<<<kPartialBlocks, kThreads, 0, stream>>>(partials, static_cast<const std::uint16_t*>(x.data), n);
  }
  ZT_CUDA_CHECK_LAUNCH();
  final_sum<<<1, kThreads, 0, stream>>>(partials + kPartialBlocks, partials, kPartialBlocks);
  ZT_CUDA_CHECK_LAUNCH();
  double total = 0.0;
  ZT_CUDA_CHECK(cudaMemcpyAsync(&total, partials + kPartialBlocks, sizeof(double), cudaMemcpyDeviceToHost, stream));
  ZT_CUDA_CHECK(cudaStreamSynchronize(stream));
  return total;
}

}  // namespace zt::cuda
