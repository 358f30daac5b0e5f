// Dropout on the CPU: the mask of [Note: dropout masks] regenerated from Philox wherever it is
// needed (forward, backward, fused attention dropout), never stored. Philox blocks are generated
// kBatch at a time in structure-of-arrays form so the ten rounds run as vector multiplies.
#include "kernels/cpu/dropout.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "engine/base/core/philox.h"
#include "kernels/cpu/bf16_staging.h"
#include "kernels/cpu/dropout_mask.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace zt::cpu {

namespace dropout_detail {

namespace {

// Philox blocks per batch: 16 x 4 = 64 mask elements per call of philox_batch.
constexpr std::int64_t kBatch = 16;
static_assert(kBatch <= dropout_rules::kMaxBlocksPastEnd, "check_spec admits kMaxBlocksPastEnd blocks past a sample");

// r[4 * i + lane] = philox4x32({blk0 + i, site, g_lo, g_hi}, key)[lane] for i < kBatch: the
// random bits of elements 4 * blk0 .. 4 * (blk0 + kBatch) - 1, in element order. The same rounds
// as zt::philox4x32 (engine/base/core/philox.h). Each counter word is held in the low halves of 64-bit
// lanes, so one vpmuludq forms four 32 x 32 -> 64-bit products (GCC 12 does not vectorise the
// scalar widening multiply by itself; measured 4x faster than the scalar rounds).
void philox_batch(std::uint32_t (&r)[4 * kBatch], std::uint32_t blk0, std::uint32_t site, std::uint64_t sample,
                  std::uint64_t seed) {
#if defined(__AVX2__)
  constexpr int kVecs = kBatch / 4;  // four blocks per __m256i
  const __m256i m0 = _mm256_set1_epi64x(0xD2511F53u), m1 = _mm256_set1_epi64x(0xCD9E8D57u);
  const __m256i low32 = _mm256_set1_epi64x(0xFFFFFFFFu);
  __m256i c0[kVecs], c1[kVecs], c2[kVecs], c3[kVecs];
  for (int v = 0; v < kVecs; ++v) {
    // No wrap of blk0 + i: check_spec leaves a batch of headroom below 2^32.
    const auto b = static_cast<long long>(blk0) + 4 * v;
    c0[v] = _mm256_setr_epi64x(b, b + 1, b + 2, b + 3);
    c1[v] = _mm256_set1_epi64x(site);
    c2[v] = _mm256_set1_epi64x(static_cast<std::uint32_t>(sample));
    c3[v] = _mm256_set1_epi64x(static_cast<std::uint32_t>(sample >> 32));
  }
  std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const __m256i key0 = _mm256_set1_epi64x(k0), key1 = _mm256_set1_epi64x(k1);
    for (int v = 0; v < kVecs; ++v) {
      const __m256i p0 = _mm256_mul_epu32(c0[v], m0);
      const __m256i p1 = _mm256_mul_epu32(c2[v], m1);
      c0[v] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), c1[v]), key0);
      c2[v] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), c3[v]), key1);
      c1[v] = _mm256_and_si256(p1, low32);
      c3[v] = _mm256_and_si256(p0, low32);
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // Block i's words (c0, c1, c2, c3)[i] go to r[4 i .. 4 i + 3]: pair them into 64-bit lanes,
  // interleave the pairs, then put the 128-bit halves in block order.
  for (int v = 0; v < kVecs; ++v) {
    const __m256i x = _mm256_or_si256(c0[v], _mm256_slli_epi64(c1[v], 32));  // [c0 c1] of blocks 0..3
    const __m256i y = _mm256_or_si256(c2[v], _mm256_slli_epi64(c3[v], 32));  // [c2 c3] of blocks 0..3
    const __m256i lo = _mm256_unpacklo_epi64(x, y);                          // blocks 0, 2
    const __m256i hi = _mm256_unpackhi_epi64(x, y);                          // blocks 1, 3
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(r + 16 * v), _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(r + 16 * v + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
  }
#else
  const std::array<std::uint32_t, 2> key{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
  for (std::int64_t i = 0; i < kBatch; ++i) {
    const auto block = philox4x32({blk0 + static_cast<std::uint32_t>(i), site, static_cast<std::uint32_t>(sample),
                                   static_cast<std::uint32_t>(sample >> 32)},
                                  key);
    for (int lane = 0; lane < 4; ++lane) r[4 * i + lane] = block[lane];
  }
#endif
}

}  // namespace

