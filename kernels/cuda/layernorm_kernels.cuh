// LayerNorm kernels on the GPU, device code only (launched by layernorm.cu; run on the CPU by the
// SIMT emulation tests, tests/emulation/). Forward: one warp per row, two-pass variance as on the
// CPU (the row held in registers where it fits, else re-read from L1/L2, not DRAM). Backward: one block per 32-row
// chunk computes each row's dinp and the chunk's dweight/dbias partial sums -- a block a row (block_row_backward.cuh),
// or a warp a row and then a thread per column over the chunk's rows in order; a second kernel adds the chunk
// partials in a fixed order (chunk_partials.cuh). No float atomics anywhere.
// Both take 16-byte vector accesses (kVec = kWideVec<T>: a lane owns groups of 4 fp32 or 8 bf16
// columns) where C % kVec == 0 and every row operand is aligned16, else single elements (kVec = 1);
// the reduction order is fixed for a given kVec, so results repeat bitwise. The activations (out, inp, residual and its
// addends; dinp, dout) are of storage type T, float or bf16 (docs/precision.md): widened on load,
// statistics and parameter gradients kept in fp32, each activation result rounded once. The
// parameters (weight, bias) are of type P: float, or bf16 working weights with bf16 activations,
// widened on load like the activations.
#pragma once

#include <cstdint>

#include "kernels/contracts/kernel_scratch.h"
#include "kernels/contracts/layernorm_eps.h"  // kLayerNormEps
#include "kernels/contracts/norm_row_scale.h"
#include "kernels/cuda/block_row_backward.cuh"
#include "kernels/cuda/chunk_partials.cuh"
#include "kernels/cuda/device_helpers.cuh"
#include "kernels/cuda/row_batches.cuh"

namespace zt::cuda::detail::ln {

constexpr int kForwardWarps = 8;  // rows per forward block
// Rows a backward block takes, a row of partials each (the scratch the prediction counts).
constexpr int kRowsPerChunk = kernel_scratch::kNormRowsPerChunk;
constexpr int kBackwardThreads = 256;

// The forward's arithmetic on a group of kVec values, shared by its two kernels: a group's share
// of the row's sum and of its squared deviations from the mean m, and its outputs.
template <int kVec, typename Vec>
__device__ __forceinline__ void add_group_sum(const Vec& xv, float& sum) {
#pragma unroll
  for (int i = 0; i < kVec; ++i) sum += xv[i];
}
template <int kVec, typename Vec>
__device__ __forceinline__ void add_group_deviations(const Vec& xv, float m, float& sq) {
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const float d = xv[i] - m;
    sq += d * d;
  }
}
template <int kVec, typename Vec, typename ParamVec>
__device__ __forceinline__ Vec normalized_group(const Vec& xv, const ParamVec& wv, const ParamVec& bv, float m,
                                                float s) {
  Vec ov;
#pragma unroll
  for (int i = 0; i < kVec; ++i) ov[i] = (xv[i] - m) * s * wv[i] + bv[i];
  return ov;
}

