// Gradient accumulation and dropout at the model level: k micro-batches of b with loss scale 1/k
// give the gradient of one batch of k*b; dropout masks follow the global sample index, so any
// split of a batch into micro-batches (or ranks) sees the same masks; dropout 0 is the plain path;
// recomputation under activation checkpointing regenerates the same masks.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/models/gpt_test_util.h"

namespace zt::gpt {
namespace {

using testing::GptFixture;

const GptConfig kConfig{/*n_layer=*/2, /*n_head=*/2, /*n_embd=*/16, /*block_size=*/12, /*vocab_size=*/30};

std::vector<float> grads_f32(const GptFixture& f) {
  std::vector<float> out;
  for (std::size_t u = 0; u < f.model->table().units().size(); ++u) {
    const TensorView g = f.store->grad_shard(static_cast<int>(u));
    out.insert(out.end(), g.as<float>(), g.as<float>() + g.numel());
  }
  return out;
}

double normwise_error(const std::vector<float>& a, const std::vector<float>& b) {
  double max_diff = 0, max_ref = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(double(a[i]) - b[i]));
    max_ref = std::max(max_ref, std::abs(double(b[i])));
  }
  return max_diff / max_ref;
}

// Gradient of the mean loss over a batch of 4 rows, computed as one batch of 4 or as `k`
// micro-batches of 4/k rows (loss scale 1/k), with dropout p.
std::vector<float> batch_gradient(int k, float p, std::uint64_t seed, float* loss_out) {
  const int rows = 4 / k, T = 10;
  GptFixture f(kConfig, rows, T, CheckpointPolicy{}, DType::kF32, seed);
  GptModel model(kConfig, rows, T, CheckpointPolicy{}, f.tracker, f.ctx, p, seed);
  GptFixture full(kConfig, 4, T, CheckpointPolicy{}, DType::kF32, seed);  // the batch of 4 rows
  f.store->begin_step();
  double loss = 0;
  for (int micro = 0; micro < k; ++micro) {
    const std::size_t off = static_cast<std::size_t>(micro) * rows * T;
    loss += model.forward(*f.store, full.inputs.data() + off, full.targets.data() + off,
                          {.training = true, .first_sample = micro * rows});
    model.backward(*f.store, 1.0f / static_cast<float>(k));
  }
  *loss_out = static_cast<float>(loss / k);
  return grads_f32(f);
}

TEST(GradientAccumulation, MicroBatchesEqualOneBatch) {
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  float loss1 = 0, loss2 = 0, loss4 = 0;
  const auto g1 = batch_gradient(1, 0.0f, seed, &loss1);
  const auto g2 = batch_gradient(2, 0.0f, seed, &loss2);
  const auto g4 = batch_gradient(4, 0.0f, seed, &loss4);
  // fp32: the same products summed in another order (rows split across micro-batches, then the
  // 1/k-scaled contributions added): a few ulps of the largest gradient.
  EXPECT_LT(normwise_error(g2, g1), 1e-5);
  EXPECT_LT(normwise_error(g4, g1), 1e-5);
  EXPECT_NEAR(loss2, loss1, 1e-5 * loss1);
  EXPECT_NEAR(loss4, loss1, 1e-5 * loss1);
}

TEST(Dropout, MasksFollowTheGlobalSampleSoAnySplitAgrees) {
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  float loss1 = 0, loss2 = 0, loss_off = 0;
  const auto g1 = batch_gradient(1, 0.3f, seed, &loss1);
  const auto g2 = batch_gradient(2, 0.3f, seed, &loss2);
  const auto g0 = batch_gradient(1, 0.0f, seed, &loss_off);
  EXPECT_LT(normwise_error(g2, g1), 1e-5) << "same masks whichever micro-batch a sample is in";
  EXPECT_NEAR(loss2, loss1, 1e-5 * loss1);
  EXPECT_GT(normwise_error(g1, g0), 1e-2) << "dropout 0.3 must change the gradient";
}

TEST(Dropout, ZeroProbabilityIsExactlyThePlainPath) {
  GptFixture plain(kConfig, 2, 10, CheckpointPolicy{}, DType::kF32, 3);
  const float loss = plain.step();
  GptFixture f(kConfig, 2, 10, CheckpointPolicy{}, DType::kF32, 3);
  GptModel model(kConfig, 2, 10, CheckpointPolicy{}, f.tracker, f.ctx, /*dropout=*/0.0f, /*seed=*/99);
  f.store->begin_step();
  EXPECT_EQ(model.forward(*f.store, f.inputs.data(), f.targets.data(), {.training = true, .first_sample = 7}), loss);
  model.backward(*f.store);
  EXPECT_TRUE(f.grad_bytes() == plain.grad_bytes());
}

TEST(Dropout, CheckpointingRecomputesTheSameMasks) {
  std::vector<std::vector<unsigned char>> grads;
  for (const char* p : {"none", "all"}) {
    CheckpointPolicy policy;
    ASSERT_TRUE(CheckpointPolicy::parse(p, &policy));
    GptFixture f(kConfig, 2, 10, policy, DType::kF32, 11);
    GptModel model(kConfig, 2, 10, policy, f.tracker, f.ctx, 0.2f, 11);
    f.store->begin_step();
    model.forward(*f.store, f.inputs.data(), f.targets.data(), {.training = true, .first_sample = 5});
    model.backward(*f.store);
    grads.push_back(f.grad_bytes());
  }
  EXPECT_TRUE(grads[0] == grads[1]) << "bitwise equal gradients with and without recomputation";
}

TEST(Dropout, EvaluationIgnoresDropout) {
  GptFixture plain(kConfig, 2, 10, CheckpointPolicy{}, DType::kF32, 4);
  GptModel dropped(kConfig, 2, 10, CheckpointPolicy{}, plain.tracker, plain.ctx, 0.5f, 4);
  const float eval_loss = dropped.forward(*plain.store, plain.inputs.data(), plain.targets.data(), {.training = false});
  dropped.release_activations();
  EXPECT_EQ(eval_loss,
            plain.model->forward(*plain.store, plain.inputs.data(), plain.targets.data(), {.training = false}));
}

}  // namespace
}  // namespace zt::gpt
