// Replays one training step's pass schedules with ZeroParamStore's rules (which units are
// gathered, prefetched, kept or freed; which gradient reductions are in flight; what each
// collective stages) and returns the peak bytes of what lives only part of the step. With the
// step's fixed buffers this is the exact per-rank prediction of docs/zero_memory.md.
#pragma once

#include <cstdint>

#include "engine/base/core/dtype.h"
#include "engine/base/core/param_table.h"
#include "engine/distributed/sharding/param_store.h"
#include "engine/distributed/sharding/zero_options.h"

namespace zt {

// A model's forward and backward schedules (for GPT: models/gpt/gpt_schedule.h).
struct StepSchedule {
  PassSchedule forward, backward;
};

struct TransientPeaks {
  std::int64_t gathered_params = 0;  // stage 3: full units gathered (or gathering) at once
  std::int64_t pending_grads = 0;    // stages 2-3: full unit gradients awaiting their reduce-scatter
  std::int64_t comm_staging = 0;     // fp32 staging of the reductions in flight (and quantized gathers')
  // The staging of the publish of updated parameters after the optimizer (and at set-up), outside
  // the passes: quantized publishes, waited one unit at a time; none otherwise.
  std::int64_t publish_staging = 0;
};

// Whose staging the store's collectives pay: the host backends' (MPI; the local communicator of
// one rank stages nothing), NCCL's (device memory), or none beyond the store's own fp32 reduced
// buffers (a StagedCommunicator, whose staging is host memory it tracks apart). The trainer's
// choice (engine/app/trainer/store_comm.h) says which.
enum class CollectiveBackend { kHost, kNccl, kHostStaged };

// Bytes MpiCommunicator stages for an all-reduce of n elements on `world_size` ranks (none on one).
std::int64_t host_all_reduce_staging_bytes(std::int64_t n, int world_size, bool deterministic);

// `deterministic`: the host communicator's fixed-order reductions (all-to-all staging). Every
// backend adds the store's own fp32 reduced shards at stages 2-3, but to the step's first
// reduction of a unit (StagePolicy::first_reduction_into_shard). `replica_groups` > 1: hybrid
// sharding over host communicators, `world_size` being the group's size (see Replay::finish_oldest).
// `grad_accum`: the step's micro-batches (the first reduces into the shards, the others not).
TransientPeaks replay_step(const ParamTable& table, DType param_dtype, const ZeroOptions& zero, int world_size,
                           bool deterministic, CollectiveBackend backend, const StepSchedule& schedule,
                           int replica_groups = 1, int grad_accum = 1);

// The same for a forward that no backward follows (a sample's, a multiple-choice scorer's): each
// unit freed at its release, no gradient pending or reduced, no publish; what stays is the gathered
// units' peak (stage 3) and a quantized gather's staging.
TransientPeaks replay_forward(const ParamTable& table, DType param_dtype, const ZeroOptions& zero, int world_size,
                              bool deterministic, CollectiveBackend backend, const PassSchedule& forward,
                              int replica_groups = 1);

// Elements one rank sends in one optimizer step through the store's communicator, counted as
// Communicator::elements_sent counts them (a ring's n (N-1)/N per all-gather or reduce-scatter of
// n, 2 n (N-1)/N per all-reduce, each rounded down): `grad_accum` micro-batches of the schedule's
// gathers and reductions, the publish of the units kept whole, and the gradient norm's
// all-gather. With hybrid sharding (`replica_groups` > 1, `world_size` the group's size) what
// crosses the groups apart: each reduction's second hop.
// Bytes as Communicator::bytes_sent counts them: reductions move fp32, gathers the parameters'
// dtype, quantized collectives their packed words (quantized_collectives.h).
struct StepVolume {
  std::int64_t in_group = 0;       // the whole world's when not hybrid
  std::int64_t across_groups = 0;  // hybrid sharding's second hops
  std::int64_t bytes_in_group = 0, bytes_across_groups = 0;
  // Collectives started (an exchange of a quantized collective counted as one), for a latency model.
  std::int64_t collectives_in_group = 0, collectives_across_groups = 0;
  // Of the in-group ones, the parameter gathers an acquire issues and waits for at once (no earlier
  // acquire prefetched the unit: stage 3 with zero.prefetch_units = 0, a pass's first unit, or
  // without zero.overlap_comm), which no compute hides.
  std::int64_t exposed_gather_bytes = 0, exposed_gathers = 0;
};
StepVolume predict_step_volume(const ParamTable& table, DType param_dtype, const ZeroOptions& zero, int world_size,
                               const StepSchedule& schedule, int grad_accum, int replica_groups = 1);

}  // namespace zt
