// Activation checkpointing: recomputing a block's forward in backward must give bitwise the same
// gradients as keeping its activations, and the tracker must show exactly the predicted savings.
#include <gtest/gtest.h>

#include "models/gpt/activations.h"
#include "tests/models/gpt_test_util.h"

namespace zt::gpt {
namespace {

using testing::GptFixture;

const GptConfig kCheckpointingConfig{/*n_layer=*/3, /*n_head=*/2, /*n_embd=*/24, /*block_size=*/16, /*vocab_size=*/50};

CheckpointPolicy policy(const char* text) {
  CheckpointPolicy p;
  EXPECT_TRUE(CheckpointPolicy::parse(text, &p)) << text;
  return p;
}

// every:K recomputes layers 0, K, 2K, ... (the config's documented choice: a K past the model's
// layers still checkpoints layer 0), which the bits and the measured-equals-predicted peak would
// not show: any choice of layers gives the same gradients, and the prediction asks the same policy.
TEST(CheckpointPolicy, EveryKCheckpointsTheLayersFromTheFirst) {
  const CheckpointPolicy every3 = policy("every:3");
  for (int layer = 0; layer < 10; ++layer) EXPECT_EQ(every3.is_checkpointed(layer), layer % 3 == 0) << layer;
  EXPECT_TRUE(policy("every:100").is_checkpointed(0));
  EXPECT_TRUE(policy("all").is_checkpointed(5));
  EXPECT_FALSE(policy("none").is_checkpointed(0));
  EXPECT_FALSE(policy("selective").is_checkpointed(0));
  // 4 layers of 10 bytes over 100 resident, a head of 50: every:2 keeps layers 1 and 3 through the
  // forward (100 + 20 + 50 = 170 at its end); its backward then holds one recomputed layer beside
  // those still kept (layer 2 recomputed beside layer 1: 100 + 20).
  EXPECT_EQ(checkpointed_peak_bytes(policy("every:2"), 4, 100, 10, 50), 170);
  EXPECT_EQ(checkpointed_peak_bytes(policy("none"), 4, 100, 10, 50), 190);
  EXPECT_EQ(checkpointed_peak_bytes(policy("all"), 4, 100, 10, 50), 150);
}

// (parameter dtype, activation dtype)
class CheckpointingEquivalence : public ::testing::TestWithParam<std::pair<DType, DType>> {};

TEST_P(CheckpointingEquivalence, GradientsAreBitwiseIdenticalForEveryPolicy) {
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const auto [params, activations] = GetParam();
  GptFixture reference(kCheckpointingConfig, 3, 11, policy("none"), params, seed, activations);
  const float loss = reference.step();
  const auto grads = reference.grad_bytes();
  for (const char* p : {"all", "every:2", "every:3", "selective"}) {
    GptFixture f(kCheckpointingConfig, 3, 11, policy(p), params, seed, activations);
    EXPECT_EQ(f.step(), loss) << p;
    EXPECT_TRUE(f.grad_bytes() == grads) << "gradients differ with activation_checkpointing=" << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, CheckpointingEquivalence, testing::kPrecisionPairs, testing::precision_pair_name);

TEST(ActivationMemory, MeasuredPeakEqualsPredictionForEveryPolicy) {
  for (DType activations : {DType::kF32, DType::kBF16}) {
    for (const char* p : {"none", "all", "every:2", "selective"}) {
      GptFixture f(kCheckpointingConfig, 2, 16, policy(p), DType::kF32, 5, activations);
      f.tracker.reset_peaks();
      f.step();
      const MemorySnapshot s = f.tracker.snapshot();
      EXPECT_EQ(s.peak(MemCategory::kActivations),
                predict_activation_peak_bytes(kCheckpointingConfig, f.model->dims(), policy(p)))
          << p << " " << dtype_name(activations);
      EXPECT_EQ(s.current(MemCategory::kActivations), 0) << "activations must all be freed after backward";
    }
  }
}

TEST(ActivationMemory, Bf16ActivationsHalveEveryActivationButTheStatistics) {
  GptFixture fp32(kCheckpointingConfig, 2, 16, policy("none"), DType::kF32, 5, DType::kF32);
  GptFixture bf16(kCheckpointingConfig, 2, 16, policy("none"), DType::kF32, 5, DType::kBF16);
  for (GptFixture* f : {&fp32, &bf16}) {
    f->tracker.reset_peaks();
    f->step();
  }
  // Statistics and token ids stay 4 bytes: per block 4 BT, in the head 3 BT, tokens 2 BT (all live
  // at the peak, the end of forward, when nothing is checkpointed).
  const ActivationDims& d = fp32.model->dims();
  const std::int64_t stat_bytes = 4 * (4 * d.BT() * kCheckpointingConfig.n_layer + 3 * d.BT() + 2 * d.BT());
  const std::int64_t peak32 = fp32.tracker.snapshot().peak(MemCategory::kActivations);
  const std::int64_t peak16 = bf16.tracker.snapshot().peak(MemCategory::kActivations);
  EXPECT_EQ(peak16 - stat_bytes, (peak32 - stat_bytes) / 2);
}

TEST(ActivationMemory, CheckpointingAllSavesTheDocumentedAmount) {
  // docs/memory.md: when a block's activations I exceed the head's H,
  // peak(none) - peak(all) = (n_layer - 1) * I + H  (bytes).
  GptFixture none(kCheckpointingConfig, 2, 16, policy("none"), DType::kF32, 9);
  GptFixture all(kCheckpointingConfig, 2, 16, policy("all"), DType::kF32, 9);
  none.tracker.reset_peaks();
  all.tracker.reset_peaks();
  none.step();
  all.step();
  const ActivationDims& d = none.model->dims();
  const std::int64_t I = block_activation_bytes(d), H = head_activation_bytes(d);
  ASSERT_GT(I, H);
  const std::int64_t saved =
      none.tracker.snapshot().peak(MemCategory::kActivations) - all.tracker.snapshot().peak(MemCategory::kActivations);
  EXPECT_EQ(saved, (kCheckpointingConfig.n_layer - 1) * I + H);
  EXPECT_GT(saved, 0);
}

TEST(ParameterMemory, Bf16ParametersAndGradientsAreChargedTwoBytesEach) {
  GptFixture f(kCheckpointingConfig, 1, 4, policy("none"), DType::kBF16, 1);
  const std::int64_t n = f.model->table().total_numel();
  const MemorySnapshot s = f.tracker.snapshot();
  EXPECT_EQ(s.current(MemCategory::kParameters), 2 * n);
  EXPECT_EQ(s.current(MemCategory::kGradients), 2 * n);
}

}  // namespace
}  // namespace zt::gpt
