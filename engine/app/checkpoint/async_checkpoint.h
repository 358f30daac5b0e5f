// Saving a checkpoint while training goes on (checkpoint.async): the step's state is copied into a
// host staging buffer that holds this rank's file exactly as it will lie on disk (page-locked on
// CUDA, so the copy from the GPU runs at full speed), and a background thread checksums, writes and
// fsyncs it while the next steps run; then rank 0's commit (manifest, rename, `latest`, keep-last,
// with their fsyncs) runs in the background too. The collectives of a save (rank 0's temporary
// directory, the checksums' all-gather, the commit's outcome) stay on the training thread, so the
// background thread never touches a communicator: at each step boundary while a save is in
// flight, one small all-gather says whether every rank's background work is done, and the save
// moves on to its next part there.
//
// [Note: asynchronous saves are as safe as synchronous ones]
// The files go to the same temporary directory and are committed by the same manifest-last rename
// as a synchronous save (checkpoint_writer.h), so a kill at any moment loses at most the save in
// flight and `latest` never names an incomplete checkpoint. At most one save is in flight: the
// caller finishes one (waiting for it) before it starts the next. A save whose write or commit fails
// throws on every rank at the step boundary that finishes it, as a synchronous save throws at once.
//
// Under hybrid sharding the files are those of one group of ranks (group 0, a checkpoint of g
// ranks, as a synchronous hybrid save writes): the save's own collectives run among the writers,
// the step boundaries' polls and every outcome among all ranks, so a failed write or commit still
// throws everywhere, and the ranks that write nothing hold no staging.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "engine/app/checkpoint/checkpoint_writer.h"
#include "engine/base/core/buffer.h"
#include "engine/base/core/memory_tracker.h"
#include "engine/distributed/comm/communicator.h"

namespace zt::ckpt {

// Bytes of rank `rank`'s file of a `world_size`-rank checkpoint of `table` (its staging buffer).
std::int64_t rank_file_bytes(const ParamTable& table, int world_size, int rank);

// dst = src for fp32 views, src on the host or a device, dst on the host, complete on return.
using StateCopy = std::function<void(TensorView dst, TensorView src)>;

// This rank's file image in `image` (rank_file_bytes long): each segment's fp32 values at its file
// offset, taken from `source` with `copy`.
void stage_rank_file(const ParamTable& table, int world_size, int rank, const OptimizerStateSource& source,
                     const StateCopy& copy, char* image);
// Writes an image as rank `rank`'s file in temp_dir, fsynced, with its chunk checksums.
RankFileWritten write_rank_image(const std::string& temp_dir, int rank, const char* image, std::int64_t bytes);

class AsyncCheckpointer {
 public:
  // `world`: every rank of the run (the polls and outcomes); `writers`: the communicator of the
  // ranks whose files make the checkpoint (`world` itself, or under hybrid sharding group 0's
  // group; null on a rank that writes none). The staging buffer (`staging_bytes`: this rank's
  // file) is allocated and touched now, in host memory ctx's device copies into
  // (ops::allocate_host), and charged to staging_tracker().
  AsyncCheckpointer(Communicator& world, Communicator* writers, const ExecContext& ctx, std::int64_t staging_bytes);
  // Waits for the background work of a save never finished (an exception ended the run): a save
  // still writing stays uncommitted, as a killed one would (its temporary directory is removed by
  // the next save of the same step); one whose commit had started on rank 0 is committed, with
  // no rank told. Either way `latest` names a complete checkpoint.
  ~AsyncCheckpointer();
  AsyncCheckpointer(const AsyncCheckpointer&) = delete;
  AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;

  // Collective, with no save in flight (finish() the last one first, so that its result is not
  // lost should this one fail to start): stages this rank's state from `source` (read with
  // `copy`) for step meta.position.step and starts writing it in the background; returns the
  // seconds the caller was blocked. `table` must outlive the save.
  double start(const std::string& folder, const ParamTable& table, const OptimizerStateSource& source,
               const StateCopy& copy, const CheckpointMeta& meta, int keep_last);
  // Collective, called by every rank at the same points (step boundaries) while in_flight():
  // moves the save in flight on where every rank's background work is done (files written: rank
  // 0's commit starts; commit done: the result), else returns nothing at once.
  std::optional<SaveResult> poll();
  // Collective: waits for the save in flight (if any) and commits it.
  std::optional<SaveResult> finish();

  bool in_flight() const { return pending_.has_value(); }
  const MemoryTracker& staging_tracker() const { return tracker_; }

 private:
  // A save in flight: its rank files being written, then rank 0's commit.
  enum class Phase { kWriting, kCommitting };
  struct Pending {
    std::string folder, temp;
    const ParamTable* table = nullptr;
    CheckpointMeta meta;
    int keep_last = 0;
    std::chrono::steady_clock::time_point started;
    Phase phase = Phase::kWriting;
    GatheredFiles files;  // once every file is written
  };
  // Collective: whether every rank's worker has finished the current phase (one all-gather).
  bool all_ranks_done();
  // Collective: completes the current phase, waiting for this rank's worker: after the writes,
  // the checksums' all-gather and rank 0's commit started in the background (nothing returned);
  // after the commit, the outcome. Throws on every rank when the save failed.
  std::optional<SaveResult> advance();
  // Runs `work` on the worker thread at the lowest CPU priority, setting done_ after it.
  void run_in_background(std::function<void()> work);
  // The caller's time since t0 added to the save's blocked time, which a completed result carries.
  std::optional<SaveResult> charged(std::chrono::steady_clock::time_point t0, std::optional<SaveResult> r);

  // Collective over world_ where the writers are not the world (hybrid sharding): whether every
  // rank says `ok`; the world's own answer otherwise (every rank already knows it).
  bool all_ranks_agree(bool ok);
  // The writers' conclusion of the save (their result, or their failure thrown on every rank).
  SaveResult conclude(const Pending& done);

  Communicator& world_;
  Communicator* files_;    // the writers' communicator, or null
  MemoryTracker tracker_;  // first: charged by the staging buffer until the end
  Buffer staging_;
  std::optional<Pending> pending_;
  // The training thread's time in the save in flight, in the clock's ticks: its intervals lie
  // apart within the save's, so summed exactly they never exceed the save's own time (as doubles,
  // each rounded, they did by a microsecond, and a test saw blocked > seconds).
  std::chrono::steady_clock::duration blocked_{};
  std::chrono::steady_clock::time_point concluded_started_{};  // the started of the save advance() concluded
  // The worker (this rank's write, then rank 0's commit) and what it leaves, read after a join.
  std::thread worker_;
  std::atomic<bool> done_{false};
  RankFileWritten written_;
  std::string error_;
  CommitResult commit_;
};

}  // namespace zt::ckpt
