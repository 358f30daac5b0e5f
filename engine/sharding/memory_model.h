// The ZeRO memory prediction: bytes per rank per MemoryTracker category for stages 0-3, from the
// parameter table, the step schedule and the sharding layout of docs/zero_memory.md. It is the
// contract the ZeRO store meets exactly (tests/sharding/zero_memory_test.py); `zerotrain memory`
// prints it.
#pragma once

#include <array>
#include <cstdint>

#include "engine/config/run_config.h"
#include "engine/core/memory_tracker.h"
#include "engine/core/param_table.h"
#include "engine/sharding/schedule_replay.h"
#include "engine/sharding/zero_options.h"
#include "models/gpt/activations.h"

namespace zt {

// What the layout depends on beyond the table and dtype.
struct ShardingOptions {
  bool deterministic = false;              // the communicator's fixed-order reductions (more staging)
  CollectiveBackend backend = CollectiveBackend::kHost;  // whose staging (predict_rank_memory(RunConfig) sets it)
};

// One unit's flat buffer of `numel` elements split over `world_size` ranks.
struct ShardSizes {
  std::int64_t numel = 0;              // n: elements of the unit
  std::int64_t shard_numel = 0;        // s = ceil(n / N): elements every rank allocates
  std::int64_t padded_numel = 0;       // s * N: the unit as the collectives see it
  std::int64_t last_rank_padding = 0;  // elements of rank N-1's shard that hold no data (the most of any rank)
};

ShardSizes shard_sizes(std::int64_t numel, int world_size);

// What the model allocates itself, the same under every stage (it is sized by the batch, not the shard).
struct ModelFootprint {
  std::int64_t activation_bytes = 0;  // peak of the activations category
  std::int64_t workspace_bytes = 0;   // peak of the workspace category
};

// GptModel's footprint for micro-batches of B x T on `device` (which decides between flash and
// materialised attention, gpt::activation_dims): gpt::predict_activation_peak_bytes, and the
// workspace GptModel and BlockGradScratch allocate (docs/memory.md).
ModelFootprint predict_gpt_footprint(const gpt::GptConfig& model, int micro_batch, int seq_len,
                                     const gpt::CheckpointPolicy& checkpointing, DType param_dtype, Device device,
                                     DType activations = DType::kF32);

// Predicted peak bytes per category on one rank (rank N-1, the most padded; every rank allocates
// the same bytes, the others hold fewer padding elements).
struct StageMemory {
  std::array<std::int64_t, kNumMemCategories> bytes{};
  std::int64_t padding_bytes = 0;  // part of `bytes` that holds no data on rank N-1

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

// The same for a run config (its model, micro_batch, seq_len, checkpointing, param_dtype and zero
// options) at `stage`.
StageMemory predict_rank_memory(const RunConfig& config, int stage, int world_size,
                                const ShardingOptions& options = {});

// The ZeRO paper's model states for a bare parameter count (no units, no padding, no buffers):
// stage 0 (2+2+K)Psi, 1: 2Psi + 2Psi + K Psi/N, 2: 2Psi + (2+K)Psi/N, 3: (2+2+K)Psi/N. In bytes,
// as doubles since Psi/N need not be whole.
struct ModelStateBytes {
  double parameters = 0, gradients = 0, optimizer_states = 0;  // optimizer_states: K bytes per parameter
  double total() const { return parameters + gradients + optimizer_states; }
};

ModelStateBytes predict_model_states(std::int64_t psi, int stage, int world_size, int k = 12,
                                     int bytes_per_param = 2, int bytes_per_grad = 2);

}  // namespace zt
