// Tests for kernels/cpu/norm: sum_of_squares against an fp64 sequential sum for F32 and BF16
// inputs, and bitwise independence of the thread count.
#include "kernels/cpu/norm.h"

#include <cmath>

#include "kernel_test_util.h"

namespace zt::cpu {
namespace {

using test::cpu_ctx;
using test::view_of;

TEST(SumOfSquares, MatchesFp64SumForF32AndBf16) {
  ZT_SEEDED_RNG(rng);
  for (std::int64_t n : {0, 1, 13, 3 * 4096 + 123}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    auto x = rng.normal(n, 0.0f, 3.0f);
    std::vector<bf16> xh(n);
    double ref = 0.0, ref_h = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      xh[i] = float_to_bf16(x[i]);
      ref += static_cast<double>(x[i]) * x[i];
      ref_h += static_cast<double>(bf16_to_float(xh[i])) * bf16_to_float(xh[i]);
    }
    // Squares of fp32 values are exact in fp64; only ~n fp64 adds round: ~n * 1e-16 relative.
    EXPECT_NEAR(sum_of_squares(cpu_ctx(), view_of(x)), ref, 1e-12 * ref);
    EXPECT_NEAR(sum_of_squares(cpu_ctx(), view_of(xh)), ref_h, 1e-12 * ref_h);
  }
}

TEST(SumOfSquares, BitwiseIndependentOfThreadCount) {
  ZT_SEEDED_RNG(rng);
  auto x = rng.normal(10 * 4096 + 77, 0.0f, 1e3f);
  const double one = sum_of_squares(cpu_ctx(1), view_of(x));
  for (int threads : {2, 3, 7}) {
    EXPECT_EQ(std::bit_cast<std::uint64_t>(sum_of_squares(cpu_ctx(threads), view_of(x))),
              std::bit_cast<std::uint64_t>(one))
        << "threads=" << threads;
  }
}

}  // namespace
}  // namespace zt::cpu
