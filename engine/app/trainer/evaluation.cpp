// Evaluation and sampling between steps (see the header).
#include "engine/app/trainer/evaluation.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/app/data/batch_sampler.h"
#include "engine/app/data/utf8.h"
#include "engine/app/trainer/choice_eval.h"
#include "engine/app/trainer/run_memory.h"
#include "engine/app/trainer/text_sampler.h"

namespace zt {

namespace {

void report_stopped(TrainerState& s, int step, const std::string& what) {
  s.progress.message(fmt::format("step {}: {} stopped by a stop request; a resume makes it", step, what));
}

}  // namespace

bool evaluates_after(const RunConfig& c, int step) {
  return step == c.train.max_steps || (c.train.eval_every > 0 && step % c.train.eval_every == 0);
}

bool samples_after(const RunConfig& c, int step) {
  return step > 0 && c.log.samples() &&
         (step == c.train.max_steps || (c.log.sample_every > 0 && step % c.log.sample_every == 0));
}

// [Note: the evaluation split over ranks]
// Rank r of N evaluates micro-batches r, r + N, r + 2N, ... of the eval_batches, and the losses are
// summed in batch order after an all-gather, so val_loss is one rank's sum bit for bit at any rank
// count: a batch's loss does not depend on the rank that computes it (every rank holds the same
// weights, and the kernels' bits do not depend on the rank). Every rank runs the same number of
// forwards, since a stage-3 forward gathers its units collectively and the stop vote is collective:
// in the last round a rank with no batch left runs batch 0 again and drops its loss (no more
// forwards than each rank ran when every rank evaluated every batch).
ValidationLoss validation_loss(const data::TokenCorpus& val, const data::SampleStream& stream, int B, int T,
                               int batches, Communicator& comm, std::int32_t* inputs, std::int32_t* targets,
                               const std::function<double()>& forward, const std::function<void()>& after_forwards,
                               const StopVote& stop) {
  const int ranks = comm.world_size(), rank = comm.rank();
  const int rounds = (batches + ranks - 1) / ranks;
  ValidationLoss result;
  result.batches_per_rank = rounds;
  std::vector<double> mine(static_cast<std::size_t>(rounds), 0.0);
  for (int k = 0; k < rounds; ++k) {
    const int batch = k * ranks + rank;
    const std::int64_t first_window = static_cast<std::int64_t>(batch < batches ? batch : 0) * B;
    data::fill_batch(val, stream, B, T, first_window, inputs, targets);
    const double loss = forward();
    if (batch < batches) mine[static_cast<std::size_t>(k)] = loss;
    result.batches_done = std::min(batches, (k + 1) * ranks);
    if (stop && stop()) {
      after_forwards();
      return result;
    }
  }
  after_forwards();  // before the gather's buffers: the peak stays the forwards'
  const std::vector<double> all = all_gather_values<double>(comm, mine);  // rank-major: [ranks][rounds]
  double sum = 0.0;
  for (int i = 0; i < batches; ++i) sum += all[static_cast<std::size_t>((i % ranks) * rounds + i / ranks)];
  result.loss = static_cast<float>(sum / batches);
  return result;
}

bool evaluate(TrainerState& s, int step, TrainSummary& summary, const StopVote& stop) {
  const RunConfig& c = s.config;
  s.set_comm_context(fmt::format("the evaluation after step {}", step));
  const int B = c.train.micro_batch, T = c.train.seq_len, batches = c.train.eval_batches;
  // After the last forward too: the choices, or the sample after, can take as long again.
  const ValidationLoss v = validation_loss(
      s.data.val(), s.data.val_stream(), B, T, batches, s.comm, s.inputs.data(), s.targets.data(),
      [&] { return s.model->forward(s.store, s.inputs.data(), s.targets.data(), {.training = false}); },
      [&] { s.model->release_activations(); }, stop);
  if (!v.loss) {
    report_stopped(s, step, fmt::format("the evaluation (after {} of {} batches)", v.batches_done, batches));
    return false;
  }
  const float val_loss = *v.loss;
  const int rounds = v.batches_per_rank;
  summary.val_loss = val_loss;
  // The windows it averaged over: eval_batches micro-batches, so another micro_batch (the same
  // global batch through grad_accum) evaluates on other windows, and its val_loss differs.
  nlohmann::json record = {{"type", "eval"},
                           {"step", step},
                           {"val_loss", val_loss},
                           {"val_windows", static_cast<std::int64_t>(c.train.eval_batches) * B},
                           {"val_batches_per_rank", rounds}};
  std::string choices;
  if (s.data.choices()) {
    // Forwards-only models in the run's activation dtype over the run's store, as many tokens a
    // forward as a training micro-batch.
    const ChoiceModelBuilder build = [&](int rows, int seq_len) {
      return make_model(c.model_spec(), scoring_build(rows, seq_len, c.activation_dtype), s.tracker, s.ctx);
    };
    s.model->release_param_copies();  // the scorer's models hold their own
    // The plan the memory check weighed (predict_choice_memory).
    const ChoicePlan plan = run_choice_plan(c, choice_shape(*s.data.choices()), s.comm.world_size());
    const ChoiceScore score = score_choices(*s.data.choices(), plan, build, s.store, s.comm, stop);
    summary.choice_plan = plan;
    if (score.stopped) {  // the evaluation is made again on resume, its val loss with it
      report_stopped(s, step,
                     fmt::format("the evaluation's multiple-choice scoring (after {} of {} forwards)",
                                 score.forwards_done, plan.forwards));
      return false;
    }
    if (score.nonfinite.empty()) {
      summary.choices = score;
      record["choice_accuracy"] = score.accuracy();
      record["choice_correct"] = score.correct;
      record["choice_examples"] = score.examples;
      choices = fmt::format("; multiple choice {}/{} = {:.4f}", score.correct, score.examples, score.accuracy());
    } else {  // an overflowed forward scores nothing, as a NaN val_loss is recorded and not a stop
      summary.choices.reset();
      record["choice_accuracy"] = nullptr;
      record["choice_nonfinite"] = score.nonfinite;
      choices = fmt::format("; multiple choice not scored ({})", score.nonfinite);
    }
  }
  s.log(record);
  // Beside it the least a model that ignores context scores on the same windows (their targets'
  // entropy), not the training data's unigram entropy, which another split can score below.
  s.progress.message(fmt::format("step {}: val loss {:.4f} (context-free floor {:.4f}){}", step, val_loss,
                                 summary.context_free_val_loss_nats, choices));
  return true;
}

bool sample(TrainerState& s, int step, TrainSummary& summary, const StopVote& stop) {
  const RunConfig& c = s.config;
  s.set_comm_context(fmt::format("the sample after step {}", step));
  const data::TokenText& text = s.data.text();  // the tokenizer, else the vocabulary, else ids
  std::vector<std::int32_t> prompt = text.encode_prompt(c.log.sample_prompt);
  // The run's store, so the run's units: the token table in as many chunks as the training head's;
  // models built for the lengths sample_tokens runs, at most the run's seq_len, in the run's
  // activation dtype.
  const SamplingModelBuilder build = [&](int seq_len) {
    return make_model(c.model_spec(), sampling_build(seq_len, c.activation_dtype), s.tracker, s.ctx);
  };
  SamplingOptions options{c.log.sample_tokens, c.log.sample_temperature, c.log.sample_top_k,
                          c.train.seed + static_cast<std::uint64_t>(step), text.size()};
  options.drawable = text.decodable();
  bool stopped = false;
  // Asked every kVoteTokens draws, not every one: a token's forward on a small model is far
  // cheaper than a collective of oversubscribed ranks. Every rank counts the same draws.
  constexpr int kVoteTokens = 16;
  int draws = 0;
  if (stop) options.stop_requested = [&] { return ++draws % kVoteTokens == 0 && (stopped = stop()); };
  s.model->release_param_copies();  // the sampler's models hold their own
  std::string nonfinite;            // this rank's first row of logits that was not finite
  options.nonfinite_seen = &nonfinite;
  const auto tokens = sample_tokens(build, s.store, std::move(prompt), options, c.train.seq_len);
  // ZT_TEST_NONFINITE_SAMPLE_ON_RANK=r (docs/config.md, "Testing hooks"): rank r's logits taken for
  // overflowed, as the last bits may make them on one rank alone.
  if (const char* hook = std::getenv("ZT_TEST_NONFINITE_SAMPLE_ON_RANK");
      hook != nullptr && std::atoi(hook) == s.comm.rank() && nonfinite.empty()) {
    nonfinite = "sampling: the model's logits were not finite (ZT_TEST_NONFINITE_SAMPLE_ON_RANK)";
  }
  if (stopped) {
    report_stopped(s, step, fmt::format("the sample (after {} of {} tokens)", tokens.size(), c.log.sample_tokens));
    return false;
  }
  // Logits that overflowed on any rank (ranks may differ in the last bits, and whether a logit
  // overflows with them), agreed: a diagnostic, as an evaluation's NaN loss is, logged and the run
  // goes on (it ended the run with no summary, no final weights and its steps since the last save
  // lost). The draws made the same forwards and votes on every rank meanwhile.
  float overflowed = nonfinite.empty() ? 0.0f : 1.0f;
  if (s.comm.world_size() > 1) {
    s.comm.all_reduce(TensorView{&overflowed, DType::kF32, Device::kCPU, Shape{1}}, ReduceOp::kSum).wait();
  }
  if (overflowed > 0.0f) {
    if (nonfinite.empty()) nonfinite = "sampling: the model's logits were not finite on another rank";
    summary.sample.clear();  // not an earlier sample's text as the run's last
    s.log({{"type", "sample"}, {"step", step}, {"text", nullptr}, {"nonfinite", nonfinite}});
    s.progress.message(fmt::format("step {}: no sample ({})", step, nonfinite));
    return true;
  }
  summary.sample = data::repaired_utf8(text.decode(tokens));  // a byte-level vocabulary may cut a character
  s.log({{"type", "sample"}, {"step", step}, {"text", summary.sample}});
  s.progress.message(fmt::format("step {}: sample:\n{}\n---", step, summary.sample));
  return true;
}

}  // namespace zt
