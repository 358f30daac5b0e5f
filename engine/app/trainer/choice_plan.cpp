// Cutting a multiple-choice evaluation into forwards (see the header).
#include "engine/app/trainer/choice_plan.h"

#include <algorithm>

#include "engine/base/core/check.h"

namespace zt {

ChoiceShape choice_shape(const data::ChoiceFile& file) { return {file.rows(), file.longest_input()}; }

ChoicePlan plan_choices(const ChoiceShape& shape, int world, std::int64_t tokens_per_forward, int context) {
  ZT_CHECK(shape.longest_input <= context, "an example of {} positions in a model of {}", shape.longest_input, context);
  ChoicePlan p;
  const std::int64_t rounded = std::min<std::int64_t>(
      {context, (shape.longest_input + 63) / 64 * 64, std::max<std::int64_t>(1, tokens_per_forward)});
  p.seq_len = static_cast<int>(std::max<std::int64_t>(shape.longest_input, rounded));
  p.rows = shape.rows;
  p.rows_per_rank = (shape.rows + world - 1) / world;
  p.rows_per_forward = static_cast<int>(
      std::clamp<std::int64_t>(tokens_per_forward / p.seq_len, 1, std::max<std::int64_t>(1, p.rows_per_rank)));
  p.forwards = (p.rows_per_rank + p.rows_per_forward - 1) / p.rows_per_forward;
  return p;
}

ChoicePlan plan_choices(const data::ChoiceFile& file, int world, std::int64_t tokens_per_forward, int context) {
  return plan_choices(choice_shape(file), world, tokens_per_forward, context);
}

}  // namespace zt
