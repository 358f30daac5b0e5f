// Internal to flash_attention.cu (which launches them) and to the SIMT emulation test
// (tests/emulation/): the CUDA-core flash attention kernels, device code only. One thread (forward)
// or a pair of threads (dq; dk and dv) owns one query or key row and keeps it in registers; a
// block of kRows rows shares tiles of the other side's rows in shared memory. Scores use q pre-multiplied by
// 1/sqrt(hs). Causality bounds every loop, so a block only visits the tiles its rows can see.
// Templated on the activation storage type (docs/precision.md): bf16 qkv, out, dout and dqkv are
// widened on load, everything (registers, shared-memory tiles, lse, delta) is fp32, and each stored
// result is rounded once. Dropout on the probabilities multiplies each P_ij by its mask factor where
// it meets v_j (forward, dV) or dO . v_j (dP); the softmax sum, lse and the row term delta =
// dO . out stay as without it.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"  // load_act, store_act
#include "kernels/cuda/dropout_mask.cuh"
#include "kernels/cuda/flash_attention_tc.cuh"  // FlashGeometry

namespace zt::cuda::detail::flash {

constexpr int kRows = 64;  // rows owned per block, one per thread

// Rows per shared-memory tile: two tiles of kTileRows x HS floats stay within 32 KiB.
template <int HS>
constexpr int kTileRows = 4096 / HS;

using Geometry = FlashGeometry;

// Row t of sample b's [T, W] block of qkv (or dqkv), from column `col` (FlashGeometry::q_col,
// k_col, v_col).
template <typename Act>
__device__ __forceinline__ Act* qkv_row(Act* qkv, const Geometry& g, int b, int t, int col) {
  return qkv + (static_cast<std::int64_t>(b) * g.T + t) * g.W + col;
}

// The block's threads copy keys and values k0 .. k0 + KT - 1 of key/value head kvh (zeros past T)
// into shared memory; the caller synchronises before reading them.
template <int HS, typename Act>
__device__ __forceinline__ void load_kv_tile(float (*ks)[HS], float (*vs)[HS], const Act* qkv, const Geometry& g, int b,
                                             int kvh, int k0) {
  for (int e = threadIdx.x; e < kTileRows<HS> * HS; e += blockDim.x) {
    const int r = e / HS, d = e % HS, j = k0 + r;
    ks[r][d] = j < g.T ? load_act(qkv_row(qkv, g, b, j, g.k_col(kvh, HS)) + d) : 0.0f;
    vs[r][d] = j < g.T ? load_act(qkv_row(qkv, g, b, j, g.v_col(kvh, HS)) + d) : 0.0f;
  }
}

template <int HS, typename Act>
__global__ void flash_forward_kernel(Act* out, float* lse, const Act* qkv, Geometry g, MaskParams mask) {
  constexpr int KT = kTileRows<HS>;
  __shared__ float ks[KT][HS];
  __shared__ float vs[KT][HS];
  const int b = blockIdx.y / g.NH, h = blockIdx.y % g.NH, kvh = h / g.group();
  const int first = blockIdx.x * kRows, i = first + threadIdx.x;
  const bool active = i < g.T;
  float q[HS], acc[HS];
  float m = -INFINITY, l = 0.0f;
  MaskCursor cursor(mask, b);
  if (active) {
    const Act* qi = qkv_row(qkv, g, b, i, g.q_col(h, HS));
    for (int d = 0; d < HS; ++d) {
      q[d] = load_act(qi + d) * g.scale;
      acc[d] = 0.0f;
    }
  }
  const int last_key = min(g.T, first + kRows) - 1;  // the block's last row sees keys 0..last_key
  for (int k0 = 0; k0 <= last_key; k0 += KT) {
    load_kv_tile<HS>(ks, vs, qkv, g, b, kvh, k0);
    __syncthreads();
    if (active) {
      const int visible = min(KT, i - k0 + 1);  // keys k0 .. i of this tile
      for (int r = 0; r < visible; ++r) {
        float s = 0.0f;
        for (int d = 0; d < HS; ++d) s += q[d] * ks[r][d];
        if (s > m) {  // a new maximum: rescale what was summed against the old one
          const float c = expf(m - s);
          l *= c;
          for (int d = 0; d < HS; ++d) acc[d] *= c;
          m = s;
        }
        const float p = expf(s - m);
        l += p;
        const float pv = p * cursor.factor((static_cast<std::int64_t>(h) * g.T + i) * g.T + k0 + r);
        for (int d = 0; d < HS; ++d) acc[d] += pv * vs[r][d];
      }
    }
    __syncthreads();
  }
  if (active) {
    const float inv = 1.0f / l;
    Act* oi = out + (static_cast<std::int64_t>(b) * g.T + i) * g.C + h * HS;
    for (int d = 0; d < HS; ++d) store_act(oi + d, acc[d] * inv);
    lse[static_cast<std::int64_t>(blockIdx.y) * g.T + i] = m + logf(l);
  }
}

// delta[bh, i] = sum_d dout[i, d] * out[i, d]: the softmax backward's row term (from the stored,
// for BF16 rounded, out: FlashAttention-2's choice; the tests bound the difference).
template <typename Act>
__global__ void flash_delta_kernel(float* delta, const Act* dout, const Act* out, Geometry g, int hs,
                                   std::int64_t rows) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const std::int64_t bh = r / g.T;
  const int i = static_cast<int>(r % g.T), b = static_cast<int>(bh / g.NH), h = static_cast<int>(bh % g.NH);
  const std::int64_t at = (static_cast<std::int64_t>(b) * g.T + i) * g.C + h * hs;
  float sum = 0.0f;
  for (int d = 0; d < hs; ++d) sum += load_act(dout + at + d) * load_act(out + at + d);
  delta[r] = sum;
}

