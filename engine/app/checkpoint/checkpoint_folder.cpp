// Checkpoint folder policies: listing, the latest pointer, keep-last and resolution with fallback.
#include "engine/app/checkpoint/checkpoint_folder.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "engine/app/checkpoint/checkpoint_absence.h"
#include "engine/app/checkpoint/checkpoint_manifest.h"
#include "engine/app/checkpoint/checkpoint_reader.h"
#include "engine/app/checkpoint/durable_file.h"
#include "engine/base/core/check.h"

namespace zt::ckpt {

namespace fs = std::filesystem;

namespace {

void check_valid(const std::string& dir, Validation validation) {
  const CheckpointReader reader(dir);
  if (validation == Validation::kChecksums) reader.verify_checksums();
}

}  // namespace

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

void apply_keep_last(const std::string& folder, int keep_last, const std::string& keep) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) {
    const std::string name = e.path().filename().string();
    if (e.path() != fs::path(keep) && (name.starts_with(kTempPrefix) || name.starts_with(kDeletePrefix))) {
      fs::remove_all(e.path(), ec);  // what a killed save or removal left behind
    }
  }
  if (keep_last <= 0) return;
  const std::vector<CheckpointEntry> complete = complete_checkpoints(folder);
  std::string unmarked;  // a marker that could not be written: said once the rest is done
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep_last) < complete.size(); ++i) {
    if (fs::path(complete[i].path) == fs::path(keep)) continue;
    FileHandle held;
    if (FileHandle::hold_exclusive(complete[i].path, held)) {
      remove_checkpoint_dir(complete[i].path);
      continue;
    }
    // One a reader holds (ckpt export, eval --ckpt of a live run's folder; a resume until its
    // ranks opened it, by its path) stays where it is for a later save, marked pruned: a resume
    // that cannot tell it for an ancestor (the saves between it and the one resumed pruned) leaves
    // it to keep_last rather than setting it aside to superseded/ as another trajectory's, where
    // nothing deletes it.
    const fs::path marker = fs::path(complete[i].path) / kPrunedMarker;
    if (!fs::exists(marker, ec) && !(std::ofstream(marker) << "pruned by keep_last while a reader held it\n")) {
      unmarked = marker.string();
    }
  }
  if (!unmarked.empty()) {
    throw_runtime_error("cannot write {} (a checkpoint a reader holds, left for a later save)", unmarked);
  }
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

namespace {

// A checkpoint's lineage: its checkpoint_lineage_id and the previous_save_id in its manifest's
// extra; "" where the manifest cannot be read (or, for the previous, predates save ids).
struct Lineage {
  std::string save_id, previous_save_id;
  bool has_save_id = false;  // extra.save_id itself (not a checkpoint from before save ids)
};

Lineage lineage_of(const fs::path& dir) {
  const nlohmann::json doc =
      nlohmann::json::parse(regular_file_text(dir / std::string(kManifestName)), nullptr, /*allow_exceptions=*/false);
  Lineage l;
  if (!doc.is_object() || !doc.contains("manifest_crc32") || !doc["manifest_crc32"].is_number_unsigned()) return l;
  const nlohmann::json extra = doc.value("extra", nlohmann::json::object());
  l.save_id = checkpoint_lineage_id(extra, doc["manifest_crc32"].get<std::uint32_t>());
  l.previous_save_id = extra_string(extra, "previous_save_id");
  l.has_save_id = !extra_string(extra, "save_id").empty();
  return l;
}

}  // namespace

std::vector<std::string> set_aside_other_trajectories(const std::string& folder, std::int64_t step,
                                                      const std::string& lineage_id,
                                                      const std::string& previous_save_id) {
  // The lineage of each checkpoint at or before `step`, read once; then the resumed checkpoint's
  // ancestors among them: its previous save, that one's, and so on. The chain also passes through
  // superseded/ (whatever their names there): a checkpoint resumed from it after a rollback
  // descends from the rollback's abandoned saves, and through them from the folder's older ones.
  std::map<std::string, Lineage> lineages;  // by path
  std::map<std::string, std::string> previous_of;
  for (const CheckpointEntry& c : list_checkpoints(folder)) {
    if (c.step > step) continue;
    const Lineage& l = lineages[c.path] = lineage_of(c.path);
    if (!l.save_id.empty()) previous_of.emplace(l.save_id, l.previous_save_id);
  }
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(fs::path(folder) / kSupersededName, ec)) {
    if (std::error_code dir_ec; !e.is_directory(dir_ec)) continue;
    const Lineage l = lineage_of(e.path());
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
    const Lineage& l = lineages[c.path];
    return l.has_save_id && ours.count(l.save_id) == 0;
  });
}

