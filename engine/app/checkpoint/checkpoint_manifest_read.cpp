// Manifest::from_json: reading a manifest with validation strict enough that a loader can trust
// the offsets it computes (every file's segments must equal the N-way split of the recorded
// table), and each value of the type and range the writer gives it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/app/checkpoint/checkpoint_manifest.h"
#include "engine/app/checkpoint/durable_file.h"
#include "engine/app/config/config_limits.h"
#include "engine/base/core/check.h"
#include "engine/base/core/config_reader.h"
#include "engine/base/core/config_text.h"

namespace zt::ckpt {

namespace {

// A manifest's number as a T, whole and in T's range: nlohmann's get<int> takes true for 1, cuts
// 2.5 to 2 and wraps 2^32 to 0, each a number no writer wrote passing for one it did.
template <class T>
T manifest_integer(const nlohmann::json& v, const char* key, const std::string& source) {
  const std::optional<long long> x = json_integer_in(v, std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
  if (!x) throw_input_error("{}: {} {} is not a whole number a manifest holds", source, key, preview_json(v));
  return static_cast<T>(*x);
}

// One object of the manifest, read a field at a time: each value of the type the writer gives it,
// or an error naming its path ("params[3].shape") and what it holds. The library's own type_error
// named neither ("type must be array, but is string"), and get<std::uint32_t> took -1 for a crc32.
// It refers to the value and the source's name it reads: it must not outlive either.
class ManifestObject {
 public:
  ManifestObject(const nlohmann::json& value, std::string path, const std::string& source)
      : value_(value), path_(std::move(path)), source_(source) {
    if (!value_.is_object()) {
      throw_input_error("{}: {} is {}, not an object", source_, path_.empty() ? "the manifest" : path_,
                        preview_json(value_));
    }
  }

  std::string name(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  bool has(const char* key) const { return value_.contains(key); }

  const nlohmann::json& at(const char* key) const {
    if (!value_.contains(key)) {
      throw_input_error("{}: {} has no \"{}\"", source_, path_.empty() ? "the manifest" : path_, key);
    }
    return value_[key];
  }

  const nlohmann::json& list(const char* key) const {
    const nlohmann::json& v = at(key);
    if (!v.is_array()) throw_input_error("{}: {} is {}, not a list", source_, name(key), preview_json(v));
    return v;
  }

  ManifestObject element(const char* key, std::size_t i) const {
    return ManifestObject(list(key).at(i), fmt::format("{}[{}]", name(key), i), source_);
  }

  ManifestObject object(const char* key) const { return ManifestObject(at(key), name(key), source_); }

  std::string string(const char* key) const {
    const nlohmann::json& v = at(key);
    if (!v.is_string()) throw_input_error("{}: {} is {}, not a string", source_, name(key), preview_json(v));
    return v.get<std::string>();
  }

  bool boolean(const char* key) const {
    const nlohmann::json& v = at(key);
    if (!v.is_boolean()) throw_input_error("{}: {} is {}, not true or false", source_, name(key), preview_json(v));
    return v.get<bool>();
  }

  template <class T>
  T integer(const char* key) const {
    return manifest_integer<T>(at(key), name(key).c_str(), source_);
  }

  template <class T>
  std::vector<T> integers(const char* key) const {
    const nlohmann::json& v = list(key);
    std::vector<T> out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      out.push_back(manifest_integer<T>(v[i], fmt::format("{}[{}]", name(key), i).c_str(), source_));
    }
    return out;
  }

 private:
  const nlohmann::json& value_;
  std::string path_;
  const std::string& source_;
};

StateKind state_kind_from(const std::string& name, const std::string& source) {
  for (int k = 0; k < kNumStateKinds; ++k) {
    if (state_kind_name(static_cast<StateKind>(k)) == name) return static_cast<StateKind>(k);
  }
  throw_input_error("{}: unknown state '{}' in a file segment", source, name);
}

ParamTable table_from_json(const ManifestObject& doc, const std::string& source) {
  ParamTable t;
  const nlohmann::json& units = doc.list("units");
  const nlohmann::json& params = doc.list("params");
  int last_unit = -1;
  std::int64_t table_elements = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const ManifestObject p = doc.element("params", i);
    const std::string name = p.string("name");
    const int unit = p.integer<int>("unit");
    if (unit != last_unit) {
      if (unit != last_unit + 1 || unit >= static_cast<int>(units.size())) {
        throw_input_error("{}: parameter '{}' names unit {} out of order", source, name, unit);
      }
      t.add_unit(doc.element("units", static_cast<std::size_t>(unit)).string("name"));
      last_unit = unit;
    }
    if (p.string("dtype") != "F32") throw_input_error("{}: parameter '{}' state dtype is not F32", source, name);
    const auto shape = p.integers<std::int64_t>("shape");
    const auto hf_shape = p.integers<std::int64_t>("hf_shape");
    // Each dimension, and their product (a tensor's and the whole table's element counts, which the
    // table and the exports sum and multiply), in 2^40: [2^40, 2^40] overflowed int64 in add_param.
    constexpr std::int64_t kMaxElements = std::int64_t{1} << 40;
    const auto elements_of = [&](const std::vector<std::int64_t>& dims) {
      std::int64_t elements = 1;
      for (std::int64_t d : dims) {
        if (d < 0 || d > kMaxElements || (d > 0 && elements > kMaxElements / d)) {
          throw_input_error(
              "{}: parameter '{}' has a bad shape [{}] (Hugging Face shape [{}]): negative, or over 2^40 "
              "elements",
              source, name, fmt::join(shape, ", "), fmt::join(hf_shape, ", "));
        }
        elements *= d;
      }
      return elements;
    };
    elements_of(hf_shape);
    table_elements += elements_of(shape);
    if (table_elements > kMaxElements)
      throw_input_error("{}: parameter '{}' takes the table past 2^40 elements", source, name);
    // A part of a tensor split by rows across units continues the rows of its earlier parts
    // (manifests written before row parts existed have no row_offset: whole tensors).
    if (shape.empty() || hf_shape.size() != shape.size()) {
      throw_input_error(
          "{}: parameter '{}' has shape [{}] and Hugging Face shape [{}] (the same number of "
          "dimensions, at least one)",
          source, name, fmt::join(shape, ", "), fmt::join(hf_shape, ", "));
    }
    const std::int64_t row_offset = p.has("row_offset") ? p.integer<std::int64_t>("row_offset") : 0;
    std::int64_t rows_before = 0;
    for (const TensorParts& known : t.tensors()) {
      if (known.name != name) continue;
      rows_before = known.shape[0];
      if (!std::equal(shape.begin() + 1, shape.end(), known.shape.begin() + 1, known.shape.end())) {
        throw_input_error("{}: parameter '{}' part [{}] does not continue its earlier parts' rows [{}]", source, name,
                          fmt::join(shape, ", "), fmt::join(known.shape, ", "));
      }
    }
    if (row_offset != rows_before) {
      throw_input_error("{}: parameter '{}' starts at row {} but its earlier parts hold {} rows", source, name,
                        row_offset, rows_before);
    }
    const int index = t.add_param(name, shape, hf_shape, p.boolean("decays"), row_offset);
    const auto offset = p.integer<std::int64_t>("offset");
    if (t.param(index).offset != offset) {
      throw_input_error("{}: parameter '{}' offset {} does not follow the previous parameter", source,
                        t.param(index).name, offset);
    }
  }
  if (t.units().size() != units.size())
    throw_input_error("{}: {} units listed but parameters use {}", source, units.size(), t.units().size());
  for (std::size_t u = 0; u < units.size(); ++u) {
    const auto numel = doc.element("units", u).integer<std::int64_t>("numel");
    if (numel != t.units()[u].numel) {
      throw_input_error("{}: unit '{}' numel {} is not the sum of its parameters ({})", source, t.units()[u].name,
                        numel, t.units()[u].numel);
    }
  }
  return t;
}

// The types of what the readers take from config and extra, as the writer gives them: a manifest
// resealed by hand with another (config.train a string, extra.skipped_steps a list) threw the
// library's error from a reader later, naming neither the file nor the key.
void check_config_and_extra_types(const nlohmann::json& config, const nlohmann::json& extra,
                                  const std::string& source) {
  for (const char* section : {"model", "train", "optim", "data", "precision", "zero", "checkpoint", "log", "comm"}) {
    if (config.contains(section) && !config[section].is_object()) {
      throw_input_error("{}: config.{} is {}, not an object", source, section, config[section].dump());
    }
  }
  if (config.contains("model") && config["model"].contains("dropout") && !config["model"]["dropout"].is_number()) {
    throw_input_error("{}: config.model.dropout is {}, not a number", source, config["model"]["dropout"].dump());
  }
  // Counts of steps (read as int), and the data-parallel ranks, as many as world_size may be.
  for (const auto& [key, least, most] : {std::tuple{"skipped_steps", 0LL, kMaxConfigSteps},
                                         {"consecutive_skips", 0LL, kMaxConfigSteps},
                                         {"data_parallel_ranks", 1LL, 1LL << 20}}) {
    if (!extra.contains(key)) continue;
    const nlohmann::json& v = extra[key];
    if (!v.is_number_integer() || v.get<std::int64_t>() < least || v.get<std::int64_t>() > most) {
      throw_input_error("{}: extra.{} is {}, not a count in [{}, {}]", source, key, v.dump(), least, most);
    }
  }
  if (extra.contains("special_token_ids") && !extra["special_token_ids"].is_object()) {
    throw_input_error("{}: extra.special_token_ids is {}, not an object", source, extra["special_token_ids"].dump());
  }
  // The files the run read: a list of {path, bytes, fingerprint[, split]} (run_identity.h).
  if (extra.contains("data_identity")) {
    const nlohmann::json& files = extra["data_identity"];
    if (!files.is_array() || !std::all_of(files.begin(), files.end(), is_data_file_entry)) {
      throw_input_error("{}: extra.data_identity is {}, not a list of files (path, bytes, fingerprint)", source,
                        files.dump().substr(0, 200));
    }
  }
  for (const char* key :
       {"save_id", "previous_save_id", "init_from_path", "run_dir", "written_by", "cpu_kernels", "cuda_kernels"}) {
    if (extra.contains(key) && !extra[key].is_string()) {
      throw_input_error("{}: extra.{} is {}, not a string", source, key, extra[key].dump());
    }
  }
}

}  // namespace

int Manifest::checked_format_version(const nlohmann::json& doc, const std::string& source) {
  // Not value(): a "format" of another type (null) threw the library's own error, naming nothing.
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != kFormatName) {
    throw_input_error("{}: not a zerotrain checkpoint manifest (no \"format\": \"{}\")", source, kFormatName);
  }
  if (!doc.contains("format_version")) throw_input_error("{}: no format_version", source);
  const int version = manifest_integer<int>(doc["format_version"], "format_version", source);
  if (version < kFormatVersion || version > kNewestFormatVersion) {
    throw_input_error(
        "{}: checkpoint format version {} is not supported (this build reads versions {}-{}; a newer version "
        "was written by a newer zerotrain: read it with that one)",
        source, version, kFormatVersion, kNewestFormatVersion);
  }
  return version;
}

