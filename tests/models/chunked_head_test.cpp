// The LM head in vocabulary chunks (train.head_chunks) against the whole head, on the CPU: the
// same loss, logits and gradients up to rounding (fp32 and bf16 activations, chunk counts that
// leave an uneven last chunk), an evaluation forward giving the training forward's loss bit for
// bit, gradient accumulation scales, and the activations the memory prediction counts.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "models/gpt/activations.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/models/gpt_test_util.h"
#include "tests/models/position_losses.h"

namespace zt::gpt {
namespace {

using testing::GptFixture;

const GptConfig kChunkedConfig{/*n_layer=*/2, /*n_head=*/2, /*n_embd=*/32, /*block_size=*/16, /*vocab_size=*/300};

TEST(ChunkedHead, ChunkColumnsRoundToSixtyFourAndCoverTheVocabulary) {
  EXPECT_EQ(head_chunk_columns(kChunkedConfig, 1), 320);  // Vp = 320: held whole
  EXPECT_EQ(head_chunk_columns(kChunkedConfig, 2), 192);  // 160 rounded up: chunks of 192 and 128
  EXPECT_EQ(head_chunk_columns(kChunkedConfig, 3), 128);  // 107 -> 128: 128, 128, 64
  EXPECT_EQ(head_chunk_columns(kChunkedConfig, 5), 64);
  EXPECT_THROW(head_chunk_columns(kChunkedConfig, 6), std::exception);  // more chunks than 64-column groups
  EXPECT_THROW(head_chunk_columns(kChunkedConfig, 0), std::exception);
}

TEST(ChunkedHead, SameLossLogitsAndGradientsAsTheWholeHead) {
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const int B = 3, T = 16;
  for (DType act : {DType::kF32, DType::kBF16}) {
    // bf16 activations round the logits, dlogits and dlnf once per chunk: a bf16 step's tolerance.
    const double tol = act == DType::kF32 ? 1e-5 : 2e-2;
    GptFixture whole(kChunkedConfig, B, T, CheckpointPolicy{}, DType::kF32, seed, act);
    std::vector<float> whole_logits(static_cast<std::size_t>(B * T * kChunkedConfig.vocab_size));
    whole.store->begin_step();
    const float whole_loss = whole.model->forward(*whole.store, whole.inputs.data(), whole.targets.data(),
                                                  {.logits_out = whole_logits.data(), .backward_loss_scale = 0.5f});
    whole.model->backward(*whole.store, 0.5f);
    const std::vector<float> whole_grads = whole.grads_f32();
    for (int chunks : {2, 3, 5}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(act) << " activations, " << chunks << " chunks");
      GptFixture f(kChunkedConfig, B, T, CheckpointPolicy{}, DType::kF32, seed, act, UnitLayout{chunks, 1});
      std::vector<float> logits(whole_logits.size(), NAN);
      f.store->begin_step();
      const float loss = f.model->forward(*f.store, f.inputs.data(), f.targets.data(),
                                          {.logits_out = logits.data(), .backward_loss_scale = 0.5f});
      f.model->backward(*f.store, 0.5f);
      const bool f32 = act == DType::kF32;
      EXPECT_NEAR(loss, whole_loss, (f32 ? 1e-6 : 1e-5) * std::abs(whole_loss));
      EXPECT_TRUE(test::close_normwise(logits, test::to_double(whole_logits), f32 ? 1e-6 : 1e-2));
      EXPECT_TRUE(test::close_normwise(f.grads_f32(), test::to_double(whole_grads), tol));
      // Evaluation takes the same chunked forward: the training forward's loss, bit for bit.
      const float eval_loss = f.model->forward(*f.store, f.inputs.data(), f.targets.data(), {.training = false});
      f.model->release_activations();
      EXPECT_EQ(eval_loss, loss);
    }
  }
}

TEST(ChunkedHead, HeadActivationsShrinkToOneChunk) {
  const ActivationDims whole = activation_dims(kChunkedConfig, 4, 16, Device::kCPU, DType::kBF16, 1);
  const ActivationDims chunked = activation_dims(kChunkedConfig, 4, 16, Device::kCPU, DType::kBF16, 5);
  EXPECT_FALSE(whole.head_chunked());
  EXPECT_TRUE(chunked.head_chunked());
  EXPECT_EQ(chunked.head_chunk_count(), 5);
  // a (BTC + BT Vp) + 4 (3 BT) whole; a (2 BTC + BT Vc) + 4 (6 BT) in chunks (BT = 64, C = 32).
  EXPECT_EQ(head_activation_bytes(whole), 2 * (64 * 32 + 64 * 320) + 4 * 3 * 64);
  EXPECT_EQ(head_activation_bytes(chunked), 2 * (2 * 64 * 32 + 64 * 64) + 4 * 6 * 64);
}

TEST(ChunkedHead, PositionLossesAreEachRowsCrossEntropy) {
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const int B = 2, T = 16;
  for (int chunks : {1, 3}) {
    SCOPED_TRACE(::testing::Message() << chunks << " chunks");
    GptFixture f(kChunkedConfig, B, T, CheckpointPolicy{}, DType::kF32, seed, DType::kF32, UnitLayout{chunks, 1});
    std::vector<float> logits(static_cast<std::size_t>(B * T * kChunkedConfig.vocab_size)), losses(B * T, NAN);
    const float loss = f.model->forward(*f.store, f.inputs.data(), f.targets.data(),
                                        {.training = false, .logits_out = logits.data(), .losses_out = losses.data()});
    zt::testing::expect_position_losses(losses, logits, f.targets, kChunkedConfig.vocab_size, loss);
  }
}

}  // namespace
}  // namespace zt::gpt