// The forward of a row whose lane groups fit one batch (C / kVec <= 32 kRowBatch): the lane's
// groups of the row (both addends where a2 is non-null) loaded at once and kept raw in registers
// through the three passes ([Note: loads in batches] in row_batches.cuh), where the general
// kernel below reads the row in each pass, a group at a time. The same arithmetic in the same
// order, so the same bits; the residual kept as stored (rounded, for bf16).
template <typename T, typename P, int kVec>
__device__ __forceinline__ void forward_whole_row(T* out, float* mean, float* rstd, T* residual, const T* a,
                                                  const T* a2, const P* weight, const P* bias, std::int64_t row,
                                                  int lane, int C) {
  using Vec = detail::ActVec<T, kVec>;
  using ParamVec = detail::ActVec<P, kVec>;
  const int groups = C / kVec;
  typename Vec::Raw xr[kRowBatch]{}, yr[kRowBatch]{};
  detail::load_batch<kVec>(xr, a + row * C, lane, groups);
  if (a2 != nullptr) detail::load_batch<kVec>(yr, a2 + row * C, lane, groups);
  if (a2 != nullptr) {
#pragma unroll
    for (int b = 0; b < kRowBatch; ++b) {
      const int q = lane + b * detail::kWarpSize;
      if (q < groups) {
        Vec xv = Vec::widen(xr[b]);
        const Vec yv = Vec::widen(yr[b]);
#pragma unroll
        for (int i = 0; i < kVec; ++i) xv[i] += yv[i];
        xr[b] = xv.to_raw();
        Vec::store_raw(residual + row * C + q * kVec, xr[b]);
      }
    }
  }
  float sum = 0.0f;
#pragma unroll
  for (int b = 0; b < kRowBatch; ++b) {
    if (lane + b * detail::kWarpSize < groups) add_group_sum<kVec>(Vec::widen(xr[b]), sum);
  }
  const float m = detail::warp_sum(sum) / static_cast<float>(C);
  float sq = 0.0f;
#pragma unroll
  for (int b = 0; b < kRowBatch; ++b) {
    if (lane + b * detail::kWarpSize < groups) add_group_deviations<kVec>(Vec::widen(xr[b]), m, sq);
  }
  const float var = detail::warp_sum(sq) / static_cast<float>(C);
  const float s = norm_row_scale(var, kLayerNormEps);
  // The weight and bias, read by every row (L1 and L2 hits), loaded only now: through the passes
  // their registers would cost an SM a block.
  typename ParamVec::Raw wr[kRowBatch]{}, br[kRowBatch]{};
  detail::load_batch<kVec>(wr, weight, lane, groups);
  detail::load_batch<kVec>(br, bias, lane, groups);
#pragma unroll
  for (int b = 0; b < kRowBatch; ++b) {
    const int q = lane + b * detail::kWarpSize;
    if (q < groups) {
      normalized_group<kVec>(Vec::widen(xr[b]), ParamVec::widen(wr[b]), ParamVec::widen(br[b]), m, s)
          .store(out + row * C + q * kVec);
    }
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// With `a2` non-null the row is a + a2 (written to `residual`); otherwise it is a. Each lane owns
// the groups q = lane, lane + 32, ... of kVec columns (see the header comment for kVec).
// kWholeRow: forward_whole_row (the launcher checks that the row fits).
template <typename T, typename P, int kVec, bool kWholeRow = false>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, T* residual, const T* a, const T* a2,
                                         const P* weight, const P* bias, std::int64_t N, int C) {
  using Vec = detail::ActVec<T, kVec>;
  using ParamVec = detail::ActVec<P, kVec>;
  const int lane = threadIdx.x % detail::kWarpSize;
  const std::int64_t row = blockIdx.x * std::int64_t{kForwardWarps} + threadIdx.x / detail::kWarpSize;
  if (row >= N) return;
  if constexpr (kWholeRow) {
    forward_whole_row<T, P, kVec>(out, mean, rstd, residual, a, a2, weight, bias, row, lane, C);
    return;
  }
  const int groups = C / kVec;
  const T* x = a + row * C;
  if (a2 != nullptr) {
    const T* y = a2 + row * C;
    T* r = residual + row * C;
    for (int q = lane; q < groups; q += detail::kWarpSize) {
      Vec xv = Vec::load(x + q * kVec);
      const Vec yv = Vec::load(y + q * kVec);
#pragma unroll
      for (int i = 0; i < kVec; ++i) xv[i] += yv[i];
      xv.store(r + q * kVec);
    }
    // Later passes read back what this lane wrote (same lane, same groups): for bf16 the rounded
    // residual, so the fused op equals residual_forward then layernorm_forward.
    x = r;
  }
  float sum = 0.0f;
  for (int q = lane; q < groups; q += detail::kWarpSize) add_group_sum<kVec>(Vec::load(x + q * kVec), sum);
  const float m = detail::warp_sum(sum) / static_cast<float>(C);
  float sq = 0.0f;
  for (int q = lane; q < groups; q += detail::kWarpSize) add_group_deviations<kVec>(Vec::load(x + q * kVec), m, sq);
  const float var = detail::warp_sum(sq) / static_cast<float>(C);
  const float s = norm_row_scale(var, kLayerNormEps);
  T* o = out + row * C;
  for (int q = lane; q < groups; q += detail::kWarpSize) {
    const ParamVec wv = ParamVec::load(weight + q * kVec), bv = ParamVec::load(bias + q * kVec);
    normalized_group<kVec>(Vec::load(x + q * kVec), wv, bv, m, s).store(o + q * kVec);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// A group's share of a row's two backward sums: sum(dn) and sum(dn * norm), dn = dout * weight.
template <typename T, typename P, int kVec>
__device__ __forceinline__ void add_row_sums(const detail::ActVec<T, kVec>& gv, const detail::ActVec<T, kVec>& xv,
                                             const detail::ActVec<P, kVec>& wv, float m, float s, float& dnorm_sum,
                                             float& dnorm_norm_sum) {
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const float dn = gv[i] * wv[i];
    dnorm_sum += dn;
    dnorm_norm_sum += dn * ((xv[i] - m) * s);
  }
}

// A group's dinp contribution, added to dv (dinp as loaded).
template <typename T, typename P, int kVec>
__device__ __forceinline__ void add_dinp(detail::ActVec<T, kVec>& dv, const detail::ActVec<T, kVec>& gv,
                                         const detail::ActVec<T, kVec>& xv, const detail::ActVec<P, kVec>& wv, float m,
                                         float s, float dnorm_mean, float dnorm_norm_mean) {
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const float norm = (xv[i] - m) * s;
    dv[i] += s * (gv[i] * wv[i] - dnorm_mean - norm * dnorm_norm_mean);
  }
}

// LayerNorm's backward arithmetic, for both chunk kernels (norm_backward_block_rows, [Note: a block
// a row] in block_row_backward.cuh, and layernorm_backward_chunk below): the row's two sums, dinp's
// update, and the dweight and dbias partials, written once so the two kernels' partials are the
// same bits.
template <int kVec>
struct LayerNormRows {
  static constexpr int kSums = 2, kPartials = 2;
  struct Stats {
    float m, s;
  };
  __device__ __forceinline__ static Stats stats(const float* mean, const float* rstd, std::int64_t row) {
    return {mean[row], rstd[row]};
  }
  template <typename T, typename P>
  __device__ __forceinline__ static void add_sums(const detail::ActVec<T, kVec>& gv, const detail::ActVec<T, kVec>& xv,
                                                  const detail::ActVec<P, kVec>& wv, const Stats& st,
                                                  float (&sums)[kSums]) {
    add_row_sums(gv, xv, wv, st.m, st.s, sums[0], sums[1]);
  }
  template <typename T, typename P>
  __device__ __forceinline__ static void update(detail::ActVec<T, kVec>& dv, const detail::ActVec<T, kVec>& gv,
                                                const detail::ActVec<T, kVec>& xv, const detail::ActVec<P, kVec>& wv,
                                                const Stats& st, const float (&means)[kSums]) {
    add_dinp(dv, gv, xv, wv, st.m, st.s, means[0], means[1]);
  }
  template <typename T>
  __device__ __forceinline__ static void add_partials(detail::FloatVec<kVec> (&p)[kPartials],
                                                      const detail::ActVec<T, kVec>& gv,
                                                      const detail::ActVec<T, kVec>& xv, const Stats& st) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      p[0][i] += gv[i] * ((xv[i] - st.m) * st.s);
      p[1][i] += gv[i];
    }
  }
};

