// What a run does with its model between steps, without training it: the validation loss over
// fixed windows and a text sample, each logged and kept in the summary.
#pragma once

#include "engine/app/trainer/trainer_state.h"

namespace zt {

// The mean loss of train.eval_batches forward passes over the same validation windows every time
// (no dropout); logged as an "eval" record after step `step`.
void evaluate(TrainerState& s, int step, TrainSummary& summary);

// log.sample_tokens generated from log.sample_prompt by a batch-1 model through the same store,
// seeded by the step; decoded with the dataset's vocabulary (token ids without one).
void sample(TrainerState& s, int step, TrainSummary& summary);

}  // namespace zt
