// Tests for kernels/cpu/swiglu: forward and backward against fp64 (and the backward against
// central differences), the gradient written in place over gate_up, bf16 rounding once, and bad
// shapes refused.
#include "kernels/cpu/swiglu.h"

#include <cmath>

#include "engine/base/core/bf16.h"
#include "kernel_test_util.h"

namespace zt::cpu {
namespace {

using test::close_normwise;
using test::cpu_ctx;
using test::view_of;

double silu(double g) { return g / (1.0 + std::exp(-g)); }

TEST(SwiGlu, ForwardAndBackwardMatchFp64) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t N = 9, H = 37;
  std::vector<float> gu = rng.normal(N * 2 * H, 0.0f, 3.0f), dout = rng.normal(N * H);
  std::vector<double> out_ref(N * H), dgu_ref(N * 2 * H);
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t h = 0; h < H; ++h) {
      const double g = gu[n * 2 * H + h], u = gu[n * 2 * H + H + h], d = dout[n * H + h];
      const double s = 1.0 / (1.0 + std::exp(-g));
      out_ref[n * H + h] = silu(g) * u;
      dgu_ref[n * 2 * H + h] = d * u * s * (1.0 + g * (1.0 - s));
      dgu_ref[n * 2 * H + H + h] = d * silu(g);
    }
  }
  std::vector<float> out(N * H), dgu(N * 2 * H);
  swiglu_forward(cpu_ctx(), view_of(out, {N, H}), view_of(gu, {N, 2 * H}));
  EXPECT_TRUE(close_normwise(out, out_ref, 1e-6));
  swiglu_backward(cpu_ctx(), view_of(dgu, {N, 2 * H}), view_of(gu, {N, 2 * H}), view_of(dout, {N, H}));
  EXPECT_TRUE(close_normwise(dgu, dgu_ref, 1e-6));
  // In place over gate_up: the same bits.
  std::vector<float> inplace = gu;
  swiglu_backward(cpu_ctx(), view_of(inplace, {N, 2 * H}), view_of(inplace, {N, 2 * H}), view_of(dout, {N, H}));
  EXPECT_TRUE(test::bitwise_equal(inplace, dgu));
  // Central differences of L = sum(dout * out) in fp64.
  const double h = 1e-4;
  for (std::int64_t i = 0; i < 2 * H; ++i) {
    auto loss = [&](double delta) {
      double l = 0.0;
      for (std::int64_t c = 0; c < H; ++c) {
        double g = gu[c], u = gu[H + c];
        if (i == c) g += delta;
        if (i == H + c) u += delta;
        l += dout[c] * silu(g) * u;
      }
      return l;
    };
    EXPECT_NEAR(dgu_ref[i], (loss(h) - loss(-h)) / (2 * h), 1e-6) << i;
  }
}

TEST(SwiGlu, Bf16RoundsEachResultOnceAndBadShapesAreRefused) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t N = 4, H = 24;
  std::vector<float> gu = rng.normal(N * 2 * H);
  for (float& v : gu) v = bf16_to_float(float_to_bf16(v));
  std::vector<float> out(N * H);
  swiglu_forward(cpu_ctx(), view_of(out, {N, H}), view_of(gu, {N, 2 * H}));
  std::vector<bf16> gu16(gu.size()), out16(out.size());
  for (std::size_t i = 0; i < gu.size(); ++i) gu16[i] = float_to_bf16(gu[i]);
  swiglu_forward(cpu_ctx(), TensorView{out16.data(), DType::kBF16, Device::kCPU, Shape{N, H}},
                 TensorView{gu16.data(), DType::kBF16, Device::kCPU, Shape{N, 2 * H}});
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out16[i].bits, float_to_bf16(out[i]).bits) << i;
  std::vector<float> odd(N * 7), small(N * 3);
  EXPECT_THROW(swiglu_forward(cpu_ctx(), view_of(small, {N, 3}), view_of(odd, {N, 7})), std::exception);
  EXPECT_THROW(swiglu_forward(cpu_ctx(), view_of(small, {N, 3}), view_of(gu, {N, 2 * H})), std::exception);
}

}  // namespace
}  // namespace zt::cpu
