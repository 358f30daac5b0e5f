// Measured memory beside the prediction: each rank's peak bytes per category, gathered to every
// rank, and the table `train` prints (predicted, measured on each rank, measured / predicted).
#pragma once

#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/config/run_config.h"
#include "engine/core/memory_tracker.h"

namespace zt {

// Every rank's snapshot, in rank order (a collective).
std::vector<MemorySnapshot> gather_memory_snapshots(Communicator& comm, const MemorySnapshot& mine);

// The table for `config` (its ZeRO stage and world size) against the ranks' measured peaks.
std::string format_measured_vs_predicted(const RunConfig& config, const std::vector<MemorySnapshot>& per_rank);

}  // namespace zt
