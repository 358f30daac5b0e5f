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
  s.factor = json_fp32_key(j, "factor", "rope_scaling.");
  if (s.type == RopeScalingType::kLlama3) {
    s.low_freq_factor = json_fp32_key(j, "low_freq_factor", "rope_scaling.");
    s.high_freq_factor = json_fp32_key(j, "high_freq_factor", "rope_scaling.");
    s.original_max_position = static_cast<float>(
        json_int_key(j, "original_max_position_embeddings", 1, kMaxOriginalPositions, "rope_scaling."));
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

namespace {

// [Note: rotary parameters in a Hugging Face config]
// transformers up to 4.x writes `rope_theta` and `rope_scaling` at the top of config.json;
// transformers 5 writes one `rope_parameters` object ({"rope_type", "rope_theta", and the type's
// own fields}) and reads a `rope_scaling` first where a config has one. So the object is
// rope_scaling where it is set, else rope_parameters; its rope_theta (v5's) goes before the top's.
// A llama3 object without original_max_position_embeddings takes max_position_embeddings, as v5
// fills it in. What would change the angles and is not computed here is refused: another type, a
// field the type does not have, a partial_rotary_factor other than 1, or one object per layer type.
struct HfRope {
  const char* key = nullptr;             // "rope_scaling" or "rope_parameters"; nullptr: neither
  const nlohmann::json* dict = nullptr;  // the object, where there is one
};

HfRope hf_rope(const nlohmann::json& hf, const std::string& source) {
  const HfConfigReader top(hf, source);
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!top.has(key)) continue;
    const nlohmann::json& v = hf.at(key);
    if (!v.is_object()) top.refuse(key, "must be an object or null");
    if (v.empty()) continue;  // v5 takes an empty rope_scaling as none set
    bool per_layer_type = true;
    for (const auto& [name, value] : v.items()) per_layer_type = per_layer_type && value.is_object();
    if (per_layer_type) top.refuse(key, "one object per layer type: zerotrain's Llama rotates every layer alike");
    return {key, &v};
  }
  return {};
}

}  // namespace

double rope_theta_from_hf(const nlohmann::json& hf, const std::string& source) {
  const HfRope rope = hf_rope(hf, source);
  const bool in_dict = rope.dict != nullptr && rope.dict->contains("rope_theta");
  const HfConfigReader r(in_dict ? *rope.dict : hf, in_dict ? source + ": " + rope.key : source);
  const double theta = r.number_or("rope_theta", 10000.0);
  if (!(theta >= kMinRopeTheta && theta <= kMaxRopeTheta))
    r.refuse("rope_theta", fmt::format("must be in [{:g}, {:g}]", kMinRopeTheta, kMaxRopeTheta));
  for (const nlohmann::json* dict : {&hf, rope.dict}) {
    if (dict == nullptr) continue;
    const HfConfigReader d(*dict, dict == &hf ? source : source + ": " + rope.key);
    if (d.number_or("partial_rotary_factor", 1.0) != 1.0) {
      d.refuse("partial_rotary_factor", "zerotrain's Llama rotates the whole of each head");
    }
  }
  return theta;
}

nlohmann::json rope_scaling_from_hf(const nlohmann::json& hf, const std::string& source) {
  const HfRope rope = hf_rope(hf, source);
  if (rope.dict == nullptr) return nullptr;
  const HfConfigReader top(hf, source);
  const nlohmann::json& raw = *rope.dict;
  const HfConfigReader r(raw, source + ": " + rope.key);
  // transformers (4.43 on) copies "type" over "rope_type" where a config has it (configs written
  // before 4.43 have only "type").
  const std::string type = r.has("type") ? r.string_or("type", "") : r.string_or("rope_type", "default");
  // An object with no type but a scaling's fields (a factor) says positions are stretched without
  // saying how: read as none, it trained another model than the one meant (transformers 4 refuses
  // it; 5 takes the type as "default" and builds it unscaled). A rope_parameters holding rope_theta
  // alone is transformers 5's unscaled one.
  if (!r.has("type") && !r.has("rope_type")) {
    for (const auto& [key, value] : raw.items()) {
      if (key != "rope_theta" && key != "partial_rotary_factor" && key != "type" && key != "rope_type") {
        top.refuse(rope.key, fmt::format("has {} but names no rope_type (nor type): say which scaling it is "
                                         "(linear or llama3), or remove it for none",
                                         key));
      }
    }
  }
  if (type == "default") return nullptr;
  if (type != "linear" && type != "llama3") {
    top.refuse(rope.key, "zerotrain's Llama implements rope_type linear and llama3, not " + type);
  }
  const bool llama3 = type == "llama3";
  for (const auto& [key, value] : raw.items()) {
    const bool known = key == "rope_type" || key == "type" || key == "factor" || key == "rope_theta" ||
                       key == "partial_rotary_factor" ||  // rope_theta_from_hf checks it is 1
                       (llama3 && (key == "low_freq_factor" || key == "high_freq_factor" ||
                                   key == "original_max_position_embeddings"));
    if (!known) top.refuse(rope.key, fmt::format("zerotrain's {} scaling has no field {}", type, key));
  }
  for (const char* key : {"factor", "low_freq_factor", "high_freq_factor"}) {
    if (!r.has(key) && (llama3 || std::string_view(key) == "factor")) {
      top.refuse(rope.key, fmt::format("rope_type {} needs {}", type, key));
    }
  }
  RopeScaling s;
  s.type = type_named(type);
  // Checked as doubles: 1e300 would be refused as the inf an fp32 makes of it.
  auto fp32 = [&](const char* key, double fallback) {
    const double v = r.number_or(key, fallback);
    if (!holds_in_fp32(v)) r.refuse(key, "must be a finite fp32 number");
    return static_cast<float>(v);
  };
  s.factor = fp32("factor", 1.0);
  if (llama3) {
    s.low_freq_factor = fp32("low_freq_factor", 1.0);
    s.high_freq_factor = fp32("high_freq_factor", 4.0);
    s.original_max_position =
        static_cast<float>(r.has("original_max_position_embeddings") ? r.integer("original_max_position_embeddings")
                                                                     : top.integer("max_position_embeddings"));
  }
  const std::string error = rope_scaling_error(s, "");
  if (!error.empty()) top.refuse(rope.key, error);
  return rope_scaling_json(s);
}

nlohmann::json rope_scaling_hf_json(const RopeScaling& s) {
  // A linear factor of 1 scales nothing, and transformers 4.40 refuses one (it wants more than 1).
  if (s.type == RopeScalingType::kLinear && s.factor == 1.0f) return nullptr;
  if (s.type != RopeScalingType::kLinear) return rope_scaling_json(s);
  return {{"type", "linear"}, {"factor", shortest_decimal(s.factor)}};
}

}  // namespace zt::llama
