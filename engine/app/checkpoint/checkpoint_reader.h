// Reading a sharded checkpoint: open (manifest + every rank file present at its recorded size),
// ranged reads of any unit's state with the checksums of the chunks read verified, full
// verification, and loading this rank's optimizer shards under any layout (resharding N -> M).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/app/checkpoint/checkpoint_manifest.h"
#include "engine/app/checkpoint/durable_file.h"
#include "engine/distributed/sharding/shard_layout.h"

namespace zt::ckpt {

class CheckpointReader {
 public:
  // `dir` is a step_XXXXXXXX directory. Throws InputError naming the file for a missing or
  // malformed manifest and for a missing, truncated or oversized rank file.
  explicit CheckpointReader(std::string dir);

  const std::string& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }

  // Elements [begin, end) of a unit's state (fp32) into out, from the files that hold them. Each
  // checksum chunk touched is read whole and checked (InputError naming the file and byte range),
  // so the bytes read are the range plus at most one chunk at each end of each file's piece.
  void read(StateKind kind, int unit, std::int64_t begin, std::int64_t end, float* out) const;
  // The same as pieces of files, to batch many reads: plan appends them, execute reads them in
  // file order (so each checksum chunk is read at most once however the pieces interleave).
  struct Piece {
    int file = 0;
    std::int64_t lo = 0, hi = 0;  // bytes of the file
    char* out = nullptr;
  };
  void plan_read(StateKind kind, int unit, std::int64_t begin, std::int64_t end, float* out,
                 std::vector<Piece>& plan) const;
  void execute(std::vector<Piece> plan) const;
  // Reads every rank file whole; InputError naming the first file whose chunks or crc32 disagree.
  void verify_checksums() const;
  // The same for one rank file (index into manifest().files).
  void verify_file(int file) const;
  // Bytes read from rank files so far (what resharding reads; tests bound it).
  std::int64_t bytes_read() const { return bytes_read_; }

 private:
  void read_file_range(int file, std::int64_t lo, std::int64_t hi, char* out) const;
  const FileHandle& handle(int file) const;

  std::string dir_;
  FileHandle held_;  // the directory held for reading: a live run's keep-last leaves it (apply_keep_last)
  Manifest manifest_;
  mutable std::vector<FileHandle> handles_;
  mutable std::vector<char> chunk_;  // the last verified chunk (one chunk of memory, whatever the model)
  mutable int cached_file_ = -1;
  mutable std::int64_t cached_chunk_ = -1;
  mutable std::int64_t bytes_read_ = 0;
};

// Where this rank's optimizer state goes: its layout (the M-way shards, or whole units at ZeRO
// stage 0) and, per state kind and unit, an fp32 view whose element 0 is layout.unit(u).begin.
struct OptimizerStateTarget {
  const ShardLayout* layout = nullptr;
  std::function<TensorView(StateKind, int unit)> state;
};

// Fills this rank's shards of master, exp_avg and exp_avg_sq from the checkpoint, reading only the
// byte ranges they overlap. Elements of a view past the unit's real end (padding) are zeroed.
// InputError when the checkpoint's parameter table differs from `table` (another model).
void load_optimizer_state(const CheckpointReader& reader, const ParamTable& table, const OptimizerStateTarget& target);

}  // namespace zt::ckpt
