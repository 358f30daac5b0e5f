// safetensors files: the standard layout (u64 little-endian header length, JSON header with
// dtype / shape / data_offsets per tensor and an optional "__metadata__" map of strings, then the
// raw little-endian data). Used by debug-state (the oracle interface), the final weights and the
// Hugging Face export.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/base/core/dtype.h"

namespace zt {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;  // raw little-endian data, numel * dtype size
};

// Collects tensors, then writes them in one go to a temp file renamed into place, so a crash never
// leaves a half-written file under the final name.
class SafetensorsWriter {
 public:
  // Copies numel(shape) values of `dtype` from `data`.
  void add(std::string name, DType dtype, std::vector<std::int64_t> shape, const void* data);
  void add_f32(std::string name, std::vector<std::int64_t> shape, const float* data) {
    add(std::move(name), DType::kF32, std::move(shape), data);
  }
  // Refers to `data` without a copy: it must stay alive and unchanged until write() returns. (A
  // model's final weights are already whole in host memory: a copy doubled the fresh pages the
  // kernel zeroes, most of the time it took to write them.)
  void add_view(std::string name, DType dtype, std::vector<std::int64_t> shape, const void* data);
  // Takes `values` over (no copy).
  void add_f32_owned(std::string name, std::vector<std::int64_t> shape, std::vector<float> values);
  void set_metadata(std::string key, std::string value) { metadata_[std::move(key)] = std::move(value); }
  void write(const std::string& path) const;

 private:
  struct Pending {
    std::string name;
    DType dtype = DType::kF32;
    std::vector<std::int64_t> shape;
    const void* data = nullptr;
    std::size_t bytes = 0;
    std::shared_ptr<const void> keep;  // what holds `data` where the writer owns it; null for a view
  };
  void add_pending(std::string name, DType dtype, std::vector<std::int64_t> shape, const void* data,
                   std::shared_ptr<const void> keep);
  std::vector<Pending> entries_;
  std::map<std::string, std::string> metadata_;
};

struct SafetensorsFile {
  std::map<std::string, SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;
};

// A header as the file holds it after its 8-byte length: the JSON, padded with spaces so that the
// data section starts 8-byte aligned, as the standard pads it. For the writers that stream their
// tensors after it (the final weights, the Hugging Face export) and SafetensorsWriter.
std::string safetensors_header_text(const nlohmann::ordered_json& header);

// A file's JSON header (an object: tensor entries and "__metadata__") and where its data section
// lies, the header's length checked against the file first (a damaged length must not become an
// allocation). Throws InputError naming the file and the fault. Readers that take tensors in
// ranges (pretrained weights) start here; read_safetensors does too.
struct SafetensorsHeader {
  nlohmann::json json;
  std::int64_t data_start = 0;  // bytes from the file's start
  std::int64_t data_size = 0;
};
SafetensorsHeader read_safetensors_header(const std::string& path);

// One tensor entry's shape and its data's place in the data section, checked: a shape of
// non-negative sizes whose bytes (`element_bytes` each) fit in int64 and match data_offsets, and
// offsets inside the section.
struct SafetensorsSpan {
  std::vector<std::int64_t> shape;
  std::int64_t begin = 0;  // bytes from the data section's start
  std::int64_t bytes = 0;
};
SafetensorsSpan safetensors_span(const nlohmann::json& entry, int element_bytes, const SafetensorsHeader& header,
                                 const std::string& path, const std::string& tensor);

// Reads and validates a whole file (header bounds, dtype sizes, offsets inside the data section);
// throws InputError naming the file and the fault.
SafetensorsFile read_safetensors(const std::string& path);

}  // namespace zt