Manifest Manifest::from_json(const nlohmann::json& doc, const std::string& source) {
  Manifest m;
  m.format_version = checked_format_version(doc, source);
  try {
    const ManifestObject top(doc, "", source);
    m.position.step = top.integer<std::int64_t>("step");
    m.position.tokens_seen = top.integer<std::int64_t>("tokens_seen");
    m.position.next_sample_index = top.integer<std::int64_t>("next_sample_index");
    const int optimizer_step = top.integer<int>("optimizer_step");
    m.world_size = top.integer<int>("world_size");
    m.zero_stage = top.integer<int>("zero_stage");
    m.param_dtype = top.string("param_dtype");
    m.model = top.at("model");
    m.config = top.at("config");
    m.extra = doc.value("extra", nlohmann::json::object());
    for (const auto& [key, value] : {std::pair{"model", &m.model}, {"config", &m.config}, {"extra", &m.extra}}) {
      if (!value->is_object()) throw_input_error("{}: \"{}\" is {}, not an object", source, key, value->dump());
    }
    check_config_and_extra_types(m.config, m.extra, source);
    const ManifestObject checksum = top.object("checksum");
    m.checksum_chunk_bytes = checksum.integer<std::int64_t>("chunk_bytes");
    // A chunk is read whole to check it: no larger than a writer's (kChecksumChunkBytes) by far.
    if (checksum.string("algorithm") != "crc32" || m.checksum_chunk_bytes <= 0 ||
        m.checksum_chunk_bytes > kMaxChecksumChunkBytes) {
      throw_input_error("{}: unsupported checksum {}", source, doc.at("checksum").dump());
    }
    // The position a resume continues from: counts, none negative, and no more updates than steps
    // (a skipped step counts as a step, not an update). A step is an int (train.max_steps'), and
    // the sample and token counts stay below 2^53, far past any run, so that a resume's sums of
    // them cannot overflow.
    constexpr std::int64_t kMaxCount = std::int64_t{1} << 53;
    for (const auto& [key, value, most] : {std::tuple{"step", m.position.step, std::int64_t{INT32_MAX}},
                                           {"tokens_seen", m.position.tokens_seen, kMaxCount},
                                           {"next_sample_index", m.position.next_sample_index, kMaxCount}}) {
      if (value < 0 || value > most) {
        throw_input_error("{}: {} {} is not a count (0 to {})", source, key, doc.at(key).dump(), most);
      }
    }
    if (optimizer_step < 0 || optimizer_step > m.position.step) {
      throw_input_error("{}: optimizer_step {} is not a count of at most its step {}", source,
                        doc.at("optimizer_step").dump(), m.position.step);
    }
    m.position.optimizer_step = optimizer_step;
    if (m.zero_stage < 0 || m.zero_stage > 3) throw_input_error("{}: zero_stage {} is not 0-3", source, m.zero_stage);
    if (m.world_size < 1 || m.world_size > (1 << 20))
      throw_input_error("{}: world_size {} out of range", source, m.world_size);
    // The rank files' states and their dtype, as this version writes them (the segments name each).
    if (doc.value("state", nlohmann::json{"master", "exp_avg", "exp_avg_sq"}) !=
            nlohmann::json{"master", "exp_avg", "exp_avg_sq"} ||
        doc.value("state_dtype", nlohmann::json("F32")) != nlohmann::json("F32")) {
      throw_input_error("{}: states {} in {}, not this format's master, exp_avg and exp_avg_sq in F32", source,
                        doc.value("state", nlohmann::json()).dump(), doc.value("state_dtype", nlohmann::json()).dump());
    }
    if (m.param_dtype != "f32" && m.param_dtype != "bf16")
      throw_input_error("{}: param_dtype '{}' is not f32 or bf16", source, m.param_dtype);
    m.table = table_from_json(top, source);
    const nlohmann::json& files = top.list("files");
    if (files.size() != static_cast<std::size_t>(m.world_size)) {
      throw_input_error("{}: {} rank files listed for world_size {}", source, files.size(), m.world_size);
    }
    for (int r = 0; r < m.world_size; ++r) {
      const ManifestObject f = top.element("files", static_cast<std::size_t>(r));
      RankFile rf;
      rf.name = f.string("name");
      rf.rank = f.integer<int>("rank");
      rf.bytes = f.integer<std::int64_t>("bytes");
      rf.crc32 = f.integer<std::uint32_t>("crc32");
      rf.chunk_crc32 = f.integers<std::uint32_t>("chunk_crc32");
      for (std::size_t j = 0; j < f.list("segments").size(); ++j) {
        const ManifestObject seg = f.element("segments", j);
        rf.segments.push_back({state_kind_from(seg.string("state"), source), seg.integer<int>("unit"),
                               seg.integer<std::int64_t>("begin"), seg.integer<std::int64_t>("end"),
                               seg.integer<std::int64_t>("offset")});
      }
      // The loader reads through these segments; they must be the documented split, nothing else.
      if (rf.rank != r || rf.name != rank_file_name(r) || rf.segments != rank_file_segments(m.table, m.world_size, r) ||
          rf.bytes != segments_bytes(rf.segments)) {
        throw_input_error("{}: entry for rank {} ('{}') does not describe the {}-way split of the parameter table",
                          source, r, rf.name, m.world_size);
      }
      const std::int64_t chunks = (rf.bytes + m.checksum_chunk_bytes - 1) / m.checksum_chunk_bytes;
      if (static_cast<std::int64_t>(rf.chunk_crc32.size()) != chunks) {
        throw_input_error("{}: '{}' lists {} chunk checksums for {} bytes (expected {})", source, rf.name,
                          rf.chunk_crc32.size(), rf.bytes, chunks);
      }
      m.files.push_back(std::move(rf));
    }
  } catch (const nlohmann::json::exception& e) {
    throw_input_error("{}: malformed manifest: {}", source, e.what());
  } catch (const InternalError& e) {
    throw_input_error("{}: inconsistent manifest: {}", source, e.what());
  }
  return m;
}

}  // namespace zt::ckpt
