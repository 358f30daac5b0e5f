// Tests for kernels/cpu/dropout: dropout_keep against the bit-exact definition in [Note: dropout
// masks] and its keep rate, the forward/backward kernels against dropout_keep element by element,
// p = 0 as the identity, and the mask's independence of batch split, thread count and aliasing.
#include "kernels/cpu/dropout.h"

#include <cmath>
#include <limits>

#include "engine/base/core/philox.h"
#include "kernel_test_util.h"
#include "kernels/cpu/dropout_mask.h"

namespace zt::cpu {
namespace {

using test::bitwise_equal;
using test::cpu_ctx;
using test::view_of;

std::vector<float> run_forward(std::vector<float> in, Shape shape, const DropoutSpec& spec, int threads = 2) {
  std::vector<float> out(in.size(), std::numeric_limits<float>::quiet_NaN());  // everything must be written
  dropout_forward(cpu_ctx(threads), view_of(out, shape), view_of(in, shape), spec);
  return out;
}

// The mask of `spec` over [B, N] as 0/1 (B samples from spec.first_sample), from dropout_keep.
std::vector<int> keep_mask(const DropoutSpec& spec, std::int64_t B, std::int64_t N) {
  std::vector<int> m(B * N);
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t j = 0; j < N; ++j) m[b * N + j] = dropout_keep(spec, spec.first_sample + b, j) ? 1 : 0;
  }
  return m;
}

TEST(DropoutKeep, FollowsTheNoteBitExactly) {
  // The Note's definition written out independently: counter {j / 4, site, g_lo, g_hi}, key
  // {seed_lo, seed_hi}, word j % 4, kept iff >= round(p * 2^32). High words of seed and g are set.
  const DropoutSpec spec{0.3f, 0x0123456789ABCDEFull, 7, (std::int64_t{5} << 32) + 11};
  const std::uint64_t threshold = std::llround(static_cast<double>(spec.p) * 4294967296.0);
  EXPECT_EQ(dropout_rules::keep_threshold(spec.p), threshold);
  EXPECT_EQ(dropout_rules::keep_threshold(0.5f), 0x80000000u);
  EXPECT_EQ(dropout_rules::keep_threshold(0.0f), 0u);
  EXPECT_EQ(dropout_rules::keep_threshold(std::nextafter(1.0f, 0.0f)), 0xFFFFFF00u);  // (1 - 2^-24) 2^32
  for (std::int64_t g : {spec.first_sample, std::int64_t{0}}) {
    for (std::int64_t j = 0; j < 64; ++j) {
      const auto r = philox4x32({static_cast<std::uint32_t>(j / 4), spec.site, static_cast<std::uint32_t>(g),
                                 static_cast<std::uint32_t>(static_cast<std::uint64_t>(g) >> 32)},
                                {0x89ABCDEFu, 0x01234567u});
      ASSERT_EQ(dropout_keep(spec, g, j), r[j % 4] >= threshold) << "g " << g << " j " << j;
    }
  }
}

TEST(DropoutKeep, KeepsOneMinusPWithinFiveSigma) {
  const std::int64_t n = 1 << 20;
  for (float p : {0.1f, 0.5f}) {
    const DropoutSpec spec{p, 42, 3, 1000};
    std::int64_t kept = 0;
    for (std::int64_t i = 0; i < n; ++i) kept += dropout_keep(spec, spec.first_sample + i / 4096, i % 4096);
    // Binomial(n, 1 - p): a correct generator lands within 5 sigma with probability 1 - 6e-7.
    const double sigma = std::sqrt(n * p * (1.0 - p));
    EXPECT_NEAR(static_cast<double>(kept), n * (1.0 - p), 5.0 * sigma) << "p=" << p;
  }
}

