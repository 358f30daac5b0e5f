// The checkpoint folder of a run: complete checkpoints step_XXXXXXXX/, a `latest` pointer file
// naming one of them, temporary .tmp-step_* directories of saves in progress (or killed), and the
// policies over them: keep the last K, set aside another trajectory's. Which one a reader takes
// (`latest`, falling back to the newest valid one): checkpoint_resolution.h.
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
// folder), which a later save deletes once it is let go. Adds to `marked` the names of those it
// marked so now (not those marked by an earlier save), for the save to say once: also where it
// throws after them (a marker or a removal that failed), since later saves will not name them. A
// checkpoint that cannot be removed does not keep the others: it throws once the rest are pruned,
// naming each that failed.
void apply_keep_last(const std::string& folder, int keep_last, const std::string& keep,
                     std::vector<std::string>& marked);

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
// A checkpoint's lineage, from its manifest's extra: its checkpoint_lineage_id and the save it
// continues (previous_save_id); "" where the manifest cannot be read (or, for the previous, where
// it predates save ids).
struct CheckpointLineage {
  std::string save_id, previous_save_id;
  bool has_save_id = false;  // extra.save_id itself (not a checkpoint from before save ids)
};
CheckpointLineage lineage_of(const std::string& checkpoint_dir);

// What folder/superseded/ holds: nothing deletes it (each fresh run or rollback adds to it), so the
// messages that add to it say how much it has grown to.
struct SupersededUsage {
  int checkpoints = 0;
  std::int64_t bytes = 0;
};
SupersededUsage superseded_usage(const std::string& folder);

}  // namespace zt::ckpt
