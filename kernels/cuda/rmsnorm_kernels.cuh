// RMSNorm kernels on the GPU, device code only (launched by rmsnorm.cu; run on the CPU by the SIMT
// emulation tests, tests/emulation/), laid out as the LayerNorm kernels are (layernorm_kernels.cuh):
// forward one warp per row; backward one block per 32-row chunk computing each row's dinp and the
// chunk's dweight partial -- a block a row (block_row_backward.cuh), or a warp a row (loads in
// batches) and then a thread per column group over the chunk's rows in order -- then a
// kernel adding the partials in a fixed order (chunk_partials.cuh). No float atomics: the
// results repeat bitwise. 16-byte
// vector accesses (kVec = kWideVec<T>) where C % kVec == 0 and the row operands are aligned16, else
// single elements. Activations of storage type T (float or bf16), the weight of type P (float, or
// bf16 with bf16 activations), statistics and partials fp32; each activation result rounded once.
#pragma once

#include <cstdint>

#include "kernels/contracts/kernel_scratch.h"
#include "kernels/contracts/norm_row_scale.h"
#include "kernels/cuda/block_row_backward.cuh"
#include "kernels/cuda/chunk_partials.cuh"
#include "kernels/cuda/device_helpers.cuh"
#include "kernels/cuda/row_batches.cuh"

namespace zt::cuda::detail::rms {

constexpr int kForwardWarps = 8;  // rows per forward block
// Rows a backward block takes, a row of partials each (the scratch the prediction counts).
constexpr int kRowsPerChunk = kernel_scratch::kNormRowsPerChunk;
constexpr int kBackwardThreads = 256;

// The forward's output for a batch of a lane's groups q0 + 32 b held raw in xr: the weight's
// groups loaded at once, then o = x * s * w for each group below `groups`.
template <typename T, typename P, int kVec>
__device__ __forceinline__ void store_scaled_batch(T* o, const typename detail::ActVec<T, kVec>::Raw (&xr)[kRowBatch],
                                                   const P* weight, int q0, int groups, float s) {
  using Vec = detail::ActVec<T, kVec>;
  using ParamVec = detail::ActVec<P, kVec>;
  typename ParamVec::Raw wr[kRowBatch]{};
  detail::load_batch<kVec>(wr, weight, q0, groups);
#pragma unroll
  for (int b = 0; b < kRowBatch; ++b) {
    const int q = q0 + b * detail::kWarpSize;
    if (q < groups) {
      const Vec xv = Vec::widen(xr[b]);
      const ParamVec wv = ParamVec::widen(wr[b]);
      Vec ov;
#pragma unroll
      for (int i = 0; i < kVec; ++i) ov[i] = xv[i] * s * wv[i];
      ov.store(o + q * kVec);
    }
  }
}

// kWholeRow: a lane keeps its groups of the row (up to kWholeRowGroups: C / kVec <= 256, Llama 3.2
// 1B's 2048 in bf16) in registers from the sum to the output, so the row is read once, its loads
// in flight together; otherwise the sum pass reads a group at a time and the output pass reads the
// row again. The same sums in the same order, so the same bits.
constexpr int kWholeRowGroups = 2 * kRowBatch;

template <typename T, typename P, int kVec, bool kWholeRow = false>
__global__ void rmsnorm_forward_kernel(T* out, float* rstd, const T* inp, const P* weight, std::int64_t N, int C,
                                       float eps) {
  using Vec = detail::ActVec<T, kVec>;
  const int lane = threadIdx.x % detail::kWarpSize;
  const std::int64_t row = blockIdx.x * std::int64_t{kForwardWarps} + threadIdx.x / detail::kWarpSize;
  if (row >= N) return;
  const int groups = C / kVec;
  const T* x = inp + row * C;
  T* o = out + row * C;  // may be x: each lane reads its groups before writing them
  if constexpr (kWholeRow) {
    constexpr int kHalves = kWholeRowGroups / kRowBatch;
    typename Vec::Raw xr[kHalves][kRowBatch]{};
#pragma unroll
    for (int h = 0; h < kHalves; ++h)
      detail::load_batch<kVec>(xr[h], x, lane + h * kRowBatch * detail::kWarpSize, groups);
    float sq = 0.0f;
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
#pragma unroll
      for (int b = 0; b < kRowBatch; ++b) {
        if (lane + (h * kRowBatch + b) * detail::kWarpSize < groups) {
          const Vec xv = Vec::widen(xr[h][b]);
#pragma unroll
          for (int i = 0; i < kVec; ++i) sq += xv[i] * xv[i];
        }
      }
    }
    const float s = norm_row_scale(detail::warp_sum(sq) / static_cast<float>(C), eps);
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      store_scaled_batch<T, P, kVec>(o, xr[h], weight, lane + h * kRowBatch * detail::kWarpSize, groups, s);
    }
    if (lane == 0) rstd[row] = s;
    return;
  }
  float sq = 0.0f;
  for (int q = lane; q < groups; q += detail::kWarpSize) {
    const Vec xv = Vec::load(x + q * kVec);
#pragma unroll
    for (int i = 0; i < kVec; ++i) sq += xv[i] * xv[i];
  }
  const float s = norm_row_scale(detail::warp_sum(sq) / static_cast<float>(C), eps);
  // kRowBatch groups' loads (row and weight) at once, then their outputs ([Note: loads in batches]
  // in row_batches.cuh): a group at a time took a round trip each, 8 a row at C = 2048.
  for (int q0 = lane; q0 < groups; q0 += kRowBatch * detail::kWarpSize) {
    typename Vec::Raw xr[kRowBatch]{};
    detail::load_batch<kVec>(xr, x, q0, groups);
    store_scaled_batch<T, P, kVec>(o, xr, weight, q0, groups, s);
  }
  if (lane == 0) rstd[row] = s;
}

