// AdamW over the shards a ZeroParamStore's optimizer layout gives this rank: fp32 master weights
// (bf16 mode; in fp32 mode the working shard is the master), m and v for those elements only,
// decay where the parameter table says. It writes the working shards only: the caller then has the
// store publish the updated parameters (store.publish_updated_params()).
#pragma once

#include <vector>

#include "engine/base/core/buffer.h"
#include "engine/distributed/sharding/zero_param_store.h"
#include "kernels/contracts/adamw_params.h"

namespace zt {

// Consecutive elements [at, at + n) of a unit's optimizer shard (shard coordinates) whose
// parameters all decay, or all do not: the optimizer updates each run as one AdamW slice.
struct DecayRun {
  std::int64_t at = 0;
  std::int64_t n = 0;
  bool decays = false;
};
// The runs covering every parameter element of `unit` inside `shard`, adjacent parameters with
// the same decay flag merged (a GPT-2 block is 9 runs, not 12 parameters); padding is left out.
std::vector<DecayRun> decay_runs(const ParamTable& table, int unit, const UnitShard& shard);

class ShardedAdamW {
 public:
  ShardedAdamW(ZeroParamStore& store, const AdamWHyper& hyper, MemoryTracker& tracker, const ExecContext& ctx);

  // Sets this rank's shard of `unit` from the unit's full fp32 values (initialisation): master and
  // working parameters. Call store.publish_updated_params() after loading every unit.
  void load_unit(int unit, const float* full_values);
  // One AdamW update of every unit's shard, gradients multiplied by `grad_scale` (the clip
  // coefficient); the working shards hold the result (their bf16 cast in mixed precision). The other
  // ranks' parts of a unit arrive with store.publish_updated_params(), which the caller runs next.
  void step(float lr, float grad_scale = 1.0f);
  // The fp32 master of this rank's shard of a unit ([optimizer shard] elements, padding zero).
  TensorView master(int unit) const;
  // The whole of a unit's fp32 master (its padded length, every rank's shard in rank order) in host
  // memory charged to `tracker` as workspace. Collective: an all-gather through the store's
  // communicator at stages 1-3 on several ranks (on CUDA the master is device memory, which only
  // NCCL, ordered behind the compute stream's AdamW, may read; MPI moves host memory).
  Buffer gather_master(int unit, MemoryTracker& tracker);
  const ParamTable& table() const { return store_.table(); }
  int step_count() const { return step_; }

  // Checkpoint access (engine/app/checkpoint): AdamW's moments of this rank's shard, laid out as
  // master(); restoring sets them, the master and the step count, then restore_working_from_master.
  TensorView exp_avg(int unit) const { return m_.at(static_cast<std::size_t>(unit)).view(); }
  TensorView exp_avg_sq(int unit) const { return v_.at(static_cast<std::size_t>(unit)).view(); }
  // The context its state lives in (host memory, or a device's).
  const ExecContext& context() const { return ctx_; }
  void set_step_count(int step) { step_ = step; }
  // Working shards = master (its bf16 cast in mixed precision, as step() writes them); the caller
  // then has the store publish them, as after step().
  void restore_working_from_master();

 private:
  ZeroParamStore& store_;
  AdamWHyper hyper_;
  ExecContext ctx_;
  std::vector<Buffer> master_;  // bf16 mode only
  std::vector<Buffer> m_, v_;
  std::vector<std::vector<DecayRun>> runs_;  // per unit, for this rank's shard
  int step_ = 0;
};

}  // namespace zt
