// Model weights to and from safetensors, one tensor per parameter table entry.
#include "engine/io/model_weights.h"

#include <fmt/ranges.h>

#include <cstring>

#include "engine/core/check.h"
#include "engine/io/safetensors.h"

namespace zt {

void save_model_weights(const std::string& path, const ParamTable& table,
                        const std::function<TensorView(int)>& unit_values,
                        const std::map<std::string, std::string>& metadata) {
  SafetensorsWriter writer;
  for (const ParamSpec& p : table.params()) {
    const TensorView unit = unit_values(p.unit);
    // Padded vocabulary rows are trailing rows: the HF tensor is a prefix of the stored one.
    writer.add_f32(p.name, p.hf_shape, unit.as<float>() + p.offset);
  }
  for (const auto& [key, value] : metadata) writer.set_metadata(key, value);
  writer.write(path);
}

void load_model_weights(const std::string& path, const ParamTable& table,
                        const std::function<TensorView(int)>& unit_out) {
  const SafetensorsFile file = read_safetensors(path);
  for (const ParamSpec& p : table.params()) {
    auto it = file.tensors.find(p.name);
    if (it == file.tensors.end()) throw_input_error("{}: missing tensor '{}'", path, p.name);
    const SafetensorsEntry& e = it->second;
    if (e.dtype != DType::kF32 || e.shape != p.hf_shape) {
      throw_input_error("{}: tensor '{}' is {} {} but the model needs F32 {}", path, p.name, dtype_name(e.dtype),
                        fmt::join(e.shape, "x"), fmt::join(p.hf_shape, "x"));
    }
    float* dst = unit_out(p.unit).as<float>() + p.offset;
    std::memcpy(dst, e.bytes.data(), e.bytes.size());
    const std::size_t live = e.bytes.size() / sizeof(float);
    std::memset(dst + live, 0, (static_cast<std::size_t>(p.numel) - live) * sizeof(float));
  }
  if (file.tensors.size() != table.params().size()) {
    for (const auto& [name, entry] : file.tensors) {
      bool known = false;
      for (const ParamSpec& p : table.params()) known = known || p.name == name;
      if (!known) throw_input_error("{}: unexpected tensor '{}' (not a parameter of this model)", path, name);
    }
  }
}

}  // namespace zt
