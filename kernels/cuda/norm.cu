// Sum of squares on the GPU in two deterministic stages: a fixed grid of blocks each sums a fixed
// set of elements in fp64 (block b takes elements i = b*256 + t + k * grid*256, thread t in a
// fixed tree), then one block adds the per-block partials in index order. No float atomics.
#include "kernels/cuda/norm.h"

#include "kernels/cuda/common.cuh"

namespace zt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kPartialBlocks = 1024;  // fixed, so the summation order depends on n only

template <typename T>
__device__ __forceinline__ double load_f64(const T* x, std::int64_t i);
template <>
__device__ __forceinline__ double load_f64<float>(const float* x, std::int64_t i) { return x[i]; }
template <>
__device__ __forceinline__ double load_f64<std::uint16_t>(const std::uint16_t* x, std::int64_t i) {
  return detail::bf16_to_f32(x[i]);
}

template <typename T>
__global__ void partial_sums(double* partials, const T* x, std::int64_t n) {
  __shared__ double shared[32];
  double acc = 0.0;
  for (std::int64_t i = blockIdx.x * std::int64_t{kThreads} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * kThreads) {
    const double v = load_f64(x, i);
    acc = fma(v, v, acc);  // exact square (as on the CPU), one rounding for the add
  }
  acc = detail::block_sum(acc, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

__global__ void final_sum(double* out, const double* partials, int num_partials) {
  __shared__ double shared[32];
  double acc = 0.0;
  for (int i = threadIdx.x; i < num_partials; i += kThreads) acc += partials[i];
  acc = detail::block_sum(acc, shared);
  if (threadIdx.x == 0) *out = acc;
}

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
