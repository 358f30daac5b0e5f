// `zerotrain sample`: generates text from the final weights a `train` run left in its directory,
// from the fp32 master weights of a sharded checkpoint (read unit by unit, any save layout), or
// from pretrained weights (--from: a Hugging Face folder or an llm.c model file).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <omp.h>

#include <filesystem>
#include <optional>

#include "engine/app/checkpoint/checkpoint_folder.h"
#include "engine/app/checkpoint/checkpoint_model.h"
#include "engine/app/cli/commands/arg_parser.h"
#include "engine/app/cli/commands/commands.h"
#include "engine/app/config/run_config.h"
#include "engine/app/data/token_text.h"
#include "engine/app/io/model_weights.h"
#include "engine/app/io/pretrained.h"
#include "engine/app/trainer/text_sampler.h"
#include "engine/distributed/comm/local_communicator.h"
#include "engine/distributed/sharding/zero_param_store.h"
#include "kernels/ops.h"
#include "models/model_family.h"

namespace zt::cli {

namespace {

SamplingOptions sampling_options(const ArgParser& parser, const data::TokenText& text) {
  double temperature = 0.8;
  if (parser.has("temperature")) {
    try {
      temperature = std::stod(parser.get("temperature"));
    } catch (const std::exception&) {
      temperature = -1.0;
    }
    if (!(temperature > 0.0 && temperature <= 100.0)) {
      throw_input_error("zerotrain sample: --temperature must be a number in (0, 100] (got '{}')",
                        parser.get("temperature"));
    }
  }
  SamplingOptions options{parser.get_int("tokens", 200, 0, 1000000), static_cast<float>(temperature),
                          parser.get_int("top-k", 40, 0, 65535),
                          static_cast<std::uint64_t>(parser.get_int("seed", 1, 0, 2147483647)), text.size()};
  options.kv_cache = !parser.has("no-kv-cache");
  return options;
}

// The prompt's and the sample's text: --tokenizer or --vocab when given, else the tokenizer.json
// or vocab.json in `dir` (the run directory, or a pretrained folder), else token ids.
data::TokenText token_text(const ArgParser& parser, const std::string& dir) {
  for (const char* flag : {"tokenizer", "vocab"}) {
    if (parser.has(flag) && !std::filesystem::exists(parser.get(flag))) {
      throw_input_error("zerotrain sample: --{} {}: no such file", flag, parser.get(flag));
    }
  }
  if (parser.has("tokenizer")) return data::TokenText(data::Tokenizer::load(parser.get("tokenizer")));
  if (parser.has("vocab")) return data::TokenText(data::Vocab::load(parser.get("vocab")));
  return dir.empty() ? data::TokenText() : data::TokenText::from_dir(dir);
}

// The prompt's tokens, and the most positions its sample may attend to.
struct Prompt {
  std::string text;
  std::vector<std::int32_t> ids;
  int limit = 1;
};

Prompt encode_prompt(const ArgParser& parser, const data::TokenText& text, int limit) {
  Prompt p{parser.get("prompt", "\n"), {}, limit};
  p.ids = text.encode_prompt(p.text);
  return p;
}

// Samples on the CPU from `store`, over models of `spec` built as sample_tokens asks.
int generate_and_print(const ModelSpec& spec, MemoryTracker& tracker, const ExecContext& ctx, ZeroParamStore& store,
                       const data::TokenText& text, const SamplingOptions& options, const Prompt& prompt) {
  const SamplingModelBuilder build = [&](int seq_len) {
    return make_model(spec, sampling_build(seq_len), tracker, ctx);
  };
  const auto tokens = sample_tokens(build, store, prompt.ids, options, prompt.limit);
  fmt::print("{}{}\n", text.has() ? prompt.text : "", text.decode(tokens));
  return 0;
}

// --ckpt: the model from the manifest, fp32 master weights read unit by unit into a one-process
// stage-0 store (whatever the number of ranks and stage that saved it).
int sample_checkpoint(const ArgParser& parser) {
  const ckpt::ResolvedCheckpoint resolved = ckpt::resolve_checkpoint(parser.get("ckpt"), ckpt::Validation::kStructure);
  for (const std::string& note : resolved.notes) fmt::print(stderr, "zerotrain sample: {}\n", note);
  const ckpt::CheckpointReader reader(resolved.path);
  const ModelSpec spec = ckpt::model_spec_of(reader);
  const data::TokenText text =
      token_text(parser, std::filesystem::path(resolved.path).parent_path().parent_path().string());
  const SamplingOptions options = sampling_options(parser, text);
  const Prompt prompt = encode_prompt(parser, text, spec.block_size());

  MemoryTracker tracker;
  const ExecContext ctx{Device::kCPU, omp_get_num_procs(), nullptr};
  // The checkpoint's units (model_spec_of: e.g. its token table in as many chunk units as its
  // run's head had).
  const ParamTable table = spec.family().param_table(spec);
  LocalCommunicator comm(tracker, {});
  ZeroParamStore store(table, DType::kF32, ZeroOptions{}, comm, tracker, ctx);
  for (std::size_t u = 0; u < table.units().size(); ++u) {
    const int unit = static_cast<int>(u);
    reader.read(ckpt::StateKind::kMaster, unit, 0, table.units()[u].numel, store.working_shard(unit).as<float>());
  }
  return generate_and_print(spec, tracker, ctx, store, text, options, prompt);
}

// --from: a pretrained checkpoint (a Hugging Face folder or an llm.c model file, as
// train.init_from reads it) into a one-process fp32 store, whole.
int sample_pretrained(const ArgParser& parser) {
  const std::string path = parser.get("from");
  const nlohmann::json doc = {{"model", nlohmann::json::object()}, {"train", {{"init_from", path}}}};
  const RunConfig cfg = parse_run_config(doc, "--from " + path, 1);
  const data::TokenText text = token_text(parser, std::filesystem::is_directory(path) ? path : "");
  const SamplingOptions options = sampling_options(parser, text);
  const Prompt prompt = encode_prompt(parser, text, cfg.model.block_size);
  MemoryTracker tracker;
  const ExecContext ctx{Device::kCPU, omp_get_num_procs(), nullptr};
  const ModelSpec spec = cfg.model_spec();
  const ParamTable table = spec.family().param_table(spec);
  LocalCommunicator comm(tracker, {});
  ZeroParamStore store(table, DType::kF32, ZeroOptions{}, comm, tracker, ctx);
  const std::unique_ptr<PretrainedReader> reader = PretrainedReader::open(path, table);
  for (std::size_t u = 0; u < table.units().size(); ++u) {
    const int unit = static_cast<int>(u);
    read_pretrained_unit(*reader, table, unit, 0, table.units()[u].numel, store.working_shard(unit).as<float>());
  }
  return generate_and_print(spec, tracker, ctx, store, text, options, prompt);
}

}  // namespace

int sample_main(const std::vector<std::string>& args) {
  ArgParser parser("sample", "Generate text from a training run's final weights.");
  parser.value_flag("run", "DIR", "run directory written by 'zerotrain train'")
      .value_flag("ckpt", "PATH", "a checkpoint directory, or a checkpoint folder (its latest valid checkpoint)")
      .value_flag("from", "PATH", "pretrained weights: a Hugging Face folder or an llm.c model file")
      .value_flag("tokenizer", "FILE",
                  "tokenizer.json to encode the prompt and decode with (default: the run's, or the folder's)")
      .value_flag("vocab", "FILE", "zerotrain vocab.json to decode with (default: the run directory's)")
      .value_flag("tokens", "N", "tokens to generate (default 200)")
      .value_flag("temperature", "T", "softmax temperature (default 0.8)")
      .value_flag("top-k", "K", "sample among the K most likely tokens, 0 = all (default 40)")
      .value_flag("prompt", "TEXT", "text to continue (default a newline)")
      .value_flag("seed", "S", "sampling seed (default 1)")
      .bool_flag("no-kv-cache",
                 "run the whole window for every token instead of the new token through a key/value "
                 "cache (slower; for comparison)");
  if (!parser.parse(args)) {
    fmt::print("{}", parser.help_text());
    return 0;
  }
  if (static_cast<int>(parser.has("run")) + static_cast<int>(parser.has("ckpt")) +
          static_cast<int>(parser.has("from")) !=
      1) {
    throw_input_error("zerotrain sample: give exactly one of --run, --ckpt and --from");
  }
  if (parser.has("ckpt")) return sample_checkpoint(parser);
  if (parser.has("from")) return sample_pretrained(parser);
  const std::filesystem::path dir(parser.get("run"));
  for (const char* f : {"config.json", "final.safetensors"}) {
    if (!std::filesystem::exists(dir / f)) throw_input_error("zerotrain sample: {} has no {}", dir.string(), f);
  }
  const RunConfig cfg = load_run_config((dir / "config.json").string(), {});
  const data::TokenText text = token_text(parser, dir.string());
  const SamplingOptions options = sampling_options(parser, text);
  const Prompt prompt = encode_prompt(parser, text, cfg.train.seq_len);

  MemoryTracker tracker;
  const ExecContext ctx{Device::kCPU, cfg.train.num_threads, nullptr};
  // The weights file holds whole tensors, so any unit layout reads it: the default one.
  ModelSpec spec = cfg.model_spec();
  spec.layout = {};
  const ParamTable table = spec.family().param_table(spec);
  LocalCommunicator comm(tracker, {});
  ZeroParamStore store(table, cfg.param_dtype, ZeroOptions{}, comm, tracker, ctx);
  // fp32 weights load straight into the store; bf16 ones go through fp32 staging buffers.
  const bool mixed = cfg.param_dtype == DType::kBF16;
  std::vector<Buffer> staging;
  for (std::size_t u = 0; mixed && u < table.units().size(); ++u) {
    staging.emplace_back(tracker, MemCategory::kWorkspace, DType::kF32, table.units()[u].numel);
  }
  load_model_weights((dir / "final.safetensors").string(), table, [&](int u) {
    return mixed ? staging[static_cast<std::size_t>(u)].view() : store.working_shard(u);
  });
  for (std::size_t u = 0; u < staging.size(); ++u)
    ops::cast(ctx, store.working_shard(static_cast<int>(u)), staging[u].view());
  staging.clear();

  return generate_and_print(spec, tracker, ctx, store, text, options, prompt);
}

}  // namespace zt::cli
