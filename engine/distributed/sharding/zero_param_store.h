// The ZeRO ParamStore: what each rank keeps of parameters and gradients at stage 0-3, and the
// collectives that move them, driven by the model's explicit calls and declared pass schedules.
//   stage 0: full params, full grads; each unit's gradient all-reduced (average) as soon as its
//            backward is done, after the last micro-batch.
//   stage 1: full params and grads; grads reduce-scattered likewise into this rank's slice of the
//            full buffer; after the optimizer updates the shard, params are all-gathered in place
//            (full units are padded to s*N elements at stages 1-2).
//   stage 2: full params; a unit's full gradient exists only from its first contribution until its
//            reduce-scatter (started at grads_ready, every micro-batch) has landed in the shard.
//   stage 3: as 2, and params are sharded too: a unit is all-gathered before use and freed after;
//            the next units of the schedule are gathered ahead (prefetch). Units below the
//            persistence threshold stay whole, as at stage 2.
// Overlap (options.overlap_comm): collectives are started when their data is ready and waited when
// the result is needed: a gather at the unit's acquire, a gradient reduction when more than
// max_inflight_reductions are in flight (or their pending gradients exceed
// max_inflight_reduction_bytes) or at the end of backward, a stage 1-2 parameter
// all-gather at the unit's next acquire. Every wait is at a fixed point of the program order, so
// memory peaks are deterministic (docs/zero_memory.md predicts them exactly).
// Each sharded unit follows kSharded -> kGathering -> kGathered -> kSharded with asserts.
// Quantized gathers (zero.gather_dtype = "int8", StagePolicy::quantized_gathers): every parameter
// all-gather moves int8 blocks (all_gather_int8) and every rank computes with the decoded unit; a
// unit kept whole keeps its exact shard apart for the optimizer, and its publish is waited at once,
// one unit at a time (started together, their staging would hold an int8 copy of the model).
// A world of one (solo) at stages 1-3 keeps that state machine but calls no collective: the shard
// is the whole unit, so a gather is the shard itself, a publish moves nothing, and gradients go
// straight into the gradient buffer (a reduction over one rank is the identity). The step then
// does stage 0's work, with stage 0's bits (an fp32 gradient shard under bf16 parameters keeps
// its pending buffer, widened into the shard instead of reduce-scattered).
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "engine/base/core/buffer.h"
#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/sharding/param_store.h"
#include "engine/distributed/sharding/shard_layout.h"
#include "engine/distributed/sharding/stage_policy.h"
#include "engine/distributed/sharding/zero_options.h"
#include "kernels/exec_context.h"

namespace zt {

enum class UnitState { kSharded, kGathering, kGathered };

class ZeroParamStore final : public ParamStore {
 public:
  ZeroParamStore(const ParamTable& table, DType param_dtype, const ZeroOptions& options, Communicator& comm,
                 MemoryTracker& tracker, const ExecContext& ctx);
  ~ZeroParamStore() override;

  const ParamTable& table() const override { return table_; }
  DType param_dtype() const override { return dtype_; }
  TensorView acquire_params(int unit, Pass pass) override;
  void release_params(int unit, Pass pass) override;
  void accumulate_grads(int unit, TensorView grad) override;
  TensorView in_place_grads(int unit) override;
  void grads_ready(int unit) override;
  void begin_pass(Pass pass, const PassSchedule& schedule, const PassSchedule* backward) override;
  void end_pass(Pass pass) override;

  int stage() const { return options_.stage; }
  const ZeroOptions& options() const { return options_; }
  // Stage 3 keeps this unit's parameters as a shard (false: whole, below the persistence threshold
  // or at stages 0-2).
  bool params_sharded(int unit) const { return sharded_[static_cast<std::size_t>(unit)]; }
  UnitState unit_state(int unit) const { return state_[static_cast<std::size_t>(unit)]; }
  // The split the optimizer works on: the ranks' shards (stage >= 1) or whole units (stage 0).
  const ShardLayout& optimizer_layout() const { return opt_layout_; }

  // Step protocol: begin_step zeroes gradients (or, where the first reduction writes the shard,
  // marks them zero: StagePolicy::first_reduction_into_shard); set_micro_batch says whether the backward that
  // follows is the step's last (stages 0-1 reduce only then).
  void begin_step();
  void set_micro_batch(int index, int count);

