// Tests for kernels/cpu/rope: the rotation against fp64 cos/sin of the contract's fp32 angles
// (kernels/contracts/rope_angles.h), the backward as the forward's transpose (<rope(x), y> =
// <x, rope_backward(y)>) and inverse, columns past the rotated heads untouched, bf16 rounding each
// result once, and bad operands refused.
#include "kernels/cpu/rope.h"

#include <cmath>

#include "engine/base/core/bf16.h"
#include "kernel_test_util.h"
#include "kernels/contracts/rope_angles.h"

namespace zt::cpu {
namespace {

using test::close_normwise;
using test::cpu_ctx;
using test::view_of;

constexpr float kTheta = 10000.0f;

TEST(Rope, RotatesPairsByTheContractsAngles) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t B = 2, T = 11;
  const int hs = 8, heads = 3, W = 5 * hs;  // q and k heads rotated (3), then two untouched (v)
  std::vector<float> x = rng.normal(B * T * W), y = x;
  rope_forward(cpu_ctx(), view_of(y, {B, T, W}), heads, hs, kTheta);
  std::vector<double> want(x.begin(), x.end());
  for (std::int64_t r = 0; r < B * T; ++r) {
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < hs / 2; ++i) {
        const double a = rope_angle(static_cast<int>(r % T), i, hs, kTheta);
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

TEST(Rope, BackwardIsTheTransposeAndTheInverse) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t B = 3, T = 16;
  const int hs = 16, heads = 2, W = 3 * hs;
  std::vector<float> x = rng.normal(B * T * W), y = rng.normal(B * T * W);
  std::vector<float> rx = x, ry = y;
  rope_forward(cpu_ctx(), view_of(rx, {B, T, W}), heads, hs, 500.0f);
  rope_backward(cpu_ctx(), view_of(ry, {B, T, W}), heads, hs, 500.0f);
  double lhs = 0.0, rhs = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    lhs += static_cast<double>(rx[i]) * y[i];
    rhs += static_cast<double>(x[i]) * ry[i];
  }
  EXPECT_NEAR(lhs, rhs, 1e-5 * std::abs(lhs) + 1e-5);
  rope_backward(cpu_ctx(), view_of(rx, {B, T, W}), heads, hs, 500.0f);  // back to x
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
  rope_forward(cpu_ctx(), view_of(x, {B, T, W}), heads, hs, kTheta);
  rope_forward(cpu_ctx(), TensorView{x16.data(), DType::kBF16, Device::kCPU, Shape{B, T, W}}, heads, hs, kTheta);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x16[i].bits, float_to_bf16(x[i]).bits) << i;
  EXPECT_THROW(rope_forward(cpu_ctx(), view_of(x, {B, T, W}), heads, 3, kTheta), std::exception);    // odd
  EXPECT_THROW(rope_forward(cpu_ctx(), view_of(x, {B, T, W}), 4, hs, kTheta), std::exception);       // 16 > 12
  EXPECT_THROW(rope_forward(cpu_ctx(), view_of(x, {B * T, W}), heads, hs, kTheta), std::exception);  // not 3-D
}

}  // namespace
}  // namespace zt::cpu