TEST(DropoutForward, KeptScaledByExactlyOneOverOneMinusPDroppedZeroAsDropoutKeepSays) {
  ZT_SEEDED_RNG(rng);
  for (float p : {0.1f, 0.5f, 0.9f}) {
    // keep_scale is 1 / (1 - p) rounded once: within half an ulp of the exact quotient.
    const float s = dropout_rules::keep_scale(p);
    EXPECT_LE(std::abs(s - 1.0 / (1.0 - static_cast<double>(p))), 0.5 * (std::nextafter(s, INFINITY) - s));
    // N = 35 splits Philox blocks across samples; N = 10003 spans several parallel tasks. High
    // words of the seed and the sample index are set.
    for (const Shape shape : {Shape{3, 5, 7}, Shape{2, 10003}}) {
      const std::int64_t B = shape[0], N = shape.numel() / B;
      const DropoutSpec spec{p, 0xFEDCBA9876543210ull, 13, (std::int64_t{1} << 33) + 3};
      const auto in = rng.uniform(shape.numel(), 0.5f, 2.0f);  // nonzero, so a kept 0 cannot hide
      const auto out = run_forward(in, shape, spec);
      const auto keep = keep_mask(spec, B, N);
      std::int64_t kept = 0;
      for (std::int64_t i = 0; i < shape.numel(); ++i) {
        ASSERT_EQ(out[i], keep[i] ? in[i] * s : 0.0f) << "p " << p << " element " << i;
        kept += keep[i];
      }
      EXPECT_GT(kept, 0);
      EXPECT_LT(kept, shape.numel());
      auto inplace = in;
      dropout_forward(cpu_ctx(), view_of(inplace, shape), view_of(inplace, shape), spec);
      EXPECT_TRUE(bitwise_equal(inplace, out)) << "out aliasing in";
    }
  }
}

TEST(DropoutForward, ZeroPIsBitwiseIdentity) {
  ZT_SEEDED_RNG(rng);
  auto in = rng.normal(3 * 1001);
  in[0] = -0.0f;
  in[1] = std::numeric_limits<float>::quiet_NaN();
  in[2] = INFINITY;
  const DropoutSpec spec{0.0f, 5, 1, 9};
  EXPECT_TRUE(bitwise_equal(run_forward(in, {3, 1001}, spec), in));
  auto inplace = in;
  dropout_forward(cpu_ctx(), view_of(inplace, {3, 1001}), view_of(inplace, {3, 1001}), spec);
  EXPECT_TRUE(bitwise_equal(inplace, in));
  std::vector<float> dinp(in.size());
  dropout_backward(cpu_ctx(), view_of(dinp, {3, 1001}), view_of(in, {3, 1001}), spec);
  EXPECT_TRUE(bitwise_equal(dinp, in));
}

TEST(DropoutForward, SameSpecSameMaskAndEachOfSeedSiteSampleChangesIt) {
  const std::vector<float> ones(2 * 1000, 1.0f);
  const DropoutSpec spec{0.5f, 77, 4, 20};
  const auto base = run_forward(ones, {2, 1000}, spec);
  EXPECT_TRUE(bitwise_equal(run_forward(ones, {2, 1000}, spec), base));
  DropoutSpec other_seed = spec, other_site = spec, other_sample = spec;
  other_seed.seed = 78;
  other_site.site = 5;
  other_sample.first_sample = 22;
  // Independent masks at p = 0.5 agree on a given element with probability 1/2: on all 2000, never.
  EXPECT_FALSE(bitwise_equal(run_forward(ones, {2, 1000}, other_seed), base)) << "seed";
  EXPECT_FALSE(bitwise_equal(run_forward(ones, {2, 1000}, other_site), base)) << "site";
  EXPECT_FALSE(bitwise_equal(run_forward(ones, {2, 1000}, other_sample), base)) << "first_sample";
}

TEST(DropoutForward, RowsAreGlobalSamplesSoSplittingTheBatchChangesNothing) {
  ZT_SEEDED_RNG(rng);
  const std::int64_t N = 6 * 37;  // one sample's [6, 37] elements
  const auto in = rng.uniform(4 * N);
  const DropoutSpec spec{0.25f, 1234, 2, 40};
  const auto whole = run_forward(in, {4, 6, 37}, spec);
  DropoutSpec first = spec, second = spec;
  second.first_sample = spec.first_sample + 2;
  const auto a = run_forward({in.begin(), in.begin() + 2 * N}, {2, 6, 37}, first);
  const auto b = run_forward({in.begin() + 2 * N, in.end()}, {2, 6, 37}, second);
  EXPECT_TRUE(bitwise_equal(std::vector<float>(whole.begin(), whole.begin() + 2 * N), a)) << "samples g, g+1";
  EXPECT_TRUE(bitwise_equal(std::vector<float>(whole.begin() + 2 * N, whole.end()), b)) << "samples g+2, g+3";
}

