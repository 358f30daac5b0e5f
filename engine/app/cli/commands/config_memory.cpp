// What `zerotrain memory --config` predicts (see the header).
#include "engine/app/cli/commands/config_memory.h"

#include <fmt/format.h>

#include <utility>

#include "engine/app/config/model_section.h"
#include "engine/app/trainer/store_comm.h"
#include "engine/base/core/check.h"

namespace zt::cli {

namespace {

// The config resolved for `ranks`. One written for another rank count, whose global batch does not
// split over these ranks at its micro-batch, is read at train.grad_accum = 1 (appended to
// `overrides`), said in `note`: at stages 0-1 a step's bytes per rank follow the micro-batch, not
// the accumulation; at stages 2-3 an accumulating run holds more (comm_buffers: the reduced
// gradient shard kept from its second micro-batch on). Any other error stands (a grad_accum of
// "two" was predicted at 1, and exit 0).
RunConfig load_for_ranks(const std::string& path, std::vector<std::string>& overrides, int ranks, std::string& note) {
  std::string refused;
  // The config's own micro-batch at grad_accum 1, the global batch following (a --set global batch
  // would otherwise disagree with both).
  RunConfig c = load_run_config_past_batch_split(
      path, overrides, ranks,
      [](const BatchSplitError& e) {
        // In double: the terms' int64 product can overflow (2^20 x 2^20 x 2^24); past the key's
        // range it is refused by the retry, and the original error stands.
        const double tokens = static_cast<double>(e.micro_batch) * e.seq_len * e.world_size;
        return std::vector<std::string>{"train.grad_accum=1", fmt::format("train.global_batch_tokens={:.0f}", tokens)};
      },
      refused);
  if (!refused.empty()) {
    note = fmt::format(
        "the config's batch does not load on {} rank{} ({}); predicted at train.grad_accum = 1: at stages 0-1 a "
        "step's bytes per rank follow the micro-batch, not the accumulation, but at stages 2-3 a run that "
        "accumulates holds its reduced gradient shard too (comm_buffers; --set train.grad_accum to predict one), "
        "and their gradient traffic grows with it",
        ranks, ranks == 1 ? "" : "s", refused);
  }
  return c;
}

}  // namespace

std::vector<std::int64_t> ConfigMemory::totals(RequiredMemory::Phase p, bool present) const {
  std::vector<std::int64_t> out;
  for (const RequiredMemory& r : phases) out.push_back(present ? r.of(p).total_bytes() : 0);
  return out;
}

std::vector<std::int64_t> ConfigMemory::required() const {
  std::vector<std::int64_t> out;
  for (const RequiredMemory& r : phases) out.push_back(r.bytes());
  return out;
}

ConfigMemory predict_config_memory(const std::string& path, std::vector<std::string> sets, int ranks,
                                   const std::function<void(const std::string&)>& note) {
  // The prediction covers every stage, so the run's own stage is set aside. The device stays: it
  // decides the attention's activations (GPT: flash on CUDA, gpt::activation_dims). Resolved for
  // the ranks asked about, as the run would be (grad_accum from train.global_batch_tokens).
  ConfigMemory m;
  m.ranks = ranks;
  // The config as given (a stage 9 refused), of sizes the prediction counts.
  check_memory_countable(load_for_ranks(path, sets, ranks, m.batch_note));
  if (!m.batch_note.empty()) note(m.batch_note);
  const std::vector<std::string> given = sets;  // the stage as the config gives it
  sets.push_back("zero.stage=0");
  m.cfg = load_run_config(path, sets, ranks);
  const RunConfig& cfg = m.cfg;
  m.options.deterministic = cfg.train.deterministic;
  m.table = build_param_table(cfg.model_spec());  // the units the run would have
  m.store_ranks = store_comm_choice(cfg, ranks).group_size;
  m.attention = describe_attention(cfg.model_spec(), cfg.model_build(), cfg.device, cfg.attention_kernels);

  // What the memory check (train.check_memory) and `zerotrain plan` weigh, phase by phase
  // (RequiredMemory), at each stage.
  m.choices = run_choice_shape_or_note(cfg, m.choices_note);
  if (!m.choices_note.empty()) note(m.choices_note);
  // The stages this config's rules refuse (zero.gather_dtype = "int8" at stage 0, which gathers
  // nothing): predicted all the same, for the comparison, and marked, as train would refuse them.
  // Each stage set in the config as given, not by a --set of its own, which the refusal named as the
  // user's ("... and --set zero.stage=0").
  m.refused.resize(kPredictedStages);
  const RunConfig as_given = load_run_config(path, given, ranks);
  for (int stage = 0; stage < kPredictedStages; ++stage) {
    RunConfig at_stage = as_given;
    at_stage.zero.stage = stage;
    try {
      check_trainable(at_stage);
    } catch (const InputError& e) {
      m.refused[static_cast<std::size_t>(stage)] = e.what();
      note(fmt::format("stage {} (marked *) is refused by this config: {}", stage, e.what()));
    }
  }
  for (int stage = 0; stage < kPredictedStages; ++stage) {
    RunConfig at_stage = cfg;
    at_stage.zero.stage = stage;
    m.phases.push_back(required_memory(at_stage, ranks, m.choices));
    m.final_gather_buffers.push_back(cfg.log.final_weights ? final_gather_buffer_bytes(at_stage, ranks) : 0);
  }
  for (const RequiredMemory& r : m.phases) m.stages.push_back(r.step);
  // The other choice of gradient-shard dtype at stages 2-3, so the table shows what each costs.
  RunConfig other_cfg = cfg;
  other_cfg.zero.fp32_grad_shards = !cfg.zero.fp32_grad_shards;
  for (int stage = 0; stage < kPredictedStages; ++stage) {
    m.volumes.push_back(predict_run_volume(cfg, stage, ranks));
    m.other_grads.push_back(predict_run_memory(other_cfg, stage, ranks, m.options)[MemCategory::kGradients]);
  }
  return m;
}

}  // namespace zt::cli
