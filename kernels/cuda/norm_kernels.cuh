// Sum of squares kernels on the GPU, device code only (launched by norm.cu; run on the CPU by the
// SIMT emulation tests, tests/emulation/), in two deterministic stages: a fixed grid of blocks each
// sums a fixed set of elements in fp64 (block b takes elements i = b*256 + t + k * grid*256, thread
// t in a fixed tree), then one block adds the per-block partials in index order. No float atomics.
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::norm {

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

}  // namespace zt::cuda::detail::norm
