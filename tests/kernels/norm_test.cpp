// Tests for kernels/cpu/norm: sum_of_squares against an fp64 sequential sum for F32 and BF16
// inputs, and bitwise independence of the thread count; exact_sum_of_squares exact where the sum
// is a double, the same integer for any partition, order and thread count (values from
// subnormals to near FLT_MAX), within 1e-15 of an fp64 sum, NaN with a non-finite value.
#include "kernels/cpu/norm.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>

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

bool same_sum(const exact_sum::SquareSum& a, const exact_sum::SquareSum& b) {
  exact_sum::SquareSum x = a, y = b;
  exact_sum::normalize(x.digit);
  exact_sum::normalize(y.digit);
  return std::equal(x.digit, x.digit + exact_sum::kDigits, y.digit) && x.nonfinite == y.nonfinite;
}

TEST(ExactSumOfSquares, ExactWhereTheSumIsADouble) {
  ZT_SEEDED_RNG(rng);
  // k * 2^-20 with |k| < 2^12: squares are multiples of 2^-40 below 2^-16, so 5000 of them sum
  // exactly in fp64 (under 2^-3.7, 37 bits of multiples): the reference is exact.
  std::mt19937 gen(static_cast<unsigned>(rng.normal(1)[0] * 1e6f));
  std::uniform_int_distribution<int> k(-4095, 4095);
  std::vector<float> x(5000);
  double exact = 0.0;
  for (float& v : x) {
    v = std::ldexp(static_cast<float>(k(gen)), -20);
    exact += static_cast<double>(v) * v;
  }
  EXPECT_EQ(exact_sum::to_double(exact_sum_of_squares(cpu_ctx(), {view_of(x)})), exact);
}

TEST(ExactSumOfSquares, TheSameIntegerForAnyPartitionOrderAndThreadCount) {
  ZT_SEEDED_RNG(rng);
  // Normal values over scales from subnormal to near FLT_MAX's square root and beyond.
  std::vector<float> x = rng.normal(40000);
  const float scales[] = {1e-42f, 1e-30f, 1e-3f, 1.0f, 1e10f, 1e35f};
  for (std::size_t i = 0; i < x.size(); ++i) x[i] *= scales[i % std::size(scales)];
  x[17] = FLT_MAX;
  x[18] = -FLT_MAX;
  x[19] = std::numeric_limits<float>::denorm_min();
  const exact_sum::SquareSum whole = exact_sum_of_squares(cpu_ctx(1), {view_of(x)});
  for (int threads : {2, 3}) EXPECT_TRUE(same_sum(exact_sum_of_squares(cpu_ctx(threads), {view_of(x)}), whole));
  // Cut into ranks' shards of different counts, each summed apart and the sums added in reverse.
  for (int parts : {2, 3, 8}) {
    std::vector<exact_sum::SquareSum> sums;
    const std::int64_t n = static_cast<std::int64_t>(x.size()), shard = (n + parts - 1) / parts;
    for (int p = 0; p < parts; ++p) {
      const std::int64_t begin = std::min(n, p * shard), end = std::min(n, begin + shard);
      sums.push_back(exact_sum_of_squares(cpu_ctx(1), {view_of(x).slice(begin, end - begin)}));
    }
    exact_sum::SquareSum total;
    for (auto it = sums.rbegin(); it != sums.rend(); ++it) exact_sum::add(total, *it);
    EXPECT_TRUE(same_sum(total, whole)) << parts << " parts";
    EXPECT_EQ(std::bit_cast<std::uint64_t>(exact_sum::to_double(total)),
              std::bit_cast<std::uint64_t>(exact_sum::to_double(whole)));
  }
  // The values reversed: another order of the adds, the same integer.
  std::vector<float> reversed(x.rbegin(), x.rend());
  EXPECT_TRUE(same_sum(exact_sum_of_squares(cpu_ctx(2), {view_of(reversed)}), whole));
}

TEST(ExactSumOfSquares, CloseToAnFp64SumAndBf16AsItsWidening) {
  ZT_SEEDED_RNG(rng);
  auto x = rng.normal(3 * 4096 + 5, 0.0f, 3.0f);
  std::vector<bf16> xh(x.size());
  std::vector<float> widened(x.size());
  double ref = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    ref += static_cast<double>(x[i]) * x[i];
    xh[i] = float_to_bf16(x[i]);
    widened[i] = bf16_to_float(xh[i]);
  }
  EXPECT_NEAR(exact_sum::to_double(exact_sum_of_squares(cpu_ctx(), {view_of(x)})), ref, 1e-13 * ref);
  EXPECT_TRUE(
      same_sum(exact_sum_of_squares(cpu_ctx(), {view_of(xh)}), exact_sum_of_squares(cpu_ctx(), {view_of(widened)})));
  // Several views are one sum.
  const std::int64_t half = static_cast<std::int64_t>(x.size()) / 2;
  EXPECT_TRUE(same_sum(
      exact_sum_of_squares(
          cpu_ctx(), {view_of(x).slice(0, half), view_of(x).slice(half, static_cast<std::int64_t>(x.size()) - half)}),
      exact_sum_of_squares(cpu_ctx(), {view_of(x)})));
}

TEST(ExactSumOfSquares, NonFiniteValuesGiveNan) {
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> x = {1.0f, bad, 2.0f};
    EXPECT_TRUE(std::isnan(exact_sum::to_double(exact_sum_of_squares(cpu_ctx(), {view_of(x)}))));
  }
  std::vector<float> big(1000, FLT_MAX);
  const double want = 1000.0 * static_cast<double>(FLT_MAX) * FLT_MAX;
  EXPECT_NEAR(exact_sum::to_double(exact_sum_of_squares(cpu_ctx(), {view_of(big)})), want, 1e-15 * want);
}

}  // namespace
}  // namespace zt::cpu
