// A step whose loss or gradient norm is not finite: logged in place of its train record, then
// skipped or the run stopped (train.nonfinite, train.max_skipped_steps); and the test hook that
// makes one (ZT_TEST_NONFINITE_AT_STEP, docs/config.md's testing hooks).
#pragma once

#include "engine/app/trainer/trainer_state.h"

namespace zt {

// Logs step `step`'s non-finite result (no weights were touched) and returns true where it is
// skipped: train.nonfinite = "skip" and no more than train.max_skipped_steps in a row. False when
// the run stops instead (run.summary.nonfinite_stop says why).
bool skip_nonfinite_step(TrainerState& s, RunProgress& run, int step, const StepResult& r);

// Writes NaN into the first gradient element of the first transformer block: what an overflow in
// backward would leave, so the real detection path runs.
void poison_one_gradient(const ExecContext& ctx, ZeroParamStore& store);

}  // namespace zt
