// Batch sampling: a batch is a pure function of (seed, stream, first sample), windows stay inside
// the tokens, targets are inputs shifted by one, and consecutive ranges of samples compose -- the
// property that lets ranks take disjoint slices of one global batch.
#include "engine/app/data/batch_sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "engine/base/core/check.h"

namespace zt::data {
namespace {

// Token i is i % 1000, so a window's position can be read from its first token.
std::vector<std::uint16_t> ramp(std::size_t n) {
  std::vector<std::uint16_t> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = static_cast<std::uint16_t>(i % 1000);
  return t;
}

struct Batch {
  std::vector<std::int32_t> inputs, targets;
  bool operator==(const Batch&) const = default;
};

Batch make_batch(const std::vector<std::uint16_t>& tokens, int B, int T, std::uint64_t seed, std::int64_t first,
                 std::uint32_t stream = kTrainStream) {
  Batch b{std::vector<std::int32_t>(static_cast<std::size_t>(B) * T),
          std::vector<std::int32_t>(static_cast<std::size_t>(B) * T)};
  fill_batch(tokens, B, T, seed, stream, first, b.inputs.data(), b.targets.data());
  return b;
}

TEST(BatchSampler, SameSeedAndSampleGiveTheSameBatch) {
  const auto tokens = ramp(5000);
  EXPECT_EQ(make_batch(tokens, 4, 16, 42, 100), make_batch(tokens, 4, 16, 42, 100));
  EXPECT_NE(make_batch(tokens, 4, 16, 42, 100), make_batch(tokens, 4, 16, 43, 100));
  EXPECT_NE(make_batch(tokens, 4, 16, 42, 100), make_batch(tokens, 4, 16, 42, 100, kValStream));
}

TEST(BatchSampler, WindowsStayInBoundsAndCoverTheRange) {
  const int T = 7;
  const std::int64_t n = 20;  // starts in [0, 12]
  std::vector<int> hits(static_cast<std::size_t>(n - T), 0);
  for (std::int64_t g = 0; g < 5000; ++g) {
    const std::int64_t s = sample_window_start(3, kTrainStream, g, n, T);
    ASSERT_GE(s, 0);
    ASSERT_LE(s, n - T - 1);
    ++hits[static_cast<std::size_t>(s)];
  }
  for (int h : hits) EXPECT_GT(h, 250) << "every start is drawn, roughly uniformly (expected ~385)";
  EXPECT_EQ(sample_window_start(3, kTrainStream, 9, T + 1, T), 0) << "one window fits exactly";
  EXPECT_THROW(sample_window_start(3, kTrainStream, 0, T, T), InternalError);
}

// A sample's window starts at its Philox block's first two words (one 64-bit number, low word
// first) modulo the number of starts. With seed 0, stream 0 and sample 0 that block is Random123's
// all-zero known answer (tests/core/philox_test.cpp), so the data order, which a resumed run's
// position depends on, is pinned to a published value rather than to itself.
TEST(BatchSampler, AWindowStartsAtItsPhiloxDrawModuloTheStarts) {
  const std::uint64_t zero_block_bits = 0xe169c58d6627e8d5ull;
  const int T = 64;
  for (const std::int64_t n : {std::int64_t{65}, std::int64_t{1000}, std::int64_t{1000003}, std::int64_t{1} << 40}) {
    EXPECT_EQ(sample_window_start(0, 0, 0, n, T),
              static_cast<std::int64_t>(zero_block_bits % static_cast<std::uint64_t>(n - T)))
        << n << " tokens";
  }
}

TEST(BatchSampler, TargetsAreInputsShiftedByOne) {
  const auto tokens = ramp(3000);
  const int B = 8, T = 32;
  const Batch b = make_batch(tokens, B, T, 9, 0);
  for (int r = 0; r < B; ++r) {
    const std::int64_t start = sample_window_start(9, kTrainStream, r, 3000, T);
    for (int t = 0; t < T; ++t) {
      const std::size_t i = static_cast<std::size_t>(r) * T + t;
      EXPECT_EQ(b.inputs[i], tokens[static_cast<std::size_t>(start + t)]);
      EXPECT_EQ(b.targets[i], tokens[static_cast<std::size_t>(start + t + 1)]);
    }
  }
}

TEST(BatchSampler, DifferentSamplesDrawDifferentWindows) {
  const auto tokens = ramp(100000);
  const Batch b = make_batch(tokens, 16, 8, 5, 0);
  int same_as_previous = 0;
  for (int r = 1; r < 16; ++r) same_as_previous += b.inputs[r * 8] == b.inputs[(r - 1) * 8];
  EXPECT_LE(same_as_previous, 1);
  EXPECT_NE(make_batch(tokens, 4, 8, 5, 0), make_batch(tokens, 4, 8, 5, 4));
}

TEST(BatchSampler, ConsecutiveSampleRangesCompose) {
  const auto tokens = ramp(4096);
  const int T = 16;
  const Batch whole = make_batch(tokens, 4, T, 77, 1000);
  const Batch first = make_batch(tokens, 2, T, 77, 1000), second = make_batch(tokens, 2, T, 77, 1002);
  Batch joined = first;
  joined.inputs.insert(joined.inputs.end(), second.inputs.begin(), second.inputs.end());
  joined.targets.insert(joined.targets.end(), second.targets.begin(), second.targets.end());
  EXPECT_EQ(whole, joined);
}

TEST(BatchSampler, UnigramEntropyOfUniformAndConstantSequences) {
  const int V = 50;
  std::vector<std::uint16_t> uniform(static_cast<std::size_t>(V) * 20);
  for (std::size_t i = 0; i < uniform.size(); ++i) uniform[i] = static_cast<std::uint16_t>(i % V);
  EXPECT_NEAR(unigram_entropy_nats(uniform, V), std::log(static_cast<double>(V)), 1e-12);
  EXPECT_EQ(unigram_entropy_nats(std::vector<std::uint16_t>(100, 7), V), 0.0);
  EXPECT_NEAR(unigram_entropy_nats(std::vector<std::uint16_t>{0, 0, 1, 1}, 256), std::log(2.0), 1e-12);
}

// From counts: the entropy of their frequencies, 0 for none.
TEST(BatchSampler, UnigramEntropyOfCounts) {
  EXPECT_NEAR(unigram_entropy_nats(std::vector<std::int64_t>{70, 30, 0, 0}),
              -(0.7 * std::log(0.7) + 0.3 * std::log(0.3)), 1e-12);
  EXPECT_EQ(unigram_entropy_nats(std::vector<std::int64_t>{0, 0, 5, 0}), 0.0);
  EXPECT_EQ(unigram_entropy_nats(std::vector<std::int64_t>{0, 0, 0, 0}), 0.0);
}

}  // namespace
}  // namespace zt::data

