// Sampling (engine/app/trainer/text_sampler.h): the window a sampling model is built for, and
// that a model built for that window draws the same tokens as one built for the whole context
// (causal attention: the logits at the last real position ignore the positions after it).
#include "engine/app/trainer/text_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/models/gpt_test_util.h"

namespace zt::gpt {
namespace {

TEST(SamplingWindow, ThePromptAndTheDrawsAtMostTheLimit) {
  EXPECT_EQ(sampling_window(3, 10, 1024), 13);
  EXPECT_EQ(sampling_window(0, 10, 1024), 11) << "an empty prompt starts from one token";
  EXPECT_EQ(sampling_window(3, 0, 1024), 3);
  EXPECT_EQ(sampling_window(1000, 200, 1024), 1024) << "past the limit the window slides";
  EXPECT_EQ(sampling_window(5, 200, 131072), 205) << "a Llama 3 context is not built whole";
  EXPECT_EQ(sampling_window(0, 0, 0), 1);
}

TEST(SamplingWindow, ANarrowWindowDrawsWhatTheWholeContextDraws) {
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const GptConfig config{/*n_layer=*/2, /*n_head=*/2, /*n_embd=*/16, /*block_size=*/32, /*vocab_size=*/30};
  testing::GptFixture whole(config, 1, config.block_size, CheckpointPolicy{}, DType::kF32, seed);
  const std::vector<std::int32_t> prompt = {3, 1, 4, 1, 5};
  const int new_tokens = 9;
  const int window = sampling_window(prompt.size(), new_tokens, config.block_size);
  ASSERT_EQ(window, 14);
  GptModel narrow(config, 1, window, CheckpointPolicy{}, whole.tracker, whole.ctx);
  for (const float temperature : {0.8f, 1.5f}) {
    const SamplingOptions options{new_tokens, temperature, 0, seed, config.vocab_size};
    EXPECT_EQ(generate_tokens(narrow, *whole.store, prompt, options),
              generate_tokens(*whole.model, *whole.store, prompt, options))
        << "temperature " << temperature;
  }
}

// One draw per position (each keyed by it) from `logits`: how often each token came.
std::vector<int> draw_counts(const std::vector<float>& logits, const SamplingOptions& options, int draws) {
  TokenDraw draw(options, static_cast<int>(logits.size()));
  std::vector<int> counts(logits.size(), 0);
  for (int p = 0; p < draws; ++p) ++counts[static_cast<std::size_t>(draw(logits.data(), p))];
  return counts;
}

// The draws follow softmax(logits / T) over the tokens transformers keeps: top-k (those at or above
// the k-th logit), then top-p (the most likely while the mass before each is under p), on fresh
// random logits: every count within 5 standard deviations of its binomial expectation, and no
// token outside the kept set ever drawn.
TEST(TokenDraw, FollowsTheTemperatureSoftmaxOverTheTopKAndTopP) {
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(50);
  for (float& l : logits) l = normal(rng);
  constexpr int kDraws = 20000;
  for (const auto& [temperature, top_k, top_p] :
       {std::tuple{0.7f, 5, 1.0f}, std::tuple{1.0f, 0, 1.0f}, std::tuple{1.6f, 12, 1.0f}, std::tuple{1.0f, 0, 0.6f},
        std::tuple{1.6f, 12, 0.9f}, std::tuple{0.5f, 0, 0.05f}}) {
    SamplingOptions options;
    options.temperature = temperature;
    options.top_k = top_k;
    options.top_p = top_p;
    options.seed = seed;
    // The reference: the kept tokens' probabilities, in order of likelihood.
    std::vector<std::size_t> order(logits.size());
    for (std::size_t v = 0; v < order.size(); ++v) order[v] = v;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return logits[a] > logits[b]; });
    const float kth = top_k > 0 ? logits[order[static_cast<std::size_t>(top_k - 1)]] : logits[order.back()];
    std::vector<double> p(logits.size(), 0.0);
    double total = 0.0;
    for (const std::size_t v : order) {
      if (logits[v] >= kth) total += p[v] = std::exp((logits[v] - logits[order[0]]) / static_cast<double>(temperature));
    }
    double before = 0.0, kept_mass = 0.0;
    for (const std::size_t v : order) {
      if (p[v] == 0.0) continue;
      if (before > 0.0 && before >= top_p * total) {
        p[v] = 0.0;  // past the nucleus
        continue;
      }
      before += p[v];
      kept_mass += p[v];
    }
    const std::vector<int> counts = draw_counts(logits, options, kDraws);
    for (std::size_t v = 0; v < logits.size(); ++v) {
      const double q = p[v] / kept_mass;
      const double sd = std::sqrt(kDraws * q * (1 - q));
      EXPECT_LE(std::abs(counts[v] - kDraws * q), 5 * sd + 1e-9)
          << "token " << v << " at T " << temperature << ", top-k " << top_k << ", top-p " << top_p << ": " << counts[v]
          << " draws, expected " << kDraws * q;
    }
  }
}

