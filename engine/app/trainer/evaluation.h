// What a run does with its model between steps, without training it: the validation loss over
// fixed windows and a text sample, each logged and kept in the summary.
#pragma once

#include "engine/app/trainer/trainer_state.h"

#include <functional>

namespace zt {

// The ranks' vote on a stop request (a collective: every rank asks it at the same points): true
// ends an evaluation or sample there, unlogged, so that a preempted job does not spend its grace
// period on them; the resumed run makes them (its log lacks them).
using StopVote = std::function<bool()>;

// Whether an evaluation, and a sample, follow `step` (steps done): every train.eval_every
// (log.sample_every) steps, and after the last; never a sample at step 0 or with log.sample_tokens 0.
bool evaluates_after(const RunConfig& c, int step);
bool samples_after(const RunConfig& c, int step);

// The mean loss of train.eval_batches forward passes over the same validation windows every time
// (no dropout); logged as an "eval" record after step `step`. `stop` is asked after each forward
// (none: never stopped); returns false when it ended the evaluation.
bool evaluate(TrainerState& s, int step, TrainSummary& summary, const StopVote& stop = {});

// log.sample_tokens generated from log.sample_prompt by a batch-1 model through the same store,
// seeded by the step; decoded with the dataset's vocabulary (token ids without one). `stop` is
// asked before every 16th draw; returns false when it ended the sample.
bool sample(TrainerState& s, int step, TrainSummary& summary, const StopVote& stop = {});

}  // namespace zt
