// Sampling (engine/app/trainer/text_sampler.h): the window a sampling model is built for, and
// that a model built for that window draws the same tokens as one built for the whole context
// (causal attention: the logits at the last real position ignore the positions after it).
#include "engine/app/trainer/text_sampler.h"

#include <gtest/gtest.h>

#include <random>

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

}  // namespace
}  // namespace zt::gpt
