// Internal to the NCCL communicator (nccl_communicator.cpp, nccl_collective.cpp): the state of one
// NCCL communicator and its streams (Impl), and the plan of one collective (Collective).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/base/core/buffer.h"
#include "engine/base/core/check.h"
#include "engine/base/device/cuda_stream.h"
#include "engine/distributed/comm/collective_watchdog.h"
#include "engine/distributed/comm/nccl_check.h"
#include "engine/distributed/comm/nccl_communicator.h"
#include "engine/distributed/comm/running_clock.h"

namespace zt {

struct NcclCommunicator::Impl {
  MemoryTracker& tracker;
  ExecContext ctx;  // the compute stream collectives are ordered against
  int device = 0;
  cuda::CudaStream comm_stream;  // high priority: collectives overlap the compute stream's kernels
  ExecContext comm_ctx;          // ctx with the communication stream: staging casts run there
  ncclComm_t comm = nullptr;
  std::atomic<bool> failing{false};  // fail() has begun (see there)
  // NCCL lets one thread at a time operate a communicator (its thread-safety rules), and on a
  // non-blocking one ncclCommGetAsyncError does more than read a status: it joins and frees the
  // background thread of the last call. The caller's thread holds this around each call and its
  // settling (enqueue); the watchdog's poll only try-locks it, skipping a round while it is held.
  std::mutex nccl_mutex;
  std::unique_ptr<CollectiveWatchdog> watchdog;  // last: its thread stops before the rest goes

  Impl(MemoryTracker& t, const ExecContext& c, int dev)
      : tracker(t), ctx(c), device(dev), comm_stream(dev, cuda::CudaStream::Priority::kHigh), comm_ctx(c) {
    comm_ctx.cuda_stream = comm_stream.get();
  }

  cudaStream_t compute_stream() const { return static_cast<cudaStream_t>(ctx.cuda_stream); }

  // `call` (NCCL calls on `comm`) and its settling, with nccl_mutex held.
  template <typename Call>
  void enqueue(const char* what, double timeout_s, Call&& call) {
    const std::lock_guard<std::mutex> lock(nccl_mutex);
    std::forward<Call>(call)();
    settle(what, timeout_s);
  }

  // A non-blocking communicator's calls return ncclInProgress while a background thread of NCCL's
  // launches them (tens of microseconds): poll until they settled, at once and yielding at first,
  // sleeping only once it takes long (a fixed 1 ms sleep cost every collective a millisecond of
  // host time, 40 ms a stage-3 micro-batch of GPT-2). nccl_mutex held, or no watchdog yet.
  void settle(const char* what, double timeout_s) {
    const auto start = std::chrono::steady_clock::now();
    RunningClock running(start);  // a suspend of the job is not counted (running_clock.h)
    for (;;) {
      // Another thread is failing the communicator (fail()): out of its way, nccl_mutex released
      // by the unwinding, so that its abort does not run under this thread's NCCL call.
      if (failing.load()) throw_runtime_error("{}: the communicator is being aborted after a failure", what);
      ncclResult_t state = ncclSuccess;
      ZT_NCCL_CHECK(ncclCommGetAsyncError(comm, &state), comm);
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) nccl_check(state, comm, what, __FILE__, __LINE__);
      if (running.seconds() > timeout_s) {
        watchdog.reset();  // its thread polls `comm`: stopped before the comm is aborted under it
        ncclCommAbort(comm);
        comm = nullptr;
        throw_runtime_error("{} did not finish within {:g} s: a rank is missing or stuck", what, timeout_s);
      }
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited < std::chrono::milliseconds(2)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(waited < std::chrono::milliseconds(50) ? std::chrono::microseconds(50)
                                                                           : std::chrono::microseconds(1000));
      }
    }
  }

  // What a failed or timed-out collective does: the NCCL communicator cannot be trusted after it,
  // and peers may be blocked in it, so report, abort it (releasing their kernels) and exit.
  // The watchdog's thread and a Work's timeout on the caller's may both get here: the first
  // reports, aborts and exits; a second waits for that exit rather than abort the comm twice.
  [[noreturn]] void fail(int rank, const std::string& message) {
    if (failing.exchange(true)) {
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    std::fprintf(stderr, "zerotrain: error: rank %d: %s\n", rank, message.c_str());
    std::fflush(stderr);
    // Not in the middle of another thread's call on this communicator (NCCL lets one thread at a
    // time operate it: an abort under the caller's ncclCommGetAsyncError could crash the process
    // before its exit): nccl_mutex is waited for up to 2 s, then the abort goes ahead without it
    // (a call that holds it that long is stuck, and the exit must not wait on it).
    std::unique_lock<std::mutex> lock(nccl_mutex, std::defer_lock);
    for (int i = 0; i < 200 && !lock.try_lock(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (comm != nullptr) ncclCommAbort(comm);
    std::_Exit(1);
  }
};

// One collective from start to Work: inputs moved to the device in the dtype NCCL reduces in,
// the call, results moved back. Every step runs on the communication stream, after an event
// that orders it behind the compute stream's queued work.
class NcclCommunicator::Collective {
 public:
  explicit Collective(NcclCommunicator& owner);
  // Abandoned before finish() (its call threw): see there.
  ~Collective();
  Collective(const Collective&) = delete;
  Collective& operator=(const Collective&) = delete;

  // `v` as a device view of dtype `want`: v itself, or a staging copy (upload, cast, or both).
  TensorView input(TensorView v, DType want);
  // A device view of dtype `want` for the result that belongs in `dst`: dst itself, or staging
  // that finish() converts and copies into dst.
  TensorView output(TensorView dst, DType want);
  // `buf` read and written by the call: its device view of dtype `want` (as input() makes it),
  // whose result finish() moves back into buf when it is a staging copy.
  TensorView in_place(TensorView buf, DType want);

  cudaStream_t stream() const { return impl_.comm_stream.get(); }
  ncclComm_t comm() const { return impl_.comm; }

  // After the NCCL call: the results' conversions and copies queued, the watchdog told, and the
  // Work that orders the compute stream after it (device results) or fills the host results.
  Work finish(std::string description);

 private:
  // After the call: `src` (device) goes into `dst` (cast on the device if dtypes differ; a host
  // dst is filled when the Work completes).
  void result_into(TensorView dst, TensorView src) { results_.push_back({dst, src}); }
  TensorView stage(DType dtype, std::int64_t n);

  NcclCommunicator& owner_;
  Impl& impl_;
  std::optional<std::size_t> profiled_;  // the profiler's start event, when timed
  std::vector<Buffer> staging_;
  std::vector<std::pair<TensorView, TensorView>> results_;
};

}  // namespace zt