TEST(DropoutBackward, AppliesTheForwardMaskToDout) {
  ZT_SEEDED_RNG(rng);
  const Shape shape{3, 4099};
  const DropoutSpec spec{0.2f, 99, 8, 7};
  const auto mask = run_forward(std::vector<float>(shape.numel(), 1.0f), shape, spec);  // 0 or 1 / (1 - p)
  auto dout = rng.uniform(shape.numel());
  std::vector<float> dinp(dout.size());
  dropout_backward(cpu_ctx(), view_of(dinp, shape), view_of(dout, shape), spec);
  std::vector<float> expected(dout.size());
  for (std::size_t i = 0; i < dout.size(); ++i) expected[i] = dout[i] * mask[i];
  EXPECT_TRUE(bitwise_equal(dinp, expected));
  dropout_backward(cpu_ctx(), view_of(dout, shape), view_of(dout, shape), spec);
  EXPECT_TRUE(bitwise_equal(dout, expected)) << "dinp aliasing dout";
}

TEST(Dropout, BitwiseIndependentOfThreadCount) {
  ZT_SEEDED_RNG(rng);
  const Shape shape{5, 9001};  // 5 samples x 3 tasks each: uneven over 2 and 3 threads
  const auto in = rng.uniform(shape.numel());
  const DropoutSpec spec{0.4f, 31337, 1, 100};
  const auto ref = run_forward(in, shape, spec, 1);
  for (int threads : {2, 3}) {
    SCOPED_TRACE(testing::Message() << "threads=" << threads);
    EXPECT_TRUE(bitwise_equal(run_forward(in, shape, spec, threads), ref));
    auto dout = in;
    std::vector<float> dinp(in.size());
    dropout_backward(cpu_ctx(threads), view_of(dinp, shape), view_of(dout, shape), spec);
    EXPECT_TRUE(bitwise_equal(dinp, ref));
  }
}

// BF16 activations go through fp32 in chunks of whole samples (kernels/cpu/bf16_staging.h, 16 MiB
// a chunk): samples of 2^21 elements (8 MiB staged) make chunks of two, and the third sample's
// mask is its own, as in fp32, not the first's again (a chunk that restarted the sample index).
TEST(Dropout, Bf16SamplesStagedInChunksKeepTheirOwnMasks) {
  constexpr std::int64_t B = 3, N = std::int64_t{1} << 21;
  const DropoutSpec spec{0.5f, /*seed=*/77, /*site=*/3, /*first_sample=*/11};
  std::vector<bf16> in(static_cast<std::size_t>(B * N), float_to_bf16(1.0f)), out(in.size());
  dropout_forward(cpu_ctx(2), view_of(out, {B, N}), view_of(in, {B, N}), spec);
  const std::vector<int> want = keep_mask(spec, B, N);
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < out.size(); ++i) wrong += (bf16_to_float(out[i]) != 0.0f) != (want[i] == 1) ? 1 : 0;
  EXPECT_EQ(wrong, 0) << "elements kept or dropped against dropout_keep";
}

TEST(Dropout, RejectsPOutsideZeroToOne) {
  std::vector<float> x(8);
  for (float p : {1.0f, -0.1f, 1.5f, std::numeric_limits<float>::quiet_NaN()}) {
    const DropoutSpec spec{p, 1, 0, 0};
    EXPECT_THROW(dropout_forward(cpu_ctx(), view_of(x, {2, 4}), view_of(x, {2, 4}), spec), InternalError) << p;
    EXPECT_THROW(dropout_backward(cpu_ctx(), view_of(x, {2, 4}), view_of(x, {2, 4}), spec), InternalError) << p;
  }
}

// The Philox counter bounds a sample's elements only where bits are drawn: attention without
// dropout at 32 heads and T 32768 (2^35 probabilities a sample) is not refused.
TEST(Dropout, TheCounterLimitBindsOnlyWhereBitsAreDrawn) {
  const std::int64_t limit = 4 * ((std::int64_t{1} << 32) - dropout_rules::kMaxBlocksPastEnd);
  const DropoutSpec off{0.0f, 1, 0, 0};
  const DropoutSpec on{0.1f, 1, 0, 0};
  EXPECT_NO_THROW(dropout_rules::check_spec(off, std::int64_t{32} * 32768 * 32768));
  EXPECT_NO_THROW(dropout_rules::check_spec(on, limit + 3));
  EXPECT_THROW(dropout_rules::check_spec(on, limit + 4), InternalError);
  EXPECT_THROW(dropout_rules::check_spec(on, std::int64_t{32} * 32768 * 32768), InternalError);
}

}  // namespace
}  // namespace zt::cpu
