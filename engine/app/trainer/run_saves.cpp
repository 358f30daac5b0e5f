// A run's saves (see run_checkpoints.h): every step's, an asynchronous one's commit at a later step
// boundary, and a stop request's.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>

#include "engine/app/checkpoint/checkpoint_folder.h"
#include "engine/app/checkpoint/checkpoint_model.h"
#include "engine/app/checkpoint/folder_lock.h"
#include "engine/app/checkpoint/optimizer_checkpoint.h"
#include "engine/app/trainer/earlier_outputs.h"
#include "engine/app/trainer/run_checkpoints.h"
#include "engine/app/trainer/run_identity.h"
#include "engine/base/core/build_info.h"
#include "engine/distributed/launch/signals.h"
#include "kernels/compute_backend.h"

namespace zt {

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
  run.save_lost = false;
  note_checkpoint_complete(s.config.checkpoint.folder_for(s.run_dir));
  const bool async = s.async_saves != nullptr;
  nlohmann::json record = {{"type", "checkpoint"},
                           {"step", r.step},
                           {"path", r.path},
                           {"seconds", r.seconds},
                           {"blocked_seconds", r.blocked_seconds},
                           {"async", async},
                           {"rank_bytes", r.rank_bytes},
                           {"total_bytes", r.total_bytes},
                           {"ranks", s.comm.world_size()},
                           {"rank_files", r.rank_files},
                           {"save_id", r.save_id}};
  if (!r.left_for_readers.empty()) record["left_for_readers"] = r.left_for_readers;
  s.log(record);
  // Sizes as every other table and ckpt inspect print them (binary units); both times to the same
  // places, so a blocked time never reads longer than the whole save it is part of.
  s.progress.message(fmt::format("step {}: saved checkpoint {} ({} in {} rank file(s)) in {:.3f} s{}", r.step, r.path,
                                 format_bytes(r.total_bytes), r.rank_files, r.seconds,
                                 async ? fmt::format(", training blocked {:.3f} s", r.blocked_seconds) : ""));
  if (!r.left_for_readers.empty()) {
    // Said at the save that first left each: the run may end before a save removes it.
    s.progress.message(fmt::format(
        "note: keep_last left {} in {} (another process was reading it; marked {}, a later save into the folder "
        "removes it)",
        fmt::join(r.left_for_readers, ", "), std::filesystem::path(r.path).parent_path().string(),
        ckpt::kPrunedMarker));
  }
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

// [Note: a save that loses its folder]
// A checkpoint folder moved or removed under a live run is made again, and the saves go on there
// (docs/checkpoint_format.md, "One run per folder"). One moved or removed while a save writes into
// it fails that save: its files, or the rename into place, find no folder. Ending the run for it
// would lose what the run trained since its last save, which went with the folder. So rank 0
// compares the folder with the one the save began in (SaveUnderWay), every rank learns the answer,
// and such a save is said lost (a `checkpoint_lost` record) rather than ending the run: a
// synchronous one is made again at once (nothing trained since: the same state), an asynchronous
// one, found at a later step, is made up by the next save, which makes the folder again, or by a
// save at the run's end (Trainer::run); a stop's is made again before the run ends (save_and_finish). Any other
// failure, and a second save lost in a row, still ends the run (exit 1).

constexpr std::string_view kSavedAgain = "saving it again into a new folder there";
constexpr std::string_view kNextSaveMakesIt =
    "training goes on, and the next save (at the latest the run's end) makes the folder again";

// The folder's identity: device, inode and birth time (0 where the file system keeps none: a
// folder removed and made again may take the same inode number); {} where its name reads as none,
// nullopt where it could not be read (a network file system's transient error says nothing of it:
// FolderLock::moved_now reads it so too).
std::optional<FolderIdentity> folder_identity(const std::string& folder) {
  struct statx st {};
  if (::statx(AT_FDCWD, folder.c_str(), 0, STATX_INO | STATX_BTIME, &st) != 0) {
    return errno == ENOENT || errno == ENOTDIR ? std::optional<FolderIdentity>(FolderIdentity{}) : std::nullopt;
  }
  const std::uint64_t born = (st.stx_mask & STATX_BTIME) != 0
                                 ? static_cast<std::uint64_t>(st.stx_btime.tv_sec) * 1000000000u + st.stx_btime.tv_nsec
                                 : 0;
  return FolderIdentity{makedev(st.stx_dev_major, st.stx_dev_minor), st.stx_ino, born};
}

// Collective, where the save under way failed on every rank: whether it failed because its
// checkpoint folder was moved or removed meanwhile (the run directory still in place). Where it
// did, the save is said lost (`then` says what follows) and the run's last save is the one before.
bool save_lost_with_its_folder(TrainerState& s, RunProgress& run, std::string_view then) {
  const RunProgress::SaveUnderWay& w = run.save_under_way;
  const std::string folder = s.config.checkpoint.folder_for(s.run_dir);
  std::string lost;
  if (s.root) {
    bool run_directory_moved = false;
    for (const ckpt::FolderLock* lock : s.locks) {
      run_directory_moved |= lock->kind() == ckpt::LockedFolder::kRunDirectory && lock->moved_now();
    }
    const std::optional<FolderIdentity> now = folder_identity(folder);
    if (!run_directory_moved && w.folder.inode != 0 && now && *now != w.folder) {
      lost = fmt::format(
          "checkpoint at step {} not saved: its folder {} was moved or removed while the save wrote into it (the "
          "checkpoints saved before went with it); {}",
          w.step, folder, then);
    }
  }
  lost = broadcast_string(s.comm, lost);
  if (lost.empty()) return false;
  s.progress.message("warning: " + lost);
  // Rank 0's id of the lost save (its checkpoint_started record's), before the lineage goes back.
  s.log({{"type", "checkpoint_lost"}, {"step", w.step}, {"save_id", run.last_save_id}, {"text", lost}});
  run.last_saved_step = w.previous_saved_step;
  run.last_save_id = w.previous_save_id;
  run.folder_moved_said = true;  // said: the next save's own warning would repeat it
  run.save_lost = true;
  return true;
}

// One save of the state after `steps_completed` steps (started, where asynchronous); false where
// a synchronous one was lost with its folder, said.
bool save_once(TrainerState& s, RunProgress& run, int steps_completed) {
  const RunConfig& c = s.config;
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
  // What deterministic mode's bits follow beside the config: a resume on other kernels says so.
  meta.extra[run_kernels_key(c.device)] = run_kernels(c);
  if (!run.special_token_ids.empty()) meta.extra["special_token_ids"] = run.special_token_ids;
  if (!run.init_from_path.empty()) meta.extra["init_from_path"] = run.init_from_path;
  // Where the run's tokenizer lies for an export or a sample of this checkpoint, wherever
  // checkpoint.dir put it and whichever directory those commands run in (ckpt::run_directory_of).
  std::error_code ec;
  const std::filesystem::path run_dir = std::filesystem::weakly_canonical(std::filesystem::absolute(s.run_dir), ec);
  if (!ec) meta.extra["run_dir"] = run_dir.string();
  run.save_under_way = {steps_completed, run.last_saved_step, run.last_save_id, {}};
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
      // The folder the save begins in (made now where it was removed since the last save, as the
      // save would make it), to tell a failure for want of it from another.
      std::error_code made;
      std::filesystem::create_directories(folder, made);
      run.save_under_way.folder = folder_identity(folder).value_or(FolderIdentity{});
    } catch (const std::exception& e) {
      refusal = fmt::format("checkpoint at step {} not saved: {}", steps_completed, e.what());
    }
  }
  run.fresh_folder = false;
  refusal = broadcast_string(s.comm, refusal);
  if (!refusal.empty()) throw_runtime_error("{}", refusal);
  run.last_saved_step = steps_completed;
  if (s.async_saves) {
    const double blocked =
        ckpt::start_training_state_save(*s.async_saves, folder, s.store, s.optimizer, meta, c.checkpoint.keep_last);
    s.log({{"type", "checkpoint_started"},
           {"step", steps_completed},
           {"blocked_seconds", blocked},
           {"save_id", ckpt::extra_string(meta.extra, "save_id")}});
    s.progress.message(
        fmt::format("step {}: checkpoint staged in {:.3f} s; writing it in the background", steps_completed, blocked));
    return true;
  }
  HybridCommunicator* hybrid = s.hybrid_comm();
  if (hybrid == nullptr) {
    std::optional<ckpt::SaveResult> saved;
    try {
      saved = ckpt::save_training_state(s.comm, folder, s.store, s.optimizer, meta, c.checkpoint.keep_last);
    } catch (const std::exception&) {
      if (save_lost_with_its_folder(s, run, kSavedAgain)) return false;
      throw_if_run_directory_moved(s, steps_completed);
      throw;
    }
    report_saved(s, run, *saved);
    return true;
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
  if (failed > 0.0f) {
    if (save_lost_with_its_folder(s, run, kSavedAgain)) return false;
    throw_if_run_directory_moved(s, steps_completed);
  } else {
    run.save_lost = false;  // on every rank: group 0 alone reports the save (report_saved)
  }
  if (!error.empty()) throw_runtime_error("{}", error);
  if (failed > 0.0f) throw_runtime_error("checkpoint at step {} not saved (failed in rank group 0)", steps_completed);
  if (saved) report_saved(s, run, *saved);
  return true;
}

}  // namespace

