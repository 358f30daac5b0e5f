// `zerotrain train`: trains a GPT model from a JSON config on this process and reports the loss
// curve's ends, the validation loss beside the data's unigram entropy, a text sample and the
// memory table; with --resume it continues from a sharded checkpoint. SIGTERM, SIGINT or SIGUSR1
// makes it save a checkpoint at the next step boundary and exit 0. Exit code 1 when the run
// stopped on a non-finite loss or gradient.
#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <exception>
#include <filesystem>
#include <memory>
#include <vector>

#include "engine/app/checkpoint/checkpoint_reader.h"
#include "engine/app/cli/commands/arg_parser.h"
#include "engine/app/cli/commands/commands.h"
#include "engine/app/config/run_config.h"
#include "engine/app/config/zero_section.h"
#include "engine/app/io/made_folders.h"
#include "engine/app/trainer/memory_report.h"
#include "engine/app/trainer/resume.h"
#include "engine/app/trainer/run_checkpoints.h"
#include "engine/app/trainer/run_identity.h"
#include "engine/app/trainer/store_comm.h"
#include "engine/app/trainer/trainer.h"
#include "engine/base/core/check.h"
#include "engine/base/core/console.h"
#include "engine/base/core/host_allocator.h"
#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/launch/signals.h"
#include "kernels/compute_backend.h"
#include "kernels/ops.h"

namespace zt::cli {

namespace {

// The run directory and the checkpoint folder, where this run makes them, removed again when the
// run fails before it wrote anything there (a train.init_from refused as its weights load, a NaN in
// them, a refused resume): its empty log and empty checkpoint folder alone were left, which looked
// like a run that had started. Folders that were there stay as they were.
class MadeRunFolders {
 public:
  MadeRunFolders(const RunConfig& c, bool root) : unwinding_(std::uncaught_exceptions()) {
    if (!root) return;
    namespace fs = std::filesystem;
    run_dir_ = missing_folders(c.log.run_dir);
    checkpoints_ = missing_folders(c.checkpoint.folder_for(c.log.run_dir));
    std::error_code ec;
    log_ = fs::absolute(c.log.run_dir, ec) / "metrics.jsonl";
    made_log_ = !ec && fs::symlink_status(log_, ec).type() == fs::file_type::not_found;
  }
  MadeRunFolders(const MadeRunFolders&) = delete;
  MadeRunFolders& operator=(const MadeRunFolders&) = delete;
  ~MadeRunFolders() {
    if (std::uncaught_exceptions() == unwinding_) return;
    namespace fs = std::filesystem;
    std::error_code ec;
    // Another run holds the directory (this run's lock is gone by now: refused by that one's, or
    // started with it): its log and checkpoint folder, made while this run looked, are its own.
    if (fs::symlink_status(log_.parent_path() / "RUN_LOCK", ec).type() != fs::file_type::not_found) return;
    // The log this run opened, still empty (a log that was there is the earlier run's, set aside
    // only once the run starts).
    if (made_log_ && fs::is_regular_file(fs::symlink_status(log_, ec)) && fs::file_size(log_, ec) == 0 && !ec) {
      fs::remove(log_, ec);
    }
    remove_empty_folders(checkpoints_);
    remove_empty_folders(run_dir_);
  }

