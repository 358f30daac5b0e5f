// NcclCommunicator: a collective is planned by a Collective (staging of host or bf16 operands in,
// the NCCL call, conversions back), which ends in an event on the communication stream that both
// the Work (compute-stream wait, or host polling) and the watchdog look at. Where a communicator's
// unique id comes from (the host communicator or the rendezvous) is nccl_bootstrap.cpp.
#include "engine/distributed/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/base/core/check.h"
#include "engine/base/device/cuda_check.h"
#include "engine/base/device/cuda_stream.h"
#include "engine/distributed/comm/collective_watchdog.h"
#include "engine/distributed/comm/nccl_check.h"
#include "engine/distributed/comm/nccl_launch_order.h"
#include "kernels/compute_backend.h"
#include "kernels/op_profiler.h"
#include "kernels/ops.h"

namespace zt {

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kF32: return ncclFloat32;
    case DType::kBF16: return ncclBfloat16;
    case DType::kI32: return ncclInt32;
    default: return ncclUint8;  // moved as bytes (all-gather and broadcast only)
  }
}

std::int64_t nccl_count(const TensorView& v) {
  return nccl_type(v.dtype) == ncclUint8 ? static_cast<std::int64_t>(v.size_bytes()) : v.numel();
}

// Reductions run in fp32 whatever the operand's dtype (bf16 is staged up and rounded once back).
ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::kAvg ? ncclAvg : ncclSum; }

std::string describe(const char* op, const TensorView& v) {
  return fmt::format("NCCL {} of {} {} elements", op, v.numel(), dtype_name(v.dtype));
}

}  // namespace

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
    const auto deadline = start + std::chrono::duration<double>(timeout_s);
    for (;;) {
      ncclResult_t state = ncclSuccess;
      ZT_NCCL_CHECK(ncclCommGetAsyncError(comm, &state), comm);
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) nccl_check(state, comm, what, __FILE__, __LINE__);
      if (std::chrono::steady_clock::now() > deadline) {
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
    if (comm != nullptr) ncclCommAbort(comm);
    std::_Exit(1);
  }
};

namespace {

// A collective's staging buffers, returned to the caching allocator (whose reuse is ordered on the
// compute stream) only once the compute stream was made to wait for the collective: after the
// Work's wait, or, for a Work dropped unwaited on an error path, here. Also without staging: the
// caller's own buffers (an in-place gather's) go back to the allocator on the compute stream too.
struct Staging {
  Staging(std::vector<Buffer> b, std::shared_ptr<cuda::CudaEvent> d, cudaStream_t c)
      : buffers(std::move(b)), done(std::move(d)), compute(c) {}
  ~Staging() {
    if (!compute_waits) (void)cudaStreamWaitEvent(compute, done->get(), 0);  // no throw here
  }
  // The compute stream waits for the collective (its results, and the staging's reuse, come after).
  void order_compute() {
    done->wait_on(compute);
    compute_waits = true;
  }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  std::vector<Buffer> buffers;
  std::shared_ptr<cuda::CudaEvent> done;
  cudaStream_t compute;
  bool compute_waits = false;
};

}  // namespace

// One collective from start to Work: inputs moved to the device in the dtype NCCL reduces in,
// the call, results moved back. Every step runs on the communication stream, after an event
// that orders it behind the compute stream's queued work.
class NcclCommunicator::Collective {
 public:
  explicit Collective(NcclCommunicator& owner) : owner_(owner), impl_(*owner.impl_) {
    cuda::CudaEvent ready;
    ready.record(impl_.compute_stream());
    ready.wait_on(impl_.comm_stream.get());
    launch_order().follow(&impl_, impl_.comm_stream.get());
    // log.profile_ops: the collective's span on the communication stream, its staging included.
    if (owner_.profiler_ != nullptr && owner_.profiler_->in_step()) {
      profiled_ = owner_.profiler_->comm_start(impl_.comm_stream.get());
    }
  }

  // `v` as a device view of dtype `want`: v itself, or a staging copy (upload, cast, or both).
  TensorView input(TensorView v, DType want) {
    if (v.device != Device::kCUDA) {
      TensorView dev = stage(v.dtype, v.numel());
      ops::copy(impl_.comm_ctx, dev, v);
      v = dev;
    }
    if (v.dtype != want) {
      TensorView converted = stage(want, v.numel());
      ops::cast(impl_.comm_ctx, converted, v);
      v = converted;
    }
    return v;
  }

  // A device view of dtype `want` for the result that belongs in `dst`: dst itself, or staging
  // that finish() converts and copies into dst.
  TensorView output(TensorView dst, DType want) {
    if (dst.device == Device::kCUDA && dst.dtype == want) return dst;
    TensorView staged = stage(want, dst.numel());
    result_into(dst, staged);
    return staged;
  }

