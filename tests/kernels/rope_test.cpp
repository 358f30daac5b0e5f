// Tests for kernels/cpu/rope: the rotation against fp64 cos/sin of the contract's fp32 angles
// (kernels/contracts/rope_angles.h), unscaled and with each rope_scaling; the scalings' frequencies
// against an fp64 statement of Hugging Face's rules; the backward as the forward's transpose
// (<rope(x), y> = <x, rope_backward(y)>) and inverse, columns past the rotated heads untouched,
// bf16 rounding each result once, and bad operands refused.
#include "kernels/cpu/rope.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numbers>

#include "engine/base/core/bf16.h"
#include "kernel_test_util.h"
#include "kernels/contracts/rope_angles.h"

namespace zt::cpu {
namespace {

using test::close_normwise;
using test::cpu_ctx;
using test::view_of;

constexpr float kTheta = 10000.0f;
const RopeFrequencies kBase{kTheta};
// Llama 3.2 1B's: base 500000, llama3 scaling x32 from 8192 positions.
const RopeFrequencies kLlama32{500000.0f, {RopeScalingType::kLlama3, 32.0f, 1.0f, 4.0f, 8192.0f}};

class RopeAngles : public ::testing::TestWithParam<RopeFrequencies> {};

TEST_P(RopeAngles, RotatePairsByTheContractsAngles) {
  ZT_SEEDED_RNG(rng);
  const RopeFrequencies freq = GetParam();
  const std::int64_t B = 2, T = 11;
  const int hs = 8, heads = 3, W = 5 * hs;  // q and k heads rotated (3), then two untouched (v)
  std::vector<float> x = rng.normal(B * T * W), y = x;
  rope_forward(cpu_ctx(), view_of(y, {B, T, W}), heads, hs, freq);
  std::vector<double> want(x.begin(), x.end());
  for (std::int64_t r = 0; r < B * T; ++r) {
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < hs / 2; ++i) {
        const double a = rope_angle(static_cast<int>(r % T), i, hs, freq);
        const std::int64_t j1 = r * W + h * hs + i, j2 = j1 + hs / 2;
        want[j1] = x[j1] * std::cos(a) - x[j2] * std::sin(a);
        want[j2] = x[j2] * std::cos(a) + x[j1] * std::sin(a);
      }
    }
  }
  EXPECT_TRUE(close_normwise(y, want, 1e-6));
  for (std::int64_t r = 0; r < B * T; ++r) {  // the v heads: bit for bit as they were
    for (int c = heads * hs; c < W; ++c) ASSERT_EQ(y[r * W + c], x[r * W + c]);
  }
  // Position 0 does not turn.
  for (int c = 0; c < heads * hs; ++c) EXPECT_EQ(y[c], x[c]);
}

// head_size 8 at base 10000: wavelengths 6.3, 63, 628 and 6283 positions; llama3 from 64 original
// positions with factors 1 and 4 keeps the first, blends the second and scales the last two.
INSTANTIATE_TEST_SUITE_P(Scalings, RopeAngles,
                         ::testing::Values(kBase, RopeFrequencies{kTheta, {RopeScalingType::kLinear, 4.0f}},
                                           RopeFrequencies{kTheta, {RopeScalingType::kLlama3, 8.0f, 1.0f, 4.0f, 64.0f}},
                                           kLlama32));

// Hugging Face's rules in fp64, independent of the contract's fp32 statement: linear divides
// every frequency by the factor; llama3 keeps wavelengths 2 pi / f under original / high_freq_factor,
// divides those over original / low_freq_factor by the factor, and between blends the two with
// weight s = (original / wavelength - low) / (high - low) on the unscaled one.
TEST(Rope, ScaledFrequenciesFollowHuggingFacesRules) {
  const int hs = 64;
  int bands[3] = {0, 0, 0};  // kept, blended, divided
  for (int i = 0; i < hs / 2; ++i) {
    const double inv = rope_inv_freq(i, hs, RopeFrequencies{500000.0f});
    EXPECT_NEAR(inv, std::pow(500000.0, -2.0 * i / hs), 1e-6 * inv) << i;
    EXPECT_EQ(rope_inv_freq(i, hs, RopeFrequencies{500000.0f, {RopeScalingType::kLinear, 8.0f}}),
              static_cast<float>(inv / 8.0))
        << i;  // a power of two: exact
    const double wavelen = 2.0 * std::numbers::pi / inv, got = rope_inv_freq(i, hs, kLlama32);
    ASSERT_GT(std::abs(wavelen / 2048.0 - 1.0), 1e-3) << "the test's shape sits on a band's edge";
    ASSERT_GT(std::abs(wavelen / 8192.0 - 1.0), 1e-3) << "the test's shape sits on a band's edge";
    if (wavelen < 2048.0) {
      ++bands[0];
      EXPECT_EQ(got, static_cast<float>(inv)) << i;
    } else if (wavelen > 8192.0) {
      ++bands[2];
      EXPECT_EQ(got, static_cast<float>(inv / 32.0)) << i;
    } else {
      ++bands[1];
      const double s = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      const double want = (1.0 - s) * inv / 32.0 + s * inv;
      EXPECT_NEAR(got, want, 1e-6 * want) << i;
      EXPECT_GT(got, inv / 32.0) << i;
      EXPECT_LT(got, inv) << i;
    }
  }
  EXPECT_EQ(bands[0], 15);  // i = 0..14
  EXPECT_EQ(bands[1], 3);   // 15..17
  EXPECT_EQ(bands[2], 14);  // 18..31
}

