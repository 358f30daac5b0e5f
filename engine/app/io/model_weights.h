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
// unit_values(u) gives unit u's flat values, F32 or BF16 (converted here). With
// `views_outlive_writer`, F32 views stay valid until the writer writes, so their tensors are
// referred to rather than copied (otherwise each view is read before the next is asked for).
void add_param_tensors(SafetensorsWriter& writer, const ParamTable& table, const std::string& prefix,
                       const std::function<TensorView(int)>& unit_values, bool views_outlive_writer = false);

// unit_values(u) gives unit u's fp32 values (e.g. the optimizer's master weights). Writes the
// metadata given plus "format": "pt", which Hugging Face's loaders demand of a PyTorch state dict.
// `views_outlive_writer` as add_param_tensors'.
void save_model_weights(const std::string& path, const ParamTable& table,
                        const std::function<TensorView(int)>& unit_values,
                        const std::map<std::string, std::string>& metadata, bool views_outlive_writer = false);

// Refuses, from the file's header alone, a file whose tensors are not the table's by name, F32
// dtype and HF shape: before anything is sized by the model (a config.json of another model would
// otherwise have the model's buffers allocated first, terabytes for a damaged width).
void check_model_weights(const std::string& path, const ParamTable& table);

// Fills each unit's fp32 buffer (unit_out(u), unit length) from the file; padded vocabulary rows
// are set to zero. Throws InputError for a missing/extra/misshapen tensor or a damaged file.
void load_model_weights(const std::string& path, const ParamTable& table,
                        const std::function<TensorView(int)>& unit_out);

}  // namespace zt