  // `buf` read and written by the call: its device view of dtype `want` (as input() makes it),
  // whose result finish() moves back into buf when it is a staging copy.
  TensorView in_place(TensorView buf, DType want) {
    const TensorView work = input(buf, want);
    if (work.data != buf.data) result_into(buf, work);
    return work;
  }

  cudaStream_t stream() const { return impl_.comm_stream.get(); }
  ncclComm_t comm() const { return impl_.comm; }

  Work finish(std::string description) {
    std::vector<std::pair<TensorView, TensorView>> host_copies;  // (host dst, device src)
    for (auto& [dst, src] : results_) {
      TensorView s = src;
      if (s.dtype != dst.dtype) {
        TensorView converted = dst.device == Device::kCUDA ? dst : stage(dst.dtype, dst.numel());
        ops::cast(impl_.comm_ctx, converted, s);
        s = converted;
      }
      if (dst.device == Device::kCUDA) {
        ops::copy(impl_.comm_ctx, dst, s);  // nothing when the cast already wrote dst
      } else {
        host_copies.emplace_back(dst, s);
      }
    }
    if (profiled_) owner_.profiler_->comm_stop(*profiled_, stream());
    auto done = std::make_shared<cuda::CudaEvent>();
    done->record(stream());
    launch_order().queued(&impl_, done);
    const std::string context = *owner_.context_ptr();
    const double timeout_s = owner_.options().timeout_s;  // set_options may change it after set-up
    impl_.watchdog->watch(
        description, context, [done] { return cudaEventQuery(done->get()) != cudaErrorNotReady; }, timeout_s);
    const cudaStream_t compute = impl_.compute_stream();
    auto staging = std::make_shared<Staging>(std::move(staging_), done, compute);
    std::function<bool()> advance;
    if (host_copies.empty()) {
      // Device results: the compute stream waits for them; the host goes on at once. The staging
      // is freed after that wait is queued, so its reuse on the compute stream comes after it.
      advance = [staging] {
        staging->order_compute();
        return true;
      };
    } else {
      // Host results: poll the event (Work::wait's deadline applies), then copy back.
      advance = [done, staging, host_copies] {
        const cudaError_t state = cudaEventQuery(done->get());
        if (state == cudaErrorNotReady) return false;
        ZT_CUDA_CHECK(state);
        for (const auto& [dst, src] : host_copies) {
          ZT_CUDA_CHECK(cudaMemcpy(dst.data, src.data, dst.size_bytes(), cudaMemcpyDeviceToHost));
        }
        staging->order_compute();
        return true;
      };
    }
    Impl* impl = &impl_;
    const int rank = owner_.rank_;
    return Work(std::move(advance), std::move(description), timeout_s, owner_.context_ptr(),
                [impl, rank](const std::string& message) { impl->fail(rank, message); });
  }

 private:
  // After the call: `src` (device) goes into `dst` (cast on the device if dtypes differ; a host
  // dst is filled when the Work completes).
  void result_into(TensorView dst, TensorView src) { results_.push_back({dst, src}); }

  // Not zero-filled: a fill would be queued on the compute stream (the allocator's), after the
  // fence the comm stream waits on, and so could land after the comm stream's copy or cast into
  // the buffer. Every staging buffer is written whole (copy, cast or NCCL) before it is read.
  TensorView stage(DType dtype, std::int64_t n) {
    staging_.push_back(
        ops::allocate(impl_.ctx, impl_.tracker, MemCategory::kCommBuffers, dtype, n, /*zero_fill=*/false));
    return staging_.back().view();
  }

  NcclCommunicator& owner_;
  Impl& impl_;
  std::optional<std::size_t> profiled_;  // the profiler's start event, when timed
  std::vector<Buffer> staging_;
  std::vector<std::pair<TensorView, TensorView>> results_;
};

NcclCommunicator::NcclCommunicator(MemoryTracker& tracker, const CommOptions& options, const ExecContext& ctx, int rank,
                                   int world_size, const std::vector<std::uint8_t>& unique_id)
    : Communicator(options), rank_(rank), world_(world_size) {
  ZT_CHECK(ctx.device == Device::kCUDA && ctx.allocator != nullptr, "the NCCL communicator needs a CUDA context");
  ZT_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "rank {} of {}", rank, world_size);
  ncclUniqueId id;
  ZT_CHECK(unique_id.size() == sizeof(id), "an NCCL unique id has {} bytes, got {}", sizeof(id), unique_id.size());
  std::memcpy(&id, unique_id.data(), sizeof(id));
  int device = 0;
  ZT_CUDA_CHECK(cudaGetDevice(&device));  // the compute backend selected it
  impl_ = std::make_unique<Impl>(tracker, ctx, device);
  // Non-blocking, so that a rank that never joins is a timeout here rather than a hang.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ZT_NCCL_CHECK(ncclCommInitRankConfig(&impl_->comm, world_size, id, rank, &config), impl_->comm);
  impl_->settle(fmt::format("NCCL set-up of rank {} of {}", rank, world_size).c_str(), options.timeout_s);
  start_watchdog();
}