// The backward kernels give a row to a pair of threads: a row's operands and accumulators are 3 or
// 4 HS values, which one thread could not hold at HS = 64 without spilling. Thread `half` owns
// d = 2m + half, m < HS / 2 (interleaved, so the pair reads neighbouring words of the shared
// tiles), and the pair adds its partial dot products with one shuffle. Every thread walks every
// row of each tile (the masked ones add nothing), so the whole warp reaches each shuffle.
constexpr int kThreadsPerRow = 2;
constexpr int kPairThreads = kRows * kThreadsPerRow;

// dq for one query row per pair of threads: dq_i = scale * sum_j p_ij (mask_ij dp_ij - delta_i) k_j.
template <int HS, typename Act>
__global__ void __launch_bounds__(kPairThreads)
    flash_dq_kernel(Act* dqkv, const Act* qkv, const Act* dout, const float* lse, const float* delta, Geometry g,
                    MaskParams mask) {
  constexpr int KT = kTileRows<HS>;
  constexpr int kHalf = HS / kThreadsPerRow;
  __shared__ float ks[KT][HS];
  __shared__ float vs[KT][HS];
  const int b = blockIdx.y / g.NH, h = blockIdx.y % g.NH, kvh = h / g.group();
  const int half = static_cast<int>(threadIdx.x) % kThreadsPerRow;
  const int first = blockIdx.x * kRows, i = first + static_cast<int>(threadIdx.x) / kThreadsPerRow;
  const bool active = i < g.T;
  float q[kHalf], dO[kHalf], dq[kHalf];
  MaskCursor cursor(mask, b);
  const Act* qi = qkv_row(qkv, g, b, active ? i : 0, g.q_col(h, HS));
  const Act* doi = dout + (static_cast<std::int64_t>(b) * g.T + (active ? i : 0)) * g.C + h * HS;
  for (int m = 0; m < kHalf; ++m) {
    q[m] = active ? load_act(qi + 2 * m + half) * g.scale : 0.0f;
    dO[m] = active ? load_act(doi + 2 * m + half) : 0.0f;
    dq[m] = 0.0f;
  }
  const float lse_i = active ? lse[static_cast<std::int64_t>(blockIdx.y) * g.T + i] : 0.0f;
  const float delta_i = active ? delta[static_cast<std::int64_t>(blockIdx.y) * g.T + i] : 0.0f;
  const int last_key = min(g.T, first + kRows) - 1;
  for (int k0 = 0; k0 <= last_key; k0 += KT) {
    load_kv_tile<HS>(ks, vs, qkv, g, b, kvh, k0);
    __syncthreads();
    const int rows = min(KT, last_key - k0 + 1);  // the same for the whole block
    for (int r = 0; r < rows; ++r) {
      float s = 0.0f, dp = 0.0f;
      for (int m = 0; m < kHalf; ++m) {
        s += q[m] * ks[r][2 * m + half];
        dp += dO[m] * vs[r][2 * m + half];
      }
      s += __shfl_xor_sync(0xffffffffu, s, 1);  // the pair's halves: the same sum in both threads
      dp += __shfl_xor_sync(0xffffffffu, dp, 1);
      if (active && k0 + r <= i) {
        const float f = cursor.factor((static_cast<std::int64_t>(h) * g.T + i) * g.T + k0 + r);
        const float ds = expf(s - lse_i) * (dp * f - delta_i);
        for (int m = 0; m < kHalf; ++m) dq[m] += ds * ks[r][2 * m + half];
      }
    }
    __syncthreads();
  }
  if (active) {
    Act* dqi = qkv_row(dqkv, g, b, i, g.q_col(h, HS));
    for (int m = 0; m < kHalf; ++m) store_act(dqi + 2 * m + half, dq[m] * g.scale);
  }
}

