// ZeroParamStore's gradient side: contributions added or lent in place, each unit's reduction
// started at grads_ready and finished in order, the step's zeroing, and the views the optimizer
// and the gradient norm read (the parameter side and the pass protocol: zero_param_store.cpp).
#include "engine/distributed/sharding/zero_param_store.h"

#include "engine/base/core/check.h"
#include "engine/distributed/sharding/global_order_fold.h"
#include "engine/distributed/sharding/grad_norm.h"
#include "kernels/ops.h"

namespace zt {

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
  } else if (pends(unit)) {
    // The micro-batch's (or the round's) gradient waits in its pending buffer: reduced alone, in
    // fp32, into an fp32 buffer added to the stored gradient in finish_oldest_reduction; or, the
    // step's first reduction at stages 2-3, into the gradient shard itself, which begin_step left
    // unwritten (StagePolicy::first_reduction_into_shard: round(r) there is round(0 + r)). Stages
    // 1-3 reduce-scatter it (a world of one only widens it), stage 0 (every micro-batch in hybrid
    // deterministic mode) all-reduces an fp32 copy of the unit.
    ZT_CHECK(!pending_full_grads_[u].empty(), "grads_ready for unit {} without a contribution", unit);
    const bool into_shard = policy_.first_reduction_into_shard && grads_zero_[u];
    grads_zero_[u] = false;
    const bool whole = policy_.all_reduces_whole_unit();
    Buffer reduced = into_shard ? Buffer{}
                                : ops::allocate(ctx_, tracker_, MemCategory::kCommBuffers, DType::kF32,
                                                whole ? s.numel : s.shard, false);
    const TensorView dest = into_shard ? grads_[u].view() : reduced.view();
    Work work;
    if (whole || policy_.solo) {
      ops::cast(ctx_, dest, pending_full_grads_[u].view().slice(0, dest.numel()));
      if (whole) work = comm_.all_reduce(dest, ReduceOp::kAvg);
    } else {
      work = comm_.reduce_scatter(pending_full_grads_[u].view(), dest, ReduceOp::kAvg);
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

bool ZeroParamStore::pends(int unit) const {
  return policy_.pends_unit(rounds_.empty() ? false : rounds_[static_cast<std::size_t>(unit)]);
}

bool ZeroParamStore::reduction_in_flight(int unit) const {
  for (const PendingReduction& r : reductions_) {
    if (r.unit == unit) return true;
  }
  return false;
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

}  // namespace zt
