// The run's final weights, final.safetensors: every unit's fp32 master gathered to the host (every
// rank takes part), checked finite, and written by rank 0 under the Hugging Face names, one unit at
// a time (the header first: every tensor's place follows from the table), so no rank holds more
// than one unit's values.
#pragma once

#include <map>
#include <string>

#include "engine/base/core/memory_tracker.h"
#include "engine/distributed/optim/sharded_adamw.h"

namespace zt {

// Collective (ShardedAdamW::gather_master, unit by unit). Throws RuntimeError on a non-finite value,
// `path` left as it was and the staging file removed: no NaN reaches it. `root`: the rank that
// writes `path`.
void write_final_weights(const std::string& path, ShardedAdamW& optimizer, MemoryTracker& tracker, bool root,
                         const std::map<std::string, std::string>& metadata);

}  // namespace zt
