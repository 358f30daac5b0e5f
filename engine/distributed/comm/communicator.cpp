// Work (polling with a deadline) and the choice of backend.
#include "engine/distributed/comm/communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/base/core/check.h"
#include "engine/base/core/console.h"
#include "engine/distributed/comm/host_staging_device.h"
#include "engine/distributed/comm/local_communicator.h"
#include "engine/distributed/comm/running_clock.h"
#include "engine/distributed/comm/staged_communicator.h"
#include "engine/distributed/launch/rendezvous.h"
#include "engine/distributed/launch/signals.h"
#ifdef ZT_HAVE_MPI
#include "engine/distributed/comm/mpi_communicator.h"
#endif
#include "engine/distributed/comm/nccl_communicator.h"  // its factories refuse in a build without CUDA (no_cuda.cpp)

namespace zt {

Work::Work(std::function<bool()> advance, std::string description, double timeout_s, const std::string* context,
           std::function<void(const std::string&)> on_timeout)
    : advance_(std::move(advance)),
      description_(std::move(description)),
      timeout_s_(timeout_s),
      context_(context),
      on_timeout_(std::move(on_timeout)) {}

namespace {

struct KeptUntilExit {
  std::mutex mutex;
  std::vector<Work> work;
  std::vector<Buffer> buffers;
};

// Never destroyed: a destructor at exit would free what a late write may still reach, and the
// trackers the buffers name are gone by then.
KeptUntilExit& kept_until_exit() {
  static auto* kept = new KeptUntilExit();
  return *kept;
}

}  // namespace

void keep_until_exit(Work work) {
  KeptUntilExit& kept = kept_until_exit();
  const std::lock_guard<std::mutex> lock(kept.mutex);
  kept.work.push_back(std::move(work));
}

void keep_until_exit(Buffer buffer) {
  if (buffer.empty()) return;
  KeptUntilExit& kept = kept_until_exit();
  const std::lock_guard<std::mutex> lock(kept.mutex);
  kept.buffers.push_back(std::move(buffer));
}

namespace {

// Only the thread that waits (the main thread) adds to it.
double g_comm_wait_seconds = 0.0;

}  // namespace

double comm_wait_seconds() { return g_comm_wait_seconds; }

void Communicator::set_context(std::string context) {
  context_ = std::move(context);
  record_wait_site(nullptr, &context_);
}

void Work::wait(bool bounded_by_stop_grace) {
  if (!advance_) return;
  record_wait_site(&description_, context_);
  struct BackToIdle {
    const std::string* context;
    ~BackToIdle() { record_wait_site(nullptr, context); }
  } back_to_idle{context_};
  const auto start = std::chrono::steady_clock::now();
  struct AddWaitTime {
    std::chrono::steady_clock::time_point start;
    ~AddWaitTime() {
      g_comm_wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  } add_wait_time{start};
  // A wait that may outlast the grace says so to the collective watchdog too (a device backend's
  // collectives are watched from its thread, which applies the same rule).
  std::optional<StopGraceSuspended> past_grace;
  if (!bounded_by_stop_grace) past_grace.emplace();
  int spins = 0;
  RunningClock running(start);  // the timeout counts the time this process ran, not a suspend's
  while (!advance_()) {
    const double waited = running.seconds();
    // After a stop request every live rank heads for the step boundary, so a collective that
    // stays blocked for the grace period has a dead peer: give up rather than wait for SIGKILL.
    const double grace = std::min(timeout_s_, stop_grace_seconds());
    const bool stop_stalled = bounded_by_stop_grace && waited > grace && seconds_since_stop_signal() > grace;
    if (waited > timeout_s_ || stop_stalled) {
      const std::string where = context_ != nullptr ? *context_ : "?";
      const std::string message =
          stop_stalled ? fmt::format(
                             "{} at {} was still blocked {:g} s after {} asked this rank to stop: another "
                             "rank has failed or died; exiting without a checkpoint",
                             description_, where, grace, signal_name(stop_signal()))
                       : fmt::format(
                             "{} did not complete within {:g} s (train.collective_timeout_s) at {}: a rank died, "
                             "never reached it, or needs longer to reach it",
                             description_, timeout_s_, where);
      // The collective may still be posted, its progress thread still running: what the advance
      // function holds (its staging buffers) lives until on_timeout has stopped it (the MPI
      // backend halts its worker and aborts), and is dropped only as the error leaves. Cleared
      // here first, the buffers were freed while a late peer's data could still land in them.
      const std::function<bool()> posted = std::move(advance_);
      advance_ = nullptr;
      if (on_timeout_) on_timeout_(message);
      throw RuntimeError(message);
    }
    // Spin briefly (collectives usually finish within microseconds), then yield the core.
    if (++spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  advance_ = nullptr;
}

bool Work::test() {
  if (!advance_) return true;
  if (!advance_()) return false;
  advance_ = nullptr;
  return true;
}

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  (void)color;
  (void)key;
  throw_runtime_error("the {} communicator cannot be split into groups of ranks", backend_name());
}

Work Communicator::all_to_all(TensorView send, TensorView recv) {
  (void)send;
  (void)recv;
  throw_runtime_error("the {} communicator has no all-to-all", backend_name());
}

void Communicator::hold_until(std::function<bool()> ready) {
  Work(std::move(ready),
       fmt::format("{} communicator: the copies of a collective's operands to host memory", backend_name()),
       options_.timeout_s, &context_)
      .wait();
}

std::string broadcast_string(Communicator& comm, const std::string& text, int root) {
  std::int64_t length = comm.rank() == root ? static_cast<std::int64_t>(text.size()) : 0;
  comm.broadcast(TensorView{&length, DType::kI32, Device::kCPU, Shape{2}}, root).wait();  // 8 raw bytes
  std::vector<std::int32_t> words(static_cast<std::size_t>((length + 3) / 4));
  // Not for an empty text: memcpy's pointers must not be null even for 0 bytes (UBSan's nonnull).
  if (comm.rank() == root && !text.empty()) std::memcpy(words.data(), text.data(), text.size());
  comm.broadcast(TensorView{words.data(), DType::kI32, Device::kCPU, Shape{static_cast<std::int64_t>(words.size())}},
                 root)
      .wait();
  return std::string(reinterpret_cast<const char*>(words.data()), static_cast<std::size_t>(length));
}

void on_every_rank(Communicator& world, const std::function<void()>& local) {
  if (world.world_size() == 1) {
    local();
    return;
  }
  std::string error;
  std::int32_t kind = 0;  // 0 done, 1 an InputError, 2 another error
  try {
    local();
  } catch (const InputError& e) {
    error = e.what(), kind = 1;
  } catch (const std::filesystem::filesystem_error& e) {  // a path the input named, as the command line says it
    error = fmt::format("cannot access '{}': {}", e.path1().string(), e.code().message()), kind = 1;
  } catch (const std::exception& e) {
    error = e.what(), kind = 2;
  }
  const std::vector<std::int32_t> kinds = all_gather_values<std::int32_t>(world, std::span{&kind, 1});
  const auto failed = std::find_if(kinds.begin(), kinds.end(), [](std::int32_t k) { return k != 0; });
  if (failed == kinds.end()) return;
  const int rank = static_cast<int>(failed - kinds.begin());
  const std::string first = broadcast_string(world, error, rank);
  // Every rank failing alike (a config each read): the error as it is; else the rank it came from.
  const std::int32_t same = kind == *failed && error == first ? 1 : 0;
  const std::vector<std::int32_t> alike = all_gather_values<std::int32_t>(world, std::span{&same, 1});
  const bool everywhere = std::all_of(alike.begin(), alike.end(), [](std::int32_t a) { return a == 1; });
  fail_on_every_rank(world, everywhere ? first : fmt::format("rank {}: {}", rank, first), *failed == 1);
}

void fail_on_every_rank(Communicator& world, const std::string& message, bool input_error) {
  // Rank 0 says it for the job before any rank leaves: the launcher ends the others once one exits
  // non-zero, and a rank 0 still unwinding would print the launcher's line instead of this one.
  const int exit_code = input_error ? 2 : 1;
  if (world.rank() == 0) {
    print_stderr(error_line(message));  // after what stdout printed, where both share a log
    std::fflush(stderr);
  }
  note_error_reported(exit_code);
  std::int32_t said = 1;
  (void)all_gather_values<std::int32_t>(world, std::span{&said, 1});
  if (input_error) throw AgreedInputError(message);
  throw AgreedRuntimeError(message);
}

std::unique_ptr<Communicator> make_communicator(MemoryTracker& tracker, const CommOptions& options) {
#ifdef ZT_HAVE_MPI
  if (launched_by_mpi()) {
    // Its checks: a malformed or contradicting ZT_RANK is an input error here too.
    const LaunchInfo launch = detect_launch();
    auto mpi = std::make_unique<MpiCommunicator>(tracker, options);
    const std::string mismatch = mpi_world_mismatch(launch, mpi->rank(), mpi->world_size());
    if (!mismatch.empty()) throw_input_error("{}", mismatch);
    return mpi;
  }
#endif
  // Ranks started without MPI (ZT_RANK, torchrun, Slurm without PMI; any launcher in a build
  // without MPI, whose ranks then need ZT_RENDEZVOUS or MASTER_ADDR) talk through NCCL.
  const LaunchInfo launch = detect_launch();
  if (launch.world_size > 1) {
    return make_launched_nccl_communicator(tracker, options, launch);
  }
  return std::make_unique<LocalCommunicator>(tracker, options);
}

std::unique_ptr<Communicator> make_device_communicator(Communicator& control, MemoryTracker& tracker,
                                                       const ExecContext& ctx, DeviceCommBackend backend) {
  if (backend == DeviceCommBackend::kNccl) return make_nccl_communicator(control, tracker, ctx);
  if (control.world_size() > 1 && !launched_by_mpi()) {
    throw_input_error(
        "comm.backend = \"mpi\" stages collectives through MPI, but these {} ranks were not started by mpirun "
        "(use mpirun, or comm.backend = \"nccl\")",
        control.world_size());
  }
  // The host communicator of the staged path: the same ranks as `control`, a communicator of its own
  // (its own MPI communicator and progress thread), so its collectives never interleave with the
  // trainer's and its staging is charged to the StagedCommunicator's tracker.
  const CommOptions options = control.options();
  const int world = control.world_size();
  auto make_host = [options, world](MemoryTracker& staging) {
    std::unique_ptr<Communicator> host = make_communicator(staging, options);
    ZT_CHECK(host->world_size() == world, "the staged communicator's host backend has {} ranks, the job {}",
             host->world_size(), world);
    return host;
  };
  std::unique_ptr<StagingDevice> device = backend == DeviceCommBackend::kMpiStaged
                                              ? make_cuda_staging_device(ctx)
                                              : std::make_unique<HostStagingDevice>(/*fence_delay_polls=*/2);
  return std::make_unique<StagedCommunicator>(make_host, std::move(device));
}

}  // namespace zt
