// What a Trainer holds (internal to engine/app/trainer): the parts of a run, built in the order they
// depend on each other, and the run's progress between steps, which the step, the checkpoints and
// the reports share.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/app/checkpoint/async_checkpoint.h"
#include "engine/app/checkpoint/folder_lock.h"
#include "engine/app/config/run_config.h"
#include "engine/app/trainer/data_source.h"
#include "engine/app/trainer/lr_schedule.h"
#include "engine/app/trainer/run_log.h"
#include "engine/app/trainer/trainer.h"
#include "engine/base/core/memory_tracker.h"
#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/comm/hybrid_communicator.h"
#include "engine/distributed/optim/sharded_adamw.h"
#include "engine/distributed/sharding/zero_param_store.h"
#include "kernels/compute_backend.h"
#include "kernels/op_profiler.h"
#include "models/language_model.h"

namespace zt {

// This rank's GPU (by its local rank), or 0 on the CPU.
int rank_device_index(const RunConfig& config);

struct TrainerState {
  const RunConfig& config;
  const std::string run_dir;
  // The data's identity (run_identity.h's data_identity): saves record it, a resume compares it.
  const nlohmann::json data_files;
  Communicator& comm;
  bool root;  // rank 0 prints, logs and writes files; every rank computes
  MemoryTracker& tracker;
  ComputeBackend backend;  // before everything that allocates through its context, so destroyed after
  // log.profile_ops: the profiler ctx carries (null when off). The model, store and optimizer copy
  // ctx when built, so every op of a step (AdamW and the gradient norm included) reaches it.
  std::unique_ptr<OpProfiler> profiler;
  ExecContext ctx;
  // On CUDA with several ranks the parameter store's collectives go through a device communicator
  // (NCCL, or MPI staged through host memory), under zero.shard_group_size through a hybrid one
  // over `comm` (engine/app/trainer/store_comm.h; null otherwise: the store uses `comm`); the
  // trainer's own small collectives stay on `comm`.
  std::unique_ptr<Communicator> device_comm;
  DataSource data;
  std::unique_ptr<LanguageModel> model;  // the config's family (models/model_family.h)
  ZeroParamStore store;
  ShardedAdamW optimizer;
  // checkpoint.async: the saver and its staging (this rank's file) for the whole run; null otherwise.
  std::unique_ptr<ckpt::AsyncCheckpointer> async_saves;
  LrSchedule schedule;
  std::unique_ptr<MetricsLog> metrics;  // rank 0's metrics.jsonl
  ProgressPrinter progress;
  std::vector<std::int32_t> inputs, targets;  // one micro-batch
  // ZT_TEST_NONFINITE_AT_STEP: the steps whose gradients the tests of the non-finite path poison,
  // "k" or "k-m" (docs/config.md, "Testing hooks"); {0, 0}: none.
  std::pair<int, int> inject_nonfinite_steps{0, 0};

  // `config` must outlive the state (the Trainer owns both).
  // `data_identity`: the data files' identity if the caller has it (computed otherwise).
  TrainerState(const RunConfig& config, std::string run_dir, Communicator& comm, MemoryTracker& tracker,
               const nlohmann::json* data_identity = nullptr);
  ~TrainerState();
  TrainerState(const TrainerState&) = delete;
  TrainerState& operator=(const TrainerState&) = delete;

  // Rank 0's run-directory and checkpoint-folder locks (the Trainer owns them; empty elsewhere).
  std::vector<const ckpt::FolderLock*> locks;
  // Why the run must write nothing more into its folders: "the lock <file> now belongs to <taker>
  // ..." for the first lock another run has taken over (folder_lock.h's lost_now), or "the run
  // directory <dir> was moved or removed ..." (its heartbeat's moved_seen); "" while both are this
  // run's. Cheap enough for every step and record.
  std::string lock_lost_to() const;