// dk and dv for one key row of key/value head kvh per pair of threads (a (row block, B * NKV)
// grid), over the query rows that see it (i >= j) of each query head h that reads kvh, in head
// order: dv_j = sum_h sum_i mask_hij p_hij dout_hi,  dk_j = sum_h sum_i p_hij (mask_hij dp_hij -
// delta_hi) (scale q_hi).
template <int HS, typename Act>
__global__ void __launch_bounds__(kPairThreads)
    flash_dkv_kernel(Act* dqkv, const Act* qkv, const Act* dout, const float* lse, const float* delta, Geometry g,
                     MaskParams mask) {
  constexpr int QT = kTileRows<HS> / 2;  // four tiles: q, dout (and the row terms)
  constexpr int kHalf = HS / kThreadsPerRow;
  __shared__ float qs[QT][HS];
  __shared__ float dos[QT][HS];
  __shared__ float lses[QT];
  __shared__ float deltas[QT];
  const int b = blockIdx.y / g.NKV, kvh = blockIdx.y % g.NKV;
  const int half = static_cast<int>(threadIdx.x) % kThreadsPerRow;
  const int first = blockIdx.x * kRows, j = first + static_cast<int>(threadIdx.x) / kThreadsPerRow;
  const bool active = j < g.T;
  float k[kHalf], v[kHalf], dk[kHalf], dv[kHalf];
  MaskCursor cursor(mask, b);
  for (int m = 0; m < kHalf; ++m) {
    const int d = 2 * m + half;
    k[m] = active ? load_act(qkv_row(qkv, g, b, j, g.k_col(kvh, HS)) + d) : 0.0f;
    v[m] = active ? load_act(qkv_row(qkv, g, b, j, g.v_col(kvh, HS)) + d) : 0.0f;
    dk[m] = 0.0f;
    dv[m] = 0.0f;
  }
  for (int h = kvh * g.group(); h < (kvh + 1) * g.group(); ++h) {
    const std::int64_t bh = static_cast<std::int64_t>(b) * g.NH + h;  // the row statistics' head row
    for (int q0 = (first / QT) * QT; q0 < g.T; q0 += QT) {            // query rows from the block's first key on
      for (int e = threadIdx.x; e < QT * HS; e += blockDim.x) {
        const int r = e / HS, d = e % HS, i = q0 + r;
        qs[r][d] = i < g.T ? load_act(qkv_row(qkv, g, b, i, g.q_col(h, HS)) + d) * g.scale : 0.0f;
        dos[r][d] = i < g.T ? load_act(dout + (static_cast<std::int64_t>(b) * g.T + i) * g.C + h * HS + d) : 0.0f;
      }
      for (int r = threadIdx.x; r < QT; r += blockDim.x) {
        const int i = q0 + r;
        lses[r] = i < g.T ? lse[bh * g.T + i] : 0.0f;
        deltas[r] = i < g.T ? delta[bh * g.T + i] : 0.0f;
      }
      __syncthreads();
      for (int r = 0; r < QT && q0 + r < g.T; ++r) {  // the same rows for the whole block
        float s = 0.0f, dp = 0.0f;
        for (int m = 0; m < kHalf; ++m) {
          s += qs[r][2 * m + half] * k[m];
          dp += dos[r][2 * m + half] * v[m];
        }
        s += __shfl_xor_sync(0xffffffffu, s, 1);  // the pair's halves: the same sum in both threads
        dp += __shfl_xor_sync(0xffffffffu, dp, 1);
        if (active && q0 + r >= j) {
          const float p = expf(s - lses[r]);
          const float f = cursor.factor((static_cast<std::int64_t>(h) * g.T + q0 + r) * g.T + j);
          const float ds = p * (dp * f - deltas[r]);
          for (int m = 0; m < kHalf; ++m) {
            dv[m] += p * f * dos[r][2 * m + half];
            dk[m] += ds * qs[r][2 * m + half];
          }
        }
      }
      __syncthreads();
    }
  }  // the next query head of the group
  if (active) {
    Act* dk_row = qkv_row(dqkv, g, b, j, g.k_col(kvh, HS));
    Act* dv_row = qkv_row(dqkv, g, b, j, g.v_col(kvh, HS));
    for (int m = 0; m < kHalf; ++m) {
      store_act(dk_row + 2 * m + half, dk[m]);
      store_act(dv_row + 2 * m + half, dv[m]);
    }
  }
}

}  // namespace zt::cuda::detail::flash
