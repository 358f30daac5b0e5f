// model.rope_scaling: the config's keys, the manifest's and Hugging Face's (see the header).
#include "models/llama/llama_rope_scaling.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <stdexcept>

#include "engine/base/core/check.h"
#include "engine/base/core/float_text.h"
#include "models/hf_config_reader.h"

namespace zt::llama {

namespace {

constexpr int kMaxOriginalPositions = 1 << 24;  // exact as a float

RopeScalingType type_named(const std::string& name) {
  if (name == "linear") return RopeScalingType::kLinear;
  if (name == "llama3") return RopeScalingType::kLlama3;
  throw std::invalid_argument("rope_type \"" + name + "\" is not one of: linear, llama3");
}

}  // namespace

RopeScaling read_rope_scaling(ConfigReader& model_section) {
  RopeScaling s;
  std::optional<ConfigReader> section = model_section.optional_section("rope_scaling");
  if (!section) return s;
  ConfigReader& r = *section;
  // Hugging Face's names for the type: "rope_type", or "type" as transformers before 4.43 wrote it
  // (and this export writes a linear one, which those load); transformers takes "type" over it.
  const char* type_key = r.has("type") ? "type" : "rope_type";
  for (const char* key : {type_key, "factor"}) {
    if (!r.has(key))
      throw_input_error("config error in {}: missing required key '{}'", r.section_sources(), r.dotted(key));
  }
  if (r.has("type") && r.has("rope_type")) r.get_string("rope_type", "");  // read: the other name
  s.type = type_named(r.get_enum(type_key, "", {"linear", "llama3"}));
  s.factor = static_cast<float>(r.get_double("factor", 1.0, 1.0, 1e6));
  if (s.type == RopeScalingType::kLlama3) {
    for (const char* key : {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
      if (!r.has(key)) {
        throw_input_error("config error in {}: missing required key '{}' (rope_type llama3 needs it)",
                          r.section_sources(), r.dotted(key));
      }
    }
    s.low_freq_factor = static_cast<float>(r.get_double("low_freq_factor", 1.0, 1e-6, 1e6));
    s.high_freq_factor = static_cast<float>(r.get_double("high_freq_factor", 4.0, 1e-6, 1e6));
    s.original_max_position =
        static_cast<float>(r.get_int("original_max_position_embeddings", 8192, 1, kMaxOriginalPositions));
  }
  r.reject_unknown_keys();  // low_freq_factor and the like under "linear" too
  // Past the range checks only llama3's frequency factors can disagree: blame where they came from.
  const std::string error = rope_scaling_error(s, model_section.dotted(""));
  if (!error.empty()) {
    const std::string low = r.dotted("low_freq_factor"), high = r.dotted("high_freq_factor");
    throw_input_error("config error in {}: {}", r.sources_of({low, high}), error);
  }
  return s;
}

nlohmann::json rope_scaling_json(const RopeScaling& s) {
  switch (s.type) {
    case RopeScalingType::kNone: return nullptr;
    case RopeScalingType::kLinear: return {{"rope_type", "linear"}, {"factor", shortest_decimal(s.factor)}};
    case RopeScalingType::kLlama3:
      return {{"rope_type", "llama3"},
              {"factor", shortest_decimal(s.factor)},
              {"low_freq_factor", shortest_decimal(s.low_freq_factor)},
              {"high_freq_factor", shortest_decimal(s.high_freq_factor)},
              {"original_max_position_embeddings", static_cast<int>(s.original_max_position)}};
  }
  return nullptr;
}

RopeScaling rope_scaling_of(const nlohmann::json& j) {
  RopeScaling s;
  if (j.is_null()) return s;
  if (!j.is_object()) throw std::invalid_argument("rope_scaling " + j.dump() + " is not an object");
  s.type = type_named(j.at("rope_type").get<std::string>());
  s.factor = j.at("factor").get<float>();
  if (s.type == RopeScalingType::kLlama3) {
    s.low_freq_factor = j.at("low_freq_factor").get<float>();
    s.high_freq_factor = j.at("high_freq_factor").get<float>();
    s.original_max_position = static_cast<float>(j.at("original_max_position_embeddings").get<int>());
  }
  return s;
}

std::string rope_scaling_error(const RopeScaling& s, std::string_view key_prefix) {
  const std::string_view p = key_prefix;
  if (s.type == RopeScalingType::kNone) return "";
  if (!(std::isfinite(s.factor) && s.factor >= 1.0f)) {
    return fmt::format("{}rope_scaling.factor = {} must be at least 1", p, s.factor);
  }
  if (s.type != RopeScalingType::kLlama3) return "";
  if (!(s.low_freq_factor > 0.0f && s.high_freq_factor > s.low_freq_factor && std::isfinite(s.high_freq_factor))) {
    return fmt::format(
        "{0}rope_scaling.low_freq_factor = {1} and {0}rope_scaling.high_freq_factor = {2} must satisfy "
        "0 < low_freq_factor < high_freq_factor",
        p, s.low_freq_factor, s.high_freq_factor);
  }
  if (!(s.original_max_position >= 1.0f && s.original_max_position <= kMaxOriginalPositions)) {
    return fmt::format("{}rope_scaling.original_max_position_embeddings = {} must be in [1, {}]", p,
                       s.original_max_position, kMaxOriginalPositions);
  }
  return "";
}

nlohmann::json rope_scaling_from_hf(const nlohmann::json& hf, const std::string& source) {
  const HfConfigReader top(hf, source);
  if (!top.has("rope_scaling")) return nullptr;
  const nlohmann::json& raw = hf.at("rope_scaling");
  if (!raw.is_object()) top.refuse("rope_scaling", "must be an object or null");
  const HfConfigReader r(raw, source + ": rope_scaling");
  // transformers (4.43 on) copies "type" over "rope_type" where a config has it (configs written
  // before 4.43 have only "type").
  const std::string type = r.has("type") ? r.string_or("type", "") : r.string_or("rope_type", "default");
  if (type == "default") return nullptr;
  if (type != "linear" && type != "llama3") {
    top.refuse("rope_scaling", "zerotrain's Llama implements rope_type linear and llama3, not " + type);
  }
  const bool llama3 = type == "llama3";
  for (const auto& [key, value] : raw.items()) {
    const bool known = key == "rope_type" || key == "type" || key == "factor" ||
                       (llama3 && (key == "low_freq_factor" || key == "high_freq_factor" ||
                                   key == "original_max_position_embeddings"));
    if (!known) top.refuse("rope_scaling", fmt::format("zerotrain's {} scaling has no field {}", type, key));
  }
  for (const char* key : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
    if (!r.has(key) && (llama3 || std::string_view(key) == "factor")) {
      top.refuse("rope_scaling", fmt::format("rope_type {} needs {}", type, key));
    }
  }
  RopeScaling s;
  s.type = type_named(type);
  s.factor = static_cast<float>(r.number_or("factor", 1.0));
  if (llama3) {
    s.low_freq_factor = static_cast<float>(r.number_or("low_freq_factor", 1.0));
    s.high_freq_factor = static_cast<float>(r.number_or("high_freq_factor", 4.0));
    s.original_max_position = static_cast<float>(r.integer("original_max_position_embeddings"));
  }
  const std::string error = rope_scaling_error(s, "");
  if (!error.empty()) top.refuse("rope_scaling", error);
  return rope_scaling_json(s);
}

nlohmann::json rope_scaling_hf_json(const RopeScaling& s) {
  if (s.type != RopeScalingType::kLinear) return rope_scaling_json(s);
  return {{"type", "linear"}, {"factor", shortest_decimal(s.factor)}};
}

}  // namespace zt::llama
