// Starting, saving and stopping a run around its checkpoints (see the header).
#include "engine/app/trainer/run_checkpoints.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <optional>
#include <random>

#include "engine/app/checkpoint/checkpoint_folder.h"
#include "engine/app/checkpoint/checkpoint_model.h"
#include "engine/app/checkpoint/folder_lock.h"
#include "engine/app/checkpoint/optimizer_checkpoint.h"
#include "engine/app/io/output_file.h"
#include "engine/app/io/pretrained.h"
#include "engine/app/trainer/earlier_outputs.h"
#include "engine/app/trainer/evaluation.h"
#include "engine/app/trainer/model_setup.h"
#include "engine/app/trainer/resume.h"
#include "engine/app/trainer/run_identity.h"
#include "engine/app/trainer/start_checks.h"
#include "engine/base/core/build_info.h"
#include "engine/distributed/launch/signals.h"

namespace zt {

RunProgress start_run(TrainerState& s, const std::string& resume_checkpoint, bool allow_config_change) {
  const RunConfig& c = s.config;
  RunProgress run;
  run.fresh_folder = resume_checkpoint.empty();  // its first save sets an earlier run's aside
  if (resume_checkpoint.empty() && !c.train.init_from.empty()) {
    const std::int64_t bytes = load_pretrained_parameters(c.train.init_from, s.store, s.optimizer, s.tracker, s.comm);
    run.special_token_ids = read_pretrained_model(c.train.init_from).special_token_ids;
    start_fresh_log(s);
    std::error_code ec;
    run.init_from_path = std::filesystem::weakly_canonical(std::filesystem::absolute(c.train.init_from), ec).string();
    s.log({{"type", "init_from"}, {"path", c.train.init_from}, {"bytes_read", bytes}});
    s.progress.message(fmt::format("weights from {} ({} read by this rank)", c.train.init_from, format_bytes(bytes)));
    return run;
  }
  if (resume_checkpoint.empty()) {
    initialize_parameters(c.model_spec(), c.train.seed, s.store, s.optimizer, s.tracker, c.train.num_threads);
    start_fresh_log(s);
    return run;
  }
  // Every rank reads the same manifest and judges it alike: a refusal is the job's, printed once.
  std::optional<ckpt::CheckpointReader> opened;
  std::vector<std::string> changes, evaluation_changed, data_changed;
  bool vocabulary = false;
  on_every_rank(s.comm, [&] {
    const ckpt::Manifest& m = opened.emplace(resume_checkpoint).manifest();
    if (m.position.step > c.train.max_steps) {
      throw_input_error(
          "--resume {}: the checkpoint is at step {}, past train.max_steps = {}: there is nothing to train (raise "
          "train.max_steps to continue it)",
          resume_checkpoint, m.position.step, c.train.max_steps);
    }
    // Checkpoints from before data identities were recorded have none to compare.
    data_changed = m.extra.contains("data_identity") ? data_changes(m.extra["data_identity"], s.data_files)
                                                     : std::vector<std::string>{};
    if (m.extra.contains("data_identity")) {
      evaluation_changed = evaluation_data_changes(m.extra["data_identity"], s.data_files);
      vocabulary = vocabulary_changed(m.extra["data_identity"], s.data_files);
    }
    changes = check_resume_fits(resume_checkpoint, m.model, m.config, m.data_parallel_ranks(), m.position.step, c,
                                allow_config_change, data_changed);
    if (const std::string windows = evaluation_window_change(m.config, c); !windows.empty()) {
      evaluation_changed.push_back(windows);
    }
  });
  const ckpt::CheckpointReader& reader = *opened;
  const ckpt::Manifest& m = reader.manifest();
  if (!changes.empty()) {
    s.progress.message(
        fmt::format("resume: continuing with a changed config (--allow-config-change): {}", fmt::join(changes, "; ")));
  }
  if (!evaluation_changed.empty()) {
    // Where the training files changed too (--allow-config-change, said above), the batches are not
    // the saved run's either.
    s.progress.message(fmt::format(
        "note: resume: {}: {}validation losses{} before and after the resume are not comparable{}",
        fmt::join(evaluation_changed, "; "),
        data_changed.empty() ? "the training batches are the saved run's, but " : "",
        vocabulary ? " (and sampled text)" : "",
        vocabulary ? "; the run directory's vocabulary is now this run's, which `sample` and `ckpt export` decode "
                     "every checkpoint here with, the earlier ones too"
                   : ""));
  }
  const std::vector<std::string> bits = deterministic_bit_changes(m.config, c);
  if (!bits.empty()) {
    s.progress.message(
        fmt::format("note: resume: {}: the run continues the saved one's trajectory, but not bit "
                    "for bit (deterministic mode's bits follow the micro-batch)",
                    fmt::join(bits, "; ")));
  }
  ckpt::restore_training_state(reader, s.store, s.optimizer);  // publishes; the first acquire waits for it
  run.start_step = static_cast<int>(m.position.step);
  // A stop before the first step (in an evaluation the saved run left) saves nothing more where the
  // checkpoint is in this run's folder; one from elsewhere is saved here, for --resume latest.
  std::error_code same_ec;
  if (std::filesystem::equivalent(std::filesystem::path(resume_checkpoint).parent_path(),
                                  c.checkpoint.folder_for(s.run_dir), same_ec)) {
    run.last_saved_step = run.start_step;
    run.last_saved_path = resume_checkpoint;
  }
  run.start_sample = m.position.next_sample_index;
  run.start_tokens = m.position.tokens_seen;
  run.summary.steps_done = m.position.optimizer_step;
  run.summary.skipped_steps = m.extra.value("skipped_steps", 0);
  run.consecutive_skips = m.extra.value("consecutive_skips", 0);
  // The next save continues this one's lineage: its save_id, or for a checkpoint saved before save
  // ids, an id from its manifest's seal (ckpt::checkpoint_lineage_id).
  run.last_save_id = m.lineage_id();
  run.special_token_ids = ckpt::extra_object(m.extra, "special_token_ids");
  run.init_from_path = ckpt::extra_string(m.extra, "init_from_path");
  const std::string saved_id = ckpt::extra_string(m.extra, "save_id");
  // The log is this trajectory's if it records the checkpoint's save (its save_id, in the save's
  // checkpoint or checkpoint_started record), or the save before it and a record of its step, but
  // of no other save at that step (a kill between a synchronous save's commit and its record; a
  // save of the step with another id is another trajectory's: a rollback's, whose records a resume
  // from the superseded checkpoint would otherwise continue), or, for a checkpoint from before
  // save ids, a record of its step (every step logs one before its save). Otherwise it is another
  // trajectory's (a fresh run's, started in this directory after that checkpoint's run): kept
  // aside too, not continued as if it were this run's history.
  const std::string previous_id = ckpt::extra_string(m.extra, "previous_save_id");
  // Everything below asks of the log, read once here.
  const MetricsLog::AtStep logged =
      s.metrics ? s.metrics->read_at_step(run.start_step, {saved_id, previous_id}) : MetricsLog::AtStep{};
  const bool log_is_ours = !s.metrics || run.start_step == 0 ||
                           (saved_id.empty() ? logged.any_record
                                             : logged.save_ids.count(saved_id) > 0 ||
                                                   (!previous_id.empty() && logged.save_ids.count(previous_id) > 0 &&
                                                    logged.any_record && !logged.other_save));
  if (!log_is_ours) {
    s.metrics->start_afresh();
    if (!s.metrics->set_aside().empty()) {
      s.progress.message(
          fmt::format("metrics.jsonl is another run's log (it does not record the save of step {} resumed from): "
                      "kept as {}; this run starts a new one",
                      run.start_step, s.metrics->set_aside()));
    }
  } else if (s.metrics) {
    if (const int dropped = s.metrics->drop_records_after_step(run.start_step, logged.past); dropped > 0) {
      s.progress.message(fmt::format("metrics.jsonl: dropped {} record(s) logged after step {}, the step resumed from",
                                     dropped, run.start_step));
    }
  }
  keep_earlier_final_weights_at_resume(s, m.position.optimizer_step, log_is_ours);
  // Logged once the log is known to be this run's: written before, it made a new folder's empty log
  // look like another run's, and went aside with it.
  if (!changes.empty() || !evaluation_changed.empty()) {
    nlohmann::json record = {{"type", "config_change"}, {"step", m.position.step}, {"changes", changes}};
    if (!evaluation_changed.empty()) record["evaluation_data"] = evaluation_changed;
    s.log(std::move(record));
  }
  // A save's `checkpoint` record comes after its commit (an asynchronous save's at a later step
  // boundary): a kill -9 in between leaves the log without it, though the save is this run's (its
  // save_id is logged: the checkpoint_started record). Recovered from the manifest, marked so.
  // (The step's records stay in a log that is ours; a log started afresh holds none.)
  const auto logged_at_step = [&](const char* type) { return log_is_ours && logged.kept_types.count(type) > 0; };
  if (s.metrics && log_is_ours && run.start_step > 0 && !saved_id.empty() && !logged_at_step("checkpoint")) {
    s.log({{"type", "checkpoint"},
           {"step", run.start_step},
           {"path", resume_checkpoint},
           {"ranks", m.data_parallel_ranks()},
           {"rank_files", m.world_size},
           {"save_id", saved_id},
           {"recovered", "the run ended between the save's commit and its record; read back from its manifest"}});
  }
  // The evaluation and sample of the checkpoint's step come after its save, so a stop (or a kill)
  // between them leaves them to this run: made where the log lacks them, before its first step, or
  // for a finished run resumed, by finish_run (which otherwise redoes neither: the log keeps one
  // final evaluation). Rank 0 reads the log; every rank evaluates.
  const int at = run.start_step;
  if ((at > 0 || c.train.max_steps == 0) && at <= c.train.max_steps) {
    const bool eval_due = evaluates_after(c, at), sample_due = samples_after(c, at);
    std::string pending;
    if (s.root) {
      if (eval_due && !(s.metrics && logged_at_step("eval"))) pending += 'e';
      if (sample_due && !(s.metrics && logged_at_step("sample"))) pending += 's';
    }
    pending = broadcast_string(s.comm, pending);
    run.eval_pending = pending.find('e') != std::string::npos;
    run.sample_pending = pending.find('s') != std::string::npos;
  }
  if (s.root && writes_checkpoints(c)) {  // rank 0 holds the folder's lock
    const std::string folder = c.checkpoint.folder_for(s.run_dir);
    if (const auto moved = ckpt::set_aside_other_trajectories(folder, run.start_step, m.lineage_id(), previous_id);
        !moved.empty()) {
      report_set_aside(s, folder, moved, run.start_step,
                       fmt::format("past step {}, or not on the lineage of the checkpoint resumed: another "
                                   "trajectory's, which keep_last and the folder's fallback would take for this run's",
                                   run.start_step));
    }
  }
  s.log({{"type", "resume"},
         {"step", run.start_step},
         {"checkpoint", resume_checkpoint},
         {"saved_world_size", m.world_size},
         {"saved_zero_stage", m.zero_stage}});
  s.progress.message(fmt::format("resumed from {} at step {} (saved by {} at ZeRO stage {}; sample {})",
                                 resume_checkpoint, run.start_step, m.savers(), m.zero_stage, run.start_sample));
  return run;
}

namespace {

// A checkpoint's own name in its folder's lineage: 64 random bits.
std::string new_save_id() {
  std::random_device device;
  const std::uint64_t bits = (static_cast<std::uint64_t>(device()) << 32) | device();
  return fmt::format("{:016x}", bits);
}

// A save committed: remembered in `run`, logged by rank 0 (and any warning).
void report_saved(TrainerState& s, RunProgress& run, const ckpt::SaveResult& r) {
  run.last_saved_path = r.path;
  const bool async = s.async_saves != nullptr;
  s.log({{"type", "checkpoint"},
         {"step", r.step},
         {"path", r.path},
         {"seconds", r.seconds},
         {"blocked_seconds", r.blocked_seconds},
         {"async", async},
         {"rank_bytes", r.rank_bytes},
         {"total_bytes", r.total_bytes},
         {"ranks", s.comm.world_size()},
         {"rank_files", r.rank_files},
         {"save_id", r.save_id}});
  // Sizes as every other table and ckpt inspect print them (binary units); both times to the same
  // places, so a blocked time never reads longer than the whole save it is part of.
  s.progress.message(fmt::format("step {}: saved checkpoint {} ({} in {} rank file(s)) in {:.3f} s{}", r.step, r.path,
                                 format_bytes(r.total_bytes), r.rank_files, r.seconds,
                                 async ? fmt::format(", training blocked {:.3f} s", r.blocked_seconds) : ""));
  if (!r.warning.empty()) {
    s.progress.message("warning: " + r.warning);
    s.log({{"type", "checkpoint_warning"}, {"step", r.step}, {"text", r.warning}});
  }
}

// A save that failed on rank 0 because the run directory went away while it wrote (moved or
// removed: the save's files could not be made under its old name) is said as that, not as the
// file it could not create.
void throw_if_run_directory_moved(const TrainerState& s, int step) {
  if (!s.root) return;
  for (const ckpt::FolderLock* lock : s.locks) {
    if (lock->kind() == ckpt::LockedFolder::kRunDirectory && lock->moved_now()) {
      throw_runtime_error(
          "checkpoint at step {} not saved: the run directory {} was moved or removed while this run wrote into it "
          "(a moved one resumes with --run-dir at its new place)",
          step, lock->folder());
    }
  }
}

}  // namespace

void save_checkpoint(TrainerState& s, RunProgress& run, int steps_completed) {
  const RunConfig& c = s.config;
  // A rank stopped in the save (a peer died in it) says so, not the last step's micro-batch.
  s.set_comm_context(fmt::format("the checkpoint save of step {}", steps_completed));
  const std::int64_t samples_per_step =
      static_cast<std::int64_t>(c.train.grad_accum) * c.train.micro_batch * c.world_size;
  ckpt::CheckpointMeta meta;
  meta.position.step = steps_completed;
  meta.position.next_sample_index = run.start_sample + (steps_completed - run.start_step) * samples_per_step;
  meta.position.tokens_seen = run.start_tokens + (steps_completed - run.start_step) * c.train.global_batch_tokens;
  meta.model = ckpt::model_json(c.model_spec());
  meta.config = c.to_json();
  meta.extra = {{"skipped_steps", run.summary.skipped_steps},
                {"consecutive_skips", run.consecutive_skips},
                {"data_parallel_ranks", c.world_size},
                {"data_identity", s.data_files},
                {"written_by", build_description()}};
  if (!run.special_token_ids.empty()) meta.extra["special_token_ids"] = run.special_token_ids;
  if (!run.init_from_path.empty()) meta.extra["init_from_path"] = run.init_from_path;
  // Where the run's tokenizer lies for an export or a sample of this checkpoint, wherever
  // checkpoint.dir put it and whichever directory those commands run in (ckpt::run_directory_of).
  std::error_code ec;
  const std::filesystem::path run_dir = std::filesystem::weakly_canonical(std::filesystem::absolute(s.run_dir), ec);
  if (!ec) meta.extra["run_dir"] = run_dir.string();
  if (s.root) {  // rank 0 writes the manifest
    meta.extra["save_id"] = new_save_id();
    meta.extra["previous_save_id"] = run.last_save_id;
    run.last_save_id = meta.extra["save_id"];
  }
  const std::string folder = c.checkpoint.folder_for(s.run_dir);
  // Rank 0's checks before a save, whose outcome every rank learns: another run took the folder's
  // lock over while this one was stopped or hung past the lock's stale time (writing now would mix
  // the two runs' checkpoints); and a fresh run's first save sets aside the checkpoints an earlier
  // run left in the folder (another trajectory's, which keep-last would count and a folder's
  // resolution could take for this run's). Not before: a run that never saves leaves them be.
  std::string refusal;
  if (s.root) {
    try {
      ckpt::check_folder_lock_still_held(folder);  // the commit checks again (a save under way when stopped)
      // A synchronous save's id reaches the log before its commit, as an asynchronous one's does
      // (below): a kill between the commit and the `checkpoint` record leaves a log that still names
      // the save, which a resume keeps as this run's (the run's first save has no earlier one that
      // would say so) and whose record it recovers.
      if (!s.async_saves) {
        s.log({{"type", "checkpoint_started"},
               {"step", steps_completed},
               {"save_id", ckpt::extra_string(meta.extra, "save_id")}});
      }
      // The log up to this step is on disk before the save can commit; a failure is the save's,
      // which every rank learns below.
      if (s.metrics) s.metrics->sync();
      for (const ckpt::FolderLock* lock : s.locks) {
        // A run directory moved away is asked now, not at the heartbeat's next beat: a save would
        // make it again under its old name. A checkpoint folder is made again (by the heartbeat or
        // the save) and the saves go on there, said once.
        if (!lock->moved_now()) continue;
        if (lock->kind() == ckpt::LockedFolder::kRunDirectory) {
          throw_runtime_error("the run directory {} was moved or removed while this run wrote into it", lock->folder());
        }
        if (!run.folder_moved_said) {
          run.folder_moved_said = true;
          s.progress.message(fmt::format(
              "warning: the checkpoint folder {} was moved or removed during the run: the checkpoints saved before "
              "are not in it; saving on into a new one there",
              lock->folder()));
        }
      }
      if (run.fresh_folder) {
        if (const auto moved = ckpt::set_aside_checkpoints_after(folder, -1); !moved.empty()) {
          report_set_aside(s, folder, moved, steps_completed, "an earlier run's; this run started afresh");
        }
      }
    } catch (const std::exception& e) {
      refusal = fmt::format("checkpoint at step {} not saved: {}", steps_completed, e.what());
    }
  }
  run.fresh_folder = false;
  refusal = broadcast_string(s.comm, refusal);
  if (!refusal.empty()) throw_runtime_error("{}", refusal);
  run.last_saved_step = steps_completed;
  if (s.async_saves) {
    finish_checkpoint(s, run);  // one save in flight at most; the previous one reported first
    const double blocked =
        ckpt::start_training_state_save(*s.async_saves, folder, s.store, s.optimizer, meta, c.checkpoint.keep_last);
    s.log({{"type", "checkpoint_started"},
           {"step", steps_completed},
           {"blocked_seconds", blocked},
           {"save_id", ckpt::extra_string(meta.extra, "save_id")}});
    s.progress.message(
        fmt::format("step {}: checkpoint staged in {:.3f} s; writing it in the background", steps_completed, blocked));
    return;
  }
  HybridCommunicator* hybrid = s.hybrid_comm();
  if (hybrid == nullptr) {
    std::optional<ckpt::SaveResult> saved;
    try {
      saved = ckpt::save_training_state(s.comm, folder, s.store, s.optimizer, meta, c.checkpoint.keep_last);
    } catch (const std::exception&) {
      throw_if_run_directory_moved(s, steps_completed);
      throw;
    }
    report_saved(s, run, *saved);
    return;
  }
  // Hybrid sharding: every group holds the whole state, sharded over its g ranks; group 0 saves it
  // as a checkpoint of g ranks (which resumes on any number, as any checkpoint does), and every
  // rank learns whether it could.
  std::optional<ckpt::SaveResult> saved;
  std::string error;
  if (hybrid->group_index() == 0) {
    try {
      saved = ckpt::save_training_state(hybrid->group(), folder, s.store, s.optimizer, meta, c.checkpoint.keep_last);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  float failed = error.empty() ? 0.0f : 1.0f;
  // The other groups wait out group 0's whole save, also past a stop request's grace period (the
  // collective timeout still bounds it).
  s.comm.all_reduce(TensorView{&failed, DType::kF32, Device::kCPU, Shape{1}}, ReduceOp::kSum)
      .wait(/*bounded_by_stop_grace=*/false);
  if (failed > 0.0f) throw_if_run_directory_moved(s, steps_completed);
  if (!error.empty()) throw_runtime_error("{}", error);
  if (failed > 0.0f) throw_runtime_error("checkpoint at step {} not saved (failed in rank group 0)", steps_completed);
  if (saved) report_saved(s, run, *saved);
}

void poll_checkpoint(TrainerState& s, RunProgress& run) {
  if (!s.async_saves || !s.async_saves->in_flight()) return;
  if (const std::optional<ckpt::SaveResult> r = s.async_saves->poll()) report_saved(s, run, *r);
}

void finish_checkpoint(TrainerState& s, RunProgress& run) {
  if (!s.async_saves) return;
  if (const std::optional<ckpt::SaveResult> r = s.async_saves->finish()) report_saved(s, run, *r);
}

void stop_after(TrainerState& s, RunProgress& run, int steps_completed) {
  TrainSummary& summary = run.summary;
  summary.stop_signal = stop_signal() != 0 ? stop_signal() : -1;
  summary.stopped_after_step = steps_completed;
  if (run.last_saved_step != steps_completed) save_checkpoint(s, run, steps_completed);
  finish_checkpoint(s, run);  // the stop's checkpoint is complete before the process exits
  summary.stop_checkpoint = run.last_saved_path;
  const std::string by = summary.stop_signal > 0 ? signal_name(summary.stop_signal) : "a signal to another rank";
  s.log({{"type", "stop"}, {"step", steps_completed}, {"signal", by}, {"checkpoint", run.last_saved_path}});
  s.progress.message(fmt::format("step {}: stopping on {}; resume with --resume latest", steps_completed, by));
}

}  // namespace zt
