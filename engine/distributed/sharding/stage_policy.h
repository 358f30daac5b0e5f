// What a ZeRO stage keeps and how it reduces, decided once per run from the stage, the zero
// options, the world size and the parameter dtype: the rules of docs/zero_memory.md's table in
// one place. ZeroParamStore allocates and reduces by it, the schedule replay and the memory model
// count bytes by it, so the prediction follows the store by construction; none of them tests a
// stage number for these rules.
#pragma once

#include <cstdint>

#include "engine/base/core/dtype.h"
#include "engine/distributed/sharding/shard_layout.h"
#include "engine/distributed/sharding/zero_options.h"

namespace zt {

// The elements a rank allocates for one of a unit's buffers, and how many of them hold no data on
// rank N-1 (the most padded rank; docs/zero_memory.md).
struct UnitBuffer {
  std::int64_t numel = 0;
  std::int64_t last_rank_padding = 0;
};

struct StagePolicy {
  int stage = 0;
  int world_size = 1;
  DType param_dtype = DType::kF32;  // the working parameters
  DType grad_dtype = DType::kF32;   // stored gradients: param_dtype, or F32 under fp32_grad_shards at 2-3
  std::int64_t persistence_threshold = 0;
  // A world of one at stages 1-3: no collective at all, the shard is the whole unit, so the step
  // does stage 0's work (unless zero.solo_path is false).
  bool solo = false;
  // Stages 0-1 on several ranks under zero.reduce_every_micro_batch.
  bool reduce_every_micro_batch = false;
  // zero.fold_in_global_order: every unit pends at every stage and world size (its rounds in one
  // pending buffer), exchanged and folded into this rank's gradient shard (at stages 0-1 its slice
  // of the padded gradient buffer).
  bool folds = false;
  // zero.gather_dtype = "int8" at stages 1-3 (not solo): every parameter all-gather moves int8
  // blocks, and every rank computes with the decoded values, its own shard's included.
  bool quantized_gathers = false;
  // A unit's gradient waits in a pending full buffer (param_dtype) for a reduction of its own:
  // stages 2-3 (but solo with grad_dtype == param_dtype, whose gradients add straight into the
  // shard), and stages 0-1 reducing every micro-batch. Otherwise contributions add into the
  // stored gradient, reduced after the last micro-batch.
  bool pends = false;
  // Stages 2-3 with a pending buffer, not folding, without hybrid sharding: the step's first
  // reduction of a unit writes its gradient shard directly (the shard holds zero then, and the
  // reduction's rounding is the one the addition would do), later ones go through an fp32 reduced
  // shard added into it. So a step of one micro-batch neither zeroes the shards nor adds into
  // them, nor holds the store's reduced buffers. Hybrid sharding keeps the reduced buffer: its
  // second hop all-reduces the result where it lands, in fp32.
  bool first_reduction_into_shard = false;
  // A unit the backward reduces in several rounds (units_reduced_in_rounds) pends on more than one
  // rank at every stage: each round waits in its own pending buffer for a reduction of its own.
  bool pends_unit(bool reduced_in_rounds) const { return pends || (reduced_in_rounds && world_size > 1); }

  // The optimizer (fp32 master, m, v) holds this rank's shard of every unit (stage 0: every unit).
  bool shards_optimizer() const { return stage >= 1; }
  // The stored gradient is this rank's shard (stages 2-3); else a full buffer.
  bool shards_grads() const { return stage >= 2; }
  // Stage 3 keeps a unit's parameters as a shard, gathered for use, unless it is smaller than the
  // persistence threshold.
  bool params_sharded(std::int64_t unit_numel) const { return stage == 3 && unit_numel >= persistence_threshold; }
  // Stage 0 all-reduces the whole unit's gradient; the others reduce-scatter the padded unit.
  bool all_reduces_whole_unit() const { return stage == 0; }
  // Stage 1 reduce-scatters in place: the reduced shard lands in this rank's slice of the full
  // (padded) gradient buffer.
  bool reduces_into_own_slice() const { return stage == 1; }
  // After AdamW the updated shards are all-gathered in place into whole (padded) units: stages 1-2
  // and stage 3's persistent units, when there are other ranks.
  bool publishes_params() const { return stage >= 1 && !solo; }
  // Under quantized gathers a unit kept whole keeps its exact shard apart (the optimizer's working
  // shard): the whole buffer holds the decoded values of every rank's shard, its own included.
  bool keeps_exact_shard(std::int64_t unit_numel) const {
    return quantized_gathers && publishes_params() && !params_sharded(unit_numel);
  }

  // Each buffer a rank allocates for one unit:
  // parameters: the unit (stage 0), the shard (sharded at stage 3), else the padded unit (so the
  // publish lands in place);
  UnitBuffer params(const ShardSizes& s) const;
  // gradients: the unit (stage 0; padded when folding), the padded unit (stage 1), the shard
  // (stages 2-3);
  UnitBuffer grads(const ShardSizes& s) const;
  // optimizer state (each of master, m, v): the unit (stage 0), else the shard;
  UnitBuffer optimizer_state(const ShardSizes& s) const;
  // the exact shard of a unit kept whole under quantized gathers (none otherwise).
  UnitBuffer exact_shard(const ShardSizes& s) const;
};

StagePolicy make_stage_policy(const ZeroOptions& zero, int world_size, DType param_dtype);

}  // namespace zt