// A row's two passes' per-group arithmetic (shared by the kWholeRow and reloading variants).
template <int kVec, typename Vec, typename ParamVec>
__device__ __forceinline__ void add_row_sum(const Vec& gv, const Vec& xv, const ParamVec& wv, float s, float& sum) {
#pragma unroll
  for (int i = 0; i < kVec; ++i) sum += (gv[i] * wv[i]) * (xv[i] * s);
}

// RMSNorm's backward arithmetic, for both chunk kernels (norm_backward_block_rows, [Note: a block
// a row] in block_row_backward.cuh, and rmsnorm_backward_chunk below): the row's one sum, dinp's
// update and the dweight partial, written once so the two kernels' partials are the same bits.
template <int kVec>
struct RmsNormRows {
  static constexpr int kSums = 1, kPartials = 1;
  struct Stats {
    float s;
  };
  __device__ __forceinline__ static Stats stats(const float* /*mean*/, const float* rstd, std::int64_t row) {
    return {rstd[row]};
  }
  template <typename T, typename P>
  __device__ __forceinline__ static void add_sums(const detail::ActVec<T, kVec>& gv, const detail::ActVec<T, kVec>& xv,
                                                  const detail::ActVec<P, kVec>& wv, const Stats& st,
                                                  float (&sums)[kSums]) {
    add_row_sum<kVec>(gv, xv, wv, st.s, sums[0]);
  }
  template <typename T, typename P>
  __device__ __forceinline__ static void update(detail::ActVec<T, kVec>& dv, const detail::ActVec<T, kVec>& gv,
                                                const detail::ActVec<T, kVec>& xv, const detail::ActVec<P, kVec>& wv,
                                                const Stats& st, const float (&means)[kSums]) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) dv[i] += st.s * (gv[i] * wv[i] - (xv[i] * st.s) * means[0]);
  }
  template <typename T>
  __device__ __forceinline__ static void add_partials(detail::FloatVec<kVec> (&p)[kPartials],
                                                      const detail::ActVec<T, kVec>& gv,
                                                      const detail::ActVec<T, kVec>& xv, const Stats& st) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) p[0][i] += gv[i] * (xv[i] * st.s);
  }
};

