// `train --resume latest|PATH`: which checkpoint a resumed run starts from. Rank 0 resolves it
// (every checksum verified, falling back past damaged checkpoints with a printed note) and the
// other ranks learn the choice through one all-gather, so every rank opens the same directory.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "engine/app/checkpoint/durable_file.h"
#include "engine/app/config/run_config.h"
#include "engine/distributed/comm/communicator.h"

namespace zt {

struct ResumeChoice {
  std::string path;  // the checkpoint directory, the same on every rank
  // Rank 0's hold on it since before it was validated: a live run saving into the folder (another
  // run's, resumed from elsewhere) deletes it with keep_last only once this is let go, which the
  // trainer does when every rank's reader holds it (Trainer::hold_resume_checkpoint).
  ckpt::FileHandle held;
  // Rank 0's: the newer checkpoints it fell back past as damaged (step_XXXXXXXX names), which the
  // resumed run sets aside as such rather than as another trajectory's.
  std::vector<std::string> unusable;
};

// Collective. `arg` is "latest" (the newest valid checkpoint in `checkpoint_folder`), a checkpoint
// folder, or a step_XXXXXXXX directory. A folder whose checkpoints change while rank 0 chooses (a
// live run's keep_last deleting the one it read) is read again (ckpt::read_while_folder_changes).
// Returns the choice on every rank; InputError (on every rank, rank 0's naming the cause) when
// there is no usable checkpoint.
ResumeChoice resolve_resume_checkpoint(Communicator& comm, const std::string& arg,
                                       const std::string& checkpoint_folder);

// The model section of the checkpoint `--resume arg` names (`arg` as above), for a config whose
// train.init_from no longer exists (run_config.h's SavedModelKeys). Not collective, and only the
// checkpoint's structure is checked: resolve_resume_checkpoint then chooses the checkpoint, and
// check_resume_fits compares its model with the config's. InputError when there is none.
nlohmann::json resumed_model_keys(const std::string& arg, const std::string& checkpoint_folder);

// Whether `now` may continue the run saved in `checkpoint` (its manifest's model, config, rank
// count and step): InputError when the model differs, or when trajectory_changes finds any, or the data
// changed (`data_changes`: run_identity.h's, from the identity the checkpoint recorded), and
// `allow_config_change` is false. Returns the changes allowed (empty: none).
std::vector<std::string> check_resume_fits(const std::string& checkpoint, const nlohmann::json& saved_model,
                                           const nlohmann::json& saved_config, int saved_world_size,
                                           std::int64_t saved_step, const RunConfig& now, bool allow_config_change,
                                           const std::vector<std::string>& data_changes = {});

}  // namespace zt
