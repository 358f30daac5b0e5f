// The config's model section for each family: the keys only a family has, their defaults and
// refusals, and the round trip through to_json (engine/app/config/model_section.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <memory>

#include "engine/app/config/run_config.h"
#include "engine/base/core/config_text.h"
#include "models/llama/llama_family.h"
#include "models/llama/llama_rope_scaling.h"
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
  // 0 given asks for the same rule, and is said the same way (docs/config.md: "printed as derived").
  doc["model"]["intermediate_size"] = 0;
  c = parse_run_config(doc, "test.json");
  EXPECT_TRUE(std::any_of(c.derived.begin(), c.derived.end(),
                          [](const std::string& d) { return d.starts_with("model.intermediate_size = 256"); }));
  doc["model"].erase("intermediate_size");
  // A run's config.json names the Llama keys derived from others (and the node's thread count) in
  // "derived": given again with a wider model, they follow it (they stayed the first model's: 4
  // key/value heads under 8 query heads, SwiGLU 256 under n_embd 128, a model nobody asked for).
  {
    nlohmann::json file = parse_run_config(doc, "test.json").run_file_json();
    const std::vector<std::string> derived = file["derived"];
    for (const char* key : {"model.n_kv_head", "model.intermediate_size", "train.num_threads"}) {
      EXPECT_NE(std::find(derived.begin(), derived.end(), key), derived.end()) << key;
    }
    take_derived_out(file, "config.json");
    file["model"]["n_head"] = 8;
    file["model"]["n_embd"] = 128;
    const llama::LlamaConfig wider = llama::llama_config(parse_run_config(file, "config.json").model);
    EXPECT_EQ(wider.n_kv_head, 8);
    EXPECT_EQ(wider.hidden(), 512);  // 8/3 x 128 = 342, rounded up to 512
    // Given, they stay given: not in "derived".
    nlohmann::json given = doc;
    given["model"]["n_kv_head"] = 1;
    given["model"]["intermediate_size"] = 64;
    given["train"] = {{"num_threads", 1}};
    const nlohmann::json kept = parse_run_config(given, "test.json").run_file_json();
    for (const char* key : {"model.n_kv_head", "model.intermediate_size", "train.num_threads"}) {
      EXPECT_EQ(kept.value("derived", nlohmann::json::array()).dump().find(key), std::string::npos) << key;
    }
  }
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
  {  // a --set of a key the shape checks read is named beside the file
    const std::string path = testing::TempDir() + "/llama_shape.json";
    std::ofstream(path) << llama(nlohmann::json::object()).dump();
    try {
      load_run_config(path, {"model.n_kv_head=3"});
      ADD_FAILURE() << "expected an InputError";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("config error in " + path + " and --set model.n_kv_head=3: model.n_head"),
                std::string::npos)
          << e.what();
    }
  }
  expect_error(llama({{"n_head", 32}}), {"the head size model.n_embd / model.n_head = 1 must be even for RoPE"});
  expect_error(llama({{"dropout", 0.1}}), {"model.dropout", "has no dropout"});
  // 0 is what a Llama does anyway: a GPT-2 config ("dropout": 0.0) switched by model.arch loads.
  EXPECT_EQ(parse_run_config(llama({{"dropout", 0.0}}), "test.json").to_json()["model"].contains("dropout"), false);
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