  // This rank's reduced gradient and working parameters for the optimizer, in optimizer-layout
  // coordinates: element 0 is unit element optimizer_layout().unit(u).begin (its offset: the
  // same on every rank that holds real elements).
  TensorView grad_shard(int unit) const;
  TensorView working_shard(int unit) const;
  // After the optimizer wrote every working shard: all-gathers the units kept whole (stages 1-2,
  // persistent units at 3); with overlap each is waited at the unit's next acquire.
  void publish_updated_params();

  // Sum of squares of the reduced gradient over all ranks, identical on every rank and, with a
  // deterministic communicator, identical for every stage (fixed partition, fp64, rank order).
  double global_grad_sum_of_squares();

  // The whole of a unit (`full`: its padded length, every rank's shard in rank order) from each
  // rank's optimizer-layout `shard` of it, such as the optimizer's fp32 master: an all-gather
  // through the store's communicator where the optimizer layout is split, a copy where it is one
  // way (stage 0, a world of one). Collective. Outside a pass.
  void gather_optimizer_shards(TensorView shard, TensorView full);

 private:
  struct PendingReduction {
    int unit;
    Work work;
    Buffer reduced;  // stages 2-3: the fp32 reduced shard, added into the gradient shard once done
                     // (none where the reduction writes the shard itself)
    Buffer widened;  // folding bf16 parts: one part in fp32 (accumulate_into adds fp32)
  };

  TensorView full_params(int unit) const;
  // A failing run's destructor: collectives in flight keep their Works and the store's buffers.
  void keep_in_flight_until_exit();
  void follow_schedule(UnitOp op, int unit);  // checks the call against the pass's schedule
  void start_gather(int unit);
  // An all-gather of parameters: plain, or of int8 blocks under quantized gathers.
  Work gather_params(TensorView shard, TensorView whole);
  void prefetch();
  void free_gathered(int unit);
  void finish_oldest_reduction();
  // The pending full gradients of the reductions in flight hold more than
  // options_.max_inflight_reduction_bytes (when that bound is set).
  bool inflight_pending_bytes_over_bound() const;
  // The unit's gradient waits in a pending buffer for a reduction of its own (StagePolicy::pends,
  // or a unit this backward reduces in rounds on several ranks).
  bool pends(int unit) const;
  bool reduction_in_flight(int unit) const;
  void wait_published(int unit);
  // Folding: this rank's part of unit u's stored gradient (the shard, or its slice at stages 0-1).
  TensorView fold_target(int unit) const;

  const ParamTable& table_;
  DType dtype_;
  ZeroOptions options_;
  Communicator& comm_;
  MemoryTracker& tracker_;
  ExecContext ctx_;
  StagePolicy policy_;      // what the stage keeps and how it reduces
  ShardLayout layout_;      // the N-way split
  ShardLayout opt_layout_;  // layout_, or a 1-way split at stage 0
  bool last_micro_batch_ = true;

  std::vector<bool> sharded_;         // policy_.params_sharded, per unit
  std::vector<Buffer> params_;        // full (padded at stages 1-3) or shard (sharded units)
  std::vector<Buffer> gathered_;      // sharded units: the full unit while gathering or gathered
  std::vector<Buffer> exact_shards_;  // StagePolicy::keeps_exact_shard units: the working shard
  std::vector<UnitState> state_;
  std::vector<bool> in_use_;     // between acquire and release
  std::vector<Work> gathers_;    // a sharded unit's all-gather in flight (kGathering)
  std::vector<Work> publishes_;  // a whole unit's all-gather of updated params in flight
  std::vector<Buffer> grads_;    // full (stage 0; padded at 1, where the reduced shard lands in
                                 // this rank's slice) or shard (stages 2-3)
  // No contribution to grads_[u] since begin_step: it holds zero, or under
  // StagePolicy::first_reduction_into_shard whatever the last step left there (unread until written).
  std::vector<bool> grads_zero_;
  std::vector<bool> pending_in_place_;       // in_place_grads lent the pending buffer, still zero
  std::vector<Buffer> pending_full_grads_;   // stages 2-3: a unit's full gradient until reduced
  std::deque<PendingReduction> reductions_;  // gradient collectives in flight, oldest first
  std::vector<bool> rounds_;                 // units the current backward reduces in rounds
  std::vector<int> rounds_left_;             // folding: each unit's grads_ready calls still to come

  // The pass in progress (none: calls are synchronous and unchecked).
  const PassSchedule* schedule_ = nullptr;
  std::size_t cursor_ = 0;        // index of the next expected call
  std::size_t last_acquire_ = 0;  // index of the pass's last acquire
  Pass pass_ = Pass::kForward;
  bool backward_follows_ = false;
  std::vector<bool> backward_reads_;  // a training forward: the units its backward acquires
};

}  // namespace zt