namespace {

// Whether superseded/ holds a checkpoint set aside from the folder as `name` (or `name`.N, the
// name being taken there).
bool set_aside_as(const std::string& folder, const std::string& name) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(fs::path(folder) / kSupersededName, ec)) {
    const std::string n = e.path().filename().string();
    if (n == name || n.starts_with(name + ".")) return true;
  }
  return false;
}

// A folder's checkpoints in the order resolution tries them, newest first: latest's, and before
// it the step_* newer than it that continue it (each one's previous_save_id the save_id of the one
// before, from latest's on: saves committed, renamed into place, whose pointer update a kill or an
// I/O error stopped; taking latest's over them would lose their steps; noted). A newer one that
// does not continue latest's is another trajectory's (a folder reused by a binary that did not set
// it aside, or copied with its files' times reset) and not tried. Then the older ones.
std::vector<std::string> resolution_order(const std::string& folder, const std::string& latest,
                                          std::vector<std::string>* notes) {
  std::vector<std::string> newer, order;
  const std::int64_t latest_step = latest.empty() ? -1 : step_of(latest);
  const std::vector<CheckpointEntry> all = list_checkpoints(folder);  // ascending steps
  if (!latest.empty()) {
    std::string chain = lineage_of(fs::path(folder) / latest).save_id;
    for (const CheckpointEntry& e : all) {
      const fs::path dir(e.path);
      if (chain.empty() || step_of(dir.filename().string()) <= latest_step) continue;
      const Lineage l = lineage_of(dir);
      if (l.previous_save_id != chain || l.save_id.empty()) continue;
      chain = l.save_id;
      newer.insert(newer.begin(), e.path);
      if (notes != nullptr) {
        notes->push_back(
            fmt::format("{} is newer than the checkpoint {} names ({}) and continues it: a save "
                        "committed before its pointer was updated",
                        dir.filename().string(), kLatestName, latest));
      }
    }
    order = newer;
    order.push_back((fs::path(folder) / latest).string());
  }
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const fs::path dir(it->path);
    if (!latest.empty() && (step_of(dir.filename().string()) > latest_step || dir.filename() == latest)) continue;
    order.push_back(it->path);
  }
  return order;
}

// `latest`'s name, read again where the checkpoint it names is gone: a live run's save rewrites
// the pointer and then lets keep_last delete the one it named, so a pointer read just before names
// a deleted checkpoint while the new one stands (its lineage went with it, so the newer one would
// not be tried). Where it is still gone (deleted by hand), the pointer is taken as it is.
std::string current_latest(const std::string& folder) {
  const std::string latest = read_latest(folder);
  std::error_code ec;
  if (latest.empty() || fs::exists(fs::path(folder) / latest, ec)) return latest;
  return read_latest(folder);
}

}  // namespace

