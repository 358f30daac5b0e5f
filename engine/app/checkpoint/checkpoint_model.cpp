// The manifest's model object (see the header).
#include "engine/app/checkpoint/checkpoint_model.h"

#include <fmt/format.h>

#include <string>

#include "engine/app/checkpoint/checkpoint_manifest.h"
#include "engine/base/core/check.h"
#include "engine/base/core/float_text.h"

namespace zt::ckpt {

nlohmann::json model_json(const ModelSpec& spec) {
  if (spec.arch == ModelArch::kGpt2) {
    const gpt::GptConfig& c = spec.gpt;
    return {{"type", "gpt2"},
            {"n_layer", c.n_layer},
            {"n_head", c.n_head},
            {"n_embd", c.n_embd},
            {"block_size", c.block_size},
            {"vocab_size", c.vocab_size},
            {"padded_vocab_size", c.padded_vocab_size()}};
  }
  const llama::LlamaConfig& c = spec.llama;
  return {{"type", "llama"},
          {"n_layer", c.n_layer},
          {"n_head", c.n_head},
          {"n_kv_head", c.n_kv_head},
          {"n_embd", c.n_embd},
          {"intermediate_size", c.hidden()},
          {"block_size", c.block_size},
          {"vocab_size", c.vocab_size},
          {"padded_vocab_size", c.padded_vocab_size()},
          {"rope_theta", shortest_decimal(c.rope_theta)},
          {"norm_eps", shortest_decimal(c.norm_eps)},
          {"tie_embeddings", c.tie_embeddings}};
}

namespace {

ModelSpec parse_model(const nlohmann::json& m) {
  ModelSpec spec;
  const std::string type = m.value("type", std::string("gpt2"));
  if (type != "gpt2" && type != "llama") throw std::runtime_error("unknown model type \"" + type + "\"");
  spec.arch = type == "llama" ? ModelArch::kLlama : ModelArch::kGpt2;
  gpt::GptConfig& g = spec.gpt;
  g.n_layer = m.at("n_layer").get<int>();
  g.n_head = m.at("n_head").get<int>();
  g.n_embd = m.at("n_embd").get<int>();
  g.block_size = m.at("block_size").get<int>();
  g.vocab_size = m.at("vocab_size").get<int>();
  if (spec.arch == ModelArch::kLlama) {
    llama::LlamaConfig& l = spec.llama;
    copy_shared_keys(g, l);
    l.n_kv_head = m.at("n_kv_head").get<int>();
    l.intermediate_size = m.at("intermediate_size").get<int>();
    l.rope_theta = m.at("rope_theta").get<float>();
    l.norm_eps = m.at("norm_eps").get<float>();
    l.tie_embeddings = m.at("tie_embeddings").get<bool>();
  }
  return spec;
}

}  // namespace

ModelSpec model_spec_of(const CheckpointReader& reader) {
  const std::string source = reader.dir() + "/" + std::string(kManifestName);
  const nlohmann::json& m = reader.manifest().model;
  ModelSpec spec;
  try {
    spec = parse_model(m);
  } catch (const std::exception& e) {  // nlohmann's exceptions too
    throw_input_error("{}: \"model\" is not a model config: {}", source, e.what());
  }
  const gpt::GptConfig& g = spec.gpt;
  if (g.n_layer < 1 || g.n_head < 1 || g.n_embd < 1 || g.n_embd % g.n_head != 0 || g.block_size < 1 ||
      g.vocab_size < 1) {
    throw_input_error("{}: \"model\" {} is not a valid model config", source, m.dump());
  }
  if (spec.arch == ModelArch::kLlama) {
    const std::string error = llama::llama_config_error(spec.llama);
    if (!error.empty()) throw_input_error("{}: \"model\" {} is not a valid Llama config: {}", source, m.dump(), error);
  }
  spec.layout = unit_layout_of(reader);
  if (spec.layout.head_chunks > spec.padded_vocab_size() / 64) {
    throw_input_error("{}: train.head_chunks {} exceeds the model's {} vocabulary chunks of 64", source,
                      spec.layout.head_chunks, spec.padded_vocab_size() / 64);
  }
  const std::string diff = table_difference(build_param_table(spec), reader.manifest().table);
  if (!diff.empty()) {
    throw_input_error("{}: the parameter table is not {}'s for {} with head_chunks {}, block_units {}: {}", source,
                      model_arch_name(spec.arch), m.dump(), spec.layout.head_chunks, spec.layout.block_units, diff);
  }
  return spec;
}

UnitLayout unit_layout_of(const CheckpointReader& reader) {
  const nlohmann::json& config = reader.manifest().config;
  auto read = [&](const char* key, int max_value) {
    if (!config.contains("train") || !config["train"].contains(key)) return 1;
    const nlohmann::json& v = config["train"][key];
    if (!v.is_number_integer() || v.get<int>() < 1 || v.get<int>() > max_value) {
      throw_input_error("{}/{}: train.{} {} is not an integer in [1, {}]", reader.dir(), kManifestName, key, v.dump(),
                        max_value);
    }
    return v.get<int>();
  };
  return {read("head_chunks", 1 << 20), read("block_units", 2)};
}

}  // namespace zt::ckpt
