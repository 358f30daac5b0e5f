// Tests for kernels/cpu/gelu: forward against fp64 tanh-GELU (including saturated inputs),
// backward against finite differences and the fp64 derivative, and in-place use.
#include "kernels/cpu/gelu.h"

#include <cmath>

#include "kernel_test_util.h"

namespace zt::cpu {
namespace {

using test::close_normwise;
using test::cpu_ctx;
using test::to_double;
using test::view_of;

double gelu_ref(double x) {
  const double s = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(s * (x + 0.044715 * x * x * x)));
}

double gelu_grad_ref(double x) {
  const double s = std::sqrt(2.0 / M_PI);
  const double t = std::tanh(s * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * s * (1.0 + 3.0 * 0.044715 * x * x);
}

std::vector<double> gelu_ref(const std::vector<double>& x) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = gelu_ref(x[i]);
  return y;
}

// Random inputs plus edge values: zero, saturated tails, values far past exp's range.
std::vector<float> gelu_inputs(test::Rng& rng, std::int64_t n) {
  auto x = rng.uniform(n, -6.0f, 6.0f);
  for (float e : {0.0f, -0.0f, 1e-6f, -1e-6f, 10.0f, -10.0f, 30.0f, -30.0f, 1e4f, -1e4f}) x.push_back(e);
  return x;
}

TEST(GeluForward, MatchesFp64Reference) {
  ZT_SEEDED_RNG(rng);
  for (std::int64_t n : {7, 1000, 40000}) {  // 40000 spans several parallel blocks
    SCOPED_TRACE(testing::Message() << "n=" << n);
    auto x = gelu_inputs(rng, n);
    std::vector<float> out(x.size());
    gelu_forward(cpu_ctx(), view_of(out), view_of(x));
    // Inputs clipped to |x| <= 6 for the normwise check so the +-1e4 edge values do not make it vacuous.
    std::vector<float> got;
    std::vector<double> ref;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (std::abs(x[i]) <= 6.0f) {
        got.push_back(out[i]);
        ref.push_back(gelu_ref(x[i]));
      }
    }
    // fp32 with a ~2-ulp exp and one divide: a few eps of |x|; 1e-6 relative to max|gelu| (~6).
    EXPECT_TRUE(close_normwise(got, ref, 1e-6));
    // Saturated tails: gelu(x) = x for large x, and a (signed) zero-sized value for very negative x.
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (x[i] >= 10.0f) {
        EXPECT_EQ(out[i], x[i]) << "x=" << x[i];
      }
      if (x[i] <= -10.0f) {
        EXPECT_LE(std::abs(out[i]), 1e-30f) << "x=" << x[i];
      }
      EXPECT_FALSE(std::isnan(out[i])) << "x=" << x[i];
    }
  }
}

TEST(GeluBackward, MatchesFiniteDifferencesAndFp64Derivative) {
  ZT_SEEDED_RNG(rng);
  auto x = gelu_inputs(rng, 57);
  auto dout = rng.uniform(static_cast<std::int64_t>(x.size()));
  std::vector<float> dinp(x.size());
  gelu_backward(cpu_ctx(), view_of(dinp), view_of(x), view_of(dout));

  const auto xd = to_double(x), gd = to_double(dout);
  auto loss = [&](const std::vector<double>& v) { return test::weighted_sum(gd, gelu_ref(v)); };
  std::vector<double> analytic(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) analytic[i] = gd[i] * gelu_grad_ref(xd[i]);
  // fp32 element-wise derivative (sigmoid form, ~2-ulp exp): 1e-6 of the largest gradient (~1.1).
  EXPECT_TRUE(close_normwise(dinp, analytic, 1e-6)) << "vs fp64 derivative";
  // Finite differences in fp64 (h=1e-5) add ~1e-9 of their own error; same tolerance applies.
  EXPECT_TRUE(close_normwise(dinp, test::numeric_gradient(loss, xd), 1e-6)) << "vs finite differences";
}

TEST(Gelu, InPlaceAndShiftedBuffersMatchBitwise) {
  ZT_SEEDED_RNG(rng);
  auto x = gelu_inputs(rng, 5000);
  auto dout = rng.uniform(static_cast<std::int64_t>(x.size()));
  std::vector<float> out(x.size()), dinp(x.size());
  gelu_forward(cpu_ctx(), view_of(out), view_of(x));
  gelu_backward(cpu_ctx(), view_of(dinp), view_of(x), view_of(dout));

  auto inplace = x;
  gelu_forward(cpu_ctx(), view_of(inplace), view_of(inplace));
  EXPECT_TRUE(test::bitwise_equal(inplace, out));
  auto dinplace = dout;
  gelu_backward(cpu_ctx(), view_of(dinplace), view_of(x), view_of(dinplace));
  EXPECT_TRUE(test::bitwise_equal(dinplace, dinp));

  // And at another alignment (activation recompute may use a different buffer).
  const std::int64_t n = static_cast<std::int64_t>(x.size());
  test::ShiftedCopy xs(x), gs(dout);
  auto outs = test::ShiftedCopy::zeros(n), dis = test::ShiftedCopy::zeros(n);
  gelu_forward(cpu_ctx(), outs.view({n}), xs.view({n}));
  gelu_backward(cpu_ctx(), dis.view({n}), xs.view({n}), gs.view({n}));
  EXPECT_TRUE(test::bitwise_equal(outs.values(), out));
  EXPECT_TRUE(test::bitwise_equal(dis.values(), dinp));
}

}  // namespace
}  // namespace zt::cpu
