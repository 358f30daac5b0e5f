// Rows loaded in batches, device code only: [Note: loads in batches], the batch sizes, load_batch (a lane's
// batch of a row's 16-byte groups, raw), and what the norm backwards' chunk kernels
// (layernorm_kernels.cuh, rmsnorm_kernels.cuh) share on top of it: a row's two passes and the column
// pass over a chunk's rows. Each kernel brings its own arithmetic; the order of every sum is the
// loops' here (a lane's groups q = lane, lane + 32, ...; a column's rows in order).
#pragma once

#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail {

// [Note: loads in batches]
// The norm backwards' chunk kernels (LayerNorm's, RMSNorm's) are bound by memory latency, not
// bandwidth: a block holds 8 warps, and at 5d45fbb their SASS waited for each group's loads before
// issuing the next group's (the loads widened bf16 at once, and each widening sat in the branch
// that guards its group), six round trips to memory a row for GPT-2's C = 768 and twelve for
// Llama 3.2 1B's 2048, then a chain of L2 loads a row in the pass that sums a chunk's columns.
// They now load a batch's raw 16-byte groups (ActVec::load_raw) first and widen and add them
// after, in the same order as before, so a batch costs one round trip and the results are the same
// bits. (A first try at the column pass, 0209a1a, batched ActVec::load, whose widening kept the
// chain; it measured slower on the H200 at d650922, 32.7 against 25.1 us for the bf16 LayerNorm
// backward at [8192, 768], and was reverted.) The LayerNorm and RMSNorm forwards (load_batch), the
// bias gradient's partials and RoPE load in batches for the same reason.
constexpr int kRowBatch = 4;         // groups a lane loads at once in a row pass
constexpr int kPartialRowBatch = 4;  // rows a thread loads at once in the column pass

// raw[b] = group q0 + 32 b of `base` (kVec values of T, as stored) for each b whose group lies
// below `groups`; the rest keep what they held. Nothing reads a loaded group here, so the batch's
// loads are in flight together.
template <int kVec, typename T>
__device__ __forceinline__ void load_batch(typename ActVec<T, kVec>::Raw (&raw)[kRowBatch], const T* base, int q0,
                                           int groups) {
#pragma unroll
  for (int b = 0; b < kRowBatch; ++b) {
    const int q = q0 + b * kWarpSize;
    if (q < groups) raw[b] = ActVec<T, kVec>::load_raw(base + q * kVec);
  }
}

// Groups q0 + 32 b (b < kRowBatch) of a row's dout and inp and of the weight, as stored: load
// fills those below `groups`, the rest keep what they held.
template <typename T, typename P, int kVec>
struct RowBatch {
  using Vec = ActVec<T, kVec>;
  using ParamVec = ActVec<P, kVec>;
  typename Vec::Raw g[kRowBatch]{}, x[kRowBatch]{};
  typename ParamVec::Raw w[kRowBatch]{};

  __device__ __forceinline__ void load(const T* dout_row, const T* inp_row, const P* weight, int q0, int groups) {
    load_batch<kVec>(g, dout_row, q0, groups);
    load_batch<kVec>(x, inp_row, q0, groups);
    load_batch<kVec>(w, weight, q0, groups);
  }
};

// A warp's first pass over a row: rb loaded a batch at a time, then add(gv, xv, wv) for each of
// the lane's groups in order (widened). With the whole row one batch (C / kVec <= 32 kRowBatch), rb
// holds it afterwards for dinp_pass.
template <typename T, typename P, int kVec, typename Add>
__device__ __forceinline__ void row_pass(RowBatch<T, P, kVec>& rb, const T* dout_row, const T* inp_row, const P* weight,
                                         int lane, int groups, Add&& add) {
  using Vec = ActVec<T, kVec>;
  using ParamVec = ActVec<P, kVec>;
  for (int q0 = lane; q0 < groups; q0 += kRowBatch * kWarpSize) {
    rb.load(dout_row, inp_row, weight, q0, groups);
#pragma unroll
    for (int b = 0; b < kRowBatch; ++b) {
      if (q0 + b * kWarpSize < groups) add(Vec::widen(rb.g[b]), Vec::widen(rb.x[b]), ParamVec::widen(rb.w[b]));
    }
  }
}

// The second pass: for each batch (rb reloaded first unless kWholeRow, with dinp's groups loaded
// in the same round trip), update(dv, gv, xv, wv) for each group in order, dv stored to dinp.
template <bool kWholeRow, typename T, typename P, int kVec, typename Update>
__device__ __forceinline__ void dinp_pass(RowBatch<T, P, kVec>& rb, T* dinp_row, const T* dout_row, const T* inp_row,
                                          const P* weight, int lane, int groups, Update&& update) {
  using Vec = ActVec<T, kVec>;
  using ParamVec = ActVec<P, kVec>;
  for (int q0 = lane; q0 < groups; q0 += kRowBatch * kWarpSize) {
    if constexpr (!kWholeRow) rb.load(dout_row, inp_row, weight, q0, groups);
    typename Vec::Raw dr[kRowBatch]{};
    load_batch<kVec>(dr, dinp_row, q0, groups);
#pragma unroll
    for (int b = 0; b < kRowBatch; ++b) {
      const int q = q0 + b * kWarpSize;
      if (q < groups) {
        Vec dv = Vec::widen(dr[b]);
        update(dv, Vec::widen(rb.g[b]), Vec::widen(rb.x[b]), ParamVec::widen(rb.w[b]));
        dv.store(dinp_row + q * kVec);
      }
    }
  }
}

// The column pass of a chunk's rows [row0, row0 + rows) over the thread's group q of kVec columns:
// add(gv, xv, stat0[row], stat1[row]) for each row in order (gv, xv widened from dout and inp;
// 0 for stat0 where it is null).
template <typename T, int kVec, typename Add>
__device__ __forceinline__ void column_pass(const T* dout, const T* inp, const float* stat0, const float* stat1,
                                            std::int64_t row0, int rows, int q, int C, Add&& add) {
  using Vec = ActVec<T, kVec>;
  for (int r0 = 0; r0 < rows; r0 += kPartialRowBatch) {
    typename Vec::Raw gb[kPartialRowBatch]{}, xb[kPartialRowBatch]{};
    float s0[kPartialRowBatch]{}, s1[kPartialRowBatch]{};
#pragma unroll
    for (int j = 0; j < kPartialRowBatch; ++j) {
      const std::int64_t row = row0 + r0 + j;
      if (r0 + j < rows) {
        gb[j] = Vec::load_raw(dout + row * C + q * kVec), xb[j] = Vec::load_raw(inp + row * C + q * kVec);
        if (stat0 != nullptr) s0[j] = stat0[row];
        s1[j] = stat1[row];
      }
    }
#pragma unroll
    for (int j = 0; j < kPartialRowBatch; ++j) {
      if (r0 + j < rows) add(Vec::widen(gb[j]), Vec::widen(xb[j]), s0[j], s1[j]);
    }
  }
}

}  // namespace zt::cuda::detail
