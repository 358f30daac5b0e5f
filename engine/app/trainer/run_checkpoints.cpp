// Starting, saving and stopping a run around its checkpoints (see the header).
#include "engine/app/trainer/run_checkpoints.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <optional>
#include <span>
#include <vector>

#include "engine/app/checkpoint/checkpoint_folder.h"
#include "engine/app/checkpoint/checkpoint_model.h"
#include "engine/app/checkpoint/folder_lock.h"
#include "engine/app/checkpoint/optimizer_checkpoint.h"
#include "engine/app/io/output_file.h"
#include "engine/app/io/pretrained.h"
#include "engine/app/trainer/data_changes.h"
#include "engine/app/trainer/earlier_outputs.h"
#include "engine/app/trainer/evaluation.h"
#include "engine/app/trainer/model_setup.h"
#include "engine/app/trainer/resume.h"
#include "engine/app/trainer/resume_changes.h"
#include "engine/app/trainer/run_identity.h"
#include "engine/app/trainer/start_checks.h"
#include "engine/distributed/launch/signals.h"

namespace zt {

ResumeJudgement judge_resume(const std::string& checkpoint, const ckpt::Manifest& m, const RunConfig& c,
                             const nlohmann::json& data_files, bool allow_config_change) {
  if (m.position.step > c.train.max_steps) {
    throw_input_error(
        "--resume {}: the checkpoint is at step {}, past train.max_steps = {}: there is nothing to train (raise "
        "train.max_steps to continue it)",
        checkpoint, m.position.step, c.train.max_steps);
  }
  ResumeJudgement j;
  // Checkpoints from before data identities were recorded have none to compare.
  if (m.extra.contains("data_identity")) {
    j.data_changed = data_changes(m.extra["data_identity"], data_files);
    j.evaluation_changed = evaluation_data_changes(m.extra["data_identity"], data_files);
    j.vocabulary_changed = vocabulary_changed(m.extra["data_identity"], data_files);
  }
  j.changes = check_resume_fits(checkpoint, m.model, m.config, m.data_parallel_ranks(), m.position.step, c,
                                allow_config_change, j.data_changed);
  if (const std::string windows = evaluation_window_change(m.config, c); !windows.empty()) {
    j.evaluation_changed.push_back(windows);
  }
  j.choice_changed = choice_file_change(m.config, c);
  return j;
}

RunProgress start_run(TrainerState& s, const std::string& resume_checkpoint, bool allow_config_change,
                      const std::vector<std::string>& unusable) {
  const RunConfig& c = s.config;
  RunProgress run;
  run.fresh_folder = resume_checkpoint.empty();  // its first save sets an earlier run's aside
  if (resume_checkpoint.empty() && !c.train.init_from.empty()) {
    const std::int64_t bytes = load_pretrained_parameters(c.train.init_from, s.store, s.optimizer, s.tracker, s.comm);
    run.special_token_ids = read_pretrained_model(c.train.init_from).special_token_ids;
    start_fresh_log(s);
    std::error_code ec;
    run.init_from_path = std::filesystem::weakly_canonical(std::filesystem::absolute(c.train.init_from), ec).string();
    // Every rank's bytes (each reads its own share), for the record rank 0 writes.
    const std::vector<std::int64_t> by_rank = all_gather_values<std::int64_t>(s.comm, std::span(&bytes, 1));
    s.log({{"type", "init_from"}, {"path", c.train.init_from}, {"bytes_read", bytes}, {"bytes_read_by_rank", by_rank}});
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
  ResumeJudgement judged;
  on_every_rank(s.comm, [&] {
    judged = judge_resume(resume_checkpoint, opened.emplace(resume_checkpoint).manifest(), c, s.data_files,
                          allow_config_change);
  });
  auto& [changes, data_changed, evaluation_changed, vocabulary, choice_changed] = judged;
  const ckpt::CheckpointReader& reader = *opened;
  const ckpt::Manifest& m = reader.manifest();
  if (!changes.empty()) {
    s.progress.message(
        fmt::format("resume: continuing with a changed config (--allow-config-change): {}", fmt::join(changes, "; ")));
  }
  // The data position is a count of windows (as for a train.seq_len change): in llm.c's walk
  // through the files, one added, removed or resized before it moves where that count lands.
  if (!data_changed.empty() && c.data.order == "sequential") {
    s.progress.message(
        "note: resume: the data position is kept as a count of windows into the training files in order: where a "
        "file before it was added, removed or resized, the sequential order rereads or skips windows this epoch");
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
  if (!choice_changed.empty()) s.progress.message(fmt::format("note: resume: {}", choice_changed));
  const std::vector<std::string> bits = deterministic_bit_changes(
      m.config, m.data_parallel_ranks(), c, ckpt::extra_string(m.extra, run_kernels_key(c.device)), run_kernels(c));
  if (!bits.empty()) {
    s.progress.message(fmt::format(
        "note: resume: {}: the run continues the saved one's trajectory, but not bit for bit", fmt::join(bits, "; ")));
  }
  // Each rank reads its own shards: one rank's damaged file (a NaN in its shard) ends every rank at
  // once with that rank's line, agreed before the publish (a collective), where the others waited
  // for it, trained a step's start and were stopped by the launcher with a second, misleading line.
  on_every_rank(s.comm, [&] { ckpt::load_training_state(reader, s.store, s.optimizer); });
  s.store.publish_updated_params();  // the first acquire waits for it
  run.start_step = static_cast<int>(m.position.step);
  // A stop before the first step (in an evaluation the saved run left) saves nothing more where the
  // checkpoint is in this run's folder; one from elsewhere is saved here, for --resume latest.
  std::error_code same_ec;
  if (std::filesystem::equivalent(std::filesystem::path(resume_checkpoint).parent_path(),
                                  c.checkpoint.folder_for(s.run_dir), same_ec)) {
    run.last_saved_step = run.start_step;
    run.last_saved_path = resume_checkpoint;
    note_checkpoint_complete(c.checkpoint.folder_for(s.run_dir));
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
  // The checkpoints past the one resumed (a rollback's) or off its lineage go aside before the log
  // is cut to its step and the final weights go aside: a kill or a failure in between then leaves
  // `latest` at the checkpoint resumed, which a `--resume latest` continues (cutting the log
  // itself), not a log cut to a step whose later checkpoints still stand, which it resumed past
  // and took for another run's log (those steps' records lost). Said as they move (a failure
  // below, a full disk's, then leaves the move said, not a `latest` silently re-pointed), and
  // logged below, once the log is known to be this run's. Rank 0 holds the folder's lock.
  const std::string folder = c.checkpoint.folder_for(s.run_dir);
  std::vector<std::string> damaged, others;
  ckpt::SupersededUsage superseded;  // what superseded/ holds once they moved, said and then logged
  const std::string damaged_why = "damaged: not usable, as the resume said above";
  const std::string others_why = fmt::format(
      "past step {}, or not on the lineage of the checkpoint resumed: another trajectory's, which keep_last and the "
      "folder's fallback would take for this run's",
      run.start_step);
  if (s.root && writes_checkpoints(c)) {
    for (std::string& name : ckpt::set_aside_other_trajectories(folder, run.start_step, m.lineage_id(), previous_id)) {
      const bool fell_back_past = std::find(unusable.begin(), unusable.end(), name) != unusable.end();
      (fell_back_past ? damaged : others).push_back(std::move(name));
    }
    if (!damaged.empty()) superseded = say_set_aside(s, folder, damaged, damaged_why);
    if (!others.empty()) superseded = say_set_aside(s, folder, others, others_why);
  }
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
  if (!choice_changed.empty()) evaluation_changed.push_back(choice_changed);  // in the record's evaluation_data
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
  if (s.root && writes_checkpoints(c)) {  // set aside (and said) above, before the log was cut
    if (!damaged.empty()) log_set_aside(s, damaged, run.start_step, damaged_why, superseded);
    if (!others.empty()) log_set_aside(s, others, run.start_step, others_why, superseded);
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

}  // namespace zt