// Four tokens share the highest logit: a top-2 draw keeps all four, as transformers' top-k does
// (it kept exactly two, the lowest ids); greedy decoding takes the lowest id, every time.
TEST(TokenDraw, TokensTiedWithTheKthStayInAndGreedyTakesTheLowestId) {
  std::vector<float> logits(30, -1.0f);
  for (const int v : {20, 21, 22, 27}) logits[static_cast<std::size_t>(v)] = 3.0f;
  logits[5] = 2.9f;  // below the tie: out of a top-2
  SamplingOptions options;
  options.temperature = 1.0f;
  options.top_k = 2;
  options.seed = std::random_device{}();
  const std::vector<int> counts = draw_counts(logits, options, 4000);
  for (std::size_t v = 0; v < logits.size(); ++v) {
    if (logits[v] == 3.0f) {
      EXPECT_GT(counts[v], 800) << "tied token " << v;
    } else {
      EXPECT_EQ(counts[v], 0) << "token " << v << " is below the 2nd logit";
    }
  }
  options.greedy = true;
  options.temperature = 5.0f;  // greedy ignores it
  options.top_k = 0;
  const std::vector<int> greedy = draw_counts(logits, options, 100);
  EXPECT_EQ(greedy[20], 100) << "the lowest id among the most likely";
}

// Top-p stops at the token whose mass before it reaches p, as transformers' TopPLogitsWarper removes
// those with the mass at or after them at most 1 - p: four equally likely tokens (top-k 4 keeps
// them alone, each exactly a quarter) at p = 0.5 keep two, never a third whose mass before is
// exactly a half.
TEST(TokenDraw, TopPStopsWhereTheMassBeforeReachesP) {
  std::vector<float> logits(10, -3.0f);
  for (const int v : {2, 4, 6, 8}) logits[static_cast<std::size_t>(v)] = 1.0f;
  SamplingOptions options;
  options.temperature = 1.0f;
  options.top_k = 4;
  options.top_p = 0.5f;
  options.seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << options.seed);
  const std::vector<int> counts = draw_counts(logits, options, 2000);
  EXPECT_EQ(std::count_if(counts.begin(), counts.end(), [](int c) { return c > 0; }), 2);
}

// A draw follows all 64 bits of the seed: seeds 2^32 apart draw other tokens (the high half
// dropped, --seed 1 and --seed 4294967297 drew the same sample).
TEST(TokenDraw, EveryBitOfTheSeedCounts) {
  const std::vector<float> logits(64, 0.0f);
  SamplingOptions low, high;
  for (SamplingOptions* options : {&low, &high}) {
    options->temperature = 1.0f;
    options->top_k = 0;
  }
  low.seed = 1;
  high.seed = (std::uint64_t{1} << 32) + 1;
  TokenDraw draw_low(low, 64), draw_high(high, 64);
  int same = 0;
  for (std::uint64_t position = 0; position < 64; ++position) {
    same += draw_low(logits.data(), position) == draw_high(logits.data(), position) ? 1 : 0;
  }
  EXPECT_LT(same, 16) << "of 64 uniform draws over 64 tokens, about one alike by chance";
}

// A tokenizer whose ids skip numbers (added tokens far past its vocabulary): the ids it has no
// token for are never drawn, however likely (drawn, they decoded to nothing: most of a sample
// printed empty), greedy included; the others keep their softmax among themselves.
TEST(TokenDraw, OnlyTheDrawableIdsAreDrawn) {
  std::vector<float> logits(12, 0.0f);
  for (const int v : {3, 4, 5, 6, 7, 8}) logits[static_cast<std::size_t>(v)] = 4.0f;  // the gap, most likely
  SamplingOptions options;
  options.temperature = 1.0f;
  options.top_k = 0;
  options.seed = std::random_device{}();
  options.drawable.assign(12, true);
  for (const int v : {3, 4, 5, 6, 7, 8}) options.drawable[static_cast<std::size_t>(v)] = false;
  const std::vector<int> counts = draw_counts(logits, options, 3000);
  for (std::size_t v = 0; v < logits.size(); ++v) {
    if (!options.drawable[v]) {
      EXPECT_EQ(counts[v], 0) << "token " << v << " has no text";
    } else {
      EXPECT_GT(counts[v], 300) << "token " << v << ": one of six equally likely drawable ids";
    }
  }
  options.greedy = true;
  EXPECT_EQ(draw_counts(logits, options, 10)[0], 10) << "greedy: the most likely drawable id";
}

TEST(TokenDraw, ALogitThatIsNotFiniteIsAnErrorNotAToken) {
  for (const float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    std::vector<float> logits(10, 0.5f);
    logits[7] = bad;
    SamplingOptions options;
    TokenDraw draw(options, 10);
    try {
      draw(logits.data(), 42);
      ADD_FAILURE() << "a draw from logits holding " << bad << " returned a token";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("position 42"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("token 7"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace zt::gpt
