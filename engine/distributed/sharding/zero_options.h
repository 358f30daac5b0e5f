// What a run's `zero` config section chooses: the stage and how its collectives are scheduled.
// Defaults follow the peers: DeepSpeed's overlap_comm, FSDP's forward/backward prefetch of one
// unit and reshard_after_forward, DeepSpeed's stage3_param_persistence_threshold (off here: our
// units are whole layers, see docs/zero_memory.md). docs/config.md documents each key.
#pragma once

#include <cstdint>

#include "engine/distributed/comm/quantized_collectives.h"

namespace zt {

struct ZeroOptions {
  int stage = 0;  // 0 (DDP) .. 3 (parameters sharded too)
  // Collectives start as soon as their data is ready and are waited only when the result is
  // needed (false: each one is waited at once, the synchronous baseline).
  bool overlap_comm = true;
  int prefetch_units = 1;  // stage 3: units gathered ahead of use, in schedule order
  int max_inflight_reductions = 2;
  // Stages 2-3 (and deterministic 0-1): also wait the oldest reduction while the pending full
  // gradients of the reductions in flight hold more than this many bytes (0: no bound).
  std::int64_t max_inflight_reduction_bytes = 0;  // gradient collectives in flight before the oldest is waited
  bool reshard_after_forward = true;              // stage 3: false keeps every unit gathered until its backward
  std::int64_t persistence_threshold = 0;         // stage 3: units with fewer elements stay whole (as stage 2)
  // A world of one at stages 1-3 calls no collective (StagePolicy::solo). false keeps every
  // collective of N ranks at N = 1 (one-rank NCCL or MPI), so one GPU measures what they cost.
  bool solo_path = true;
  // Hybrid sharding: stages 1-3 shard within groups of this many consecutive ranks and replicate
  // across the groups (engine/distributed/comm/hybrid_communicator.h); 0: the whole world.
  int shard_group_size = 0;
  // Quantized collectives (ZeRO++, engine/distributed/comm/quantized_collectives.h): parameter
  // all-gathers as int8 blocks at stages 1-3 (qwZ, zero.gather_dtype), and hybrid sharding's
  // reduction across the groups as bf16 or int8 (qgZ, zero.cross_group_grad_dtype).
  WireDType gather_wire = WireDType::kExact;
  WireDType cross_group_grad_wire = WireDType::kExact;
  bool fp32_grad_shards = false;  // stages 2-3: the gradient shard (and its accumulation) in fp32,
                                  // instead of the working dtype
  // Stages 0-1 on more than one rank reduce every micro-batch's gradient (through a pending buffer,
  // as stages 2-3 must) instead of the sum after the last one, so that every stage adds the same
  // terms in the same order and rounds them once: set under hybrid sharding, in deterministic mode
  // with grad_accum > 1 or bf16 gradients, otherwise with bf16 gradients at grad_accum 1
  // (zero_section.cpp; not a config key).
  bool reduce_every_micro_batch = false;
  // train.deterministic without hybrid sharding (not a config key): the same bits at any rank
  // count (docs/zero_memory.md, "The same bits at any rank count"). Every micro-batch's gradient of
  // a unit (all its rounds summed) is exchanged as shards (an all-to-all) and each rank adds the
  // ranks' parts into its gradient shard in rank order, which is the global micro-batch order:
  // every element is the same left fold over the step's micro-batches at every N and stage. Stage
  // 0 all-gathers the folded shards after the last micro-batch; the gradient norm is exact.
  bool fold_in_global_order = false;

  // Hybrid sharding on `world_size` ranks: groups smaller than the world (a group of the whole
  // world, or 0, is plain sharding).
  bool hybrid(int world_size) const { return shard_group_size != 0 && shard_group_size != world_size; }
};

}  // namespace zt
