// The checkpoint folder of a run: complete checkpoints step_XXXXXXXX/, a `latest` pointer file
// naming one of them, temporary .tmp-step_* directories of saves in progress (or killed), and the
// policies over them: resolve `latest` (falling back to the newest valid one) and keep the last K.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/app/checkpoint/durable_file.h"

namespace zt::ckpt {

inline constexpr const char* kLatestName = "latest";
inline constexpr const char* kTempPrefix = ".tmp-";
inline constexpr const char* kDeletePrefix = ".del-";
// The file keep_last leaves in a checkpoint it could not remove because a reader held it: the next
// save's keep_last removes it, and a resume does not set it aside (apply_keep_last).
inline constexpr const char* kPrunedMarker = "PRUNED";

struct CheckpointEntry {
  std::int64_t step = 0;
  std::string path;
};

// step_* directories directly under `folder`, oldest first (complete or not: see is_complete).
std::vector<CheckpointEntry> list_checkpoints(const std::string& folder);
// A directory whose manifest exists: the last thing a save writes before the rename.
bool is_complete(const std::string& checkpoint_dir);
// list_checkpoints' complete ones, oldest first.
std::vector<CheckpointEntry> complete_checkpoints(const std::string& folder);
// The directory name in `latest` ("" when absent or unreadable).
std::string read_latest(const std::string& folder);
void write_latest(const std::string& folder, const std::string& dir_name);
// Removes a directory tree by first renaming it to .del-NAME, so a crash mid-removal never leaves
// something that looks like a checkpoint.
void remove_checkpoint_dir(const std::string& path);
// Deletes the oldest complete checkpoints beyond the newest `keep_last` (0 keeps everything) and
// leftover .tmp-/.del- directories; never `keep` (the one just written), nor one a reader holds
// (FileHandle::hold_for_reading: a CheckpointReader's, such as a ckpt export of a live run's
// folder), which a later save deletes once it is let go.
void apply_keep_last(const std::string& folder, int keep_last, const std::string& keep);

// Where set_aside_checkpoints_after moves them, inside the folder.
inline constexpr const char* kSupersededName = "superseded";

// A resumed run's folder: its step_* directories after `step` are another trajectory's (the run it
// resumed went on past its checkpoint, or an earlier run here went further), which keep-last would
// count as the newest and a folder's resolution fall back to. Moves them into folder/superseded/
// (a name taken there gets .2, .3, ...) and, where `latest` named one of them, points it at the
// newest complete checkpoint left (removes it when none is). Returns the names moved, oldest first.
std::vector<std::string> set_aside_checkpoints_after(const std::string& folder, std::int64_t step);
// The same for a resume from the checkpoint of `step` named `lineage_id` whose previous save was
// `previous_save_id` (Manifest::lineage_id, extra.previous_save_id), which need not be in the folder
// (one in superseded/, or elsewhere): also those at or before `step` that are not its ancestors by
// their save ids (a fresh run's started here since, or the trajectory a rollback abandoned and now
// abandoned in turn), which keep-last would count and a lost `latest` fall back to. A checkpoint from
// before save ids, which cannot tell, stays.
std::vector<std::string> set_aside_other_trajectories(const std::string& folder, std::int64_t step,
                                                      const std::string& lineage_id,
                                                      const std::string& previous_save_id);
// What folder/superseded/ holds: nothing deletes it (each fresh run or rollback adds to it), so the
// messages that add to it say how much it has grown to.
struct SupersededUsage {
  int checkpoints = 0;
  std::int64_t bytes = 0;
};
SupersededUsage superseded_usage(const std::string& folder);

enum class Validation {
  kStructure,  // the manifest and the files' sizes (a reader checks the checksums as it reads)
  kChecksums,  // and every file's checksum
  // An explicit checkpoint: its structure (it is read next, checksums checked as it goes); in a
  // folder: checksums, so a damaged newest checkpoint falls back to an older one as --resume does.
  kChecksumsToChoose,
};

struct ResolvedCheckpoint {
  std::string path;
  std::vector<std::string> notes;     // why newer candidates were skipped ("falling back to ...")
  std::vector<std::string> unusable;  // the names (step_XXXXXXXX) of those skipped as damaged
  // The chosen checkpoint held for reading since before it was validated, so a live run's
  // keep_last leaves it until the caller's reader holds it too (its validation reads every file:
  // longer than a small run's step).
  FileHandle held;
};

// `path` is either a checkpoint directory (it must be valid: no fallback) or a checkpoint folder:
// then the newest valid of the checkpoint `latest` names and the step_* directories, newest first
// (one newer than latest's is a save whose pointer update was cut off: noted; each skipped one gets
// a note too). InputError when nothing valid is found.
ResolvedCheckpoint resolve_checkpoint(const std::string& path, Validation validation);

// What `ckpt verify PATH` must judge: a checkpoint directory itself, or in a checkpoint folder the
// one a resume tries first (the newest step_*, or the one `latest` names when no step_* is newer)
// -- never an older one that would pass while that one is damaged. `path` itself when the folder
// holds none.
std::string checkpoint_to_verify(const std::string& path);

// Runs `read` on what `path` names (a checkpoint folder, or a checkpoint). A folder's newest
// checkpoint may be deleted while it is read: a live run saving there with keep_last removes it
// once a newer one is complete. Where `read` throws and the folder's complete checkpoints changed
// meanwhile, it runs again on the folder as it now is (at most ten times in all), `again` told
// first what changed ("PATH changed while it was read (a live run? its newest checkpoint was
// step_A, now step_B)"); any other failure is the checkpoint's own and is rethrown.
void read_while_folder_changes(const std::string& path, const std::function<void()>& read,
                               const std::function<void(const std::string& changed)>& again);

}  // namespace zt::ckpt
