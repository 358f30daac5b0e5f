// safetensors reader and writer (the format is small enough that a library would add more than
// it saves; nlohmann/json handles the header).
#include "engine/app/io/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "engine/app/io/input_file.h"
#include "engine/app/io/output_file.h"
#include "engine/base/core/check.h"
#include "engine/base/core/config_reader.h"
#include "engine/base/core/config_text.h"

namespace zt {

namespace {

std::int64_t numel_of(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

DType dtype_from_name(const std::string& s, const std::string& path, const std::string& tensor) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kI32, DType::kU16}) {
    if (dtype_name(t) == s) return t;
  }
  throw_input_error("{}: tensor '{}' has unsupported dtype '{}'", path, tensor, s);
}

}  // namespace

void SafetensorsWriter::add_pending(std::string name, DType dtype, std::vector<std::int64_t> shape, const void* data,
                                    std::shared_ptr<const void> keep) {
  const std::size_t bytes = static_cast<std::size_t>(numel_of(shape)) * dtype_size_bytes(dtype);
  entries_.push_back({std::move(name), dtype, std::move(shape), data, bytes, std::move(keep)});
}

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<std::int64_t> shape, const void* data) {
  const std::size_t bytes = static_cast<std::size_t>(numel_of(shape)) * dtype_size_bytes(dtype);
  const auto* first = static_cast<const std::uint8_t*>(data);
  auto copy = std::make_shared<const std::vector<std::uint8_t>>(first, first + bytes);
  add_pending(std::move(name), dtype, std::move(shape), copy->data(), copy);
}

void SafetensorsWriter::add_view(std::string name, DType dtype, std::vector<std::int64_t> shape, const void* data) {
  add_pending(std::move(name), dtype, std::move(shape), data, nullptr);
}

void SafetensorsWriter::add_f32_owned(std::string name, std::vector<std::int64_t> shape, std::vector<float> values) {
  ZT_CHECK(static_cast<std::int64_t>(values.size()) == numel_of(shape), "{}: {} values for {} elements", name,
           values.size(), numel_of(shape));
  auto owned = std::make_shared<const std::vector<float>>(std::move(values));
  add_pending(std::move(name), DType::kF32, std::move(shape), owned->data(), owned);
}

std::string safetensors_header_text(const nlohmann::ordered_json& header) {
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  return text;
}

void SafetensorsWriter::write(const std::string& path) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  std::size_t offset = 0;
  for (const Pending& e : entries_) {
    header[e.name] = {{"dtype", dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.bytes}}};
    offset += e.bytes;
  }
  const std::string text = safetensors_header_text(header);

  const std::string tmp = staging_path(path);
  const PartialOutput partial(tmp);  // a Ctrl-C while it is written leaves no .tmp
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw_runtime_error("cannot open '{}' for writing: {}", tmp, std::strerror(errno));
    const std::uint64_t n = text.size();
    out.write(reinterpret_cast<const char*>(&n), sizeof(n));  // x86-64 is little-endian
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const Pending& e : entries_) {
      out.write(static_cast<const char*>(e.data), static_cast<std::streamsize>(e.bytes));
    }
    out.flush();
    if (!out) {
      const int err = errno;
      out.close();
      std::remove(tmp.c_str());  // no partial .tmp left behind
      throw_runtime_error("write to '{}' failed: {}", tmp, std::strerror(err));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw_runtime_error("cannot rename '{}' to '{}': {}", tmp, path, std::strerror(err));
  }
}

namespace {

// What the format requires of the header as a whole: metadata an object of strings' keys, and no
// two tensors' bytes overlapping (one tensor's values would be read as another's). Each entry's
// own fields are checked where it is read (safetensors_span).
void check_layout(const SafetensorsHeader& header, const std::string& path) {
  std::vector<std::tuple<std::int64_t, std::int64_t, std::string>> spans;
  for (auto it = header.json.begin(); it != header.json.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) throw_input_error("{}: __metadata__ is not a JSON object", path);
      continue;
    }
    const nlohmann::json* offsets = it->is_object() && it->contains("data_offsets") ? &(*it)["data_offsets"] : nullptr;
    if (offsets == nullptr || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_integer() ||
        !(*offsets)[1].is_number_integer()) {
      continue;
    }
    const auto begin = (*offsets)[0].get<std::int64_t>(), end = (*offsets)[1].get<std::int64_t>();
    if (end > begin) spans.emplace_back(begin, end, it.key());
  }
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i) {
    if (std::get<0>(spans[i]) < std::get<1>(spans[i - 1])) {
      throw_input_error("{}: tensors '{}' and '{}' overlap in the data section (bytes [{}, {}) and [{}, {}))", path,
                        std::get<2>(spans[i - 1]), std::get<2>(spans[i]), std::get<0>(spans[i - 1]),
                        std::get<1>(spans[i - 1]), std::get<0>(spans[i]), std::get<1>(spans[i]));
    }
  }
}

}  // namespace

