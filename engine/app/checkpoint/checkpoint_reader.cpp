// CheckpointReader: manifest parsing, file checks, chunk-verified ranged reads, resharded loads.
#include "engine/app/checkpoint/checkpoint_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "engine/app/io/input_file.h"
#include "engine/base/core/check.h"

namespace zt::ckpt {

// [Note: a reader's files through its held directory]
// Every file is opened in the directory the reader holds (openat), not by its path: a fresh run on
// a live folder sets its checkpoints aside to superseded/ and saves new ones under the same
// step_N names, and a reader opening by path could take the manifest of one and the rank files of
// the other (a checksum mismatch: "the file is corrupt", of a healthy checkpoint). Through the held
// directory it reads the checkpoint it began with, wherever that was moved.
CheckpointReader::CheckpointReader(std::string dir) : dir_(std::move(dir)), held_(FileHandle::hold_for_reading(dir_)) {
  const std::string path = dir_ + "/" + std::string(kManifestName);
  FileHandle manifest = FileHandle::open_in(held_, std::string(kManifestName), path);
  if (!manifest.is_open()) {
    const int err = errno;
    std::error_code ec;
    if (err != ENOENT) throw_input_error("{}: cannot read manifest: {}", path, std::strerror(err));
    // Removed between its choice and its hold (keep_last pruning a live run's older checkpoints).
    if ((held_.is_open() && !held_.still_at(dir_)) || !std::filesystem::exists(dir_, ec)) {
      throw_input_error(
          "{}: the checkpoint was removed as it was read (a live run's keep_last prunes its older "
          "ones): read the folder again",
          dir_);
    }
    throw_input_error("{}: missing manifest (not a complete checkpoint)", path);
  }
  if (!manifest.regular_file()) {
    require_regular_file(path, "checkpoint manifest");  // names what it is
    throw_input_error("checkpoint manifest {}: not a regular file", path);
  }
  constexpr std::int64_t kMaxManifestBytes = std::int64_t{1} << 30;  // far past a million ranks' entries
  const std::int64_t bytes = manifest.size();
  if (bytes > kMaxManifestBytes) throw_input_error("{}: {} bytes, more than any manifest holds", path, bytes);
  std::string text(static_cast<std::size_t>(bytes), '\0');
  manifest.read_at(text.data(), bytes, 0);
  manifest_ = Manifest::from_text(text, path);
  // A step_XXXXXXXX directory holds that step: a manifest moved or edited to another one is refused.
  std::filesystem::path name = std::filesystem::path(dir_).lexically_normal();
  if (name.filename().empty()) name = name.parent_path();
  const std::string folder = name.filename().string();
  if (step_of(folder) >= 0 && step_of(folder) != manifest_.position.step) {
    throw_input_error("{}: the manifest records step {}, but its directory is {}", path, manifest_.position.step,
                      folder);
  }
  for (const RankFile& f : manifest_.files) {  // checked now, opened when first read (a file each)
    const std::string file = dir_ + "/" + f.name;
    const FileHandle h = FileHandle::open_in(held_, f.name, file);
    if (!h.is_open()) {
      if (errno == ENOENT) throw_input_error("{}: rank file missing", file);
      throw_input_error("{}: cannot open: {}", file, std::strerror(errno));
    }
    if (!h.regular_file()) {
      require_regular_file(file, "checkpoint rank file");  // a folder's size is no file's
      throw_input_error("checkpoint rank file {}: not a regular file", file);
    }
    if (h.size() != f.bytes) {
      throw_input_error("{}: {} bytes but the manifest records {} ({})", file, static_cast<long long>(h.size()),
                        f.bytes, h.size() < f.bytes ? "truncated" : "extra bytes");
    }
  }
  handles_.resize(manifest_.files.size());
}

const FileHandle& CheckpointReader::handle(int file) const {
  FileHandle& h = handles_.at(static_cast<std::size_t>(file));
  if (!h.is_open()) {
    const std::string& name = manifest_.files[static_cast<std::size_t>(file)].name;
    h = FileHandle::open_in(held_, name, dir_ + "/" + name);
    if (!h.is_open()) throw_input_error("{}/{}: cannot open: {}", dir_, name, std::strerror(errno));
  }
  return h;
}

void CheckpointReader::read_file_range(int file, std::int64_t lo, std::int64_t hi, char* out) const {
  const RankFile& f = manifest_.files[static_cast<std::size_t>(file)];
  const std::int64_t chunk = manifest_.checksum_chunk_bytes;
  chunk_.resize(static_cast<std::size_t>(chunk));
  for (std::int64_t c = lo / chunk; c * chunk < hi; ++c) {
    const std::int64_t c_lo = c * chunk, c_hi = std::min(c_lo + chunk, f.bytes);
    if (cached_file_ != file || cached_chunk_ != c) {  // consecutive pieces often share a chunk
      cached_file_ = -1;
      handle(file).read_at(chunk_.data(), c_hi - c_lo, c_lo);
      bytes_read_ += c_hi - c_lo;
      if (crc32_update(0, chunk_.data(), c_hi - c_lo) != f.chunk_crc32[static_cast<std::size_t>(c)]) {
        throw_input_error("{}/{}: checksum mismatch in bytes [{}, {}): the file is corrupt", dir_, f.name, c_lo, c_hi);
      }
      cached_file_ = file;
      cached_chunk_ = c;
    }
    const std::int64_t a = std::max(lo, c_lo), b = std::min(hi, c_hi);
    std::memcpy(out + (a - lo), chunk_.data() + (a - c_lo), static_cast<std::size_t>(b - a));
  }
}

void CheckpointReader::plan_read(StateKind kind, int unit, std::int64_t begin, std::int64_t end, float* out,
                                 std::vector<Piece>& plan) const {
  ZT_CHECK(unit >= 0 && static_cast<std::size_t>(unit) < manifest_.table.units().size() && begin >= 0 && begin <= end &&
               end <= manifest_.table.units()[static_cast<std::size_t>(unit)].numel,
           "read of unit {} [{}, {})", unit, begin, end);
  std::int64_t covered = 0;
  for (std::size_t file = 0; file < manifest_.files.size(); ++file) {
    for (const FileSegment& s : manifest_.files[file].segments) {
      if (s.kind != kind || s.unit != unit) continue;
      const std::int64_t lo = std::max(begin, s.begin), hi = std::min(end, s.end);
      if (lo >= hi) continue;
      plan.push_back({static_cast<int>(file), s.offset + (lo - s.begin) * 4, s.offset + (hi - s.begin) * 4,
                      reinterpret_cast<char*>(out + (lo - begin))});
      covered += hi - lo;
    }
  }
  ZT_CHECK(covered == end - begin, "unit {} [{}, {}) not covered by the rank files", unit, begin, end);
}

void CheckpointReader::execute(std::vector<Piece> plan) const {
  std::sort(plan.begin(), plan.end(),
            [](const Piece& a, const Piece& b) { return a.file != b.file ? a.file < b.file : a.lo < b.lo; });
  for (const Piece& p : plan) read_file_range(p.file, p.lo, p.hi, p.out);
}

void CheckpointReader::read(StateKind kind, int unit, std::int64_t begin, std::int64_t end, float* out) const {
  std::vector<Piece> plan;
  plan_read(kind, unit, begin, end, out, plan);
  execute(std::move(plan));
}

void CheckpointReader::verify_checksums() const {
  for (std::size_t file = 0; file < manifest_.files.size(); ++file) verify_file(static_cast<int>(file));
}

void CheckpointReader::verify_file(int file) const {
  const RankFile& f = manifest_.files.at(static_cast<std::size_t>(file));
  const std::int64_t chunk = manifest_.checksum_chunk_bytes;
  cached_file_ = -1;  // verification reads from disk, never from the cache
  std::uint32_t whole = 0;
  std::vector<char> scratch(static_cast<std::size_t>(std::min(chunk, f.bytes)));
  for (std::int64_t lo = 0; lo < f.bytes; lo += chunk) {
    const std::int64_t hi = std::min(lo + chunk, f.bytes);
    read_file_range(file, lo, hi, scratch.data());  // checks the chunk's crc
    whole = crc32_concat(whole, f.chunk_crc32[static_cast<std::size_t>(lo / chunk)], hi - lo);
  }
  if (whole != f.crc32) {
    throw_input_error("{}/{}: whole-file crc32 {:08x} does not match the manifest's {:08x}", dir_, f.name, whole,
                      f.crc32);
  }
}

void load_optimizer_state(const CheckpointReader& reader, const ParamTable& table, const OptimizerStateTarget& target) {
  const std::string diff = table_difference(reader.manifest().table, table);
  if (!diff.empty()) {
    throw_input_error("{}/{}: the checkpoint's model differs from this run's: {}", reader.dir(), kManifestName, diff);
  }
  const ShardLayout& layout = *target.layout;
  ZT_CHECK(layout.num_units() == table.units().size());
  std::vector<CheckpointReader::Piece> plan;  // every read at once, executed in file order
  for (std::size_t u = 0; u < layout.num_units(); ++u) {
    const int unit = static_cast<int>(u);
    const UnitShard& s = layout.unit(unit);
    for (int k = 0; k < kNumStateKinds; ++k) {
      const TensorView view = target.state(static_cast<StateKind>(k), unit);
      ZT_CHECK(view.dtype == DType::kF32 && view.numel() >= s.live(), "state view of unit {} too small", unit);
      float* out = view.as<float>();
      reader.plan_read(static_cast<StateKind>(k), unit, s.begin, s.end, out, plan);
      std::fill(out + s.live(), out + view.numel(), 0.0f);
    }
  }
  reader.execute(std::move(plan));
  // Values no run saves: a NaN or infinite state, a negative second moment (its square root is
  // NaN). Resumed, the first update made every parameter NaN, and that checkpoint became the
  // latest before the run stopped. Only a file damaged past its checksums (rewritten and
  // resealed) holds them.
  for (std::size_t u = 0; u < layout.num_units(); ++u) {
    const int unit = static_cast<int>(u);
    for (int k = 0; k < kNumStateKinds; ++k) {
      const auto kind = static_cast<StateKind>(k);
      const float* values = target.state(kind, unit).as<float>();
      const std::int64_t live = layout.unit(unit).live();
      for (std::int64_t i = 0; i < live; ++i) {
        if (std::isfinite(values[i]) && (kind != StateKind::kExpAvgSq || values[i] >= 0.0f)) continue;
        throw_input_error(
            "{}: unit '{}' {} element {} of this rank's shard is {}: not a state AdamW continues from (the checkpoint "
            "is damaged)",
            reader.dir(), table.units()[u].name, state_kind_name(kind), i, values[i]);
      }
    }
  }
}

}  // namespace zt::ckpt
