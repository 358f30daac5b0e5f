// Checkpoint saving: rank files written in place from the optimizer's buffers, then rank 0's commit.
#include "engine/app/checkpoint/checkpoint_writer.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "engine/app/checkpoint/checkpoint_folder.h"
#include "engine/app/checkpoint/durable_file.h"
#include "engine/app/checkpoint/folder_lock.h"
#include "engine/base/core/check.h"

namespace zt::ckpt {

namespace fs = std::filesystem;

std::string temp_dir_for(const std::string& folder, std::int64_t step) {
  return (fs::path(folder) / (std::string(kTempPrefix) + step_dir_name(step))).string();
}

void prepare_temp_dir(const std::string& temp_dir) {
  std::error_code ec;
  fs::create_directories(fs::path(temp_dir).parent_path(), ec);
  fs::remove_all(temp_dir, ec);
  if (!fs::create_directory(temp_dir, ec) || ec) {
    throw_runtime_error("cannot create checkpoint directory '{}': {}", temp_dir, ec ? ec.message() : "exists");
  }
}

TensorView segment_state(const OptimizerStateSource& source, const FileSegment& seg, int world_size, int rank) {
  // The N-way slice must lie inside what this rank holds (its shard, or the whole unit).
  const UnitShard& held = source.layout->unit(seg.unit);
  ZT_CHECK(seg.begin >= held.begin && seg.end <= held.end,
           "rank {} of {} holds [{}, {}) of unit {} but must save [{}, {})", rank, world_size, held.begin, held.end,
           seg.unit, seg.begin, seg.end);
  const TensorView view = source.state(seg.kind, seg.unit);
  ZT_CHECK(view.numel() >= seg.end - held.begin, "state view of unit {} too small", seg.unit);
  return view.slice(seg.begin - held.begin, seg.end - seg.begin);
}

RankFileWritten write_rank_file(const std::string& temp_dir, const ParamTable& table, int world_size, int rank,
                                const OptimizerStateSource& source) {
  const std::vector<FileSegment> segments = rank_file_segments(table, world_size, rank);
  RankFileWritten out;
  out.bytes = segments_bytes(segments);
  out.chunk_crc32.assign(static_cast<std::size_t>((out.bytes + kChecksumChunkBytes - 1) / kChecksumChunkBytes), 0u);
  FileHandle file = FileHandle::create((fs::path(temp_dir) / rank_file_name(rank)).string());
  for (const FileSegment& seg : segments) {
    if (seg.end == seg.begin) continue;  // a rank past the unit's end holds only padding
    const char* p = static_cast<const char*>(segment_state(source, seg, world_size, rank).data);
    // Written straight from the optimizer's memory: no staging buffer. Pieces never straddle a
    // checksum chunk, so each chunk's crc is accumulated in file order.
    std::int64_t pos = seg.offset, remaining = (seg.end - seg.begin) * 4;
    while (remaining > 0) {
      const std::int64_t c = pos / kChecksumChunkBytes;
      const std::int64_t piece = std::min(remaining, (c + 1) * kChecksumChunkBytes - pos);
      std::uint32_t& crc = out.chunk_crc32[static_cast<std::size_t>(c)];
      crc = crc32_update(crc, p, piece);
      file.write_at(p, piece, pos);
      p += piece;
      pos += piece;
      remaining -= piece;
    }
  }
  file.sync();
  file.close();
  return out;
}

CommitResult commit_checkpoint(const std::string& folder, const std::string& temp_dir, const ParamTable& table,
                               const CheckpointMeta& meta, int world_size, const std::vector<RankFileWritten>& files,
                               int keep_last) {
  Manifest m;
  m.format_version = format_version_for(meta.model);
  m.position = meta.position;
  m.world_size = world_size;
  m.zero_stage = meta.zero_stage;
  m.param_dtype = meta.param_dtype;
  m.model = meta.model;
  m.config = meta.config;
  m.extra = meta.extra;
  m.table = table;
  ZT_CHECK(files.size() == static_cast<std::size_t>(world_size));
  for (int r = 0; r < world_size; ++r) {
    RankFile f;
    f.name = rank_file_name(r);
    f.rank = r;
    f.segments = rank_file_segments(table, world_size, r);
    f.bytes = segments_bytes(f.segments);
    f.chunk_crc32 = files[static_cast<std::size_t>(r)].chunk_crc32;
    ZT_CHECK(f.bytes == files[static_cast<std::size_t>(r)].bytes, "rank {} wrote {} bytes, expected {}", r,
             files[static_cast<std::size_t>(r)].bytes, f.bytes);
    for (std::size_t c = 0; c < f.chunk_crc32.size(); ++c) {
      const std::int64_t len =
          std::min(kChecksumChunkBytes, f.bytes - static_cast<std::int64_t>(c) * kChecksumChunkBytes);
      f.crc32 = crc32_concat(f.crc32, f.chunk_crc32[c], len);
    }
    m.files.push_back(std::move(f));
  }
  // The manifest is written last (its directory fsync also makes the rank files' entries
  // durable): a directory without one is never taken for a checkpoint.
  write_file_atomically((fs::path(temp_dir) / std::string(kManifestName)).string(), m.to_text());
  const fs::path final_dir = fs::path(folder) / step_dir_name(meta.position.step);
  check_folder_lock_still_held(folder);  // nothing lands in a folder another run has taken over
  if (fs::exists(final_dir)) remove_checkpoint_dir(final_dir.string());  // the same step saved again
  std::error_code ec;
  fs::rename(temp_dir, final_dir, ec);
  if (ec) throw_runtime_error("cannot rename '{}' to '{}': {}", temp_dir, final_dir.string(), ec.message());
  sync_dir(folder);
  // From here the checkpoint is complete and durable: what follows can fail without unsaving it.
  CommitResult result{final_dir.string(), "", {}};
  // Where `latest` cannot be updated (a full disk, latest.tmp blocked, a folder in its place),
  // resolution takes the newer checkpoints only through their chain of saves from the one `latest`
  // names: keep-last would cut that chain. So the stale pointer is removed (resolution then takes
  // the newest valid checkpoint) and keep-last goes on, or, where it names a checkpoint and cannot
  // be removed either, keep-last waits for a save that can update it. A pointer stuck for good
  // would otherwise keep every save until the disk filled.
  bool prune = true;
  try {
    write_latest(folder, final_dir.filename().string());
  } catch (const std::exception& e) {
    const fs::path latest = fs::path(folder) / kLatestName;
    std::string named = read_latest(folder);
    std::error_code removed_ec;
    if (!named.empty() && fs::remove(latest, removed_ec)) named.clear();
    prune = named.empty();
    result.warning = fmt::format(
        "checkpoint {} is saved, but '{}' could not be updated ({}): {}; --resume latest takes the newest "
        "checkpoint all the same, or resume from {} by path",
        final_dir.string(), latest.string(), e.what(),
        prune ? "it no longer names a checkpoint (older ones are removed as keep_last says)"
              : fmt::format("it still names {} and cannot be removed (older checkpoints are kept until it can be "
                            "updated)",
                            named),
        final_dir.string());
  }
  if (prune) {
    try {
      apply_keep_last(folder, keep_last, final_dir.string(), result.left_for_readers);
    } catch (const std::exception& e) {
      const std::string failed = fmt::format("removing older checkpoints failed ({})", e.what());
      result.warning = result.warning.empty() ? fmt::format("checkpoint {} is saved; {}", final_dir.string(), failed)
                                              : fmt::format("{}; {}", result.warning, failed);
    }
  }
  return result;
}

namespace {

// All ranks' status words (0 = ok), gathered as raw int32.
std::vector<std::int32_t> gather_status(Communicator& comm, std::int32_t status) {
  std::vector<std::int32_t> all(static_cast<std::size_t>(comm.world_size()));
  comm.all_gather(TensorView{&status, DType::kI32, Device::kCPU, Shape{1}},
                  TensorView{all.data(), DType::kI32, Device::kCPU, Shape{comm.world_size()}})
      .wait();
  return all;
}

std::string failed_ranks(const std::vector<std::int32_t>& statuses) {
  std::string out;
  for (std::size_t r = 0; r < statuses.size(); ++r) {
    if (statuses[r] != 0) out += fmt::format("{}{}", out.empty() ? "" : ", ", r);
  }
  return out;
}

}  // namespace

std::string begin_save(Communicator& comm, const std::string& folder, std::int64_t step) {
  const std::string temp = temp_dir_for(folder, step);
  std::string error;
  if (comm.rank() == 0) {
    try {
      prepare_temp_dir(temp);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (const auto s = gather_status(comm, error.empty() ? 0 : 1); s[0] != 0) {
    throw_runtime_error("checkpoint at step {} not saved: {}", step,
                        comm.rank() == 0 ? error : "rank 0 could not create its directory");
  }
  return temp;
}

GatheredFiles gather_rank_files(Communicator& comm, const ParamTable& table, const RankFileWritten& written,
                                bool failed) {
  const int world = comm.world_size();
  // One all-gather of [status, chunk crcs] per rank, padded to rank 0's count (the largest file).
  const std::size_t max_chunks = static_cast<std::size_t>(
      (segments_bytes(rank_file_segments(table, world, 0)) + kChecksumChunkBytes - 1) / kChecksumChunkBytes);
  const std::size_t record = 1 + max_chunks;
  std::vector<std::uint32_t> send(record, 0u), recv(record * static_cast<std::size_t>(world));
  send[0] = failed ? 1u : 0u;
  std::copy(written.chunk_crc32.begin(), written.chunk_crc32.end(), send.begin() + 1);
  comm.all_gather(TensorView{send.data(), DType::kI32, Device::kCPU, Shape{static_cast<std::int64_t>(record)}},
                  TensorView{recv.data(), DType::kI32, Device::kCPU, Shape{static_cast<std::int64_t>(recv.size())}})
      .wait();
  GatheredFiles g;
  g.own_bytes = written.bytes;
  g.files.resize(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    const std::uint32_t* rec = recv.data() + static_cast<std::size_t>(r) * record;
    g.write_status.push_back(static_cast<std::int32_t>(rec[0]));
    RankFileWritten& f = g.files[static_cast<std::size_t>(r)];
    f.bytes = segments_bytes(rank_file_segments(table, world, r));
    f.chunk_crc32.assign(rec + 1, rec + 1 + (f.bytes + kChecksumChunkBytes - 1) / kChecksumChunkBytes);
  }
  return g;
}

bool GatheredFiles::all_written() const { return failed_ranks(write_status).empty(); }

CommitResult commit_gathered(const std::string& folder, const std::string& temp, const ParamTable& table,
                             const CheckpointMeta& meta, const GatheredFiles& g, int keep_last, std::string& error) {
  try {
    return commit_checkpoint(folder, temp, table, meta, static_cast<int>(g.files.size()), g.files, keep_last);
  } catch (const std::exception& e) {
    error = e.what();
    return {};
  }
}

SaveResult conclude_save(Communicator& comm, const std::string& folder, const std::string& temp,
                         const CheckpointMeta& meta, const GatheredFiles& g, const std::string& error,
                         const CommitResult& commit) {
  const int rank = comm.rank();
  const std::vector<std::int32_t> commit_status = gather_status(comm, rank == 0 && !error.empty() ? 1 : 0);
  if (!g.all_written() || commit_status[0] != 0) {
    if (rank == 0) {
      std::error_code ec;
      fs::remove_all(temp, ec);
    }
    throw_runtime_error("checkpoint at step {} not saved (failed on rank {}){}{}", meta.position.step,
                        g.all_written() ? "0" : failed_ranks(g.write_status), error.empty() ? "" : ": ", error);
  }
  SaveResult result;
  result.step = meta.position.step;
  result.path = (fs::path(folder) / step_dir_name(meta.position.step)).string();
  result.save_id = extra_string(meta.extra, "save_id");
  result.rank_bytes = g.own_bytes;
  for (const RankFileWritten& f : g.files) result.total_bytes += f.bytes;
  result.rank_files = static_cast<int>(g.files.size());
  result.warning = commit.warning;
  result.left_for_readers = commit.left_for_readers;
  return result;
}

void pause_for_tests() {
  if (const char* pause = std::getenv("ZT_TEST_CHECKPOINT_PAUSE_MS")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(pause)));
  }
}

SaveResult save_checkpoint(Communicator& comm, const std::string& folder, const ParamTable& table,
                           const OptimizerStateSource& source, const CheckpointMeta& meta, int keep_last) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string temp = begin_save(comm, folder, meta.position.step);
  RankFileWritten written;
  std::string error;
  try {
    written = write_rank_file(temp, table, comm.world_size(), comm.rank(), source);
  } catch (const std::exception& e) {
    error = e.what();
  }
  pause_for_tests();
  const GatheredFiles g = gather_rank_files(comm, table, written, !error.empty());
  const CommitResult commit = comm.rank() == 0 && g.all_written()
                                  ? commit_gathered(folder, temp, table, meta, g, keep_last, error)
                                  : CommitResult{};
  SaveResult result = conclude_save(comm, folder, temp, meta, g, error, commit);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  result.blocked_seconds = result.seconds;
  return result;
}

}  // namespace zt::ckpt
