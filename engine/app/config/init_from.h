// train.init_from in the config: the pretrained checkpoint (engine/app/io/pretrained.h) says what
// the model is, so its keys fill the model section, and a key the config sets to another value is
// refused, each one named with the checkpoint's value.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>

#include "engine/base/core/config_reader.h"

namespace zt {

// When doc's train.init_from names a checkpoint: sets doc's model section from it (InputError for
// conflicting keys, naming each and where it was set). `root` reads doc (for where keys came from).
// Where that path no longer exists and `saved_model_keys` is given (a run whose weights come from
// elsewhere: run_config.h's SavedModelKeys), the model keys doc leaves out come from it instead.
// Returns where the keys it set came from ("model.rope_theta" -> "hf/config.json"),
// so that an error in one names that file, not the config.
OverrideSources apply_init_from(nlohmann::json& doc, ConfigReader& root,
                                const std::function<nlohmann::json()>& saved_model_keys = nullptr);

}  // namespace zt
