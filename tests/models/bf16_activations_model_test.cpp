// The model with bf16 activations (docs/precision.md) against the same model in fp32: one step's
// loss and every unit's gradient, for fresh random weights and tokens. bf16 keeps 8 significant
// bits (relative rounding error <= 2^-8 per stored value), and the errors of a few roundings per
// layer add up through the blocks and the backward: observed normwise gradient errors are at most
// ~9e-3 and loss errors ~6e-5 relative over many seeds (ZT_TEST_PRINT_ERRORS=1 prints them), so
// the bounds are 3e-2 and 5e-4.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "engine/base/core/bf16.h"
#include "models/gpt/gpt_params.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/models/gpt_test_util.h"

namespace zt::gpt {
namespace {

using testing::GptFixture;

std::vector<float> unit_grad(const GptFixture& f, int unit) {
  const TensorView g = f.store->grad_shard(unit);
  std::vector<float> out(static_cast<std::size_t>(g.numel()));
  cpu::cast(f.ctx, TensorView{out.data(), DType::kF32, Device::kCPU, g.shape}, g);
  return out;
}

TEST(Bf16ActivationModel, LossAndEveryGradientTrackTheFp32Model) {
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const GptConfig config{/*n_layer=*/4, /*n_head=*/4, /*n_embd=*/64, /*block_size=*/32, /*vocab_size=*/97};
  for (const char* checkpointing : {"none", "all"}) {
    CheckpointPolicy policy;
    ASSERT_TRUE(CheckpointPolicy::parse(checkpointing, &policy));
    GptFixture fp32(config, 3, 32, policy, DType::kF32, seed, DType::kF32);
    GptFixture bf16(config, 3, 32, policy, DType::kF32, seed, DType::kBF16);
    const float loss32 = fp32.step(), loss16 = bf16.step();
    if (std::getenv("ZT_TEST_PRINT_ERRORS") != nullptr) std::printf("    loss %.6f vs %.6f\n", loss16, loss32);
    EXPECT_LE(std::abs(loss16 - loss32), 5e-4 * std::abs(loss32)) << checkpointing;
    for (std::size_t u = 0; u < fp32.model->table().units().size(); ++u) {
      const int unit = static_cast<int>(u);
      EXPECT_TRUE(zt::test::close_normwise(unit_grad(bf16, unit), zt::test::to_double(unit_grad(fp32, unit)), 3e-2))
          << "unit " << unit << ", checkpointing " << checkpointing;
    }
  }
}

// bf16 working weights reach the kernels as they are stored (GptModel::acquire_for_kernels): the
// same step as a model whose fp32 parameters hold the same bf16 values, bitwise in the loss and in
// every gradient but the embeddings' (rounded once into the bf16 gradients either way), and without
// the fp32 unit copies an fp32-activation run needs. The embedding unit takes two contributions
// (the tied head, then the scatter-add), which bf16 gradients round one at a time: within 2^-7
// normwise of the fp32 sum.
TEST(Bf16ActivationModel, Bf16WorkingWeightsStepLikeFp32WeightsOfTheSameValues) {
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const GptConfig config{/*n_layer=*/3, /*n_head=*/4, /*n_embd=*/64, /*block_size=*/32, /*vocab_size=*/97};
  for (const char* checkpointing : {"none", "all"}) {
    CheckpointPolicy policy;
    ASSERT_TRUE(CheckpointPolicy::parse(checkpointing, &policy));
    GptFixture p16(config, 3, 32, policy, DType::kBF16, seed, DType::kBF16);
    GptFixture p32(config, 3, 32, policy, DType::kF32, seed, DType::kBF16);
    for (std::size_t u = 0; u < p32.model->table().units().size(); ++u) {
      const TensorView w = p32.store->working_shard(static_cast<int>(u));
      for (std::int64_t i = 0; i < w.numel(); ++i) w.as<float>()[i] = round_to_bf16(w.as<float>()[i]);
    }
    const float loss16 = p16.step(), loss32 = p32.step();
    EXPECT_EQ(std::bit_cast<std::uint32_t>(loss16), std::bit_cast<std::uint32_t>(loss32))
        << loss16 << " vs " << loss32 << ", checkpointing " << checkpointing;
    for (std::size_t u = 0; u < p32.model->table().units().size(); ++u) {
      const int unit = static_cast<int>(u);
      const std::vector<float> g16 = unit_grad(p16, unit), g32 = unit_grad(p32, unit);
      if (unit == embedding_unit()) {
        EXPECT_TRUE(zt::test::close_normwise(g16, zt::test::to_double(g32), 1.0 / 128)) << checkpointing;
        continue;
      }
      std::size_t differing = 0;
      for (std::size_t i = 0; i < g32.size(); ++i) differing += round_to_bf16(g32[i]) != g16[i];
      EXPECT_EQ(differing, 0u) << "unit " << unit << ", checkpointing " << checkpointing;
    }
    EXPECT_EQ(p16.tracker.snapshot().peak(MemCategory::kWorkspace),
              p32.tracker.snapshot().peak(MemCategory::kWorkspace))
        << "bf16 weights with bf16 activations need no fp32 unit copies";
  }
}

}  // namespace
}  // namespace zt::gpt
