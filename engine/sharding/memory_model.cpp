// The per-rank memory prediction for ZeRO stages 0-3 (docs/zero_memory.md states the layout and
// why each buffer exists); the model's own footprint comes from the formulas GptModel allocates by.
#include "engine/sharding/memory_model.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "engine/core/check.h"
#include "models/gpt/gpt_params.h"

namespace zt {

namespace {

constexpr std::int64_t kF32Bytes = 4;

// Sum of the k largest element counts (all of them when there are fewer than k).
std::int64_t sum_of_largest(std::vector<std::int64_t> numels, int k) {
  std::sort(numels.begin(), numels.end(), std::greater<>());
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < numels.size() && i < static_cast<std::size_t>(k); ++i) sum += numels[i];
  return sum;
}

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
                                     const gpt::CheckpointPolicy& checkpointing, DType param_dtype) {
  const gpt::ActivationDims d{micro_batch, seq_len, model.n_embd, model.n_head, model.padded_vocab_size()};
  const std::int64_t max_unit = gpt::build_param_table(model).max_unit_numel();
  ModelFootprint f;
  f.activation_bytes = gpt::predict_activation_peak_bytes(model, d, checkpointing);
  // GptModel's workspace, all fp32: BlockGradScratch (d_btc, d_branch: BTC each; d_qkv 3 BTC;
  // d_bt4c 4 BTC), dresid_ (BTC), grad_scratch_ (the largest unit), and in bf16 mode the two fp32
  // unit copies the kernels read (both are in use once the head acquires ln_f and the embeddings).
  f.workspace_bytes = kF32Bytes * (9 * d.BTC() + d.BTC() + max_unit);
  if (param_dtype == DType::kBF16) f.workspace_bytes += 2 * kF32Bytes * max_unit;
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

// [Note: pending gradient units]
// From stage 2 on a rank keeps only its gradient shard, but a unit's gradient arrives whole: each
// accumulate_grads contribution is added (rounded to the working dtype, exactly as the resident
// store does) into a full-unit gradient buffer that lives from the unit's first contribution until
// grads_ready has copied it into the reduce-scatter input. GptModel's tied embedding receives the
// head's contribution at the start of backward and its own at the end, so its buffer stays live
// through the whole backward beside one other unit's at a time: 2 pending units, whose bytes are
// bounded by the two largest units (for GPT-2 exactly: the embeddings plus a block).
StageMemory predict_rank_memory(const ParamTable& table, DType param_dtype, const ModelFootprint& model, int stage,
                                int world_size, const ShardingOptions& options) {
  ZT_CHECK(stage >= 0 && stage <= 3, "stage {}", stage);
  ZT_CHECK(world_size >= 1, "world_size {}", world_size);
  ZT_CHECK(param_dtype == DType::kF32 || param_dtype == DType::kBF16);
  ZT_CHECK(options.max_gathered_units >= 1 && options.max_pending_grad_units >= 1 &&
           options.persistence_threshold >= 0);
  const std::int64_t W = static_cast<std::int64_t>(dtype_size_bytes(param_dtype));
  // fp32 master copy only in mixed precision: in f32 mode the fp32 parameters are the master.
  const std::int64_t master_per_elem = param_dtype == DType::kBF16 ? kF32Bytes : 0;
  const std::int64_t moments_per_elem = 2 * kF32Bytes;  // AdamW m and v

  std::int64_t psi = 0, shard_sum = 0, shard_padding = 0, max_numel = 0;
  std::int64_t stage3_param_numel = 0, stage3_param_padding = 0;  // shards, or whole persistent units
  std::vector<std::int64_t> unit_numels, gathered_numels;
  for (const UnitSpec& unit : table.units()) {
    const ShardSizes s = shard_sizes(unit.numel, world_size);
    psi += s.numel;
    shard_sum += s.shard_numel;
    shard_padding += s.last_rank_padding;
    max_numel = std::max(max_numel, s.numel);
    unit_numels.push_back(s.numel);
    if (s.numel < options.persistence_threshold) {
      stage3_param_numel += s.numel;  // persistent: whole on every rank, never gathered
    } else {
      stage3_param_numel += s.shard_numel;
      stage3_param_padding += s.last_rank_padding;
      gathered_numels.push_back(s.numel);
    }
  }

  StageMemory m;
  m[MemCategory::kActivations] = model.activation_bytes;
  m[MemCategory::kWorkspace] = model.workspace_bytes;
  if (stage == 0) {
    m[MemCategory::kParameters] = W * psi;
    m[MemCategory::kGradients] = W * psi;
    m[MemCategory::kMasterWeights] = master_per_elem * psi;
    m[MemCategory::kOptimizerStates] = moments_per_elem * psi;
    // One fp32 bucket of the largest unit for the averaging all-reduce; one rank averages nothing.
    m[MemCategory::kCommBuffers] = world_size > 1 ? kF32Bytes * max_numel : 0;
    return m;
  }

  // Stages 1-3: the optimizer (master, m, v) covers the rank's shard of every unit.
  m[MemCategory::kMasterWeights] = master_per_elem * shard_sum;
  m[MemCategory::kOptimizerStates] = moments_per_elem * shard_sum;
  m.padding_bytes += (master_per_elem + moments_per_elem) * shard_padding;

  // Collectives run on padded units, one at a time per kind: the fp32 reduce-scatter input of the
  // largest padded unit and its fp32 output shard, and the all-gather receive buffer in W bytes.
  const ShardSizes largest = shard_sizes(max_numel, world_size);
  const std::int64_t unused_padded = largest.padded_numel - largest.numel;
  m[MemCategory::kCommBuffers] = kF32Bytes * largest.padded_numel + kF32Bytes * largest.shard_numel +
                                 W * largest.padded_numel;
  m.padding_bytes += kF32Bytes * unused_padded + kF32Bytes * largest.last_rank_padding + W * unused_padded;

  if (stage == 1) {
    m[MemCategory::kParameters] = W * psi;
    m[MemCategory::kGradients] = W * psi;
    return m;
  }
  m[MemCategory::kGradients] = W * shard_sum + W * sum_of_largest(unit_numels, options.max_pending_grad_units);
  m.padding_bytes += W * shard_padding;
  if (stage == 2) {
    m[MemCategory::kParameters] = W * psi;
    return m;
  }
  m[MemCategory::kParameters] = W * stage3_param_numel + W * sum_of_largest(gathered_numels, options.max_gathered_units);
  m.padding_bytes += W * stage3_param_padding;
  return m;
}

StageMemory predict_rank_memory(const RunConfig& config, int stage, int world_size, const ShardingOptions& options) {
  const ModelFootprint footprint =
      predict_gpt_footprint(config.model, config.train.micro_batch, config.train.seq_len,
                            config.train.activation_checkpointing, config.param_dtype);
  return predict_rank_memory(gpt::build_param_table(config.model), config.param_dtype, footprint, stage, world_size,
                             options);
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
