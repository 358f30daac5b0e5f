// Trainer: the loop over steps and micro-batches, evaluation, sampling and the run directory.
#include "engine/trainer/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "engine/checkpoint/checkpoint_export.h"
#include "engine/checkpoint/durable_file.h"
#include "engine/checkpoint/optimizer_checkpoint.h"
#include "engine/comm/rendezvous.h"
#include "engine/comm/signals.h"
#include "engine/core/bf16.h"
#include "engine/core/check.h"
#include "engine/data/batch_sampler.h"
#include "engine/io/model_weights.h"
#include "engine/optim/final_weights.h"
#include "engine/optim/sharded_adamw.h"
#include "engine/sharding/zero_param_store.h"
#include "models/gpt/gpt_params.h"
#include "engine/trainer/data_source.h"
#include "engine/trainer/grad_clip.h"
#include "engine/trainer/lr_schedule.h"
#include "engine/trainer/memory_report.h"
#include "engine/trainer/memory_check.h"
#include "engine/trainer/model_setup.h"
#include "engine/sharding/memory_model.h"
#include "engine/trainer/resume.h"
#include "engine/trainer/run_log.h"
#include "engine/trainer/start_checks.h"
#include "engine/trainer/text_sampler.h"
#include "kernels/compute_backend.h"
#include "kernels/op_profiler.h"
#include "kernels/ops.h"
#include "models/gpt/gpt_model.h"

namespace zt {

namespace {

// Writes NaN into the first gradient element of the first transformer block: what an overflow in
// backward would leave, so the real detection path runs.
void poison_one_gradient(const ExecContext& ctx, ZeroParamStore& store) {
  const TensorView g = store.grad_shard(1).slice(0, 1);
  float nan_f32 = std::numeric_limits<float>::quiet_NaN();
  bf16 nan_bf16 = float_to_bf16(nan_f32);
  void* value = g.dtype == DType::kF32 ? static_cast<void*>(&nan_f32) : static_cast<void*>(&nan_bf16);
  ops::copy(ctx, g, TensorView{value, g.dtype, Device::kCPU, Shape{1}});
}

ExecContext with_profiler(ExecContext ctx, OpProfiler* profiler) {
  ctx.profiler = profiler;
  return ctx;
}

// This rank's GPU (by its local rank), or 0 on the CPU.
int device_index_for(const RunConfig& c) {
  return c.device == Device::kCUDA ? cuda_device_for_local_rank(detect_launch().local_rank) : 0;
}

std::unique_ptr<Communicator> make_store_communicator(Communicator& comm, MemoryTracker& tracker,
                                                      const ExecContext& ctx) {
  // A world of one has nothing to communicate at any stage (ZeroParamStore's solo path calls no
  // collective); several ranks on the GPU go through NCCL (MPI's backend moves host memory only).
  // The memory prediction asks the same predicate.
  if (store_collective_backend(ctx.device, comm.world_size()) == CollectiveBackend::kHost) {
    return nullptr;
  }
  return make_device_communicator(comm, tracker, ctx);
}

}  // namespace

struct Trainer::State {
  Communicator& comm;
  bool root;  // rank 0 prints, logs and writes files; every rank computes
  MemoryTracker& tracker;
  ComputeBackend backend;  // before everything that allocates through its context, so destroyed after
  // log.profile_ops: the profiler ctx carries (null when off). The model, store and optimizer copy
  // ctx when built, so every op of a step (AdamW and the gradient norm included) reaches it.
  std::unique_ptr<OpProfiler> profiler;
  ExecContext ctx;
  // On CUDA the parameter store's collectives go through NCCL on the device (null on the CPU: the
  // store uses `comm`); the trainer's own small collectives stay on `comm`.
  std::unique_ptr<Communicator> device_comm;
  DataSource data;
  gpt::GptModel model;
  ZeroParamStore store;
  ShardedAdamW optimizer;
  LrSchedule schedule;
  std::unique_ptr<MetricsLog> metrics;
  ProgressPrinter progress;
  std::vector<std::int32_t> inputs, targets;

