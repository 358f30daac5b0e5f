// The replay: ZeroParamStore's decisions re-stated over byte counts, event by event.
#include "engine/distributed/sharding/schedule_replay.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <vector>

#include "engine/base/core/check.h"
#include "engine/distributed/comm/quantized_collectives.h"
#include "engine/distributed/sharding/grad_norm.h"
#include "engine/distributed/sharding/stage_policy.h"

namespace zt {

namespace {

constexpr std::int64_t kF32 = 4;

struct Counter {
  std::int64_t now = 0, peak = 0;
  void add(std::int64_t b) {
    now += b;
    peak = std::max(peak, now);
  }
  void sub(std::int64_t b) { now -= b; }
};

class Replay {
 public:
  Replay(const ParamTable& table, DType dtype, const ZeroOptions& zero, int world, bool deterministic,
         CollectiveBackend backend, int replica_groups)
      : zero_(zero),
        policy_(make_stage_policy(zero, world, dtype)),
        world_(world),
        replicas_(replica_groups),
        deterministic_(deterministic),
        nccl_(backend == CollectiveBackend::kNccl),
        staged_(backend == CollectiveBackend::kHostStaged),
        W_(dtype_size_bytes(dtype)),
        bf16_(dtype == DType::kBF16) {
    for (const UnitSpec& u : table.units()) {
      const ShardSizes s = shard_sizes(u.numel, world);
      numel_.push_back(s.numel);
      shard_.push_back(s.shard_numel);
      padded_.push_back(s.padded_numel);
      sharded_.push_back(policy_.params_sharded(u.numel));
    }
    const std::size_t n = numel_.size();
    gathered_.assign(n, false);
    landing_.assign(n, false);
    pending_.assign(n, false);
    written_.assign(n, false);
  }

  // `backward`: a forward's backward, whose units it keeps (ZeroParamStore::release_params).
  void pass(const PassSchedule& s, Pass pass, const PassSchedule* backward = nullptr) {
    const std::size_t last_acquire = last_acquire_index(s);
    const std::vector<bool> backward_reads =
        backward != nullptr ? units_acquired(*backward, numel_.size()) : std::vector<bool>(numel_.size(), false);
    if (pass == Pass::kBackward) rounds_ = units_reduced_in_rounds(s, numel_.size());
    if (pass == Pass::kBackward && policy_.folds) {  // folding reduces a unit at its last round only
      rounds_left_ = grads_ready_rounds(s, numel_.size());
    }
    for (std::size_t i = 0; i < s.size(); ++i) {
      const std::size_t u = static_cast<std::size_t>(s[i].unit);
      switch (s[i].op) {
        case UnitOp::kAcquire: {
          const std::int64_t bytes_before = volume_.bytes_in_group, before = volume_.collectives_in_group;
          gather(u);  // counts a gather only where no prefetch issued it: the acquire waits for it now
          volume_.exposed_gather_bytes += volume_.bytes_in_group - bytes_before;
          volume_.exposed_gathers += volume_.collectives_in_group - before;
          land(u);
          if (zero_.overlap_comm) {  // prefetch the next acquires' units
            for_next_acquires(s, i + 1, zero_.prefetch_units, [&](int v) { gather(static_cast<std::size_t>(v)); });
          }
          break;
        }
        case UnitOp::kRelease: {
          const bool keep =
              pass == Pass::kForward && backward_reads[u] && (!zero_.reshard_after_forward || i > last_acquire);
          if (sharded_[u] && !keep && gathered_[u]) {
            gathered_[u] = false;
            if (!policy_.solo) params_.sub(W_ * padded_[u]);
          }
          break;
        }
        case UnitOp::kAccumulate:
          // the unit's previous round may still be in its reduction
          while (pends(u) && in_flight(u)) finish_oldest();
          if (pends(u) && !pending_[u]) {
            pending_[u] = true;
            grads_.add(W_ * padded_[u]);
          }
          break;
        case UnitOp::kGradsReady: {
          if (policy_.folds && --rounds_left_[u] > 0) break;
          count_reduction(u);
          // StagePolicy::first_reduction_into_shard: the step's first reduction of the unit writes
          // its gradient shard, without the store's reduced buffer.
          const bool into_shard = policy_.first_reduction_into_shard && pends(u) && !written_[u];
          written_[u] = true;
          std::int64_t staged = staging(u, into_shard);
          // The hop across the groups, queued with the first on NCCL ([Note: the second hop, queued
          // at once on the device] in hybrid_communicator.cpp): its staging held until the wait.
          if (across_at_once() && issues_reduction(u)) staged += across_groups_staging(u);
          comm_.add(staged);
          inflight_.push_back({u, staged});
          const std::size_t limit = zero_.overlap_comm ? static_cast<std::size_t>(zero_.max_inflight_reductions) : 0;
          while (inflight_.size() > limit || inflight_pending_bytes_over_bound()) finish_oldest();
          break;
        }
      }
    }
    while (!inflight_.empty()) finish_oldest();
  }

