// The per-rank memory prediction for ZeRO stages 0-3 (docs/zero_memory.md states the layout and
// why each buffer exists), over units and sizes: the model brings its footprint and schedule.
#include "engine/distributed/sharding/memory_model.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "engine/base/core/check.h"
#include "engine/distributed/sharding/stage_policy.h"

namespace zt {

namespace {

constexpr std::int64_t kF32Bytes = 4;

}  // namespace

std::int64_t StageMemory::model_state_bytes() const {
  return (*this)[MemCategory::kParameters] + (*this)[MemCategory::kGradients] + (*this)[MemCategory::kMasterWeights] +
         (*this)[MemCategory::kOptimizerStates];
}

std::int64_t StageMemory::total_bytes() const {
  std::int64_t sum = 0;
  for (std::int64_t b : bytes) sum += b;
  return sum;
}

// [Note: transient buffers]
// Besides its fixed buffers, a rank holds for part of each step: gathered full units (stage 3,
// including prefetched and kept ones), full unit gradients awaiting their reduce-scatter (stages
// 2-3: from a unit's first contribution until its reduction is waited), and the fp32 staging of
// the gradient collectives in flight. When each is allocated and freed follows from the pass
// schedules and ZeroParamStore's rules alone (every wait is at a fixed point of the program), so
// replay_step computes their peaks exactly instead of bounding them.
StageMemory predict_rank_memory(const ParamTable& table, DType param_dtype, const ModelFootprint& model,
                                const StepSchedule& schedule, const ZeroOptions& zero, int world_size,
                                const ShardingOptions& options) {
  const StagePolicy policy = make_stage_policy(zero, world_size, param_dtype);
  const std::int64_t W = static_cast<std::int64_t>(dtype_size_bytes(param_dtype));
  const std::int64_t G = static_cast<std::int64_t>(dtype_size_bytes(policy.grad_dtype));
  // fp32 master copy only in mixed precision: in f32 mode the fp32 parameters are the master.
  const std::int64_t master_per_elem = param_dtype == DType::kBF16 ? kF32Bytes : 0;
  const std::int64_t moments_per_elem = 2 * kF32Bytes;  // AdamW m and v

  StageMemory m;
  m[MemCategory::kActivations] = model.activation_bytes;
  m[MemCategory::kWorkspace] = model.workspace_bytes;
  std::int64_t params = 0, grads = 0, optimizer_elems = 0;
  for (const UnitSpec& unit : table.units()) {
    const ShardSizes s = shard_sizes(unit.numel, world_size);
    const UnitBuffer p = policy.params(s), g = policy.grads(s), o = policy.optimizer_state(s),
                     e = policy.exact_shard(s);
    params += W * (p.numel + e.numel);
    grads += G * g.numel;
    optimizer_elems += o.numel;
    m.padding_bytes += W * (p.last_rank_padding + e.last_rank_padding) + G * g.last_rank_padding +
                       (master_per_elem + moments_per_elem) * o.last_rank_padding;
  }
  const TransientPeaks t = replay_step(table, param_dtype, zero, world_size, options.deterministic, options.backend,
                                       schedule, options.replica_groups, options.grad_accum);
  m[MemCategory::kParameters] = params + t.gathered_params;
  m[MemCategory::kGradients] = grads + t.pending_grads;
  m[MemCategory::kMasterWeights] = master_per_elem * optimizer_elems;
  m[MemCategory::kOptimizerStates] = moments_per_elem * optimizer_elems;
  m[MemCategory::kCommBuffers] = std::max(t.comm_staging, t.publish_staging);
  m.publish_comm_bytes = t.publish_staging;
  m.step_only_param_bytes = t.gathered_params;
  m.step_only_grad_bytes = t.pending_grads;
  m.step_only_workspace_bytes = model.step_only_workspace_bytes;
  m.kernel_scratch_bytes = model.kernel_scratch_bytes;
  return m;
}

ModelStateBytes predict_model_states(std::int64_t psi, int stage, int world_size, int k, int bytes_per_param,
                                     int bytes_per_grad) {
  ZT_CHECK(psi >= 0 && stage >= 0 && stage <= 3 && world_size >= 1 && k >= 0 && bytes_per_param >= 0 &&
           bytes_per_grad >= 0);
  const double p = static_cast<double>(psi), n = static_cast<double>(world_size);
  ModelStateBytes m;
  m.parameters = bytes_per_param * p;
  m.gradients = bytes_per_grad * p;
  m.optimizer_states = k * p;
  if (stage >= 1) m.optimizer_states /= n;
  if (stage >= 2) m.gradients /= n;
  if (stage >= 3) m.parameters /= n;
  return m;
}

}  // namespace zt
