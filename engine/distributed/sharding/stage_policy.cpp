// The stage rules (see the header and docs/zero_memory.md).
#include "engine/distributed/sharding/stage_policy.h"

#include "engine/base/core/check.h"

namespace zt {

StagePolicy make_stage_policy(const ZeroOptions& zero, int world_size, DType param_dtype) {
  ZT_CHECK(zero.stage >= 0 && zero.stage <= 3, "ZeRO stage {}", zero.stage);
  ZT_CHECK(world_size >= 1, "world_size {}", world_size);
  ZT_CHECK(param_dtype == DType::kF32 || param_dtype == DType::kBF16, "parameters are F32 or BF16, not {}",
           dtype_name(param_dtype));
  StagePolicy p;
  p.stage = zero.stage;
  p.world_size = world_size;
  p.param_dtype = param_dtype;
  p.grad_dtype = zero.stage >= 2 && zero.fp32_grad_shards ? DType::kF32 : param_dtype;
  p.persistence_threshold = zero.persistence_threshold;
  p.solo = world_size == 1 && zero.stage >= 1 && zero.solo_path;
  p.reduce_every_micro_batch = zero.reduce_every_micro_batch && world_size > 1 && zero.stage <= 1;
  const bool straight_into_shard = p.solo && zero.stage >= 2 && p.grad_dtype == param_dtype;
  p.folds = zero.fold_in_global_order;
  p.pends = (zero.stage >= 2 && !straight_into_shard) || p.reduce_every_micro_batch || p.folds;
  p.first_reduction_into_shard = zero.stage >= 2 && p.pends && !p.folds && zero.shard_group_size == 0;
  p.quantized_gathers = zero.gather_wire == WireDType::kInt8 && zero.stage >= 1 && !p.solo;
  return p;
}

namespace {

UnitBuffer whole(const ShardSizes& s) { return {s.numel, 0}; }
UnitBuffer padded(const ShardSizes& s) { return {s.padded_numel, s.padded_numel - s.numel}; }
UnitBuffer shard(const ShardSizes& s) { return {s.shard_numel, s.last_rank_padding}; }

}  // namespace

UnitBuffer StagePolicy::params(const ShardSizes& s) const {
  if (stage == 0) return whole(s);
  return params_sharded(s.numel) ? shard(s) : padded(s);
}

UnitBuffer StagePolicy::grads(const ShardSizes& s) const {
  if (stage == 0) return folds ? padded(s) : whole(s);
  return shards_grads() ? shard(s) : padded(s);
}

UnitBuffer StagePolicy::optimizer_state(const ShardSizes& s) const { return shards_optimizer() ? shard(s) : whole(s); }

UnitBuffer StagePolicy::exact_shard(const ShardSizes& s) const {
  return keeps_exact_shard(s.numel) ? shard(s) : UnitBuffer{};
}

}  // namespace zt
