// What a run does with its model between steps, without training it: the validation loss over
// fixed windows and a text sample, each logged and kept in the summary.
#pragma once

#include "engine/app/trainer/trainer_state.h"

#include <cstdint>
#include <functional>
#include <optional>

#include "engine/app/data/batch_sampler.h"
#include "engine/app/data/token_corpus.h"

namespace zt {

// The ranks' vote on a stop request (a collective: every rank asks it at the same points): true
// ends an evaluation or sample there, unlogged, so that a preempted job does not spend its grace
// period on them; the resumed run makes them (its log lacks them).
using StopVote = std::function<bool()>;

// Whether an evaluation, and a sample, follow `step` (steps done): every train.eval_every
// (log.sample_every) steps, and after the last; never a sample at step 0 or with log.sample_tokens 0.
bool evaluates_after(const RunConfig& c, int step);
bool samples_after(const RunConfig& c, int step);

// A run's validation loss: the mean of `batches` forward losses, batch b over windows b * B to
// (b + 1) * B - 1 of `val` as `stream` reads them (B windows of T tokens a batch, each into
// `inputs` and `targets`), split over the ranks of `comm` ([Note: the evaluation split over
// ranks]), so the same bits at any rank count. `forward` returns a batch's mean loss (every rank
// calls it as often: a stage-3 forward is collective), `after_forwards` is called once they end.
// `stop` is asked after each forward; a stop returns no loss, with `batches_done` as far as it got.
struct ValidationLoss {
  std::optional<float> loss;
  int batches_done = 0;
  int batches_per_rank = 0;
};
ValidationLoss validation_loss(const data::TokenCorpus& val, const data::SampleStream& stream, int B, int T,
                               int batches, Communicator& comm, std::int32_t* inputs, std::int32_t* targets,
                               const std::function<double()>& forward, const std::function<void()>& after_forwards,
                               const StopVote& stop = {});

// The mean loss of train.eval_batches forward passes over the same validation windows every time
// (no dropout); logged as an "eval" record after step `step`. `stop` is asked after each forward
// (none: never stopped); returns false when it ended the evaluation.
bool evaluate(TrainerState& s, int step, TrainSummary& summary, const StopVote& stop = {});

// log.sample_tokens generated from log.sample_prompt by a batch-1 model through the same store,
// seeded by the step; decoded with the dataset's vocabulary (token ids without one). `stop` is
// asked before every 16th draw; returns false when it ended the sample.
bool sample(TrainerState& s, int step, TrainSummary& summary, const StopVote& stop = {});

}  // namespace zt
