// The linear layer's bias-gradient kernels on the GPU, device code only (launched by matmul.cu; run
// on the CPU by the SIMT emulation tests, tests/emulation/): a two-stage column sum, each chunk of
// rows summed in a fixed order, then the chunk partials in a fixed order, so the result is
// deterministic and accumulates (+=) into dbias like the CPU's (fp32, or bf16 storage on CUDA).
#pragma once

#include <cstdint>

#include "kernels/contracts/kernel_scratch.h"
#include "kernels/cuda/chunk_partials.cuh"
#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::matmul {

// A partials block: kBiasColGroups threads side by side, each owning kVec adjacent columns (one
// 16-byte load per row: 4 floats or 8 bf16), times kBiasRowGroups rows of threads that split
// the chunk's rows. Many blocks of short loops (kBiasRowsPerChunk / kBiasRowGroups rows a thread)
// instead of one thread a column walking every row: the loads keep the memory system busy.
constexpr int kBiasRowsPerChunk = kernel_scratch::kBiasRowsPerChunk;
constexpr int kBiasColGroups = 32;
constexpr int kBiasRowGroups = 8;
constexpr int kBiasThreads = kBiasColGroups * kBiasRowGroups;  // a partials block
constexpr int kBiasLoadBatch = 8;  // rows a thread loads at once: its 16 rows of a chunk in two round trips

// partials[chunk, c] = sum over the chunk's rows of dout[row, c] (T: the activation storage type,
// widened as loaded): row group y adds rows r0 + y, r0 + y + kBiasRowGroups, ... in order, then
// the row groups' sums are added in y order -- a fixed order, whatever the timing. kVec > 1 needs
// OC % kVec == 0 and dout aligned16 (the launcher checks).
template <typename T, int kVec>
__global__ void bias_grad_partials(float* partials, const T* dout, std::int64_t N, int OC) {
  __shared__ float row_group_sums[kBiasRowGroups][kBiasColGroups * kVec];
  const int x = static_cast<int>(threadIdx.x) % kBiasColGroups, y = static_cast<int>(threadIdx.x) / kBiasColGroups;
  const int c0 = (static_cast<int>(blockIdx.x) * kBiasColGroups + x) * kVec;
  const bool live = c0 < OC;
  const std::int64_t r0 = blockIdx.y * std::int64_t{kBiasRowsPerChunk};
  const std::int64_t r1 = r0 + kBiasRowsPerChunk < N ? r0 + kBiasRowsPerChunk : N;
  using Vec = ActVec<T, kVec>;
  float acc[kVec] = {};
  if (live) {
    // kBiasLoadBatch rows' loads in flight before any is added ([Note: loads in batches] in row_batches.cuh).
    for (std::int64_t rb = r0 + y; rb < r1; rb += std::int64_t{kBiasRowGroups} * kBiasLoadBatch) {
      typename Vec::Raw raw[kBiasLoadBatch]{};
#pragma unroll
      for (int j = 0; j < kBiasLoadBatch; ++j) {
        const std::int64_t r = rb + std::int64_t{j} * kBiasRowGroups;
        if (r < r1) raw[j] = Vec::load_raw(dout + r * OC + c0);
      }
#pragma unroll
      for (int j = 0; j < kBiasLoadBatch; ++j) {
        if (rb + std::int64_t{j} * kBiasRowGroups < r1) {
          const Vec v = Vec::widen(raw[j]);
#pragma unroll
          for (int i = 0; i < kVec; ++i) acc[i] += v[i];
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kVec; ++i) row_group_sums[y][x * kVec + i] = acc[i];
  __syncthreads();
  if (y == 0 && live) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      float sum = 0.0f;
      for (int g = 0; g < kBiasRowGroups; ++g) sum += row_group_sums[g][x * kVec + i];
      partials[blockIdx.y * std::int64_t{OC} + c0 + i] = sum;
    }
  }
}

// dbias[c] += the chunk partials of column c, summed as the norm backwards sum theirs
// (sum_chunk_partials: a block of kPartialThreads over kPartialColumns columns, each warp every
// kPartialWarps-th chunk in chunk order, then the warps in warp order). D: float, or bf16 (a
// gradient added in place into bf16 storage: round(widen(old) + sum), one rounding). The first
// version, one thread a column walking every chunk, kept OC / 256 blocks busy (3 SMs at OC = 768),
// each thread a chain of num_chunks L2 reads (128 at GPT-2's 16 x 1024 rows), four in flight.
template <typename D>
__global__ void bias_grad_accumulate(D* dbias, const float* partials, int num_chunks, int OC) {
  float sum[1];
  sum_chunk_partials<1>(sum, partials, num_chunks, OC, OC);
  const int c = static_cast<int>(blockIdx.x) * kPartialColumns + static_cast<int>(threadIdx.x);
  if (threadIdx.x < kWarpSize && c < OC) store_act(dbias + c, load_act(dbias + c) + sum[0]);  // warp 0's lanes
}

}  // namespace zt::cuda::detail::matmul
