// A run's checkpoints as the trainer uses them: where a run starts (fresh parameters, or a
// checkpoint's state and position for --resume), the saves (checkpoint.every_steps, at_end), and a
// stop request answered with a save (engine/distributed/launch/signals.h).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "engine/app/checkpoint/checkpoint_manifest.h"
#include "engine/app/trainer/trainer_state.h"

namespace zt {

// What a resume from `checkpoint` (its manifest `m`) changes under `c`, which reads `data_files`
// (run_identity.h's data_identity): InputError where the checkpoint is past train.max_steps or
// check_resume_fits refuses it. Reads the manifest alone, so train judges a resume before it
// allocates the model's state (seconds and gigabytes for a large model), and start_run again.
struct ResumeJudgement {
  std::vector<std::string> changes;             // the trajectory's, allowed by --allow-config-change
  std::vector<std::string> data_changed;        // the training files'
  std::vector<std::string> evaluation_changed;  // the validation files' and windows'
  bool vocabulary_changed = false;
  std::string choice_changed;  // data.choice_file's, "" for none
};
ResumeJudgement judge_resume(const std::string& checkpoint, const ckpt::Manifest& m, const RunConfig& c,
                             const nlohmann::json& data_files, bool allow_config_change);

// Without `resume_checkpoint`: every rank initialises its parameters from the seed, at step 0.
// With one: checks it fits this config (check_resume_fits; `allow_config_change` lets the
// trajectory change, said in the log), restores the store and optimizer from it (and publishes the
// parameters), drops metrics.jsonl's records past its step, and returns its position and counts.
// The folder's checkpoints off the resumed one's trajectory are set aside (superseded/), those the
// resume fell back past as damaged (`unusable`, rank 0's) said as such.
RunProgress start_run(TrainerState& s, const std::string& resume_checkpoint, bool allow_config_change,
                      const std::vector<std::string>& unusable = {});

// Collective: every rank writes its shard of the training state after `steps_completed` steps;
// rank 0 logs the save (and any warning) and remembers it in `run`. With checkpoint.async the
// state is staged and written in the background: the save is committed (and logged) by a later
// poll_checkpoint or finish_checkpoint. A save whose checkpoint folder is moved or removed while
// it writes is said lost and made again, or left to the next save where asynchronous, rather than
// ending the run ([Note: a save that loses its folder] in run_saves.cpp).
void save_checkpoint(TrainerState& s, RunProgress& run, int steps_completed);
// Collective, at every step boundary: commits an asynchronous save whose files every rank has
// written (one small all-gather while one is in flight; nothing otherwise). A save that failed
// throws here, on every rank.
void poll_checkpoint(TrainerState& s, RunProgress& run);
// Collective: waits for an asynchronous save in flight and commits it (before a stop or the end).
void finish_checkpoint(TrainerState& s, RunProgress& run);
// Collective: the state after `steps_completed` steps saved and committed before it returns (a
// stop's save, the end's): a save in flight finished, this step's made where none was (again where
// one was lost with its folder as it finished). Throws where it cannot be.
void save_and_finish(TrainerState& s, RunProgress& run, int steps_completed);

// A stop request agreed at a step boundary: saves (unless this step was just saved), records the
// stop in the summary and says how to resume. The caller then ends the loop.
void stop_after(TrainerState& s, RunProgress& run, int steps_completed);

}  // namespace zt
