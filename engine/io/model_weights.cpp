// Model weights to and from safetensors, one tensor per parameter table entry.
#include "engine/io/model_weights.h"

#include <fmt/ranges.h>

#include <cstring>
#include <vector>

#include "engine/core/check.h"
#include "engine/io/safetensors.h"
#include "kernels/cpu/cast.h"

namespace zt {

void add_param_tensors(SafetensorsWriter& writer, const ParamTable& table, const std::string& prefix,
                       const std::function<TensorView(int)>& unit_values) {
  std::vector<float> f32;
  for (std::size_t u = 0; u < table.units().size(); ++u) {
    const UnitSpec& unit = table.units()[u];
    const TensorView values = unit_values(static_cast<int>(u));
    const float* data = nullptr;
    if (values.dtype == DType::kF32) {
      data = values.as<float>();
    } else {
      f32.resize(static_cast<std::size_t>(unit.numel));
      cpu::cast(ExecContext{}, TensorView{f32.data(), DType::kF32, Device::kCPU, Shape{unit.numel}}, values);
      data = f32.data();
    }
    for (int index : unit.params) {
      const ParamSpec& p = table.param(index);
      // Padded vocabulary rows are trailing rows: the HF tensor is a prefix of the stored one.
      writer.add_f32(prefix + p.name, p.hf_shape, data + p.offset);
    }
  }
}

void save_model_weights(const std::string& path, const ParamTable& table,
                        const std::function<TensorView(int)>& unit_values,
                        const std::map<std::string, std::string>& metadata) {
  SafetensorsWriter writer;
  add_param_tensors(writer, table, "", unit_values);
  // "format": "pt" is what Hugging Face's loaders demand of a safetensors state dict (transformers
  // refuses a file without it); the tensors already carry GPT2LMHeadModel's names and shapes.
  writer.set_metadata("format", "pt");
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
