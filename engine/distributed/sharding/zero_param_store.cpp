// ZeroParamStore: per-stage storage, the collectives of each ParamStore call, and when each one
// is waited (see the header for the overlap rules).
#include "engine/distributed/sharding/zero_param_store.h"

#include <fmt/format.h>

#include "engine/base/core/check.h"
#include "engine/distributed/comm/quantized_collectives.h"
#include "engine/distributed/sharding/global_order_fold.h"
#include "engine/distributed/sharding/grad_norm.h"
#include "kernels/ops.h"

namespace zt {

namespace {

const char* op_name(UnitOp op) {
  switch (op) {
    case UnitOp::kAcquire: return "acquire_params";
    case UnitOp::kRelease: return "release_params";
    case UnitOp::kAccumulate: return "accumulate_grads";
    case UnitOp::kGradsReady: return "grads_ready";
  }
  return "?";
}

}  // namespace

ZeroParamStore::ZeroParamStore(const ParamTable& table, DType param_dtype, const ZeroOptions& options,
                               Communicator& comm, MemoryTracker& tracker, const ExecContext& ctx)
    : table_(table),
      dtype_(param_dtype),
      options_(options),
      comm_(comm),
      tracker_(tracker),
      ctx_(ctx),
      policy_(make_stage_policy(options, comm.world_size(), param_dtype)),
      layout_(table, comm.world_size(), comm.rank()),
      opt_layout_(table, policy_.shards_optimizer() ? comm.world_size() : 1,
                  policy_.shards_optimizer() ? comm.rank() : 0) {
  ZT_CHECK(options.prefetch_units >= 0 && options.max_inflight_reductions >= 1);
  const std::size_t units = table.units().size();
  gathered_.resize(units);
  gathers_.resize(units);
  publishes_.resize(units);
  pending_full_grads_.resize(units);
  in_use_.assign(units, false);
  grads_zero_.assign(units, true);  // allocated zero-filled
  pending_in_place_.assign(units, false);
  for (std::size_t u = 0; u < units; ++u) {
    const ShardSizes s = shard_sizes(layout_.unit(static_cast<int>(u)).numel, comm.world_size());
    const bool sharded = policy_.params_sharded(s.numel);
    sharded_.push_back(sharded);
    state_.push_back(sharded ? UnitState::kSharded : UnitState::kGathered);
    params_.push_back(ops::allocate(ctx, tracker, MemCategory::kParameters, dtype_, policy_.params(s).numel));
    const std::int64_t exact = policy_.exact_shard(s).numel;
    exact_shards_.push_back(exact > 0 ? ops::allocate(ctx, tracker, MemCategory::kParameters, dtype_, exact)
                                      : Buffer{});
    grads_.push_back(ops::allocate(ctx, tracker, MemCategory::kGradients, policy_.grad_dtype, policy_.grads(s).numel));
  }
}

// Collectives still in flight here mean an error is unwinding the run; the job is failing and
// MPI_Abort follows, so nothing waits for them.
ZeroParamStore::~ZeroParamStore() = default;

TensorView ZeroParamStore::full_params(int unit) const {
  const std::int64_t n = layout_.unit(unit).numel;
  const std::size_t u = static_cast<std::size_t>(unit);
  return sharded_[u] && !policy_.solo ? gathered_[u].view().slice(0, n) : params_[u].view().slice(0, n);
}

void ZeroParamStore::follow_schedule(UnitOp op, int unit) {
  if (schedule_ == nullptr) return;
  const UnitEvent expected = cursor_ < schedule_->size() ? (*schedule_)[cursor_] : UnitEvent{op, -1};
  if (expected != UnitEvent{op, unit}) {
    // Every rank runs this schedule (the ranks compared it before the first step), so each call's
    // index and unit is the collective sequence every rank follows: a rank that departs from it
    // stops here, at its first departure, and ends the job as a collective's timeout would (MPI:
    // print and abort, since unwinding to MPI_Finalize would wait for ranks blocked in that
    // unit's collective), instead of leaving them waiting until the timeout.
    const std::string message = fmt::format(
        "rank {} departed from the unit schedule every rank follows, at {}: the {} pass's call {} is {}(unit "
        "{}), but the schedule says {}(unit {}) (the other ranks wait in that call's collective)",
        comm_.rank(), *comm_.context_ptr(), pass_ == Pass::kForward ? "forward" : "backward", cursor_, op_name(op),
        unit, op_name(expected.op), expected.unit);
    if (comm_.world_size() > 1) comm_.abort_after_timeout(message);
    throw_runtime_error("{}", message);
  }
  ++cursor_;
}

void ZeroParamStore::start_gather(int unit) {
  const std::size_t u = static_cast<std::size_t>(unit);
  ZT_CHECK(state_[u] == UnitState::kSharded, "unit {}: gather started while not sharded", unit);
  state_[u] = UnitState::kGathering;
  if (policy_.solo) return;  // the shard is the whole unit (gathers_[u] stays done)
  gathered_[u] = ops::allocate(ctx_, tracker_, MemCategory::kParameters, dtype_, layout_.unit(unit).padded, false);
  gathers_[u] = gather_params(params_[u].view(), gathered_[u].view());
}

Work ZeroParamStore::gather_params(TensorView shard, TensorView whole) {
  if (policy_.quantized_gathers) return all_gather_int8(comm_, ctx_, tracker_, shard, whole);
  return comm_.all_gather(shard, whole);
}

void ZeroParamStore::free_gathered(int unit) {
  const std::size_t u = static_cast<std::size_t>(unit);
  ZT_CHECK(state_[u] == UnitState::kGathered && !in_use_[u], "unit {}: freed while gathering or in use", unit);
  gathered_[u].reset();  // reshard: the full unit exists only while it is used
  state_[u] = UnitState::kSharded;
}

// Gathers the units of the next `prefetch_units` acquires of the schedule that are still sharded,
// so their all-gathers run while the current unit computes (FSDP's forward/backward prefetch).
void ZeroParamStore::prefetch() {
  if (schedule_ == nullptr || !options_.overlap_comm) return;
  for_next_acquires(*schedule_, cursor_, options_.prefetch_units, [&](int unit) {
    const std::size_t u = static_cast<std::size_t>(unit);
    if (sharded_[u] && state_[u] == UnitState::kSharded) start_gather(unit);
  });
}

void ZeroParamStore::wait_published(int unit) {
  Work& w = publishes_[static_cast<std::size_t>(unit)];
  if (!w.done()) w.wait();
}

TensorView ZeroParamStore::acquire_params(int unit, Pass) {
  follow_schedule(UnitOp::kAcquire, unit);
  const std::size_t u = static_cast<std::size_t>(unit);
  ZT_CHECK(!in_use_[u], "unit {} acquired twice", unit);
  if (sharded_[u]) {
    if (state_[u] == UnitState::kSharded) start_gather(unit);
    if (state_[u] == UnitState::kGathering) {
      gathers_[u].wait();
      state_[u] = UnitState::kGathered;
    }
  } else {
    wait_published(unit);
  }
  ZT_CHECK(state_[u] == UnitState::kGathered);
  in_use_[u] = true;
  prefetch();
  return full_params(unit);
}

void ZeroParamStore::release_params(int unit, Pass pass) {
  follow_schedule(UnitOp::kRelease, unit);
  const std::size_t u = static_cast<std::size_t>(unit);
  ZT_CHECK(in_use_[u] && state_[u] == UnitState::kGathered, "unit {} released while not acquired", unit);
  in_use_[u] = false;
  if (!sharded_[u]) return;
  // A training forward keeps a unit for its backward when resharding after forward is off, and
  // always keeps the units still gathered after its last acquire: backward starts with them.
  const bool in_training_forward = schedule_ != nullptr && pass == Pass::kForward && backward_follows_;
  const bool keep = in_training_forward && (!options_.reshard_after_forward || cursor_ > last_acquire_);
  if (!keep) free_gathered(unit);
}

TensorView ZeroParamStore::in_place_grads(int unit) {
  const std::size_t u = static_cast<std::size_t>(unit);
  const std::int64_t n = layout_.unit(unit).numel;
  if (!pends(unit)) return grads_zero_[u] ? grads_[u].view().slice(0, n) : TensorView{};
  // A unit that pends: a new pending buffer (zero), unless it has one or an earlier round is in
  // its reduction. It comes one unit's backward math before accumulate_grads, and no gradient
  // buffer is freed in between, so the gradients' peak is the replay's.
  if (!pending_full_grads_[u].empty() || reduction_in_flight(unit)) return {};
  pending_full_grads_[u] = ops::allocate(ctx_, tracker_, MemCategory::kGradients, dtype_, layout_.unit(unit).padded);
  pending_in_place_[u] = true;
  return pending_full_grads_[u].view().slice(0, n);
}

void ZeroParamStore::accumulate_grads(int unit, TensorView grad) {
  follow_schedule(UnitOp::kAccumulate, unit);
  const std::size_t u = static_cast<std::size_t>(unit);
  const std::int64_t n = layout_.unit(unit).numel;
  if (!pends(unit)) {
    const TensorView own = grads_[u].view().slice(0, n);
    if (grad.data == own.data) {
      ZT_CHECK(grads_zero_[u] && grad.dtype == own.dtype && grad.numel() == n,
               "unit {}: an in-place gradient that in_place_grads did not offer", unit);
    } else {
      ops::accumulate_into(ctx_, own, grad);
    }
    grads_zero_[u] = false;
    return;
  }
  // A unit reduced in rounds: the last round's buffer may still be in its reduction.
  while (reduction_in_flight(unit)) finish_oldest_reduction();
  if (pending_full_grads_[u].empty()) {
    pending_full_grads_[u] = ops::allocate(ctx_, tracker_, MemCategory::kGradients, dtype_, layout_.unit(unit).padded);
  }
  const TensorView pending = pending_full_grads_[u].view().slice(0, n);
  const bool offered = pending_in_place_[u];
  pending_in_place_[u] = false;
  if (grad.data == pending.data) {
    ZT_CHECK(offered && grad.dtype == pending.dtype && grad.numel() == n,
             "unit {}: an in-place gradient that in_place_grads did not offer", unit);
    return;  // the kernels added the contribution there
  }
  ops::accumulate_into(ctx_, pending, grad);
}

void ZeroParamStore::grads_ready(int unit) {
  follow_schedule(UnitOp::kGradsReady, unit);
  const std::size_t u = static_cast<std::size_t>(unit);
  const UnitShard& s = layout_.unit(unit);
  if (policy_.folds) {
    // Deterministic mode ([Note: folding in global micro-batch order]): the unit's earlier rounds
    // of this micro-batch stay in its pending buffer for the last one, then its shards go out.
    if (--rounds_left_[u] > 0) return;
    ZT_CHECK(!pending_full_grads_[u].empty(), "grads_ready for unit {} without a contribution", unit);
    FoldExchange x = start_fold_exchange(comm_, ctx_, tracker_, pending_full_grads_[u].view(), s.shard);
    reductions_.push_back({unit, std::move(x.work), std::move(x.received), std::move(x.widened)});
  } else if (pends(unit) && policy_.first_reduction_into_shard && grads_zero_[u]) {
    // The step's first reduction of the unit lands in its gradient shard, which begin_step left
    // unwritten (StagePolicy::first_reduction_into_shard): round(r) there is round(0 + r).
    ZT_CHECK(!pending_full_grads_[u].empty(), "grads_ready for unit {} without a contribution", unit);
    grads_zero_[u] = false;
    const TensorView shard = grads_[u].view();
    Work work;
    if (policy_.solo) {
      ops::cast(ctx_, shard, pending_full_grads_[u].view().slice(0, shard.numel()));
    } else {
      work = comm_.reduce_scatter(pending_full_grads_[u].view(), shard, ReduceOp::kAvg);
    }
    reductions_.push_back({unit, std::move(work), {}, {}});
  } else if (pends(unit)) {
    // The micro-batch's (or the round's) gradient waits in its pending buffer: reduced alone, in fp32, and added to
    // the stored gradient in finish_oldest_reduction. Stages 1-3 reduce-scatter it into a shard
    // (a world of one only widens it), stage 0 (every micro-batch in hybrid deterministic mode) all-reduces
    // an fp32 copy of the unit.
    ZT_CHECK(!pending_full_grads_[u].empty(), "grads_ready for unit {} without a contribution", unit);
    grads_zero_[u] = false;
    const bool whole = policy_.all_reduces_whole_unit();
    Buffer reduced =
        ops::allocate(ctx_, tracker_, MemCategory::kCommBuffers, DType::kF32, whole ? s.numel : s.shard, false);
    Work work;
    if (whole || policy_.solo) {
      ops::cast(ctx_, reduced.view(), pending_full_grads_[u].view().slice(0, reduced.numel()));
      if (whole) work = comm_.all_reduce(reduced.view(), ReduceOp::kAvg);
    } else {
      work = comm_.reduce_scatter(pending_full_grads_[u].view(), reduced.view(), ReduceOp::kAvg);
    }
    reductions_.push_back({unit, std::move(work), std::move(reduced), {}});
  } else if (policy_.solo) {
    // Averaged over one rank, the gradient accumulate_grads added is already its reduced shard.
  } else if (policy_.all_reduces_whole_unit()) {
    if (last_micro_batch_) {
      reductions_.push_back({unit, comm_.all_reduce(grads_[u].view().slice(0, s.numel), ReduceOp::kAvg), {}, {}});
    }
  } else {
    // Stage 1, in place: the reduced shard lands in this rank's own slice of the full gradient buffer.
    if (last_micro_batch_) {
      const TensorView own_slot = grads_[u].view().slice(s.offset, s.shard);
      reductions_.push_back({unit, comm_.reduce_scatter(grads_[u].view(), own_slot, ReduceOp::kAvg), {}, {}});
    }
  }
  const std::size_t limit =
      schedule_ != nullptr && options_.overlap_comm ? static_cast<std::size_t>(options_.max_inflight_reductions) : 0;
  while (reductions_.size() > limit || inflight_pending_bytes_over_bound()) finish_oldest_reduction();
}

bool ZeroParamStore::inflight_pending_bytes_over_bound() const {
  if (options_.max_inflight_reduction_bytes <= 0) return false;
  std::int64_t bytes = 0;
  for (const PendingReduction& r : reductions_) {
    if (pends(r.unit)) {
      bytes += static_cast<std::int64_t>(pending_full_grads_[static_cast<std::size_t>(r.unit)].size_bytes());
    }
  }
  return bytes > options_.max_inflight_reduction_bytes;
}

void ZeroParamStore::finish_oldest_reduction() {
  PendingReduction& r = reductions_.front();
  r.work.wait();
  const std::size_t u = static_cast<std::size_t>(r.unit);
  if (policy_.folds) {
    fold_parts(ctx_, fold_target(r.unit), pending_full_grads_[u].view(), r.reduced, r.widened);
  } else if (pends(r.unit) && !r.reduced.empty()) {  // (none: the reduction wrote the shard itself)
    ops::accumulate_into(ctx_, grad_shard(r.unit), r.reduced.view());
  }
  pending_full_grads_[u].reset();  // a full gradient lives only until its reduction (if it pends)
  reductions_.pop_front();
}

void ZeroParamStore::begin_pass(Pass pass, const PassSchedule& schedule, bool backward_follows) {
  ZT_CHECK(schedule_ == nullptr, "a pass began inside another");
  ZT_CHECK(reductions_.empty(), "a pass began with gradient reductions in flight");
  if (pass == Pass::kForward) {
    // Units a training forward kept for a backward that never came (the caller dropped it).
    for (std::size_t u = 0; u < state_.size(); ++u) {
      if (sharded_[u] && state_[u] == UnitState::kGathered) free_gathered(static_cast<int>(u));
    }
  }
  schedule_ = &schedule;
  cursor_ = 0;
  last_acquire_ = last_acquire_index(schedule);
  pass_ = pass;
  backward_follows_ = pass == Pass::kForward && backward_follows;
  if (pass == Pass::kBackward) rounds_ = units_reduced_in_rounds(schedule, state_.size());
  if (pass == Pass::kBackward && policy_.folds) rounds_left_ = grads_ready_rounds(schedule, state_.size());
}

bool ZeroParamStore::pends(int unit) const {
  return policy_.pends_unit(rounds_.empty() ? false : rounds_[static_cast<std::size_t>(unit)]);
}

bool ZeroParamStore::reduction_in_flight(int unit) const {
  for (const PendingReduction& r : reductions_) {
    if (r.unit == unit) return true;
  }
  return false;
}

void ZeroParamStore::end_pass(Pass pass) {
  ZT_CHECK(schedule_ != nullptr && pass == pass_, "end_pass without its begin_pass");
  ZT_CHECK(cursor_ == schedule_->size(), "the pass ended after {} of its {} scheduled calls", cursor_,
           schedule_->size());
  while (!reductions_.empty()) finish_oldest_reduction();
  if (pass == Pass::kBackward && last_micro_batch_ && policy_.first_reduction_into_shard) {
    // A shard begin_step left unwritten that no reduction wrote: zero, as the gradient it stands for.
    for (std::size_t u = 0; u < grads_.size(); ++u) {
      if (grads_zero_[u]) ops::fill_zero(ctx_, grads_[u].view());
    }
  }
  if (pass == Pass::kBackward && policy_.folds && policy_.all_reduces_whole_unit() && last_micro_batch_) {
    std::vector<TensorView> own, whole;  // stage 0 keeps the whole gradient
    for (std::size_t u = 0; u < grads_.size(); ++u) {
      own.push_back(fold_target(static_cast<int>(u)));
      whole.push_back(grads_[u].view());
    }
    gather_folded_units(comm_, own, whole);
  }
  for (std::size_t u = 0; u < state_.size(); ++u) {
    ZT_CHECK(!in_use_[u] && state_[u] != UnitState::kGathering, "unit {} still in use at the end of a pass", u);
    if (pass == Pass::kBackward || !backward_follows_) {
      ZT_CHECK(!sharded_[u] || state_[u] == UnitState::kSharded, "unit {} still gathered at the end of a pass", u);
    }
  }
  schedule_ = nullptr;
}

void ZeroParamStore::begin_step() {
  // Shards that the step's first reduction writes are zeroed only if none does (end_pass).
  if (!policy_.first_reduction_into_shard) {
    for (Buffer& g : grads_) ops::fill_zero(ctx_, g.view());
  }
  grads_zero_.assign(grads_zero_.size(), true);
}

void ZeroParamStore::set_micro_batch(int index, int count) { last_micro_batch_ = index + 1 == count; }

TensorView ZeroParamStore::grad_shard(int unit) const {
  const std::size_t u = static_cast<std::size_t>(unit);
  if (policy_.reduces_into_own_slice()) {
    return grads_[u].view().slice(layout_.unit(unit).offset, layout_.unit(unit).shard);
  }
  if (policy_.shards_grads()) return grads_[u].view();         // stages 2-3: the shard
  return grads_[u].view().slice(0, layout_.unit(unit).numel);  // stage 0: the whole (reduced) unit
}

TensorView ZeroParamStore::fold_target(int unit) const {
  if (!policy_.all_reduces_whole_unit()) return grad_shard(unit);  // stage 1's slice, stages 2-3's shard
  return grads_[static_cast<std::size_t>(unit)].view().slice(layout_.unit(unit).offset, layout_.unit(unit).shard);
}

TensorView ZeroParamStore::working_shard(int unit) const {
  const std::size_t u = static_cast<std::size_t>(unit);
  if (!policy_.shards_optimizer() || sharded_[u]) return params_[u].view();  // the whole unit, or the shard
  if (!exact_shards_[u].empty()) return exact_shards_[u].view();
  return params_[u].view().slice(layout_.unit(unit).offset, layout_.unit(unit).shard);
}

void ZeroParamStore::publish_updated_params() {
  if (!policy_.publishes_params()) return;  // stage 0, or solo: the in-place gather of one rank moves nothing
  for (std::size_t u = 0; u < params_.size(); ++u) {
    if (sharded_[u]) continue;  // the shard is the parameter: the next acquire gathers it
    ZT_CHECK(publishes_[u].done(), "unit {}: parameters published twice without use", u);
    // In place: this rank's slice of the padded unit is both the send buffer and its destination
    // (quantized: the exact shard kept apart, decoded into every slice).
    publishes_[u] = gather_params(working_shard(static_cast<int>(u)), params_[u].view());
    if (!options_.overlap_comm || policy_.quantized_gathers) publishes_[u].wait();
  }
}

double ZeroParamStore::global_grad_sum_of_squares() {
  // Every stage sums the same N-way partition of the reduced gradient (layout_), so with
  // deterministic reductions the norm is bitwise the same whatever the stage.
  std::vector<TensorView> shards;
  for (std::size_t u = 0; u < grads_.size(); ++u) {
    const UnitShard& s = layout_.unit(static_cast<int>(u));
    shards.push_back(policy_.shards_grads() ? grads_[u].view().slice(0, s.live())
                                            : grads_[u].view().slice(s.begin, s.live()));
  }
  return global_sum_of_squares(comm_, ctx_, shards, /*exact=*/policy_.folds);  // folding: the same at every N
}

void ZeroParamStore::gather_unit_f32(int unit, float* out) {
  ZT_CHECK(schedule_ == nullptr, "gather_unit_f32 inside a pass");
  const std::int64_t n = layout_.unit(unit).numel;
  const TensorView full = acquire_params(unit, Pass::kForward);
  const TensorView host_out{out, DType::kF32, Device::kCPU, Shape{n}};
  if (full.device == Device::kCPU) {
    ops::cast(ctx_, host_out, full);
  } else {  // cast on the device, then one copy to the host
    const Buffer staged = ops::allocate(ctx_, tracker_, MemCategory::kWorkspace, DType::kF32, n, false);
    ops::cast(ctx_, staged.view(), full);
    ops::copy(ctx_, host_out, staged.view());
  }
  release_params(unit, Pass::kForward);
}

void ZeroParamStore::gather_optimizer_shards(TensorView shard, TensorView full) {
  ZT_CHECK(schedule_ == nullptr, "gather_optimizer_shards inside a pass");
  if (opt_layout_.world_size() == 1) {
    ops::copy(ctx_, full, shard);
  } else {
    comm_.all_gather(shard, full).wait();
  }
}

}  // namespace zt
