// ZeroParamStore: per-stage storage, the parameter collectives of each ParamStore call and when
// each one is waited (see the header for the overlap rules), and the pass protocol. The gradient
// side (accumulation, reductions, the step's zeroing): zero_param_store_grads.cpp.
#include "engine/distributed/sharding/zero_param_store.h"

#include <fmt/format.h>

#include <cstdio>
#include <exception>

#include "engine/base/core/check.h"
#include "engine/distributed/comm/quantized_collectives.h"
#include "engine/distributed/sharding/global_order_fold.h"
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

// A collective still in flight writes into this store's buffers from the communicator's worker
// (or its staging's copies) after they are freed: a publish is waited only at its unit's next
// acquire, which a run that ends without another pass (stopped by a signal, no save asked) never
// makes. Every rank issued them, in one order, so they complete: waited for here. Not while an
// exception unwinds the run: a peer may never join, and the job is failing. The collectives then
// run on until the communicator's teardown (MPI_Abort, ncclCommAbort) ends them, so their Works
// and every buffer of the store are kept to the end of the process instead (keep_until_exit).
// (Inside a catch block no exception is unwinding: an owner that destroys a store there, after a
// peer failed, would wait up to the timeout.)
ZeroParamStore::~ZeroParamStore() {
  if (std::uncaught_exceptions() > 0) {
    keep_in_flight_until_exit();
    return;
  }
  try {
    for (Work& w : publishes_) w.wait();
    for (Work& w : gathers_) w.wait();
    for (PendingReduction& r : reductions_) r.work.wait();
  } catch (const std::exception& e) {  // a destructor cannot throw: said, and the buffers go
    std::fprintf(stderr, "zerotrain: rank %d: collectives left in flight at the end: %s\n", comm_.rank(), e.what());
  }
}

void ZeroParamStore::keep_in_flight_until_exit() {
  bool in_flight = false;
  for (const Work& w : publishes_) in_flight |= !w.done();
  for (const Work& w : gathers_) in_flight |= !w.done();
  for (const PendingReduction& r : reductions_) in_flight |= !r.work.done();
  if (!in_flight) return;
  // Every collective's Work (the staging it owns), then every buffer one may name: which of them
  // an in-flight collective reads or writes is the state machine's business, and the job ends.
  for (std::vector<Work>* works : {&publishes_, &gathers_}) {
    for (Work& w : *works) keep_until_exit(std::move(w));
  }
  for (PendingReduction& r : reductions_) {
    keep_until_exit(std::move(r.work));
    keep_until_exit(std::move(r.reduced));
    keep_until_exit(std::move(r.widened));
  }
  for (std::vector<Buffer>* buffers : {&params_, &gathered_, &exact_shards_, &grads_, &pending_full_grads_}) {
    for (Buffer& b : *buffers) keep_until_exit(std::move(b));
  }
}

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
  // A training forward keeps a unit its backward reads when resharding after forward is off, and
  // always keeps such units still gathered after its last acquire: backward starts with them. A
  // unit the backward never reads (an untied table's scatter-add reads no weights) goes now.
  const bool in_training_forward = schedule_ != nullptr && pass == Pass::kForward && backward_follows_;
  const bool keep =
      in_training_forward && backward_reads_[u] && (!options_.reshard_after_forward || cursor_ > last_acquire_);
  if (!keep) free_gathered(unit);
}

void ZeroParamStore::begin_pass(Pass pass, const PassSchedule& schedule, const PassSchedule* backward) {
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
  backward_follows_ = pass == Pass::kForward && backward != nullptr;
  if (backward_follows_) backward_reads_ = units_acquired(*backward, state_.size());
  if (pass == Pass::kBackward) rounds_ = units_reduced_in_rounds(schedule, state_.size());
  if (pass == Pass::kBackward && policy_.folds) rounds_left_ = grads_ready_rounds(schedule, state_.size());
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

void ZeroParamStore::gather_optimizer_shards(TensorView shard, TensorView full) {
  ZT_CHECK(schedule_ == nullptr, "gather_optimizer_shards inside a pass");
  if (opt_layout_.world_size() == 1) {
    ops::copy(ctx_, full, shard);
  } else {
    comm_.all_gather(shard, full).wait();
  }
}

}  // namespace zt
