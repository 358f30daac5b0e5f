// Checkpoint folder policies: listing, the latest pointer, keep-last and setting aside.
#include "engine/app/checkpoint/checkpoint_folder.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engine/app/checkpoint/checkpoint_manifest.h"
#include "engine/app/checkpoint/durable_file.h"
#include "engine/base/core/check.h"

namespace zt::ckpt {

namespace fs = std::filesystem;

std::vector<CheckpointEntry> list_checkpoints(const std::string& folder) {
  std::vector<CheckpointEntry> out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) {
    const std::int64_t step = step_of(e.path().filename().string());
    // Without throwing: a link named step_* that loops (or cannot be followed) is no checkpoint,
    // and failed every reader of the folder.
    std::error_code entry_ec;
    if (step >= 0 && e.is_directory(entry_ec)) out.push_back({step, e.path().string()});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return out;
}

bool is_complete(const std::string& dir) { return fs::exists(fs::path(dir) / std::string(kManifestName)); }

std::vector<CheckpointEntry> complete_checkpoints(const std::string& folder) {
  std::vector<CheckpointEntry> complete = list_checkpoints(folder);
  std::erase_if(complete, [](const CheckpointEntry& c) { return !is_complete(c.path); });
  return complete;
}

namespace {

// `path`'s text where it is a regular file (through links), else "": a directory would throw from
// inside the stream's read, and opening a FIFO would wait for a writer that never comes.
std::string regular_file_text(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return "";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return in ? text.str() : "";
}

}  // namespace

std::string read_latest(const std::string& folder) {
  std::istringstream in(regular_file_text(fs::path(folder) / kLatestName));
  std::string name;
  if (!std::getline(in, name) || step_of(name) < 0) return "";
  return name;
}

void write_latest(const std::string& folder, const std::string& dir_name) {
  write_file_atomically((fs::path(folder) / kLatestName).string(), dir_name + "\n");
}

void remove_checkpoint_dir(const std::string& path) {
  const fs::path p(path);
  const fs::path doomed = p.parent_path() / (kDeletePrefix + p.filename().string());
  std::error_code ec;
  fs::remove_all(doomed, ec);
  fs::rename(p, doomed, ec);
  if (ec) throw_runtime_error("cannot remove checkpoint '{}': {}", path, ec.message());
  fs::remove_all(doomed, ec);
  if (ec) throw_runtime_error("cannot remove '{}': {}", doomed.string(), ec.message());
}

void apply_keep_last(const std::string& folder, int keep_last, const std::string& keep,
                     std::vector<std::string>& marked) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) {
    const std::string name = e.path().filename().string();
    if (e.path() != fs::path(keep) && (name.starts_with(kTempPrefix) || name.starts_with(kDeletePrefix))) {
      fs::remove_all(e.path(), ec);  // what a killed save or removal left behind
    }
  }
  if (keep_last <= 0) return;
  const std::vector<CheckpointEntry> complete = complete_checkpoints(folder);
  // A marker that could not be written, and the removals that failed: said once the rest is done.
  // One checkpoint that cannot go (made immutable, a file in it another user's) kept every newer
  // one past keep_last with it, save after save, until the disk filled.
  std::string unmarked;
  std::vector<std::string> unremoved;
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep_last) < complete.size(); ++i) {
    if (fs::path(complete[i].path) == fs::path(keep)) continue;
    FileHandle held;
    if (FileHandle::hold_exclusive(complete[i].path, held)) {
      try {
        remove_checkpoint_dir(complete[i].path);
      } catch (const std::exception& e) {
        unremoved.emplace_back(e.what());
      }
      continue;
    }
    // One a reader holds (ckpt export, eval --ckpt of a live run's folder; a resume until its
    // ranks opened it, by its path) stays where it is for a later save, marked pruned: a resume
    // that cannot tell it for an ancestor (the saves between it and the one resumed pruned) leaves
    // it to keep_last rather than setting it aside to superseded/ as another trajectory's, where
    // nothing deletes it.
    const fs::path marker = fs::path(complete[i].path) / kPrunedMarker;
    if (fs::exists(marker, ec)) continue;
    if (std::ofstream(marker) << "pruned by keep_last while a reader held it\n") {
      marked.push_back(fs::path(complete[i].path).filename().string());
    } else {
      unmarked = marker.string();
    }
  }
  if (!unmarked.empty()) {
    unremoved.push_back(fmt::format("cannot write {} (a checkpoint a reader holds, left for a later save)", unmarked));
  }
  if (!unremoved.empty()) throw_runtime_error("{}", fmt::join(unremoved, "; "));
}

