// NcclCommunicator: a collective is planned by a Collective (nccl_collective.cpp: staging of host
// or bf16 operands in, the NCCL call made here, conversions back), which ends in an event on the
// communication stream that both the Work (compute-stream wait, or host polling) and the watchdog
// look at. Where a communicator's unique id comes from (the host communicator or the rendezvous) is
// nccl_bootstrap.cpp.
#include "engine/distributed/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "engine/base/core/check.h"
#include "engine/base/device/cuda_check.h"
#include "engine/distributed/comm/collective_watchdog.h"
#include "engine/distributed/comm/nccl_check.h"
#include "engine/distributed/comm/nccl_internals.h"
#include "engine/distributed/comm/nccl_launch_order.h"

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
  register_live();
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
  register_live();
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

// [Note: aborting every NCCL communicator at once]
// A process may hold several NCCL communicators (hybrid sharding's world and its two splits; the
// host communicator of a launch without MPI beside the store's), and LaunchOrder chains their
// streams: a collective of one waits on the GPU for the last one another queued. A communicator
// that aborts only itself and then synchronises its stream may so wait on another's collective
// that a peer never joins (the peer aborted its own side), until the 300 s watchdog. So the
// unwinding path aborts every live communicator of the process first, the splits before their
// parents, and only then waits for any stream. The registry holds them from the end of their
// set-up (a set-up that throws never registers) to their destructor.
NcclCommunicator::LiveSet& NcclCommunicator::live() {
  static LiveSet set;
  return set;
}

void NcclCommunicator::abort_every_communicator() {
  std::vector<Impl*> impls;
  {
    const std::lock_guard<std::mutex> lock(live().mutex);
    impls = live().impls;
  }
  for (auto it = impls.rbegin(); it != impls.rend(); ++it) {  // the newest (splits) first
    Impl& impl = **it;
    impl.watchdog.reset();  // its thread polls `comm`: stopped before the comm is aborted under it
    const std::lock_guard<std::mutex> lock(impl.nccl_mutex);
    if (impl.comm != nullptr) ncclCommAbort(impl.comm);
    impl.comm = nullptr;
  }
}

void NcclCommunicator::register_live() {
  const std::lock_guard<std::mutex> lock(live().mutex);
  live().impls.push_back(impl_.get());
}

void NcclCommunicator::unregister_live() {
  const std::lock_guard<std::mutex> lock(live().mutex);
  std::erase(live().impls, impl_.get());
}

NcclCommunicator::~NcclCommunicator() {
  if (!impl_) return;
  impl_->watchdog.reset();
  // Destroyed while an exception unwinds this rank (it failed, perhaps alone: a device out of memory,
  // a check): a peer may wait in a collective this rank never queued, so neither the drain below
  // nor ncclCommDestroy (collective among a node's ranks) would end before the timeout, 300 s by
  // default, and the error line, printed by the command's handler after the unwinding, would come
  // only then, if mpirun had not killed the rank first. ncclCommAbort is local and immediate: the
  // line prints at once, and the rank's non-zero exit ends the job. Every communicator of the
  // process, before any stream is waited for ([Note: aborting every NCCL communicator at once]).
  if (std::uncaught_exceptions() > 0) {
    abort_every_communicator();
    cudaStreamSynchronize(impl_->comm_stream.get());  // the aborted kernels released: nothing outlives its buffers
    launch_order().forget(impl_.get());
    unregister_live();
    return;
  }
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
  unregister_live();
  // A destructor cannot throw; a failed destroy (a peer gone mid-teardown) is said, not swallowed.
  if (impl_->comm != nullptr) {
    if (const ncclResult_t r = ncclCommDestroy(impl_->comm); r != ncclSuccess) {
      std::fprintf(stderr, "zerotrain: rank %d: ncclCommDestroy failed: %s\n", rank_, ncclGetErrorString(r));
    }
  }
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
