// A sharded checkpoint's manifest: what a step_XXXXXXXX/ directory holds and where (see
// docs/checkpoint_format.md). The rank-file layout is a pure function of the parameter table and
// the save-time world size, so every rank computes its own offsets (and every other rank's) alone.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/core/param_table.h"

namespace zt::ckpt {

// The layout is version 1's in both; version 2 marks a model that builds reading only version 1
// (before model.rope_scaling) would load without a key it needs and misread, silently (a Llama
// 3.1/3.2 checkpoint exported or sampled without its RoPE scaling): they refuse version 2. This
// build reads both and writes 2 only for such a model (format_version_for).
inline constexpr int kFormatVersion = 1;
inline constexpr int kNewestFormatVersion = 2;
// The version a checkpoint of `model` (the manifest's model section) is written with.
int format_version_for(const nlohmann::json& model);
inline constexpr std::string_view kFormatName = "zerotrain-checkpoint";
inline constexpr std::string_view kManifestName = "manifest.json";
// Checksums cover fixed chunks of each rank file, so a loader that reads a byte range verifies
// what it reads without reading the whole file (at most one chunk extra at each end).
inline constexpr std::int64_t kChecksumChunkBytes = std::int64_t{1} << 20;
// The largest chunk a manifest may name: a reader holds one whole to check it.
inline constexpr std::int64_t kMaxChecksumChunkBytes = std::int64_t{64} << 20;

// The optimizer state kept per element, all fp32: master weights and AdamW's two moments
// (torch's names). Working parameters are not stored: they are the master (fp32 mode) or its
// round-to-nearest-even bf16 cast (bf16 mode), exactly what ShardedAdamW writes after each update.
enum class StateKind : int { kMaster = 0, kExpAvg = 1, kExpAvgSq = 2 };
inline constexpr int kNumStateKinds = 3;
std::string_view state_kind_name(StateKind kind);

// Elements [begin, end) of one unit's state, stored fp32 at byte `offset` of a rank file.
struct FileSegment {
  StateKind kind = StateKind::kMaster;
  int unit = 0;
  std::int64_t begin = 0, end = 0;
  std::int64_t offset = 0;
  bool operator==(const FileSegment&) const = default;
};

struct RankFile {
  std::string name;  // rank_00003.bin
  int rank = 0;
  std::int64_t bytes = 0;
  std::uint32_t crc32 = 0;                 // whole file (zlib crc32)
  std::vector<std::uint32_t> chunk_crc32;  // one per kChecksumChunkBytes chunk, the last one short
  std::vector<FileSegment> segments;
};

// Where training stands: enough to resume exactly (data order and dropout are pure functions of
// the seed and the global sample index; the LR schedule of the step).
struct TrainingPosition {
  std::int64_t step = 0;  // optimizer steps completed (the LR-schedule position)
  std::int64_t tokens_seen = 0;
  std::int64_t next_sample_index = 0;  // global sample index of the next step's first sample
  int optimizer_step = 0;              // AdamW's bias-correction count t
};

// extra[key] where the manifest's extra holds it as a string, else "" (a field written after the
// manifest was: the lineage fields of a checkpoint from before save ids).
std::string extra_string(const nlohmann::json& extra, const std::string& key);
// extra[key] where it is an object, else an empty one (a checkpoint saved before the field was).
nlohmann::json extra_object(const nlohmann::json& extra, const std::string& key);

// One entry of a data identity (trainer/run_identity.h) as a run writes it: path (a string), bytes
// (a whole number, -1 where the file could not be read), fingerprint and sampled_fingerprint (where
// there is one) crc32s, split and found (where there are) strings. A manifest's and final.safetensors'
// entries are read through it: a fingerprint past 32 bits was printed cut to its low bits, so a
// changed file's refusal named two equal fingerprints.
bool is_data_file_entry(const nlohmann::json& f);

// A checkpoint's name in its folder's lineage, which the next save of its run records as its
// previous_save_id: extra.save_id, or, for a checkpoint saved before save ids, "crc32:" and its
// manifest_crc32 (so that the first save after an upgrade continues its chain: a kill before
// `latest` names that save then does not lose its steps).
std::string checkpoint_lineage_id(const nlohmann::json& extra, std::uint32_t manifest_crc32);

struct Manifest {
  int format_version = kFormatVersion;
  TrainingPosition position;
  int world_size = 1;               // ranks at save time (the N of the file split)
  int zero_stage = 0;               // stage at save time (informational: the files do not depend on it)
  std::string param_dtype = "f32";  // working parameters at save time: f32 | bf16
  nlohmann::json model;             // model hyper-parameters (GPT: n_layer, n_head, n_embd, block_size, vocab_size)
  nlohmann::json config;            // the resolved training config, as the caller gave it
  nlohmann::json extra;             // caller-defined state (e.g. skipped-step counters)
  ParamTable table;
  std::int64_t checksum_chunk_bytes = kChecksumChunkBytes;
  std::vector<RankFile> files;
  std::uint32_t sealed_crc32 = 0;  // manifest_crc32 as from_text read it (0: not read from a file)

  nlohmann::ordered_json to_json() const;  // keys in the documented order
  // manifest.json's text: to_json() plus `manifest_crc32`, the crc32 of to_json()'s compact
  // dump, so that an edited manifest (another step, another sample index) is refused.
  std::string to_text() const;
  // Parses and validates (format, version, table, every file's segments against the N-way split);
  // throws InputError naming `source` and the fault.
  static Manifest from_json(const nlohmann::json& doc, const std::string& source);
  // Parses manifest.json's text (within a depth no manifest has), checks its format and version,
  // then its manifest_crc32, then validates it as from_json does: a hand edit is refused as one
  // before any field of it is read. InputErrors name `source`.
  static Manifest from_text(const std::string& text, const std::string& source);
  // `doc`'s format_version, where it is a zerotrain manifest of a version this build reads;
  // InputError naming `source` otherwise.
  static int checked_format_version(const nlohmann::json& doc, const std::string& source);

  // The ranks that trained it, as a resume counts them (extra.data_parallel_ranks: hybrid
  // sharding's group 0 saves, so world_size is the group's size); world_size without the key.
  int data_parallel_ranks() const {
    return extra.is_object() ? extra.value("data_parallel_ranks", world_size) : world_size;
  }
  // "2 rank(s)", or "2 rank(s), group 0 of 4 data-parallel ranks in hybrid groups": who saved it.
  std::string savers() const;
  // Its name in its folder's lineage (checkpoint_lineage_id).
  std::string lineage_id() const { return checkpoint_lineage_id(extra, sealed_crc32); }
};

// What rank `rank` of `world_size` stores: for each state kind, for each unit, its N-way slice
// [r*s, min((r+1)*s, n)) of the unit, packed in that order (padding never written).
std::vector<FileSegment> rank_file_segments(const ParamTable& table, int world_size, int rank);
std::int64_t segments_bytes(const std::vector<FileSegment>& segments);
std::string rank_file_name(int rank);
std::string step_dir_name(std::int64_t step);
// Its inverse: "step_00000120" -> 120; -1 for any other name.
std::int64_t step_of(const std::string& dir_name);

// First difference between two parameter tables ("" when equal): names, shapes, units, offsets.
std::string table_difference(const ParamTable& expected, const ParamTable& actual);

}  // namespace zt::ckpt
