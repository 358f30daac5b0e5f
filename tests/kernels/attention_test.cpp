// Tests for kernels/cpu/attention: forward (out and the stored probabilities) against fp64, exact
// zeros above the diagonal, backward against finite differences, dqkv overwrite semantics, and
// bitwise thread-count independence; the same with dropout on the probabilities, whose fp64
// reference draws its mask from dropout_keep.
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

// With an active `dropout`, out uses att * mask / (1 - p) (mask from dropout_keep, element
// (h * T + t) * T + t2 of sample first_sample + b); att stays the softmax.
AttnRef attention_ref(const std::vector<double>& qkv, const AttnCase& cs, const DropoutSpec& dropout = {}) {
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
          double w = arow[t2];
          if (dropout.active()) {
            const bool keep = dropout_keep(dropout, dropout.first_sample + b, (h * T + t) * T + t2);
            w = keep ? w / (1.0 - static_cast<double>(dropout.p)) : 0.0;
          }
          for (std::int64_t e = 0; e < hs; ++e) r.out[(b * T + t) * C + h * hs + e] += w * v[e];
        }
      }
    }
  }
  return r;
}

struct AttnRun {
  std::vector<float> out, att;
};

AttnRun run_forward(std::vector<float>& qkv, const AttnCase& cs, int threads = 2, const DropoutSpec& dropout = {}) {
  const float nan = std::numeric_limits<float>::quiet_NaN();  // everything must be written
  AttnRun r{std::vector<float>(cs.B * cs.T * cs.C, nan), std::vector<float>(cs.B * cs.NH * cs.T * cs.T, nan)};
  attention_forward(cpu_ctx(threads), view_of(r.out, {cs.B, cs.T, cs.C}), view_of(r.att, {cs.B, cs.NH, cs.T, cs.T}),
                    view_of(qkv, {cs.B, cs.T, 3 * cs.C}), static_cast<int>(cs.NH), dropout);
  return r;
}

std::vector<float> run_backward(std::vector<float>& dout, std::vector<float>& qkv, std::vector<float>& att,
                                const AttnCase& cs, int threads = 2, const DropoutSpec& dropout = {}) {
  std::vector<float> dqkv(qkv.size(), std::numeric_limits<float>::quiet_NaN());  // must be overwritten
  attention_backward(cpu_ctx(threads), view_of(dqkv, {cs.B, cs.T, 3 * cs.C}), view_of(dout, {cs.B, cs.T, cs.C}),
                     view_of(qkv, {cs.B, cs.T, 3 * cs.C}), view_of(att, {cs.B, cs.NH, cs.T, cs.T}),
                     static_cast<int>(cs.NH), dropout);
  return dqkv;
}

