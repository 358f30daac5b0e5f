// The norm backwards' chunk kernel with a block to a row, device code only (launched by
// layernorm.cu and rmsnorm.cu; run on the CPU by the SIMT emulation tests): one block of a chunk
// of rows, each thread owning the same 16-byte column groups in every row. Each norm brings its
// arithmetic as a policy (layernorm_kernels.cuh's LayerNormRows, rmsnorm_kernels.cuh's RmsNormRows).
//
// [Note: a block a row]
// The warp-a-row kernels (rmsnorm_backward_chunk, layernorm_backward_chunk) read a chunk's dout
// and inp twice or three times: the row's sums, dinp (a reload where a warp's registers cannot hold
// the row: C / kVec > 32 kRowBatch, Llama 3.2 1B's 2048 in bf16), then the column pass over the
// chunk for the parameter gradients, from L2 at best. On the H200 at 8a1669d they ran at 31%
// (RMSNorm, bf16 [8192, 2048]) and 47% (LayerNorm, [8192, 768]) of copy bandwidth. Here thread t
// owns groups t + blockDim j (j < kGroups) of every row: it loads kBlockRowLoads / kGroups rows'
// dout, inp and dinp at once (one round trip), the block reduces those rows' sums (one barrier a
// batch: the warps' sums go to alternate halves of a shared array, so a batch's writes cannot meet
// the last batch's reads -- a race the emulation tests see only when the threads happen to
// interleave so, while a missing barrier fails them every time), and the thread adds each row into its
// parameter-gradient columns as the rows pass, in row order. So dout and inp are read once, and the partials are the
// column pass's bit for bit (the same per-column order and arithmetic). A row's sums take another fixed order than a
// warp's (a thread's groups, the warp, then the warps in order), so dinp's bits differ from the warp-a-row kernels'
// (within the CPU's bounds). Launched with blockDim.x the groups rounded up to a warp (kGroups 1, at most 256 threads)
// or 256 (kGroups 2: rows of 257-512 groups).
#pragma once

#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail {

constexpr int kBlockRowLoads = 4;      // rows x groups a thread loads at once
constexpr int kBlockRowThreads = 256;  // the most threads a block-a-row block has
constexpr int kBlockRowMaxGroups = 2 * kBlockRowThreads;

// Threads of a block-a-row block for rows of `groups` 16-byte groups (<= kBlockRowMaxGroups).
inline int block_row_threads(std::int64_t groups) {
  return groups <= kBlockRowThreads ? static_cast<int>((groups + kWarpSize - 1) / kWarpSize * kWarpSize)
                                    : kBlockRowThreads;
}

