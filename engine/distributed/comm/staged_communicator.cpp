// StagedCommunicator: a collective is planned by a Collective (host staging of the device operands,
// the gate, the host call), and its Work copies the results back once the host call is done.
#include "engine/distributed/comm/staged_communicator.h"

#include <fmt/format.h>

#include <utility>
#include <vector>

#include "engine/base/core/check.h"

namespace zt {

namespace {

std::string describe(const char* op, const TensorView& v) {
  return fmt::format("{} ({} x {}, staged through host memory)", op, v.numel(), dtype_name(v.dtype));
}

// What a collective keeps until its Work completes: its host staging, the copies back, the host
// call and the fence its inputs' copies end at.
struct StagedState {
  explicit StagedState(StagingDevice& d) : device(d) {}
  StagedState(const StagedState&) = delete;
  StagedState& operator=(const StagedState&) = delete;
  // A Work dropped before completion (a failing run unwinding): queued copies may still touch
  // device buffers the store is about to free, so the compute stream (their next user) waits; and
  // the host backend may still be receiving into the staging (its request abandoned, not
  // cancelled), so the staging, and the host call's own, is never given back: leaked on purpose, on
  // a path that ends the job.
  ~StagedState() {
    if (finished || buffers.empty()) return;
    try {
      device.compute_follows_copies();
    } catch (...) {  // nothing to do about it while unwinding
    }
    if (!host_work.done()) {
      for (Buffer& b : buffers) keep_until_exit(std::move(b));
      // The host backend's Work owns its own fp32 staging (MPI's), which its progress thread may
      // still write into: kept too.
      keep_until_exit(std::move(host_work));
    }
  }

  StagingDevice& device;
  std::vector<Buffer> buffers;
  std::vector<std::pair<TensorView, TensorView>> results;  // (device destination, host staging)
  std::shared_ptr<StagingFence> inputs_landed;
  Work host_work;
  bool finished = false;
};

}  // namespace

class StagedCommunicator::Collective {
 public:
  explicit Collective(StagedCommunicator& owner)
      : owner_(owner), state_(std::make_shared<StagedState>(*owner.device_)) {}

  // `v` as the host collective reads it: v itself when it is not device memory, else a host copy.
  TensorView input(TensorView v) {
    if (!staged(v)) return v;
    const TensorView host = stage(v.dtype, v.numel());
    owner_.device_->copy(host, v);
    return host;
  }

  // Where the host collective writes the result that belongs in `dst`: dst itself off the device,
  // else host staging copied into dst when the Work completes.
  TensorView output(TensorView dst) {
    if (!staged(dst)) return dst;
    const TensorView host = stage(dst.dtype, dst.numel());
    state_->results.emplace_back(dst, host);
    return host;
  }

  // `buf` read (when `read`) and written by the host collective.
  TensorView in_place(TensorView buf, bool read) {
    if (!staged(buf)) return buf;
    const TensorView host = output(buf);
    if (read) owner_.device_->copy(host, buf);
    return host;
  }

  // Copies `src` (device) into `host`, a part of a view output() or in_place() returned.
  void copy_in(TensorView host, TensorView src) { owner_.device_->copy(host, src); }

  bool staged(const TensorView& v) const { return v.device == owner_.device_->device() && v.numel() > 0; }

  // Gates the host backend on the input copies (when anything was staged), starts the host
  // collective, and returns the Work that finishes it.
  Work start(const std::function<Work()>& host_call, std::string description) {
    if (!state_->buffers.empty()) {
      state_->inputs_landed = owner_.device_->fence();
      std::shared_ptr<StagingFence> landed = state_->inputs_landed;
      owner_.host_->hold_until([landed] { return landed->reached(); });
    }
    state_->host_work = host_call();
    std::shared_ptr<StagedState> state = state_;
    auto advance = [state] {
      if (!state->host_work.test()) return false;
      // Reached by now (the host call was gated on it); polled again to surface a device error here.
      if (state->inputs_landed && !state->inputs_landed->reached()) return false;
      for (const auto& [dst, host] : state->results) state->device.copy(dst, host);
      if (!state->results.empty()) state->device.compute_follows_copies();
      state->finished = true;
      state->buffers.clear();  // back to the pool: [Note: staging reuse without fences]
      return true;
    };
    Communicator* host = owner_.host_.get();
    return Work(std::move(advance), fmt::format("rank {}: {}", owner_.rank(), description), owner_.options().timeout_s,
                owner_.context_ptr(), [host](const std::string& message) { host->abort_after_timeout(message); });
  }

