// Multiple-choice accuracy across ranks (see the header).
#include "engine/app/trainer/choice_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "engine/base/core/check.h"

namespace zt {

namespace {

// Row g of the evaluation: example `example`'s completion `completion`.
struct RowRef {
  int example, completion;
};

std::vector<RowRef> rows_of(const data::ChoiceFile& file) {
  std::vector<RowRef> rows;
  rows.reserve(static_cast<std::size_t>(file.rows()));
  for (std::size_t e = 0; e < file.examples().size(); ++e) {
    for (std::size_t k = 0; k < file.examples()[e].completions.size(); ++k)
      rows.push_back({static_cast<int>(e), static_cast<int>(k)});
  }
  return rows;
}

// Writes the row's context and completion into one batch row of T inputs and targets (the targets
// the inputs shifted by one; padding with token 0 after them, its losses ignored), and returns the
// positions whose targets are the completion's tokens: [context - 1, context + completion - 1).
std::pair<int, int> fill_row(const data::ChoiceExample& x, int completion, int T, std::int32_t* inputs,
                             std::int32_t* targets) {
  const std::vector<std::int32_t>& c = x.context;
  const std::vector<std::int32_t>& e = x.completions[static_cast<std::size_t>(completion)];
  const int n = static_cast<int>(c.size() + e.size());
  auto token = [&](int i) { return i < static_cast<int>(c.size()) ? c[static_cast<std::size_t>(i)] : e[i - c.size()]; };
  for (int i = 0; i < T; ++i) {
    inputs[i] = i < n - 1 ? token(i) : 0;
    targets[i] = i < n - 1 ? token(i + 1) : 0;
  }
  return {static_cast<int>(c.size()) - 1, n - 1};
}

}  // namespace

ChoiceScore score_choices(const data::ChoiceFile& file, const ChoicePlan& plan, const ChoiceModelBuilder& build,
                          ParamStore& store, Communicator& comm, const std::function<bool()>& stop) {
  ZT_CHECK(plan.rows == file.rows() && plan.rows_per_rank * comm.world_size() >= file.rows() &&
               plan.forwards * plan.rows_per_forward >= plan.rows_per_rank && plan.seq_len >= file.longest_input(),
           "{}: a plan of {} rows, {} a rank in {} forwards of {} rows of {} positions, on {} ranks", file.path(),
           plan.rows, plan.rows_per_rank, plan.forwards, plan.rows_per_forward, plan.seq_len, comm.world_size());
  const std::vector<RowRef> rows = rows_of(file);
  const int B = plan.rows_per_forward, T = plan.seq_len;
  const std::int64_t first = std::min<std::int64_t>(file.rows(), comm.rank() * plan.rows_per_rank);
  const std::int64_t last = std::min<std::int64_t>(file.rows(), first + plan.rows_per_rank);

  std::vector<float> row_loss(static_cast<std::size_t>(file.rows()), 0.0f);
  {
    const std::unique_ptr<LanguageModel> model = build(B, T);
    ZT_CHECK(model->batch() == B && model->seq_len() == T, "a choice model of {} x {}", B, T);
    std::vector<std::int32_t> inputs(static_cast<std::size_t>(B) * T), targets(inputs.size());
    std::vector<float> losses(inputs.size());
    std::vector<std::pair<int, int>> scored(static_cast<std::size_t>(B));  // each row's scored positions
    for (std::int64_t f = 0; f < plan.forwards; ++f) {
      const std::int64_t begin = first + f * B;
      for (int b = 0; b < B; ++b) {
        std::int32_t* in = inputs.data() + static_cast<std::size_t>(b) * T;
        std::int32_t* tg = targets.data() + static_cast<std::size_t>(b) * T;
        if (begin + b < last) {
          const RowRef r = rows[static_cast<std::size_t>(begin + b)];
          scored[static_cast<std::size_t>(b)] =
              fill_row(file.examples()[static_cast<std::size_t>(r.example)], r.completion, T, in, tg);
        } else {  // padding: a rank short of rows still takes part in every forward
          std::fill(in, in + T, 0);
          std::fill(tg, tg + T, 0);
        }
      }
      model->forward(store, inputs.data(), targets.data(), {.training = false, .losses_out = losses.data()});
      for (int b = 0; b < B && begin + b < last; ++b) {
        const auto [from, to] = scored[static_cast<std::size_t>(b)];
        double sum = 0.0;
        for (int i = from; i < to; ++i) sum += losses[static_cast<std::size_t>(b) * T + static_cast<std::size_t>(i)];
        row_loss[static_cast<std::size_t>(begin + b)] = static_cast<float>(sum / (to - from));
      }
      if (stop && stop()) {
        model->release_activations();
        ChoiceScore stopped;
        stopped.stopped = true;
        stopped.forwards_done = f + 1;
        return stopped;
      }
    }
    model->release_activations();
  }
  if (comm.world_size() > 1) {
    comm.all_reduce(TensorView{row_loss.data(), DType::kF32, Device::kCPU, Shape{file.rows()}}, ReduceOp::kSum).wait();
  }

  ChoiceScore score;
  std::size_t g = 0;
  for (std::size_t e = 0; e < file.examples().size(); ++e) {
    const data::ChoiceExample& x = file.examples()[e];
    // Every rank holds the summed losses, so every rank finds the same first non-finite row.
    for (std::size_t k = 0; k < x.completions.size(); ++k) {
      if (!std::isfinite(row_loss[g + k])) {
        return {0, 0, fmt::format("example {} completion {}: the model's loss is {}", e, k, row_loss[g + k])};
      }
    }
    std::size_t best = 0;  // the lowest mean loss; a tie goes to the earlier completion
    for (std::size_t k = 1; k < x.completions.size(); ++k)
      if (row_loss[g + k] < row_loss[g + best]) best = k;
    score.correct += static_cast<int>(best) == x.label ? 1 : 0;
    ++score.examples;
    g += x.completions.size();
  }
  return score;
}

}  // namespace zt
