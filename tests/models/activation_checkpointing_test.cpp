// Activation checkpointing: recomputing a block's forward in backward must give bitwise the same
// gradients as keeping its activations, and the tracker must show exactly the predicted savings.
#include <gtest/gtest.h>

#include "models/gpt/activations.h"
#include "tests/models/gpt_test_util.h"

namespace zt::gpt {
namespace {

using testing::GptFixture;

const GptConfig kConfig{/*n_layer=*/3, /*n_head=*/2, /*n_embd=*/24, /*block_size=*/16, /*vocab_size=*/50};

CheckpointPolicy policy(const char* text) {
  CheckpointPolicy p;
  EXPECT_TRUE(CheckpointPolicy::parse(text, &p)) << text;
  return p;
}

class CheckpointingEquivalence : public ::testing::TestWithParam<DType> {};

TEST_P(CheckpointingEquivalence, GradientsAreBitwiseIdenticalForEveryPolicy) {
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  GptFixture reference(kConfig, 3, 11, policy("none"), GetParam(), seed);
  const float loss = reference.step();
  const auto grads = reference.grad_bytes();
  for (const char* p : {"all", "every:2", "every:3"}) {
    GptFixture f(kConfig, 3, 11, policy(p), GetParam(), seed);
    EXPECT_EQ(f.step(), loss) << p;
    EXPECT_TRUE(f.grad_bytes() == grads) << "gradients differ with activation_checkpointing=" << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, CheckpointingEquivalence, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& info) { return info.param == DType::kF32 ? "f32" : "bf16"; });

TEST(ActivationMemory, MeasuredPeakEqualsPredictionForEveryPolicy) {
  for (const char* p : {"none", "all", "every:2"}) {
    GptFixture f(kConfig, 2, 16, policy(p), DType::kF32, 5);
    f.tracker.reset_peaks();
    f.step();
    const MemorySnapshot s = f.tracker.snapshot();
    EXPECT_EQ(s.peak(MemCategory::kActivations), predict_activation_peak_bytes(kConfig, f.model->dims(), policy(p)))
        << p;
    EXPECT_EQ(s.current(MemCategory::kActivations), 0) << "activations must all be freed after backward";
  }
}

TEST(ActivationMemory, CheckpointingAllSavesTheDocumentedAmount) {
  // docs/memory.md: when a block's activations I exceed the head's H,
  // peak(none) - peak(all) = (n_layer - 1) * I + H  (elements of 4 bytes).
  GptFixture none(kConfig, 2, 16, policy("none"), DType::kF32, 9);
  GptFixture all(kConfig, 2, 16, policy("all"), DType::kF32, 9);
  none.tracker.reset_peaks();
  all.tracker.reset_peaks();
  none.step();
  all.step();
  const ActivationDims& d = none.model->dims();
  const std::int64_t I = block_activation_numel(d), H = head_activation_numel(d);
  ASSERT_GT(I, H);
  const std::int64_t saved = none.tracker.snapshot().peak(MemCategory::kActivations) -
                             all.tracker.snapshot().peak(MemCategory::kActivations);
  EXPECT_EQ(saved, ((kConfig.n_layer - 1) * I + H) * 4);
  EXPECT_GT(saved, 0);
}

TEST(ParameterMemory, Bf16ParametersAndGradientsAreChargedTwoBytesEach) {
  GptFixture f(kConfig, 1, 4, policy("none"), DType::kBF16, 1);
  const std::int64_t n = f.model->table().total_numel();
  const MemorySnapshot s = f.tracker.snapshot();
  EXPECT_EQ(s.current(MemCategory::kParameters), 2 * n);
  EXPECT_EQ(s.current(MemCategory::kGradients), 2 * n);
}

}  // namespace
}  // namespace zt::gpt
