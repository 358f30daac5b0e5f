// Measured memory beside the prediction: each rank's peak bytes per category, gathered to every
// rank, and the table `train` prints (predicted, measured on each rank, measured / predicted);
// the figures as metrics.jsonl and the progress line show them.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "engine/app/config/run_config.h"
#include "engine/app/trainer/choice_plan.h"
#include "engine/base/core/memory_tracker.h"
#include "engine/distributed/comm/communicator.h"

namespace zt {

struct StageMemory;  // engine/distributed/sharding/memory_model.h

// "p 1.6M g 1.6M m 3.2M o 6.4M a 19M w 4.5M": the live memory figures in one short field.
std::string compact_memory(const MemorySnapshot& s);
// {category name: bytes}: peaks measured, or a prediction.
nlohmann::json memory_json(const MemorySnapshot& s);
nlohmann::json memory_json(const StageMemory& m);

// Every rank's snapshot, in rank order (a collective).
std::vector<MemorySnapshot> gather_memory_snapshots(Communicator& comm, const MemorySnapshot& mine);

// What a whole run did beside its steps that the table's prediction takes in.
struct BesideTheSteps {
  bool stepped = true;                    // a training step ran (none: a finished run resumed, max_steps 0)
  bool final_gathered = false;            // final.safetensors was gathered
  std::optional<ChoicePlan> choice_plan;  // the multiple-choice scorer ran, by this plan
};

// The table for `config` (its ZeRO stage and world size) against the ranks' measured peaks: a
// step's prediction, or, for peaks over a whole run, each category's largest of a step's and those
// of the phases `beside` names (the final gather's, the multiple-choice scorer's).
std::string format_measured_vs_predicted(const RunConfig& config, const std::vector<MemorySnapshot>& per_rank,
                                         const BesideTheSteps& beside = {});

}  // namespace zt
