// The training step's fused loss (ForwardOptions::backward_loss_scale: the cross-entropy's gradient
// taken in the forward's pass over the logits) against the forward-then-backward path, on the CPU:
// the loss and every gradient bitwise equal (the CPU twin runs the same two kernels), for fp32 and
// bf16 activations, a padded vocabulary and accumulation scales; a backward with another scale is
// refused. The CUDA kernel is held to the unfused one in tests/gpu and tests/emulation.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <string>

#include "tests/models/gpt_test_util.h"

namespace zt::gpt {
namespace {

using testing::GptFixture;

TEST(FusedLoss, SameLossAndGradientsBitForBitAsForwardThenBackward) {
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const GptConfig config{/*n_layer=*/2, /*n_head=*/2, /*n_embd=*/32, /*block_size=*/16, /*vocab_size=*/97};
  for (DType act : {DType::kF32, DType::kBF16}) {
    for (float scale : {1.0f, 0.25f}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(act) << " activations, loss_scale " << scale);
      GptFixture plain(config, 3, 16, CheckpointPolicy{}, DType::kF32, seed, act);
      GptFixture fused(config, 3, 16, CheckpointPolicy{}, DType::kF32, seed, act);
      plain.store->begin_step();
      const float plain_loss = plain.model->forward(*plain.store, plain.inputs.data(), plain.targets.data());
      plain.model->backward(*plain.store, scale);
      fused.store->begin_step();
      const float fused_loss =
          fused.model->forward(*fused.store, fused.inputs.data(), fused.targets.data(), {.backward_loss_scale = scale});
      fused.model->backward(*fused.store, scale);
      EXPECT_EQ(std::memcmp(&plain_loss, &fused_loss, sizeof(float)), 0) << plain_loss << " vs " << fused_loss;
      const auto a = plain.grad_bytes(), b = fused.grad_bytes();
      ASSERT_EQ(a.size(), b.size());
      EXPECT_TRUE(a == b) << "gradients differ";
      bool any_nonzero = false;
      for (unsigned char byte : b) any_nonzero = any_nonzero || byte != 0;
      EXPECT_TRUE(any_nonzero) << "the step produced gradients";
    }
  }
}

TEST(FusedLoss, BackwardWithAnotherScaleIsRefused) {
  const GptConfig config{/*n_layer=*/1, /*n_head=*/2, /*n_embd=*/16, /*block_size=*/8, /*vocab_size=*/11};
  GptFixture f(config, 2, 8, CheckpointPolicy{}, DType::kF32, 7);
  f.store->begin_step();
  f.model->forward(*f.store, f.inputs.data(), f.targets.data(), {.backward_loss_scale = 0.5f});
  try {
    f.model->backward(*f.store, 1.0f);
    FAIL() << "backward accepted a loss_scale the forward did not use";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("backward_loss_scale 0.5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zt::gpt
