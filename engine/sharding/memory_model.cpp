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
// accumulate_grads contribution is added (rounded to the working dtype, as at stage 0) into a
// padded full-unit buffer that lives from the unit's first contribution until grads_ready has
// reduce-scattered it. GptModel's tied embedding receives the head's contribution at the start of
// backward and its own at the end, so its buffer stays live through the whole backward beside one
// other unit's at a time: the embeddings plus the largest other unit.
StageMemory predict_rank_memory(const ParamTable& table, DType param_dtype, const ModelFootprint& model, int stage,
                                int world_size, const ShardingOptions& options) {
  ZT_CHECK(stage >= 0 && stage <= 3, "stage {}", stage);
  ZT_CHECK(world_size >= 1, "world_size {}", world_size);
  ZT_CHECK(param_dtype == DType::kF32 || param_dtype == DType::kBF16);
  const std::int64_t W = static_cast<std::int64_t>(dtype_size_bytes(param_dtype));
  // fp32 master copy only in mixed precision: in f32 mode the fp32 parameters are the master.
  const std::int64_t master_per_elem = param_dtype == DType::kBF16 ? kF32Bytes : 0;
  const std::int64_t moments_per_elem = 2 * kF32Bytes;  // AdamW m and v

  // Stages 1-2 keep whole units padded to s*N so the all-gather of the updated shards lands in
  // place (ZeroParamStore), stage 1 its gradients too.
  std::int64_t psi = 0, shard_sum = 0, shard_padding = 0, max_numel = 0, padded_sum = 0, max_padded = 0;
  for (const UnitSpec& unit : table.units()) {
    const ShardSizes s = shard_sizes(unit.numel, world_size);
    psi += s.numel;
    shard_sum += s.shard_numel;
    shard_padding += s.last_rank_padding;
    max_numel = std::max(max_numel, s.numel);
    padded_sum += s.padded_numel;
    max_padded = std::max(max_padded, s.padded_numel);
  }
  const std::int64_t padded_extra = padded_sum - psi;  // padding elements of the padded whole units
  const std::size_t units = table.units().size();
  const ShardSizes first = shard_sizes(table.units().front().numel, world_size);
  const ShardSizes last = shard_sizes(table.units().back().numel, world_size);
  std::int64_t max_other_padded = 0;  // the largest unit besides the first (the embeddings)
  for (std::size_t u = 1; u < units; ++u) {
    max_other_padded = std::max(max_other_padded, shard_sizes(table.units()[u].numel, world_size).padded_numel);
  }

  StageMemory m;
  m[MemCategory::kActivations] = model.activation_bytes;
  m[MemCategory::kWorkspace] = model.workspace_bytes;
  const ShardSizes largest = shard_sizes(max_numel, world_size);
  const std::int64_t s_max = largest.shard_numel, p_max = largest.padded_numel;
  const bool bf16 = param_dtype == DType::kBF16;
  const bool multi = world_size > 1;
  // What the MPI communicator stages around a reduce-scatter of the largest unit (fp32 output
  // shard; fp32 copy of a bf16 input; all-to-all chunks in deterministic mode). One rank's local
  // communicator stages nothing.
  const std::int64_t rs_staging =
      multi ? kF32Bytes * s_max + (bf16 ? kF32Bytes * p_max : 0) + (options.deterministic ? kF32Bytes * p_max : 0) : 0;
  if (stage == 0) {
    m[MemCategory::kParameters] = W * psi;
    m[MemCategory::kGradients] = W * psi;
    m[MemCategory::kMasterWeights] = master_per_elem * psi;
    m[MemCategory::kOptimizerStates] = moments_per_elem * psi;
    // The all-reduce of the largest unit, staged in fp32: n_max elements, or in deterministic mode
    // the padded unit twice (data and all-to-all chunks) plus the reduced shard. One rank: nothing.
    m[MemCategory::kCommBuffers] =
        !multi ? 0 : options.deterministic ? kF32Bytes * (2 * p_max + s_max) : kF32Bytes * max_numel;
    return m;
  }

  // Stages 1-3: the optimizer (master, m, v) covers the rank's shard of every unit.
  m[MemCategory::kMasterWeights] = master_per_elem * shard_sum;
  m[MemCategory::kOptimizerStates] = moments_per_elem * shard_sum;
  m.padding_bytes += (master_per_elem + moments_per_elem) * shard_padding;

  if (stage == 1) {
    m[MemCategory::kParameters] = W * padded_sum;
    m[MemCategory::kGradients] = W * padded_sum;  // the reduced shard lands in the rank's own slice
    m.padding_bytes += 2 * W * padded_extra;
    // Reduce-scatter staging, then (not at the same time) the W-byte send copy of the all-gather.
    m[MemCategory::kCommBuffers] = std::max(rs_staging, W * s_max);
    return m;
  }
  // Stages 2-3: gradient shards, plus the pending full gradients of the embeddings (tied: from the
  // head's contribution at the start of backward to its own at the end) and of one other unit at
  // a time, padded for the reduce-scatter ([Note: pending gradient units]).
  m[MemCategory::kGradients] = W * shard_sum + W * (first.padded_numel + max_other_padded);
  m.padding_bytes += W * shard_padding;
  // grads_ready's fp32 reduced shard, beside the communicator's staging.
  m[MemCategory::kCommBuffers] = kF32Bytes * s_max + rs_staging;
  if (stage == 2) {
    m[MemCategory::kParameters] = W * padded_sum;
    m.padding_bytes += W * padded_extra;
    m[MemCategory::kCommBuffers] = std::max(m[MemCategory::kCommBuffers], W * s_max);
    return m;
  }
  // Stage 3: parameter shards plus the gathered (padded) units alive at once. Gathers are not
  // prefetched yet, so that is one unit, except in the head, which computes with the final
  // LayerNorm and the tied embeddings together.
  m[MemCategory::kParameters] = W * shard_sum + W * std::max(max_padded, first.padded_numel + last.padded_numel);
  m.padding_bytes += W * shard_padding;
  return m;
}

StageMemory predict_rank_memory(const RunConfig& config, int stage, int world_size, const ShardingOptions& options) {
  const ModelFootprint footprint =
      predict_gpt_footprint(config.model, config.train.micro_batch, config.train.seq_len,
                            config.train.activation_checkpointing, config.param_dtype);
  ShardingOptions o = options;
  o.deterministic = o.deterministic || config.train.deterministic;
  return predict_rank_memory(gpt::build_param_table(config.model), config.param_dtype, footprint, stage, world_size, o);
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
