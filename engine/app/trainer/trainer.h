// The training loop on every rank: deterministic batches, gradient accumulation, global-norm
// clipping, the LR schedule, AdamW, periodic evaluation and text samples, a JSONL metrics file,
// sharded checkpoints (and resuming from one, or saving one when a stop signal arrives), and the
// final weights in the run directory. A non-finite loss or gradient stops the run (or skips the
// step, if configured) before any weights are touched. One step's data path is train_step; what
// happens around it lives beside it in engine/app/trainer (run_checkpoints, evaluation, run_report).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "engine/app/checkpoint/durable_file.h"
#include "engine/app/checkpoint/folder_lock.h"
#include "engine/app/config/run_config.h"
#include "engine/app/trainer/choice_eval.h"
#include "engine/base/core/memory_tracker.h"
#include "engine/distributed/comm/communicator.h"

namespace zt {

struct TrainerState;
struct RunProgress;
struct StepResult;

struct TrainSummary {
  int steps_done = 0;      // optimizer steps taken (over the whole run, resumed ones included)
  int skipped_steps = 0;   // steps skipped for a non-finite loss or gradient
  int steps_this_run = 0;  // steps this process took, updated or skipped (none: a finished run resumed)
  // "step 3: non-finite gradient (loss ..., grad norm nan)" where one stopped the run, else empty.
  std::string nonfinite_stop;
  bool stopped_nonfinite() const { return !nonfinite_stop.empty(); }
  // A stop request (SIGTERM/SIGINT/SIGUSR1 on any rank, see engine/distributed/launch/signals.h) ended the run
  // early: the signal seen on this rank (-1: it came to another rank), the steps completed and the
  // checkpoint saved for them.
  int stop_signal = 0;
  int stopped_after_step = 0;
  std::string stop_checkpoint;
  float first_loss = 0.0f, last_loss = 0.0f;
  int first_step = 0, last_step = 0;  // the steps of first_loss and last_loss; 0: no step in this run
  std::optional<float> val_loss;      // the last evaluation's; none when no evaluation ran
  double unigram_entropy_nats = 0.0;
  double context_free_val_loss_nats = 0.0;  // DataSource::context_free_val_loss_nats
  // data.choice_file's score at the last evaluation, when the run scores one.
  std::optional<ChoiceScore> choices;
  std::string sample;
  bool final_weights_gathered = false;    // final.safetensors's units were gathered (log.final_weights)
  std::optional<ChoicePlan> choice_plan;  // how the multiple-choice rows were scored, where they were
  MemorySnapshot memory;
};

class Trainer {
 public:
  // The config must be resolved for comm.world_size() ranks. Every rank constructs a Trainer and
  // calls run(); rank 0 prints, logs and writes the run directory. A non-empty `resume_checkpoint`
  // (a step_XXXXXXXX directory, the same on every rank: see resolve_resume_checkpoint) makes run()
  // restore the training state from it instead of initialising, and continue from its step.
  // `data_identity`: the data files' identity (run_identity.h) where the caller already computed
  // it for the ranks' comparison (the train command); computed here when null.
  Trainer(RunConfig config, std::string run_dir, Communicator& comm, MemoryTracker& tracker,
          std::string resume_checkpoint = {}, const nlohmann::json* data_identity = nullptr);
  ~Trainer();
  // A resume whose config changes the trajectory (trajectory_changes in resume.h) is refused unless
  // this is set (train --allow-config-change); then it continues and says what changed.
  void allow_config_change(bool allow) { allow_config_change_ = allow; }
  // The checkpoints the resume fell back past as damaged (ResumeChoice::unusable), which the run
  // sets aside saying so.
  void resume_fell_back_past(std::vector<std::string> unusable) { resume_unusable_ = std::move(unusable); }
  // Rank 0's hold on the checkpoint resumed from (ResumeChoice::held): kept until every rank's
  // reader holds it, so a live run's keep_last cannot delete it before it is read.
  void hold_resume_checkpoint(ckpt::FileHandle held) { resume_held_ = std::move(held); }
  // Runs max_steps optimizer steps (printing progress) and returns what happened.
  TrainSummary run();
  // The compute backend it runs on: "cpu (2 threads)", "cuda:0 (NVIDIA H100 ...)".
  const std::string& device_description() const;
  // Where the tokens come from, and each split's shards and tokens (the run's header prints it).
  const std::string& data_description() const;
  // What carries the parameter store's collectives ("mpi", "nccl", "mpi (staged through host
  // memory)"; the trainer's own small collectives go through the communicator it was given).
  std::string store_comm_name() const;

 private:
  // Collective, before anything is read from or written into the checkpoint folder: every rank
  // finds rank 0's lock in it (the same folder, shared), or every rank refuses the run naming the
  // first rank that does not.
  void check_folder_shared(Communicator& comm) const;
  // One optimizer step (0-based `step`) of the run that `run` describes: the batches, forward,
  // backward with the gradient reductions, the clip, AdamW on this rank's shard and the publish of
  // the updated parameters. Touches no weights when the loss or gradient norm is not finite.
  StepResult train_step(int step, const RunProgress& run);
  // After the loop ended at `step`: the at_end checkpoint, the op profile and, unless stopped early,
  // the final weights, evaluation and sample; then the summary record.
  void finish_run(int step, RunProgress& run);

  RunConfig config_;
  std::string run_dir_;
  std::string resume_checkpoint_;
  bool allow_config_change_ = false;
  std::vector<std::string> resume_unusable_;
  ckpt::FileHandle resume_held_;
  std::unique_ptr<ckpt::FolderLock> run_lock_;     // rank 0's, for the whole run; freed after state_
  std::unique_ptr<ckpt::FolderLock> folder_lock_;  // rank 0's, while the run may save; freed after state_
  std::unique_ptr<TrainerState> state_;            // engine/app/trainer/trainer_state.h
};

}  // namespace zt
