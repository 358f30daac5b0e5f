// What `zerotrain memory --config` predicts, at every ZeRO stage side by side: a step's bytes per
// rank by category, each phase's sum that the memory check weighs (RequiredMemory), the gradients
// with the other gradient-shard dtype, and the elements each rank sends a step. The table and
// JSON that show it: memory_command.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/app/config/run_config.h"
#include "engine/app/trainer/memory_check.h"
#include "engine/app/trainer/run_memory.h"
#include "engine/distributed/sharding/memory_model.h"
#include "engine/distributed/sharding/schedule_replay.h"
#include "models/model_family.h"

namespace zt::cli {

inline constexpr int kPredictedStages = 4;

struct ConfigMemory {
  RunConfig cfg;  // as given, at stage 0 (each stage's figures are below)
  ParamTable table;
  int ranks = 1;
  int store_ranks = 1;  // the store's world: the ranks, or under hybrid sharding one group of them
  ShardingOptions options;
  std::string attention;  // the attention this build would run, which the activations depend on
  // The notes --json carries: the batch read at another accumulation than the config's, and the
  // multiple-choice scorer's.
  std::string batch_note, choices_note;
  std::optional<ChoiceShape> choices;
  // Per stage: why this config's rules refuse it ("" where they do not), as train would; each
  // phase's prediction; the final gather's buffer; the gradients with the other zero.grad_shard_dtype;
  // the elements a rank sends a step.
  std::vector<std::string> refused;
  std::vector<RequiredMemory> phases;
  std::vector<StageMemory> stages;  // a step's
  std::vector<std::int64_t> final_gather_buffers, other_grads;
  std::vector<StepVolume> volumes;

  // A phase's sum at each stage; 0 where `present` is false (the run has no such phase).
  std::vector<std::int64_t> totals(RequiredMemory::Phase p, bool present) const;
  // What the memory check and plan weigh, at each stage.
  std::vector<std::int64_t> required() const;
};

// The prediction for the config at `path` with `sets`, resolved for `ranks` as the run would be
// (one written for another rank count read at train.grad_accum = 1, said). `note` is called with
// each note as it arises, before any later refusal (the batch's, the scorer's, each refused
// stage's). InputError for a config that cannot be predicted.
ConfigMemory predict_config_memory(const std::string& path, std::vector<std::string> sets, int ranks,
                                   const std::function<void(const std::string&)>& note);

}  // namespace zt::cli
