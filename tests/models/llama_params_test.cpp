// The Llama parameter table (issue 22, first part): Hugging Face LlamaForCausalLM's names, shapes
// and order (nn.Linear [out, in] weights; lm_head only when untied), Llama's SwiGLU width rule,
// the stacked q|k|v and gate|up views one matmul each reads, decay only on matrices, the
// initialisation (N(0, 0.02), unit RMSNorm gains, zero padded rows), and inconsistent configs
// named.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <utility>
#include <vector>

#include "models/llama/llama_params.h"
#include "models/model_family.h"

namespace zt::llama {
namespace {

const LlamaConfig kLlamaParamsConfig{/*n_layer=*/2,           /*n_head=*/4,
                                     /*n_kv_head=*/2,         /*n_embd=*/64,
                                     /*intermediate_size=*/0,
                                     /*block_size=*/32,       /*vocab_size=*/300};

TEST(LlamaParamTable, NamesShapesAndOrderFollowHuggingFace) {
  const ParamTable t = build_param_table(kLlamaParamsConfig);
  ASSERT_EQ(t.units().size(), 4u);
  const std::int64_t I = default_intermediate_size(64);  // 2/3 of 256 = 170, rounded up to 256
  EXPECT_EQ(I, 256);
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> want = {{"model.embed_tokens.weight", {300, 64}}};
  for (int l = 0; l < 2; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    for (auto [name, shape] : std::vector<std::pair<const char*, std::vector<std::int64_t>>>{
             {"input_layernorm.weight", {64}},
             {"self_attn.q_proj.weight", {64, 64}},
             {"self_attn.k_proj.weight", {32, 64}},  // 2 kv heads of 16
             {"self_attn.v_proj.weight", {32, 64}},
             {"self_attn.o_proj.weight", {64, 64}},
             {"post_attention_layernorm.weight", {64}},
             {"mlp.gate_proj.weight", {I, 64}},
             {"mlp.up_proj.weight", {I, 64}},
             {"mlp.down_proj.weight", {64, I}}}) {
      want.push_back({p + name, shape});
    }
  }
  want.push_back({"model.norm.weight", {64}});
  want.push_back({"lm_head.weight", {300, 64}});
  ASSERT_EQ(t.params().size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(t.param(static_cast<int>(i)).name, want[i].first);
    EXPECT_EQ(t.param(static_cast<int>(i)).hf_shape, want[i].second) << want[i].first;
    EXPECT_EQ(t.param(static_cast<int>(i)).decays, want[i].second.size() == 2) << want[i].first;
  }
  EXPECT_EQ(t.param(0).shape, (std::vector<std::int64_t>{320, 64}));  // vocabulary padded to 64
  // Tied: no lm_head; the final unit is the norm alone.
  LlamaConfig tied = kLlamaParamsConfig;
  tied.tie_embeddings = true;
  EXPECT_EQ(build_param_table(tied).params().size(), want.size() - 1);
  EXPECT_EQ(default_intermediate_size(4096), 11008);  // Llama 2 7B
}

TEST(LlamaParamTable, StackedViewsAndInitialisation) {
  const ParamTable t = build_param_table(kLlamaParamsConfig);
  std::vector<float> layer(static_cast<std::size_t>(t.units()[1].numel));
  const TensorView unit{layer.data(), DType::kF32, Device::kCPU, Shape{t.units()[1].numel}};
  const LayerParams p = layer_views(t, 0, unit);
  EXPECT_EQ(p.qkv_proj.shape, (Shape{128, 64}));  // q 64 + k 32 + v 32 rows
  EXPECT_EQ(p.qkv_proj.data, t.view(t.index_of("model.layers.0.self_attn.q_proj.weight"), unit).data);
  EXPECT_EQ(p.gate_up_proj.shape, (Shape{512, 64}));
  EXPECT_EQ(static_cast<float*>(p.gate_up_proj.data) + 256 * 64,
            t.view(t.index_of("model.layers.0.mlp.up_proj.weight"), unit).data);
  init_unit_params(t, kLlamaParamsConfig, 1, 42, layer.data());
  for (std::int64_t c = 0; c < 64; ++c) {
    EXPECT_EQ(p.input_norm.as<float>()[c], 1.0f);
    EXPECT_EQ(p.post_norm.as<float>()[c], 1.0f);
  }
  double sum = 0.0, sq = 0.0;
  const std::int64_t n = p.gate_up_proj.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    sum += p.gate_up_proj.as<float>()[i];
    sq += static_cast<double>(p.gate_up_proj.as<float>()[i]) * p.gate_up_proj.as<float>()[i];
  }
  EXPECT_NEAR(sum / n, 0.0, 0.002);
  EXPECT_NEAR(std::sqrt(sq / n), 0.02, 0.001);
  std::vector<float> emb(static_cast<std::size_t>(t.units()[0].numel), -1.0f);
  init_unit_params(t, kLlamaParamsConfig, 0, 42, emb.data());
  for (std::int64_t i = 300 * 64; i < 320 * 64; ++i) ASSERT_EQ(emb[i], 0.0f);  // padded rows
}

// Ranges as a rank's optimizer shard cuts them: the whole unit's values there, nothing elsewhere.
TEST(LlamaParamTable, ARangeDrawsTheWholeUnitsValuesThereAndNothingElse) {
  const ParamTable t = build_param_table(kLlamaParamsConfig);
  for (const int unit : {0, 1}) {
    const std::int64_t n = t.units()[static_cast<std::size_t>(unit)].numel;
    std::vector<float> whole(static_cast<std::size_t>(n));
    init_unit_params(t, kLlamaParamsConfig, unit, 42, whole.data());
    for (const auto& [begin, end] :
         std::vector<std::pair<std::int64_t, std::int64_t>>{{0, n}, {n / 4 + 3, n / 2}, {n - 65, n}, {1, 2}}) {
      std::vector<float> part(static_cast<std::size_t>(n), -7.0f);
      init_unit_params(t, kLlamaParamsConfig, unit, 42, part.data(), begin, end);
      for (std::int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(part[static_cast<std::size_t>(i)], i >= begin && i < end ? whole[static_cast<std::size_t>(i)] : -7.0f)
            << "unit " << unit << " range [" << begin << ", " << end << ") element " << i;
      }
    }
  }
}

TEST(LlamaConfigRules, InconsistentConfigsAreNamed) {
  LlamaConfig c = kLlamaParamsConfig;
  EXPECT_EQ(llama_config_error(c), "");
  c.n_kv_head = 3;
  EXPECT_NE(llama_config_error(c).find("not a multiple of n_kv_head"), std::string::npos);
  c = kLlamaParamsConfig;
  c.n_embd = 66;
  EXPECT_NE(llama_config_error(c).find("not divisible by n_head"), std::string::npos);
  c = kLlamaParamsConfig;
  c.n_embd = 4 * 5;  // head size 5: odd
  EXPECT_NE(llama_config_error(c).find("even for RoPE"), std::string::npos);
  c = kLlamaParamsConfig;
  c.rope_theta = 0.0f;
  EXPECT_NE(llama_config_error(c).find("rope_theta"), std::string::npos);
  EXPECT_THROW(build_param_table(c), std::exception);
}

// 2/3 of 4 n_embd, rounded up to a multiple of 256 only where it is not one already.
TEST(LlamaConfigRules, TheSwiGluWidthAtAnExactMultipleStaysThere) {
  EXPECT_EQ(default_intermediate_size(96), 256);    // 2 x 384 / 3 = 256
  EXPECT_EQ(default_intermediate_size(768), 2048);  // 2 x 3072 / 3 = 2048
  EXPECT_EQ(default_intermediate_size(100), 512);   // 266, rounded up
}

// A Hugging Face config.json leaving keys out means transformers' LlamaConfig defaults (4.x):
// an untied head, rms_norm_eps 1e-6, and Llama 2 7B's shape.
TEST(LlamaFamily, AHuggingFaceConfigLeavingKeysOutTakesTransformersDefaults) {
  const nlohmann::json keys = model_family("llama").model_keys_from_hf({{"model_type", "llama"}}, "config.json");
  EXPECT_EQ(keys.at("tie_embeddings"), false);
  EXPECT_EQ(keys.at("norm_eps").get<double>(), 1e-6);
  EXPECT_EQ(keys.at("n_layer"), 32);
  EXPECT_EQ(keys.at("n_head"), 32);
  EXPECT_EQ(keys.at("n_kv_head"), 32);
  EXPECT_EQ(keys.at("n_embd"), 4096);
  EXPECT_EQ(keys.at("intermediate_size"), 11008);
  EXPECT_EQ(keys.at("block_size"), 2048);
  EXPECT_EQ(keys.at("vocab_size"), 32000);
  EXPECT_EQ(keys.at("rope_theta").get<double>(), 10000.0);
  EXPECT_TRUE(keys.at("rope_scaling").is_null());
}

// A rope_scaling naming its kind twice, under "type" and "rope_type": transformers' LlamaConfig
// copies "type" over "rope_type", so "type" is the scaling built.
TEST(LlamaFamily, ARopeScalingsTypeWinsOverItsRopeType) {
  const nlohmann::json hf = {{"model_type", "llama"},
                             {"rope_scaling", {{"type", "linear"}, {"rope_type", "llama3"}, {"factor", 2.0}}}};
  const nlohmann::json keys = model_family("llama").model_keys_from_hf(hf, "config.json");
  EXPECT_EQ(keys.at("rope_scaling").value("rope_type", ""), "linear") << keys.at("rope_scaling").dump();
}

}  // namespace
}  // namespace zt::llama
