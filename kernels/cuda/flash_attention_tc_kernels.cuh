// Tensor-core flash attention for BF16 activations, on WMMA 16x16x16 bf16 fragments with fp32
// accumulators. A block of 4 warps owns 64 rows (queries in the forward and dq kernels, keys in the
// dk/dv kernel), 16 per warp, and streams 64-row tiles of the other side through shared memory.
// (kernels/cuda/flash_attention_tc_common.cuh holds the design notes, [Note: flash attention on
// tensor cores] and [Note: bank skew], and the helpers these kernels share.)
//
// Internal to flash_attention_tc.cu (which launches them) and to the SIMT emulation test
// (tests/emulation/), which runs this device code on the CPU: kernels only, no launch syntax.
#pragma once

#include <cstdint>

#include "kernels/cuda/flash_attention_tc_common.cuh"

namespace zt::cuda::detail::tc_flash {

template <int HS>
__global__ void __launch_bounds__(kThreads)
    tc_forward_kernel(bf16* out, float* lse, const bf16* qkv, FlashGeometry g, MaskParams mask) {
  constexpr ForwardSmem<HS> L = forward_smem<HS>();
  unsigned char* smem = dynamic_shared_memory();
  bf16* qs = reinterpret_cast<bf16*>(smem + L.q);
  bf16* ks = reinterpret_cast<bf16*>(smem + L.k);
  bf16* vs = reinterpret_cast<bf16*>(smem + L.v);
  float* ss = reinterpret_cast<float*>(smem + L.s);
  bf16* ps = reinterpret_cast<bf16*>(smem + L.p);
  float* os = reinterpret_cast<float*>(smem + L.o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int bh = blockIdx.y, b = bh / g.NH, h = bh % g.NH, kvh = h / g.group();
  const int first = (gridDim.x - 1 - blockIdx.x) * kRows;  // the longest rows first
  const std::int64_t W = g.W;
  const bf16* sample = qkv + static_cast<std::int64_t>(b) * g.T * W;

  load_rows<HS>(qs, sample + g.q_col(h, HS), W, g.T, first);
  for (int e = threadIdx.x; e < kRows * Ld<HS>::o; e += kThreads) os[e] = 0.0f;
  __syncthreads();
  FragA q[HS / 16];
  load_row_fragments<HS>(q, qs, warp);

  // This lane's share of the per-row work: row `row` of the block, columns [c0, c0 + 32) of a
  // score tile and [d0, d0 + HS / 2) of the output.
  const int row = warp * 16 + lane / 2, c0 = (lane % 2) * (kTile / 2), d0 = (lane % 2) * (HS / 2);
  const int skew = row_pass_skew(lane);  // [Note: bank skew]
  const int i = first + row;
  float* srow = ss + row * Ld<HS>::s;
  bf16* prow = ps + row * Ld<HS>::p;
  float* orow = os + row * Ld<HS>::o;
  float m = -INFINITY, l = 0.0f;
  MaskCursor cursor(mask, b);
  const int last_key = min(g.T, first + kRows) - 1;
  for (int k0 = 0; k0 <= last_key; k0 += kTile) {
    __syncthreads();  // every warp is done with the previous k and v tiles
    load_rows<HS>(ks, sample + g.k_col(kvh, HS), W, g.T, k0);
    load_rows<HS>(vs, sample + g.v_col(kvh, HS), W, g.T, k0);
    __syncthreads();
#pragma unroll
    for (int n = 0; n < kTile / 16; ++n) {
      FragAcc s;
      product_with_rows<HS>(s, q, ks, n * 16);
      wmma::store_matrix_sync(ss + warp * 16 * Ld<HS>::s + n * 16, s, Ld<HS>::s, wmma::mem_row_major);
    }
    __syncwarp();
    // Online softmax over the row's visible keys j <= i (j < T follows for i < T; rows past T,
    // whose output is dropped, see keys below T only, so no row is ever fully masked: key 0 is
    // in every row's first tile and m is finite from then on).
    float tile_max = -INFINITY;
    for (int t = 0; t < kTile / 2; ++t) {
      const int c = c0 + (t & ~3) + ((t + skew) & 3);  // [Note: bank skew]
      const int j = k0 + c;
      const float s = j <= i && j < g.T ? srow[c] * g.scale : -INFINITY;
      srow[c] = s;
      tile_max = fmaxf(tile_max, s);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float m_new = fmaxf(m, tile_max);
    const float rescale = expf(m - m_new);                                        // 0 on the first tile (m = -inf)
    const std::int64_t e0 = (static_cast<std::int64_t>(h) * g.T + i) * g.T + k0;  // mask index of (i, k0)
    float sum = 0.0f;
    for (int t = 0; t < kTile / 2; ++t) {
      const int c = c0 + (t & ~3) + ((t + skew) & 3);  // [Note: bank skew]
      const float p = expf(srow[c] - m_new);
      sum += p;
      prow[c] = round_bf16(p != 0.0f && i < g.T ? p * cursor.factor(e0 + c) : p);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * rescale + sum;
    m = m_new;
    for (int t = 0; t < HS / 2; ++t) orow[d0 + (t + skew) % (HS / 2)] *= rescale;
    __syncwarp();
    FragA pa[kTile / 16];
    load_p_fragments<HS>(pa, ps + warp * 16 * Ld<HS>::p);
#pragma unroll
    for (int n = 0; n < HS / 16; ++n) {
      FragAcc o;
      float* o_tile = os + warp * 16 * Ld<HS>::o + n * 16;
      wmma::load_matrix_sync(o, o_tile, Ld<HS>::o, wmma::mem_row_major);
      accumulate_p_times_rows<HS>(o, pa, vs, n * 16);
      wmma::store_matrix_sync(o_tile, o, Ld<HS>::o, wmma::mem_row_major);
    }
    __syncwarp();
  }
  if (i < g.T) {
    const float inv = 1.0f / l;
    bf16* out_row = out + (static_cast<std::int64_t>(b) * g.T + i) * g.C + h * HS;
    store_half_row<HS>(out_row + d0, orow + d0, inv);
    if (lane % 2 == 0) lse[static_cast<std::int64_t>(bh) * g.T + i] = m + logf(l);
  }
}

// dq for 64 query rows: dq_i = scale * sum_j dS_ij k_j, dS_ij = P_ij (mask_ij dP_ij - delta_i),
// dP = dO V^T, P recomputed from lse.
template <int HS>
__global__ void __launch_bounds__(kThreads)
    tc_dq_kernel(bf16* dqkv, const bf16* qkv, const bf16* dout, const float* lse, const float* delta, FlashGeometry g,
                 MaskParams mask) {
  constexpr BackwardSmem L = backward_smem<HS, false>();
  unsigned char* smem = dynamic_shared_memory();
  bf16* qs = reinterpret_cast<bf16*>(smem + L.a);
  bf16* dos = reinterpret_cast<bf16*>(smem + L.b);
  bf16* ks = reinterpret_cast<bf16*>(smem + L.c);
  bf16* vs = reinterpret_cast<bf16*>(smem + L.d);
  float* ss = reinterpret_cast<float*>(smem + L.s);
  float* dps = reinterpret_cast<float*>(smem + L.dp);
  bf16* dss = reinterpret_cast<bf16*>(smem + L.ds);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int bh = blockIdx.y, b = bh / g.NH, h = bh % g.NH, kvh = h / g.group();
  const int first = (gridDim.x - 1 - blockIdx.x) * kRows;
  const std::int64_t W = g.W;
  const bf16* sample = qkv + static_cast<std::int64_t>(b) * g.T * W;
  const bf16* dout_head = dout + static_cast<std::int64_t>(b) * g.T * g.C + h * HS;

  load_rows<HS>(qs, sample + g.q_col(h, HS), W, g.T, first);
  load_rows<HS>(dos, dout_head, g.C, g.T, first);
  __syncthreads();
  FragA q[HS / 16], dO[HS / 16];
  load_row_fragments<HS>(q, qs, warp);
  load_row_fragments<HS>(dO, dos, warp);
  FragAcc dq[HS / 16];
#pragma unroll
  for (int n = 0; n < HS / 16; ++n) wmma::fill_fragment(dq[n], 0.0f);

  const int row = warp * 16 + lane / 2, c0 = (lane % 2) * (kTile / 2), d0 = (lane % 2) * (HS / 2);
  const int skew = row_pass_skew(lane);  // [Note: bank skew]
  const int i = first + row;
  const float lse_i = i < g.T ? lse[static_cast<std::int64_t>(bh) * g.T + i] : 0.0f;
  const float delta_i = i < g.T ? delta[static_cast<std::int64_t>(bh) * g.T + i] : 0.0f;
  const float* srow = ss + row * Ld<HS>::s;
  const float* dprow = dps + row * Ld<HS>::s;
  bf16* dsrow = dss + row * Ld<HS>::p;
  MaskCursor cursor(mask, b);
  const int last_key = min(g.T, first + kRows) - 1;
  for (int k0 = 0; k0 <= last_key; k0 += kTile) {
    __syncthreads();
    load_rows<HS>(ks, sample + g.k_col(kvh, HS), W, g.T, k0);
    load_rows<HS>(vs, sample + g.v_col(kvh, HS), W, g.T, k0);
    __syncthreads();
#pragma unroll
    for (int n = 0; n < kTile / 16; ++n) {
      FragAcc s, dp;
      product_with_rows<HS>(s, q, ks, n * 16);
      wmma::store_matrix_sync(ss + warp * 16 * Ld<HS>::s + n * 16, s, Ld<HS>::s, wmma::mem_row_major);
      product_with_rows<HS>(dp, dO, vs, n * 16);
      wmma::store_matrix_sync(dps + warp * 16 * Ld<HS>::s + n * 16, dp, Ld<HS>::s, wmma::mem_row_major);
    }
    __syncwarp();
    const std::int64_t e0 = (static_cast<std::int64_t>(h) * g.T + i) * g.T + k0;
    for (int t = 0; t < kTile / 2; ++t) {
      const int c = c0 + (t & ~3) + ((t + skew) & 3);  // [Note: bank skew]
      const int j = k0 + c;
      const float p = j <= i && j < g.T ? expf(srow[c] * g.scale - lse_i) : 0.0f;
      const float ds = p != 0.0f && i < g.T ? p * (dprow[c] * cursor.factor(e0 + c) - delta_i) : 0.0f;
      dsrow[c] = round_bf16(ds);
    }
    __syncwarp();
    FragA dsa[kTile / 16];
    load_p_fragments<HS>(dsa, dss + warp * 16 * Ld<HS>::p);
#pragma unroll
    for (int n = 0; n < HS / 16; ++n) accumulate_p_times_rows<HS>(dq[n], dsa, ks, n * 16);
  }
  __syncthreads();  // the epilogue reuses regions a and b
  float* os = reinterpret_cast<float*>(smem + L.a);
#pragma unroll
  for (int n = 0; n < HS / 16; ++n) {
    wmma::store_matrix_sync(os + warp * 16 * Ld<HS>::o + n * 16, dq[n], Ld<HS>::o, wmma::mem_row_major);
  }
  __syncwarp();
  if (i < g.T) {
    bf16* dq_row = dqkv + (static_cast<std::int64_t>(b) * g.T + i) * W + g.q_col(h, HS);
    store_half_row<HS>(dq_row + d0, os + row * Ld<HS>::o + d0, g.scale);
  }
}

// dk and dv for 64 key rows over the query rows that see them (i >= j):
// dv_j = sum_i mask_ij P_ij dO_i, dk_j = scale * sum_i dS_ij q_i.
template <int HS>
__global__ void __launch_bounds__(kThreads)
    tc_dkv_kernel(bf16* dqkv, const bf16* qkv, const bf16* dout, const float* lse, const float* delta, FlashGeometry g,
                  MaskParams mask) {
  constexpr BackwardSmem L = backward_smem<HS, true>();
  unsigned char* smem = dynamic_shared_memory();
  bf16* ks = reinterpret_cast<bf16*>(smem + L.a);
  bf16* vs = reinterpret_cast<bf16*>(smem + L.b);
  bf16* qs = reinterpret_cast<bf16*>(smem + L.c);
  bf16* dos = reinterpret_cast<bf16*>(smem + L.d);
  float* sts = reinterpret_cast<float*>(smem + L.s);    // S^T: [key, query]
  float* dpts = reinterpret_cast<float*>(smem + L.dp);  // dP^T
  bf16* pts = reinterpret_cast<bf16*>(smem + L.p);      // dropped P^T, rounded
  bf16* dsts = reinterpret_cast<bf16*>(smem + L.ds);    // dS^T, rounded
  float* lses = reinterpret_cast<float*>(smem + L.lse);
  float* deltas = reinterpret_cast<float*>(smem + L.delta);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int b = blockIdx.y / g.NKV, kvh = blockIdx.y % g.NKV;  // a (row block, B * NKV) grid
  const int first = blockIdx.x * kRows;                        // the longest (earliest) key rows come first anyway
  const std::int64_t W = g.W;
  const bf16* sample = qkv + static_cast<std::int64_t>(b) * g.T * W;

  load_rows<HS>(ks, sample + g.k_col(kvh, HS), W, g.T, first);
  load_rows<HS>(vs, sample + g.v_col(kvh, HS), W, g.T, first);
  __syncthreads();
  FragA k[HS / 16], v[HS / 16];
  load_row_fragments<HS>(k, ks, warp);
  load_row_fragments<HS>(v, vs, warp);
  FragAcc dk[HS / 16], dv[HS / 16];
#pragma unroll
  for (int n = 0; n < HS / 16; ++n) {
    wmma::fill_fragment(dk[n], 0.0f);
    wmma::fill_fragment(dv[n], 0.0f);
  }

  // The per-element pass: this lane's keys kr0 .. kr0 + 3 (of the warp's 16) and queries cq0 ..
  // cq0 + 7 of a tile, keys innermost, so the mask elements (h, qi, j .. j + 3) it walks share
  // Philox blocks (at most 2 draws per 4 elements rather than 4). The epilogue: row `row`, half d0.
  const int kr0 = warp * 16 + (lane % 4) * 4, cq0 = (lane / 4) * 8, skew = dkdv_skew(lane);  // [Note: bank skew]
  const int row = warp * 16 + lane / 2, d0 = (lane % 2) * (HS / 2);
  const int j = first + row;
  MaskCursor cursor(mask, b);
  // Each query head reading key/value head kvh in turn (grouped-query attention; one for
  // multi-head attention) adds its terms to the same accumulators.
  for (int h = kvh * g.group(); h < (kvh + 1) * g.group(); ++h) {
    const std::int64_t bh = static_cast<std::int64_t>(b) * g.NH + h;
    const bf16* dout_head = dout + static_cast<std::int64_t>(b) * g.T * g.C + h * HS;
    for (int q0 = first; q0 < g.T; q0 += kTile) {  // query rows from the block's first key on
      __syncthreads();
      load_rows<HS>(qs, sample + g.q_col(h, HS), W, g.T, q0);
      load_rows<HS>(dos, dout_head, g.C, g.T, q0);
      for (int r = threadIdx.x; r < kTile; r += kThreads) {
        const int qi = q0 + r;
        lses[r] = qi < g.T ? lse[static_cast<std::int64_t>(bh) * g.T + qi] : 0.0f;
        deltas[r] = qi < g.T ? delta[static_cast<std::int64_t>(bh) * g.T + qi] : 0.0f;
      }
      __syncthreads();
#pragma unroll
      for (int n = 0; n < kTile / 16; ++n) {
        FragAcc st, dpt;
        product_with_rows<HS>(st, k, qs, n * 16);
        wmma::store_matrix_sync(sts + warp * 16 * Ld<HS>::s + n * 16, st, Ld<HS>::s, wmma::mem_row_major);
        product_with_rows<HS>(dpt, v, dos, n * 16);
        wmma::store_matrix_sync(dpts + warp * 16 * Ld<HS>::s + n * 16, dpt, Ld<HS>::s, wmma::mem_row_major);
      }
      __syncwarp();
      for (int t = 0; t < 8; ++t) {
        const int c = cq0 + (t + skew) % 8;
        const int qi = q0 + c;
        for (int r = kr0; r < kr0 + 4; ++r) {
          const int key = first + r;
          const bool visible = qi >= key && qi < g.T;
          const float p = visible ? expf(sts[r * Ld<HS>::s + c] * g.scale - lses[c]) : 0.0f;
          const float f = p != 0.0f ? cursor.factor((static_cast<std::int64_t>(h) * g.T + qi) * g.T + key) : 0.0f;
          pts[r * Ld<HS>::p + c] = round_bf16(p * f);
          dsts[r * Ld<HS>::p + c] = round_bf16(p * (dpts[r * Ld<HS>::s + c] * f - deltas[c]));
        }
      }
      __syncwarp();
      {  // one operand's fragments alive at a time (this kernel's registers are the tightest)
        FragA pa[kTile / 16];
        load_p_fragments<HS>(pa, pts + warp * 16 * Ld<HS>::p);
#pragma unroll
        for (int n = 0; n < HS / 16; ++n) accumulate_p_times_rows<HS>(dv[n], pa, dos, n * 16);
        load_p_fragments<HS>(pa, dsts + warp * 16 * Ld<HS>::p);
#pragma unroll
        for (int n = 0; n < HS / 16; ++n) accumulate_p_times_rows<HS>(dk[n], pa, qs, n * 16);
      }
    }
  }                 // the next query head of the group
  __syncthreads();  // the epilogue reuses regions a and b
  float* os = reinterpret_cast<float*>(smem + L.a);
  float* orow = os + row * Ld<HS>::o;
  bf16* kv_row = dqkv + (static_cast<std::int64_t>(b) * g.T + j) * W;
  // Fragments -> the warp's rows of the fp32 tile -> bf16 columns of part 1 (k) or 2 (v).
  auto write_part = [&](FragAcc(&acc)[HS / 16], int col, float factor) {
#pragma unroll
    for (int n = 0; n < HS / 16; ++n) {
      wmma::store_matrix_sync(os + warp * 16 * Ld<HS>::o + n * 16, acc[n], Ld<HS>::o, wmma::mem_row_major);
    }
    __syncwarp();
    if (j < g.T) {
      store_half_row<HS>(kv_row + col + d0, orow + d0, factor);
    }
    __syncwarp();  // the lanes are done reading before the next part overwrites the tile
  };
  write_part(dk, g.k_col(kvh, HS), g.scale);
  write_part(dv, g.v_col(kvh, HS), 1.0f);
}

}  // namespace zt::cuda::detail::tc_flash
