// `zerotrain plan`: what fits before launch. The search runs over the choices that trade memory
// for time (ZeRO stage, micro-batch at the config's global batch, activation checkpointing, head
// chunks, block units, stage 3's prefetch depth, the in-flight reduction bound; a key the user's
// --set gives is held at its value instead), keeps those whose
// exact predicted peak (the memory check's measure: predicted_required_bytes) fits the budget per
// rank, and ranks them by the estimated step time of step_time_model.h; among equal times the
// larger micro-batch first (the model counts work, not the efficiency of larger products), then
// the one needing less memory. So the best's next larger micro-batch, all else the same, does not
// fit: its estimate is never slower.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/app/config/run_config.h"
#include "engine/app/plan/step_time_model.h"

namespace zt::plan {

struct Choice {
  std::vector<std::string> sets;  // "section.key=value", as train's --set takes them
  int micro_batch = 0;
  std::int64_t required_bytes = 0;
  StepTime time;
};

struct PlanResult {
  std::vector<Choice> fitting;      // fastest first
  int considered = 0;               // candidates predicted
  int invalid = 0;                  // refused by the config's own rules (e.g. selective beside GELU epilogues)
  std::string first_refusal;        // the first of those refusals' messages
  std::int64_t smallest_bytes = 0;  // the least memory any candidate needs (when none fits)
  // The least any candidate needs with fewer communication buffers (zero.overlap_comm = false:
  // every collective waited at once, nothing in flight), a key the search leaves as the config
  // sets it; -1 where that is no less (or something fits).
  std::int64_t smallest_bytes_fewer_buffers = -1;
  std::int64_t global_batch_tokens = 0;
  Device device = Device::kCPU;  // the config's
  // What the search changed of the config before it could start ("" when nothing): a micro-batch
  // that does not divide the global batch on these ranks (a config written for another rank count).
  std::string note;
  std::vector<std::string> held;  // the searched keys the user's --set held, "key=value" as given
};

// `config_path` with `base_sets` applied, on `world_size` ranks with `budget_bytes` per rank.
PlanResult plan(const std::string& config_path, const std::vector<std::string>& base_sets, int world_size,
                std::int64_t budget_bytes, const OpProfile& profile, const Links& links);

}  // namespace zt::plan