  State(const RunConfig& c, const std::string& run_dir, Communicator& communicator, MemoryTracker& memory,
        bool resuming)
      : comm(communicator),
        root(communicator.rank() == 0),
        tracker(memory),
        backend(c.device, c.train.num_threads, memory, device_index_for(c),
                KernelChoices{c.matmul_precision, c.attention_kernels, c.gelu_epilogue}),
        profiler(c.log.profile_ops ? std::make_unique<OpProfiler>() : nullptr),
        ctx(with_profiler(backend.context(), profiler.get())),
        // Without the profiler: NCCL's staging ops run on its own stream and are part of
        // communication, which the profile counts outside the ops.
        device_comm(make_store_communicator(communicator, memory, backend.context())),
        data(c),
        model(c.model, c.train.micro_batch, c.train.seq_len, c.train.activation_checkpointing, tracker, ctx, c.dropout,
              c.train.seed, c.activation_dtype),
        store(model.table(), c.param_dtype, c.zero, device_comm ? *device_comm : comm, tracker, ctx),
        optimizer(store, c.optim.adamw, tracker, ctx),
        schedule(c.optim.adamw.lr, c.optim.min_lr, c.optim.warmup_steps, c.optim.decay_steps,
                 LrSchedule::parse_decay(c.optim.decay)),
        metrics(root ? std::make_unique<MetricsLog>(run_dir + "/metrics.jsonl", resuming) : nullptr),
        progress(root ? c.log.progress : "quiet", c.log.every_steps),
        inputs(static_cast<std::size_t>(c.train.micro_batch) * c.train.seq_len),
        targets(inputs.size()) {}

