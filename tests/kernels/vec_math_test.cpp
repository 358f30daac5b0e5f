// Tests for kernels/cpu/vec_math.h, the helpers the softmax and GELU kernels rest on: exp_approx's
// accuracy over the whole finite range and its special values, and the fixed-order reductions.
#include "kernels/cpu/vec_math.h"

#include <cmath>
#include <limits>

#include "kernel_test_util.h"

namespace zt::cpu {
namespace {

TEST(VecMath, ExpApproxIsWithinTwoUlpOverItsRange) {
  // A dense sweep of [-87.3, 88.3], plus random points; error in units of the result's fp32 ulp.
  ZT_SEEDED_RNG(rng);
  std::vector<float> xs = rng.uniform(100000, -87.3f, 88.3f);
  for (int i = 0; i <= 200000; ++i) xs.push_back(-87.3f + 175.6f * static_cast<float>(i) / 200000.0f);
  double worst_ulp = 0.0;
  float worst_x = 0.0f;
  for (float x : xs) {
    const double want = std::exp(static_cast<double>(x));
    const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
    const double err = std::abs(static_cast<double>(vec::exp_approx(x)) - want) / ulp;
    if (err > worst_ulp) {
      worst_ulp = err;
      worst_x = x;
    }
  }
  // Measured ~1.0 ulp (with and without FMA contraction); 2 ulp leaves room for compilers.
  EXPECT_LE(worst_ulp, 2.0) << "at x=" << worst_x;
}

TEST(VecMath, ExpApproxSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(vec::exp_approx(0.0f), 1.0f);
  EXPECT_EQ(vec::exp_approx(-inf), 0.0f);
  EXPECT_EQ(vec::exp_approx(-100.0f), 0.0f);  // below ln(FLT_MIN): flushed, no denormals
  EXPECT_EQ(vec::exp_approx(-1e30f), 0.0f);
  EXPECT_EQ(vec::exp_approx(inf), inf);
  EXPECT_EQ(vec::exp_approx(100.0f), inf);
  EXPECT_TRUE(std::isnan(vec::exp_approx(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(vec::exp_approx(-std::numeric_limits<float>::quiet_NaN())));
}

TEST(VecMath, ReductionsMatchFp64ForEveryTailLength) {
  ZT_SEEDED_RNG(rng);
  for (std::int64_t n = 1; n <= 70; ++n) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    auto a = rng.uniform(n), b = rng.uniform(n);
    double sum = 0.0, dot = 0.0, mx = -INFINITY;
    for (std::int64_t i = 0; i < n; ++i) {
      sum += a[i];
      dot += static_cast<double>(a[i]) * b[i];
      mx = std::max(mx, static_cast<double>(a[i]));
    }
    // fp32 sums of n <= 70 terms of magnitude <= 1: error below n * eps = 4e-6 in absolute terms.
    EXPECT_NEAR(vec::sum(a.data(), n), sum, 1e-5);
    EXPECT_NEAR(vec::dot(a.data(), b.data(), n), dot, 1e-5);
    EXPECT_EQ(vec::max(a.data(), n), static_cast<float>(mx));
  }
  EXPECT_EQ(vec::sum(nullptr, 0), 0.0f);
}

}  // namespace
}  // namespace zt::cpu
