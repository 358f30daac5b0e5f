// model.rope_scaling of a Llama config: Hugging Face's rope_scaling (kernels/contracts/
// rope_angles.h says what each rope_type does), in its key names, so a Llama 3.1 or 3.2
// checkpoint's config.json carries over as it is:
//   {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
//    "original_max_position_embeddings": 8192}   or   {"rope_type": "linear", "factor": 4.0}.
// Absent or null: no scaling.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "engine/base/core/config_reader.h"
#include "kernels/contracts/rope_angles.h"

namespace zt::llama {

// The config's model.rope_scaling, type- and range-checked (InputError naming the key).
RopeScaling read_rope_scaling(ConfigReader& model_section);

// As the model's family keys, the manifest and the config zerotrain writes hold it: the object
// above (floats as their shortest decimals), null when there is no scaling.
nlohmann::json rope_scaling_json(const RopeScaling& s);
// The inverse, for values rope_scaling_json wrote (a manifest's): absent or null is no scaling.
// std::invalid_argument for anything else it cannot read.
RopeScaling rope_scaling_of(const nlohmann::json& j);

// "" when consistent, else what is wrong, naming "<key_prefix>rope_scaling.<key>".
std::string rope_scaling_error(const RopeScaling& s, std::string_view key_prefix);

// model.rope_theta's range, the config's and a Hugging Face config's alike (the largest: gradientAI's
// 1M-context Llama 3 has 3.58e9).
inline constexpr double kMinRopeTheta = 1.0, kMaxRopeTheta = 1e12;

// A Hugging Face config.json's rotary scaling as zerotrain's model key (rope_scaling_json's form),
// from its rope_scaling, or transformers 5's rope_parameters ([Note: rotary parameters in a
// Hugging Face config]): "linear" and "llama3" (also under the older "type" key); any other type or
// key is refused in one line naming `source`, since it would change the angles.
nlohmann::json rope_scaling_from_hf(const nlohmann::json& hf, const std::string& source);
// Its rotary base: rope_parameters' (or rope_scaling's) rope_theta, else the top's, else 10000;
// refused in one line outside [kMinRopeTheta, kMaxRopeTheta], or beside a partial_rotary_factor other than 1.
double rope_theta_from_hf(const nlohmann::json& hf, const std::string& source);
// For a config.json transformers reads: llama3 as above; linear as {"type", "factor"}, the form
// transformers has read since it had rope_scaling (the 4.40 the tests use takes no other).
nlohmann::json rope_scaling_hf_json(const RopeScaling& s);

}  // namespace zt::llama