namespace zt::data {
namespace {

// Every rank's rows over steps and micro-batches: disjoint, and together exactly the samples one
// process with micro_batch B*N reads, in the same order per micro-step.
TEST(FirstSampleIndex, RanksTakeDisjointSlicesThatCoverTheGlobalBatch) {
  for (int world : {1, 2, 3, 4}) {
    for (int accum : {1, 3}) {
      const int B = 5, steps = 4;
      std::vector<int> seen(static_cast<std::size_t>(steps * accum * B * world), 0);
      for (int step = 0; step < steps; ++step) {
        for (int micro = 0; micro < accum; ++micro) {
          for (int rank = 0; rank < world; ++rank) {
            const std::int64_t first = first_sample_index(step, micro, accum, B, world, rank);
            EXPECT_EQ(first, first_sample_index(step, micro, accum, B * world, 1, 0) + rank * B)
                << "rank r reads rows [r*B, (r+1)*B) of the single-process micro-batch";
            for (int b = 0; b < B; ++b) ++seen.at(static_cast<std::size_t>(first + b));
          }
        }
      }
      for (std::size_t g = 0; g < seen.size(); ++g) {
        ASSERT_EQ(seen[g], 1) << "sample " << g << " world " << world << " accum " << accum;
      }
    }
  }
}

}  // namespace
}  // namespace zt::data
