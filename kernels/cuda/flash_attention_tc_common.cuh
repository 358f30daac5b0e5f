// The shared pieces of the tensor-core flash attention kernels (flash_attention_tc_kernels.cuh):
// the block geometry, the shared-memory layouts and carves, and the WMMA fragment and row helpers
// the forward, dq and dk/dv kernels are built from. The design notes below hold for all three.
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
// Internal to the tensor-core flash kernels and their SIMT emulation test: device code only.
#pragma once

#include <cstddef>
#include <cstdint>

#include <mma.h>

#include "kernels/cuda/device_helpers.cuh"  // f32_to_bf16
#include "kernels/cuda/dropout_mask.cuh"
#include "kernels/cuda/dynamic_smem.cuh"
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

}  // namespace zt::cuda::detail::tc_flash