ResolvedCheckpoint resolve_checkpoint(const std::string& path, Validation validation) {
  const fs::path given(path);
  if (std::error_code given_ec; given.filename() == kLatestName &&
                                fs::is_regular_file(given, given_ec)) {  // the folder's pointer, not a checkpoint
    throw_input_error(
        "{}: a checkpoint folder's pointer file, not a checkpoint; give the folder ({}) or the checkpoint it names",
        path, given.parent_path().string());
  }
  if (std::error_code dir_ec; !fs::is_directory(path, dir_ec)) {  // a link that loops: not a directory
    std::error_code ec;
    throw_input_error("{}: {}", path,
                      fs::exists(path, ec) ? "not a directory: a checkpoint is a step_* directory, or a folder of them"
                                           : "no such checkpoint or checkpoint folder");
  }
  // A save's staging directory or one on its way out, which nothing reads (a resume from it would
  // also see it deleted by its own next save, as leftovers are): named, with the way to try it. By
  // the name it resolves to (`dir/.`, a symlink), and only a checkpoint: a checkpoint folder may
  // be called anything.
  std::error_code canonical_error;
  const fs::path resolved = fs::weakly_canonical(given, canonical_error);
  const fs::path named = canonical_error ? given : resolved;
  const std::string name = (named.has_filename() ? named : named.parent_path()).filename().string();
  for (const std::string_view prefix : {std::string_view(kTempPrefix), std::string_view(kDeletePrefix)}) {
    if (!name.starts_with(prefix)) continue;
    const std::string step_name = name.substr(prefix.size());
    if (!is_complete(path) && step_of(step_name) < 0) continue;
    throw_input_error(
        "{}: {}, which zerotrain never reads; give a step_* directory or the checkpoint folder (to try this one, "
        "rename it to {} and run `zerotrain ckpt verify` on it)",
        path,
        prefix == kTempPrefix ? "a save's staging directory, never committed (the save was cut off)"
                              : "a checkpoint being removed (its files may be partly gone)",
        step_name);
  }
  ResolvedCheckpoint result;
  const bool choosing = validation == Validation::kChecksumsToChoose;
  if (is_complete(path) || step_of(fs::path(path).filename().string()) >= 0) {
    // An explicit checkpoint: valid or an error, never another one.
    result.held = FileHandle::hold_for_reading(path);
    check_valid(path, choosing ? Validation::kStructure : validation);
    result.path = path;
    return result;
  }
  const std::string latest = current_latest(path);
  if (std::error_code latest_ec;
      latest.empty() && fs::exists(fs::symlink_status(fs::path(path) / kLatestName, latest_ec))) {
    result.notes.push_back(fmt::format("{}/{} is unreadable; using the newest valid checkpoint", path, kLatestName));
  }
  const std::vector<std::string> candidates = resolution_order(path, latest, &result.notes);
  std::string first_error;
  for (const std::string& c : candidates) {
    try {
      // `latest` naming one a rollback resume moved aside (as NAME, or NAME.2 where that was taken),
      // which failed before it re-pointed it.
      std::error_code gone_ec;
      if (!fs::exists(c, gone_ec) && set_aside_as(path, fs::path(c).filename().string())) {
        throw_input_error("{}: moved to {}/{}/ by a resume from an earlier step", c, path, kSupersededName);
      }
      // `latest` naming none, read twice (current_latest) and still: no live run's pruning (which
      // re-points it first, and which the reader says), but a pointer edited or copied without
      // its checkpoint.
      if (!fs::exists(c, gone_ec) && fs::path(c).filename() == latest && read_latest(path) == latest) {
        throw_input_error("{}: no such directory, though {}/{} names it", c, path, kLatestName);
      }
      FileHandle held = FileHandle::hold_for_reading(c);  // before keep_last can take it from under us
      // Too late: a live run's keep_last moved it away (a newer one is complete). One that could
      // not be opened at all gets check_valid's own words.
      if (held.is_open() && !held.still_at(c)) {
        throw_input_error("{}: removed while it was chosen (a live run's keep_last)", c);
      }
      check_valid(c, choosing ? Validation::kChecksums : validation);
      result.path = c;
      result.held = std::move(held);
      return result;
    } catch (const InputError& e) {
      if (first_error.empty()) first_error = e.what();
      result.unusable.push_back(fs::path(c).filename().string());
      result.notes.push_back(fmt::format("checkpoint {} is not usable ({}); falling back to an older one",
                                         fs::path(c).filename().string(), e.what()));
    }
  }
  if (candidates.empty()) {
    throw_input_error("{}: no checkpoint found (no {} and no step_* directory){}", path, kLatestName,
                      where_checkpoints_are_not(path));
  }
  throw_input_error("{}: no valid checkpoint (newest: {})", path, first_error);
}

std::string checkpoint_to_verify(const std::string& path) {
  if (std::error_code ec;
      !fs::is_directory(path, ec) || is_complete(path) || step_of(fs::path(path).filename().string()) >= 0)
    return path;
  const std::vector<std::string> order = resolution_order(path, current_latest(path), nullptr);
  return order.empty() ? path : order.front();
}

void read_while_folder_changes(const std::string& path, const std::function<void()>& read,
                               const std::function<void(const std::string& changed)>& again) {
  // Each attempt that fails for it saw the run save again; a run saving every few milliseconds
  // can take a few attempts' checkpoints before one is held.
  constexpr int kReadAttempts = 10;
  // The folder's complete checkpoints, oldest first: a save completing, or keep_last deleting one
  // (which a reader that read `latest` just before may have been ordering by), is a change.
  const auto complete = [&] {
    std::vector<std::string> names;  // none for a checkpoint, or a path that is no folder
    for (const CheckpointEntry& c : complete_checkpoints(path)) names.push_back(fs::path(c.path).filename().string());
    return names;
  };
  for (int attempt = 1;; ++attempt) {
    const std::vector<std::string> before = complete();
    try {
      read();
      return;
    } catch (const std::exception&) {
      const std::vector<std::string> now = complete();
      if (before.empty() || now == before || attempt == kReadAttempts) throw;
      again(fmt::format("{} changed while it was read (a live run? its newest checkpoint was {}, now {})", path,
                        before.back(), now.empty() ? std::string("none") : now.back()));
    }
  }
}

}  // namespace zt::ckpt