TEST(AttentionForward, MatchesFp64ReferenceWithExactZerosAboveDiagonal) {
  ZT_SEEDED_RNG(rng);
  for (const AttnCase& cs :
       {AttnCase{2, 7, 12, 3}, AttnCase{1, 16, 32, 2}, AttnCase{2, 33, 20, 4}, AttnCase{3, 1, 8, 2}}) {
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

// Fraction of the causal probabilities that `dropout` drops over the case (sanity for the tests).
double dropped_fraction(const AttnCase& cs, const DropoutSpec& dropout) {
  std::int64_t dropped = 0, total = 0;
  for (std::int64_t b = 0; b < cs.B; ++b) {
    for (std::int64_t ht = 0; ht < cs.NH * cs.T; ++ht) {
      for (std::int64_t t2 = 0; t2 <= ht % cs.T; ++t2, ++total) {
        dropped += dropout_keep(dropout, dropout.first_sample + b, ht * cs.T + t2) ? 0 : 1;
      }
    }
  }
  return static_cast<double>(dropped) / static_cast<double>(total);
}

TEST(AttentionDropout, ForwardMatchesFp64ReferenceWithTheSameMask) {
  ZT_SEEDED_RNG(rng);
  // Odd T puts row starts (h * T + t) * T inside Philox blocks; T = 33 spans several tiles.
  for (const AttnCase& cs : {AttnCase{2, 7, 12, 3}, AttnCase{2, 33, 20, 4}, AttnCase{1, 16, 32, 2}}) {
    SCOPED_TRACE(testing::Message() << "B=" << cs.B << " T=" << cs.T << " C=" << cs.C << " NH=" << cs.NH);
    const DropoutSpec dropout{0.3f, 0x5EED5EED5EEDull, dropout_site(1, DropoutSite::kAttentionProbs), 1000};
    ASSERT_GT(dropped_fraction(cs, dropout), 0.1);  // the mask really drops something
    auto qkv = rng.normal(cs.B * cs.T * 3 * cs.C, 0.0f, 1.5f);
    const AttnRun r = run_forward(qkv, cs, 2, dropout);
    const AttnRef ref = attention_ref(to_double(qkv), cs, dropout);
    // As without dropout (1e-5), plus the fp32 rounding of 1 / (1 - p) (6e-8 relative).
    EXPECT_TRUE(close_normwise(r.out, ref.out, 1e-5)) << "out";
    // att is stored before dropout: the plain softmax.
    EXPECT_TRUE(close_normwise(r.att, attention_ref(to_double(qkv), cs).att, 1e-5)) << "att";
  }
}

TEST(AttentionDropout, BackwardMatchesFiniteDifferencesWithTheMaskFixed) {
  ZT_SEEDED_RNG(rng);
  for (const AttnCase& cs : {AttnCase{2, 5, 8, 2}, AttnCase{1, 7, 9, 3}}) {
    SCOPED_TRACE(testing::Message() << "B=" << cs.B << " T=" << cs.T << " C=" << cs.C << " NH=" << cs.NH);
    const DropoutSpec dropout{0.3f, 2024, dropout_site(0, DropoutSite::kAttentionProbs), 17};
    ASSERT_GT(dropped_fraction(cs, dropout), 0.1);
    auto qkv = rng.normal(cs.B * cs.T * 3 * cs.C);
    auto dout = rng.uniform(cs.B * cs.T * cs.C);
    AttnRun r = run_forward(qkv, cs, 2, dropout);
    const auto dqkv = run_backward(dout, qkv, r.att, cs, 2, dropout);
    const auto gd = to_double(dout);
    // The mask depends on (spec, sample, j) only, never on qkv: a fixed linear map of att.
    auto loss = [&](const std::vector<double>& v) { return test::weighted_sum(gd, attention_ref(v, cs, dropout).out); };
    // As without dropout (1e-5): the 1 / (1 - p) factor scales gradient and reference alike.
    EXPECT_TRUE(close_normwise(dqkv, test::numeric_gradient(loss, to_double(qkv)), 1e-5));
  }
}

TEST(AttentionDropout, NearZeroPEqualsTheInactivePath) {
  ZT_SEEDED_RNG(rng);
  const AttnCase cs{2, 19, 24, 4};
  const DropoutSpec dropout{1e-9f, 7, 1, 0};  // threshold 4 of 2^32: nothing dropped in practice
  ASSERT_EQ(dropped_fraction(cs, dropout), 0.0);
  auto qkv = rng.normal(cs.B * cs.T * 3 * cs.C);
  auto dout = rng.uniform(cs.B * cs.T * cs.C);
  AttnRun plain = run_forward(qkv, cs);
  AttnRun active = run_forward(qkv, cs, 2, dropout);
  // 1 / (1 - 1e-9) rounds to 1.0f and no element is dropped, so the forward is bitwise the same.
  EXPECT_TRUE(test::bitwise_equal(active.out, plain.out));
  EXPECT_TRUE(test::bitwise_equal(active.att, plain.att));
  const auto d_plain = run_backward(dout, qkv, plain.att, cs);
  // Backward evaluates dpreatt as pd dp - att (pd . dp) instead of att (dp - att . dp): a few fp32
  // roundings of the largest term, relative to the largest gradient entry.
  EXPECT_TRUE(close_normwise(run_backward(dout, qkv, active.att, cs, 2, dropout), to_double(d_plain), 1e-6));
}

TEST(AttentionDropout, BitwiseIndependentOfThreadCountAndOfHowTheBatchIsSplit) {
  ZT_SEEDED_RNG(rng);
  const AttnCase cs{4, 19, 24, 4}, half{2, 19, 24, 4};
  const DropoutSpec dropout{0.2f, 99, 4, 50};
  auto qkv = rng.normal(cs.B * cs.T * 3 * cs.C);
  auto dout = rng.uniform(cs.B * cs.T * cs.C);
  AttnRun r1 = run_forward(qkv, cs, 1, dropout);
  const auto d1 = run_backward(dout, qkv, r1.att, cs, 1, dropout);
  for (int threads : {2, 3, 5}) {
    SCOPED_TRACE(testing::Message() << "threads=" << threads);
    AttnRun r = run_forward(qkv, cs, threads, dropout);
    EXPECT_TRUE(test::bitwise_equal(r.out, r1.out));
    EXPECT_TRUE(test::bitwise_equal(run_backward(dout, qkv, r.att, cs, threads, dropout), d1));
  }
  // Samples 50..53 as two batches (50, 51) and (52, 53): row b's mask is sample first_sample + b.
  const std::int64_t qkv_half = half.B * half.T * 3 * half.C, out_half = half.B * half.T * half.C;
  for (int part = 0; part < 2; ++part) {
    SCOPED_TRACE(testing::Message() << "half " << part);
    DropoutSpec d = dropout;
    d.first_sample += 2 * part;
    std::vector<float> q(qkv.begin() + part * qkv_half, qkv.begin() + (part + 1) * qkv_half);
    std::vector<float> g(dout.begin() + part * out_half, dout.begin() + (part + 1) * out_half);
    const std::vector<float> want_out(r1.out.begin() + part * out_half, r1.out.begin() + (part + 1) * out_half);
    const std::vector<float> want_dqkv(d1.begin() + part * qkv_half, d1.begin() + (part + 1) * qkv_half);
    AttnRun r = run_forward(q, half, 2, d);
    EXPECT_TRUE(test::bitwise_equal(r.out, want_out));
    EXPECT_TRUE(test::bitwise_equal(run_backward(g, q, r.att, half, 2, d), want_dqkv));
  }
}

TEST(AttentionForward, RejectsHeadCountThatDoesNotDivideC) {
  std::vector<float> qkv(1 * 4 * 30), out(1 * 4 * 10), att(1 * 3 * 4 * 4);
  EXPECT_THROW(
      attention_forward(cpu_ctx(), view_of(out, {1, 4, 10}), view_of(att, {1, 3, 4, 4}), view_of(qkv, {1, 4, 30}), 3),
      InternalError);
}

}  // namespace
}  // namespace zt::cpu
