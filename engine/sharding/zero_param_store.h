// The ZeRO ParamStore: what each rank keeps of parameters and gradients at stage 0-3, and the
// collectives that move them, driven by the model's explicit acquire/release/grads_ready calls.
//   stage 0: full params, full grads; grads all-reduced (average) after the last micro-batch.
//   stage 1: full params and grads; grads reduce-scattered after the last micro-batch into this
//            rank's slice of the full buffer; after the optimizer updates the shard, params are
//            all-gathered (in place: full units are padded to s*N elements at stages 1-2).
//   stage 2: full params; a unit's full gradient exists only from its first contribution to
//            grads_ready, which reduce-scatters it into the shard (every micro-batch) and frees it.
//   stage 3: as 2, and params are sharded too: acquire all-gathers a unit, release frees it.
// Each unit's parameters follow the state machine kSharded -> kGathered -> kSharded (stage 3) with
// asserts on every transition. Collectives are synchronous for now (overlap comes next).
#pragma once

#include <memory>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/core/buffer.h"
#include "engine/sharding/param_store.h"
#include "engine/sharding/shard_layout.h"
#include "kernels/exec_context.h"

namespace zt {

enum class UnitState { kSharded, kGathered };

class ZeroParamStore final : public ParamStore {
 public:
  ZeroParamStore(const ParamTable& table, DType param_dtype, int stage, Communicator& comm, MemoryTracker& tracker,
                 const ExecContext& ctx);
  ~ZeroParamStore() override;

  const ParamTable& table() const override { return table_; }
  DType param_dtype() const override { return dtype_; }
  TensorView acquire_params(int unit, Pass pass) override;
  void release_params(int unit, Pass pass) override;
  void accumulate_grads(int unit, TensorView grad_f32) override;
  void grads_ready(int unit) override;

  int stage() const { return stage_; }
  // The split the optimizer works on: the ranks' shards (stage >= 1) or whole units (stage 0).
  const ShardLayout& optimizer_layout() const { return opt_layout_; }

  // Step protocol: begin_step zeroes gradients; set_micro_batch says whether the backward that
  // follows is the step's last (stages 0-1 reduce only then).
  void begin_step();
  void set_micro_batch(int index, int count);

  // This rank's reduced gradient and working parameters for the optimizer, in optimizer-layout
  // coordinates: element 0 is unit element optimizer_layout().unit(u).begin.
  TensorView grad_shard(int unit) const;
  TensorView working_shard(int unit) const;
  // After the optimizer wrote every working shard: stages 1-2 all-gather full parameters.
  void publish_updated_params();

  // Sum of squares of the reduced gradient over all ranks, identical on every rank and, with a
  // deterministic communicator, identical for every stage (fixed partition, fp64, rank order).
  double global_grad_sum_of_squares();

  // Full fp32 values of a unit's working parameters (a collective at stage 3).
  void gather_unit_f32(int unit, float* out);

 private:
  TensorView full_params(int unit) const;

  const ParamTable& table_;
  DType dtype_;
  int stage_;
  Communicator& comm_;
  MemoryTracker& tracker_;
  ExecContext ctx_;
  ShardLayout layout_;      // the N-way split
  ShardLayout opt_layout_;  // layout_, or a 1-way split at stage 0
  bool last_micro_batch_ = true;

  std::vector<Buffer> params_;       // full (stages 0-2, padded at 1-2) or shard (stage 3)
  std::vector<Buffer> gathered_;     // stage 3: the full unit while acquired
  std::vector<UnitState> state_;
  std::vector<Buffer> grads_;        // full (stage 0; padded at 1, where the reduced shard lands in
                                     // this rank's slice) or shard (stages 2-3)
  std::vector<Buffer> pending_full_grads_;  // stages 2-3: a unit's full gradient until grads_ready
};

}  // namespace zt
