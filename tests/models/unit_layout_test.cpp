// The unit layouts (train.block_units, train.head_chunks; models/gpt/gpt_params.h) on the CPU:
// blocks in attention and MLP units run the same kernels in the same order as whole blocks, so
// the loss and every gradient are bitwise the whole block's, with and without activation
// checkpointing, in fp32 and with bf16 parameters (whose fp32 copies then come and go per half);
// the same with the head in chunks against the chunked head with whole blocks.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "tests/models/gpt_test_util.h"

namespace zt::gpt {
namespace {

using testing::GptFixture;

const GptConfig kLayoutConfig{/*n_layer=*/3, /*n_head=*/2, /*n_embd=*/32, /*block_size=*/16, /*vocab_size=*/200};

TEST(UnitLayout, SplitBlocksGiveTheWholeBlocksBits) {
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  for (const char* ckpt : {"none", "all", "every:2"}) {
    CheckpointPolicy policy;
    ASSERT_TRUE(CheckpointPolicy::parse(ckpt, &policy));
    for (DType params : {DType::kF32, DType::kBF16}) {
      for (int chunks : {1, 2}) {
        SCOPED_TRACE(::testing::Message() << "checkpointing " << ckpt << ", " << dtype_name(params)
                                          << " parameters, head_chunks " << chunks);
        GptFixture whole(kLayoutConfig, 2, 16, policy, params, seed, DType::kF32, UnitLayout{chunks, 1});
        GptFixture split(kLayoutConfig, 2, 16, policy, params, seed, DType::kF32, UnitLayout{chunks, 2});
        const float a = whole.step(), b = split.step();
        EXPECT_EQ(std::memcmp(&a, &b, sizeof(float)), 0) << a << " vs " << b;
        const std::vector<float> ga = whole.grads_f32(), gb = split.grads_f32();
        ASSERT_EQ(ga.size(), gb.size());
        EXPECT_EQ(std::memcmp(ga.data(), gb.data(), ga.size() * sizeof(float)), 0) << "gradients differ";
      }
    }
  }
}

}  // namespace
}  // namespace zt::gpt