NcclCommunicator::NcclCommunicator(NcclCommunicator& parent, int color, int key) : Communicator(parent.options()) {
  impl_ = std::make_unique<Impl>(parent.impl_->tracker, parent.impl_->ctx, parent.impl_->device);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // as the parent: a rank that never splits is a timeout, not a hang
  {
    const std::lock_guard<std::mutex> lock(parent.impl_->nccl_mutex);  // the parent's watchdog polls it
    ZT_NCCL_CHECK(ncclCommSplit(parent.impl_->comm, color, key, &impl_->comm, &config), parent.impl_->comm);
    parent.impl_->settle("ncclCommSplit", options_.timeout_s);
  }
  impl_->settle(fmt::format("NCCL split of rank {} (color {})", parent.rank_, color).c_str(), options_.timeout_s);
  ZT_NCCL_CHECK(ncclCommUserRank(impl_->comm, &rank_), impl_->comm);
  ZT_NCCL_CHECK(ncclCommCount(impl_->comm, &world_), impl_->comm);
  start_watchdog();
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  return std::unique_ptr<Communicator>(new NcclCommunicator(*this, color, key));
}

void NcclCommunicator::start_watchdog() {
  Impl* impl = impl_.get();
  const int rank = rank_, device = impl_->device;
  impl_->watchdog = std::make_unique<CollectiveWatchdog>(
      [impl]() -> std::string {
        // A call being enqueued and settled holds the communicator: this round skips the poll.
        const std::unique_lock<std::mutex> lock(impl->nccl_mutex, std::try_to_lock);
        if (!lock.owns_lock()) return {};
        ncclResult_t state = ncclSuccess;
        if (ncclCommGetAsyncError(impl->comm, &state) != ncclSuccess) return "ncclCommGetAsyncError failed";
        if (state == ncclSuccess || state == ncclInProgress) return {};
        return fmt::format("{} ({})", ncclGetErrorString(state), ncclGetLastError(impl->comm));
      },
      [impl, rank](const std::string& message) { impl->fail(rank, message); }, [device] { cudaSetDevice(device); });
}

NcclCommunicator::~NcclCommunicator() {
  if (!impl_) return;
  impl_->watchdog.reset();
  // Nothing in flight may outlive its buffers; but a collective a peer never joined (an exception
  // unwinding one rank mid-step) would never finish, and with the watchdog gone nothing would
  // abort it: after the timeout the communicator is aborted, releasing its kernels.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(options().timeout_s);
  while (cudaStreamQuery(impl_->comm_stream.get()) == cudaErrorNotReady && impl_->comm != nullptr) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "zerotrain: rank %d: NCCL collectives still in flight at shutdown: aborting them\n", rank_);
      ncclCommAbort(impl_->comm);
      impl_->comm = nullptr;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  cudaStreamSynchronize(impl_->comm_stream.get());
  launch_order().forget(impl_.get());
  if (impl_->comm != nullptr) ncclCommDestroy(impl_->comm);
}

void NcclCommunicator::own_backend(std::shared_ptr<void> owner) { owned_backend_ = std::move(owner); }

Work NcclCommunicator::all_gather(TensorView send, TensorView recv) {
  ZT_CHECK(send.dtype == recv.dtype, "all_gather: send is {}, recv {}", dtype_name(send.dtype), dtype_name(recv.dtype));
  ZT_CHECK(recv.numel() == send.numel() * world_, "all_gather: recv has {} elements, needs {} x {}", recv.numel(),
           world_, send.numel());
  count_volume(recv.numel(), recv.dtype);
  Collective c(*this);
  const TensorView in = c.input(send, send.dtype);  // in place stays in place: NCCL allows send = recv + rank * n
  const TensorView out = c.output(recv, recv.dtype);
  impl_->enqueue("ncclAllGather", options().timeout_s, [&] {
    ZT_NCCL_CHECK(ncclAllGather(in.data, out.data, static_cast<std::size_t>(nccl_count(in)), nccl_type(in.dtype),
                                c.comm(), c.stream()),
                  c.comm());
  });
  return c.finish(describe("all_gather", recv));
}

