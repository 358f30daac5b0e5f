// The materialised attention's causal softmax kernels, device code only (launched by attention.cu
// between its cuBLASLt products; run on the CPU by the SIMT emulation tests, tests/emulation/): a
// warp per row of [rows, T] scores, row r being query t = r % T of its (sample, head), so whole
// batches of rows go in one launch. Reductions are fp32 in the warp's fixed shuffle order.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::attention {

constexpr int kRowsPerBlock = 8;  // warps per softmax block, one row each
constexpr int kThreads = kRowsPerBlock * kWarpSize;

// Rows [rows, T] of fp32 scores -> rows of att: row r is query t = r % T; probabilities below and
// on the diagonal, zero above. Scores already carry the 1/sqrt(hs) scale (the GEMM's alpha). For
// F32, scores is att itself (in place: each element is read before the same thread writes it).
template <typename Act>
__global__ void causal_softmax_forward(Act* att, const float* scores, std::int64_t rows, int T) {
  const int lane = threadIdx.x % kWarpSize;
  const std::int64_t r = blockIdx.x * std::int64_t{kRowsPerBlock} + threadIdx.x / kWarpSize;
  if (r >= rows) return;
  const int len = static_cast<int>(r % T) + 1;
  const float* s = scores + r * T;
  Act* row = att + r * T;
  float mx = -INFINITY;
  for (int k = lane; k < len; k += kWarpSize) mx = fmaxf(mx, s[k]);
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int k = lane; k < len; k += kWarpSize) sum += expf(s[k] - mx);
  const float inv_sum = 1.0f / warp_sum(sum);
  for (int k = lane; k < T; k += kWarpSize) {
    store_act(row + k, k < len ? expf(s[k] - mx) * inv_sum : 0.0f);
  }
}

// dpre = att * (dp - sum_k att dp) * scale below and on the diagonal, 0 above, row by row. dp is
// fp32; for F32, dpre is dp itself (in place, as above).
template <typename Act>
__global__ void causal_softmax_backward(Act* dpre, const float* dp, const Act* att, std::int64_t rows, int T,
                                        float scale) {
  const int lane = threadIdx.x % kWarpSize;
  const std::int64_t r = blockIdx.x * std::int64_t{kRowsPerBlock} + threadIdx.x / kWarpSize;
  if (r >= rows) return;
  const int len = static_cast<int>(r % T) + 1;
  const float* d = dp + r * T;
  const Act* p = att + r * T;
  Act* out = dpre + r * T;
  float dot = 0.0f;
  for (int k = lane; k < len; k += kWarpSize) dot += load_act(p + k) * d[k];
  dot = warp_sum(dot);
  for (int k = lane; k < T; k += kWarpSize) {
    store_act(out + k, k < len ? load_act(p + k) * (d[k] - dot) * scale : 0.0f);
  }
}

}  // namespace zt::cuda::detail::attention
