// Sum of squares kernels on the GPU, device code only (launched by norm.cu; run on the CPU by the
// SIMT emulation tests, tests/emulation/), in two deterministic stages: a fixed grid of blocks each
// sums a fixed set of elements in fp64 (thread t of block b takes the 16-byte groups of kVec
// elements g = b*256 + t + k * grid*256, its elements in order, then the tail elements past the
// last whole group the same way one by one; the block's threads in a fixed tree), then one block
// adds the per-block partials in index order. No float atomics.
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::norm {

constexpr int kThreads = 256;
constexpr int kPartialBlocks = 1024;  // fixed: the summation order depends on n and the access width only

// T: float or bf16 (widened exactly); kVec > 1 only where the launcher checked x aligned16.
template <typename T, int kVec>
__global__ void partial_sums(double* partials, const T* x, std::int64_t n) {
  __shared__ double shared[32];
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