  void log(const nlohmann::json& record) {
    if (metrics) metrics->write(record);
  }
  // The communicator the parameter store's collectives go through (its volume is the ZeRO one).
  Communicator& store_comm() { return device_comm ? *device_comm : comm; }
};

Trainer::Trainer(RunConfig config, std::string run_dir, Communicator& comm, MemoryTracker& tracker,
                 std::string resume_checkpoint)
    : config_(std::move(config)), run_dir_(std::move(run_dir)), resume_checkpoint_(std::move(resume_checkpoint)) {
  ZT_CHECK(config_.world_size == comm.world_size(), "config resolved for {} ranks, running on {}",
           config_.world_size, comm.world_size());
  // Before anything is allocated or written: a run that cannot fit is refused with the prediction beside the offer.
  check_memory_fits(config_, comm.world_size(), device_index_for(config_));
  if (comm.rank() == 0) {
    std::error_code ec;
    std::filesystem::create_directories(run_dir_, ec);
    if (ec) throw_input_error("cannot create run directory '{}': {}", run_dir_, ec.message());
  }
  state_ = std::make_unique<State>(config_, run_dir_, comm, tracker, !resume_checkpoint_.empty());
  check_before_training(config_, run_dir_, state_->data.vocab() ? &*state_->data.vocab() : nullptr);
  if (comm.rank() == 0) {
    ckpt::write_file_atomically(run_dir_ + "/config.json", config_.to_json().dump(2) + "\n");
    if (state_->data.vocab()) state_->data.vocab()->save(run_dir_ + "/vocab.json");
  }
}

Trainer::~Trainer() = default;

const std::string& Trainer::device_description() const { return state_->backend.description(); }

TrainSummary Trainer::run() {
  const RunConfig& c = config_;
  State& s = *state_;
  const int B = c.train.micro_batch, T = c.train.seq_len, accum = c.train.grad_accum;
  const std::int64_t tokens_per_step = c.train.global_batch_tokens;
  TrainSummary summary;
  summary.unigram_entropy_nats = data::unigram_entropy_nats(s.data.train(), c.model.vocab_size);
  // Where the loop starts: step 0 and sample 0, or a checkpoint's position (the LR schedule, data
  // windows and dropout are functions of the step and the global sample index, so nothing else
  // is needed to continue exactly).
  int start_step = 0;
  std::int64_t start_sample = 0, start_tokens = 0;
  int consecutive_skips = 0;
  if (resume_checkpoint_.empty()) {
    initialize_gpt_parameters(c.model, c.train.seed, s.store, s.optimizer, s.tracker);
  } else {
    const ckpt::CheckpointReader reader(resume_checkpoint_);
    const ckpt::Manifest& m = reader.manifest();
    const std::vector<std::string> changes =
        check_resume_fits(resume_checkpoint_, m.model, m.config, m.world_size, c, allow_config_change_);
    if (!changes.empty()) {
      s.progress.message(fmt::format("resume: continuing with a changed config (--allow-config-change): {}",
                                     fmt::join(changes, "; ")));
      s.log({{"type", "config_change"}, {"step", m.position.step}, {"changes", changes}});
    }
    ckpt::restore_training_state(reader, s.store, s.optimizer);  // publishes; the first acquire waits for it
    start_step = static_cast<int>(m.position.step);
    start_sample = m.position.next_sample_index;
    start_tokens = m.position.tokens_seen;
    summary.steps_done = m.position.optimizer_step;
    summary.skipped_steps = m.extra.value("skipped_steps", 0);
    consecutive_skips = m.extra.value("consecutive_skips", 0);
    if (s.metrics) {
      if (const int dropped = s.metrics->drop_records_after_step(start_step); dropped > 0) {
        s.progress.message(fmt::format("metrics.jsonl: dropped {} record(s) the interrupted run wrote after step {}",
                                       dropped, start_step));
      }
    }
    s.log({{"type", "resume"}, {"step", start_step}, {"checkpoint", resume_checkpoint_},
           {"saved_world_size", m.world_size}, {"saved_zero_stage", m.zero_stage}});
    s.progress.message(fmt::format("resumed from {} at step {} (saved by {} rank(s) at ZeRO stage {}; sample {})",
                                   resume_checkpoint_, start_step, m.world_size, m.zero_stage, start_sample));
  }
  const std::int64_t samples_per_step = static_cast<std::int64_t>(accum) * B * c.world_size;
  const std::string checkpoint_folder = c.checkpoint.folder_for(run_dir_);
  int last_saved_step = -1;
  std::string last_saved_path;
  // Collective: every rank writes its shard of the optimizer state; rank 0 logs the save.
  auto save_checkpoint = [&](int steps_completed) {
    ckpt::CheckpointMeta meta;
    meta.position.step = steps_completed;
    meta.position.next_sample_index = start_sample + (steps_completed - start_step) * samples_per_step;
    meta.position.tokens_seen = start_tokens + (steps_completed - start_step) * tokens_per_step;
    meta.model = ckpt::gpt_model_json(c.model);
    meta.config = c.to_json();
    meta.extra = {{"skipped_steps", summary.skipped_steps}, {"consecutive_skips", consecutive_skips}};
    const ckpt::SaveResult r =
        ckpt::save_training_state(s.comm, checkpoint_folder, s.store, s.optimizer, meta, c.checkpoint.keep_last);
    last_saved_step = steps_completed;
    last_saved_path = r.path;
    s.log({{"type", "checkpoint"}, {"step", steps_completed}, {"path", r.path}, {"seconds", r.seconds},
           {"rank_bytes", r.rank_bytes}, {"total_bytes", r.total_bytes}, {"ranks", s.comm.world_size()}});
    s.progress.message(fmt::format("step {}: saved checkpoint {} ({:.2f} MB in {} rank file(s)) in {:.2f} s",
                                   steps_completed, r.path, r.total_bytes / 1e6, s.comm.world_size(), r.seconds));
    if (!r.warning.empty()) {
      s.progress.message("warning: " + r.warning);
      s.log({{"type", "checkpoint_warning"}, {"step", steps_completed}, {"text", r.warning}});
    }
  };
  // A stop request agreed at a step boundary: save (unless this step was just saved) and stop.
  auto stop_after = [&](int steps_completed) {
    summary.stop_signal = stop_signal() != 0 ? stop_signal() : -1;
    summary.stopped_after_step = steps_completed;
    if (last_saved_step != steps_completed) save_checkpoint(steps_completed);
    summary.stop_checkpoint = last_saved_path;
    const std::string by = summary.stop_signal > 0 ? signal_name(summary.stop_signal) : "a signal to another rank";
    s.log({{"type", "stop"}, {"step", steps_completed}, {"signal", by}, {"checkpoint", last_saved_path}});
    s.progress.message(fmt::format("step {}: stopping on {}; resume with --resume latest", steps_completed, by));
  };
  s.tracker.reset_peaks();  // the comparison with the prediction below covers the steps, not set-up

  auto evaluate = [&](int step) {
    double sum = 0.0;
    for (int i = 0; i < c.train.eval_batches; ++i) {  // the same fixed validation windows every time
      data::fill_batch(s.data.val(), B, T, c.train.seed, data::kValStream, static_cast<std::int64_t>(i) * B,
                       s.inputs.data(), s.targets.data());
      sum += s.model.forward(s.store, s.inputs.data(), s.targets.data(), {.training = false});
    }
    s.model.release_activations();
    summary.val_loss = static_cast<float>(sum / c.train.eval_batches);
    s.log({{"type", "eval"}, {"step", step}, {"val_loss", summary.val_loss}});
    s.progress.message(fmt::format("step {}: val loss {:.4f} (unigram entropy of the data {:.4f})", step,
                                   summary.val_loss, summary.unigram_entropy_nats));
  };
  auto sample = [&](int step) {
    gpt::GptModel sampler(c.model, 1, T, gpt::CheckpointPolicy{}, s.tracker, s.ctx);
    std::vector<std::int32_t> prompt;
    if (s.data.vocab()) {
      for (std::uint16_t t : s.data.vocab()->encode(c.log.sample_prompt)) prompt.push_back(t);
    }
    const auto tokens = generate_tokens(sampler, s.store, prompt,
                                        {c.log.sample_tokens, c.log.sample_temperature, c.log.sample_top_k,
                                         c.train.seed + static_cast<std::uint64_t>(step),
                                         s.data.vocab() ? s.data.vocab()->size() : 0});
    summary.sample = s.data.vocab() ? s.data.vocab()->decode(tokens) : fmt::format("{}", fmt::join(tokens, " "));
    s.log({{"type", "sample"}, {"step", step}, {"text", summary.sample}});
    s.progress.message(fmt::format("step {}: sample:\n{}\n---", step, summary.sample));
  };

  // Fault injection for the tests of the non-finite path (docs/config.md, "Testing hooks").
  const char* inject = std::getenv("ZT_TEST_NONFINITE_AT_STEP");
  const int inject_nonfinite_step = inject != nullptr ? std::atoi(inject) : 0;
  int step = start_step;
  int steps_this_run = 0;
  // log.profile_ops: every step is timed op by op; the first of this run only warms up (allocator,
  // cuBLASLt heuristics, the profiler's CUDA events) and is discarded.
  int profiled_iterations = 0;
  auto end_profiled_step = [&] {
    if (!s.profiler) return;
    s.profiler->end_step(s.ctx);
    if (++profiled_iterations == 1) s.profiler->clear();
  };
  const auto run_start = std::chrono::steady_clock::now();
  for (; step < c.train.max_steps; ++step) {
    if (s.profiler) s.profiler->begin_step(s.ctx);
    const auto t0 = std::chrono::steady_clock::now();
    const std::int64_t sent_before = s.store_comm().elements_sent();
    const double wait_before = comm_wait_seconds();
    s.store.begin_step();
    double loss_sum = 0.0;
    for (int micro = 0; micro < accum; ++micro) {
      s.comm.set_context(fmt::format("step {} micro-batch {}", step + 1, micro));
      s.store.set_micro_batch(micro, accum);
      // Global sample index of row 0: numbers every sample of the run, each rank taking its own
      // slice of the global batch; keys both the data windows and dropout.
      const std::int64_t first_sample =
          start_sample + data::first_sample_index(step - start_step, micro, accum, B, c.world_size, s.comm.rank());
      data::fill_batch(s.data.train(), B, T, c.train.seed, data::kTrainStream, first_sample, s.inputs.data(),
                       s.targets.data());
      const float loss_scale = 1.0f / static_cast<float>(accum);
      loss_sum += s.model.forward(s.store, s.inputs.data(), s.targets.data(),
                                  {.first_sample = first_sample, .backward_loss_scale = loss_scale});
      s.model.backward(s.store, loss_scale);
    }
    if (step + 1 == inject_nonfinite_step) poison_one_gradient(s.ctx, s.store);
    // The step boundary's agreement rides on the loss all-reduce: element 1 is above 0 when any
    // rank has a stop request (engine/comm/signals.h).
    float loss_and_stop[2] = {static_cast<float>(loss_sum / accum), stop_signal() != 0 ? 1.0f : 0.0f};
    s.comm.all_reduce(TensorView{loss_and_stop, DType::kF32, Device::kCPU, Shape{2}}, ReduceOp::kAvg).wait();
    const float loss = loss_and_stop[0];
    // On the last step the run simply finishes: its final weights are what a resume would make.
    const bool stop_requested = loss_and_stop[1] > 0.0f && step + 1 < c.train.max_steps;
    const double grad_norm = std::sqrt(s.store.global_grad_sum_of_squares());
    if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
      end_profiled_step();
      const std::string what = fmt::format("step {}: non-finite {} (loss {}, grad norm {})", step + 1,
                                           std::isfinite(loss) ? "gradient" : "loss", loss, grad_norm);
      s.log({{"type", "nonfinite"}, {"step", step + 1}, {"loss", std::isfinite(loss) ? loss : -1.0f},
                       {"action", c.train.nonfinite}});
      if (c.train.nonfinite == "stop" || ++consecutive_skips > c.train.max_skipped_steps) {
        s.progress.message(fmt::format("error: {}; stopping (no optimizer step taken, weights not saved)", what));
        summary.stopped_nonfinite = true;
        break;
      }
      ++summary.skipped_steps;
      s.progress.message(fmt::format("warning: {}; step skipped ({} in a row)", what, consecutive_skips));
      if (stop_requested) {
        stop_after(step + 1);
        break;
      }
      continue;
    }
    consecutive_skips = 0;
    const float clip_scale = clip_coefficient(grad_norm, c.optim.grad_clip);
    const float lr = s.schedule.at(step);
    s.optimizer.step(lr, clip_scale);
    s.store.publish_updated_params();
    end_profiled_step();
    ++summary.steps_done;
    if (++steps_this_run == 1) {
      summary.first_loss = loss;
      summary.first_step = step + 1;
    }
    summary.last_loss = loss;
    summary.last_step = step + 1;

    const double step_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const double tokens_per_s = static_cast<double>(tokens_per_step) / (step_ms / 1000.0);
    const MemorySnapshot mem = s.tracker.snapshot();
    s.log({{"type", "train"}, {"step", step + 1}, {"loss", loss}, {"lr", lr}, {"grad_norm", grad_norm},
                     {"step_ms", step_ms}, {"tokens_per_s", tokens_per_s}, {"tokens", tokens_per_step},
                     {"comm_elements_sent", s.store_comm().elements_sent() - sent_before},
                     {"comm_wait_ms", 1000.0 * (comm_wait_seconds() - wait_before)},
                     {"memory_peak_bytes", memory_json(mem)}});
    const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
    const double eta_s = elapsed_s / (step + 1 - start_step) * (c.train.max_steps - step - 1);
    s.progress.step(step + 1, c.train.max_steps,
                    fmt::format("step {:>{}}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:.0f} ms | {:.0f} tok/s | "
                                "eta {:.0f}s | mem {}",
                                step + 1, std::to_string(c.train.max_steps).size(), c.train.max_steps, loss, lr,
                                grad_norm, step_ms, tokens_per_s, eta_s, compact_memory(mem)));
    if (steps_this_run == 1) {  // a full step's peaks, before any evaluation or sampling
      const std::vector<MemorySnapshot> ranks = gather_memory_snapshots(s.comm, s.tracker.snapshot());
      const StageMemory predicted = predict_rank_memory(c, c.zero.stage, s.comm.world_size());
      nlohmann::json measured = nlohmann::json::array();
      for (const MemorySnapshot& r : ranks) measured.push_back(memory_json(r));
      s.log({{"type", "memory"}, {"step", step + 1}, {"stage", c.zero.stage}, {"ranks", s.comm.world_size()},
             {"predicted_bytes", memory_json(predicted)}, {"predicted_padding_bytes", predicted.padding_bytes},
             {"measured_peak_bytes", measured}});
      s.progress.message(format_measured_vs_predicted(c, ranks));
    }
    const bool last = step + 1 == c.train.max_steps;
    if (c.checkpoint.every_steps > 0 && (step + 1) % c.checkpoint.every_steps == 0) save_checkpoint(step + 1);
    if (stop_requested) {  // evaluation and sampling wait for the resumed run
      stop_after(step + 1);
      break;
    }
    // The last step's evaluation and sample come after its weights are saved (below).
    if (!last && c.train.eval_every > 0 && (step + 1) % c.train.eval_every == 0) evaluate(step + 1);
    if (!last && c.log.sample_every > 0 && (step + 1) % c.log.sample_every == 0) sample(step + 1);
  }
  const bool finished = !summary.stopped_nonfinite && summary.stop_signal == 0;
  if (c.checkpoint.at_end && finished && last_saved_step != step && step > start_step) save_checkpoint(step);