  TransientPeaks peaks() const {
    std::int64_t publish = 0;
    for (std::size_t u = 0; u < numel_.size(); ++u) {
      if (policy_.keeps_exact_shard(numel_[u]))
        publish = std::max(publish, all_gather_int8_staging_bytes(shard_[u], world_));
    }
    return {params_.peak, grads_.peak, comm_.peak, publish};
  }

  // Volume counting (predict_step_volume): whether this pass's micro-batch is the step's last
  // (stages 0-1 without a pending buffer reduce only then), and the elements counted so far.
  void set_last_micro_batch(bool last) { last_micro_batch_ = last; }
  StepVolume& volume() { return volume_; }
  // What a micro-batch's counts depend on, between micro-batches (no reduction is in flight then):
  // two that start from equal states count the same.
  std::vector<bool> state_between_micro_batches() const {
    std::vector<bool> state = gathered_;
    for (const std::vector<bool>* v : {&landing_, &pending_, &written_, &rounds_}) {
      state.insert(state.end(), v->begin(), v->end());
    }
    return state;
  }
  // After the step: the publish of the units kept whole and the gradient norm's all-gather.
  void count_step_end() {
    if (policy_.solo) return;
    for (std::size_t u = 0; u < numel_.size(); ++u) {
      if (policy_.publishes_params() && !sharded_[u]) count_gather(u);
    }
    if (policy_.folds) {
      // Stage 0 gathers the folded shards after the last micro-batch; the norm's exact sums are
      // kExactSumWords 64-bit words a rank.
      for (std::size_t u = 0; u < numel_.size() && policy_.all_reduces_whole_unit(); ++u) {
        count_in_group(ring(padded_[u], world_), W_);
      }
      count_in_group(ring(2 * kExactSumWords * world_, world_), kF32);
      return;
    }
    count_in_group(ring(2 * std::int64_t{world_}, world_), kF32);  // a double as 2 I32 per rank
  }

 private:
  struct InFlight {
    std::size_t unit;
    std::int64_t bytes;
  };

  // Communicator::count_volume's ring volume of a collective over `total` elements on `world` ranks.
  static std::int64_t ring(std::int64_t total, int world, int factor = 1) {
    return factor * total * (world - 1) / world;
  }

  // The elements of unit u's reduction at grads_ready, when it issues one (every micro-batch where
  // the gradient pends, else the last), and of its second hop across the groups.
  void count_reduction(std::size_t u) {
    if (policy_.folds) {  // the all-to-all of the pending buffer, as it is
      if (world_ > 1) count_in_group(ring(padded_[u], world_), W_);
      return;
    }
    if (policy_.solo || (!pends(u) && !last_micro_batch_)) return;
    const bool whole = policy_.all_reduces_whole_unit();
    count_in_group(whole ? ring(numel_[u], world_, 2) : ring(padded_[u], world_), kF32);  // reductions move fp32
    if (replicas_ == 1) return;
    const std::int64_t n = whole ? numel_[u] : shard_[u];
    if (zero_.cross_group_grad_wire == WireDType::kExact) {
      volume_.across_groups += ring(n, replicas_, 2);
      volume_.bytes_across_groups += kF32 * ring(n, replicas_, 2);
      ++volume_.collectives_across_groups;
    } else {
      const WireVolume v = all_reduce_encoded_volume(n, replicas_, zero_.cross_group_grad_wire);
      volume_.across_groups += v.elements;
      volume_.bytes_across_groups += v.bytes;
      volume_.collectives_across_groups += 2;  // the all-to-all and the all-gather
    }
  }

