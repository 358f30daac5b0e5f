// Asynchronous checkpoint saves (see the header).
#include "engine/app/checkpoint/async_checkpoint.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "engine/app/checkpoint/checkpoint_folder.h"
#include "engine/app/checkpoint/durable_file.h"
#include "engine/base/core/check.h"
#include "kernels/ops.h"

namespace zt::ckpt {

namespace fs = std::filesystem;

namespace {

// The writer's pieces: large enough for full-speed writes.
constexpr std::int64_t kWritePieceBytes = std::int64_t{64} << 20;

}  // namespace

std::int64_t rank_file_bytes(const ParamTable& table, int world_size, int rank) {
  return segments_bytes(rank_file_segments(table, world_size, rank));
}

void stage_rank_file(const ParamTable& table, int world_size, int rank, const OptimizerStateSource& source,
                     const StateCopy& copy, char* image) {
  const std::vector<FileSegment> segments = rank_file_segments(table, world_size, rank);
  std::int64_t staged = 0;
  for (const FileSegment& seg : segments) {
    if (seg.end == seg.begin) continue;  // a rank past the unit's end holds only padding
    const std::int64_t n = seg.end - seg.begin;
    copy(TensorView{image + seg.offset, DType::kF32, Device::kCPU, Shape{n}},
         segment_state(source, seg, world_size, rank));
    staged += n * 4;
  }
  // The segments tile the file: the image has no byte the checksums would take from nowhere.
  ZT_CHECK(staged == segments_bytes(segments), "staged {} of rank {}'s {} bytes", staged, rank,
           segments_bytes(segments));
}

RankFileWritten write_rank_image(const std::string& temp_dir, int rank, const char* image, std::int64_t bytes) {
  RankFileWritten out;
  out.bytes = bytes;
  out.chunk_crc32.resize(static_cast<std::size_t>((bytes + kChecksumChunkBytes - 1) / kChecksumChunkBytes));
  for (std::size_t c = 0; c < out.chunk_crc32.size(); ++c) {
    const std::int64_t begin = static_cast<std::int64_t>(c) * kChecksumChunkBytes;
    out.chunk_crc32[c] = crc32_update(0u, image + begin, std::min(kChecksumChunkBytes, bytes - begin));
  }
  FileHandle file = FileHandle::create((fs::path(temp_dir) / rank_file_name(rank)).string());
  for (std::int64_t pos = 0; pos < bytes; pos += kWritePieceBytes) {
    file.write_at(image + pos, std::min(kWritePieceBytes, bytes - pos), pos);
  }
  file.sync();
  file.close();
  return out;
}

AsyncCheckpointer::AsyncCheckpointer(Communicator& world, Communicator* writers, const ExecContext& ctx,
                                     std::int64_t staging_bytes)
    : world_(world),
      files_(writers),
      // Zero-filled: the pages are the process's from the start, not faulted in by the first save.
      // (Every file is fp32 values: its bytes are a multiple of 4.)
      staging_(ops::allocate_host(ctx, tracker_, MemCategory::kWorkspace, DType::kF32, (staging_bytes + 3) / 4)) {}

AsyncCheckpointer::~AsyncCheckpointer() {
  if (worker_.joinable()) worker_.join();
}

void AsyncCheckpointer::run_in_background(std::function<void()> work) {
  done_.store(false);
  auto body = [this, work] {
    work();
    done_.store(true, std::memory_order_release);
  };
  try {
    worker_ = std::thread([body] {
      // The lowest CPU priority for this thread alone (Linux nices threads one by one): where the
      // steps compute on the CPU, its checksums, copies into the page cache and fsyncs take only
      // their idle time.
      setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
      body();
    });
  } catch (const std::system_error&) {
    body();  // no thread to be had: the work runs here, so every rank still reaches the same collectives
  }
}

double AsyncCheckpointer::start(const std::string& folder, const ParamTable& table, const OptimizerStateSource& source,
                                const StateCopy& copy, const CheckpointMeta& meta, int keep_last) {
  ZT_CHECK(!pending_, "an asynchronous save started with another in flight");
  const auto t0 = std::chrono::steady_clock::now();
  written_ = RankFileWritten{};
  error_.clear();
  commit_ = {};
  if (files_ == nullptr) {  // a rank that writes nothing: done with this phase at once
    pending_ =
        Pending{folder, temp_dir_for(folder, meta.position.step), &table, meta, keep_last, t0, Phase::kWriting, {}};
    done_.store(true);
    blocked_ = std::chrono::steady_clock::now() - t0;
    return std::chrono::duration<double>(blocked_).count();
  }
  const int world = files_->world_size(), rank = files_->rank();
  const std::int64_t bytes = rank_file_bytes(table, world, rank);
  ZT_CHECK(static_cast<std::size_t>(bytes) <= staging_.view().size_bytes(),
           "rank {}'s checkpoint file of {} bytes exceeds its staging of {}", rank, bytes,
           staging_.view().size_bytes());
  Pending p{folder, begin_save(*files_, folder, meta.position.step), &table, meta, keep_last, t0, Phase::kWriting, {}};
  char* image = static_cast<char*>(staging_.data());
  try {
    stage_rank_file(table, world, rank, source, copy, image);
  } catch (const std::exception& e) {
    error_ = e.what();  // reported with every rank when the files are gathered
  }
  run_in_background([this, temp = p.temp, image, bytes, rank] {
    if (error_.empty()) {
      try {
        written_ = write_rank_image(temp, rank, image, bytes);
      } catch (const std::exception& e) {
        error_ = e.what();
      }
    }
    pause_for_tests();
  });
  pending_ = std::move(p);
  blocked_ = std::chrono::steady_clock::now() - t0;
  return std::chrono::duration<double>(blocked_).count();
}

bool AsyncCheckpointer::all_ranks_done() {
  const std::int32_t mine = done_.load(std::memory_order_acquire) ? 1 : 0;
  std::vector<std::int32_t> all(static_cast<std::size_t>(world_.world_size()));
  world_
      .all_gather(TensorView{const_cast<std::int32_t*>(&mine), DType::kI32, Device::kCPU, Shape{1}},
                  TensorView{all.data(), DType::kI32, Device::kCPU, Shape{world_.world_size()}})
      .wait();
  return std::count(all.begin(), all.end(), 0) == 0;
}

bool AsyncCheckpointer::all_ranks_agree(bool ok) {
  if (files_ == &world_) return ok;
  float failed = ok ? 0.0f : 1.0f;
  world_.all_reduce(TensorView{&failed, DType::kF32, Device::kCPU, Shape{1}}, ReduceOp::kSum).wait();
  return failed == 0.0f;
}

std::optional<SaveResult> AsyncCheckpointer::poll() {
  if (!pending_) return std::nullopt;
  const auto t0 = std::chrono::steady_clock::now();
  return charged(t0, all_ranks_done() ? advance() : std::nullopt);
}

std::optional<SaveResult> AsyncCheckpointer::finish() {
  if (!pending_) return std::nullopt;
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<SaveResult> r;
  while (!r) r = advance();
  return charged(t0, std::move(r));
}

std::optional<SaveResult> AsyncCheckpointer::advance() {
  if (worker_.joinable()) worker_.join();
  Pending& p = *pending_;
  if (p.phase == Phase::kWriting) {
    if (files_ != nullptr) p.files = gather_rank_files(*files_, *p.table, written_, !error_.empty());
    const bool written = all_ranks_agree(files_ == nullptr || p.files.all_written());
    p.phase = Phase::kCommitting;
    if (written && world_.rank() == 0) {  // (world rank 0 is rank 0 of the writers)
      run_in_background(
          [this, &p] { commit_ = commit_gathered(p.folder, p.temp, *p.table, p.meta, p.files, p.keep_last, error_); });
      return std::nullopt;
    }
    done_.store(true);  // nothing to commit on this rank (or nothing at all: a write failed)
    if (written) return std::nullopt;
  }
  const Pending done = std::move(*pending_);
  pending_.reset();
  SaveResult r = conclude(done);
  concluded_started_ = done.started;  // the save's time is taken in charged(), with the blocked time's end
  return r;
}

SaveResult AsyncCheckpointer::conclude(const Pending& done) {
  if (files_ == &world_) return conclude_save(world_, done.folder, done.temp, done.meta, done.files, error_, commit_);
  // Hybrid sharding: the writers conclude among themselves, then every rank learns the outcome.
  SaveResult r;
  std::string failure;
  if (files_ != nullptr) {
    try {
      r = conclude_save(*files_, done.folder, done.temp, done.meta, done.files, error_, commit_);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  const bool ok = all_ranks_agree(failure.empty());
  if (!failure.empty()) throw_runtime_error("{}", failure);
  if (!ok) throw_runtime_error("checkpoint at step {} not saved (failed in rank group 0)", done.meta.position.step);
  if (files_ == nullptr) {  // the writers' checkpoint, as this rank knows it
    r.step = done.meta.position.step;
    r.path = (fs::path(done.folder) / step_dir_name(done.meta.position.step)).string();
  }
  return r;
}

std::optional<SaveResult> AsyncCheckpointer::charged(std::chrono::steady_clock::time_point t0,
                                                     std::optional<SaveResult> r) {
  const auto now = std::chrono::steady_clock::now();
  blocked_ += now - t0;
  if (r) {
    r->blocked_seconds = std::chrono::duration<double>(blocked_).count();
    r->seconds = std::chrono::duration<double>(now - concluded_started_).count();
  }
  return r;
}

}  // namespace zt::ckpt
