// The config's precision section (docs/config.md, docs/precision.md): the parameters' dtype, the
// products' and activations' precision, the attention kernels and the GELU epilogue, each checked
// against the device and the model (cuDNN's attention takes bf16 and no dropout).
#pragma once

#include <nlohmann/json.hpp>

#include "engine/app/config/run_config.h"
#include "engine/base/core/config_reader.h"

namespace zt {

// Reads the section into `c` (c.device, c.model, c.dropout and c.train already read), noting the
// values it derives in c.derived; refuses unknown keys.
void read_precision_section(ConfigReader precision, RunConfig& c);
// The section as to_json writes it: a reload gives the same choices.
nlohmann::json precision_section_json(const RunConfig& c);

}  // namespace zt