  void count_in_group(std::int64_t elements, std::int64_t element_bytes) {
    volume_.in_group += elements;
    volume_.bytes_in_group += elements * element_bytes;
    ++volume_.collectives_in_group;
  }

  // The parameter all-gather of unit u (a gather at stage 3, a publish of a unit kept whole).
  void count_gather(std::size_t u) {
    if (!policy_.quantized_gathers) return count_in_group(ring(padded_[u], world_), W_);
    const WireVolume v = all_gather_int8_volume(shard_[u], world_);
    volume_.in_group += v.elements;
    volume_.bytes_in_group += v.bytes;
    ++volume_.collectives_in_group;
  }

  void gather(std::size_t u) {
    if (!sharded_[u] || gathered_[u]) return;
    if (!policy_.solo) count_gather(u);
    gathered_[u] = true;
    if (policy_.solo) return;  // the shard is the unit, nothing allocated
    params_.add(W_ * padded_[u]);
    if (policy_.quantized_gathers) {  // the packed shard and slots, until the acquire's wait decodes them
      comm_.add(all_gather_int8_staging_bytes(shard_[u], world_));
      landing_[u] = true;
    }
  }

  // The acquire's wait for unit u's gather.
  void land(std::size_t u) {
    if (!landing_[u]) return;
    comm_.sub(all_gather_int8_staging_bytes(shard_[u], world_));
    landing_[u] = false;
  }

  // ZeroParamStore::inflight_pending_bytes_over_bound over byte counts.
  bool inflight_pending_bytes_over_bound() const {
    if (zero_.max_inflight_reduction_bytes <= 0) return false;
    std::int64_t bytes = 0;
    for (const InFlight& f : inflight_) bytes += pends(f.unit) ? W_ * padded_[f.unit] : 0;
    return bytes > zero_.max_inflight_reduction_bytes;
  }

  void finish_oldest() {
    const InFlight f = inflight_.front();
    inflight_.pop_front();
    if (replicas_ > 1 && !across_at_once()) {
      // Hybrid sharding: the wait sees the in-group hop done (its staging freed, the store's own
      // reduced buffer kept), then the all-reduce across the groups stages until it is done too.
      const std::int64_t own = store_reduced(f.unit), across = across_groups_staging(f.unit);
      comm_.sub(f.bytes - own);
      comm_.add(across);
      comm_.sub(across + own);
    } else {
      comm_.sub(f.bytes);
    }
    if (pends(f.unit)) {
      pending_[f.unit] = false;
      grads_.sub(W_ * padded_[f.unit]);
    }
  }

  // The second hop's staging: the host all-reduce, across the groups, of what the first hop left
  // (the whole unit at stage 0, this rank's shard otherwise).
  std::int64_t across_groups_staging(std::size_t u) const {
    const std::int64_t n = policy_.all_reduces_whole_unit() ? numel_[u] : shard_[u];
    if (zero_.cross_group_grad_wire != WireDType::kExact) {
      return all_reduce_encoded_staging_bytes(n, replicas_, zero_.cross_group_grad_wire);
    }
    // NCCL all-reduces an fp32 device buffer in place and stages an fp32 copy of a bf16 one (the
    // stored gradient of stages 0-1 without a pending buffer); the host stages as always.
    if (nccl_) return !pends(u) && bf16_ ? kF32 * n : 0;
    return host_all_reduce_staging_bytes(n, replicas_, deterministic_);
  }

  bool pends(std::size_t u) const { return policy_.pends_unit(rounds_.empty() ? false : rounds_[u]); }
  // HybridCommunicator::starts_across_at_once: NCCL's exact second hop, queued with the first.
  bool across_at_once() const { return replicas_ > 1 && nccl_ && zero_.cross_group_grad_wire == WireDType::kExact; }
  // Whether grads_ready on unit u issues a reduction this micro-batch (as count_reduction counts it).
  bool issues_reduction(std::size_t u) const {
    return !policy_.folds && !policy_.solo && (pends(u) || last_micro_batch_);
  }
  bool in_flight(std::size_t u) const {
    return std::any_of(inflight_.begin(), inflight_.end(), [u](const InFlight& f) { return f.unit == u; });
  }

  // The store's own fp32 buffer for unit u's reduction: the unit (stage 0) or the shard, when the
  // gradient pends (ZeroParamStore::grads_ready's `reduced`).
  std::int64_t store_reduced(std::size_t u) const {
    if (!pends(u)) return 0;
    return kF32 * (policy_.all_reduces_whole_unit() ? numel_[u] : shard_[u]);
  }