// model.rope_scaling (Hugging Face's, in its key names): absent or null is none; linear and llama3
// read, written back only where there is one, and round trip; each bad field refused in one line
// naming it, also where a --set gave it.
TEST(RunConfig, LlamaRopeScalingReadWrittenAndRefused) {
  auto llama = [](nlohmann::json scaling) {
    nlohmann::json d = base();
    d["model"]["arch"] = "llama";
    d["model"]["rope_scaling"] = std::move(scaling);
    return d;
  };
  const nlohmann::json llama3 = {{"rope_type", "llama3"},
                                 {"factor", 32.0},
                                 {"low_freq_factor", 1.0},
                                 {"high_freq_factor", 4.0},
                                 {"original_max_position_embeddings", 8192}};
  RunConfig c = parse_run_config(llama(llama3), "test.json");
  llama::LlamaConfig l = llama::llama_config(c.model);
  EXPECT_EQ(l.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(l.rope_scaling.factor, 32.0f);
  EXPECT_EQ(l.rope_scaling.low_freq_factor, 1.0f);
  EXPECT_EQ(l.rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(l.rope_scaling.original_max_position, 8192.0f);
  EXPECT_EQ(l.rope().theta, 10000.0f);
  const nlohmann::json saved = c.to_json();
  EXPECT_EQ(saved["model"]["rope_scaling"], llama3);
  EXPECT_EQ(parse_run_config(saved, "config.json").to_json(), saved);

  l = llama::llama_config(parse_run_config(llama({{"rope_type", "linear"}, {"factor", 4}}), "t.json").model);
  EXPECT_EQ(l.rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(l.rope_scaling.factor, 4.0f);
  // Under transformers' older name, as the Hugging Face export writes a linear one.
  l = llama::llama_config(parse_run_config(llama({{"type", "linear"}, {"factor", 4}}), "t.json").model);
  EXPECT_EQ(l.rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(l.rope_scaling.factor, 4.0f);
  EXPECT_EQ(llama::rope_scaling_hf_json(l.rope_scaling), (nlohmann::json{{"type", "linear"}, {"factor", 4.0}}));
  // A linear factor of 1 scales nothing: exported as none (transformers 4.40 refuses a factor of 1).
  l.rope_scaling.factor = 1.0f;
  EXPECT_EQ(llama::rope_scaling_hf_json(l.rope_scaling), nullptr);
  c = parse_run_config(llama(nullptr), "t.json");  // config.json's "none"
  EXPECT_EQ(llama::llama_config(c.model).rope_scaling.type, RopeScalingType::kNone);
  EXPECT_FALSE(c.to_json()["model"].contains("rope_scaling")) << "a manifest from before the key reads the same";

  expect_error(llama({{"rope_type", "yarn"}, {"factor", 4}}), {"model.rope_scaling.rope_type", "linear, llama3"});
  expect_error(llama({{"rope_type", "linear"}}), {"missing required key 'model.rope_scaling.factor'"});
  expect_error(llama({{"rope_type", "linear"}, {"factor", 0.5}}), {"model.rope_scaling.factor", "out of range"});
  expect_error(llama({{"rope_type", "linear"}, {"factor", 2}, {"low_freq_factor", 1}}),
               {"unknown key 'model.rope_scaling.low_freq_factor'"});
  expect_error(llama({{"rope_type", "llama3"}, {"factor", 8}}),
               {"model.rope_scaling.low_freq_factor", "rope_type llama3 needs it"});
  nlohmann::json inverted = llama3;
  inverted["low_freq_factor"] = 4.0;
  expect_error(llama(inverted),
               {"test.json", "model.rope_scaling.low_freq_factor = 4", "0 < low_freq_factor < high_freq_factor"});
  expect_error(llama(3), {"model.rope_scaling", "a JSON object"});
  nlohmann::json gpt = base();
  gpt["model"]["rope_scaling"] = llama3;
  expect_error(gpt, {"model.rope_scaling is a Llama key"});
  // A --set of a nested key is blamed by name.
  nlohmann::json doc = llama(llama3);
  auto sources = std::make_shared<OverrideSources>();
  (*sources)[apply_override(doc, "model.rope_scaling.factor=0.25").front()] = "--set model.rope_scaling.factor=0.25";
  try {
    parse_run_config(doc, "test.json", 1, sources);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--set model.rope_scaling.factor=0.25"), std::string::npos) << e.what();
  }
  // A section a --set gave whole: its keys' faults are that --set's, not the file's (which has no
  // such section); a section a --set of one key made lacks the others, named with the file.
  const auto error_with = [&](const std::string& assignment) {
    nlohmann::json d = llama(nullptr);
    d["model"].erase("rope_scaling");
    auto from = std::make_shared<OverrideSources>();
    (*from)[apply_override(d, assignment).front()] = "--set " + assignment;
    try {
      parse_run_config(d, "test.json", 1, from);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string whole = R"(model.rope_scaling={"rope_type": "linear", "factor": 0.5})";
  EXPECT_TRUE(error_with(whole).starts_with("config error in --set " + whole + ": key 'model.rope_scaling.factor'"))
      << error_with(whole);
  EXPECT_TRUE(error_with(R"(model.rope_scaling={"rope_type": "yarn"})").starts_with("config error in --set model."))
      << error_with(R"(model.rope_scaling={"rope_type": "yarn"})");
  EXPECT_TRUE(error_with("model.rope_scaling.factor=2")
                  .starts_with("config error in test.json and --set model.rope_scaling.factor=2: missing required key "
                               "'model.rope_scaling.rope_type'"))
      << error_with("model.rope_scaling.factor=2");
}

}  // namespace
}  // namespace zt