// Norm: the policy. Norm::kSums row sums and Norm::kPartials partial rows a chunk
// (partials[chunk * kPartials * C + k * C + column]); Norm::Stats stats(mean, rstd, row);
// add_sums(gv, xv, wv, st, sums) adds a group's share of the row's sums; update(dv, gv, xv, wv, st,
// means) adds the group's dinp contribution given the sums / C; add_partials(p, gv, xv, st) adds the
// row into the thread's columns of the parameter gradients.
template <class Norm, typename T, typename P, int kVec, int kGroups, int kRowsPerChunk>
__global__ void __launch_bounds__(kBlockRowThreads, 2)  // 2: at most 128 registers, two full blocks an SM
    norm_backward_block_rows(T* dinp, float* partials, const T* dout, const T* inp, const P* weight, const float* mean,
                             const float* rstd, std::int64_t N, int C) {
  using Vec = ActVec<T, kVec>;
  using ParamVec = ActVec<P, kVec>;
  using PartialVec = FloatVec<kVec>;
  using Stats = typename Norm::Stats;
  constexpr int kRows = kBlockRowLoads / kGroups;  // rows a batch
  constexpr int kSums = Norm::kSums, kPartials = Norm::kPartials;
  constexpr int kMaxWarps = kBlockRowThreads / kWarpSize;
  static_assert(kRows >= 1 && kRowsPerChunk % kRows == 0);
  __shared__ float warp_sums[2][kRows][kSums][kMaxWarps];
  const int tid = static_cast<int>(threadIdx.x), lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int threads = static_cast<int>(blockDim.x), warps = threads / kWarpSize;
  const std::int64_t row0 = blockIdx.x * std::int64_t{kRowsPerChunk};
  const int rows = static_cast<int>(N - row0 < kRowsPerChunk ? N - row0 : kRowsPerChunk);
  const int groups = C / kVec;
  ParamVec w[kGroups]{};
  PartialVec part[kGroups][kPartials]{};
#pragma unroll
  for (int j = 0; j < kGroups; ++j) {
    if (tid + j * threads < groups) w[j] = ParamVec::load(weight + (tid + j * threads) * kVec);
  }
  for (int r0 = 0, buf = 0; r0 < rows; r0 += kRows, buf ^= 1) {
    typename Vec::Raw gr[kRows][kGroups]{}, xr[kRows][kGroups]{}, dr[kRows][kGroups]{};
    Stats st[kRows]{};
#pragma unroll
    for (int b = 0; b < kRows; ++b) {
      if (r0 + b < rows) {
        const std::int64_t row = row0 + r0 + b;
        st[b] = Norm::stats(mean, rstd, row);
#pragma unroll
        for (int j = 0; j < kGroups; ++j) {
          const int q = tid + j * threads;
          if (q < groups) {
            gr[b][j] = Vec::load_raw(dout + row * C + q * kVec);
            xr[b][j] = Vec::load_raw(inp + row * C + q * kVec);
            dr[b][j] = Vec::load_raw(dinp + row * C + q * kVec);
          }
        }
      }
    }
#pragma unroll
    for (int b = 0; b < kRows; ++b) {
      float sums[kSums]{};
#pragma unroll
      for (int j = 0; j < kGroups; ++j) {
        if (tid + j * threads < groups) Norm::add_sums(Vec::widen(gr[b][j]), Vec::widen(xr[b][j]), w[j], st[b], sums);
      }
#pragma unroll
      for (int k = 0; k < kSums; ++k) {
        const float s = warp_sum(sums[k]);
        if (lane == 0) warp_sums[buf][b][k][warp] = s;
      }
    }
    __syncthreads();
#pragma unroll
    for (int b = 0; b < kRows; ++b) {
      if (r0 + b >= rows) continue;
      float means[kSums];
#pragma unroll
      for (int k = 0; k < kSums; ++k) {
        float total = 0.0f;
        for (int v = 0; v < warps; ++v) total += warp_sums[buf][b][k][v];
        means[k] = total / static_cast<float>(C);
      }
      const std::int64_t row = row0 + r0 + b;
#pragma unroll
      for (int j = 0; j < kGroups; ++j) {
        const int q = tid + j * threads;
        if (q < groups) {
          const Vec gv = Vec::widen(gr[b][j]), xv = Vec::widen(xr[b][j]);
          Vec dv = Vec::widen(dr[b][j]);
          Norm::update(dv, gv, xv, w[j], st[b], means);
          dv.store_computed(dinp + row * C + q * kVec);  // bf16 pairs by one instruction each
          Norm::add_partials(part[j], gv, xv, st[b]);
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kGroups; ++j) {
    const int q = tid + j * threads;
    if (q < groups) {
#pragma unroll
      for (int k = 0; k < kPartials; ++k) {
        part[j][k].store(partials + (blockIdx.x * std::int64_t{kPartials} + k) * C + q * kVec);
      }
    }
  }
}

// The block-a-row kernel for rows of `groups` 16-byte groups (at most kBlockRowMaxGroups), to
// launch with block_row_threads(groups) threads: one group a thread, or two past kBlockRowThreads.
template <class Norm, typename T, typename P, int kVec, int kRowsPerChunk>
auto block_rows_kernel(std::int64_t groups) {
  return groups <= kBlockRowThreads ? norm_backward_block_rows<Norm, T, P, kVec, 1, kRowsPerChunk>
                                    : norm_backward_block_rows<Norm, T, P, kVec, 2, kRowsPerChunk>;
}

}  // namespace zt::cuda::detail
