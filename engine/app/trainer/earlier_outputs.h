// What an earlier run left in a run directory as a run starts: its log, its final weights and its
// checkpoints, continued where they are this trajectory's and otherwise kept aside (moved, never
// deleted), each said on stdout. `sample --run` and `eval --run` read final.safetensors and the
// log; a run stopped before its end writes no final weights, so an earlier file left in place
// would be taken for this run's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/app/checkpoint/checkpoint_folder.h"
#include "engine/app/trainer/trainer_state.h"

namespace zt {

// A fresh run starts its own log, an earlier run's kept beside it, and keeps an earlier run's
// final.safetensors aside too; called once its weights are set up (train.init_from read and
// checked), so that a run refused at its start leaves the directory as it was.
void start_fresh_log(TrainerState& s);

// A resume from the checkpoint of `optimizer_steps` leaves final.safetensors where it is only when
// it holds that checkpoint's weights: written after as many steps (its "steps" metadata) by this
// trajectory (`log_is_ours`: the run directory's log records the resumed save). Its end rewrites it.
// Any other (a rollback's abandoned trajectory past the step, an earlier one of another run) is
// kept aside. Every resume kept a copy before, so each resume of a finished run added a model-sized
// file.
void keep_earlier_final_weights_at_resume(TrainerState& s, std::int64_t optimizer_steps, bool log_is_ours);

// Checkpoints moved into folder/superseded/ (set_aside_checkpoints_after and its kind): said and
// logged, with what the folder has grown to, as nothing deletes it.
void report_set_aside(TrainerState& s, const std::string& folder, const std::vector<std::string>& moved, int step,
                      const std::string& why);
// Its two halves, for a resume: said as the checkpoints move (a failure before the log is known
// to be the run's then leaves the move said; returns what superseded/ then holds), logged with
// that once it is.
ckpt::SupersededUsage say_set_aside(TrainerState& s, const std::string& folder, const std::vector<std::string>& moved,
                                    const std::string& why);
void log_set_aside(TrainerState& s, const std::vector<std::string>& moved, int step, const std::string& why,
                   const ckpt::SupersededUsage& usage);

}  // namespace zt