  // fp32 bytes staged by grads_ready's collective on unit u, plus the store's reduced shard at
  // stages 2-3 (not `into_shard`, where the reduction writes the gradient shard itself). MpiCommunicator stages every
  // result in fp32 (the local communicator of one rank nothing); NcclCommunicator reduces device buffers in place or
  // into the store's buffers and stages only what is not fp32 already: the fp32 copy of a bf16 unit, and at stage 1 the
  // fp32 result for the bf16 shard slice; a StagedCommunicator stages in host memory, counted apart.
  std::int64_t staging(std::size_t u, bool into_shard) const {
    // Folding (global_order_fold.h): the received parts in the pending dtype on several ranks, and
    // a bf16 part widened to fp32, whatever the backend (an exchange moves bytes as they are).
    if (policy_.folds) return (world_ > 1 ? W_ * padded_[u] : 0) + (bf16_ ? kF32 * shard_[u] : 0);
    // A world of one calls no collective (the solo path) or only the local communicator's, which
    // stage nothing; host staging is counted apart. zero.solo_path false keeps NCCL's at one rank.
    if ((world_ == 1 && (zero_.solo_path || !nccl_)) || staged_) return into_shard ? 0 : store_reduced(u);
    // Stages 0-1 with a pending buffer: every micro-batch (deterministic mode) or every round.
    const bool per_micro_batch = pends(u) && !policy_.shards_grads();
    if (per_micro_batch && policy_.all_reduces_whole_unit()) {  // the fp32 unit, all-reduced in place
      const std::int64_t reduced = kF32 * numel_[u];
      if (nccl_) return reduced;
      return reduced + host_all_reduce_staging_bytes(numel_[u], world_, deterministic_);
    }
    if (per_micro_batch) {  // stage 1: the reduced shard beside a stage-2 style reduce-scatter
      const std::int64_t reduced = kF32 * shard_[u];
      if (nccl_) return reduced + (bf16_ ? kF32 * padded_[u] : 0);
      return reduced + kF32 * shard_[u] + (bf16_ ? kF32 * padded_[u] : 0) + (deterministic_ ? kF32 * padded_[u] : 0);
    }
    // Stages 2-3: the store's fp32 reduced shard, added into the gradient shard when waited; or,
    // into the shard, NCCL's fp32 result for a shard that is not fp32.
    const bool f32_shard = policy_.grad_dtype == DType::kF32;
    std::int64_t b = policy_.shards_grads() && !into_shard ? kF32 * shard_[u] : 0;
    if (nccl_) {
      if (into_shard && !f32_shard) b = kF32 * shard_[u];
      if (!bf16_) return b;
      if (policy_.all_reduces_whole_unit()) return kF32 * numel_[u];
      return b + kF32 * padded_[u] + (policy_.reduces_into_own_slice() ? kF32 * shard_[u] : 0);
    }
    if (policy_.all_reduces_whole_unit()) {  // all-reduce of the unpadded unit
      return host_all_reduce_staging_bytes(numel_[u], world_, deterministic_);
    }
    // reduce-scatter of the padded unit: fp32 output shard, fp32 copy of a bf16 input, all-to-all chunks
    b += kF32 * shard_[u] + (bf16_ ? kF32 * padded_[u] : 0) + (deterministic_ ? kF32 * padded_[u] : 0);
    return b;
  }

