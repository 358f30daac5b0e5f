// A step whose loss or gradient norm is not finite: logged in place of its train record, then
// skipped or the run stopped (train.nonfinite, train.max_skipped_steps); and the test hook that
// makes one (ZT_TEST_NONFINITE_AT_STEP, docs/config.md's testing hooks).
#pragma once

#include <string>
#include <vector>

#include "engine/app/trainer/trainer_state.h"

namespace zt {

// Logs step `step`'s non-finite result (no weights were touched) and returns true where it is
// skipped: train.nonfinite = "skip" and no more than train.max_skipped_steps in a row. False when
// the run stops instead (run.summary.nonfinite_stop says why).
bool skip_nonfinite_step(TrainerState& s, RunProgress& run, int step, const StepResult& r);

// Where a non-finite loss came from first, for a data-caused NaN's "which batch": of `slots` (each
// rank's first micro-batch whose loss is not finite, plus 1; 0 where none), the lowest rank's, that
// micro-batch, and the global samples it read at step `step` of a run that started at
// run.start_step (which key the data windows: data.order = "sequential" reads window g at token
// g x seq_len), as "; first on rank R, micro-batch M: global samples A-B"; "" where no rank has one.
std::string nonfinite_origin(const std::vector<float>& slots, int step, const RunProgress& run,
                             const TrainConfig& train);

// Writes NaN into the first gradient element of the first transformer block: what an overflow in
// backward would leave, so the real detection path runs.
void poison_one_gradient(const ExecContext& ctx, ZeroParamStore& store);

}  // namespace zt