Work NcclCommunicator::reduce_scatter(TensorView send, TensorView recv, ReduceOp op) {
  ZT_CHECK(send.numel() == recv.numel() * world_, "reduce_scatter: send has {} elements, needs {} x {}", send.numel(),
           world_, recv.numel());
  for (const TensorView* v : {&send, &recv}) {
    ZT_CHECK(v->dtype == DType::kF32 || v->dtype == DType::kBF16, "reduce_scatter reduces F32 or BF16, not {}",
             dtype_name(v->dtype));
  }
  count_volume(send.numel(), DType::kF32);  // reductions move fp32
  Collective c(*this);
  const TensorView in = c.input(send, DType::kF32);
  const TensorView out = c.output(recv, DType::kF32);
  impl_->enqueue("ncclReduceScatter", options().timeout_s, [&] {
    ZT_NCCL_CHECK(ncclReduceScatter(in.data, out.data, static_cast<std::size_t>(out.numel()), ncclFloat32, nccl_op(op),
                                    c.comm(), c.stream()),
                  c.comm());
  });
  return c.finish(describe("reduce_scatter", send));
}

Work NcclCommunicator::all_reduce(TensorView buf, ReduceOp op) {
  ZT_CHECK(buf.dtype == DType::kF32 || buf.dtype == DType::kBF16, "all_reduce reduces F32 or BF16, not {}",
           dtype_name(buf.dtype));
  count_volume(buf.numel(), DType::kF32, 2);
  Collective c(*this);
  const TensorView work = c.in_place(buf, DType::kF32);  // buf itself when it is F32 on the device
  impl_->enqueue("ncclAllReduce", options().timeout_s, [&] {
    ZT_NCCL_CHECK(ncclAllReduce(work.data, work.data, static_cast<std::size_t>(work.numel()), ncclFloat32, nccl_op(op),
                                c.comm(), c.stream()),
                  c.comm());
  });
  return c.finish(describe("all_reduce", buf));
}

Work NcclCommunicator::all_to_all(TensorView send, TensorView recv) {
  ZT_CHECK(send.dtype == recv.dtype && send.numel() == recv.numel() && send.numel() % world_ == 0,
           "all_to_all: send and recv must both be [world * n] of one dtype");
  count_volume(recv.numel(), recv.dtype);
  Collective c(*this);
  const TensorView in = c.input(send, send.dtype);
  const TensorView out = c.output(recv, recv.dtype);
  const std::size_t bytes = static_cast<std::size_t>(in.size_bytes()) / static_cast<std::size_t>(world_);
  impl_->enqueue("ncclAllToAll (grouped sends)", options().timeout_s, [&] {
    ZT_NCCL_CHECK(ncclGroupStart(), c.comm());
    // A send or receive that throws still closes the group: an open one would defer every later
    // NCCL call of this thread, the communicator's destruction included.
    struct GroupEnd {
      ncclComm_t comm;
      bool open = true;
      ~GroupEnd() {
        if (open) (void)ncclGroupEnd();
      }
    } group{c.comm()};
    for (int peer = 0; peer < world_; ++peer) {
      ZT_NCCL_CHECK(
          ncclSend(static_cast<const char*>(in.data) + peer * bytes, bytes, ncclUint8, peer, c.comm(), c.stream()),
          c.comm());
      ZT_NCCL_CHECK(ncclRecv(static_cast<char*>(out.data) + peer * bytes, bytes, ncclUint8, peer, c.comm(), c.stream()),
                    c.comm());
    }
    group.open = false;
    ZT_NCCL_CHECK(ncclGroupEnd(), c.comm());
  });
  return c.finish(describe("all_to_all", send));
}

Work NcclCommunicator::broadcast(TensorView buf, int root) {
  ZT_CHECK(root >= 0 && root < world_, "broadcast root {} outside the world of {}", root, world_);
  Collective c(*this);
  const TensorView work = c.in_place(buf, buf.dtype);
  impl_->enqueue("ncclBroadcast", options().timeout_s, [&] {
    ZT_NCCL_CHECK(ncclBroadcast(work.data, work.data, static_cast<std::size_t>(nccl_count(work)), nccl_type(work.dtype),
                                root, c.comm(), c.stream()),
                  c.comm());
  });
  return c.finish(describe("broadcast", buf));
}

void NcclCommunicator::barrier() {
  float token = 0.0f;
  all_reduce(TensorView{&token, DType::kF32, Device::kCPU, Shape{1}}, ReduceOp::kSum).wait();
}

void NcclCommunicator::abort_after_timeout(const std::string& message) { impl_->fail(rank_, message); }

}  // namespace zt