  ZeroOptions zero_;    // the scheduling options: overlap, prefetch, resharding, reductions in flight
  StagePolicy policy_;  // what the stage keeps and how it reduces
  int world_;
  int replicas_;  // hybrid sharding's groups (1: none)
  bool deterministic_;
  bool nccl_;
  bool staged_;
  std::int64_t W_;
  bool bf16_;
  std::vector<std::int64_t> numel_, shard_, padded_;
  std::vector<bool> sharded_, gathered_, pending_;
  std::vector<bool> written_;     // the step's first reduction of the unit was issued
  std::vector<bool> landing_;     // a quantized gather in flight: its staging lives until the acquire
  std::vector<bool> rounds_;      // units the backward reduces in rounds
  std::vector<int> rounds_left_;  // folding: each unit's grads_ready calls still to come
  std::deque<InFlight> inflight_;
  Counter params_, grads_, comm_;
  bool last_micro_batch_ = true;
  StepVolume volume_;
};

// `v` (counted up to the end of a micro-batch that began at `start`) plus `times` repeats of that
// micro-batch's counts.
void add_repeats(StepVolume& v, const StepVolume& start, std::int64_t times) {
  static_assert(sizeof(StepVolume) == 8 * sizeof(std::int64_t), "a field of StepVolume missing below");
  const StepVolume once = v;
  auto add = [&](std::int64_t StepVolume::*field) { v.*field += times * (once.*field - start.*field); };
  for (auto field :
       {&StepVolume::in_group, &StepVolume::across_groups, &StepVolume::bytes_in_group,
        &StepVolume::bytes_across_groups, &StepVolume::collectives_in_group, &StepVolume::collectives_across_groups,
        &StepVolume::exposed_gather_bytes, &StepVolume::exposed_gathers}) {
    add(field);
  }
}

}  // namespace

std::int64_t host_all_reduce_staging_bytes(std::int64_t n, int world_size, bool deterministic) {
  if (world_size == 1) return 0;
  if (!deterministic) return kF32 * n;  // the fp32 buffer MPI reduces in place
  const ShardSizes s = shard_sizes(n, world_size);
  return kF32 * (2 * s.padded_numel + s.shard_numel);  // padded input, all-to-all chunks, own shard
}

TransientPeaks replay_step(const ParamTable& table, DType param_dtype, const ZeroOptions& zero, int world_size,
                           bool deterministic, CollectiveBackend backend, const StepSchedule& schedule,
                           int replica_groups, int grad_accum) {
  ZT_CHECK(world_size >= 1 && zero.stage >= 0 && zero.stage <= 3 && replica_groups >= 1 && grad_accum >= 1);
  ZT_CHECK(replica_groups == 1 || backend != CollectiveBackend::kHostStaged, "hybrid sharding cannot be staged");
  Replay r(table, param_dtype, zero, world_size, deterministic, backend, replica_groups);
  // Every micro-batch after the first repeats the second's events and bytes (first reductions
  // into the shard happen in the first only), so two cover the step's peaks.
  for (int m = 0; m < std::min(grad_accum, 2); ++m) {
    r.pass(schedule.forward, Pass::kForward, &schedule.backward);
    r.pass(schedule.backward, Pass::kBackward);
  }
  return r.peaks();
}

TransientPeaks replay_forward(const ParamTable& table, DType param_dtype, const ZeroOptions& zero, int world_size,
                              bool deterministic, CollectiveBackend backend, const PassSchedule& forward,
                              int replica_groups) {
  ZT_CHECK(world_size >= 1 && zero.stage >= 0 && zero.stage <= 3 && replica_groups >= 1);
  Replay r(table, param_dtype, zero, world_size, deterministic, backend, replica_groups);
  r.pass(forward, Pass::kForward);
  TransientPeaks peaks = r.peaks();
  peaks.publish_staging = 0;  // the optimizer's publish: not a forward's
  return peaks;
}

StepVolume predict_step_volume(const ParamTable& table, DType param_dtype, const ZeroOptions& zero, int world_size,
                               const StepSchedule& schedule, int grad_accum, int replica_groups) {
  ZT_CHECK(grad_accum >= 1);
  Replay r(table, param_dtype, zero, world_size, false, CollectiveBackend::kHost, replica_groups);
  // Once a micro-batch before the last starts from the state the one before it started from, it
  // and every one up to the last count what that one counted: added, not replayed (a plan of 720720
  // micro-batches replayed for 41 s).
  std::optional<std::vector<bool>> previous_state;
  StepVolume previous_start;
  for (int m = 0; m < grad_accum; ++m) {
    const bool last = m + 1 == grad_accum;
    if (!last && m > 0) {
      std::vector<bool> state = r.state_between_micro_batches();
      if (state == previous_state) {
        add_repeats(r.volume(), previous_start, grad_accum - 1 - m);
        m = grad_accum - 2;  // the last is next
        continue;
      }
      previous_state = std::move(state);
      previous_start = r.volume();
    }
    r.set_last_micro_batch(last);
    r.pass(schedule.forward, Pass::kForward, &schedule.backward);
    r.pass(schedule.backward, Pass::kBackward);
  }
  r.count_step_end();
  return r.volume();
}

}  // namespace zt
