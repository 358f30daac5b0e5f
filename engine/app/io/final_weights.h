// The run's final weights, final.safetensors: every unit's fp32 master gathered to the host (every
// rank takes part), checked finite, and written by rank 0 under the Hugging Face names, one unit at
// a time (the header first: every tensor's place follows from the table), so no rank holds more
// than one unit's values.
#pragma once

#include <map>
#include <string>

#include "engine/base/core/memory_tracker.h"
#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/optim/sharded_adamw.h"

namespace zt {

// Collective (ShardedAdamW::gather_master, unit by unit): rank 0 of `world` writes `path`. Throws
// RuntimeError on every rank on a non-finite value, `path` left as it was and the staging file
// removed: no NaN reaches it. A failed write on rank 0 (a full disk) ends every rank the same way,
// after the last unit (AgreedRuntimeError, printed once).
void write_final_weights(const std::string& path, ShardedAdamW& optimizer, MemoryTracker& tracker, Communicator& world,
                         const std::map<std::string, std::string>& metadata);

}  // namespace zt
