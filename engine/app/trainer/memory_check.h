// Refusing a run that cannot fit before it allocates anything: the memory model's prediction per
// rank (docs/zero_memory.md) against what the machine offers that rank, so that the kernel's
// out-of-memory killer never takes the process (or its neighbours) without a word.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/app/config/run_config.h"
#include "engine/app/trainer/choice_plan.h"
#include "engine/distributed/sharding/memory_model.h"

namespace zt {

struct MemoryOffer {
  std::int64_t bytes = -1;  // what this rank may use; -1 when it cannot be told
  std::string what;         // "host memory available to 2 rank(s) on this node (...)", "free memory on cuda:0"
};

// The CPU: MemAvailable from /proc/meminfo, capped by the cgroup's limit less its usage (v2 or v1),
// shared by this node's ranks. CUDA: the rank's GPU's free memory. ZT_TEST_AVAILABLE_BYTES
// replaces the measurement (tests; docs/config.md "Testing hooks").
MemoryOffer memory_offered(const RunConfig& config, int device_index);

// memory_offered's arithmetic, apart from what it reads (-1: unknown). The host: the smaller of
// MemAvailable and the cgroup's headroom, over the node's ranks.
MemoryOffer host_memory_offer(std::int64_t mem_available, std::int64_t cgroup_headroom, int node_ranks);
// How many of a node's ranks take GPU `device_index` when they take the GPUs round robin
// (cuda_device_for_local_rank): comm.backend = "mpi" on CUDA offers each its share.
int ranks_sharing_gpu(int node_ranks, int gpus, int device_index);

// Throws InputError when train.check_memory is on and the predicted peak (the sum of the
// categories' peaks) exceeds the offer, listing the prediction by category beside the offer and
// what to change.
void check_memory_fits(const RunConfig& config, int world_size, int device_index);

// Each phase of a run the memory check weighs (engine/app/trainer/run_memory.h), predicted: a
// step's peak (on CUDA without train.deterministic, the first step's bound too, whose kernels time
// their choices in scratch: predict_timed_step_memory), the set-up's (a large unit's workspace
// beside few activations can pass a step), the final gather's (predicted where log.final_weights,
// weighed on the CPU: on CUDA its unit is host memory, not the device's the check weighs), a
// sample's bound and the multiple-choice scorer's where the run has them, and checkpoint.async's
// staging, host memory the CPU's rank holds beside everything else.
struct RequiredMemory {
  enum class Phase { kStep, kTimedStep, kSetup, kFinalGather, kSample, kChoices };
  StageMemory step, timed_step, setup, final_gather, sample, choices;
  bool weighs_timed_step = false, weighs_final_gather = false, weighs_sample = false, weighs_choices = false;
  bool has_final_gather = false;
  std::int64_t staging = 0;

  // The weighed phase of the largest sum (the first of them on a tie), but `leaving_out`.
  Phase phase(std::optional<Phase> leaving_out = std::nullopt) const;
  const StageMemory& of(Phase p) const;
  const StageMemory& predicted() const { return of(phase()); }
  std::int64_t bytes() const { return predicted().total_bytes() + staging; }
};

// `config`'s phases on `world_size` ranks, the scorer's where `choices` (run_choice_shape(config),
// read once by a caller predicting many configs) says the run scores examples.
RequiredMemory required_memory(const RunConfig& config, int world_size, const std::optional<ChoiceShape>& choices);

// The bytes the memory check compares with the offer: the largest predicted peak (sum of the
// categories' peaks) of a step (on CUDA without train.deterministic, a bound of the first step's,
// whose kernels time their choices), the set-up, on the CPU the final gather, a sample's bound where the
// run samples and the multiple-choice scorer's where `choices` (run_choice_shape(config), read once
// by a caller predicting many configs) says the run scores examples, plus checkpoint.async's
// staging on the CPU (host memory beside the rest). The planner (engine/app/plan) keeps what fits
// by the same measure.
std::int64_t predicted_required_bytes(const RunConfig& config, int world_size,
                                      const std::optional<ChoiceShape>& choices);

}  // namespace zt
