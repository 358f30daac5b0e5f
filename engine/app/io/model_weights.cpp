// Model weights to and from safetensors, one tensor per parameter table entry.
#include "engine/app/io/model_weights.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "engine/app/io/safetensors.h"
#include "engine/base/core/check.h"
#include "kernels/ops.h"

namespace zt {

void add_param_tensors(SafetensorsWriter& writer, const ParamTable& table, const std::string& prefix,
                       const std::function<TensorView(int)>& unit_values, bool views_outlive_writer) {
  // A tensor split across units is assembled part by part as the units come (each unit's view is
  // read before the next is asked for) and written after its last part.
  const std::vector<TensorParts> tensors = table.tensors();
  std::map<std::string, std::vector<float>> assembling;
  std::vector<float> f32;
  for (std::size_t u = 0; u < table.units().size(); ++u) {
    const UnitSpec& unit = table.units()[u];
    const TensorView values = unit_values(static_cast<int>(u));
    const float* data = nullptr;
    const bool view = views_outlive_writer && values.dtype == DType::kF32;  // else copied
    if (values.dtype == DType::kF32) {
      data = values.as<float>();
    } else {
      f32.resize(static_cast<std::size_t>(unit.numel));
      ops::cast(ExecContext{}, TensorView{f32.data(), DType::kF32, Device::kCPU, Shape{unit.numel}}, values);
      data = f32.data();
    }
    for (int index : unit.params) {
      const ParamSpec& p = table.param(index);
      const TensorParts& t =
          *std::find_if(tensors.begin(), tensors.end(), [&](const TensorParts& x) { return x.name == p.name; });
      // Padded vocabulary rows are trailing rows: the HF tensor is a prefix of the stored one.
      if (t.parts.size() == 1) {
        if (view) {
          writer.add_view(prefix + p.name, DType::kF32, p.hf_shape, data + p.offset);
        } else {
          writer.add_f32(prefix + p.name, p.hf_shape, data + p.offset);
        }
        continue;
      }
      std::vector<float>& whole = assembling[p.name];
      std::int64_t hf_numel = 1, row = 1, part_hf = 1;
      for (std::int64_t d : t.hf_shape) hf_numel *= d;
      for (std::size_t k = 1; k < p.shape.size(); ++k) row *= p.shape[k];
      for (std::int64_t d : p.hf_shape) part_hf *= d;
      whole.resize(static_cast<std::size_t>(hf_numel));
      std::copy(data + p.offset, data + p.offset + part_hf, whole.begin() + p.row_offset * row);
      if (index == t.parts.back()) {
        writer.add_f32_owned(prefix + p.name, t.hf_shape, std::move(whole));
        assembling.erase(p.name);
      }
    }
  }
}

void save_model_weights(const std::string& path, const ParamTable& table,
                        const std::function<TensorView(int)>& unit_values,
                        const std::map<std::string, std::string>& metadata, bool views_outlive_writer) {
  SafetensorsWriter writer;
  add_param_tensors(writer, table, "", unit_values, views_outlive_writer);
  // "format": "pt" is what Hugging Face's loaders demand of a safetensors state dict (transformers
  // refuses a file without it); the tensors already carry GPT2LMHeadModel's names and shapes.
  writer.set_metadata("format", "pt");
  for (const auto& [key, value] : metadata) writer.set_metadata(key, value);
  writer.write(path);
}

void check_model_weights(const std::string& path, const ParamTable& table) {
  const SafetensorsHeader header = read_safetensors_header(path);
  std::set<std::string> names;
  for (const TensorParts& t : table.tensors()) {
    names.insert(t.name);
    if (!header.json.contains(t.name)) throw_input_error("{}: missing tensor '{}'", path, t.name);
    const nlohmann::json& e = header.json[t.name];
    const std::string dtype = e.is_object() && e.contains("dtype") && e["dtype"].is_string() ? e["dtype"] : "?";
    if (dtype != "F32") {  // before its bytes are measured as fp32's
      throw_input_error("{}: tensor '{}' is {} but the model's final weights are F32", path, t.name, dtype);
    }
    const SafetensorsSpan span = safetensors_span(e, 4, header, path, t.name);
    if (span.shape != t.hf_shape) {
      throw_input_error("{}: tensor '{}' is F32 {} but the model needs F32 {}", path, t.name,
                        fmt::join(span.shape, "x"), fmt::join(t.hf_shape, "x"));
    }
  }
  for (auto it = header.json.begin(); it != header.json.end(); ++it) {
    if (it.key() != "__metadata__" && names.count(it.key()) == 0) {
      throw_input_error("{}: unexpected tensor '{}' (not a parameter of this model)", path, it.key());
    }
  }
}

void load_model_weights(const std::string& path, const ParamTable& table,
                        const std::function<TensorView(int)>& unit_out) {
  check_model_weights(path, table);  // names, dtypes and shapes, before a tensor's bytes are read
  const SafetensorsFile file = read_safetensors(path);
  for (const TensorParts& t : table.tensors()) {
    // The tensor as checked (a file replaced since would have the copies below read past it).
    const auto it = file.tensors.find(t.name);
    if (it == file.tensors.end() || it->second.dtype != DType::kF32 || it->second.shape != t.hf_shape) {
      throw_input_error("{}: tensor '{}' changed while the file was read", path, t.name);
    }
    const float* src = reinterpret_cast<const float*>(it->second.bytes.data());
    for (int index : t.parts) {  // each part's rows; its padded rows (past the HF tensor) zero
      const ParamSpec& p = table.param(index);
      std::int64_t row = 1, live = 1;
      for (std::size_t k = 1; k < p.shape.size(); ++k) row *= p.shape[k];
      for (std::int64_t d : p.hf_shape) live *= d;
      float* dst = unit_out(p.unit).as<float>() + p.offset;
      std::memcpy(dst, src + p.row_offset * row, static_cast<std::size_t>(live) * sizeof(float));
      std::memset(dst + live, 0, static_cast<std::size_t>(p.numel - live) * sizeof(float));
    }
  }
}

}  // namespace zt
