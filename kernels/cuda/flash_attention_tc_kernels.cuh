// Tensor-core flash attention for BF16 activations, on WMMA 16x16x16 bf16 fragments with fp32
// accumulators. A block of 4 warps owns 64 rows (queries in the forward and dq kernels, keys in the
// dk/dv kernel), 16 per warp, and streams 64-row tiles of the other side through shared memory.
//
// [Note: flash attention on tensor cores]
// WMMA fragments do not say which thread holds which element, so every step that works per row
// (the causal mask, the online softmax, its rescaling of the output, dropout, the softmax backward)
// goes through shared memory: a warp stores its 16 x 64 score tile as fp32, its 32 lanes work on
// it two lanes per row (each lane half the columns, the pair combining maxima and sums with one
// shuffle), and write bf16 probabilities (or dS) that the warp loads back as the A operand of the
// next product. The forward's output accumulator lives in shared memory too (fp32), because every
// tile rescales its rows; the backward's dq, dk and dv accumulators need no rescaling and stay in
// fragments until the end. The q, k, v and dout rows a block owns are loaded into fragments once.
// Rounding: S = Q K^T and dP = dO V^T multiply the stored bf16 operands exactly as the CUDA-core
// kernels do (fp32 sums, another order); the probabilities (after dropout) and dS are rounded once
// to bf16 before their products. Deterministic: every sum has a fixed order, no atomics.
//
// [Note: bank skew]
// The fp32 tiles' rows are Ld::s = 68 floats apart (WMMA wants a multiple of 4), so row r starts
// on bank 4r mod 32: rows r and r + 8 share a bank, and the two lanes of a row, 32 columns apart,
// share one too. Walking columns in the same order, a warp's 32 lanes would hit 8 banks (4-way
// conflicts; 8-way in the dk/dv pass, whose lanes own 4 keys x 8 queries). So each lane walks its
// columns in an order of its own (row_pass_skew, dkdv_skew): at every step the 32 lanes then read
// 32 different banks of the fp32 tiles (the output rows, HS + 4 floats apart, likewise; the bf16
// P and dS writes, 72 elements apart, go from 4-way to 2-way). The row passes rotate only within
// each group of 4 columns, so all lanes still enter a new group, and a new 4-element Philox block of
// the dropout mask, on the same step: MaskCursor's draw stays one per group in lock step, where a
// full-row rotation would have some lane draw on every step (4x the warp's Philox work). It changes
// only the order of each lane's own row sum, which stays fixed.
//
// Internal to flash_attention_tc.cu (which launches them) and to the SIMT emulation test
// (tests/emulation/), which runs this device code on the CPU: kernels only, no launch syntax.
#pragma once

#include <cstddef>
#include <cstdint>

#include <mma.h>

#include "kernels/cuda/device_helpers.cuh"  // f32_to_bf16
#include "kernels/cuda/dynamic_smem.cuh"
#include "kernels/cuda/dropout_mask.cuh"
#include "kernels/cuda/flash_attention_tc.cuh"

