// The second pass of the norm backwards' parameter gradients (LayerNorm's dweight and dbias,
// RMSNorm's dweight) and of the linear layers' bias gradients (matmul_kernels.cuh): a column's
// per-chunk partial sums added up in a fixed order. A block covers
// 32 columns (a warp's coalesced 128-byte row); each of its kPartialWarps warps sums every
// kPartialWarps-th chunk in chunk order, and warp 0 adds the warps' sums in warp order, so the
// result repeats bit for bit whatever the schedule. One thread a column walking every chunk (the
// first version) kept C / 256 blocks busy, 3 of the H100's 132 SMs at GPT-2's C = 768, each
// thread a chain of num_chunks dependent L2 reads. Device code only (run on the CPU by the SIMT
// emulation tests).
#pragma once

#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail {

constexpr int kPartialWarps = 16;
constexpr int kPartialThreads = kPartialWarps * kWarpSize;
constexpr int kPartialColumns = kWarpSize;  // columns a block

inline unsigned partial_blocks(std::int64_t columns) {
  return static_cast<unsigned>((columns + kPartialColumns - 1) / kPartialColumns);
}

// For c = blockIdx.x * 32 + lane and each of kParts column sets (set p at offset p * C of a chunk's
// `stride` floats): sum[p] = sum over k < num_chunks of partials[k * stride + p * C + c], valid in
// warp 0's lanes with c < C (the caller's to store). Every thread of the block must call it.
template <int kParts>
__device__ void sum_chunk_partials(float (&sum)[kParts], const float* partials, std::int64_t num_chunks,
                                   std::int64_t stride, int C) {
  __shared__ float warp_sums[kParts][kPartialWarps][kWarpSize];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int c = static_cast<int>(blockIdx.x) * kPartialColumns + lane;
  float acc[kParts] = {};
  if (c < C) {
    for (std::int64_t k = warp; k < num_chunks; k += kPartialWarps) {
#pragma unroll
      for (int p = 0; p < kParts; ++p) acc[p] += partials[k * stride + std::int64_t{p} * C + c];
    }
  }
#pragma unroll
  for (int p = 0; p < kParts; ++p) warp_sums[p][warp][lane] = acc[p];
  __syncthreads();
#pragma unroll
  for (int p = 0; p < kParts; ++p) {
    sum[p] = 0.0f;
    if (warp == 0) {
      for (int w = 0; w < kPartialWarps; ++w) sum[p] += warp_sums[p][w][lane];
    }
  }
}

}  // namespace zt::cuda::detail