 private:
  TensorView stage(DType dtype, std::int64_t n) {
    // The first staged operand orders the copy stream behind the compute stream's queued work,
    // which produced the operands.
    if (state_->buffers.empty()) owner_.device_->copies_follow_compute();
    state_->buffers.push_back(owner_.device_->allocate_host(owner_.staging_tracker_, dtype, n));
    return state_->buffers.back().view();
  }

  StagedCommunicator& owner_;
  std::shared_ptr<StagedState> state_;
};

StagedCommunicator::StagedCommunicator(const HostFactory& make_host, std::unique_ptr<StagingDevice> device)
    : Communicator(CommOptions{}), device_(std::move(device)), host_(make_host(staging_tracker_)) {
  ZT_CHECK(device_ != nullptr && host_ != nullptr);
  set_options(host_->options());
}

StagedCommunicator::~StagedCommunicator() = default;

void StagedCommunicator::set_context(std::string context) {
  host_->set_context(context);
  Communicator::set_context(std::move(context));
}

void StagedCommunicator::set_options(const CommOptions& options) {
  host_->set_options(options);
  Communicator::set_options(options);
}

Work StagedCommunicator::all_gather(TensorView send, TensorView recv) {
  ZT_CHECK(send.dtype == recv.dtype, "all_gather: send is {}, recv {}", dtype_name(send.dtype), dtype_name(recv.dtype));
  ZT_CHECK(recv.numel() == send.numel() * world_size(), "all_gather: recv has {} elements, needs {} x {}", recv.numel(),
           world_size(), send.numel());
  count_volume(recv.numel(), recv.dtype);
  Collective c(*this);
  const std::int64_t n = send.numel();
  const bool in_place =
      send.device == recv.device &&
      send.data == static_cast<char*>(recv.data) + rank() * static_cast<std::int64_t>(send.size_bytes());
  const TensorView host_recv = c.output(recv);
  TensorView host_send;
  if (in_place && c.staged(recv)) {  // this rank's slice lands in its place in the staged recv
    host_send = host_recv.slice(rank() * n, n);
    c.copy_in(host_send, send);
  } else {
    host_send = c.input(send);
  }
  return c.start([&] { return host_->all_gather(host_send, host_recv); }, describe("all_gather", recv));
}

Work StagedCommunicator::all_to_all(TensorView send, TensorView recv) {
  ZT_CHECK(send.dtype == recv.dtype && send.numel() == recv.numel(), "all_to_all: send and recv differ");
  count_volume(recv.numel(), recv.dtype);
  Collective c(*this);
  const TensorView host_send = c.input(send);
  const TensorView host_recv = c.output(recv);
  return c.start([&] { return host_->all_to_all(host_send, host_recv); }, describe("all_to_all", send));
}

Work StagedCommunicator::reduce_scatter(TensorView send, TensorView recv, ReduceOp op) {
  ZT_CHECK(send.numel() == recv.numel() * world_size(), "reduce_scatter: send has {} elements, needs {} x {}",
           send.numel(), world_size(), recv.numel());
  count_volume(send.numel(), DType::kF32);  // reductions move fp32
  Collective c(*this);
  // Separate host buffers even when recv is a slice of send (stage 1 reduces into its own slot).
  const TensorView host_send = c.input(send);
  const TensorView host_recv = c.output(recv);
  return c.start([&] { return host_->reduce_scatter(host_send, host_recv, op); }, describe("reduce_scatter", send));
}

Work StagedCommunicator::all_reduce(TensorView buf, ReduceOp op) {
  count_volume(buf.numel(), DType::kF32, 2);
  Collective c(*this);
  const TensorView host = c.in_place(buf, /*read=*/true);
  return c.start([&] { return host_->all_reduce(host, op); }, describe("all_reduce", buf));
}

Work StagedCommunicator::broadcast(TensorView buf, int root) {
  ZT_CHECK(root >= 0 && root < world_size(), "broadcast root {} outside the world of {}", root, world_size());
  Collective c(*this);
  const TensorView host = c.in_place(buf, /*read=*/rank() == root);  // the others' data is overwritten
  return c.start([&] { return host_->broadcast(host, root); }, describe("broadcast", buf));
}

}  // namespace zt
