// Vectorisable fp32 helpers shared by the CPU kernels (internal, not part of the kernel API).
// libm's expf is never vectorised without -ffast-math, so softmax and GELU use exp_approx below;
// sums use a fixed lane layout so results are bitwise reproducible whatever the pointer alignment.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace zt::cpu::vec {

// e^x in fp32, within ~1 ulp of the true value (Cephes expf polynomial on a range-reduced
// argument). Returns 0 below ln(FLT_MIN) (no denormal results), +inf above 127.5*ln2 ~= 88.376,
// NaN for NaN. The out-of-range cases are selected with integer masks, not float compares:
// under -ftrapping-math GCC will not if-convert float compares, and the loop would stay scalar.
inline float exp_approx(float x) {
  constexpr float kLo = -87.33654475f;  // ln(FLT_MIN): below this the result would be denormal
  constexpr float kHi = 88.37626266f;   // 127.5 * ln 2: keeps 2^n a normal float
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // ln 2 split in two so n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  constexpr std::uint32_t kRoundMagicBits = 0x4B400000u;
  constexpr std::int32_t kInfBits = 0x7f800000;
  // Masks are all ones or zero. IEEE bit patterns order like sign-magnitude integers.
  const std::int32_t ix = std::bit_cast<std::int32_t>(x);
  const std::int32_t ax = ix & 0x7fffffff;
  const std::int32_t not_nan = -static_cast<std::int32_t>(ax <= kInfBits);
  const std::int32_t under = -static_cast<std::int32_t>(ix < 0) &
                             -static_cast<std::int32_t>(ax > (std::bit_cast<std::int32_t>(kLo) & 0x7fffffff)) & not_nan;
  const std::int32_t over = -static_cast<std::int32_t>(ix > std::bit_cast<std::int32_t>(kHi)) & not_nan;
  const float xc = std::bit_cast<float>(ix & ~(under | over));  // out-of-range inputs become 0
  const float t = xc * kLog2e + kRoundMagic;
  const float n = t - kRoundMagic;                                                 // round(x / ln 2) in [-126, 127]
  const std::uint32_t n_bits = std::bit_cast<std::uint32_t>(t) - kRoundMagicBits;  // the same n, as int32
  float r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;  // |r| <= ln2 / 2
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * (r * r) + r + 1.0f;  // e^r
  const float y = er * std::bit_cast<float>((n_bits + 127u) << 23);
  const std::int32_t iy = std::bit_cast<std::int32_t>(y);
  return std::bit_cast<float>((iy & ~(under | over)) | (over & kInfBits));
}

// Number of independent accumulators the reductions use: two AVX2 registers' worth.
constexpr int kLanes = 16;

// Adds the lanes in a fixed pairwise order (part of what makes the sums reproducible).
inline float combine_lanes(const float (&acc)[kLanes]) {
  float a[kLanes / 2];
  for (int j = 0; j < kLanes / 2; ++j) a[j] = acc[j] + acc[j + kLanes / 2];
  float b[kLanes / 4];
  for (int j = 0; j < kLanes / 4; ++j) b[j] = a[j] + a[j + kLanes / 4];
  return (b[0] + b[2]) + (b[1] + b[3]);
}

// sum(x[0..n)): element i goes to lane i % kLanes, so the order depends on n only.
inline float sum(const float* x, std::int64_t n) {
  float acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += x[i + j];
  }
  for (int j = 0; i + j < n; ++j) acc[j] += x[i + j];
  return combine_lanes(acc);
}

// sum(a[i] * b[i]) with the same fixed lane order as sum().
inline float dot(const float* a, const float* b, std::int64_t n) {
  float acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += a[i + j] * b[i + j];
  }
  for (int j = 0; i + j < n; ++j) acc[j] += a[i + j] * b[i + j];
  return combine_lanes(acc);
}

// max(x[0..n)), n >= 1. NaN handling follows (x > m ? x : m); callers needing NaN propagation get
// it from the exp/sum that follows.
inline float max(const float* x, std::int64_t n) {
  float acc[kLanes];
  for (int j = 0; j < kLanes; ++j) acc[j] = -std::numeric_limits<float>::infinity();
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  }
  for (int j = 0; i + j < n; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  float m = acc[0];
  for (int j = 1; j < kLanes; ++j) m = acc[j] > m ? acc[j] : m;
  return m;
}

// sum(x[0..n)) in fp64, element i in lane i % 8, lanes combined in a fixed order: the softmax
// sums of the cross-entropy kernels (whole rows and vocabulary chunks), accurate and repeatable.
inline double sum_f64(const float* x, std::int64_t n) {
  constexpr int kF64Lanes = 8;
  double acc[kF64Lanes] = {};
  std::int64_t i = 0;
  for (; i + kF64Lanes <= n; i += kF64Lanes) {
    for (int j = 0; j < kF64Lanes; ++j) acc[j] += static_cast<double>(x[i + j]);
  }
  for (int j = 0; i + j < n; ++j) acc[j] += static_cast<double>(x[i + j]);
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

// sigmoid(z) and 1 - sigmoid(z), both formed from e = exp(-|z|) <= 1, so neither overflows nor
// loses 1 - s to cancellation (GELU's tanh and SwiGLU's SiLU). The sign select is an integer op, so
// loops calling it still vectorise (see exp_approx).
struct SigmoidPair {
  float s, one_minus_s;
};
inline SigmoidPair sigmoid_pair(float z) {
  const float e = exp_approx(-std::fabs(z));
  const float big = 1.0f / (1.0f + e);
  const float small = e * big;
  const std::int32_t neg = std::bit_cast<std::int32_t>(z) >> 31;  // all ones when z < 0
  const std::int32_t s_bits = (std::bit_cast<std::int32_t>(small) & neg) | (std::bit_cast<std::int32_t>(big) & ~neg);
  const std::int32_t c_bits = (std::bit_cast<std::int32_t>(big) & neg) | (std::bit_cast<std::int32_t>(small) & ~neg);
  return {std::bit_cast<float>(s_bits), std::bit_cast<float>(c_bits)};
}

}  // namespace zt::cpu::vec
