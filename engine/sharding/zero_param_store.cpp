// ZeroParamStore: per-stage storage and the collectives of each ParamStore call.
#include "engine/sharding/zero_param_store.h"

#include <cstring>

#include "engine/core/check.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/residual.h"

namespace zt {


ZeroParamStore::ZeroParamStore(const ParamTable& table, DType param_dtype, int stage, Communicator& comm,
                               MemoryTracker& tracker, const ExecContext& ctx)
    : table_(table),
      dtype_(param_dtype),
      stage_(stage),
      comm_(comm),
      tracker_(tracker),
      ctx_(ctx),
      layout_(table, comm.world_size(), comm.rank()),
      opt_layout_(table, stage == 0 ? 1 : comm.world_size(), stage == 0 ? 0 : comm.rank()) {
  ZT_CHECK(stage >= 0 && stage <= 3, "ZeRO stage {}", stage);
  const std::size_t units = table.units().size();
  gathered_.resize(units);
  pending_full_grads_.resize(units);
  state_.assign(units, stage == 3 ? UnitState::kSharded : UnitState::kGathered);
  for (std::size_t u = 0; u < units; ++u) {
    const UnitShard& s = layout_.unit(static_cast<int>(u));
    const std::int64_t param_numel = stage == 0 ? s.numel : stage == 3 ? s.shard : s.padded;
    const std::int64_t grad_numel = stage == 0 ? s.numel : stage == 1 ? s.padded : s.shard;
    params_.emplace_back(tracker, MemCategory::kParameters, dtype_, param_numel);
    grads_.emplace_back(tracker, MemCategory::kGradients, dtype_, grad_numel);
  }
}

ZeroParamStore::~ZeroParamStore() = default;

TensorView ZeroParamStore::full_params(int unit) const {
  const std::int64_t n = layout_.unit(unit).numel;
  const std::size_t u = static_cast<std::size_t>(unit);
  return stage_ == 3 ? gathered_[u].view().slice(0, n) : params_[u].view().slice(0, n);
}

TensorView ZeroParamStore::acquire_params(int unit, Pass) {
  const std::size_t u = static_cast<std::size_t>(unit);
  if (stage_ == 3) {
    ZT_CHECK(state_[u] == UnitState::kSharded, "unit {} acquired twice", unit);
    gathered_[u] = Buffer(tracker_, MemCategory::kParameters, dtype_, layout_.unit(unit).padded, Device::kCPU, false);
    comm_.all_gather(params_[u].view(), gathered_[u].view()).wait();
    state_[u] = UnitState::kGathered;
  }
  ZT_CHECK(state_[u] == UnitState::kGathered);
  return full_params(unit);
}

void ZeroParamStore::release_params(int unit, Pass) {
  const std::size_t u = static_cast<std::size_t>(unit);
  ZT_CHECK(state_[u] == UnitState::kGathered, "unit {} released while not gathered", unit);
  if (stage_ == 3) {
    gathered_[u].reset();  // reshard after use: the full unit exists only while it computes
    state_[u] = UnitState::kSharded;
  }
}

void ZeroParamStore::accumulate_grads(int unit, TensorView grad_f32) {
  const std::size_t u = static_cast<std::size_t>(unit);
  const std::int64_t n = layout_.unit(unit).numel;
  if (stage_ <= 1) {
    cpu::accumulate_into(ctx_, grads_[u].view().slice(0, n), grad_f32);
    return;
  }
  if (pending_full_grads_[u].empty()) {
    pending_full_grads_[u] = Buffer(tracker_, MemCategory::kGradients, dtype_, layout_.unit(unit).padded);
  }
  cpu::accumulate_into(ctx_, pending_full_grads_[u].view().slice(0, n), grad_f32);
}

void ZeroParamStore::grads_ready(int unit) {
  const std::size_t u = static_cast<std::size_t>(unit);
  const UnitShard& s = layout_.unit(unit);
  if (stage_ == 0) {
    if (last_micro_batch_) comm_.all_reduce(grads_[u].view().slice(0, s.numel), ReduceOp::kAvg).wait();
  } else if (stage_ == 1) {
    // In place: the reduced shard lands in this rank's own slice of the full gradient buffer.
    if (last_micro_batch_) {
      comm_.reduce_scatter(grads_[u].view(), grads_[u].view().slice(s.begin, s.shard), ReduceOp::kAvg).wait();
    }
  } else {
    ZT_CHECK(!pending_full_grads_[u].empty(), "grads_ready for unit {} without a contribution", unit);
    Buffer reduced(tracker_, MemCategory::kCommBuffers, DType::kF32, s.shard, Device::kCPU, false);
    comm_.reduce_scatter(pending_full_grads_[u].view(), reduced.view(), ReduceOp::kAvg).wait();
    cpu::accumulate_into(ctx_, grads_[u].view(), reduced.view());
    pending_full_grads_[u].reset();  // the full gradient lived only until its reduce-scatter
  }
}

void ZeroParamStore::begin_step() {
  for (Buffer& g : grads_) std::memset(g.data(), 0, static_cast<std::size_t>(g.size_bytes()));
}

void ZeroParamStore::set_micro_batch(int index, int count) { last_micro_batch_ = index + 1 == count; }

TensorView ZeroParamStore::grad_shard(int unit) const {
  const std::size_t u = static_cast<std::size_t>(unit);
  if (stage_ == 1) return grads_[u].view().slice(layout_.unit(unit).begin, layout_.unit(unit).shard);
  return grads_[u].view();  // stage 0: the whole (all-reduced) unit; stages 2-3: the shard
}

TensorView ZeroParamStore::working_shard(int unit) const {
  const std::size_t u = static_cast<std::size_t>(unit);
  if (stage_ == 1 || stage_ == 2) return params_[u].view().slice(layout_.unit(unit).begin, layout_.unit(unit).shard);
  return params_[u].view();  // stage 0: the whole unit; stage 3: the shard
}

void ZeroParamStore::publish_updated_params() {
  if (stage_ != 1 && stage_ != 2) return;
  for (std::size_t u = 0; u < params_.size(); ++u) {
    const UnitShard& s = layout_.unit(static_cast<int>(u));
    Buffer send(tracker_, MemCategory::kCommBuffers, dtype_, s.shard, Device::kCPU, false);
    std::memcpy(send.data(), working_shard(static_cast<int>(u)).data, static_cast<std::size_t>(send.size_bytes()));
    comm_.all_gather(send.view(), params_[u].view()).wait();
  }
}

double ZeroParamStore::global_grad_sum_of_squares() {
  // Every stage sums the same N-way partition of the reduced gradient (layout_), so with
  // deterministic reductions the norm is bitwise the same whatever the stage.
  double partial = 0.0;
  for (std::size_t u = 0; u < grads_.size(); ++u) {
    const UnitShard& s = layout_.unit(static_cast<int>(u));
    const TensorView g = stage_ <= 1 ? grads_[u].view().slice(s.begin, s.live()) : grads_[u].view().slice(0, s.live());
    partial += cpu::sum_of_squares(ctx_, g);
  }
  std::vector<double> partials(static_cast<std::size_t>(comm_.world_size()));
  comm_.all_gather(TensorView{&partial, DType::kI32, Device::kCPU, Shape{2}},  // a double as 8 raw bytes
                   TensorView{partials.data(), DType::kI32, Device::kCPU, Shape{2 * comm_.world_size()}})
      .wait();
  double total = 0.0;
  for (double p : partials) total += p;  // rank order
  return total;
}

void ZeroParamStore::gather_unit_f32(int unit, float* out) {
  const std::int64_t n = layout_.unit(unit).numel;
  const TensorView full = acquire_params(unit, Pass::kForward);
  cpu::cast(ctx_, TensorView{out, DType::kF32, Device::kCPU, Shape{n}}, full);
  release_params(unit, Pass::kForward);
}

}  // namespace zt
