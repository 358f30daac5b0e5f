// Trainer: the loop over steps and what it does between them; train_step is one step's data path.
#include "engine/app/trainer/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <numeric>
#include <thread>

#include "engine/app/checkpoint/durable_file.h"
#include "engine/app/data/batch_sampler.h"
#include "engine/app/data/token_text.h"
#include "engine/app/io/final_weights.h"
#include "engine/app/io/pretrained.h"
#include "engine/app/trainer/evaluation.h"
#include "engine/app/trainer/grad_clip.h"
#include "engine/app/trainer/memory_check.h"
#include "engine/app/trainer/nonfinite_steps.h"
#include "engine/app/trainer/run_checkpoints.h"
#include "engine/app/trainer/run_identity.h"
#include "engine/app/trainer/run_memory.h"
#include "engine/app/trainer/run_report.h"
#include "engine/app/trainer/start_checks.h"
#include "engine/app/trainer/step_vote.h"
#include "engine/app/trainer/trainer_state.h"
#include "engine/base/core/build_info.h"
#include "engine/base/core/check.h"
#include "engine/base/core/host_allocator.h"
#include "engine/distributed/launch/signals.h"
#include "kernels/compute_backend.h"

namespace zt {

namespace {

// The evaluation and sample due after `step`; false when a stop request ended one (the sample
// then waits for the resume too).
bool evaluate_and_sample(TrainerState& s, RunProgress& run, int step, bool eval_due, bool sample_due) {
  if (!eval_due && !sample_due) return true;
  // Other shapes than a step's: the host allocator's idle blocks go back to the system on the way
  // in and out, so that a step's cached activations and an evaluation's never sit in memory
  // together beyond what the memory check weighs (a step re-faults its pages once after).
  host_release_cached();
  struct ReleaseAfter {
    ~ReleaseAfter() { host_release_cached(); }
  } release_after;
  const StopVote stop = stop_vote_after(s, step);
  // A request already made (during the step, or the last step's save) stops before a forward.
  if (stop()) {
    s.progress.message(fmt::format("step {}: the evaluation and sample wait for a resume (a stop request)", step));
    return false;
  }
  if (eval_due && !evaluate(s, step, run.summary, stop)) return false;
  return !sample_due || sample(s, step, run.summary, stop);
}

}  // namespace

Trainer::Trainer(RunConfig config, std::string run_dir, Communicator& comm, MemoryTracker& tracker,
                 std::string resume_checkpoint, const nlohmann::json* data_identity)
    : config_(std::move(config)), run_dir_(std::move(run_dir)), resume_checkpoint_(std::move(resume_checkpoint)) {
  ZT_CHECK(config_.world_size == comm.world_size(), "config resolved for {} ranks, running on {}", config_.world_size,
           comm.world_size());
  // Before anything is allocated or written: a run that cannot fit is refused with the prediction beside the offer.
  // Each rank measures its own offer (ranks sharing a node or a GPU may read it apart): agreed, so
  // that one refusing ends the job in one line rather than leaving the others in the next collective.
  // A GPU that is not there, before any folder is made (a refused start left an empty checkpoints/).
  on_every_rank(comm, [&] {
    if (config_.device == Device::kCUDA) {
      try {
        require_cuda_device(rank_device_index(config_));
      } catch (const InputError& e) {  // named with where the config set the device
        throw_input_error("config error in {}: {}", config_.sources_of({"device"}), e.what());
      }
    }
    check_memory_fits(config_, comm.world_size(), rank_device_index(config_));
    // train.init_from's tensors against the model its config describes, from their headers alone,
    // before the model is allocated (a folder whose config.json left the shape keys out, so GPT-2
    // 124M's defaults, beside a small model's weights: 2 GB allocated before the mismatch was said).
    if (resume_checkpoint_.empty() && !config_.train.init_from.empty()) {
      (void)PretrainedReader::open(config_.train.init_from, build_param_table(config_.model_spec()));
    }
  });
  // Every rank writes its checkpoint files into the folder: each checks it, the ranks agree (one
  // rank's refusal is the job's, said once, where the others waited for it in the next collective).
  // A run that saves nothing (every_steps 0, no at_end, no save on a signal) never makes or writes
  // its folder: whatever lies at its path is not this run's concern.
  const bool saves = writes_checkpoints(config_);
  if (saves) on_every_rank(comm, [&] { check_checkpoint_folder(config_, run_dir_); });
  // One run writes a run directory, and a checkpoint folder, at a time: rank 0 makes the directory
  // and holds their locks (the files are its to write), and every rank learns whether it could,
  // before anything in them is opened or written.
  std::string refused;
  if (comm.rank() == 0) {
    try {
      std::error_code ec;
      std::filesystem::create_directories(run_dir_, ec);
      if (ec) throw_input_error("cannot create run directory '{}': {}", run_dir_, ec.message());
      check_run_directory(run_dir_);
      run_lock_ = std::make_unique<ckpt::FolderLock>(run_dir_, run_dir_, ckpt::LockedFolder::kRunDirectory);
      if (saves) folder_lock_ = std::make_unique<ckpt::FolderLock>(config_.checkpoint.folder_for(run_dir_), run_dir_);
    } catch (const InputError& e) {  // a folder in use, or one that cannot be made or written
      refused = fmt::format("i{}", e.what());
    } catch (const std::exception& e) {  // any failure (a full disk: exit 1); the others wait below
      refused = fmt::format("r{}", e.what());
    }
  }
  refused = broadcast_string(comm, refused);
  if (!refused.empty()) fail_on_every_rank(comm, refused.substr(1), /*input_error=*/refused[0] == 'i');  // said once
  if (saves && comm.world_size() > 1) check_folder_shared(comm);
  state_ = std::make_unique<TrainerState>(config_, run_dir_, comm, tracker, data_identity);
  for (const ckpt::FolderLock* lock : {run_lock_.get(), folder_lock_.get()}) {
    if (lock == nullptr) continue;
    state_->locks.push_back(lock);
    if (!lock->note().empty()) state_->progress.message(lock->note());
  }
  check_before_training(config_, state_->data.text());
  // A test hook left in the environment changes what the run does: said, not silent (a run failed
  // with "non-finite gradient" and nothing named the hook; every save took seconds more).
  if (const auto [first, last] = state_->inject_nonfinite_steps; first > 0 && last >= first) {
    state_->progress.message(
        fmt::format("note: test hook ZT_TEST_NONFINITE_AT_STEP is set: a gradient element is made NaN at step{} {}{}",
                    last > first ? "s" : "", first, last > first ? fmt::format("-{}", last) : ""));
  }
  if (const char* pause = std::getenv("ZT_TEST_CHECKPOINT_PAUSE_MS"); pause != nullptr && std::atoi(pause) > 0) {
    state_->progress.message(fmt::format(
        "note: test hook ZT_TEST_CHECKPOINT_PAUSE_MS={} is set: every checkpoint save waits that long", pause));
  }
}

void Trainer::check_folder_shared(Communicator& comm) const {
  // Every rank writes its own file into the checkpoint folder at a save, and reads the checkpoint at
  // a resume: the ranks must reach one folder, which rank 0 has just locked. Ranks started from
  // other working directories (a relative path) or on nodes without a shared file system would
  // otherwise train until their first save fails, the steps since the last checkpoint lost.
  const std::string folder = config_.checkpoint.folder_for(run_dir_);
  const std::string token = broadcast_string(comm, folder_lock_ != nullptr ? folder_lock_->token() : "");
  ZT_CHECK(!token.empty(), "rank 0 holds no lock on checkpoint folder {}", folder);
  on_every_rank(comm, [&] {
    if (comm.rank() == 0) return;
    // A network file system may show another node's new file (or its new contents) late (attribute
    // caching, up to 30 s by NFS's defaults): looked for again, the folders above listed first so
    // that their cached entries are revalidated, before it counts as another folder; within half
    // the collective timeout rank 0 waits under.
    const double wait_s =
        ckpt::token_from_this_host(token) ? 0.0 : std::min(45.0, config_.train.collective_timeout_s / 2);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
    std::string found = ckpt::find_shared_lock(folder, token);
    while (!found.empty() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      std::error_code ec;
      for (std::filesystem::path p = std::filesystem::absolute(folder, ec); !ec && p.has_relative_path();
           p = p.parent_path()) {
        for (std::filesystem::directory_iterator it(p.parent_path(), ec), end; !ec && it != end; it.increment(ec)) {}
      }
      found = ckpt::find_shared_lock(folder, token);
    }
    if (found.empty()) return;
    std::error_code ec;
    const std::string here = std::filesystem::absolute(folder, ec).string();
    const bool saves_only_on_signal = config_.checkpoint.every_steps == 0 && !config_.checkpoint.at_end;
    throw_input_error(
        "checkpoint folder {} ({} on this rank's host) is not the one rank 0 locked ({}): every rank writes its "
        "own file into it, so all ranks must reach one folder (a shared file system; a relative path is read from "
        "each rank's working directory){}",
        folder, ec ? folder : here, found,
        saves_only_on_signal ? "; this run saves only on a stop signal: checkpoint.save_on_signal = false runs it "
                               "without a checkpoint folder"
                             : "");
  });
}

Trainer::~Trainer() = default;

const std::string& Trainer::device_description() const { return state_->backend.description(); }

const std::string& Trainer::data_description() const { return state_->data.description(); }

std::string Trainer::store_comm_name() const { return state_->store_comm().backend_name(); }

TrainSummary Trainer::run() {
  const RunConfig& c = config_;
  TrainerState& s = *state_;
  RunProgress run = start_run(s, resume_checkpoint_, allow_config_change_, resume_unusable_);
  // Every rank's reader held the checkpoint before start_run's agreement on it: rank 0's earlier
  // hold is no longer needed, and would keep a live run's keep_last from deleting it.
  resume_held_ = ckpt::FileHandle();
  // The run's files, once a resume is accepted: a refused one leaves the saved run's as they were.
  if (s.root) {
    ckpt::write_file_atomically(run_dir_ + "/config.json", c.run_file_json().dump(2) + "\n");
    if (s.data.vocab()) s.data.vocab()->save(run_dir_ + "/vocab.json");
    data::copy_tokenizer_files(s.data.tokenizer_path(), run_dir_);
  }
  if (resume_checkpoint_.empty()) report_setup_memory(s);  // the weights' set-up: random or init_from
  run.summary.unigram_entropy_nats = s.data.unigram_entropy_nats();
  run.summary.context_free_val_loss_nats = s.data.context_free_val_loss_nats();
  // The saved run stopped before these (a finished run's are finish_run's).
  const bool stopped = run.start_step < c.train.max_steps && (run.eval_pending || run.sample_pending) &&
                       !evaluate_and_sample(s, run, run.start_step, run.eval_pending, run.sample_pending);
  if (stopped) stop_after(s, run, run.start_step);
  host_release_cached();    // the set-up's workspace, which no step reuses
  s.tracker.reset_peaks();  // the comparison with the prediction (report_step) covers the steps, not set-up
  run.started = std::chrono::steady_clock::now();
  int step = run.start_step;
  for (; step < c.train.max_steps && !stopped; ++step) {
    begin_profiled_step(s);
    const StepMeter meter(s);
    const StepResult result = train_step(step, run);
    ++run.summary.steps_this_run;
    if (result.lock_lost) end_on_lost_lock(s, step + 1);
    end_profiled_step(s, run);
    // A skipped step is still a step (its batch used up, the schedule on): the saves, evaluations
    // and samples due after it happen as after any other, so a periodic checkpoint is not missing.
    if (!result.updated) {
      if (!skip_nonfinite_step(s, run, step + 1, result)) break;
    } else {
      run.consecutive_skips = 0;
      run.count_step(step + 1, result.loss);
      report_step(s, run, step + 1, result, meter);
    }
    poll_checkpoint(s, run);  // commits an asynchronous save whose files are written
    // On the last step the run simply finishes (finish_run saves first): its final weights are what a
    // resume would make.
    const bool last = step + 1 == c.train.max_steps;
    bool stop = result.stop_requested && !last;
    run.stop_in_last_step = result.stop_requested && last;
    if (c.checkpoint.every_steps > 0 && (step + 1) % c.checkpoint.every_steps == 0) {
      save_checkpoint(s, run, step + 1);
      // A stop that came while the checkpoint was written (seconds, for a large model) stops on
      // it, rather than after a step more and a second save; the ranks vote as at a step's end.
      if (!last) {
        const AgreedLoss agreed = agree_on_stop(s, c.zero.fold_in_global_order);
        if (agreed.lock_lost) end_on_lost_lock(s, step + 1);
        stop = stop || agreed.stop_requested;
      }
    }
    if (stop) {  // evaluation and sampling wait for the resumed run
      stop_after(s, run, step + 1);
      break;
    }
    // The last step's evaluation and sample come after its weights are saved (finish_run).
    const bool eval_due = !last && evaluates_after(c, step + 1);
    const bool sample_due = !last && samples_after(c, step + 1);
    if ((eval_due || sample_due) && !evaluate_and_sample(s, run, step + 1, eval_due, sample_due)) {
      stop_after(s, run, step + 1);
      break;
    }
  }
  finish_run(step, run);
  return run.summary;
}

StepResult Trainer::train_step(int step, const RunProgress& run) {
  const RunConfig& c = config_;
  TrainerState& s = *state_;
  const int B = c.train.micro_batch, T = c.train.seq_len, accum = c.train.grad_accum;
  // The step's loss: the micro-batches' mean. Averaged over the ranks by the reduction, or, folding
  // in global order (deterministic mode), over all M = accum x N micro-batches here: then the
  // reduction only adds, and every micro-batch's gradient is the same at every rank count.
  const bool folds = c.zero.fold_in_global_order;
  const float loss_scale = 1.0f / static_cast<float>(folds ? accum * c.world_size : accum);
  s.store.begin_step();        // zero the gradients
  std::vector<double> losses;  // this rank's, one a micro-batch
  for (int micro = 0; micro < accum; ++micro) {
    const std::string context = fmt::format("step {} micro-batch {}", step + 1, micro);
    s.set_comm_context(context);
    s.store.set_micro_batch(micro, accum);  // stages 0-1 reduce after the last micro-batch only
    // The batch: this rank's slice of the step's global samples. The global index of its first
    // sample numbers it among all the run's samples and keys both the data windows and dropout.
    const std::int64_t first_sample = run.start_sample + data::first_sample_index(step - run.start_step, micro, accum,
                                                                                  B, c.world_size, s.comm.rank());
    if (s.data.train().checks_on_read()) {  // the whole global batch, so every rank stops together
      const std::int64_t global_first = first_sample - static_cast<std::int64_t>(s.comm.rank()) * B;
      try {
        data::check_samples(s.data.train(), s.data.train_stream(), T, global_first,
                            static_cast<std::int64_t>(B) * c.world_size);
      } catch (const InputError& e) {
        // A token outside the vocabulary: every rank read the same windows and is here with the same
        // error, which is the job's, said once (the collective only on this path).
        fail_on_every_rank(s.comm, e.what(), /*input_error=*/true);
      }
    }
    data::fill_batch(s.data.train(), s.data.train_stream(), B, T, first_sample, s.inputs.data(), s.targets.data());
    // Forward acquires each unit's parameters as it reaches the unit (stage 3: all-gathered, the
    // next units prefetched) and releases them after. Backward acquires them again in reverse and
    // hands each unit's gradient to the store, which reduces it (all-reduce at stage 0,
    // reduce-scatter into this rank's shard at 1-3) while the units below compute, and waits for
    // the reductions at its end.
    losses.push_back(s.model->forward(s.store, s.inputs.data(), s.targets.data(),
                                      {.first_sample = first_sample, .backward_loss_scale = loss_scale}));
    s.model->backward(s.store, loss_scale);
  }
  if (step + 1 >= s.inject_nonfinite_steps.first && step + 1 <= s.inject_nonfinite_steps.second) {
    poison_one_gradient(s.ctx, s.store);
  }
  // The loss, the gradient norm and the update come after every micro-batch: a timeout there named
  // the last micro-batch.
  s.set_comm_context(
      fmt::format("step {}, after its micro-batches (the loss, the gradient norm, the update)", step + 1));
  const AgreedLoss agreed =
      folds ? gather_loss_and_stop(s, losses)
            : all_reduce_loss_and_stop(s, std::accumulate(losses.begin(), losses.end(), 0.0) / accum);
  StepResult r;
  const auto nonfinite = std::find_if(losses.begin(), losses.end(), [](double l) { return !std::isfinite(l); });
  if (nonfinite != losses.end()) r.first_nonfinite_micro = static_cast<int>(nonfinite - losses.begin());
  r.loss = agreed.loss;
  r.lock_lost = agreed.lock_lost;
  if (r.lock_lost) return r;  // the run ends (end_on_lost_lock): no update, nothing written
  r.stop_requested = agreed.stop_requested;
  // Each rank's fp64 sum of squares over the same partition (N ways, or the group's g) at every
  // stage, summed in rank order; folding, an exact sum (the same at every rank count).
  r.grad_norm = std::sqrt(s.store.global_grad_sum_of_squares());
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm) ||
      applied_norm_overflows_fp32_squares(r.grad_norm, c.optim.grad_clip)) {
    return r;  // no weights touched (skip_nonfinite_step)
  }
  r.lr = s.schedule.at(step);
  s.optimizer.step(r.lr, clip_coefficient(r.grad_norm, c.optim.grad_clip));  // AdamW on this rank's shard
  s.store.publish_updated_params();  // all-gather the updated units (stages 1-2; persistent ones at 3)
  r.updated = true;
  return r;
}

