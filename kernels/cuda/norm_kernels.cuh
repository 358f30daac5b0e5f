// Sum of squares kernels on the GPU, device code only (launched by norm.cu; run on the CPU by the
// SIMT emulation tests, tests/emulation/), in two deterministic stages: a fixed grid of blocks each
// sums a fixed set of a view's elements in fp64 (thread t of block b takes the 16-byte groups of
// kVec elements g = b*256 + t + k * grid*256, its elements in order, then the tail elements past
// the last whole group the same way one by one; the block's threads in a fixed tree), then one
// block a view adds its per-block partials in index order. No float atomics. Many views share a
// launch of each stage (the gradient norm's units: two launches, not two a unit).
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/contracts/exact_square_sum.h"
#include "kernels/contracts/kernel_scratch.h"
#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::norm {

constexpr int kThreads = 256;
// Fixed: the summation order depends on n and the access width only.
constexpr int kPartialBlocks = kernel_scratch::kSquarePartialBlocks;

// Up to kViewsPerLaunch views of one element type in one launch (grid kPartialBlocks x views):
// blockIdx.y picks the view, blockIdx.x is the block of the one-view sum, so each view's partials
// are what a launch of it alone writes. Passed by value (a kernel parameter, no copy to the device).
constexpr int kViewsPerLaunch = 32;
template <typename T>
struct SquareSumViews {
  const T* x[kViewsPerLaunch];
  std::int64_t n[kViewsPerLaunch];
  int slot[kViewsPerLaunch];  // the view's row of partials (kPartialBlocks doubles) and its total
};

// partials[slot * kPartialBlocks + b] = block b's sum for view blockIdx.y. T: float or bf16
// (widened exactly); kVec > 1 only where the launcher checked each view aligned16.
template <typename T, int kVec>
__global__ void partial_sums(double* partials, SquareSumViews<T> views) {
  __shared__ double shared[32];
  const T* x = views.x[blockIdx.y];
  const std::int64_t n = views.n[blockIdx.y];
  double acc = 0.0;
  const std::int64_t start = blockIdx.x * std::int64_t{kThreads} + threadIdx.x,
                     stride = std::int64_t{gridDim.x} * kThreads;
  const std::int64_t groups = n / kVec;
  for (std::int64_t g = start; g < groups; g += stride) {
    const detail::ActVec<T, kVec> v = detail::ActVec<T, kVec>::load(x + kVec * g);
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const double d = v[i];
      acc = fma(d, d, acc);  // exact square (as on the CPU), one rounding for the add
    }
  }
  for (std::int64_t i = kVec * groups + start; i < n; i += stride) {
    const double d = detail::load_act(x + i);
    acc = fma(d, d, acc);
  }
  acc = detail::block_sum(acc, shared);
  if (threadIdx.x == 0) partials[views.slot[blockIdx.y] * std::int64_t{kPartialBlocks} + blockIdx.x] = acc;
}

// sums[v] = view v's kPartialBlocks partials (partials[v * kPartialBlocks ..]) added by one block
// of kThreads in a fixed order; one block a view.
__global__ void final_sums(double* sums, const double* partials) {
  __shared__ double shared[32];
  const double* p = partials + blockIdx.x * std::int64_t{kPartialBlocks};
  double acc = 0.0;
  for (int i = threadIdx.x; i < kPartialBlocks; i += kThreads) acc += p[i];
  acc = detail::block_sum(acc, shared);
  if (threadIdx.x == 0) sums[blockIdx.x] = acc;
}

// Exact sums of squares (kernels/contracts/exact_square_sum.h): thread t of block b adds the
// squares of elements b*256 + t + k * grid*256 into digits of its own; the block's threads are
// summed digit by digit (integers: the order changes nothing), block b writing its kDigits digits
// and its non-finite count to partials[b * kExactWords ..]; exact_final_sum adds the blocks' the
// same way into out[0 .. kExactWords). A digit takes less than 2^32 per value, so a view of fewer
// than 2^31 values cannot overflow a 64-bit word anywhere (the launcher checks).
constexpr int kExactBlocks = kernel_scratch::kExactSquareBlocks;
constexpr int kExactWords = exact_sum::kDigits + 1;

__device__ __forceinline__ std::uint32_t fp32_bits(const float* p) { return __float_as_uint(*p); }
__device__ __forceinline__ std::uint32_t fp32_bits(const __nv_bfloat16* p) {
  return static_cast<std::uint32_t>(__bfloat16_as_ushort(*p)) << 16;
}

template <typename T>
__global__ void exact_partial_sums(std::uint64_t* partials, const T* x, std::int64_t n) {
  __shared__ std::uint64_t shared[32];
  std::uint64_t digit[exact_sum::kDigits] = {};
  std::uint64_t nonfinite = 0;
  const std::int64_t start = blockIdx.x * std::int64_t{kThreads} + threadIdx.x,
                     stride = std::int64_t{gridDim.x} * kThreads;
  for (std::int64_t i = start; i < n; i += stride) exact_sum::add_square_bits(digit, nonfinite, fp32_bits(x + i));
  for (int k = 0; k < kExactWords; ++k) {
    const std::uint64_t total = detail::block_sum(k < exact_sum::kDigits ? digit[k] : nonfinite, shared);
    if (threadIdx.x == 0) partials[blockIdx.x * kExactWords + k] = total;
  }
}

__global__ void exact_final_sum(std::uint64_t* out, const std::uint64_t* partials, int num_partials) {
  __shared__ std::uint64_t shared[32];
  for (int k = 0; k < kExactWords; ++k) {
    std::uint64_t acc = 0;
    for (int b = threadIdx.x; b < num_partials; b += kThreads) acc += partials[b * kExactWords + k];
    acc = detail::block_sum(acc, shared);
    if (threadIdx.x == 0) out[k] = acc;
  }
}

}  // namespace zt::cuda::detail::norm
