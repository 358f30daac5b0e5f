// Which checkpoint a reader takes from a path (a resume, sample, eval, export, ckpt verify): a
// checkpoint directory itself, or in a checkpoint folder the newest valid of `latest`'s and the
// step_* directories (checkpoint_folder.h), with the notes that say what was passed over and why.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/app/checkpoint/durable_file.h"

namespace zt::ckpt {

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