// One block per chunk of kRowsPerChunk rows; partials [num_chunks, C]. dinp accumulates as
// round(widen(old) + contribution) for bf16. Loads go in batches as in LayerNorm's backward
// ([Note: loads in batches] in row_batches.cuh; kWholeRow where C / kVec <= 32 kRowBatch).
template <typename T, typename P, int kVec, bool kWholeRow = false>
__global__ void __launch_bounds__(kBackwardThreads, 2)
    rmsnorm_backward_chunk(T* dinp, float* partials, const T* dout, const T* inp, const P* weight, const float* rstd,
                           std::int64_t N, int C) {
  using Vec = detail::ActVec<T, kVec>;
  using ParamVec = detail::ActVec<P, kVec>;
  using PartialVec = detail::FloatVec<kVec>;
  using Norm = RmsNormRows<kVec>;
  const int lane = threadIdx.x % detail::kWarpSize, warp = threadIdx.x / detail::kWarpSize;
  constexpr int kWarps = kBackwardThreads / detail::kWarpSize;
  const std::int64_t row0 = blockIdx.x * std::int64_t{kRowsPerChunk};
  const int rows = static_cast<int>(N - row0 < kRowsPerChunk ? N - row0 : kRowsPerChunk);
  const int groups = C / kVec;
  for (int r = warp; r < rows; r += kWarps) {
    const std::int64_t row = row0 + r;
    const T* g = dout + row * C;
    const T* x = inp + row * C;
    const float s = rstd[row];
    detail::RowBatch<T, P, kVec> rb;
    float dnorm_norm_sum = 0.0f;
    detail::row_pass(rb, g, x, weight, lane, groups, [&](const Vec& gv, const Vec& xv, const ParamVec& wv) {
      add_row_sum<kVec>(gv, xv, wv, s, dnorm_norm_sum);
    });
    const float dnorm_norm_mean = detail::warp_sum(dnorm_norm_sum) / static_cast<float>(C);
    const float means[Norm::kSums] = {dnorm_norm_mean};
    detail::dinp_pass<kWholeRow>(
        rb, dinp + row * C, g, x, weight, lane, groups,
        [&](Vec& dv, const Vec& gv, const Vec& xv, const ParamVec& wv) { Norm::update(dv, gv, xv, wv, {s}, means); });
  }
  // A thread per group of kVec columns, rows in order, loaded kPartialRowBatch at a time.
  float* dw_part = partials + blockIdx.x * std::int64_t{C};
  for (int q = threadIdx.x; q < groups; q += kBackwardThreads) {
    PartialVec dw[Norm::kPartials]{};
    detail::column_pass<T, kVec>(
        dout, inp, nullptr, rstd, row0, rows, q, C,
        [&](const Vec& gv, const Vec& xv, float, float row_rstd) { Norm::add_partials(dw, gv, xv, {row_rstd}); });
    dw[0].store(dw_part + q * kVec);
  }
}

// dweight of type D: float, or bf16 (added in place into bf16 storage: one rounding). The chunks'
// partials added in a fixed order (chunk_partials.cuh); grid partial_blocks(C), kPartialThreads.
template <typename D>
__global__ void __launch_bounds__(kPartialThreads)
    rmsnorm_backward_params(D* dweight, const float* partials, std::int64_t num_chunks, int C) {
  float sum[1];
  sum_chunk_partials<1>(sum, partials, num_chunks, C, C);
  const int c = static_cast<int>(blockIdx.x) * kPartialColumns + static_cast<int>(threadIdx.x);
  if (threadIdx.x >= kPartialColumns || c >= C) return;  // warp 0 holds the sums
  store_act(dweight + c, load_act(dweight + c) + sum[0]);
}

}  // namespace zt::cuda::detail::rms
