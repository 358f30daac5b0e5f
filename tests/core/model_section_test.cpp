// The config's model section for each family: the keys only a family has, their defaults and
// refusals, and the round trip through to_json (engine/app/config/model_section.h).
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/app/config/run_config.h"
#include "models/llama/llama_family.h"
#include "tests/core/config_test_util.h"

namespace zt {
namespace {

// model.arch = "llama": its keys, their defaults (Llama's SwiGLU rule, n_kv_head = n_head), the
// round trip through to_json, and one line for each inconsistency or what a Llama cannot do yet.
TEST(RunConfig, LlamaArchKeysDefaultsRoundTripAndRefusals) {
  nlohmann::json doc = base();
  doc["model"]["arch"] = "llama";
  RunConfig c = parse_run_config(doc, "test.json");
  EXPECT_EQ(c.model.arch, "llama");
  llama::LlamaConfig l = llama::llama_config(c.model);
  EXPECT_EQ(l.n_kv_head, 2);
  EXPECT_EQ(l.hidden(), 256);  // 8/3 x 32 = 85, rounded up to 256
  EXPECT_FLOAT_EQ(l.rope_theta, 10000.0f);
  EXPECT_FALSE(l.tie_embeddings);
  EXPECT_EQ(l.vocab_size, 65);
  EXPECT_TRUE(std::any_of(c.derived.begin(), c.derived.end(),
                          [](const std::string& d) { return d.starts_with("model.intermediate_size = 256"); }));
  doc["model"].update(nlohmann::json{{"n_head", 4},
                                     {"n_kv_head", 1},
                                     {"intermediate_size", 48},
                                     {"rope_theta", 500000.0},
                                     {"norm_eps", 1e-6},
                                     {"tie_embeddings", true}});
  c = parse_run_config(doc, "test.json");
  l = llama::llama_config(c.model);
  EXPECT_EQ(l.n_kv_head, 1);
  EXPECT_EQ(l.hidden(), 48);
  EXPECT_TRUE(l.tie_embeddings);
  const nlohmann::json saved = c.to_json();
  EXPECT_EQ(saved["model"]["arch"], "llama");
  EXPECT_EQ(saved["model"]["norm_eps"], 1e-6);
  EXPECT_FALSE(saved["model"].contains("dropout"));
  const RunConfig again = parse_run_config(saved, "config.json");
  EXPECT_EQ(again.to_json(), saved);
  EXPECT_EQ(llama::llama_config(again.model_spec().model).rope_theta, 500000.0f);
  EXPECT_EQ(parse_run_config(base(), "test.json").to_json()["model"]["arch"], "gpt2");

  auto llama = [](nlohmann::json model, nlohmann::json others = nlohmann::json::object()) {
    nlohmann::json d = base();
    d["model"]["arch"] = "llama";
    if (!model.is_null()) d["model"].update(model);  // `{}` converts to null
    if (!others.is_null()) d.update(others);
    return d;
  };
  expect_error(llama({{"n_head", 4}, {"n_kv_head", 3}}),
               {"test.json", "model.n_head = 4 is not a multiple of model.n_kv_head = 3"});
  expect_error(llama({{"n_head", 32}}), {"the head size model.n_embd / model.n_head = 1 must be even for RoPE"});
  expect_error(llama({{"dropout", 0.1}}), {"model.dropout", "has no dropout"});
  expect_error(llama({{"rope_theta", 0.5}}), {"model.rope_theta", "out of range"});
  expect_error(llama({{"arch", "mamba"}}), {"model.arch", "gpt2, llama"});
  nlohmann::json gpt = base();
  gpt["model"]["n_kv_head"] = 1;
  expect_error(gpt, {"model.n_kv_head is a Llama key", "model.arch"});
  // On CUDA grouped-query heads need shapes the flash kernels serve (where cuDNN does not).
  EXPECT_EQ(parse_run_config(llama({{"n_head", 4}, {"n_kv_head", 2}}, {{"device", "cuda"}}), "t.json").device,
            Device::kCUDA);
  expect_error(llama({{"n_head", 2}, {"n_kv_head", 1}, {"n_embd", 20}}, {{"device", "cuda"}}),
               {"grouped-query heads", "head size of 8, 16, 32, 64 or 128 (here 10)"});
  expect_error(llama({{"n_head", 4}, {"n_kv_head", 2}}, {{"device", "cuda"}, {"train", {{"micro_batch", 20000}}}}),
               {"train.micro_batch x model.n_head <= 65535"});
  EXPECT_EQ(
      parse_run_config(llama({{"n_head", 4}, {"n_kv_head", 2}},
                             {{"device", "cuda"}, {"precision", {{"activations", "bf16"}, {"attention", "cudnn"}}}}),
                       "t.json")
          .attention_kernels,
      AttentionKernels::kCudnn);
  EXPECT_EQ(parse_run_config(llama({}, {{"train", {{"head_chunks", 2}}}}), "t.json").model_spec().layout.head_chunks,
            2);
  expect_error(llama({}, {{"device", "cuda"}, {"precision", {{"activations", "bf16"}, {"gelu_epilogue", true}}}}),
               {"precision.gelu_epilogue = true", "no GELU"});
  EXPECT_FALSE(parse_run_config(llama({}, {{"device", "cuda"}, {"precision", {{"activations", "bf16"}}}}), "t.json")
                   .gelu_epilogue);
  EXPECT_EQ(parse_run_config(llama({}, {{"train", {{"block_units", 2}}}}), "t.json").model_spec().layout.block_units,
            2);
}

}  // namespace
}  // namespace zt
