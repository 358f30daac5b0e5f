// HybridCommunicator: two hops over two split communicators (see the header).
#include "engine/distributed/comm/hybrid_communicator.h"

#include <fmt/format.h>

#include <functional>
#include <optional>

#include "engine/base/core/check.h"

namespace zt {

namespace {

// A Work that waits for `first`, then starts the second collective `then()` and waits for it; past
// the timeout `abort` ends the job as the hops' own backend would (peers may be blocked in them).
Work chain(Work first, std::function<Work()> then, std::string description, const CommOptions& options,
           const std::string* context, std::function<void(const std::string&)> abort) {
  auto second = std::make_shared<std::optional<Work>>();
  auto head = std::make_shared<Work>(std::move(first));
  return Work(
      [head, second, then = std::move(then)] {
        if (!second->has_value()) {
          if (!head->test()) return false;
          *second = then();
        }
        return (*second)->test();
      },
      std::move(description), options.timeout_s, context, std::move(abort));
}

}  // namespace

HybridCommunicator::HybridCommunicator(Communicator& world, int group_size) : Communicator(world.options()) {
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

void HybridCommunicator::set_profiler(OpProfiler* profiler) {
  group_->set_profiler(profiler);
  replicas_->set_profiler(profiler);
  Communicator::set_profiler(profiler);
}

std::int64_t HybridCommunicator::elements_sent() const { return group_->elements_sent() + replicas_->elements_sent(); }

Work HybridCommunicator::all_gather(TensorView send, TensorView recv) { return group_->all_gather(send, recv); }

Work HybridCommunicator::reduce_scatter(TensorView send, TensorView recv, ReduceOp op) {
  Work inside = group_->reduce_scatter(send, recv, op);
  if (replicas_->world_size() == 1) return inside;
  return chain(
      std::move(inside), [this, recv, op] { return replicas_->all_reduce(recv, op); },
      fmt::format("hybrid reduce_scatter ({} x {}) inside the group, then across groups", recv.numel(),
                  dtype_name(recv.dtype)),
      options_, context_ptr(), [this](const std::string& message) { group_->abort_after_timeout(message); });
}

Work HybridCommunicator::all_reduce(TensorView buf, ReduceOp op) {
  Work inside = group_->all_reduce(buf, op);
  if (replicas_->world_size() == 1) return inside;
  return chain(
      std::move(inside), [this, buf, op] { return replicas_->all_reduce(buf, op); },
      fmt::format("hybrid all_reduce ({} x {}) inside the group, then across groups", buf.numel(),
                  dtype_name(buf.dtype)),
      options_, context_ptr(), [this](const std::string& message) { group_->abort_after_timeout(message); });
}

Work HybridCommunicator::broadcast(TensorView buf, int root) { return group_->broadcast(buf, root); }

void HybridCommunicator::barrier() {
  group_->barrier();
  replicas_->barrier();
}

}  // namespace zt
