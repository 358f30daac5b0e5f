// The GPT-2 parameter table matches Hugging Face's GPT2LMHeadModel state dict (names, shapes,
// order), units are contiguous, decay flags follow nanoGPT, and initialisation follows GPT-2.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <cmath>

#include "models/gpt/gpt_params.h"

namespace zt::gpt {
namespace {

const GptConfig kConfig{/*n_layer=*/2, /*n_head=*/4, /*n_embd=*/32, /*block_size=*/20, /*vocab_size=*/70};

TEST(GptParamTable, NamesShapesAndOrderFollowHuggingFace) {
  const ParamTable t = build_param_table(kConfig);
  ASSERT_EQ(t.units().size(), 4u);
  EXPECT_EQ(t.units()[0].name, "embeddings");
  EXPECT_EQ(t.units()[3].name, "final");
  const ParamSpec& wte = t.param(t.index_of("transformer.wte.weight"));
  EXPECT_EQ(wte.shape, (std::vector<std::int64_t>{128, 32}));  // 70 padded to a multiple of 64
  EXPECT_EQ(wte.hf_shape, (std::vector<std::int64_t>{70, 32}));
  const ParamSpec& c_attn = t.param(t.index_of("transformer.h.1.attn.c_attn.weight"));
  EXPECT_EQ(c_attn.shape, (std::vector<std::int64_t>{32, 96}));  // Conv1D: [in, out]
  EXPECT_EQ(t.param(t.index_of("transformer.h.0.mlp.c_proj.weight")).shape, (std::vector<std::int64_t>{128, 32}));
  const char* block_order[] = {"ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
                               "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
                               "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
  for (int l = 0; l < 2; ++l) {
    const UnitSpec& u = t.units()[static_cast<std::size_t>(block_unit(l))];
    ASSERT_EQ(u.params.size(), 12u);
    for (int i = 0; i < 12; ++i)
      EXPECT_EQ(t.param(u.params[i]).name, fmt::format("transformer.h.{}.{}", l, block_order[i]));
  }
}

TEST(GptParamTable, UnitsAreContiguousAndDecayOnlyOnMatrices) {
  const ParamTable t = build_param_table(kConfig);
  std::int64_t total = 0;
  for (const UnitSpec& u : t.units()) {
    std::int64_t offset = 0;
    for (int i : u.params) {
      EXPECT_EQ(t.param(i).offset, offset) << t.param(i).name;
      offset += t.param(i).numel;
      EXPECT_EQ(t.param(i).decays, t.param(i).shape.size() == 2) << t.param(i).name;
    }
    EXPECT_EQ(offset, u.numel);
    total += u.numel;
  }
  const std::int64_t C = 32, L = 2;
  EXPECT_EQ(total, 128 * C + 20 * C + L * (12 * C * C + 13 * C) + 2 * C);
}

TEST(GptInit, FollowsGpt2Initialisation) {
  const ParamTable t = build_param_table(kConfig);
  const std::uint64_t seed = 1234;
  std::vector<float> emb(static_cast<std::size_t>(t.units()[0].numel));
  init_unit_params(t, kConfig, embedding_unit(), seed, emb.data());
  const ParamSpec& wte = t.param(t.index_of("transformer.wte.weight"));
  double sum2 = 0;
  for (std::int64_t i = 0; i < 70 * 32; ++i) sum2 += double(emb[i]) * emb[i];
  EXPECT_NEAR(std::sqrt(sum2 / (70 * 32)), 0.02, 0.002);  // 2240 samples: std error ~1.5%
  for (std::int64_t i = 70 * 32; i < wte.numel; ++i) ASSERT_EQ(emb[i], 0.0f) << "padded vocabulary rows are zero";

  std::vector<float> blk(static_cast<std::size_t>(t.units()[1].numel));
  init_unit_params(t, kConfig, block_unit(0), seed, blk.data());
  const BlockParams p = block_views(t, 0, TensorView{blk.data(), DType::kF32, Device::kCPU, Shape{t.units()[1].numel}});
  for (std::int64_t i = 0; i < 32; ++i) {
    EXPECT_EQ(p.ln_1_w.as<float>()[i], 1.0f);
    EXPECT_EQ(p.ln_1_b.as<float>()[i], 0.0f);
    EXPECT_EQ(p.mlp_proj_b.as<float>()[i], 0.0f);
  }
  double proj2 = 0;
  for (std::int64_t i = 0; i < p.mlp_proj_w.numel(); ++i)
    proj2 += double(p.mlp_proj_w.as<float>()[i]) * p.mlp_proj_w.as<float>()[i];
  EXPECT_NEAR(std::sqrt(proj2 / p.mlp_proj_w.numel()), 0.02 / std::sqrt(2.0 * 2), 0.001);  // 1/sqrt(2 n_layer) scaling

  std::vector<float> again(blk.size());
  init_unit_params(t, kConfig, block_unit(0), seed, again.data());
  EXPECT_EQ(again, blk) << "initialisation is a pure function of the seed";
  init_unit_params(t, kConfig, block_unit(0), seed + 1, again.data());
  EXPECT_NE(again, blk);
}

}  // namespace
}  // namespace zt::gpt
