// The config's model section, for every registered family (models/model_family.h): the keys every
// family has, model.arch, model.dropout where the family has dropout, and the family's own keys,
// which the family reads itself. run_config.cpp's parser calls these; nothing here names a family.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/app/config/run_config.h"
#include "engine/base/core/config_reader.h"

namespace zt {

// Reads the model section into c.model (and c.dropout, c.derived).
void read_model_section(ConfigReader r, RunConfig& c);
// What the family refuses of the rest of the run (devices, precision), once every section is read.
void check_model_support(const RunConfig& c);
// Refuses a config whose unsharded step an estimate puts past what the memory prediction counts in
// int64 ([Note: sizes past the memory model] in model_section.cpp); asked before a prediction.
void check_memory_countable(const RunConfig& c);
// The section as to_json writes it: a reload gives the same RunConfig::model.
nlohmann::json model_section_json(const RunConfig& c);

}  // namespace zt
