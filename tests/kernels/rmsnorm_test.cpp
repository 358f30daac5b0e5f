// Tests for kernels/cpu/rmsnorm (Llama's RMSNorm): forward and rstd against fp64, the backward's
// dinp (accumulated onto what was there) and dweight against fp64 derivatives and finite
// differences, the weight gradient bitwise independent of the thread count, bf16 activations
// within a bf16 rounding of the fp32 kernel, in-place forward, and bad operands refused.
#include "kernels/cpu/rmsnorm.h"

#include <cmath>

#include "engine/base/core/bf16.h"
#include "kernel_test_util.h"

namespace zt::cpu {
namespace {

using test::close_normwise;
using test::cpu_ctx;
using test::view_of;

constexpr float kEps = 1e-5f;

struct Ref {
  std::vector<double> out, rstd, dinp, dweight;
};

// fp64 forward and backward of L = sum(dout * out).
Ref reference(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& dout, std::int64_t N,
              std::int64_t C) {
  Ref r{std::vector<double>(N * C), std::vector<double>(N), std::vector<double>(N * C), std::vector<double>(C, 0.0)};
  for (std::int64_t n = 0; n < N; ++n) {
    double sq = 0.0;
    for (std::int64_t c = 0; c < C; ++c) sq += static_cast<double>(x[n * C + c]) * x[n * C + c];
    const double s = 1.0 / std::sqrt(sq / static_cast<double>(C) + kEps);
    r.rstd[n] = s;
    double dn_norm = 0.0;
    for (std::int64_t c = 0; c < C; ++c) {
      const double norm = x[n * C + c] * s, dn = static_cast<double>(dout[n * C + c]) * w[c];
      r.out[n * C + c] = norm * w[c];
      r.dweight[c] += static_cast<double>(dout[n * C + c]) * norm;
      dn_norm += dn * norm;
    }
    for (std::int64_t c = 0; c < C; ++c) {
      const double norm = x[n * C + c] * s, dn = static_cast<double>(dout[n * C + c]) * w[c];
      r.dinp[n * C + c] = s * (dn - norm * dn_norm / static_cast<double>(C));
    }
  }
  return r;
}

TEST(RmsNorm, ForwardAndBackwardMatchFp64) {
  ZT_SEEDED_RNG(rng);
  for (auto [N, C] : {std::pair<std::int64_t, std::int64_t>{3, 7}, {70, 64}, {5, 300}}) {
    SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C);
    const std::vector<float> x = rng.normal(N * C, 0.5f, 2.0f), w = rng.normal(C, 1.0f, 0.3f), dout = rng.normal(N * C);
    const Ref ref = reference(x, w, dout, N, C);
    std::vector<float> out(N * C), rstd(N), xin = x, wv = w, g = dout;
    rmsnorm_forward(cpu_ctx(), view_of(out, {N, C}), view_of(rstd), view_of(xin, {N, C}), view_of(wv), kEps);
    EXPECT_TRUE(close_normwise(out, ref.out, 1e-6));
    EXPECT_TRUE(close_normwise(rstd, ref.rstd, 1e-6));
    // The backward accumulates: start from a prior dinp and dweight.
    std::vector<float> dinp = rng.normal(N * C), dw = rng.normal(C);
    std::vector<double> want_dinp = ref.dinp, want_dw = ref.dweight;
    for (std::size_t i = 0; i < dinp.size(); ++i) want_dinp[i] += dinp[i];
    for (std::size_t i = 0; i < dw.size(); ++i) want_dw[i] += dw[i];
    rmsnorm_backward(cpu_ctx(), view_of(dinp, {N, C}), view_of(dw), view_of(g, {N, C}), view_of(xin, {N, C}),
                     view_of(wv), view_of(rstd));
    EXPECT_TRUE(close_normwise(dinp, want_dinp, 1e-5));
    EXPECT_TRUE(close_normwise(dw, want_dw, 1e-5));
  }
}

// The analytic gradient against central differences of L = sum(dout * rmsnorm(x)) in fp64.
TEST(RmsNorm, BackwardMatchesFiniteDifferences) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t N = 2, C = 9;
  const std::vector<float> x = rng.normal(N * C), w = rng.normal(C, 1.0f, 0.3f), dout = rng.normal(N * C);
  auto loss = [&](std::vector<float> xs, std::vector<float> ws) {
    const Ref r = reference(xs, ws, dout, N, C);
    double l = 0.0;
    for (std::int64_t i = 0; i < N * C; ++i) l += r.out[i] * dout[i];
    return l;
  };
  const Ref ref = reference(x, w, dout, N, C);
  const float h = 1e-3f;
  for (std::int64_t i = 0; i < N * C; ++i) {
    std::vector<float> xp = x, xm = x;
    xp[i] += h, xm[i] -= h;
    EXPECT_NEAR(ref.dinp[i], (loss(xp, w) - loss(xm, w)) / (2.0 * h), 2e-3) << i;
  }
  for (std::int64_t c = 0; c < C; ++c) {
    std::vector<float> wp = w, wm = w;
    wp[c] += h, wm[c] -= h;
    EXPECT_NEAR(ref.dweight[c], (loss(x, wp) - loss(x, wm)) / (2.0 * h), 2e-3) << c;
  }
}