 private:
  std::vector<std::filesystem::path> run_dir_, checkpoints_;  // missing_folders of each, before the run
  std::filesystem::path log_;                                 // the run directory's metrics.jsonl
  int unwinding_;
  bool made_log_ = false;  // metrics.jsonl was missing
};

// What train.deterministic promises this run (docs/zero_memory.md, "The same bits at any rank
// count"), for the banner: the stages and rank counts whose bits agree, and the exceptions.
std::string deterministic_promise(const RunConfig& c) {
  if (!c.train.deterministic) return "";
  // The wire formats as they act: an int8 gather one rank's solo path never calls promises what an
  // exact one does (the banner said stages 1-3 only, beside the note that int8 acted on nothing).
  const ZeroOptions z = acting_zero_options(c);
  // Hybrid sharding's two hops (and int8 gathers' blocks, which follow the shards) agree at one N:
  // int8 set but idle here acts on more ranks, so the rank count is named for it too.
  const char* where = z.fold_in_global_order && c.zero.gather_wire == WireDType::kExact ? "" : " on this rank count";
  // Rounded on the wire or in the shard where only some stages round: those stages agree.
  if (z.cross_group_grad_wire == WireDType::kInt8) {
    return fmt::format(
        ", deterministic reductions: the same bits at stages 1-3{} (int8 cross-group gradients: stage 0 within "
        "their rounding)",
        where);
  }
  if (z.fp32_grad_shards && c.param_dtype == DType::kBF16) {
    return fmt::format(
        ", deterministic reductions: the same bits at stages 2-3{} (fp32 gradient shards: stages 0-1 round as bf16)",
        where);
  }
  if (z.gather_wire == WireDType::kInt8) {
    return fmt::format(", deterministic reductions: the same bits at stages 1-3{} (int8 gathers follow the shards)",
                       where);
  }
  if (!z.fold_in_global_order) {
    return ", deterministic reductions: the same bits at every stage on this rank count (hybrid sharding)";
  }
  return *where == '\0' ? ", deterministic: the same bits at any rank count"
                        : ", deterministic: the same bits at every stage on this rank count (int8 gathers, idle on "
                          "one rank's solo path, act on more ranks, their blocks following the shards)";
}

}  // namespace

int train_main(const std::vector<std::string>& args) {
  ArgParser parser("train", "Train a GPT-2 or Llama-style model from a JSON config (see docs/config.md).");
  parser.value_flag("config", "FILE", "JSON run config", true)
      .value_flag("set", "SECTION.KEY=VALUE", "override a config key", false, true)
      .value_flag("run-dir", "DIR", "where metrics, config and final weights go (default: log.run_dir)")
      .value_flag(
          "resume", "latest|PATH",
          "continue from the newest valid checkpoint in checkpoint.dir, or from a checkpoint directory or folder")
      .bool_flag("allow-config-change",
                 "with --resume: continue even if the config changes the seed, LR schedule, AdamW terms, dropout, "
                 "sequence length (the data position stays a count of windows), global batch or data order, number "
                 "formats (precision.*, the zero section's dtypes), or the data files differ (refused otherwise)");
  if (!parser.parse(args)) {
    print_out("{}", parser.help_text());
    return 0;
  }
  if (parser.has("allow-config-change") && !parser.has("resume")) {  // a run that resumes nothing changes nothing
    throw_input_error(
        "zerotrain train: --allow-config-change is read only with --resume (a resumed run may then "
        "take a changed config)");
  }
  // Under mpirun every rank runs this; the communicator says how many there are, and the batch
  // terms are resolved for that many. Rank 0 alone prints and writes the run directory.
  // A stop signal means "save at the next step boundary" (engine/distributed/launch/signals.h) from
  // the start, MPI's start-up and the rendezvous included (one there killed the rank, with only
  // the launcher's banner); given back below where the config turns it off.
  install_stop_request_handlers("zerotrain",
                                "the run stops at the end of the current step (or of its first), with a checkpoint (a "
                                "second SIGTERM or SIGINT exits at once, without one)");
  // A pipe's reader that ends (`| head`, a log shipper, a killed tee) does not end the run before
  // its save: the writes to the pipe fail instead, said at the run's end (metrics.jsonl has the
  // run's record). SIGPIPE's default killed the run there, lost every step since its last save and
  // left its locks behind.
  std::signal(SIGPIPE, SIG_IGN);
  MemoryTracker tracker;
  CommOptions comm_options;
  std::unique_ptr<Communicator> comm = make_communicator(tracker, comm_options);
  const std::string run_dir = parser.has("run-dir") ? parser.get("run-dir") : "";  // never empty (ArgParser)
  SavedModelKeys resumed_model;  // a resumed run needs no train.init_from: its checkpoint has the weights
  if (parser.has("resume")) {
    resumed_model = [&](const RunConfig& c) {
      return resumed_model_keys(parser.get("resume"),
                                c.checkpoint.folder_for(run_dir.empty() ? c.log.run_dir : run_dir));
    };
  }
  // Every rank reads the config: its error, the same on each, printed once (rank 0's).
  RunConfig cfg;
  on_every_rank(*comm, [&] {
    cfg = load_run_config(parser.get("config"), parser.all("set"), comm->world_size(), resumed_model);
    check_trainable(cfg);
    (void)store_comm_choice(cfg, comm->world_size());  // zero.shard_group_size and the like, against the ranks
    if (!run_dir.empty()) cfg.log.run_dir = run_dir;
    if (cfg.log.run_dir.empty()) {  // "" in the config: which key, not the folder's failure to be made
      throw_input_error(
          "config error in {}: log.run_dir is empty: name a directory, leave the key out for its default "
          "(runs/<config name>), or give --run-dir",
          cfg.sources_of({"log.run_dir"}));
    }
  });
  comm_options.deterministic = cfg.train.deterministic;
  comm_options.timeout_s = cfg.train.collective_timeout_s;
  comm->set_options(comm_options);
  const bool root = comm->rank() == 0;
  // The run's first collective: every rank must run the same config, data and build (exit 2 naming
  // the first difference otherwise, rather than training on or failing inside a collective).
  nlohmann::json data_files;      // a file missing or unreadable: the same on each rank, printed once
  ckpt::FileHandle dataset_hold;  // a prepared dataset's folder, held from its identity to the run's end
  on_every_rank(*comm, [&] {
    hold_prepared_dataset(cfg, dataset_hold);
    data_files = data_identity(cfg);
  });
  // And the same flags that choose where the run starts: a rank resuming from another checkpoint
  // (or alone) would train on mixed state, or wait in a collective the others never call.
  IdentityEntries identity = run_identity(cfg, data_files);
  identity.emplace_back("--resume", parser.has("resume") ? parser.get("resume") : "(not given)");
  identity.emplace_back("--allow-config-change", parser.has("allow-config-change") ? "given" : "(not given)");
  check_ranks_agree(*comm, identity);
  if (!cfg.checkpoint.save_on_signal) restore_default_stop_handlers();
  set_launcher_stop_hint(cfg.checkpoint.save_on_signal);

  if (root) {
    print_out("zerotrain train: {}\nresolved config: {}\n", cfg.source, cfg.to_json().dump());
    for (const std::string& note : cfg.derived) print_out("derived: {}\n", note);
    for (const std::string& warning : cfg.warnings) print_out("warning: {}\n", warning);
  }
  ResumeChoice resume;
  if (parser.has("resume")) {
    resume = resolve_resume_checkpoint(*comm, parser.get("resume"), cfg.checkpoint.folder_for(cfg.log.run_dir));
    if (root) print_out("resuming from {}\n", resume.path);
    // A refusal before the model's state is allocated (the trainer judges it again as it starts).
    on_every_rank(*comm, [&] {
      (void)judge_resume(resume.path, ckpt::CheckpointReader(resume.path).manifest(), cfg, data_files,
                         parser.has("allow-config-change"));
    });
  }
  const std::string resume_checkpoint = resume.path;
  const MadeRunFolders made_folders(cfg, root);
  Trainer trainer(cfg, cfg.log.run_dir, *comm, tracker, resume_checkpoint, &data_files);
  trainer.allow_config_change(parser.has("allow-config-change"));
  trainer.resume_fell_back_past(std::move(resume.unusable));
  trainer.hold_resume_checkpoint(std::move(resume.held));
  const auto& blas = cpu_blas_description();
  if (root) {
    print_out("model: {}\n", describe_model(cfg.model_spec()));
    print_out(
        "batch: {} tokens/step = micro_batch {} x seq_len {} x grad_accum {} x {} ranks; {} steps; {} threads, "
        "blas {}\n",
        cfg.train.global_batch_tokens, cfg.train.micro_batch, cfg.train.seq_len, cfg.train.grad_accum,
        comm->world_size(), cfg.train.max_steps, cfg.train.num_threads, blas.core_name);
    print_out("data: {}\n", trainer.data_description());
    print_out("device: {}\n", trainer.device_description());
    print_out("attention: {}\n",
              describe_attention(cfg.model_spec(), cfg.model_build(), cfg.device, cfg.attention_kernels));
    const std::string zero_changed = zero_choices_changed(cfg.zero);
    print_out("ZeRO stage {} on {} rank(s) ({} communicator{}){}\nrun directory: {}\n", cfg.zero.stage,
              comm->world_size(), trainer.store_comm_name(), deterministic_promise(cfg),
              zero_changed.empty() ? "" : "; zero: " + zero_changed, cfg.log.run_dir);
  }

  const auto started = std::chrono::steady_clock::now();
  const TrainSummary s = trainer.run();
  // Its outputs are written (a stopped run's checkpoint is said by note_stop_checkpoint_saved): a
  // launcher ending the job from here on (mpirun interrupted while the ranks finalise) cut nothing.
  // Rank 0 writes them; the others know it once the gather below, which waits for rank 0, is done.
  const bool completed = s.stop_signal == 0 && !s.stopped_nonfinite();
  if (completed && root) note_run_complete(cfg.log.run_dir);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const std::vector<MemorySnapshot> memory = gather_memory_snapshots(*comm, s.memory);
  if (completed && !root) note_run_complete(cfg.log.run_dir);
  if (!root) return s.stopped_nonfinite() ? 1 : 0;
  if (s.stop_signal != 0) {
    print_out("\nstopped after step {} of {} on {}; saved {}\n(continue with the same command and --resume latest)\n",
              s.stopped_after_step, cfg.train.max_steps,
              s.stop_signal > 0 ? signal_name(s.stop_signal) : "a signal to another rank", s.stop_checkpoint);
    return 0;
  }
  print_out("\n== summary ==\n");
  // A skipped step (non-finite loss or gradients) updated nothing: counted apart from the updates.
  print_out("steps: {} ({} updated the weights, {} skipped)\n", s.steps_done + s.skipped_steps, s.steps_done,
            s.skipped_steps);
  print_out("wall time: {:.1f} s (the steps of this run, its evaluations, checkpoints and sample)\n", seconds);
  if (s.first_step > 0) {
    print_out("train loss: {:.4f} (step {}) -> {:.4f} (step {})\n", s.first_loss, s.first_step, s.last_loss,
              s.last_step);
  } else if (s.steps_this_run > 0) {  // its every step skipped, or its first stopped it
    print_out("train loss: none (no step of this run updated the weights: {})\n",
              s.stopped_nonfinite()
                  ? s.nonfinite_stop
                  : fmt::format("all {} of its steps skipped for a non-finite loss or gradient", s.steps_this_run));
  } else {
    print_out("train loss: no step in this run ({})\n",
              resume_checkpoint.empty() ? std::string("train.max_steps = 0")
                                        : fmt::format("resumed at its last step, {}", cfg.train.max_steps));
  }
  if (s.val_loss) {
    // Context use is judged against the least a model that ignores context can score on the same
    // validation targets, their own frequencies' entropy (DataSource::context_free_val_loss_nats).
    print_out(
        "val loss: {:.4f}   unigram entropy of the training data: {:.4f} nats; no model that ignores context "
        "scores below {:.4f} on the validation windows, their targets' entropy ({})\n",
        *s.val_loss, s.unigram_entropy_nats, s.context_free_val_loss_nats,
        *s.val_loss < s.context_free_val_loss_nats ? "below: the model uses context" : "not below");
  } else if (s.steps_this_run == 0 && !resume_checkpoint.empty()) {
    print_out("val loss: none in this run (the run had finished: its final evaluation is in metrics.jsonl)\n");
  } else {
    print_out("val loss: none (no evaluation ran)\n");
  }
  if (s.choices) {
    print_out("multiple choice ({}): {}/{} = {:.4f}\n", cfg.data.choice_file, s.choices->correct, s.choices->examples,
              s.choices->accuracy());
  }
  if (!s.sample.empty()) print_out("sample:\n{}\n---\n", s.sample);
  print_out("memory on rank 0 (bytes per category over the run):\n{}", format_memory_table(s.memory));
  print_out("(plus {} of freed blocks the host allocator keeps for reuse)\n", format_bytes(host_cached_bytes()));
  print_out("over the whole run (evaluation, sampling and the final gather included):\n{}",
            format_measured_vs_predicted(cfg, memory, {s.steps_this_run > 0, s.final_weights_gathered, s.choice_plan}));
  if (s.stopped_nonfinite()) {
    print_err("zerotrain: error: {}: training stopped, no weights written (see {}/metrics.jsonl)\n", s.nonfinite_stop,
              cfg.log.run_dir);
    return 1;
  }
  if (cfg.log.final_weights) {
    print_out("wrote {}/final.safetensors, metrics.jsonl, config.json\n", cfg.log.run_dir);
  } else {
    print_out("wrote {}/metrics.jsonl, config.json (no final.safetensors: log.final_weights = false)\n",
              cfg.log.run_dir);
  }
  return 0;
}

}  // namespace zt::cli
