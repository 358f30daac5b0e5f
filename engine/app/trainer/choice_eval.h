// Multiple-choice accuracy (data.choice_file: llm.c's eval files, HellaSwag's validation split) of
// the model in a parameter store: each completion scored by its mean cross-entropy given the
// example's context (HellaSwag's acc_norm, as llm.c and nanoGPT report it), the lowest taken as the
// model's answer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "engine/app/data/choice_file.h"
#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/sharding/param_store.h"
#include "models/language_model.h"

namespace zt {

struct ChoiceScore {
  std::int64_t correct = 0;
  std::int64_t examples = 0;
  double accuracy() const { return examples > 0 ? static_cast<double>(correct) / static_cast<double>(examples) : 0.0; }
};

// Builds a forwards-only model for `rows` sequences of `seq_len` tokens.
using ChoiceModelBuilder = std::function<std::unique_ptr<LanguageModel>(int rows, int seq_len)>;

// How an evaluation of `file` is cut across `world` ranks: each rank scores a contiguous run of at
// most rows_per_rank rows, in forwards of rows_per_forward rows of seq_len tokens (the longest
// input rounded up to a multiple of 64, the attention kernels' tile, within the model's `context`
// and `tokens_per_forward`), as many rows a forward as `tokens_per_forward` allows (a training
// micro-batch's tokens: no forward holds more activations than a step, but for one row of the
// longest input where that alone is longer), and every rank runs the same `forwards`, stage 3's
// gathers being collective.
struct ChoicePlan {
  std::int64_t rows_per_rank = 0;
  int rows_per_forward = 1;
  int seq_len = 1;
  std::int64_t forwards = 0;
};
ChoicePlan plan_choices(const data::ChoiceFile& file, int world, std::int64_t tokens_per_forward, int context);

// What a plan reads of a file: its rows and its longest input. The memory prediction plans the
// scorer's models from it (engine/app/trainer/run_memory.h), before the run's data is loaded.
struct ChoiceShape {
  std::int64_t rows = 0;
  int longest_input = 0;
};
ChoiceShape choice_shape(const data::ChoiceFile& file);
// plan_choices for a file of that shape; its longest input must fit `context`.
ChoicePlan plan_choices(const ChoiceShape& shape, int world, std::int64_t tokens_per_forward, int context);

// Every rank calls it with the same `plan` (plan_choices for `file` on comm's world; the forwards
// are collective where the store is sharded) and gets the same score: each row's mean loss from the
// rank that scored it, the others' zeros, summed over `comm` (exact: one value and zeros).
ChoiceScore score_choices(const data::ChoiceFile& file, const ChoicePlan& plan, const ChoiceModelBuilder& build,
                          ParamStore& store, Communicator& comm);

}  // namespace zt
