// A trained model's weights as a safetensors file: every parameter under its Hugging Face name,
// fp32, with the true (unpadded) vocabulary -- what `train` leaves in the run directory and
// `sample` reads back. Loading validates names and shapes and names the file on any mismatch.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "engine/base/core/param_table.h"

namespace zt {

class SafetensorsWriter;

// Adds every parameter under prefix + its Hugging Face name, as F32 in its unpadded HF shape.
// unit_values(u) gives unit u's flat values, F32 or BF16 (converted here).
void add_param_tensors(SafetensorsWriter& writer, const ParamTable& table, const std::string& prefix,
                       const std::function<TensorView(int)>& unit_values);

// unit_values(u) gives unit u's fp32 values (e.g. the optimizer's master weights). Writes the
// metadata given plus "format": "pt", which Hugging Face's loaders demand of a PyTorch state dict.
void save_model_weights(const std::string& path, const ParamTable& table,
                        const std::function<TensorView(int)>& unit_values,
                        const std::map<std::string, std::string>& metadata);

// Fills each unit's fp32 buffer (unit_out(u), unit length) from the file; padded vocabulary rows
// are set to zero. Throws InputError for a missing/extra/misshapen tensor or a damaged file.
void load_model_weights(const std::string& path, const ParamTable& table,
                        const std::function<TensorView(int)>& unit_out);

}  // namespace zt
