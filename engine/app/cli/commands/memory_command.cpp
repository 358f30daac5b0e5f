// `zerotrain memory`: the ZeRO memory prediction without training. With --config, bytes per rank
// per category for stages 0-3 side by side (engine/distributed/sharding/memory_model.h, docs/zero_memory.md);
// with --params, the ZeRO paper's model-state table for any parameter count. --json for tools.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/app/cli/commands/arg_parser.h"
#include "engine/app/cli/commands/commands.h"
#include "engine/app/cli/commands/config_memory.h"
#include "engine/app/cli/commands/memory_paper_table.h"
#include "engine/app/config/config_limits.h"
#include "engine/app/config/run_config.h"
#include "engine/app/config/zero_section.h"
#include "engine/app/trainer/memory_check.h"
#include "engine/app/trainer/run_memory.h"
#include "engine/base/core/check.h"
#include "engine/base/core/console.h"

namespace zt::cli {

namespace {

// Rows of the config table, in the order the memory docs list the categories.
constexpr MemCategory kRows[] = {MemCategory::kParameters,      MemCategory::kGradients,   MemCategory::kMasterWeights,
                                 MemCategory::kOptimizerStates, MemCategory::kActivations, MemCategory::kCommBuffers,
                                 MemCategory::kWorkspace};

// --brief: what each stage saves, at a glance. The model states (the four categories ZeRO shards)
// apart from what every stage keeps whole (activations, communication buffers, workspace).
// "stage N", marked * where `refused` (per stage, why this config's rules refuse it; "" where they
// do not) says so, as the note before the table does.
std::string stage_heading(int stage, const std::vector<std::string>& refused) {
  return fmt::format("stage {}{}", stage, refused[static_cast<std::size_t>(stage)].empty() ? "" : "*");
}

// `refused`: as stage_heading reads it.
void brief_table(const RunConfig& cfg, const ParamTable& table, int ranks, const std::vector<StageMemory>& stages,
                 const std::string& attention, const std::vector<std::string>& refused) {
  const char* master = cfg.param_dtype == DType::kBF16 ? " with fp32 master weights" : "";
  const double params = static_cast<double>(table.total_numel());
  // Below 100,000 the count itself: "0.0 M" said nothing of a 30,080-parameter model.
  const std::string count = params >= 1e9   ? fmt::format("{:.2f} B", params / 1e9)
                            : params >= 1e5 ? fmt::format("{:.1f} M", params / 1e6)
                                            : fmt::format("{}", table.total_numel());
  fmt::print("{}: {}, {} parameters, {} weights{}, AdamW; {} rank{}, micro_batch {} x {} on {}\n", cfg.source,
             cfg.model.arch, count, cfg.param_dtype == DType::kBF16 ? "bf16" : "fp32", master, ranks,
             ranks == 1 ? "" : "s", cfg.train.micro_batch, cfg.train.seq_len, device_name(cfg.device));
  // The activations depend on the attention this build would run (a build without CUDA kernels
  // keeps the T x T probabilities), so it is named.
  fmt::print("attention: {}\n", attention);
  std::string head = fmt::format("{:<26}", "predicted bytes per rank");
  for (int stage = 0; stage < kPredictedStages; ++stage) {
    head += fmt::format("{:>12}", stage_heading(stage, refused));
  }
  fmt::print("{}\n", head);
  auto row = [&](const char* name, auto text_of) {
    std::string line = fmt::format("{:<26}", name);
    for (const StageMemory& m : stages) line += fmt::format("{:>12}", text_of(m));
    fmt::print("{}\n", line);
  };
  row("model states", [](const StageMemory& m) { return format_bytes(m.model_state_bytes()); });
  row("activations and buffers",
      [](const StageMemory& m) { return format_bytes(m.total_bytes() - m.model_state_bytes()); });
  row("total", [](const StageMemory& m) { return format_bytes(m.total_bytes()); });
  auto percent = [](std::int64_t part, std::int64_t whole) {
    return fmt::format("{:.0f}%",
                       100.0 * static_cast<double>(part) / static_cast<double>(std::max<std::int64_t>(whole, 1)));
  };
  const StageMemory& s0 = stages.front();
  row("model states vs stage 0",
      [&](const StageMemory& m) { return percent(m.model_state_bytes(), s0.model_state_bytes()); });
  row("total vs stage 0", [&](const StageMemory& m) { return percent(m.total_bytes(), s0.total_bytes()); });
}

int config_table(const ArgParser& parser, int ranks, bool json) {
  // Before the table; with --json on standard error after the JSON, whose notes hold them too (a
  // config refused after a note printed first gave two lines on stderr, where an error is one).
  const ConfigMemory m =
      predict_config_memory(parser.get("config"), parser.all("set"), ranks, [json](const std::string& line) {
        if (!json) fmt::print("note: {}\n", line);
      });
  const RunConfig& cfg = m.cfg;
  const ParamTable& table = m.table;
  const ModelConfig& mc = cfg.model;  // the keys every family has
  const ShardSizes largest = shard_sizes(table.max_unit_numel(), m.store_ranks);
  const char* dtype = cfg.param_dtype == DType::kBF16 ? "bf16" : "f32";
  const char* activations = cfg.activation_dtype == DType::kBF16 ? "bf16" : "fp32";
  const std::string ckpt = cfg.train.activation_checkpointing.to_string();
  const RequiredMemory& any_stage = m.phases.front();  // which phases the run has: the same at every stage
  using Phase = RequiredMemory::Phase;
  const std::vector<std::int64_t> timed_step_totals = m.totals(Phase::kTimedStep, any_stage.weighs_timed_step),
                                  setup_totals = m.totals(Phase::kSetup, true),
                                  final_gather_totals = m.totals(Phase::kFinalGather, any_stage.has_final_gather),
                                  sample_totals = m.totals(Phase::kSample, any_stage.weighs_sample);
  const std::vector<std::int64_t> required = m.required();
  const char* grad_dtype = cfg.zero.fp32_grad_shards ? "fp32" : "working";
  const char* other_grad_dtype = cfg.zero.fp32_grad_shards ? "working" : "fp32";
  const ZeroOptions& z = cfg.zero;

  if (parser.has("brief")) {
    brief_table(cfg, table, ranks, m.stages, m.attention, m.refused);
    return 0;
  }
  if (json) {
    nlohmann::json notes = nlohmann::json::array();
    for (const std::string* line : {&m.batch_note, &m.choices_note}) {
      if (!line->empty()) notes.push_back(*line);
    }
    nlohmann::json out = nlohmann::json::array();
    auto by_category = [](const StageMemory& m) {
      nlohmann::json bytes = nlohmann::json::object();
      for (MemCategory c : kRows) bytes[std::string(mem_category_name(c))] = m[c];
      return bytes;
    };
    for (int stage = 0; stage < kPredictedStages; ++stage) {
      const nlohmann::json bytes = by_category(m.stages[stage]);
      out.push_back(
          {{"stage", stage},
           {"refused", m.refused[static_cast<std::size_t>(stage)].empty()
                           ? nlohmann::json(nullptr)
                           : nlohmann::json(m.refused[static_cast<std::size_t>(stage)])},
           {"bytes", bytes},
           {"model_states", m.stages[stage].model_state_bytes()},
           {"total", m.stages[stage].total_bytes()},
           {"timed_step_total", timed_step_totals[static_cast<std::size_t>(stage)]},
           {"setup_total", setup_totals[static_cast<std::size_t>(stage)]},
           {"final_gather_total", final_gather_totals[static_cast<std::size_t>(stage)]},
           {"final_gather_buffer", m.final_gather_buffers[static_cast<std::size_t>(stage)]},
           {"sample_total", sample_totals[static_cast<std::size_t>(stage)]},
           {"required", required[static_cast<std::size_t>(stage)]},
           {"gradients_with_other_grad_shard_dtype", m.other_grads[static_cast<std::size_t>(stage)]},
           {"padding", m.stages[stage].padding_bytes},
           {"kernel_scratch", m.stages[stage].kernel_scratch_bytes},
           {"elements_per_step",
            {{"in_group", m.volumes[stage].in_group}, {"across_groups", m.volumes[stage].across_groups}}},
           {"bytes_per_step",
            {{"in_group", m.volumes[stage].bytes_in_group}, {"across_groups", m.volumes[stage].bytes_across_groups}}}});
      if (m.choices) {  // the scorer's peaks by category, and their sum
        const StageMemory& scorer = m.phases[static_cast<std::size_t>(stage)].choices;
        out.back()["choices_bytes"] = by_category(scorer);
        out.back()["choices_total"] = scorer.total_bytes();
      }
    }
    const nlohmann::json doc = {{"mode", "config"},
                                {"config", cfg.source},
                                {"ranks", ranks},
                                {"param_dtype", dtype},
                                {"activations", activations},
                                {"micro_batch", cfg.train.micro_batch},
                                {"seq_len", cfg.train.seq_len},
                                {"activation_checkpointing", ckpt},
                                {"device", device_name(cfg.device)},
                                {"attention", m.attention},
                                {"params", table.total_numel()},
                                {"units", table.units().size()},
                                {"head_chunks", cfg.train.head_chunks},
                                {"block_units", cfg.train.block_units},
                                {"max_unit_numel", table.max_unit_numel()},
                                {"deterministic_reductions", m.options.deterministic},
                                {"zero", cfg.to_json()["zero"]},
                                {"other_grad_shard_dtype", other_grad_dtype},
                                {"checkpoint_staging_bytes", predict_checkpoint_staging_bytes(cfg, ranks)},
                                {"grad_accum", cfg.train.grad_accum},
                                {"notes", notes},
                                {"stages", out}};
    fmt::print("{}\n", doc.dump(2));
    for (const auto& line : notes) print_err("zerotrain memory: note: {}\n", line.get<std::string>());
    return 0;
  }

  fmt::print("zerotrain memory: {} on {} rank{}: predicted peak bytes per rank (nothing is trained)\n", cfg.source,
             ranks, ranks == 1 ? "" : "s");
  fmt::print(
      "model: {}, {} layers, {} heads, {} wide, vocab {} (padded {}): {} parameters in {} units (head_chunks {}, "
      "block_units {}); largest unit {} elements ({} per rank)\n",
      cfg.model.arch, mc.n_layer, mc.n_head, mc.n_embd, mc.vocab_size, mc.padded_vocab_size(), table.total_numel(),
      table.units().size(), cfg.train.head_chunks, cfg.train.block_units, largest.numel, largest.shard_numel);
  fmt::print(
      "per rank: micro_batch {} x seq_len {}, activation_checkpointing {}, param_dtype {}; device {}: {} "
      "activations; attention {}\n",
      cfg.train.micro_batch, cfg.train.seq_len, ckpt, dtype, device_name(cfg.device), activations, m.attention);
  fmt::print(
      "zero: overlap_comm {}, prefetch_units {}, max_inflight_reductions {}{}, reshard_after_forward {}, "
      "param_persistence_threshold {}, grad_shard_dtype {}, gather_dtype {}, cross_group_grad_dtype {}{}{}\n\n",
      z.overlap_comm, z.prefetch_units, z.max_inflight_reductions,
      z.max_inflight_reduction_bytes > 0 ? fmt::format(" (at most {:.3g} MiB pending)",
                                                       static_cast<double>(z.max_inflight_reduction_bytes) / 1048576.0)
                                         : "",
      z.reshard_after_forward, z.persistence_threshold, grad_dtype, gather_dtype_name(z.gather_wire),
      cross_group_grad_dtype_name(z.cross_group_grad_wire),
      z.hybrid(ranks) ? fmt::format("; hybrid: shard groups of {} ranks, {} groups replicating them",
                                    z.shard_group_size, ranks / z.shard_group_size)
                      : "",
      !m.options.deterministic ? ""
      : z.fold_in_global_order ? "; deterministic: each micro-batch's gradient folded in global order"
                               : "; deterministic reductions");
  // Each cell after a space: a count past 13 digits (a 65B model's elements a step) ran into the next.
  std::string head = fmt::format("{:<22}", "category");
  for (int stage = 0; stage < kPredictedStages; ++stage) {
    head += fmt::format(" {:>13}", stage_heading(stage, m.refused));
  }
  fmt::print("{}\n", head);
  auto row = [&](const std::string& name, auto value_of) {
    std::string line = fmt::format("{:<22}", name);
    for (const StageMemory& s : m.stages) line += fmt::format(" {:>13}", format_bytes(value_of(s)));
    fmt::print("{}\n", line);
  };
  for (MemCategory c : kRows) row(std::string(mem_category_name(c)), [c](const StageMemory& m) { return m[c]; });
  row("total", [](const StageMemory& m) { return m.total_bytes(); });
  row("padding (in the above)", [](const StageMemory& m) { return m.padding_bytes; });
  const bool on_cuda = cfg.device == Device::kCUDA;
  if (on_cuda) row("largest kernel call", [](const StageMemory& m) { return m.kernel_scratch_bytes; });
  auto per_stage = [&](const std::string& name, const std::vector<std::int64_t>& bytes) {
    std::string line = fmt::format("{:<22}", name);
    for (const std::int64_t b : bytes) line += fmt::format(" {:>13}", format_bytes(b));
    fmt::print("{}\n", line);
  };
  if (any_stage.weighs_timed_step) per_stage("first step (at most)", timed_step_totals);
  per_stage("set-up peak", setup_totals);
  if (cfg.log.final_weights) per_stage("final gather peak", final_gather_totals);
  if (cfg.log.samples()) per_stage("sample (at most)", sample_totals);
  if (m.choices) per_stage("multiple choice peak", m.totals(Phase::kChoices, true));
  per_stage("required", required);
  auto elements = [&](const std::string& name, auto value_of) {
    std::string line = fmt::format("{:<22}", name);
    for (const StepVolume& v : m.volumes) line += fmt::format(" {:>13}", value_of(v));
    fmt::print("{}\n", line);
  };
  const bool hybrid = m.volumes[0].across_groups > 0;
  elements(hybrid ? "elements/step in group" : "elements sent/step", [](const StepVolume& v) { return v.in_group; });
  if (hybrid) elements("elements/step across", [](const StepVolume& v) { return v.across_groups; });
  auto sent = [&](const std::string& name, auto bytes_of) {
    std::string line = fmt::format("{:<22}", name);
    for (const StepVolume& v : m.volumes) line += fmt::format(" {:>13}", format_bytes(bytes_of(v)));
    fmt::print("{}\n", line);
  };
  sent(hybrid ? "sent/step in group" : "sent/step", [](const StepVolume& v) { return v.bytes_in_group; });
  if (hybrid) sent("sent/step across", [](const StepVolume& v) { return v.bytes_across_groups; });
  std::string other = fmt::format("{:<22}", fmt::format("gradients, {} shards", other_grad_dtype));
  // Stages 0-1 hold no gradient shards: the key acts on nothing there ("-", where the row showed
  // their working gradients, bf16 ones under an "fp32 shards" label). --json keeps every stage's.
  for (std::size_t stage = 0; stage < m.other_grads.size(); ++stage) {
    other += fmt::format(" {:>13}", stage < 2 ? "-" : format_bytes(m.other_grads[stage]));
  }
  fmt::print("{}   (zero.grad_shard_dtype = {}: stages 2-3)\n", other, other_grad_dtype);
  if (cfg.checkpoint.async) {
    fmt::print("checkpoint staging    {:>14}   (checkpoint.async: host memory, every stage; not in the total)\n",
               format_bytes(predict_checkpoint_staging_bytes(cfg, ranks)));
  }
  fmt::print(
      "\ntotal = sum of a step's category peaks; padding = bytes above that hold no data on rank {}{} (the most "
      "padded);{}{} set-up peak = the same sum while the weights are set up, before step 1;{} required = the "
      "largest of these{}{}: "
      "what train.check_memory and zerotrain plan weigh.\nThe layout and why each buffer exists: "
      "docs/zero_memory.md. Exact bytes: --json.\n",
      m.store_ranks - 1, m.store_ranks < ranks ? " of each group" : "",
      on_cuda ? " largest kernel call = the scratch one CUDA kernel call of the step holds, in workspace (cuDNN's "
                "workspace and CUB's sort temporaries not predicted);"
              : "",
      any_stage.weighs_timed_step
          ? fmt::format(" first step = a bound of the same sum with the scratch of the kernels' timed choices "
                        "({} more workspace; train.deterministic times none);",
                        format_bytes(timed_search_scratch_bytes(cfg)))
          : "",
      std::string(cfg.log.final_weights ? " final gather peak = the same sum after the last step, with one unit "
                                          "gathered whole in fp32 on the host to write final.safetensors;"
                                        : "") +
          (cfg.log.samples() ? " sample = a bound of the same sum while a sample's models run;" : "") +
          (m.choices ? " multiple choice = the same sum while data.choice_file's examples are scored;" : ""),
      cfg.log.final_weights && cfg.device != Device::kCPU ? " but the final gather's (on cuda its unit is host memory)"
                                                          : "",
      cfg.checkpoint.async && cfg.device == Device::kCPU ? ", plus the checkpoint staging" : "");
  return 0;
}

}  // namespace

int memory_main(const std::vector<std::string>& args) {
  ArgParser parser("memory",
                   "Predict the bytes per rank of ZeRO stages 0-3 without training: per memory category for a run "
                   "config (--config), or the ZeRO paper's model states for a parameter count (--params).");
  parser.value_flag("config", "FILE", "JSON run config: per-category bytes per rank for stages 0-3")
      .value_flag("params", "PSI", "parameter count (e.g. 7.5e9): the paper's model-state table")
      .value_flag("ranks", "N", "data-parallel ranks", true)
      .value_flag("k", "K", "with --params: optimizer bytes per parameter (default 12: fp32 master, m, v)")
      .value_flag("set", "SECTION.KEY=VALUE", "with --config: override a config key", false, true)
      .bool_flag("json", "print the same as JSON")
      .bool_flag("brief", "with --config: model states, the rest and the total per stage, nothing else");
  if (!parser.parse(args)) {
    fmt::print("{}", parser.help_text());
    return 0;
  }
  if (parser.has("config") == parser.has("params")) {
    throw_input_error("zerotrain memory: give exactly one of --config FILE and --params PSI");
  }
  const bool paper = parser.has("params");
  for (const char* flag : {"set"}) {
    if (paper && parser.has(flag)) throw_input_error("zerotrain memory: --{} needs --config, not --params", flag);
  }
  if (!paper && parser.has("k")) throw_input_error("zerotrain memory: --k needs --params, not --config");
  if (paper && parser.has("brief")) throw_input_error("zerotrain memory: --brief needs --config, not --params");
  if (parser.has("brief") && parser.has("json")) {
    throw_input_error("zerotrain memory: --brief and --json do not go together (--json has every category)");
  }
  const int ranks = parser.get_int("ranks", 1, 1, kMaxPredictedRanks);
  const bool json = parser.has("json");
  if (quiet_past_rank_zero("zerotrain memory")) return 0;  // --ranks says how many; a launch prints once
  return paper ? memory_paper_table(parser, ranks, json) : config_table(parser, ranks, json);
}

}  // namespace zt::cli