  if (s.profiler && s.root) {
    report_op_profile(*s.profiler, run_dir_ + "/op_profile.json",
                      {{"device", s.backend.description()},
                       {"timing", c.device == Device::kCUDA ? "CUDA events on the compute stream around each call"
                                                            : "host clock around each call"},
                       {"warmup_steps_excluded", std::min(profiled_iterations, 1)},
                       {"first_profiled_step", start_step + 2},
                       {"micro_batches_per_step", accum},
                       {"rank", s.comm.rank()},
                       {"ranks", s.comm.world_size()}},
                      s.progress);
  }
  if (finished) {
    write_final_weights(run_dir_ + "/final.safetensors", s.optimizer, s.tracker, s.root,
                        {{"run_config", c.to_json().dump()}, {"steps", std::to_string(summary.steps_done)}});
    // Saved first, so that nothing after training (an evaluation or a sample that fails) can cost
    // the trained model; also when a finished run is resumed, its final evaluation is made.
    evaluate(step);
    if (step > 0) sample(step);
  }
  summary.memory = s.tracker.snapshot();
  s.log({{"type", "summary"},
                   {"steps", summary.steps_done},
                   {"skipped_steps", summary.skipped_steps},
                   {"stopped_nonfinite", summary.stopped_nonfinite},
                   {"stopped_by_signal", summary.stop_signal != 0},
                   // null when no step ran in this run (a finished run resumed)
                   {"first_loss", summary.first_step > 0 ? nlohmann::json(summary.first_loss) : nlohmann::json()},
                   {"first_step", summary.first_step},
                   {"last_loss", summary.last_step > 0 ? nlohmann::json(summary.last_loss) : nlohmann::json()},
                   {"last_step", summary.last_step},
                   {"val_loss", summary.val_loss},
                   {"unigram_entropy_nats", summary.unigram_entropy_nats},
                   {"memory_peak_bytes", memory_json(summary.memory)}});
  return summary;
}

}  // namespace zt
