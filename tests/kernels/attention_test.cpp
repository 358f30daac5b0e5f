// Tests for kernels/cpu/attention: forward (out and the stored probabilities) against fp64, exact
// zeros above the diagonal, backward against finite differences, dqkv overwrite semantics, and
// bitwise thread-count independence.
#include "kernels/cpu/attention.h"

#include <cmath>
#include <limits>

#include "kernel_test_util.h"

namespace zt::cpu {
namespace {

using test::close_normwise;
using test::cpu_ctx;
using test::to_double;
using test::view_of;

struct AttnCase {
  std::int64_t B, T, C, NH;
};

struct AttnRef {
  std::vector<double> out, att;
};

AttnRef attention_ref(const std::vector<double>& qkv, const AttnCase& cs) {
  const std::int64_t B = cs.B, T = cs.T, C = cs.C, NH = cs.NH, hs = C / NH;
  AttnRef r{std::vector<double>(B * T * C, 0.0), std::vector<double>(B * NH * T * T, 0.0)};
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < NH; ++h) {
      for (std::int64_t t = 0; t < T; ++t) {
        const double* q = &qkv[(b * T + t) * 3 * C + h * hs];
        double* arow = &r.att[((b * NH + h) * T + t) * T];
        double mx = -INFINITY;
        for (std::int64_t t2 = 0; t2 <= t; ++t2) {
          const double* k = &qkv[(b * T + t2) * 3 * C + C + h * hs];
          double dot = 0.0;
          for (std::int64_t e = 0; e < hs; ++e) dot += q[e] * k[e];
          arow[t2] = dot * scale;
          mx = std::max(mx, arow[t2]);
        }
        double sum = 0.0;
        for (std::int64_t t2 = 0; t2 <= t; ++t2) sum += (arow[t2] = std::exp(arow[t2] - mx));
        for (std::int64_t t2 = 0; t2 <= t; ++t2) arow[t2] /= sum;
        for (std::int64_t t2 = 0; t2 <= t; ++t2) {
          const double* v = &qkv[(b * T + t2) * 3 * C + 2 * C + h * hs];
          for (std::int64_t e = 0; e < hs; ++e) r.out[(b * T + t) * C + h * hs + e] += arow[t2] * v[e];
        }
      }
    }
  }
  return r;
}

struct AttnRun {
  std::vector<float> out, att;
};

AttnRun run_forward(std::vector<float>& qkv, const AttnCase& cs, int threads = 2) {
  const float nan = std::numeric_limits<float>::quiet_NaN();  // everything must be written
  AttnRun r{std::vector<float>(cs.B * cs.T * cs.C, nan), std::vector<float>(cs.B * cs.NH * cs.T * cs.T, nan)};
  attention_forward(cpu_ctx(threads), view_of(r.out, {cs.B, cs.T, cs.C}), view_of(r.att, {cs.B, cs.NH, cs.T, cs.T}),
                    view_of(qkv, {cs.B, cs.T, 3 * cs.C}), static_cast<int>(cs.NH));
  return r;
}

std::vector<float> run_backward(std::vector<float>& dout, std::vector<float>& qkv, std::vector<float>& att,
                                const AttnCase& cs, int threads = 2) {
  std::vector<float> dqkv(qkv.size(), std::numeric_limits<float>::quiet_NaN());  // must be overwritten
  attention_backward(cpu_ctx(threads), view_of(dqkv, {cs.B, cs.T, 3 * cs.C}), view_of(dout, {cs.B, cs.T, cs.C}),
                     view_of(qkv, {cs.B, cs.T, 3 * cs.C}), view_of(att, {cs.B, cs.NH, cs.T, cs.T}),
                     static_cast<int>(cs.NH));
  return dqkv;
}