namespace zt::cuda::detail::tc_flash {

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;

// [Note: bank skew] for the two-lanes-a-row passes: lane = 2 x (row in warp) + half, and rows
// r, r + 8 of a warp are told apart by lane / 16, the halves by 2 x (lane % 2): offsets 0..3 within
// each group of 4 columns.
__device__ __forceinline__ int row_pass_skew(int lane) { return lane / 16 + 2 * (lane % 2); }
// The same for the dk/dv pass (lane % 4 picks 4 keys, lane / 4 the 8 queries): offsets 0..7.
__device__ __forceinline__ int dkdv_skew(int lane) { return 2 * (lane % 4) + lane / 16; }
constexpr int kRows = 16 * kWarps;  // rows a block owns
constexpr int kTile = 64;           // rows per streamed tile; == kRows, so causal bounds fall on tiles
static_assert(kTile == kRows, "the causal loop bounds assume one tile per block of rows");

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragAcc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// Leading dimensions (elements) of the shared-memory tiles, padded against bank conflicts. WMMA
// wants multiples of 8 bf16 / 4 floats, and fragment pointers (16-row, 16-column steps) 32-byte
// aligned: 16 rows of each ld are a multiple of 32 bytes for every HS here.
template <int HS>
struct Ld {
  static constexpr int h = HS + 8;     // bf16 [rows, HS]: q, k, v, dout tiles
  static constexpr int s = kTile + 4;  // fp32 [rows, kTile]: scores, dP
  static constexpr int p = kTile + 8;  // bf16 [rows, kTile]: probabilities, dS
  static constexpr int o = HS + 4;     // fp32 [rows, HS]: output accumulator, epilogues
};

__host__ __device__ constexpr std::size_t round128(std::size_t n) { return (n + 127) / 128 * 128; }

// Byte offsets of the shared-memory regions, in order, each 128-byte aligned.
struct Carve {
  std::size_t used = 0;
  __host__ __device__ constexpr std::size_t take(std::size_t bytes) {
    const std::size_t at = used;
    used += round128(bytes);
    return at;
  }
};

template <int HS>
__host__ __device__ constexpr std::size_t rows_bytes() {  // one bf16 [kRows, Ld::h] tile
  return static_cast<std::size_t>(kRows) * Ld<HS>::h * sizeof(bf16);
}
// The score and probability tiles' bytes (their leading dimensions do not depend on HS).
constexpr std::size_t kScoreBytes = static_cast<std::size_t>(kRows) * Ld<16>::s * sizeof(float);
constexpr std::size_t kProbBytes = static_cast<std::size_t>(kRows) * Ld<16>::p * sizeof(bf16);

// Forward: q, k, v tiles, scores, probabilities, the output accumulator.
template <int HS>
struct ForwardSmem {
  std::size_t q, k, v, s, p, o, bytes;
};
template <int HS>
__host__ __device__ constexpr ForwardSmem<HS> forward_smem() {
  Carve c;
  ForwardSmem<HS> f{};
  f.q = c.take(rows_bytes<HS>());
  f.k = c.take(rows_bytes<HS>());
  f.v = c.take(rows_bytes<HS>());
  f.s = c.take(kScoreBytes);
  f.p = c.take(kProbBytes);
  f.o = c.take(static_cast<std::size_t>(kRows) * Ld<HS>::o * sizeof(float));
  f.bytes = c.used;
  return f;
}

// Backward: the block's own two operands (a, b: q and dout for dq, k and v for dk/dv), the
// streamed pair (c, d), two fp32 score tiles (s, dp), the bf16 dS tile, and for dk/dv only
// (kDkv) the bf16 dropped-probability tile p and the streamed rows' lse and delta (dq keeps its
// own rows' in registers; its smaller layout fits two blocks an SM at HS = 128). The fp32 epilogue
// [kRows, Ld::o] reuses a and b, whose contents went into fragments before the loop.
struct BackwardSmem {
  std::size_t a, b, c, d, s, dp, p, ds, lse, delta, bytes;
};
template <int HS, bool kDkv>
__host__ __device__ constexpr BackwardSmem backward_smem() {
  Carve c;
  BackwardSmem f{};
  f.a = c.take(rows_bytes<HS>());
  f.b = c.take(rows_bytes<HS>());
  f.c = c.take(rows_bytes<HS>());
  f.d = c.take(rows_bytes<HS>());
  f.s = c.take(kScoreBytes);
  f.dp = c.take(kScoreBytes);
  f.ds = c.take(kProbBytes);
  f.p = c.take(kDkv ? kProbBytes : 0);
  f.lse = c.take(kDkv ? kTile * sizeof(float) : 0);
  f.delta = c.take(kDkv ? kTile * sizeof(float) : 0);
  f.bytes = c.used;
  static_assert(2 * rows_bytes<HS>() >= kRows * Ld<HS>::o * sizeof(float), "the epilogue fits regions a and b");
  return f;
}

// Rows t0 .. t0 + kRows - 1 of a [T, row_width] bf16 matrix at `base` (one head's columns: HS
// elements from base) into a [kRows, Ld::h] tile, zeros past T, in 16-byte chunks (the caller
// checked base and row_width for 16-byte alignment).
template <int HS>
__device__ __forceinline__ void load_rows(bf16* tile, const bf16* base, std::int64_t row_width, int T, int t0) {
  constexpr int kChunks = HS / 8;
  for (int e = threadIdx.x; e < kRows * kChunks; e += kThreads) {
    const int r = e / kChunks, c = e % kChunks, t = t0 + r;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (t < T) v = *reinterpret_cast<const uint4*>(base + t * row_width + c * 8);
    *reinterpret_cast<uint4*>(tile + r * Ld<HS>::h + c * 8) = v;
  }
}

// acc = A B^T for the warp's 16 rows of A (fragments, HS / 16 of them) and the 16 rows of the
// tile `rows` starting at row n0 (B^T read column-major out of the row-major tile).
template <int HS>
__device__ __forceinline__ void product_with_rows(FragAcc& acc, const FragA (&a)[HS / 16], const bf16* rows, int n0) {
  wmma::fill_fragment(acc, 0.0f);
#pragma unroll
  for (int kk = 0; kk < HS / 16; ++kk) {
    FragBCol bt;
    wmma::load_matrix_sync(bt, rows + n0 * Ld<HS>::h + kk * 16, Ld<HS>::h);
    wmma::mma_sync(acc, a[kk], bt, acc);
  }
}

// The warp's 16 rows of a bf16 [kRows, Ld::p] tile (P or dS) as the A fragments of one tile's
// products, loaded once for all HS / 16 output column blocks.
template <int HS>
__device__ __forceinline__ void load_p_fragments(FragA (&pa)[kTile / 16], const bf16* p_warp) {
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) wmma::load_matrix_sync(pa[kk], p_warp + kk * 16, Ld<HS>::p);
}