void mask_scale_row(const DropoutSpec& spec, std::int64_t sample, std::int64_t j0, std::int64_t n, float* scale) {
  const std::uint32_t threshold = dropout_rules::keep_threshold(spec.p);
  const float s = dropout_rules::keep_scale(spec.p);
  std::uint32_t r[4 * kBatch];
  // Batches start at the block holding j0; elements before j0 in the first one are skipped.
  for (std::int64_t blk = j0 / 4, j = j0, end = j0 + n; j < end; blk += kBatch) {
    philox_batch(r, static_cast<std::uint32_t>(blk), spec.site, static_cast<std::uint64_t>(sample), spec.seed);
    const std::int64_t count = std::min(end, (blk + kBatch) * 4) - j;
    const std::uint32_t* rj = r + (j - blk * 4);  // element j's random bits onwards
    float* out = scale + (j - j0);
    for (std::int64_t i = 0; i < count; ++i) out[i] = rj[i] >= threshold ? s : 0.0f;
    j += count;
  }
}

}  // namespace dropout_detail

namespace {

// Elements per parallel task (a multiple of 4, so no Philox block is split between tasks).
constexpr std::int64_t kTaskElems = 4096;

// out = in * mask / (1 - p) over [B, ...]: forward and backward are the same operation.
void apply_mask(const ExecContext& ctx, TensorView out, TensorView in, const DropoutSpec& spec, const char* what) {
  const dropout_rules::MaskRows rows = dropout_rules::check_operands(out, in, spec, what);
  if (in.dtype == DType::kBF16) {  // samples staged in fp32, each keeping its global sample index
    using detail::Access;
    detail::stage_rows(ctx,
                       {{detail::as_rows(out, rows.per_sample), Access::kWrite},
                        {detail::as_rows(in, rows.per_sample), Access::kRead}},
                       [&](std::int64_t first, std::int64_t, std::span<const TensorView> v) {
                         DropoutSpec chunk = spec;
                         chunk.first_sample += first;
                         apply_mask(ctx, v[0], v[1], chunk, what);
                       });
    return;
  }
  const std::int64_t B = rows.samples, N = rows.per_sample;  // N: elements per sample
  float* o = out.as<float>();
  const float* x = in.as<float>();
  if (!spec.active()) {  // exactly the identity, no random numbers drawn
    if (o != x) std::memcpy(o, x, in.size_bytes());
    return;
  }
  const std::int64_t tasks_per_sample = (N + kTaskElems - 1) / kTaskElems;
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t task = 0; task < B * tasks_per_sample; ++task) {
    const std::int64_t b = task / tasks_per_sample;
    const std::int64_t j0 = task % tasks_per_sample * kTaskElems;
    const std::int64_t n = std::min(kTaskElems, N - j0);
    float scale[kTaskElems];
    dropout_detail::mask_scale_row(spec, spec.first_sample + b, j0, n, scale);
    const float* xs = x + b * N + j0;
    float* os = o + b * N + j0;
    // out may alias in; every element is read before it is written. The mask is multiplied in, so
    // a dropped inf or NaN gives NaN, as PyTorch's dropout does.
#pragma GCC ivdep
    for (std::int64_t i = 0; i < n; ++i) os[i] = xs[i] * scale[i];
  }
}

}  // namespace

void dropout_forward(const ExecContext& ctx, TensorView out, TensorView in, const DropoutSpec& spec) {
  apply_mask(ctx, out, in, spec, "dropout_forward");
}

void dropout_backward(const ExecContext& ctx, TensorView dinp, TensorView dout, const DropoutSpec& spec) {
  apply_mask(ctx, dinp, dout, spec, "dropout_backward");
}

}  // namespace zt::cpu