TEST(RmsNorm, WeightGradientIsBitwiseIndependentOfThreadCount) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t N = 200, C = 48;
  std::vector<float> x = rng.normal(N * C), w = rng.normal(C), g = rng.normal(N * C), out(N * C), rstd(N);
  rmsnorm_forward(cpu_ctx(), view_of(out, {N, C}), view_of(rstd), view_of(x, {N, C}), view_of(w), kEps);
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    std::vector<float> dinp(N * C, 0.0f), dw(C, 0.0f);
    rmsnorm_backward(cpu_ctx(threads), view_of(dinp, {N, C}), view_of(dw), view_of(g, {N, C}), view_of(x, {N, C}),
                     view_of(w), view_of(rstd));
    if (first.empty()) first = dw;
    EXPECT_TRUE(test::bitwise_equal(dw, first)) << threads << " threads";
  }
}

TEST(RmsNorm, Bf16ActivationsRoundEachResultOnce) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t N = 6, C = 40;
  std::vector<float> x = rng.normal(N * C), w = rng.normal(C);
  for (float& v : x) v = bf16_to_float(float_to_bf16(v));  // the same inputs on both sides
  std::vector<float> out(N * C), rstd(N), rstd16(N);
  rmsnorm_forward(cpu_ctx(), view_of(out, {N, C}), view_of(rstd), view_of(x, {N, C}), view_of(w), kEps);
  std::vector<bf16> x16(N * C), out16(N * C);
  for (std::size_t i = 0; i < x.size(); ++i) x16[i] = float_to_bf16(x[i]);
  rmsnorm_forward(cpu_ctx(), TensorView{out16.data(), DType::kBF16, Device::kCPU, Shape{N, C}}, view_of(rstd16),
                  TensorView{x16.data(), DType::kBF16, Device::kCPU, Shape{N, C}}, view_of(w), kEps);
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out16[i].bits, float_to_bf16(out[i]).bits) << i;
  EXPECT_TRUE(test::bitwise_equal(rstd16, rstd));
}

TEST(RmsNorm, InPlaceForwardAndBadOperands) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t N = 4, C = 16;
  std::vector<float> x = rng.normal(N * C), w = rng.normal(C), out(N * C), rstd(N), rstd2(N);
  rmsnorm_forward(cpu_ctx(), view_of(out, {N, C}), view_of(rstd), view_of(x, {N, C}), view_of(w), kEps);
  rmsnorm_forward(cpu_ctx(), view_of(x, {N, C}), view_of(rstd2), view_of(x, {N, C}), view_of(w), kEps);  // in place
  EXPECT_TRUE(test::bitwise_equal(x, out));
  std::vector<float> short_w(C - 1);
  EXPECT_THROW(
      rmsnorm_forward(cpu_ctx(), view_of(out, {N, C}), view_of(rstd), view_of(x, {N, C}), view_of(short_w), kEps),
      std::exception);
  EXPECT_THROW(rmsnorm_forward(cpu_ctx(), view_of(out, {N, C}), view_of(rstd), view_of(x, {N, C}), view_of(w), 0.0f),
               std::exception);
}

}  // namespace
}  // namespace zt::cpu