TEST(AttentionForward, MatchesFp64ReferenceWithExactZerosAboveDiagonal) {
  ZT_SEEDED_RNG(rng);
  for (const AttnCase& cs : {AttnCase{2, 7, 12, 3}, AttnCase{1, 16, 32, 2}, AttnCase{2, 33, 20, 4},
                            AttnCase{3, 1, 8, 2}}) {
    SCOPED_TRACE(testing::Message() << "B=" << cs.B << " T=" << cs.T << " C=" << cs.C << " NH=" << cs.NH);
    auto qkv = rng.normal(cs.B * cs.T * 3 * cs.C, 0.0f, 1.5f);
    const AttnRun r = run_forward(qkv, cs);
    const AttnRef ref = attention_ref(to_double(qkv), cs);
    // fp32 dots of hs <= 16 terms, a ~2-ulp exp and sums of <= 33 probabilities: a few eps
    // relative to the largest entry; 1e-5 leaves two orders of magnitude of headroom.
    EXPECT_TRUE(close_normwise(r.out, ref.out, 1e-5)) << "out";
    EXPECT_TRUE(close_normwise(r.att, ref.att, 1e-5)) << "att";
    for (std::int64_t row = 0; row < cs.B * cs.NH * cs.T; ++row) {
      const std::int64_t t = row % cs.T;
      double sum = 0.0;
      for (std::int64_t t2 = 0; t2 < cs.T; ++t2) {
        const float a = r.att[row * cs.T + t2];
        if (t2 > t) {
          ASSERT_EQ(a, 0.0f) << "att above the diagonal, row " << row << " col " << t2;
        }
        sum += a;
      }
      EXPECT_NEAR(sum, 1.0, 1e-6) << "softmax row " << row;  // T <= 33 fp32 probabilities
    }
  }
}

TEST(AttentionForward, IsStableForLargeScores) {
  ZT_SEEDED_RNG(rng);
  const AttnCase cs{1, 9, 8, 2};
  auto qkv = rng.normal(cs.B * cs.T * 3 * cs.C, 0.0f, 30.0f);  // scores up to ~1e3: exp would overflow
  const AttnRun r = run_forward(qkv, cs);
  const AttnRef ref = attention_ref(to_double(qkv), cs);
  // Large scores amplify the fp32 rounding of each score (relative 6e-8 of ~1e3) inside exp.
  EXPECT_TRUE(close_normwise(r.att, ref.att, 1e-3)) << "att";
  for (float a : r.att) EXPECT_TRUE(std::isfinite(a));
}

TEST(AttentionBackward, MatchesFiniteDifferencesOfFp64Reference) {
  ZT_SEEDED_RNG(rng);
  for (const AttnCase& cs : {AttnCase{2, 5, 8, 2}, AttnCase{1, 7, 9, 3}}) {
    SCOPED_TRACE(testing::Message() << "B=" << cs.B << " T=" << cs.T << " C=" << cs.C << " NH=" << cs.NH);
    auto qkv = rng.normal(cs.B * cs.T * 3 * cs.C);
    auto dout = rng.uniform(cs.B * cs.T * cs.C);
    AttnRun r = run_forward(qkv, cs);
    const auto dqkv = run_backward(dout, qkv, r.att, cs);
    const auto gd = to_double(dout);
    auto loss = [&](const std::vector<double>& v) { return test::weighted_sum(gd, attention_ref(v, cs).out); };
    // fp32 kernel (dots of hs <= 4 terms, sums over T <= 7 keys) vs fp64 numeric gradient.
    EXPECT_TRUE(close_normwise(dqkv, test::numeric_gradient(loss, to_double(qkv)), 1e-5));
  }
}

TEST(Attention, BitwiseIndependentOfThreadCountAndRepeatable) {
  ZT_SEEDED_RNG(rng);
  const AttnCase cs{3, 19, 24, 4};  // 12 (b, h) pairs: uneven splits over 2 and 5 threads
  auto qkv = rng.normal(cs.B * cs.T * 3 * cs.C);
  auto dout = rng.uniform(cs.B * cs.T * cs.C);
  AttnRun r1 = run_forward(qkv, cs, 1);
  const auto d1 = run_backward(dout, qkv, r1.att, cs, 1);
  for (int threads : {1, 2, 5}) {
    SCOPED_TRACE(testing::Message() << "threads=" << threads);
    AttnRun r = run_forward(qkv, cs, threads);
    EXPECT_TRUE(test::bitwise_equal(r.out, r1.out));
    EXPECT_TRUE(test::bitwise_equal(r.att, r1.att));
    EXPECT_TRUE(test::bitwise_equal(run_backward(dout, qkv, r.att, cs, threads), d1));
  }
}

TEST(AttentionForward, RejectsHeadCountThatDoesNotDivideC) {
  std::vector<float> qkv(1 * 4 * 30), out(1 * 4 * 10), att(1 * 3 * 4 * 4);
  EXPECT_THROW(attention_forward(cpu_ctx(), view_of(out, {1, 4, 10}), view_of(att, {1, 3, 4, 4}),
                                 view_of(qkv, {1, 4, 30}), 3),
               InternalError);
}

}  // namespace
}  // namespace zt::cpu