// acc += P (its fragments) times columns n0 .. n0 + 15 of the [kTile, HS] tile `rows`.
template <int HS>
__device__ __forceinline__ void accumulate_p_times_rows(FragAcc& acc, const FragA (&pa)[kTile / 16], const bf16* rows,
                                                        int n0) {
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) {
    FragBRow b;
    wmma::load_matrix_sync(b, rows + kk * 16 * Ld<HS>::h + n0, Ld<HS>::h);
    wmma::mma_sync(acc, pa[kk], b, acc);
  }
}

// The warp's 16 rows of a bf16 tile, as A fragments.
template <int HS>
__device__ __forceinline__ void load_row_fragments(FragA (&a)[HS / 16], const bf16* tile, int warp) {
#pragma unroll
  for (int kk = 0; kk < HS / 16; ++kk) wmma::load_matrix_sync(a[kk], tile + warp * 16 * Ld<HS>::h + kk * 16, Ld<HS>::h);
}

__device__ __forceinline__ bf16 round_bf16(float x) { return __ushort_as_bfloat16(f32_to_bf16(x)); }

// dst[d] = round(src[d] * factor) for d < HS / 2, as 16-byte stores of 8 bf16 (dst is a lane's
// half row of a global result: 16-byte aligned, as every row start and HS / 2 is a multiple of 8).
template <int HS>
__device__ __forceinline__ void store_half_row(bf16* dst, const float* src, float factor) {
  static_assert(HS / 2 % 8 == 0, "a half row is whole 16-byte chunks");
  for (int d = 0; d < HS / 2; d += 8) {
    unsigned w[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      w[e] = f32_to_bf16(src[d + 2 * e] * factor) |
             (static_cast<unsigned>(f32_to_bf16(src[d + 2 * e + 1] * factor)) << 16);
    }
    *reinterpret_cast<uint4*>(dst + d) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

template <int HS>
__global__ void __launch_bounds__(kThreads) tc_forward_kernel(bf16* out, float* lse, const bf16* qkv, FlashGeometry g,
                                                              MaskParams mask) {
  constexpr ForwardSmem<HS> L = forward_smem<HS>();
  unsigned char* smem = dynamic_shared_memory();
  bf16* qs = reinterpret_cast<bf16*>(smem + L.q);
  bf16* ks = reinterpret_cast<bf16*>(smem + L.k);
  bf16* vs = reinterpret_cast<bf16*>(smem + L.v);
  float* ss = reinterpret_cast<float*>(smem + L.s);
  bf16* ps = reinterpret_cast<bf16*>(smem + L.p);
  float* os = reinterpret_cast<float*>(smem + L.o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int bh = blockIdx.y, b = bh / g.NH, h = bh % g.NH;
  const int first = (gridDim.x - 1 - blockIdx.x) * kRows;  // the longest rows first
  const std::int64_t C3 = 3LL * g.C;
  const bf16* head = qkv + static_cast<std::int64_t>(b) * g.T * C3 + h * HS;  // q; k at + C, v at + 2C

  load_rows<HS>(qs, head, C3, g.T, first);
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
    load_rows<HS>(ks, head + g.C, C3, g.T, k0);
    load_rows<HS>(vs, head + 2 * g.C, C3, g.T, k0);
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
    const float rescale = expf(m - m_new);  // 0 on the first tile (m = -inf)
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
__global__ void __launch_bounds__(kThreads) tc_dq_kernel(bf16* dqkv, const bf16* qkv, const bf16* dout,
                                                         const float* lse, const float* delta, FlashGeometry g,
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
  const int bh = blockIdx.y, b = bh / g.NH, h = bh % g.NH;
  const int first = (gridDim.x - 1 - blockIdx.x) * kRows;
  const std::int64_t C3 = 3LL * g.C;
  const bf16* head = qkv + static_cast<std::int64_t>(b) * g.T * C3 + h * HS;
  const bf16* dout_head = dout + static_cast<std::int64_t>(b) * g.T * g.C + h * HS;

  load_rows<HS>(qs, head, C3, g.T, first);
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
    load_rows<HS>(ks, head + g.C, C3, g.T, k0);
    load_rows<HS>(vs, head + 2 * g.C, C3, g.T, k0);
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
    bf16* dq_row = dqkv + (static_cast<std::int64_t>(b) * g.T + i) * C3 + h * HS;
    store_half_row<HS>(dq_row + d0, os + row * Ld<HS>::o + d0, g.scale);
  }
}

// dk and dv for 64 key rows over the query rows that see them (i >= j):
// dv_j = sum_i mask_ij P_ij dO_i, dk_j = scale * sum_i dS_ij q_i.
template <int HS>
__global__ void __launch_bounds__(kThreads) tc_dkv_kernel(bf16* dqkv, const bf16* qkv, const bf16* dout,
                                                          const float* lse, const float* delta, FlashGeometry g,
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
  const int bh = blockIdx.y, b = bh / g.NH, h = bh % g.NH;
  const int first = blockIdx.x * kRows;  // the longest (earliest) key rows come first anyway
  const std::int64_t C3 = 3LL * g.C;
  const bf16* head = qkv + static_cast<std::int64_t>(b) * g.T * C3 + h * HS;
  const bf16* dout_head = dout + static_cast<std::int64_t>(b) * g.T * g.C + h * HS;

  load_rows<HS>(ks, head + g.C, C3, g.T, first);
  load_rows<HS>(vs, head + 2 * g.C, C3, g.T, first);
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
  for (int q0 = first; q0 < g.T; q0 += kTile) {  // query rows from the block's first key on
    __syncthreads();
    load_rows<HS>(qs, head, C3, g.T, q0);
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
  __syncthreads();  // the epilogue reuses regions a and b
  float* os = reinterpret_cast<float*>(smem + L.a);
  float* orow = os + row * Ld<HS>::o;
  bf16* kv_row = dqkv + (static_cast<std::int64_t>(b) * g.T + j) * C3 + h * HS;  // dk at + C, dv at + 2C
  // Fragments -> the warp's rows of the fp32 tile -> bf16 columns of part 1 (k) or 2 (v).
  auto write_part = [&](FragAcc(&acc)[HS / 16], int part, float factor) {
#pragma unroll
    for (int n = 0; n < HS / 16; ++n) {
      wmma::store_matrix_sync(os + warp * 16 * Ld<HS>::o + n * 16, acc[n], Ld<HS>::o, wmma::mem_row_major);
    }
    __syncwarp();
    if (j < g.T) {
      store_half_row<HS>(kv_row + part * g.C + d0, orow + d0, factor);
    }
    __syncwarp();  // the lanes are done reading before the next part overwrites the tile
  };
  write_part(dk, 1, g.scale);
  write_part(dv, 2, 1.0f);
}

}  // namespace zt::cuda::detail::tc_flash