void save_checkpoint(TrainerState& s, RunProgress& run, int steps_completed) {
  // A rank stopped in the save (a peer died in it) says so, not the last step's micro-batch.
  s.set_comm_context(fmt::format("the checkpoint save of step {}", steps_completed));
  // One save in flight at most: the previous one concluded first, so that one lost with its folder
  // leaves the lineage (the last save id) this one continues.
  finish_checkpoint(s, run);
  if (!save_once(s, run, steps_completed) && !save_once(s, run, steps_completed)) {
    throw_runtime_error("checkpoint at step {} not saved: its folder was moved or removed during two saves in a row",
                        steps_completed);
  }
}

void save_and_finish(TrainerState& s, RunProgress& run, int steps_completed) {
  finish_checkpoint(s, run);  // a save in flight: this step's, or an earlier one
  // An asynchronous save of this step lost with its folder as it concluded: made again (nothing
  // trained since), once.
  for (int attempt = 0; attempt < 2 && run.last_saved_step != steps_completed; ++attempt) {
    save_checkpoint(s, run, steps_completed);
    finish_checkpoint(s, run);
  }
  if (run.last_saved_step != steps_completed) {
    throw_runtime_error("checkpoint at step {} not saved: its folder was moved or removed during two saves in a row",
                        steps_completed);
  }
}

