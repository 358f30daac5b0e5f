// `zerotrain debug-state`: one forward/backward on one deterministic batch, written as a
// safetensors file (inputs, targets, loss, logits, every parameter and gradient under its Hugging
// Face name, the model's Hugging Face config.json as metadata `hf_config`) -- the oracle interface
// the PyTorch parity tests read. Optionally S AdamW steps on
// the same batch, whose losses are recorded too. Prints the memory table by category.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "engine/app/checkpoint/checkpoint_model.h"
#include "engine/app/cli/commands/arg_parser.h"
#include "engine/app/cli/commands/commands.h"
#include "engine/app/config/run_config.h"
#include "engine/app/io/model_weights.h"
#include "engine/app/io/output_file.h"
#include "engine/app/io/safetensors.h"
#include "engine/app/trainer/memory_check.h"
#include "engine/app/trainer/model_setup.h"
#include "engine/base/core/bf16.h"
#include "engine/base/core/philox.h"
#include "engine/distributed/comm/local_communicator.h"
#include "engine/distributed/launch/rendezvous.h"
#include "engine/distributed/optim/sharded_adamw.h"
#include "engine/distributed/sharding/zero_param_store.h"
#include "kernels/compute_backend.h"
#include "kernels/ops.h"
#include "models/model_family.h"

namespace zt::cli {

namespace {

// Tokens of the debug batch: uniform in [0, vocab) from Philox at (seed, stream 0xDEB6, index),
// a [B, T+1] sequence whose shifted halves are inputs and targets.
void make_debug_batch(const RunConfig& c, std::vector<std::int32_t>& inputs, std::vector<std::int32_t>& targets) {
  const int B = c.train.micro_batch, T = c.train.seq_len;
  inputs.resize(static_cast<std::size_t>(B) * T);
  targets.resize(inputs.size());
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t <= T; ++t) {
      const auto r =
          philox4x32({static_cast<std::uint32_t>(b * (T + 1) + t), 0u, 0xDEB6u, 0u},
                     {static_cast<std::uint32_t>(c.train.seed), static_cast<std::uint32_t>(c.train.seed >> 32)});
      const auto token = static_cast<std::int32_t>(r[0] % static_cast<std::uint32_t>(c.model.vocab_size));
      if (t < T) inputs[static_cast<std::size_t>(b) * T + t] = token;
      if (t > 0) targets[static_cast<std::size_t>(b) * T + t - 1] = token;
    }
  }
}

// An existing --out is replaced only where it is an earlier debug-state's file (a safetensors
// file whose metadata holds the run config it was made from): the command is the parity tests'
// oracle, run with paths typed by hand, and a token file, a config or a run's final weights named
// by mistake must not be lost.
void refuse_to_replace_other_files(const std::string& out) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(out, ec)) return;
  bool ours = false;
  try {
    const nlohmann::json& header = read_safetensors_header(out).json;
    const auto meta = header.find("__metadata__");
    ours = meta != header.end() && meta->is_object() && meta->contains("run_config") && header.contains("logits");
  } catch (const InputError&) {  // not a safetensors file at all
  }
  if (!ours) {
    throw_input_error(
        "zerotrain debug-state: --out {} exists and is not a debug-state file (the command would replace it); "
        "remove it or choose another --out",
        out);
  }
}

std::string memory_report(const MemorySnapshot& s, std::int64_t predicted_activation_bytes) {
  std::string out = format_memory_table(s);
  out += fmt::format("activations peak: measured {} B, predicted {} B ({})\n", s.peak(MemCategory::kActivations),
                     predicted_activation_bytes,
                     s.peak(MemCategory::kActivations) == predicted_activation_bytes ? "exact" : "MISMATCH");
  return out;
}

}  // namespace

