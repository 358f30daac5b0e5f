// Manifest JSON: the rank files' layout and writing; reading, with its validation, is
// checkpoint_manifest_read.cpp.
#include "engine/app/checkpoint/checkpoint_manifest.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>

#include "engine/app/checkpoint/durable_file.h"
#include "engine/base/core/check.h"
#include "engine/base/core/config_text.h"
#include "engine/distributed/sharding/shard_layout.h"

namespace zt::ckpt {

std::string_view state_kind_name(StateKind kind) {
  switch (kind) {
    case StateKind::kMaster: return "master";
    case StateKind::kExpAvg: return "exp_avg";
    case StateKind::kExpAvgSq: return "exp_avg_sq";
  }
  return "?";
}

std::string rank_file_name(int rank) { return fmt::format("rank_{:05d}.bin", rank); }
std::string step_dir_name(std::int64_t step) { return fmt::format("step_{:08d}", step); }

std::int64_t step_of(const std::string& dir_name) {
  if (dir_name.size() != 13 || !dir_name.starts_with("step_")) return -1;
  std::int64_t step = 0;
  for (char ch : dir_name.substr(5)) {
    if (ch < '0' || ch > '9') return -1;
    step = step * 10 + (ch - '0');
  }
  return step;
}

std::vector<FileSegment> rank_file_segments(const ParamTable& table, int world_size, int rank) {
  const ShardLayout layout(table, world_size, rank);
  std::vector<FileSegment> out;
  std::int64_t offset = 0;
  for (int k = 0; k < kNumStateKinds; ++k) {
    for (std::size_t u = 0; u < layout.num_units(); ++u) {
      const UnitShard& s = layout.unit(static_cast<int>(u));
      out.push_back({static_cast<StateKind>(k), static_cast<int>(u), s.begin, s.end, offset});
      offset += s.live() * 4;
    }
  }
  return out;
}

std::int64_t segments_bytes(const std::vector<FileSegment>& segments) {
  std::int64_t n = 0;
  for (const FileSegment& s : segments) n += (s.end - s.begin) * 4;
  return n;
}

std::string table_difference(const ParamTable& a, const ParamTable& b) {
  if (a.units().size() != b.units().size()) {
    return fmt::format("{} units vs {}", a.units().size(), b.units().size());
  }
  if (a.params().size() != b.params().size()) {
    return fmt::format("{} parameters vs {}", a.params().size(), b.params().size());
  }
  for (std::size_t i = 0; i < a.params().size(); ++i) {
    const ParamSpec &p = a.params()[i], &q = b.params()[i];
    if (p.name != q.name) return fmt::format("parameter {} is '{}' vs '{}'", i, p.name, q.name);
    if (p.shape != q.shape || p.unit != q.unit || p.offset != q.offset || p.row_offset != q.row_offset) {
      return fmt::format("'{}' (from row {}) is [{}] in unit {} at {} vs (from row {}) [{}] in unit {} at {}", p.name,
                         p.row_offset, fmt::join(p.shape, ", "), p.unit, p.offset, q.row_offset,
                         fmt::join(q.shape, ", "), q.unit, q.offset);
    }
    if (p.hf_shape != q.hf_shape) {
      return fmt::format("'{}' has Hugging Face shape [{}] vs [{}]", p.name, fmt::join(p.hf_shape, ", "),
                         fmt::join(q.hf_shape, ", "));
    }
    // A manifest edited to decay another tensor was taken, the model's own flags used in silence.
    if (p.decays != q.decays) {
      return fmt::format("'{}' {} weight decay vs {}", p.name, p.decays ? "takes" : "takes no",
                         q.decays ? "takes it" : "takes none");
    }
  }
  return "";
}

nlohmann::ordered_json Manifest::to_json() const {
  nlohmann::ordered_json params = nlohmann::ordered_json::array();
  for (const ParamSpec& p : table.params()) {
    params.push_back({{"name", p.name},
                      {"shape", p.shape},
                      {"hf_shape", p.hf_shape},
                      {"dtype", "F32"},
                      {"unit", p.unit},
                      {"offset", p.offset},
                      {"decays", p.decays},
                      {"row_offset", p.row_offset}});
  }
  nlohmann::ordered_json units = nlohmann::ordered_json::array();
  for (const UnitSpec& u : table.units()) {
    units.push_back({{"name", u.name}, {"numel", u.numel}, {"shard", (u.numel + world_size - 1) / world_size}});
  }
  nlohmann::ordered_json file_list = nlohmann::ordered_json::array();
  for (const RankFile& f : files) {
    nlohmann::ordered_json segs = nlohmann::ordered_json::array();
    for (const FileSegment& s : f.segments) {
      segs.push_back({{"state", state_kind_name(s.kind)},
                      {"unit", s.unit},
                      {"begin", s.begin},
                      {"end", s.end},
                      {"offset", s.offset}});
    }
    file_list.push_back({{"name", f.name},
                         {"rank", f.rank},
                         {"bytes", f.bytes},
                         {"crc32", f.crc32},
                         {"chunk_crc32", f.chunk_crc32},
                         {"segments", segs}});
  }
  nlohmann::ordered_json doc = {
      {"format", kFormatName},
      {"format_version", format_version},
      {"step", position.step},
      {"tokens_seen", position.tokens_seen},
      {"next_sample_index", position.next_sample_index},
      {"optimizer_step", position.optimizer_step},
      {"world_size", world_size},
      {"zero_stage", zero_stage},
      {"param_dtype", param_dtype},
      {"state", {"master", "exp_avg", "exp_avg_sq"}},
      {"state_dtype", "F32"},
      {"model", model},
      {"config", config},
      {"extra", extra},
      {"units", units},
      {"params", params},
      {"checksum", {{"algorithm", "crc32"}, {"chunk_bytes", checksum_chunk_bytes}}},
      {"files", file_list},
  };
  return doc;
}

std::string Manifest::to_text() const {
  nlohmann::ordered_json doc = to_json();
  const std::string compact = doc.dump();
  doc["manifest_crc32"] = crc32_update(0, compact.data(), static_cast<std::int64_t>(compact.size()));
  return doc.dump(1) + "\n";
}

Manifest Manifest::from_text(const std::string& text, const std::string& source) {
  // Within a depth no manifest has: nlohmann::json prints and frees a value by recursing once a
  // level, and a manifest nested 100000 deep (a fuzzer's) crashed every command that read it.
  nlohmann::json plain;
  nlohmann::ordered_json doc;  // in the written key order, which the seal covers
  try {
    plain = nlohmann::json::parse(text, json_depth_limit(source));
    doc = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw_input_error("{}: malformed JSON: {}", source, e.what());
  }
  // What it is and which version first: another version may seal its manifest otherwise. Then the
  // seal, before any field is read: a hand edit is said as one, not as the field it broke.
  checked_format_version(plain, source);
  if (!doc.contains("manifest_crc32")) {
    throw_input_error(
        "{}: no manifest_crc32 (written before manifests were sealed, 2026-11-25: resume or export it with the build "
        "that wrote it; or edited: restore the original)",
        source);
  }
  // A value no crc32 is (a string, a negative or one past 32 bits, which was cut to its low bits
  // and could then match) is an edit, not an older manifest.
  if (!doc["manifest_crc32"].is_number_unsigned() || doc["manifest_crc32"].get<std::uint64_t>() > 0xffffffffull) {
    throw_input_error("{}: manifest_crc32 = {} is no crc32: the manifest was edited or damaged", source,
                      doc["manifest_crc32"].dump().substr(0, 40));
  }
  const auto recorded = doc["manifest_crc32"].get<std::uint32_t>();
  doc.erase("manifest_crc32");
  const std::string compact = doc.dump();
  const std::uint32_t actual = crc32_update(0, compact.data(), static_cast<std::int64_t>(compact.size()));
  if (actual != recorded) {
    throw_input_error(
        "{}: manifest checksum mismatch (recorded {:08x}, contents {:08x}): the manifest was edited or "
        "damaged",
        source, recorded, actual);
  }
  Manifest m = from_json(plain, source);
  m.sealed_crc32 = recorded;
  return m;
}

std::string extra_string(const nlohmann::json& extra, const std::string& key) {
  return extra.is_object() && extra.contains(key) && extra[key].is_string() ? extra[key].get<std::string>() : "";
}

nlohmann::json extra_object(const nlohmann::json& extra, const std::string& key) {
  return extra.is_object() && extra.contains(key) && extra[key].is_object() ? extra[key] : nlohmann::json::object();
}

bool is_data_file_entry(const nlohmann::json& f) {
  const auto crc32 = [&](const char* key) {
    return f[key].is_number_unsigned() && f[key].get<std::uint64_t>() <= 0xFFFFFFFFu;
  };
  const auto string_or_absent = [&](const char* key) { return !f.contains(key) || f[key].is_string(); };
  return f.is_object() && f.contains("path") && f["path"].is_string() && f.contains("bytes") &&
         f["bytes"].is_number_integer() && f["bytes"].get<std::int64_t>() >= -1 && f.contains("fingerprint") &&
         crc32("fingerprint") && (!f.contains("sampled_fingerprint") || crc32("sampled_fingerprint")) &&
         string_or_absent("split") && string_or_absent("found");
}

std::string checkpoint_lineage_id(const nlohmann::json& extra, std::uint32_t manifest_crc32) {
  const std::string save_id = extra_string(extra, "save_id");
  return !save_id.empty() ? save_id : fmt::format("crc32:{:08x}", manifest_crc32);
}

int format_version_for(const nlohmann::json& model) {
  const bool scaled_rope = model.is_object() && model.contains("rope_scaling") && !model["rope_scaling"].is_null();
  return scaled_rope ? 2 : kFormatVersion;
}

std::string Manifest::savers() const {
  const int dp = data_parallel_ranks();
  return dp == world_size
             ? fmt::format("{} rank(s)", world_size)
             : fmt::format("{} rank(s), group 0 of {} data-parallel ranks in hybrid groups", world_size, dp);
}

}  // namespace zt::ckpt
