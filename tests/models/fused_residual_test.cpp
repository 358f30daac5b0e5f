// The GPT-2 block's fused-residual branch on the CPU. Where the backend adds the residual in the
// attention projection's epilogue (CUDA's does), the block leaves ln_2 a plain LayerNorm of the
// sum it finds in resid2 instead of adding the residual there; forward, recompute (every
// checkpointing policy) and backward must then give what the unfused block gives. Only CUDA takes
// that branch in a run, so these tests run it on the CPU through a backend that says it fuses and
// computes the product then the add (cpu::residual_fusing_ops_backend): the same arithmetic, so the
// loss, the evaluation loss and every gradient must be equal bit for bit, fp32 and bf16, with and
// without dropout (whose residual mask keeps the attention half unfused).
#include <gtest/gtest.h>

#include <random>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/ops.h"
#include "tests/models/gpt_test_util.h"

namespace zt::gpt {
namespace {

using testing::GptFixture;

const GptConfig kFusedConfig{/*n_layer=*/3, /*n_head=*/2, /*n_embd=*/24, /*block_size=*/16, /*vocab_size=*/50};

struct StepResult {
  float loss = 0, eval_loss = 0;
  std::vector<unsigned char> grads;
};

StepResult train_and_evaluate(const char* policy_text, DType params, DType activations, float dropout,
                              std::uint64_t seed) {
  CheckpointPolicy policy;
  EXPECT_TRUE(CheckpointPolicy::parse(policy_text, &policy)) << policy_text;
  GptFixture f(kFusedConfig, 3, 11, policy, params, seed, activations, {}, dropout);
  StepResult r;
  r.loss = f.step();
  r.grads = f.grad_bytes();
  r.eval_loss = f.model->forward(*f.store, f.inputs.data(), f.targets.data(), {.training = false});
  f.model->release_activations();
  return r;
}

TEST(FusedResidual, TheStandInBackendFusesOnlyWhileItsGuardLives) {
  const ExecContext ctx{Device::kCPU, 1, nullptr};
  std::vector<float> out(6), bias(6);
  const TensorView vout{out.data(), DType::kF32, Device::kCPU, Shape{1, 6}},
      vbias{bias.data(), DType::kF32, Device::kCPU, Shape{6}};
  EXPECT_FALSE(ops::fuses_residual_into_matmul(ctx, vout, vbias));
  {
    const ops::ScopedCpuBackend fusing(cpu::residual_fusing_ops_backend());
    EXPECT_TRUE(ops::fuses_residual_into_matmul(ctx, vout, vbias));
  }
  EXPECT_FALSE(ops::fuses_residual_into_matmul(ctx, vout, vbias)) << "the guard restores the CPU's own backend";
}

// (parameter dtype, activation dtype)
class FusedResidualBlocks : public ::testing::TestWithParam<std::pair<DType, DType>> {};

TEST_P(FusedResidualBlocks, GiveTheUnfusedLossesAndGradientsBitForBit) {
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const auto [params, activations] = GetParam();
  for (const float dropout : {0.0f, 0.1f}) {
    for (const char* policy : {"none", "all", "every:2", "selective"}) {
      SCOPED_TRACE(::testing::Message() << "activation_checkpointing=" << policy << ", dropout " << dropout);
      const StepResult unfused = train_and_evaluate(policy, params, activations, dropout, seed);
      StepResult fused;
      {
        const ops::ScopedCpuBackend fusing(cpu::residual_fusing_ops_backend());
        fused = train_and_evaluate(policy, params, activations, dropout, seed);
      }
      EXPECT_EQ(fused.loss, unfused.loss);
      EXPECT_EQ(fused.eval_loss, unfused.eval_loss);
      EXPECT_TRUE(fused.grads == unfused.grads) << "gradients differ";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, FusedResidualBlocks, testing::kPrecisionPairs, testing::precision_pair_name);

}  // namespace
}  // namespace zt::gpt