int debug_state_main(const std::vector<std::string>& args) {
  remove_partial_outputs_on_signal();  // stopped by Ctrl-C, it leaves no .tmp behind
  ArgParser parser("debug-state",
                   "Run one forward/backward in one process on one deterministic batch (uniform random tokens from "
                   "train.seed: the config's data is not read) and write every tensor the PyTorch parity tests need "
                   "to a safetensors file.");
  parser.value_flag("config", "FILE", "JSON run config", true)
      .value_flag("out", "FILE", "output safetensors file (an existing file only if an earlier debug-state's)", true)
      .value_flag("steps", "S",
                  "also run S AdamW steps on the same batch and record their losses (default 0): plain AdamW at a "
                  "constant optim.lr, no warmup, decay or gradient clipping")
      .value_flag("set", "SECTION.KEY=VALUE", "override a config key", false, true);
  if (!parser.parse(args)) {
    fmt::print("{}", parser.help_text());
    return 0;
  }
  // One process's state: under a launcher every rank would compute the same and write the same
  // --out, none of it sharded, so a launch of several ranks is refused rather than run N times.
  if (const LaunchInfo launch = detect_launch(); launch.world_size > 1) {
    throw_input_error(
        "zerotrain debug-state: runs in one process (launched here as rank {} of {} by {}): its state is one "
        "process's, not sharded; run it without the launcher",
        launch.rank, launch.world_size, launch.source);
  }
  const RunConfig cfg = load_run_config(parser.get("config"), parser.all("set"));
  const int steps = parser.get_int("steps", 0, 0, 100000);
  check_output_path(parser.get("out"), "zerotrain debug-state: --out");  // before the work
  refuse_to_replace_other_files(parser.get("out"));
  // A training step's memory at one rank, stage 0 (what it holds, beside its logits), checked as
  // train checks it (train.check_memory): a config too large for the machine grew towards the
  // kernel's OOM killer instead of being refused.
  RunConfig one_rank = cfg;
  one_rank.zero.stage = 0;
  check_memory_fits(one_rank, 1, 0);
  const ModelConfig& mc = cfg.model;  // the keys every family has
  const ModelSpec spec = cfg.model_spec();

  MemoryTracker tracker;
  const ComputeBackend backend(cfg.device, cfg.train.num_threads, tracker, 0, cfg.kernel_choices());
  // (the backend outlives what it allocates)
  const ExecContext& ctx = backend.context();
  ModelBuild build = cfg.model_build();
  build.dropout = 0.0f;  // the reference has none
  const std::unique_ptr<LanguageModel> model_ptr = make_model(spec, build, tracker, ctx);
  LanguageModel& model = *model_ptr;
  const ParamTable& table = model.table();
  // One rank at stage 0: the store and optimizer `train` uses, over a world of one.
  LocalCommunicator comm(tracker, {});
  ZeroParamStore store(table, cfg.param_dtype, ZeroOptions{}, comm, tracker, ctx);
  const bool mixed = cfg.param_dtype == DType::kBF16;
  ShardedAdamW optimizer(store, cfg.optim.adamw, tracker, ctx);
  if (cfg.train.init_from.empty()) {
    initialize_parameters(spec, cfg.train.seed, store, optimizer, tracker, cfg.train.num_threads);
  } else {  // the weights a run of this config starts from
    load_pretrained_parameters(cfg.train.init_from, store, optimizer, tracker, comm);
  }

  std::vector<std::int32_t> inputs, targets;
  make_debug_batch(cfg, inputs, targets);
  const std::int64_t B = cfg.train.micro_batch, T = cfg.train.seq_len, V = mc.vocab_size;
  std::vector<float> logits(static_cast<std::size_t>(B * T * V));

  tracker.reset_peaks();
  store.begin_step();
  const float loss =
      model.forward(store, inputs.data(), targets.data(), {.logits_out = logits.data(), .backward_loss_scale = 1.0f});
  model.backward(store);
  const MemorySnapshot memory = tracker.snapshot();
  if (!std::isfinite(loss)) throw_runtime_error("debug-state: loss is not finite ({})", loss);

  SafetensorsWriter writer;
  writer.add("inputs", DType::kI32, {B, T}, inputs.data());
  writer.add("targets", DType::kI32, {B, T}, targets.data());
  writer.add_f32("loss", {1}, &loss);
  writer.add_f32("logits", {B, T, V}, logits.data());
  // add_param_tensors reads each unit's view before asking for the next: one host staging buffer.
  std::vector<float> staging;
  auto on_host = [&](TensorView v) { return ops::on_host(ctx, v, staging); };
  add_param_tensors(writer, table, "", [&](int u) { return on_host(store.working_shard(u)); });
  add_param_tensors(writer, table, "grad.", [&](int u) { return on_host(store.grad_shard(u)); });
  if (mixed) add_param_tensors(writer, table, "master.", [&](int u) { return on_host(optimizer.master(u)); });

  std::vector<float> train_losses;
  for (int s = 0; s < steps; ++s) {
    if (s > 0) {
      store.begin_step();
      train_losses.push_back(model.forward(store, inputs.data(), targets.data(), {.backward_loss_scale = 1.0f}));
      model.backward(store);
    } else {
      train_losses.push_back(loss);
    }
    optimizer.step(cfg.optim.adamw.lr);
    store.publish_updated_params();
  }
  if (steps > 0) writer.add_f32("train_losses", {steps}, train_losses.data());

  const nlohmann::json optim_json = {{"lr", cfg.optim.adamw.lr},
                                     {"beta1", cfg.optim.adamw.beta1},
                                     {"beta2", cfg.optim.adamw.beta2},
                                     {"eps", cfg.optim.adamw.eps},
                                     {"weight_decay", cfg.optim.adamw.weight_decay}};
  // The model as a checkpoint manifest names it (GPT-2's keys are what its parity reference reads).
  writer.set_metadata("config", ckpt::model_json(spec).dump());
  writer.set_metadata("hf_config", spec.family().hf_config(spec, 0.0, DType::kF32).dump());
  writer.set_metadata("param_dtype", mixed ? "bf16" : "f32");
  writer.set_metadata("activation_checkpointing", cfg.train.activation_checkpointing.to_string());
  writer.set_metadata("optim", optim_json.dump());
  writer.set_metadata("steps", std::to_string(steps));
  writer.set_metadata("run_config", cfg.to_json().dump());
  writer.write(parser.get("out"));

  const auto& blas = cpu_blas_description();
  fmt::print("zerotrain debug-state: {}\n", cfg.source);
  fmt::print("model: {} n_layer={} n_head={} n_embd={} block_size={} vocab={} (padded {}), {} parameters in {} units\n",
             spec.model.arch, mc.n_layer, mc.n_head, mc.n_embd, mc.block_size, mc.vocab_size, mc.padded_vocab_size(),
             table.total_numel(), table.units().size());
  fmt::print("device: {}\n", backend.description());
  fmt::print("batch: B={} T={}  param_dtype={}  activation_checkpointing={}  threads={}  blas={} ({})\n", B, T,
             mixed ? "bf16" : "f32", cfg.train.activation_checkpointing.to_string(), ctx.num_threads, blas.core_name,
             blas.core_type_source);
  fmt::print("loss: {:.6f} (uniform-prediction loss ln(V) = {:.6f})\n", loss, std::log(static_cast<double>(V)));
  if (steps > 0)
    fmt::print("losses over {} AdamW steps: {:.6f} -> {:.6f}\n", steps, train_losses.front(), train_losses.back());
  fmt::print("memory during one forward/backward (bytes per category):\n{}",
             memory_report(memory, predict_footprint(spec, build, cfg.param_dtype, cfg.device).activation_bytes));
  fmt::print("wrote {}\n", parser.get("out"));
  return 0;
}

}  // namespace zt::cli
