// Tests for kernels/cpu/cross_entropy: losses and probabilities against fp64 (padded columns filled
// with NaN to prove they are never read), backward against finite differences, in-place aliasing,
// large logits, and target range checks.
#include "kernels/cpu/cross_entropy.h"

#include <cmath>
#include <limits>

#include "kernel_test_util.h"

namespace zt::cpu {
namespace {

using test::close_normwise;
using test::cpu_ctx;
using test::to_double;
using test::view_of;

struct CeCase {
  std::int64_t N, V, Vp;
  float logit_scale;
};

struct CeRef {
  std::vector<double> losses, probs;
};

CeRef cross_entropy_ref(const std::vector<double>& logits, const std::vector<std::int32_t>& targets, const CeCase& cs) {
  CeRef r{std::vector<double>(cs.N), std::vector<double>(cs.N * cs.Vp, 0.0)};
  for (std::int64_t n = 0; n < cs.N; ++n) {
    const double* x = &logits[n * cs.Vp];
    double mx = -INFINITY, sum = 0.0;
    for (std::int64_t v = 0; v < cs.V; ++v) mx = std::max(mx, x[v]);
    for (std::int64_t v = 0; v < cs.V; ++v) sum += std::exp(x[v] - mx);
    for (std::int64_t v = 0; v < cs.V; ++v) r.probs[n * cs.Vp + v] = std::exp(x[v] - mx) / sum;
    r.losses[n] = std::log(sum) + mx - x[targets[n]];
  }
  return r;
}

struct CeData {
  std::vector<float> logits;
  std::vector<std::int32_t> targets;
};

CeData make_data(test::Rng& rng, const CeCase& cs) {
  CeData d{rng.normal(cs.N * cs.Vp, 0.0f, cs.logit_scale), rng.ints(cs.N, 0, static_cast<std::int32_t>(cs.V))};
  for (std::int64_t n = 0; n < cs.N; ++n) {  // padded columns must never be read
    for (std::int64_t v = cs.V; v < cs.Vp; ++v) d.logits[n * cs.Vp + v] = std::numeric_limits<float>::quiet_NaN();
  }
  return d;
}

struct CeRun {
  std::vector<float> losses, probs;
};

CeRun run_forward(CeData& d, const CeCase& cs) {
  CeRun r{std::vector<float>(cs.N), std::vector<float>(cs.N * cs.Vp, std::numeric_limits<float>::quiet_NaN())};
  softmax_cross_entropy_forward(cpu_ctx(), view_of(r.losses), view_of(r.probs, {cs.N, cs.Vp}),
                                view_of(d.logits, {cs.N, cs.Vp}), view_of(d.targets), static_cast<int>(cs.V));
  return r;
}

TEST(CrossEntropyForward, MatchesFp64ReferenceAndZeroesPaddedProbs) {
  ZT_SEEDED_RNG(rng);
  for (const CeCase& cs : {CeCase{13, 50, 64, 2.0f}, CeCase{7, 37, 37, 1.0f}, CeCase{4, 1000, 1024, 5.0f}}) {
    SCOPED_TRACE(testing::Message() << "N=" << cs.N << " V=" << cs.V << " Vp=" << cs.Vp);
    CeData d = make_data(rng, cs);
    const CeRun r = run_forward(d, cs);
    const CeRef ref = cross_entropy_ref(to_double(d.logits), d.targets, cs);
    // fp64 exp sum, ~2-ulp fp32 exp per term and an fp32 result: a few eps relative to max loss.
    EXPECT_TRUE(close_normwise(r.losses, ref.losses, 1e-6)) << "losses";
    // Each probability is an fp32 exp times an fp32 reciprocal: a few eps of the largest one.
    EXPECT_TRUE(close_normwise(r.probs, ref.probs, 1e-6)) << "probs";
    for (std::int64_t n = 0; n < cs.N; ++n) {
      for (std::int64_t v = cs.V; v < cs.Vp; ++v) ASSERT_EQ(r.probs[n * cs.Vp + v], 0.0f) << "padded column " << v;
    }
  }
}

TEST(CrossEntropyForward, IsStableForLargeLogits) {
  ZT_SEEDED_RNG(rng);
  const CeCase cs{6, 50, 64, 300.0f};  // exp(300) overflows fp32 without the max subtraction
  CeData d = make_data(rng, cs);
  const CeRun r = run_forward(d, cs);
  const CeRef ref = cross_entropy_ref(to_double(d.logits), d.targets, cs);
  for (float l : r.losses) EXPECT_TRUE(std::isfinite(l));
  // Losses reach ~1e3: the fp32 logit itself carries relative error 6e-8.
  EXPECT_TRUE(close_normwise(r.losses, ref.losses, 1e-6)) << "losses";
}

TEST(CrossEntropyForward, InPlaceOverLogitsMatchesOutOfPlace) {
  ZT_SEEDED_RNG(rng);
  const CeCase cs{9, 50, 64, 2.0f};
  CeData d = make_data(rng, cs);
  const CeRun r = run_forward(d, cs);
  std::vector<float> losses(cs.N);
  softmax_cross_entropy_forward(cpu_ctx(), view_of(losses), view_of(d.logits, {cs.N, cs.Vp}),
                                view_of(d.logits, {cs.N, cs.Vp}), view_of(d.targets), static_cast<int>(cs.V));
  EXPECT_TRUE(test::bitwise_equal(losses, r.losses));
  EXPECT_TRUE(test::bitwise_equal(d.logits, r.probs));
}

TEST(CrossEntropyBackward, MatchesFiniteDifferencesWithZeroPaddedGradient) {
  ZT_SEEDED_RNG(rng);
  for (const CeCase& cs : {CeCase{13, 50, 64, 2.0f}, CeCase{5, 21, 21, 1.0f}}) {
    SCOPED_TRACE(testing::Message() << "N=" << cs.N << " V=" << cs.V << " Vp=" << cs.Vp);
    CeData d = make_data(rng, cs);
    CeRun r = run_forward(d, cs);
    const float dloss = 1.0f / static_cast<float>(cs.N);  // mean over rows
    std::vector<float> dlogits(r.probs.size(), std::numeric_limits<float>::quiet_NaN());
    softmax_cross_entropy_backward(cpu_ctx(), view_of(dlogits, {cs.N, cs.Vp}), view_of(r.probs, {cs.N, cs.Vp}),
                                   view_of(d.targets), dloss, static_cast<int>(cs.V));
    // Finite differences over the real columns only (padded logits are NaN, and must not matter).
    auto loss = [&](const std::vector<double>& v) {
      double total = 0.0;
      for (double l : cross_entropy_ref(v, d.targets, cs).losses) total += l * static_cast<double>(dloss);
      return total;
    };
    std::vector<double> x = to_double(d.logits);
    const std::vector<double> numeric = test::numeric_gradient(loss, x);
    std::vector<float> got;
    std::vector<double> want;
    for (std::int64_t n = 0; n < cs.N; ++n) {
      for (std::int64_t v = 0; v < cs.Vp; ++v) {
        if (v >= cs.V) {
          ASSERT_EQ(dlogits[n * cs.Vp + v], 0.0f) << "padded column " << v;
        } else {
          got.push_back(dlogits[n * cs.Vp + v]);
          want.push_back(numeric[n * cs.Vp + v]);
        }
      }
    }
    // (p - onehot) * dloss in fp32 vs fp64 differences: a few eps of the largest entry (~dloss).
    EXPECT_TRUE(close_normwise(got, want, 1e-6));

    // In place over probs gives the same bits.
    softmax_cross_entropy_backward(cpu_ctx(), view_of(r.probs, {cs.N, cs.Vp}), view_of(r.probs, {cs.N, cs.Vp}),
                                   view_of(d.targets), dloss, static_cast<int>(cs.V));
    EXPECT_TRUE(test::bitwise_equal(r.probs, dlogits)) << "in place over probs";
  }
}

TEST(CrossEntropy, RejectsTargetsOutsideTheRealVocabulary) {
  const CeCase cs{3, 50, 64, 1.0f};
  std::vector<float> logits(cs.N * cs.Vp, 0.0f), losses(cs.N);
  for (std::int32_t bad : {-1, 50, 63}) {
    std::vector<std::int32_t> targets{0, bad, 49};
    EXPECT_THROW(softmax_cross_entropy_forward(cpu_ctx(), view_of(losses), view_of(logits, {cs.N, cs.Vp}),
                                               view_of(logits, {cs.N, cs.Vp}), view_of(targets), 50),
                 InternalError)
        << "target " << bad;
    EXPECT_THROW(softmax_cross_entropy_backward(cpu_ctx(), view_of(logits, {cs.N, cs.Vp}),
                                                view_of(logits, {cs.N, cs.Vp}), view_of(targets), 1.0f, 50),
                 InternalError)
        << "target " << bad;
  }
}

}  // namespace
}  // namespace zt::cpu