// Bit for bit what transformers computes for Llama 3.2 1B (head size 64, base 500000, llama3 x32
// from 8192): the bits of _compute_llama3_parameters' inverse frequencies in torch's fp32 (as
// tests/parity/llama_reference.py's scaled_inv_freq states it), taken on 2026-12-02. This test's
// file is compiled with contraction, as kernels/cpu/rope.cpp is: before the blend's products were
// rounded on their own, GCC fused one into an FMA, and frequency 16 came out one ulp off.
TEST(Rope, Llama3FrequenciesAreTransformersBitForBit) {
  constexpr std::uint32_t kTransformers[32] = {
      0x3f800000u, 0x3f29e1c6u, 0x3ee177bcu, 0x3e959ee3u, 0x3e4693b0u, 0x3e03c6a0u, 0x3daee4adu, 0x3d681e67u,
      0x3d1a08c8u, 0x3ccc6f49u, 0x3c87a9c3u, 0x3c340d6du, 0x3beef74fu, 0x3b9e9402u, 0x3b527720u, 0x3aa9279bu,
      0x39e13620u, 0x38cb98f7u, 0x37a3418du, 0x3758ac81u, 0x370fc8f8u, 0x36bed4f4u, 0x367d45c3u, 0x3628126bu,
      0x35df10c4u, 0x359406cbu, 0x35447610u, 0x35025f34u, 0x34ad07a7u, 0x3465a54du, 0x341864a7u, 0x33ca41b0u,
  };
  // Opaque values, so nothing is folded at compile time (folded, even the unrounded form matched).
  volatile float theta = 500000.0f, factor = 32.0f, low = 1.0f, high = 4.0f, original = 8192.0f;
  const RopeFrequencies freq{theta, {RopeScalingType::kLlama3, factor, low, high, original}};
  for (int i = 0; i < 32; ++i) {
    const float got = rope_inv_freq(i, 64, freq);
    std::uint32_t bits = 0;
    std::memcpy(&bits, &got, sizeof bits);
    EXPECT_EQ(bits, kTransformers[i]) << "frequency " << i << ": " << got;
  }
}

TEST(Rope, BackwardIsTheTransposeAndTheInverse) {
  ZT_SEEDED_RNG(rng);
  const RopeFrequencies kScaled500{500.0f, {RopeScalingType::kLlama3, 4.0f, 1.0f, 2.0f, 32.0f}};
  const std::int64_t B = 3, T = 16;
  const int hs = 16, heads = 2, W = 3 * hs;
  std::vector<float> x = rng.normal(B * T * W), y = rng.normal(B * T * W);
  std::vector<float> rx = x, ry = y;
  rope_forward(cpu_ctx(), view_of(rx, {B, T, W}), heads, hs, kScaled500);
  rope_backward(cpu_ctx(), view_of(ry, {B, T, W}), heads, hs, kScaled500);
  double lhs = 0.0, rhs = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    lhs += static_cast<double>(rx[i]) * y[i];
    rhs += static_cast<double>(x[i]) * ry[i];
  }
  EXPECT_NEAR(lhs, rhs, 1e-5 * std::abs(lhs) + 1e-5);
  rope_backward(cpu_ctx(), view_of(rx, {B, T, W}), heads, hs, kScaled500);  // back to x
  EXPECT_TRUE(close_normwise(rx, test::to_double(x), 1e-6));
}

TEST(Rope, Bf16RoundsEachResultOnceAndBadOperandsAreRefused) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t B = 2, T = 5;
  const int hs = 4, heads = 2, W = 12;
  std::vector<float> x = rng.normal(B * T * W);
  for (float& v : x) v = bf16_to_float(float_to_bf16(v));
  std::vector<bf16> x16(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x16[i] = float_to_bf16(x[i]);
  rope_forward(cpu_ctx(), view_of(x, {B, T, W}), heads, hs, kBase);
  rope_forward(cpu_ctx(), TensorView{x16.data(), DType::kBF16, Device::kCPU, Shape{B, T, W}}, heads, hs, kBase);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x16[i].bits, float_to_bf16(x[i]).bits) << i;
  EXPECT_THROW(rope_forward(cpu_ctx(), view_of(x, {B, T, W}), heads, 3, kBase), std::exception);    // odd
  EXPECT_THROW(rope_forward(cpu_ctx(), view_of(x, {B, T, W}), 4, hs, kBase), std::exception);       // 16 > 12
  EXPECT_THROW(rope_forward(cpu_ctx(), view_of(x, {B * T, W}), heads, hs, kBase), std::exception);  // not 3-D
}

}  // namespace
}  // namespace zt::cpu
