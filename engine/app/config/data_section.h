// The config's data section (docs/config.md): the embedded text, a prepared dataset folder, token
// files or shard lists, and the tokenizer, vocabulary and multiple-choice files beside them.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/app/config/run_config.h"
#include "engine/base/core/config_reader.h"

namespace zt {

// Reads the section into `d`, refusing unknown keys and a mix of the single-file and shard forms.
void read_data_section(ConfigReader r, DataConfig& d);
// The section as to_json writes it: a reload gives the same DataConfig.
nlohmann::json data_section_json(const DataConfig& d);

}  // namespace zt