namespace {

// An asynchronous save's conclusion (`conclude`: a poll, or waiting for it): reported where it
// committed; where it failed on every rank, lost with its folder (the first in a row) or thrown.
void conclude_async_save(TrainerState& s, RunProgress& run,
                         const std::function<std::optional<ckpt::SaveResult>()>& conclude) {
  std::optional<ckpt::SaveResult> saved;
  try {
    saved = conclude();
  } catch (const std::exception&) {
    const bool lost_before = run.save_lost;  // every rank's: set and cleared as all learn the outcomes
    if (!save_lost_with_its_folder(s, run, kNextSaveMakesIt)) throw;
    if (lost_before) {
      throw_runtime_error("checkpoint at step {} not saved: its folder was moved or removed during two saves in a row",
                          run.save_under_way.step);
    }
  }
  if (saved) report_saved(s, run, *saved);
}

}  // namespace

void poll_checkpoint(TrainerState& s, RunProgress& run) {
  if (!s.async_saves || !s.async_saves->in_flight()) return;
  conclude_async_save(s, run, [&] { return s.async_saves->poll(); });
}

void finish_checkpoint(TrainerState& s, RunProgress& run) {
  if (!s.async_saves || !s.async_saves->in_flight()) return;
  conclude_async_save(s, run, [&] { return s.async_saves->finish(); });
}

void stop_after(TrainerState& s, RunProgress& run, int steps_completed) {
  TrainSummary& summary = run.summary;
  summary.stop_signal = stop_signal() != 0 ? stop_signal() : -1;
  summary.stopped_after_step = steps_completed;
  save_and_finish(s, run, steps_completed);  // the stop's checkpoint is complete before the process exits
  summary.stop_checkpoint = run.last_saved_path;
  // Every rank, past save_and_finish, knows the step saved (a rank outside a hybrid job's first
  // group reports no save of its own: its last path is another's, or none).
  note_stop_checkpoint_saved(steps_completed, s.config.checkpoint.folder_for(s.run_dir));
  const std::string by = summary.stop_signal > 0 ? signal_name(summary.stop_signal) : "a signal to another rank";
  s.log({{"type", "stop"}, {"step", steps_completed}, {"signal", by}, {"checkpoint", run.last_saved_path}});
  s.progress.message(fmt::format("step {}: stopping on {}; resume with --resume latest", steps_completed, by));
}

}  // namespace zt
