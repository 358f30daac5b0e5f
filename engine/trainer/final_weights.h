// The run's final weights, final.safetensors: every unit's fp32 master gathered to the host (every
// rank takes part), checked finite, and written by rank 0 under the Hugging Face names.
#pragma once

#include <map>
#include <string>

#include "engine/comm/communicator.h"
#include "engine/core/memory_tracker.h"
#include "engine/optim/sharded_adamw.h"
#include "engine/sharding/zero_param_store.h"
#include "kernels/exec_context.h"

namespace zt {

// Collective. `store_comm` is the parameter store's communicator: at stages 1-3 the master shards
// are all-gathered through it (on CUDA they are device memory, which only NCCL, ordered behind the
// compute stream's AdamW, may read; MPI moves host memory). Throws RuntimeError on a non-finite
// value before anything is written: no NaN reaches disk.
void write_final_weights(const std::string& path, const ZeroParamStore& store, const ShardedAdamW& optimizer,
                         Communicator& store_comm, MemoryTracker& tracker, const ExecContext& ctx, bool root,
                         const std::map<std::string, std::string>& metadata);

}  // namespace zt
