// Multiple-choice accuracy (data.choice_file: llm.c's eval files, HellaSwag's validation split) of
// the model in a parameter store: each completion scored by its mean cross-entropy given the
// example's context (HellaSwag's acc_norm, as llm.c and nanoGPT report it), the lowest taken as the
// model's answer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine/app/data/choice_file.h"
#include "engine/app/trainer/choice_plan.h"
#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/sharding/param_store.h"
#include "models/language_model.h"

namespace zt {

struct ChoiceScore {
  std::int64_t correct = 0;
  std::int64_t examples = 0;
  // Where a row's loss is not finite (an overflowed forward), which ("example E completion K: the
  // model's loss is nan"), and no score: a NaN loses every comparison, so its example would count
  // its first completion. Empty where every row's loss is finite.
  std::string nonfinite;
  // A stop request the ranks agreed on after forward `forwards_done` (score_choices' `stop`): no
  // score, the scoring to make again.
  bool stopped = false;
  std::int64_t forwards_done = 0;
  double accuracy() const { return examples > 0 ? static_cast<double>(correct) / static_cast<double>(examples) : 0.0; }
};

// Builds a forwards-only model for `rows` sequences of `seq_len` tokens.
using ChoiceModelBuilder = std::function<std::unique_ptr<LanguageModel>(int rows, int seq_len)>;

// Every rank calls it with the same `plan` (plan_choices for `file` on comm's world; the forwards
// are collective where the store is sharded) and gets the same score: each row's mean loss from the
// rank that scored it, the others' zeros, summed over `comm` (exact: one value and zeros). `stop`,
// where given, is the ranks' collective stop vote, asked after each forward (every rank runs the
// same forwards): a stop request ends the scoring there (a full HellaSwag file on the CPU is
// minutes of forwards, past a preemption's grace period).
ChoiceScore score_choices(const data::ChoiceFile& file, const ChoicePlan& plan, const ChoiceModelBuilder& build,
                          ParamStore& store, Communicator& comm, const std::function<bool()>& stop = {});

}  // namespace zt
