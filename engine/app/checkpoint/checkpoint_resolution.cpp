// Which checkpoint a reader takes (see the header).
#include "engine/app/checkpoint/checkpoint_resolution.h"

#include <fmt/format.h>

#include <filesystem>
#include <string_view>

#include "engine/app/checkpoint/checkpoint_absence.h"
#include "engine/app/checkpoint/checkpoint_folder.h"
#include "engine/app/checkpoint/checkpoint_reader.h"
#include "engine/base/core/check.h"

namespace zt::ckpt {

namespace fs = std::filesystem;

namespace {

void check_valid(const std::string& dir, Validation validation) {
  const CheckpointReader reader(dir);
  if (validation == Validation::kChecksums) reader.verify_checksums();
}

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
    std::string chain = lineage_of((fs::path(folder) / latest).string()).save_id;
    for (const CheckpointEntry& e : all) {
      const fs::path dir(e.path);
      if (chain.empty() || step_of(dir.filename().string()) <= latest_step) continue;
      const CheckpointLineage l = lineage_of(dir.string());
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
