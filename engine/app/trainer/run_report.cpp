// The trainer's records and progress lines (see the header).
#include "engine/app/trainer/run_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/app/trainer/memory_report.h"
#include "engine/app/trainer/run_memory.h"

namespace zt {

StepMeter::StepMeter(TrainerState& s)
    : start(std::chrono::steady_clock::now()),
      elements_sent_before(s.store_comm().elements_sent()),
      bytes_sent_before(s.store_comm().bytes_sent()),
      in_group_before(s.hybrid_comm() != nullptr ? s.hybrid_comm()->group().elements_sent() : 0),
      bytes_in_group_before(s.hybrid_comm() != nullptr ? s.hybrid_comm()->group().bytes_sent() : 0),
      wait_seconds_before(comm_wait_seconds()) {}

double time_left_s(double elapsed_s, int start_step, int step, int max_steps) {
  return elapsed_s / (step - start_step) * (max_steps - step);
}

std::string readable_duration(double seconds) {
  const auto s = static_cast<std::int64_t>(std::llround(std::max(0.0, seconds)));
  if (s < 120) return fmt::format("{}s", s);
  if (s < 2 * 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  if (s < 48 * 3600) return fmt::format("{}h{:02}m", s / 3600, s / 60 % 60);
  return fmt::format("{:.1f}d", static_cast<double>(s) / 86400.0);
}

namespace {

// checkpoint.async's staging on every rank beside its prediction (the fullest rank's).
void report_checkpoint_staging(TrainerState& s) {
  const std::vector<MemorySnapshot> ranks =
      gather_memory_snapshots(s.comm, s.async_saves->staging_tracker().snapshot());
  const std::int64_t predicted = predict_checkpoint_staging_bytes(s.config, s.comm.world_size());
  nlohmann::json measured = nlohmann::json::array();
  std::int64_t fullest = 0;
  for (const MemorySnapshot& rank : ranks) {  // (gathered per category: the staging is its one workspace)
    measured.push_back(rank.peak(MemCategory::kWorkspace));
    fullest = std::max(fullest, rank.peak(MemCategory::kWorkspace));
  }
  s.log({{"type", "checkpoint_staging_memory"}, {"predicted_bytes", predicted}, {"measured_bytes", measured}});
  s.progress.message(
      fmt::format("checkpoint staging (host memory, checkpoint.async): {} on the fullest rank, "
                  "predicted {}",
                  format_bytes(fullest), format_bytes(predicted)));
}

}  // namespace

void report_step(TrainerState& s, const RunProgress& run, int step, const StepResult& r, const StepMeter& meter) {
  const RunConfig& c = s.config;
  const std::int64_t tokens_per_step = c.train.global_batch_tokens;
  const auto now = std::chrono::steady_clock::now();
  const double step_ms = std::chrono::duration<double, std::milli>(now - meter.start).count();
  const double tokens_per_s = static_cast<double>(tokens_per_step) / (step_ms / 1000.0);
  const MemorySnapshot mem = s.tracker.snapshot();
  // step_ms leaves out the host's work between steps (this record, the progress line, the periodic
  // checks); the differences of elapsed_s between consecutive steps count it: a step-to-step clock,
  // which the benchmarks compare with the other engines' (tools/bench_harness.py).
  const double elapsed_s = std::chrono::duration<double>(now - run.started).count();
  nlohmann::json record = {{"type", "train"},
                           {"step", step},
                           {"loss", r.loss},
                           {"lr", r.lr},
                           {"grad_norm", r.grad_norm},
                           {"step_ms", step_ms},
                           {"elapsed_s", elapsed_s},
                           {"tokens_per_s", tokens_per_s},
                           {"tokens", tokens_per_step},
                           {"comm_elements_sent", s.store_comm().elements_sent() - meter.elements_sent_before},
                           {"comm_bytes_sent", s.store_comm().bytes_sent() - meter.bytes_sent_before},
                           {"comm_wait_ms", 1000.0 * (comm_wait_seconds() - meter.wait_seconds_before)},
                           {"memory_peak_bytes", memory_json(mem)}};
  if (const HybridCommunicator* h = s.hybrid_comm()) {  // hybrid sharding: the step's elements per hop
    const std::int64_t in_group = h->group().elements_sent() - meter.in_group_before;
    record["comm_elements_in_group"] = in_group;
    record["comm_elements_across_groups"] = record["comm_elements_sent"].get<std::int64_t>() - in_group;
    const std::int64_t bytes_in_group = h->group().bytes_sent() - meter.bytes_in_group_before;
    record["comm_bytes_in_group"] = bytes_in_group;
    record["comm_bytes_across_groups"] = record["comm_bytes_sent"].get<std::int64_t>() - bytes_in_group;
  }
  s.log(record);
  const double eta_s = time_left_s(elapsed_s, run.start_step, step, c.train.max_steps);
  s.progress.step(step, c.train.max_steps,
                  fmt::format("step {:>{}}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:.0f} ms | {:.0f} tok/s | "
                              "eta {} | mem {}",
                              step, std::to_string(c.train.max_steps).size(), c.train.max_steps, r.loss, r.lr,
                              r.grad_norm, step_ms, tokens_per_s, readable_duration(eta_s), compact_memory(mem)));
  if (run.steps_this_run == 1) {  // a full step's peaks, before any evaluation or sampling
    const std::vector<MemorySnapshot> ranks = gather_memory_snapshots(s.comm, s.tracker.snapshot());
    const StageMemory predicted = predict_run_memory(c, c.zero.stage, s.comm.world_size());
    nlohmann::json measured = nlohmann::json::array();
    for (const MemorySnapshot& rank : ranks) measured.push_back(memory_json(rank));
    s.log({{"type", "memory"},
           {"step", step},
           {"stage", c.zero.stage},
           {"ranks", s.comm.world_size()},
           {"predicted_bytes", memory_json(predicted)},
           {"predicted_padding_bytes", predicted.padding_bytes},
           {"measured_peak_bytes", measured}});
    s.progress.message(format_measured_vs_predicted(c, ranks));
    if (s.async_saves) report_checkpoint_staging(s);
  }
}

void report_setup_memory(TrainerState& s) {
  const RunConfig& c = s.config;
  const std::vector<MemorySnapshot> ranks = gather_memory_snapshots(s.comm, s.tracker.snapshot());
  const StageMemory predicted = predict_setup_memory(c, predict_run_memory(c, c.zero.stage, s.comm.world_size()));
  nlohmann::json measured = nlohmann::json::array();
  for (const MemorySnapshot& rank : ranks) measured.push_back(memory_json(rank));
  s.log({{"type", "setup_memory"},
         {"init_from", c.train.init_from},
         {"predicted_bytes", memory_json(predicted)},
         {"measured_peak_bytes", measured}});
  std::int64_t largest = 0;  // the sum of the category peaks, as the prediction's total
  for (const MemorySnapshot& rank : ranks) {
    std::int64_t sum = 0;
    for (int i = 0; i < kNumMemCategories; ++i) sum += rank.peak(static_cast<MemCategory>(i));
    largest = std::max(largest, sum);
  }
  s.progress.message(fmt::format("weights set up ({}): peak {} on the fullest rank, predicted {}",
                                 c.train.init_from.empty() ? "random" : "from " + c.train.init_from,
                                 format_bytes(largest), format_bytes(predicted.total_bytes())));
}

void begin_profiled_step(TrainerState& s) {
  if (s.profiler) s.profiler->begin_step(s.ctx);
}

void end_profiled_step(TrainerState& s, RunProgress& run) {
  if (!s.profiler) return;
  s.profiler->end_step(s.ctx);
  if (++run.profiled_steps == 1) s.profiler->clear();
}

void report_profile(TrainerState& s, const RunProgress& run) {
  if (!s.profiler || !s.root) return;
  const RunConfig& c = s.config;
  report_op_profile(
      *s.profiler, s.run_dir + "/op_profile.json",
      {{"device", s.backend.description()},
       {"timing", c.device == Device::kCUDA ? "CUDA events on the compute stream around each call"
                                            : "host clock around each call"},
       {"warmup_steps_excluded", std::min(run.profiled_steps, 1)},
       // null where the warm-up step was the run's only one: nothing was profiled
       {"first_profiled_step", run.profiled_steps >= 2 ? nlohmann::json(run.start_step + 2) : nlohmann::json(nullptr)},
       {"micro_batches_per_step", c.train.grad_accum},
       {"rank", s.comm.rank()},
       {"ranks", s.comm.world_size()},
       {"kernel_choices", s.backend.kernel_choices()},
       {"device_memory", s.backend.device_memory()}},
      s.progress);
}

void report_summary(TrainerState& s, const TrainSummary& summary) {
  // On CUDA, what the device holds beyond the allocator the prediction counts (docs/zero_memory.md).
  const nlohmann::json device = s.backend.device_memory();
  s.log({{"type", "summary"},
         {"steps", summary.steps_done},
         {"skipped_steps", summary.skipped_steps},
         {"stopped_nonfinite", summary.stopped_nonfinite()},
         {"stopped_by_signal", summary.stop_signal != 0},
         // null when no step ran in this run (a finished run resumed)
         {"first_loss", summary.first_step > 0 ? nlohmann::json(summary.first_loss) : nlohmann::json()},
         {"first_step", summary.first_step},
         {"last_loss", summary.last_step > 0 ? nlohmann::json(summary.last_loss) : nlohmann::json()},
         {"last_step", summary.last_step},
         {"val_loss", summary.val_loss ? nlohmann::json(*summary.val_loss) : nlohmann::json()},  // null: none ran
         {"unigram_entropy_nats", summary.unigram_entropy_nats},
         {"context_free_val_loss_nats", summary.context_free_val_loss_nats},
         {"choice_accuracy", summary.choices ? nlohmann::json(summary.choices->accuracy()) : nlohmann::json()},
         {"choice_correct", summary.choices ? nlohmann::json(summary.choices->correct) : nlohmann::json()},
         {"choice_examples", summary.choices ? nlohmann::json(summary.choices->examples) : nlohmann::json()},
         {"memory_peak_bytes", memory_json(summary.memory)},
         // The peak of the categories' sum, at one moment (the sum of their peaks above mixes the
         // steps' with the final gather's and the sample's).
         {"memory_total_peak_bytes", summary.memory.total_peak_bytes},
         {"device_memory", device}});
  if (!device.empty()) {
    s.progress.message(fmt::format(
        "device memory at the end: {} held by zerotrain's allocator (peak {}), {} outside it (CUDA context, "
        "cuBLASLt, cuDNN, NCCL, other processes), {} free of {}",
        format_bytes(device["allocator_reserved_bytes"].get<std::int64_t>()),
        format_bytes(device["allocator_peak_reserved_bytes"].get<std::int64_t>()),
        format_bytes(device["outside_allocator_bytes"].get<std::int64_t>()),
        format_bytes(device["free_bytes"].get<std::int64_t>()),
        format_bytes(device["total_bytes"].get<std::int64_t>())));
  }
}

}  // namespace zt
