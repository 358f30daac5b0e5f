// The per-rank memory prediction for ZeRO stages 0-3 (docs/zero_memory.md states the layout and
// why each buffer exists); the model's own footprint comes from the formulas GptModel allocates by.
#include "engine/sharding/memory_model.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "engine/core/check.h"
#include "models/gpt/gpt_params.h"
#include "models/gpt/gpt_schedule.h"

namespace zt {

namespace {

constexpr std::int64_t kF32Bytes = 4;


}  // namespace

ShardSizes shard_sizes(std::int64_t numel, int world_size) {
  ZT_CHECK(numel >= 0 && world_size >= 1, "numel {} world_size {}", numel, world_size);
  ShardSizes s;
  s.numel = numel;
  s.shard_numel = (numel + world_size - 1) / world_size;
  s.padded_numel = s.shard_numel * world_size;
  // Rank N-1 holds elements [(N-1)s, n) when there are any; every rank before it is full.
  s.last_rank_padding = std::min(s.shard_numel, s.padded_numel - numel);
  return s;
}

ModelFootprint predict_gpt_footprint(const gpt::GptConfig& model, int micro_batch, int seq_len,
                                     const gpt::CheckpointPolicy& checkpointing, DType param_dtype, Device device,
                                     DType activations) {
  const gpt::ActivationDims d = gpt::activation_dims(model, micro_batch, seq_len, device, activations);
  const std::int64_t max_unit = gpt::build_param_table(model).max_unit_numel();
  ModelFootprint f;
  f.activation_bytes = gpt::predict_activation_peak_bytes(model, d, checkpointing);
  // GptModel's workspace: in the activation dtype BlockGradScratch (d_btc, d_branch: BTC each;
  // d_qkv 3 BTC; d_bt4c 4 BTC) and dresid_ (BTC); in fp32 grad_scratch_ (the largest unit), and
  // for bf16 parameters with fp32 activations the two fp32 unit copies those kernels read (both in
  // use once the head acquires ln_f and the embeddings). bf16 activations read bf16 parameters.
  f.workspace_bytes = d.act_bytes() * (9 * d.BTC() + d.BTC()) + kF32Bytes * max_unit;
  if (param_dtype == DType::kBF16 && d.act == DType::kF32) f.workspace_bytes += 2 * kF32Bytes * max_unit;
  // On CUDA the context's cuBLASLt workspace, held for the whole run. (The kernels' transient
  // scratch, partial sums and the embedding backward's sort, is not modelled: kilobytes to a
  // few MB at a time, device-dependent for CUB's sort.)
  if (device == Device::kCUDA) f.workspace_bytes += kCublasWorkspaceBytes;
  return f;
}

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
  const int stage = zero.stage;
  ZT_CHECK(stage >= 0 && stage <= 3, "stage {}", stage);
  ZT_CHECK(world_size >= 1, "world_size {}", world_size);
  ZT_CHECK(param_dtype == DType::kF32 || param_dtype == DType::kBF16);
  const std::int64_t W = static_cast<std::int64_t>(dtype_size_bytes(param_dtype));
  // fp32 master copy only in mixed precision: in f32 mode the fp32 parameters are the master.
  const std::int64_t master_per_elem = param_dtype == DType::kBF16 ? kF32Bytes : 0;
  const std::int64_t moments_per_elem = 2 * kF32Bytes;  // AdamW m and v
  const std::int64_t G = stage >= 2 && zero.fp32_grad_shards ? kF32Bytes : W;  // gradient element bytes

  StageMemory m;
  m[MemCategory::kActivations] = model.activation_bytes;
  m[MemCategory::kWorkspace] = model.workspace_bytes;
  std::int64_t params = 0, grads = 0, optimizer_elems = 0;
  for (const UnitSpec& unit : table.units()) {
    const ShardSizes s = shard_sizes(unit.numel, world_size);
    const std::int64_t whole_padding = s.padded_numel - s.numel;
    if (stage == 0) {
      params += W * s.numel;
      grads += W * s.numel;
      optimizer_elems += s.numel;
      continue;
    }
    optimizer_elems += s.shard_numel;
    m.padding_bytes += (master_per_elem + moments_per_elem) * s.last_rank_padding;
    // Parameters: whole units padded to s*N so the all-gather of the updated shards lands in place
    // (stages 1-2, and units below the persistence threshold at 3), else the shard.
    if (stage == 3 && s.numel >= zero.persistence_threshold) {
      params += W * s.shard_numel;
      m.padding_bytes += W * s.last_rank_padding;
    } else {
      params += W * s.padded_numel;
      m.padding_bytes += W * whole_padding;
    }
    // Gradients: the padded whole unit at stage 1 (the reduced shard lands in the rank's own
    // slice), the shard from stage 2 on.
    if (stage == 1) {
      grads += W * s.padded_numel;
      m.padding_bytes += W * whole_padding;
    } else {
      grads += G * s.shard_numel;
      m.padding_bytes += G * s.last_rank_padding;
    }
  }
  const TransientPeaks t =
      replay_step(table, param_dtype, zero, world_size, options.deterministic, options.backend, schedule);
  m[MemCategory::kParameters] = params + t.gathered_params;
  m[MemCategory::kGradients] = grads + t.pending_grads;
  m[MemCategory::kMasterWeights] = master_per_elem * optimizer_elems;
  m[MemCategory::kOptimizerStates] = moments_per_elem * optimizer_elems;
  m[MemCategory::kCommBuffers] = t.comm_staging;
  return m;
}

StageMemory predict_rank_memory(const RunConfig& config, int stage, int world_size, const ShardingOptions& options) {
  const ModelFootprint footprint =
      predict_gpt_footprint(config.model, config.train.micro_batch, config.train.seq_len,
                            config.train.activation_checkpointing, config.param_dtype, config.device,
                            config.activation_dtype);
  ShardingOptions o = options;
  o.deterministic = o.deterministic || config.train.deterministic;
  o.backend = store_collective_backend(config.device, world_size);
  ZeroOptions zero = config.zero;
  zero.stage = stage;
  const StepSchedule schedule{gpt::forward_schedule(config.model), gpt::backward_schedule(config.model)};
  return predict_rank_memory(gpt::build_param_table(config.model), config.param_dtype, footprint, schedule, zero,
                             world_size, o);
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
