// The manifest's model object (see the header).
#include "engine/app/checkpoint/checkpoint_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>

#include "engine/app/checkpoint/checkpoint_manifest.h"
#include "engine/app/config/config_limits.h"
#include "engine/base/core/check.h"
#include "engine/base/core/config_reader.h"

namespace zt::ckpt {

nlohmann::json model_json(const ModelSpec& spec) {
  const ModelConfig& c = spec.model;
  nlohmann::json m = {{"type", c.arch},
                      {"n_layer", c.n_layer},
                      {"n_head", c.n_head},
                      {"n_embd", c.n_embd},
                      {"block_size", c.block_size},
                      {"vocab_size", c.vocab_size},
                      {"padded_vocab_size", c.padded_vocab_size()}};
  m.update(c.family_keys);
  return m;
}

std::vector<std::string> differing_model_keys(const nlohmann::json& a, const nlohmann::json& b) {
  std::vector<std::string> keys;
  for (const nlohmann::json* side : {&a, &b}) {
    if (!side->is_object()) continue;
    for (const auto& [key, value] : side->items()) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    }
  }
  // As written (2 and 2.0 are two values in a manifest), absent apart from any value.
  const auto value_in = [](const nlohmann::json& side, const std::string& key) {
    return side.is_object() && side.contains(key) ? side[key].dump() : std::string("absent");
  };
  const bool vocab_differs = value_in(a, "vocab_size") != value_in(b, "vocab_size");
  const bool family_differs = value_in(a, "type") != value_in(b, "type");
  std::erase_if(keys, [&](const std::string& key) {
    return value_in(a, key) == value_in(b, key) || (key == "padded_vocab_size" && vocab_differs) ||
           (family_differs && key != "type");
  });
  return keys;
}

namespace {

// The keys model_json writes for every family; the rest are the family's own.
constexpr const char* kSharedKeys[] = {"type",       "n_layer",    "n_head",           "n_embd",
                                       "block_size", "vocab_size", "padded_vocab_size"};

// A shape key within the model section's own range (docs/config.md), read whole: a manifest's
// number is not to wrap into an int, nor size a parameter table past any real model's.
int shape_key(const nlohmann::json& m, const char* key, std::int64_t most) {
  const std::optional<long long> value = json_integer_in(m.at(key), 1, most);
  if (!value)
    throw std::runtime_error(fmt::format("{} = {} is not an integer in [1, {}]", key, m.at(key).dump(), most));
  return static_cast<int>(*value);
}

ModelSpec parse_model(const nlohmann::json& m) {
  ModelSpec spec;
  ModelConfig& c = spec.model;
  c.arch = m.value("type", std::string(kDefaultModelFamily));
  if (!has_model_family(c.arch)) throw std::runtime_error("unknown model type \"" + c.arch + "\"");
  c.n_layer = shape_key(m, "n_layer", kMaxConfigLayersOrHeads);
  c.n_head = shape_key(m, "n_head", kMaxConfigLayersOrHeads);
  c.n_embd = shape_key(m, "n_embd", kMaxConfigDim);
  c.block_size = shape_key(m, "block_size", kMaxConfigDim);
  c.vocab_size = shape_key(m, "vocab_size", kMaxConfigVocab);
  for (const auto& [key, value] : m.items()) {
    if (std::find(std::begin(kSharedKeys), std::end(kSharedKeys), key) == std::end(kSharedKeys)) {
      c.family_keys[key] = value;
    }
  }
  return spec;
}

}  // namespace

ModelSpec model_spec_of(const CheckpointReader& reader) {
  const std::string source = reader.dir() + "/" + std::string(kManifestName);
  const nlohmann::json& m = reader.manifest().model;
  ModelSpec spec;
  std::string family_error;
  try {
    spec = parse_model(m);
    family_error = spec.family().config_error(spec.model);
  } catch (const std::exception& e) {  // nlohmann's exceptions too
    throw_input_error("{}: \"model\" is not a model config: {}", source, e.what());
  }
  const ModelConfig& c = spec.model;
  if (c.n_layer < 1 || c.n_head < 1 || c.n_embd < 1 || c.n_embd % c.n_head != 0 || c.block_size < 1 ||
      c.vocab_size < 1) {
    throw_input_error("{}: \"model\" {} is not a valid model config", source, m.dump());
  }
  if (!family_error.empty()) {
    throw_input_error("{}: \"model\" {} is not a valid {} config: {}", source, m.dump(), spec.family().display_name(),
                      family_error);
  }
  spec.layout = unit_layout_of(reader);
  if (spec.layout.head_chunks > spec.padded_vocab_size() / 64) {
    throw_input_error("{}: train.head_chunks {} exceeds the model's {} vocabulary chunks of 64", source,
                      spec.layout.head_chunks, spec.padded_vocab_size() / 64);
  }
  const std::string diff = table_difference(build_param_table(spec), reader.manifest().table);
  if (!diff.empty()) {
    throw_input_error("{}: the parameter table is not {}'s for {} with head_chunks {}, block_units {}: {}", source,
                      c.arch, m.dump(), spec.layout.head_chunks, spec.layout.block_units, diff);
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