  // A record for metrics.jsonl; none once a lock is lost, so a run stopped past the locks'
  // staleness and taken over never writes beside its taker (the step's vote then ends it).
  void log(const nlohmann::json& record) {
    // Checked again after the write: a process stopped between the check and the write (SIGSTOP)
    // may continue after another run took the directory over (its record is then taken back).
    if (metrics && lock_lost_to().empty()) metrics->write_while(record, [this] { return lock_lost_to().empty(); });
  }
  // The communicator the parameter store's collectives go through (its volume is the ZeRO one).
  Communicator& store_comm() { return device_comm ? *device_comm : comm; }
  // What a collective that times out or fails, and a rank the launcher stops, name as where the
  // run was ("step 5 micro-batch 0", "the checkpoint save of step 4"): both communicators'.
  void set_comm_context(const std::string& context) {
    comm.set_context(context);
    if (&store_comm() != &comm) store_comm().set_context(context);
  }
  // zero.shard_group_size: the store's HybridCommunicator (null otherwise).
  HybridCommunicator* hybrid_comm() { return dynamic_cast<HybridCommunicator*>(device_comm.get()); }
};

// A folder's identity as statx(2) reads it (birth time 0 where the file system keeps none): another
// folder made under the same name differs.
struct FolderIdentity {
  std::uint64_t device = 0, inode = 0, born_ns = 0;
  bool operator==(const FolderIdentity&) const = default;
};

// Where a run stands between steps.
struct RunProgress {
  // Where the run started: step 0 and sample 0, or a checkpoint's position (the LR schedule, data
  // windows and dropout are functions of the step and the global sample index, so nothing else is
  // needed to continue exactly).
  int start_step = 0;
  std::int64_t start_sample = 0, start_tokens = 0;
  std::chrono::steady_clock::time_point started;  // when the first step of this run began
  int consecutive_skips = 0;                      // non-finite steps skipped in a row (a checkpoint carries it)
  int steps_this_run = 0;                         // optimizer steps taken since start_step
  int profiled_steps = 0;                         // log.profile_ops: steps timed, the first (warm-up) discarded
  int last_saved_step = -1;  // the last checkpoint this run saved (or resumed from its own folder), and where
  std::string last_saved_path;
  // The lineage id of the checkpoint this trajectory last saved or resumed from (its save_id, or
  // "crc32:..." for one from before save ids; "" for none): the next save records it as its previous_save_id, so a
  // folder's resolution can tell a save that continues `latest` from another trajectory's (checkpoint_folder.h).
  std::string last_save_id;
  // The special token ids of train.init_from's Hugging Face config (read at a fresh start, then
  // carried by each checkpoint's extra.special_token_ids): an export of a run without a tokenizer
  // of its own writes them, rather than none.
  nlohmann::json special_token_ids = nlohmann::json::object();
  // train.init_from's folder or file made absolute where the fresh start read it (then carried by
  // each checkpoint's extra.init_from_path): `ckpt export` refuses to write over it from any
  // working directory.
  std::string init_from_path;
  // A resume at a step whose evaluation or sample the saved run never logged (it stopped on a
  // signal, or was killed, between the save and them): made before the first step.
  bool eval_pending = false, sample_pending = false;
  bool fresh_folder = false;       // a fresh run that has not saved yet (save_checkpoint)
  bool folder_moved_said = false;  // the checkpoint folder was found moved away, and a save said so
  // The save under way (an asynchronous one until a step boundary concludes it): the run's last save
  // before it, which stays the last where this one is lost with its folder, and the identity of the
  // checkpoint folder it began in (rank 0's; inode 0 where it could not be read): [Note: a save that
  // loses its folder] in run_saves.cpp.
  struct SaveUnderWay {
    int step = -1, previous_saved_step = -1;
    std::string previous_save_id;
    FolderIdentity folder;
  } save_under_way;
  bool save_lost = false;          // a save lost with its folder since the last one kept: the run's end makes it up
  bool stop_in_last_step = false;  // a stop request agreed in the last step: saved before the final weights
  TrainSummary summary;            // what Trainer::run returns

  // Counts optimizer step `step` (1-based), whose loss was `loss`, into the summary.
  void count_step(int step, float loss) {
    ++summary.steps_done;
    if (++steps_this_run == 1) {
      summary.first_loss = loss;
      summary.first_step = step;
    }
    summary.last_loss = loss;
    summary.last_step = step;
  }
};

// What one training step produced.
struct StepResult {
  float loss = 0.0f;               // the micro-batches' mean, averaged over ranks
  double grad_norm = 0.0;          // the global gradient norm, before clipping
  float lr = 0.0f;                 // the learning rate AdamW used (0 when it did not run)
  bool stop_requested = false;     // a rank has a stop request (on the last step the run finishes, its save first)
  bool lock_lost = false;          // rank 0's lock was taken over: the run ends (no update taken)
  bool updated = false;            // false: the loss or gradient norm was not finite; no weights touched
  int first_nonfinite_micro = -1;  // this rank's first micro-batch whose loss is not finite (-1: none)
};

}  // namespace zt
