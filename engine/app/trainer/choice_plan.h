// How a multiple-choice evaluation (engine/app/trainer/choice_eval.h) cuts its rows into forwards
// on its ranks: what the scorer runs by and the memory prediction plans its models by.
#pragma once

#include <cstdint>

#include "engine/app/data/choice_file.h"

namespace zt {

// How an evaluation of `file` is cut across `world` ranks: each rank scores a contiguous run of at
// most rows_per_rank rows, in forwards of rows_per_forward rows of seq_len tokens (the longest
// input rounded up to a multiple of 64, the attention kernels' tile, within the model's `context`
// and `tokens_per_forward`), as many rows a forward as `tokens_per_forward` allows (a training
// micro-batch's tokens: no forward holds more activations than a step, but for one row of the
// longest input where that alone is longer), and every rank runs the same `forwards`, stage 3's
// gathers being collective.
struct ChoicePlan {
  std::int64_t rows = 0;  // the file's, over all ranks
  std::int64_t rows_per_rank = 0;
  int rows_per_forward = 1;
  int seq_len = 1;
  std::int64_t forwards = 0;
};

// What a plan reads of a file: its rows and its longest input. The memory prediction plans the
// scorer's models from it (engine/app/trainer/run_memory.h), before the run's data is loaded.
struct ChoiceShape {
  std::int64_t rows = 0;
  int longest_input = 0;
};
ChoiceShape choice_shape(const data::ChoiceFile& file);
// The plan for a file of that shape; its longest input must fit `context`.
ChoicePlan plan_choices(const ChoiceShape& shape, int world, std::int64_t tokens_per_forward, int context);
ChoicePlan plan_choices(const data::ChoiceFile& file, int world, std::int64_t tokens_per_forward, int context);

}  // namespace zt
