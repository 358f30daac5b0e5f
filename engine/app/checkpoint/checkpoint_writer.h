// Saving a sharded checkpoint. Every rank writes its own file (its N-way slice of each unit's fp32
// master, exp_avg and exp_avg_sq, at offsets it computes alone) straight from its optimizer
// buffers into a temporary directory, fsyncs it and checksums it on the way; one all-gather of
// the per-chunk checksums lets rank 0 write the manifest, rename the directory into place, update
// `latest` and apply keep-last. Nothing is gathered to rank 0 but those checksums.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/app/checkpoint/checkpoint_manifest.h"
#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/sharding/shard_layout.h"

namespace zt::ckpt {

// What this rank holds: its optimizer layout (N-way shards, or whole units at ZeRO stage 0, where
// every rank holds everything and still writes only its N-way slice) and, per state kind and unit,
// an fp32 view whose element 0 is layout.unit(u).begin.
struct OptimizerStateSource {
  const ShardLayout* layout = nullptr;
  std::function<TensorView(StateKind, int unit)> state;
};

// Everything the manifest records besides the table and the files.
struct CheckpointMeta {
  TrainingPosition position;
  int zero_stage = 0;
  std::string param_dtype = "f32";
  nlohmann::json model = nlohmann::json::object();
  nlohmann::json config = nlohmann::json::object();
  nlohmann::json extra = nlohmann::json::object();
};

struct SaveResult {
  std::int64_t step = 0;
  std::string path;              // the complete step_XXXXXXXX directory
  std::int64_t rank_bytes = 0;   // this rank's file
  std::int64_t total_bytes = 0;  // all rank files
  int rank_files = 0;            // the saving ranks' (a hybrid run's: one group's)
  double seconds = 0.0;          // from the save's start to its commit
  double blocked_seconds = 0.0;  // of those, the training thread's (all of them unless asynchronous)
  std::string warning;           // rank 0: saved, but `latest` or keep-last failed after it (say so, go on)
  // rank 0: older checkpoints keep-last left in place this save, another process reading them
  // (marked PRUNED: a later save removes them).
  std::vector<std::string> left_for_readers;
  std::string save_id;  // the meta's extra.save_id, where it has one (rank 0's, which it wrote)
};

// Collective: every rank of `comm` calls it with the same folder, table and meta. Throws
// RuntimeError on every rank when any rank's write or the commit failed (the temporary directory
// is then removed and the previous checkpoints and `latest` are untouched).
SaveResult save_checkpoint(Communicator& comm, const std::string& folder, const ParamTable& table,
                           const OptimizerStateSource& source, const CheckpointMeta& meta, int keep_last);

// The pieces save_checkpoint is made of, usable without a communicator (tests simulate N ranks in
// one process with them).
struct RankFileWritten {
  std::int64_t bytes = 0;
  std::vector<std::uint32_t> chunk_crc32;
};
// save_checkpoint's collective parts, which an asynchronous save (async_checkpoint.h) runs apart,
// its rank file and rank 0's commit_checkpoint in the background between them. begin_save: rank 0
// creates the step's temporary directory (returned) and every rank learns whether it could
// (throws on every rank when not). gather_rank_files: every rank's file written (`written`) or
// failed, and its checksums. conclude_save: every rank learns rank 0's commit outcome (`error`
// on rank 0: its commit's; elsewhere, or when a write failed: this rank's own error) and throws
// on every rank when anything failed, as save_checkpoint does; the result's times are the caller's.
std::string begin_save(Communicator& comm, const std::string& folder, std::int64_t step);
struct GatheredFiles {
  std::vector<RankFileWritten> files;
  std::vector<std::int32_t> write_status;  // per rank, 0 = written
  std::int64_t own_bytes = 0;
  bool all_written() const;
};
GatheredFiles gather_rank_files(Communicator& comm, const ParamTable& table, const RankFileWritten& written,
                                bool failed);
// What rank 0's commit of a checkpoint says (commit_checkpoint, below).
struct CommitResult {
  std::string path;
  std::string warning;
  std::vector<std::string> left_for_readers;  // SaveResult's
};
// Rank 0's commit_checkpoint of the gathered files: what it says (its warning, the checkpoints
// left for readers), or its failure in `error`.
CommitResult commit_gathered(const std::string& folder, const std::string& temp, const ParamTable& table,
                             const CheckpointMeta& meta, const GatheredFiles& g, int keep_last, std::string& error);
SaveResult conclude_save(Communicator& comm, const std::string& folder, const std::string& temp,
                         const CheckpointMeta& meta, const GatheredFiles& g, const std::string& error,
                         const CommitResult& commit);
// Test hook: ZT_TEST_CHECKPOINT_PAUSE_MS holds a save between its rank file and its commit, a
// window for kill -9 (docs/checkpoint_format.md).
void pause_for_tests();

std::string temp_dir_for(const std::string& folder, std::int64_t step);
// The fp32 values of `seg` (a non-empty segment of rank `rank` of `world_size`'s file) in what
// `source` holds, checked to lie inside it.
TensorView segment_state(const OptimizerStateSource& source, const FileSegment& seg, int world_size, int rank);
// Creates a fresh temporary directory for the step (removing one a killed save left).
void prepare_temp_dir(const std::string& temp_dir);
// Writes rank `rank` of `world_size`'s file into temp_dir, fsynced.
RankFileWritten write_rank_file(const std::string& temp_dir, const ParamTable& table, int world_size, int rank,
                                const OptimizerStateSource& source);
// Rank 0's part once every file is written: manifest, fsyncs, rename into place, `latest`, keep-last.
// Throws when the checkpoint is not complete; a failure of `latest` or keep-last after the rename
// leaves it complete and comes back as the warning.
CommitResult commit_checkpoint(const std::string& folder, const std::string& temp_dir, const ParamTable& table,
                               const CheckpointMeta& meta, int world_size, const std::vector<RankFileWritten>& files,
                               int keep_last);

}  // namespace zt::ckpt