namespace {

// Moves the folder's checkpoints `other` picks into superseded/ and keeps `latest` on one left.
template <class Other>
std::vector<std::string> set_aside_where(const std::string& folder, Other&& other) {
  std::vector<std::string> moved;
  const fs::path aside = fs::path(folder) / kSupersededName;
  for (const CheckpointEntry& c : list_checkpoints(folder)) {
    if (!other(c)) continue;
    std::error_code ec;
    fs::create_directories(aside, ec);
    if (ec) throw_runtime_error("cannot create '{}': {}", aside.string(), ec.message());
    const std::string name = fs::path(c.path).filename().string();
    fs::path target = aside / name;
    for (int n = 2; fs::exists(target); ++n) target = aside / fmt::format("{}.{}", name, n);
    fs::rename(c.path, target, ec);
    if (ec) {
      throw_runtime_error("cannot move checkpoint '{}' to '{}': {}{}", c.path, target.string(), ec.message(),
                          moved.empty() ? "" : fmt::format(" (moved there before it: {})", fmt::join(moved, ", ")));
    }
    moved.push_back(name);
  }
  const std::string latest = read_latest(folder);
  if (moved.empty() || (!latest.empty() && std::find(moved.begin(), moved.end(), latest) == moved.end())) {
    return moved;  // `latest` still names a checkpoint of this trajectory
  }
  // The newest left that keep_last did not prune (a marked one may be another trajectory's: a reader
  // held it as its own run pruned it); none: no `latest`.
  std::string newest;
  for (const CheckpointEntry& c : complete_checkpoints(folder)) {
    std::error_code marker_ec;
    if (!fs::exists(fs::path(c.path) / kPrunedMarker, marker_ec)) newest = fs::path(c.path).filename().string();
  }
  // The moves are done: a failure from here says them (a resume passes over a `latest` naming one).
  const std::string moves = fmt::format("after moving {} to {}", fmt::join(moved, ", "), aside.string());
  try {
    if (!newest.empty()) {
      write_latest(folder, newest);
    } else {
      std::error_code ec;
      fs::remove(fs::path(folder) / kLatestName, ec);
    }
  } catch (const std::exception& e) {
    throw_runtime_error("{} ({}: `latest` still names {}, which a resume now passes over)", e.what(), moves, latest);
  }
  try {
    sync_dir(folder);
  } catch (const std::exception& e) {
    throw_runtime_error("{} ({})", e.what(), moves);
  }
  return moved;
}

}  // namespace

std::vector<std::string> set_aside_checkpoints_after(const std::string& folder, std::int64_t step) {
  return set_aside_where(folder, [&](const CheckpointEntry& c) { return c.step > step; });
}

SupersededUsage superseded_usage(const std::string& folder) {
  SupersededUsage usage;
  std::error_code ec;
  const fs::path aside = fs::path(folder) / kSupersededName;
  for (fs::directory_iterator it(aside, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec)) ++usage.checkpoints;
  }
  for (fs::recursive_directory_iterator it(aside, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const std::uintmax_t size = it->file_size(size_ec);
      if (!size_ec) usage.bytes += static_cast<std::int64_t>(size);
    }
  }
  return usage;
}

CheckpointLineage lineage_of(const std::string& checkpoint_dir) {
  const nlohmann::json doc = nlohmann::json::parse(regular_file_text(fs::path(checkpoint_dir) / kManifestName), nullptr,
                                                   /*allow_exceptions=*/false);
  CheckpointLineage l;
  if (!doc.is_object() || !doc.contains("manifest_crc32") || !doc["manifest_crc32"].is_number_unsigned()) return l;
  const nlohmann::json extra = doc.value("extra", nlohmann::json::object());
  l.save_id = checkpoint_lineage_id(extra, doc["manifest_crc32"].get<std::uint32_t>());
  l.previous_save_id = extra_string(extra, "previous_save_id");
  l.has_save_id = !extra_string(extra, "save_id").empty();
  return l;
}

std::vector<std::string> set_aside_other_trajectories(const std::string& folder, std::int64_t step,
                                                      const std::string& lineage_id,
                                                      const std::string& previous_save_id) {
  // The lineage of each checkpoint at or before `step`, read once; then the resumed checkpoint's
  // ancestors among them: its previous save, that one's, and so on. The chain also passes through
  // superseded/ (whatever their names there): a checkpoint resumed from it after a rollback
  // descends from the rollback's abandoned saves, and through them from the folder's older ones.
  std::map<std::string, CheckpointLineage> lineages;  // by path
  std::map<std::string, std::string> previous_of;
  for (const CheckpointEntry& c : list_checkpoints(folder)) {
    if (c.step > step) continue;
    const CheckpointLineage& l = lineages[c.path] = lineage_of(c.path);
    if (!l.save_id.empty()) previous_of.emplace(l.save_id, l.previous_save_id);
  }
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(fs::path(folder) / kSupersededName, ec)) {
    if (std::error_code dir_ec; !e.is_directory(dir_ec)) continue;
    const CheckpointLineage l = lineage_of(e.path().string());
    if (!l.save_id.empty()) previous_of.emplace(l.save_id, l.previous_save_id);
  }
  std::set<std::string> ours = {lineage_id};
  for (std::string id = previous_save_id; previous_of.count(id) > 0 && ours.insert(id).second; id = previous_of[id]) {}
  return set_aside_where(folder, [&](const CheckpointEntry& c) {
    if (c.step > step) return true;
    // One keep_last pruned while a reader held it: older, left to the next save's keep_last.
    if (std::error_code marker_ec; fs::exists(fs::path(c.path) / kPrunedMarker, marker_ec)) return false;
    // One from before save ids has no lineage to tell by, and one whose manifest cannot be read is
    // no fallback: both stay.
    const CheckpointLineage& l = lineages[c.path];
    return l.has_save_id && ours.count(l.save_id) == 0;
  });
}

}  // namespace zt::ckpt
