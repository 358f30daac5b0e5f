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

// What a resume from a checkpoint saved with `saved_config` (RunConfig::to_json()) on
// `saved_world_size` ranks would change in the trajectory under `now`: the seed, the learning-rate
// schedule and AdamW's terms, dropout, the sequence length, the working parameters' and the
// activations' dtypes (precision.param_dtype, precision.activations), and the global batch (micro-batch x
// accumulation x ranks, so another rank count at the same global batch is not a change). One
// "key: old -> new" per change; empty when the run continues as it would have. A checkpoint of
// step 0 (`saved_step`: the weights as set up, e.g. a fine-tune's starting point) has read no
// schedule, data or seed and left AdamW's moments at zero: none there (check_resume_fits then
// sets the data aside too).
std::vector<std::string> trajectory_changes(const nlohmann::json& saved_config, int saved_world_size,
                                            std::int64_t saved_step, const RunConfig& now);

// "" where the evaluation reads the same validation windows as the saved run's, else what changed:
// its first train.eval_batches x train.micro_batch windows, so another product scores others and the
// validation losses on either side of the resume are not comparable (the trajectory is the same).
std::string evaluation_window_change(const nlohmann::json& saved_config, const RunConfig& now);
// "" where the evaluation scores the saved run's multiple-choice file (data.choice_file, by path),
// else the change: the accuracies on either side of the resume are another file's.
std::string choice_file_change(const nlohmann::json& saved_config, const RunConfig& now);

// What makes a resumed deterministic run's bits differ from the saved run's while its trajectory
// stays the same (within rounding): the micro-batch, the unit of forward and backward whose
// gradients the fold adds (docs/zero_memory.md), or the mode itself. Empty outside deterministic mode.
// On another rank count, int8 gathers or hybrid sharding on either side. On the CPU, other BLAS
// kernels than `saved_cpu_kernels` (the manifest's extra.cpu_kernels: BlasDescription::kernels of
// the run that saved it; empty where it records none).
std::vector<std::string> deterministic_bit_changes(const nlohmann::json& saved_config, int saved_world_size,
                                                   const RunConfig& now, std::string_view saved_cpu_kernels);

// Whether `now` may continue the run saved in `checkpoint` (its manifest's model, config, rank
// count and step): InputError when the model differs, or when trajectory_changes finds any, or the data
// changed (`data_changes`: run_identity.h's, from the identity the checkpoint recorded), and
// `allow_config_change` is false. Returns the changes allowed (empty: none).
std::vector<std::string> check_resume_fits(const std::string& checkpoint, const nlohmann::json& saved_model,
                                           const nlohmann::json& saved_config, int saved_world_size,
                                           std::int64_t saved_step, const RunConfig& now, bool allow_config_change,
                                           const std::vector<std::string>& data_changes = {});

}  // namespace zt
