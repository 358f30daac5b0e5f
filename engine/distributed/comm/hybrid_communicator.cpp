// HybridCommunicator: two hops over two split communicators (see the header).
#include "engine/distributed/comm/hybrid_communicator.h"

#include <fmt/format.h>

#include <optional>

#include "engine/base/core/check.h"

namespace zt {

HybridCommunicator::HybridCommunicator(Communicator& world, int group_size, WireDType across, MemoryTracker* tracker,
                                       const ExecContext& ctx)
    : Communicator(world.options()), across_(across), tracker_(tracker), ctx_(ctx) {
  ZT_CHECK(across == WireDType::kExact || tracker != nullptr, "an encoded second hop stages in a tracker's memory");
  const int N = world.world_size(), r = world.rank();
  if (group_size < 1 || N % group_size != 0) {
    throw_input_error("zero.shard_group_size = {} must divide the {} ranks", group_size, N);
  }
  group_index_ = r / group_size;
  group_ = world.split(group_index_, r);       // ranks g*i .. g*i + g-1
  replicas_ = world.split(r % group_size, r);  // the same position in every group
  ZT_CHECK(group_->world_size() == group_size && replicas_->world_size() == N / group_size,
           "split of {} ranks into groups of {}: {} in the group, {} replicas", N, group_size, group_->world_size(),
           replicas_->world_size());
}

HybridCommunicator::HybridCommunicator(std::unique_ptr<Communicator> world, int group_size, WireDType across,
                                       MemoryTracker* tracker, const ExecContext& ctx)
    : HybridCommunicator(*world, group_size, across, tracker, ctx) {
  owned_world_ = std::move(world);
}

HybridCommunicator::~HybridCommunicator() = default;

std::string HybridCommunicator::backend_name() const {
  return fmt::format("{} (groups of {}, {} across)", group_->backend_name(), group_->world_size(),
                     replicas_->world_size());
}

void HybridCommunicator::set_context(std::string context) {
  group_->set_context(context);
  replicas_->set_context(context);
  Communicator::set_context(std::move(context));
}

void HybridCommunicator::set_options(const CommOptions& options) {
  group_->set_options(options);
  replicas_->set_options(options);
  Communicator::set_options(options);
}

void HybridCommunicator::set_profiler(OpProfiler* profiler) {
  group_->set_profiler(profiler);
  replicas_->set_profiler(profiler);
  Communicator::set_profiler(profiler);
}

std::int64_t HybridCommunicator::elements_sent() const { return group_->elements_sent() + replicas_->elements_sent(); }
std::int64_t HybridCommunicator::bytes_sent() const { return group_->bytes_sent() + replicas_->bytes_sent(); }

Work HybridCommunicator::all_gather(TensorView send, TensorView recv) { return group_->all_gather(send, recv); }

bool HybridCommunicator::starts_across_at_once() const {
  return across_ == WireDType::kExact && group_->orders_on_device() && replicas_->orders_on_device();
}

// [Note: the second hop, queued at once on the device]
// Where both hops order their collectives on the device (NCCL), the hop across the groups is queued
// with the first, behind it on the GPU, so it overlaps the compute queued until the caller waits
// (though not the in-group collectives: the one launch order queues them behind it). Started inside the
// wait, as the host backends must (their second hop reads the first's values on the host) and the
// encoded hop does (its phases meet on the host), it ran on NCCL after everything queued by then,
// and the compute stream waited for all of it. Its staging (an fp32 copy of a bf16 result) is then
// held from the start to the wait, as schedule_replay counts it.
Work HybridCommunicator::then_across(Work inside, TensorView result, ReduceOp op, const char* what) {
  if (replicas_->world_size() == 1) return inside;
  auto head = std::make_shared<Work>(std::move(inside));
  auto across = std::make_shared<std::optional<Work>>();
  // Device results only: a host result lands when the first hop's wait copies it back.
  if (starts_across_at_once() && result.device == Device::kCUDA) *across = replicas_->all_reduce(result, op);
  return Work(
      [this, head, across, result, op] {
        if (!head->test()) return false;
        if (!across->has_value()) {  // started inside the caller's wait
          *across = across_ == WireDType::kExact ? replicas_->all_reduce(result, op)
                                                 : all_reduce_encoded(*replicas_, ctx_, *tracker_, result, op, across_);
        }
        return (*across)->test();
      },
      fmt::format("rank {} (group {}): hybrid {} ({} x {}) inside the group, then across groups{}",
                  group_index_ * group_->world_size() + group_->rank(), group_index_, what, result.numel(),
                  dtype_name(result.dtype),
                  across_ == WireDType::kExact ? "" : fmt::format(" as {}", wire_dtype_name(across_))),
      options_.timeout_s, context_ptr(),
      // Past the timeout, end the job as the hops' own backend would (peers may be blocked in them).
      [this](const std::string& message) { abort_after_timeout(message); });
}

Work HybridCommunicator::reduce_scatter(TensorView send, TensorView recv, ReduceOp op) {
  return then_across(group_->reduce_scatter(send, recv, op), recv, op, "reduce_scatter");
}

Work HybridCommunicator::all_reduce(TensorView buf, ReduceOp op) {
  return then_across(group_->all_reduce(buf, op), buf, op, "all_reduce");
}

Work HybridCommunicator::all_to_all(TensorView send, TensorView recv) { return group_->all_to_all(send, recv); }

Work HybridCommunicator::broadcast(TensorView buf, int root) { return group_->broadcast(buf, root); }

void HybridCommunicator::barrier() {
  group_->barrier();
  replicas_->barrier();
}

}  // namespace zt
