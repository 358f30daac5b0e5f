// The ZeRO memory prediction: bytes per rank per MemoryTracker category for stages 0-3, from the
// parameter table, the step schedule and the sharding layout of docs/zero_memory.md. It is the
// contract the ZeRO store meets exactly (tests/sharding/zero_memory_test.py); `zerotrain memory`
// prints it.
#pragma once

#include <array>
#include <cstdint>

#include "engine/base/core/memory_tracker.h"
#include "engine/base/core/param_table.h"
#include "engine/distributed/sharding/schedule_replay.h"
#include "engine/distributed/sharding/shard_layout.h"
#include "engine/distributed/sharding/zero_options.h"

namespace zt {

// What the layout depends on beyond the table and dtype.
struct ShardingOptions {
  bool deterministic = false;                            // the communicator's fixed-order reductions (more staging)
  CollectiveBackend backend = CollectiveBackend::kHost;  // whose staging (predict_run_memory sets it)
  // Hybrid sharding: the world is this many groups of `world_size` ranks (the store's world), and
  // each reduction's result is all-reduced across them: in its wait on the host backends, queued
  // with the first hop on NCCL (HybridCommunicator).
  int replica_groups = 1;
  // The step's micro-batches: the first reduces into the gradient shards (replay_step).
  int grad_accum = 1;
};

// What the model allocates itself, the same under every stage (it is sized by the batch, not the
// shard): for GPT, gpt::predict_footprint (models/gpt/gpt_footprint.h).
struct ModelFootprint {
  std::int64_t activation_bytes = 0;  // peak of the activations category
  std::int64_t workspace_bytes = 0;   // peak of the workspace category
  // The part of workspace_bytes a step allocates on first use (bf16 parameters' fp32 unit copies
  // for fp32-activation kernels), absent while the weights are set up.
  std::int64_t step_only_workspace_bytes = 0;
  // The part of workspace_bytes held only while a CUDA kernel call runs: the largest call's scratch
  // ([Note: the kernels' scratch, predicted] in kernels/contracts/kernel_scratch.h).
  std::int64_t kernel_scratch_bytes = 0;
};

// Predicted peak bytes per category on one rank (rank N-1, the most padded; every rank allocates
// the same bytes, the others hold fewer padding elements).
struct StageMemory {
  std::array<std::int64_t, kNumMemCategories> bytes{};
  std::int64_t padding_bytes = 0;  // part of `bytes` that holds no data on rank N-1
  // Parts of parameters and gradients that only a step holds (units gathered for compute,
  // gradients waiting for their reduction), absent between steps.
  std::int64_t step_only_param_bytes = 0, step_only_grad_bytes = 0;
  std::int64_t step_only_workspace_bytes = 0;  // ModelFootprint's
  std::int64_t kernel_scratch_bytes = 0;       // ModelFootprint's
  // Comm buffers the publish of updated parameters stages (quantized gathers; also at set-up).
  std::int64_t publish_comm_bytes = 0;

  std::int64_t& operator[](MemCategory c) { return bytes[static_cast<int>(c)]; }
  std::int64_t operator[](MemCategory c) const { return bytes[static_cast<int>(c)]; }
  // parameters + gradients + master_weights + optimizer_states.
  std::int64_t model_state_bytes() const;
  // Sum of the categories' peaks: an upper bound on the tracker's peak of the sum.
  std::int64_t total_bytes() const;
};

// The prediction for a model's table and step schedule under `zero` on `world_size` ranks.
// param_dtype: kF32 or kBF16.
StageMemory predict_rank_memory(const ParamTable& table, DType param_dtype, const ModelFootprint& model,
                                const StepSchedule& schedule, const ZeroOptions& zero, int world_size,
                                const ShardingOptions& options = {});

// The ZeRO paper's model states for a bare parameter count (no units, no padding, no buffers):
// stage 0 (2+2+K)Psi, 1: 2Psi + 2Psi + K Psi/N, 2: 2Psi + (2+K)Psi/N, 3: (2+2+K)Psi/N. In bytes,
// as doubles since Psi/N need not be whole.
struct ModelStateBytes {
  double parameters = 0, gradients = 0, optimizer_states = 0;  // optimizer_states: K bytes per parameter
  double total() const { return parameters + gradients + optimizer_states; }
};

ModelStateBytes predict_model_states(std::int64_t psi, int stage, int world_size, int k = 12, int bytes_per_param = 2,
                                     int bytes_per_grad = 2);

}  // namespace zt