SafetensorsHeader read_safetensors_header(const std::string& path) {
  require_regular_file(path, "safetensors file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw_input_error("{}: cannot open file", path);
  const std::int64_t file_size = in.tellg();
  in.seekg(0);
  std::uint64_t header_len = 0;
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(&header_len), 8)) {
    throw_input_error("{}: too short for a safetensors header", path);
  }
  // Unsigned, so a length of 2^63 or more is not taken for a negative one that fits. 100 MiB is
  // far past any real header (a 70B model's shard: under 100 KiB).
  if (header_len == 0 || header_len > static_cast<std::uint64_t>(file_size - 8) || header_len > (100u << 20)) {
    throw_input_error("{}: header length {} does not fit the file ({} bytes)", path, header_len, file_size);
  }
  std::string text(header_len, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(header_len))) {
    throw_input_error("{}: cannot read its {}-byte header", path, header_len);
  }
  SafetensorsHeader header;
  // A tensor named twice: the parser keeps the last entry, which was read silently (Python's
  // safetensors refuses the file).
  std::set<std::string> names;
  std::string twice;
  const nlohmann::json::parser_callback_t depth_limit = json_depth_limit(path);
  const nlohmann::json::parser_callback_t check = [&](int depth, nlohmann::json::parse_event_t event,
                                                      nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && twice.empty() &&
        !names.insert(parsed.get<std::string>()).second) {
      twice = parsed.get<std::string>();
    }
    return depth_limit(depth, event, parsed);
  };
  try {
    header.json = nlohmann::json::parse(text, check);
  } catch (const nlohmann::json::exception& e) {
    throw_input_error("{}: malformed JSON header: {}", path, e.what());
  }
  if (!header.json.is_object()) throw_input_error("{}: header is not a JSON object", path);
  if (!twice.empty()) throw_input_error("{}: the header names '{}' twice", path, twice);
  header.data_start = 8 + static_cast<std::int64_t>(header_len);
  header.data_size = file_size - header.data_start;
  check_layout(header, path);
  return header;
}

SafetensorsSpan safetensors_span(const nlohmann::json& entry, int element_bytes, const SafetensorsHeader& header,
                                 const std::string& path, const std::string& tensor) {
  SafetensorsSpan span;
  std::vector<std::int64_t> offsets;
  // Whole numbers only: get<int64_t> would cut 8.5 to 8, and 1e30 has no int64.
  const auto integers = [&](const char* key) {
    if (!entry.is_object() || !entry.contains(key) || !entry[key].is_array() ||
        !std::all_of(entry[key].begin(), entry[key].end(),
                     [](const nlohmann::json& v) { return v.is_number_integer(); })) {
      throw_input_error("{}: bad header entry for '{}': \"{}\" is not a list of whole numbers", path, tensor, key);
    }
    return entry[key].get<std::vector<std::int64_t>>();
  };
  span.shape = integers("shape");
  offsets = integers("data_offsets");
  if (offsets.size() != 2 || offsets[0] < 0 || offsets[1] < offsets[0] || offsets[1] > header.data_size) {
    throw_input_error("{}: tensor '{}' has data_offsets outside the data section", path, tensor);
  }
  // Every size checked before it multiplies: a damaged shape must not wrap to the offsets' span.
  // A tensor with a size 0 holds no bytes, whatever its other sizes.
  const bool empty = std::find(span.shape.begin(), span.shape.end(), 0) != span.shape.end();
  std::int64_t bytes = empty ? 0 : element_bytes;
  for (const std::int64_t d : span.shape) {
    if (d < 0 || (!empty && bytes > header.data_size / d)) {
      throw_input_error("{}: tensor '{}' has shape {} that does not fit the data section ({} bytes)", path, tensor,
                        entry.at("shape").dump(), header.data_size);
    }
    bytes *= d;
  }
  if (bytes != offsets[1] - offsets[0]) {
    throw_input_error("{}: tensor '{}' holds {} bytes but its shape needs {}", path, tensor, offsets[1] - offsets[0],
                      bytes);
  }
  span.begin = offsets[0];
  span.bytes = bytes;
  return span;
}

SafetensorsFile read_safetensors(const std::string& path) {
  const SafetensorsHeader header = read_safetensors_header(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input_error("{}: cannot open file", path);
  SafetensorsFile file;
  for (auto it = header.json.begin(); it != header.json.end(); ++it) {
    if (it.key() == "__metadata__") {  // an object: the header's reader checked it
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) throw_input_error("{}: metadata '{}' is not a string", path, m.key());
        file.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    SafetensorsEntry e;
    e.name = it.key();
    if (!it->is_object() || !it->contains("dtype") || !(*it)["dtype"].is_string()) {
      throw_input_error("{}: bad header entry for '{}': no \"dtype\" string", path, e.name);
    }
    e.dtype = dtype_from_name((*it)["dtype"].get<std::string>(), path, e.name);
    SafetensorsSpan span = safetensors_span(*it, static_cast<int>(dtype_size_bytes(e.dtype)), header, path, e.name);
    e.shape = std::move(span.shape);
    e.bytes.resize(static_cast<std::size_t>(span.bytes));
    in.seekg(header.data_start + span.begin);
    in.read(reinterpret_cast<char*>(e.bytes.data()), span.bytes);
    if (!in) throw_input_error("{}: tensor '{}' is truncated", path, e.name);
    file.tensors[e.name] = std::move(e);
  }
  return file;
}

}  // namespace zt