void Trainer::finish_run(int step, RunProgress& run) {
  const RunConfig& c = config_;
  TrainerState& s = *state_;
  TrainSummary& summary = run.summary;
  const bool finished = !summary.stopped_nonfinite() && summary.stop_signal == 0;
  finish_checkpoint(s, run);  // an asynchronous save in flight, before the final weights
  // checkpoint.at_end's save (a fresh run of no steps saves too: the weights as set up,
  // train.init_from's, for ckpt export), or one making up for a save lost with its folder.
  // And a stop requested during the last step: its checkpoint before the final weights, so that a
  // second signal while they are gathered and written costs only them (a resume writes them again).
  if (finished && ((c.checkpoint.at_end && (step > run.start_step || resume_checkpoint_.empty())) || run.save_lost ||
                   run.stop_in_last_step)) {
    save_and_finish(s, run, step);  // where this step's is not saved already
  }
  if (finished) {
    if (c.log.final_weights) {
      host_release_cached();  // a step's cached blocks, beside the gathered unit
      s.set_comm_context(fmt::format("the gather of final.safetensors after step {}", step));
      std::map<std::string, std::string> metadata = {
          {"run_config", c.to_json().dump()},
          {"steps", std::to_string(summary.steps_done)},
          // What `eval --run --val` checks the validation files it reads against.
          {"data_identity", s.data_files.dump()},
          // Which build computed them, as a checkpoint records, and with which kernels (the CPU's
          // BLAS, or the GPU and its libraries: deterministic mode's bits follow them): what
          // reproducing a run needs.
          {"written_by", build_description()}};
      metadata[run_kernels_key(c.device)] = run_kernels(c);
      write_final_weights(run_dir_ + "/final.safetensors", s.optimizer, s.tracker, s.comm, metadata);
      summary.final_weights_gathered = true;
      // What a peer's failure from here on interrupts (rank 0's op profile, the final evaluation).
      s.set_comm_context(fmt::format("the end of the run after step {}, past its final weights", step));
    } else if (s.root) {
      // An earlier run's final.safetensors in this directory is not this run's weights: removed, so
      // `sample --run` and `eval --run` cannot take it for them.
      std::error_code ec;
      std::filesystem::remove(run_dir_ + "/final.safetensors", ec);
    }
  }
  // After the weights: a profile that cannot be written costs only itself.
  report_profile(s, run);
  if (finished) {
    // Saved first, so that nothing after training (an evaluation or a sample that fails) can cost
    // the trained model. A finished run resumed makes those its log lacks (a kill after the last
    // save), not a second copy of those it has.
    // A stop request ends them like any other (saved, for the resume to make them).
    const bool steps_ran = step > run.start_step || resume_checkpoint_.empty();
    const bool eval_due = steps_ran || run.eval_pending;
    const bool sample_due = samples_after(c, step) && (steps_ran || run.sample_pending);
    if (!evaluate_and_sample(s, run, step, eval_due, sample_due)) stop_after(s, run, step);
    if (!eval_due && !sample_due) {
      s.progress.message(fmt::format("the run had finished at step {}: its final evaluation{} in {}", step,
                                     samples_after(c, step) ? " and sample are" : " is", "metrics.jsonl"));
    }
  }
  summary.memory = s.tracker.snapshot();
  report_summary(s, summary);
}

}  // namespace zt