// One block per chunk of kRowsPerChunk rows. partials: [num_chunks, 2, C] (dweight, then dbias).
// dinp accumulates as round(widen(old) + contribution) for bf16 (docs/precision.md). Loads go in
// batches ([Note: loads in batches] in row_batches.cuh): a lane's row passes take kRowBatch
// groups at a time, and with kWholeRow (C / kVec <= 32 kRowBatch, the launcher checks) the first
// pass's registers hold the whole row for the second, which then loads only dinp.
template <typename T, typename P, int kVec, bool kWholeRow = false>
__global__ void __launch_bounds__(kBackwardThreads, 2)
    layernorm_backward_chunk(T* dinp, float* partials, const T* dout, const T* inp, const P* weight, const float* mean,
                             const float* rstd, std::int64_t N, int C) {
  using Vec = detail::ActVec<T, kVec>;
  using ParamVec = detail::ActVec<P, kVec>;
  using PartialVec = detail::FloatVec<kVec>;
  const int lane = threadIdx.x % detail::kWarpSize, warp = threadIdx.x / detail::kWarpSize;
  constexpr int kWarps = kBackwardThreads / detail::kWarpSize;
  const std::int64_t row0 = blockIdx.x * std::int64_t{kRowsPerChunk};
  const int rows = static_cast<int>(N - row0 < kRowsPerChunk ? N - row0 : kRowsPerChunk);
  const int groups = C / kVec;
  for (int r = warp; r < rows; r += kWarps) {
    const std::int64_t row = row0 + r;
    const T* g = dout + row * C;
    const T* x = inp + row * C;
    const float m = mean[row], s = rstd[row];
    detail::RowBatch<T, P, kVec> rb;
    float dnorm_sum = 0.0f, dnorm_norm_sum = 0.0f;
    detail::row_pass(rb, g, x, weight, lane, groups, [&](const Vec& gv, const Vec& xv, const ParamVec& wv) {
      add_row_sums(gv, xv, wv, m, s, dnorm_sum, dnorm_norm_sum);
    });
    const float dnorm_mean = detail::warp_sum(dnorm_sum) / static_cast<float>(C);
    const float dnorm_norm_mean = detail::warp_sum(dnorm_norm_sum) / static_cast<float>(C);
    detail::dinp_pass<kWholeRow>(rb, dinp + row * C, g, x, weight, lane, groups,
                                 [&](Vec& dv, const Vec& gv, const Vec& xv, const ParamVec& wv) {
                                   add_dinp(dv, gv, xv, wv, m, s, dnorm_mean, dnorm_norm_mean);
                                 });
  }
  // A thread per group of kVec columns, rows in order (loaded kPartialRowBatch at a time): each
  // partial is the same fixed-order sum for either kVec.
  float* dw_part = partials + blockIdx.x * std::int64_t{2} * C;
  float* db_part = dw_part + C;
  for (int q = threadIdx.x; q < groups; q += kBackwardThreads) {
    PartialVec dw_db[LayerNormRows<kVec>::kPartials]{};
    detail::column_pass<T, kVec>(dout, inp, mean, rstd, row0, rows, q, C,
                                 [&](const Vec& gv, const Vec& xv, float row_mean, float row_rstd) {
                                   LayerNormRows<kVec>::add_partials(dw_db, gv, xv, {row_mean, row_rstd});
                                 });
    dw_db[0].store(dw_part + q * kVec);
    dw_db[1].store(db_part + q * kVec);
  }
}

// dweight, dbias of type D: float, or bf16 (a gradient added in place into bf16 storage:
// round(widen(old) + sum), one rounding). Grid partial_blocks(C), kPartialThreads threads.
template <typename D>
__global__ void __launch_bounds__(kPartialThreads)
    layernorm_backward_params(D* dweight, D* dbias, const float* partials, std::int64_t num_chunks, int C) {
  float sum[2];
  sum_chunk_partials<2>(sum, partials, num_chunks, 2 * std::int64_t{C}, C);
  const int c = static_cast<int>(blockIdx.x) * kPartialColumns + static_cast<int>(threadIdx.x);
  if (threadIdx.x >= kPartialColumns || c >= C) return;  // warp 0 holds the sums
  store_act(dweight + c, load_act(dweight + c) + sum[0]);
  store_act(dbias + c, load_act(dbias + c) + sum[1]);
}

}  // namespace zt::cuda::detail::ln
