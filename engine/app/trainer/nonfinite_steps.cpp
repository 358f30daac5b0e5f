// Steps whose loss or gradient norm is not finite (see the header).
#include "engine/app/trainer/nonfinite_steps.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/app/data/batch_sampler.h"
#include "engine/app/trainer/grad_clip.h"

#include "engine/base/core/bf16.h"
#include "kernels/ops.h"

namespace zt {

void poison_one_gradient(const ExecContext& ctx, ZeroParamStore& store) {
  const TensorView g = store.grad_shard(1).slice(0, 1);
  float nan_f32 = std::numeric_limits<float>::quiet_NaN();
  bf16 nan_bf16 = float_to_bf16(nan_f32);
  void* value = g.dtype == DType::kF32 ? static_cast<void*>(&nan_f32) : static_cast<void*>(&nan_bf16);
  ops::copy(ctx, g, TensorView{value, g.dtype, Device::kCPU, Shape{1}});
}

std::string nonfinite_origin(const std::vector<float>& slots, int step, const RunProgress& run,
                             const TrainConfig& train) {
  const auto first = std::find_if(slots.begin(), slots.end(), [](float v) { return v > 0.0f; });
  if (first == slots.end()) return "";  // the mean overflowed, no micro-batch's own loss
  const int rank = static_cast<int>(first - slots.begin()), micro = static_cast<int>(*first) - 1;
  const std::int64_t sample =
      run.start_sample + data::first_sample_index(step - 1 - run.start_step, micro, train.grad_accum, train.micro_batch,
                                                  static_cast<int>(slots.size()), rank);
  return fmt::format("; first on rank {}, micro-batch {}: global samples {}-{}", rank, micro, sample,
                     sample + train.micro_batch - 1);
}

namespace {

// Where a non-finite loss came from first (nonfinite_origin). One all-reduce, which every rank
// makes: every rank is here for the same agreed step.
std::string first_nonfinite_loss(TrainerState& s, const RunProgress& run, int step, const StepResult& r) {
  std::vector<float> slots(static_cast<std::size_t>(s.comm.world_size()), 0.0f);  // micro-batch + 1 a rank
  slots[static_cast<std::size_t>(s.comm.rank())] = static_cast<float>(r.first_nonfinite_micro + 1);
  s.comm.all_reduce(TensorView{slots.data(), DType::kF32, Device::kCPU, Shape{s.comm.world_size()}}, ReduceOp::kSum)
      .wait();
  return nonfinite_origin(slots, step, run, s.config.train);
}

}  // namespace

bool skip_nonfinite_step(TrainerState& s, RunProgress& run, int step, const StepResult& r) {
  const RunConfig& c = s.config;
  const bool loss_finite = std::isfinite(r.loss);
  // Both finite: a norm whose squares overflow fp32 in AdamW (applied_norm_overflows_fp32_squares).
  const std::string what =
      loss_finite && std::isfinite(r.grad_norm)
          ? fmt::format("step {}: gradient norm {:.4g} past {:.4g}, where AdamW's fp32 squares may overflow (loss {})",
                        step, r.grad_norm, kLargestFp32Squarable, r.loss)
          : fmt::format("step {}: non-finite {} (loss {}, grad norm {}{})", step, loss_finite ? "gradient" : "loss",
                        r.loss, r.grad_norm, loss_finite ? "" : first_nonfinite_loss(s, run, step, r));
  // In place of the step's train record: its batch was used up and its rate in the schedule passed
  // (so summing `tokens` counts the data read); what is not finite is null, as in a train record.
  auto finite_or_null = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  // Under "skip", one past train.max_skipped_steps in a row stops the run: its record says "stop".
  const bool skipping = c.train.nonfinite == "skip";
  if (skipping) ++run.consecutive_skips;
  const bool stops = !skipping || run.consecutive_skips > c.train.max_skipped_steps;
  s.log({{"type", "nonfinite"},
         {"step", step},
         {"loss", loss_finite ? nlohmann::json(r.loss) : nlohmann::json()},
         {"grad_norm", finite_or_null(r.grad_norm)},
         {"lr", s.schedule.at(step - 1)},
         {"tokens", c.train.global_batch_tokens},
         {"action", stops ? "stop" : "skip"}});
  if (stops) {
    // With "skip", why this one stops the run where the ones before were skipped.
    const std::string stop = c.train.nonfinite == "stop"
                                 ? what
                                 : fmt::format("{}, {} in a row, past train.max_skipped_steps = {}", what,
                                               run.consecutive_skips, c.train.max_skipped_steps);
    // The run's one error line is the command's, on stderr (train_command.cpp), naming the step.
    s.progress.message(fmt::format("{}; stopping (no optimizer step taken, weights not saved)", stop));
    run.summary.nonfinite_stop = stop;
    return false;
  }
  ++run.summary.skipped_steps;
  s.progress.message(fmt::format("warning: {}; step skipped ({} in a row)", what, run.consecutive_skips));
  return true;
}

}  // namespace zt
