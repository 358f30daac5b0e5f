// What the trainer reports through run_log's metrics file and progress line: each step's "train"
// record and line (and, after the run's first step, every rank's measured memory beside the
// prediction), the op profile of log.profile_ops, and the summary at the end.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "engine/app/trainer/trainer_state.h"

namespace zt {

// What a step's record measures from its start: the wall clock and the parameter store's
// communication counters (elements sent, time blocked in waits).
struct StepMeter {
  explicit StepMeter(TrainerState& s);
  std::chrono::steady_clock::time_point start;
  std::int64_t elements_sent_before = 0, bytes_sent_before = 0;
  // Hybrid sharding: of those, the ones sent inside this rank's group (the rest cross groups).
  std::int64_t in_group_before = 0, bytes_in_group_before = 0;
  double wait_seconds_before = 0.0;
};

// Optimizer step `step` (1-based) done: its "train" record and progress line; after the run's
// first step, a collective "memory" record (every rank's peaks against the prediction).
void report_step(TrainerState& s, const RunProgress& run, int step, const StepResult& result, const StepMeter& meter);

// log.profile_ops: every step is timed op by op; the first of this run only warms up (allocator,
// cuBLASLt heuristics, the profiler's CUDA events) and is discarded. Nothing without the profiler.
// The set-up's measured peaks on every rank beside predict_setup_memory, as a "setup_memory"
// record: a fresh start's weights (random, or train.init_from's load). Collective.
void report_setup_memory(TrainerState& s);
void begin_profiled_step(TrainerState& s);
void end_profiled_step(TrainerState& s, RunProgress& run);
// At the end of the run: rank 0 writes op_profile.json and prints the per-op table.
void report_profile(TrainerState& s, const RunProgress& run);

// The "summary" record that ends metrics.jsonl.
void report_summary(TrainerState& s, const TrainSummary& summary);

// A progress line's time left: seconds under two minutes ("42s"), then minutes ("12m05s"), hours
// ("3h12m") and days ("4.6d"), as a reader takes in at a glance ("396942s" was 4.6 days).
std::string readable_duration(double seconds);

// The time left at `step` of `max_steps`, at this process's pace: `elapsed_s` since its first
// step, `start_step` (the checkpoint's, 0 for a fresh run) to `step`. A resumed run's earlier steps
// are not this process's, so they do not shorten its pace.
double time_left_s(double elapsed_s, int start_step, int step, int max_steps);

}  // namespace zt
