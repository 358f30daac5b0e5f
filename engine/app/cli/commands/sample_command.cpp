// `zerotrain sample`: generates text from the final weights a `train` run left in its directory,
// from the fp32 master weights of a sharded checkpoint (read unit by unit, any save layout), or
// from pretrained weights (--from: a Hugging Face folder or an llm.c model file), on the CPU or
// (--device cuda) on a GPU.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <omp.h>

#include <filesystem>
#include <functional>

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
#include "kernels/compute_backend.h"
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

// Where a sample runs: the CPU, or with --device cuda the first GPU this process sees, and on it a
// one-process stage-0 store of the model's units, whole, filled unit by unit from fp32 values in
// host memory (a GPU's through a device copy, and a cast where its parameters are bf16).
class SamplingSetup {
 public:
  // `activations` bf16 also holds the parameters in bf16 (whatever `param_dtype` says), as a bf16
  // run's own samples read them.
  SamplingSetup(Device device, int num_threads, const ModelSpec& spec, DType param_dtype, DType activations)
      : spec_(spec),
        activations_(activations),
        table_(spec.family().param_table(spec)),
        // bf16 activations multiply in bf16, as a bf16 run's config derives.
        backend_(device, num_threads, tracker_, 0,
                 KernelChoices{activations == DType::kBF16 ? MatmulPrecision::kBf16 : MatmulPrecision::kFp32}),
        comm_(tracker_, {}),
        store_(table_, activations == DType::kBF16 ? DType::kBF16 : param_dtype, ZeroOptions{}, comm_, tracker_,
               backend_.context()),
        staging_(table_.units().size()) {
    if (device == Device::kCUDA) fmt::print(stderr, "zerotrain sample: on {}\n", backend_.description());
  }

  const ParamTable& table() const { return table_; }

  // Where unit `u`'s fp32 values are to be written in host memory: the store's shard itself when
  // it is fp32 on the host, else a staging buffer of the unit's length that store_unit(u) moves
  // into the store (through a device copy, and a cast where the parameters are bf16).
  TensorView host_target(int u) {
    const TensorView shard = store_.working_shard(u);
    if (shard.device == Device::kCPU && shard.dtype == DType::kF32) return shard;
    std::vector<float>& staging = staging_[static_cast<std::size_t>(u)];
    staging.resize(static_cast<std::size_t>(shard.numel()));
    return TensorView{staging.data(), DType::kF32, Device::kCPU, Shape{shard.numel()}};
  }

  void store_unit(int u) {
    const ExecContext& ctx = backend_.context();
    const TensorView shard = store_.working_shard(u);
    std::vector<float>& staging = staging_[static_cast<std::size_t>(u)];
    if (staging.empty()) return;  // written in place
    const TensorView host{staging.data(), DType::kF32, Device::kCPU, Shape{shard.numel()}};
    if (shard.dtype == DType::kF32) {
      ops::copy(ctx, shard, host);
    } else if (shard.device == Device::kCPU) {
      ops::cast(ctx, shard, host);
    } else {  // bf16 on the GPU: the fp32 values copied over, then cast there
      Buffer f32 = ops::allocate(ctx, tracker_, MemCategory::kWorkspace, DType::kF32, shard.numel(), false);
      ops::copy(ctx, f32.view(), host);
      ops::cast(ctx, shard, f32.view());
      ops::synchronize(ctx);
    }
    staging = {};
  }

  // Each unit in turn from `fill`, which writes the unit's fp32 values to the view it gets.
  void load_units(const std::function<void(int, TensorView)>& fill) {
    for (std::size_t u = 0; u < table_.units().size(); ++u) {
      const int unit = static_cast<int>(u);
      fill(unit, host_target(unit));
      store_unit(unit);
    }
  }

  // The prompt's continuation, printed (after the prompt's text where there is a tokenizer).
  int generate_and_print(const data::TokenText& text, const SamplingOptions& options, const Prompt& prompt) {
    const SamplingModelBuilder build = [&](int seq_len) {
      return make_model(spec_, sampling_build(seq_len, activations_), tracker_, backend_.context());
    };
    const auto tokens = sample_tokens(build, store_, prompt.ids, options, prompt.limit);
    fmt::print("{}{}\n", text.has() ? prompt.text : "", text.decode(tokens));
    return 0;
  }

 private:
  // Declared in the order they are built; what allocates through the backend goes first.
  MemoryTracker tracker_;
  ModelSpec spec_;
  DType activations_;
  ParamTable table_;
  ComputeBackend backend_;
  LocalCommunicator comm_;
  ZeroParamStore store_;
  std::vector<std::vector<float>> staging_;  // per unit: fp32 values on their way to a GPU or a bf16 store
};

// --dtype: the activations', and with bf16 the parameters' too.
DType sampling_dtype(const ArgParser& parser) {
  const std::string dtype = parser.get("dtype", "f32");
  if (dtype != "f32" && dtype != "bf16") {
    throw_input_error("zerotrain sample: --dtype must be f32 or bf16 (got '{}')", dtype);
  }
  return dtype == "bf16" ? DType::kBF16 : DType::kF32;
}

Device sampling_device(const ArgParser& parser) {
  const std::string device = parser.get("device", "cpu");
  if (device != "cpu" && device != "cuda") {
    throw_input_error("zerotrain sample: --device must be cpu or cuda (got '{}')", device);
  }
  return device == "cuda" ? Device::kCUDA : Device::kCPU;
}

// --ckpt: the model from the manifest, fp32 master weights read unit by unit into a one-process
// stage-0 store (whatever the number of ranks and stage that saved it).
int sample_checkpoint(const ArgParser& parser, Device device, DType activations) {
  const ckpt::ResolvedCheckpoint resolved = ckpt::resolve_checkpoint(parser.get("ckpt"), ckpt::Validation::kStructure);
  for (const std::string& note : resolved.notes) fmt::print(stderr, "zerotrain sample: {}\n", note);
  const ckpt::CheckpointReader reader(resolved.path);
  const ModelSpec spec = ckpt::model_spec_of(reader);
  const data::TokenText text =
      token_text(parser, std::filesystem::path(resolved.path).parent_path().parent_path().string());
  const SamplingOptions options = sampling_options(parser, text);
  const Prompt prompt = encode_prompt(parser, text, spec.block_size());

  // The checkpoint's units (model_spec_of: e.g. its token table in as many chunk units as its
  // run's head had).
  SamplingSetup setup(device, omp_get_num_procs(), spec, DType::kF32, activations);
  setup.load_units(
      [&](int unit, TensorView out) { reader.read(ckpt::StateKind::kMaster, unit, 0, out.numel(), out.as<float>()); });
  return setup.generate_and_print(text, options, prompt);
}

// --from: a pretrained checkpoint (a Hugging Face folder or an llm.c model file, as
// train.init_from reads it) into a one-process fp32 store, whole.
int sample_pretrained(const ArgParser& parser, Device device, DType activations) {
  const std::string path = parser.get("from");
  const nlohmann::json doc = {{"model", nlohmann::json::object()}, {"train", {{"init_from", path}}}};
  const RunConfig cfg = parse_run_config(doc, "--from " + path, 1);
  const data::TokenText text = token_text(parser, std::filesystem::is_directory(path) ? path : "");
  const SamplingOptions options = sampling_options(parser, text);
  const Prompt prompt = encode_prompt(parser, text, cfg.model.block_size);
  SamplingSetup setup(device, omp_get_num_procs(), cfg.model_spec(), DType::kF32, activations);
  const std::unique_ptr<PretrainedReader> reader = PretrainedReader::open(path, setup.table());
  setup.load_units([&](int unit, TensorView out) {
    read_pretrained_unit(*reader, setup.table(), unit, 0, out.numel(), out.as<float>());
  });
  return setup.generate_and_print(text, options, prompt);
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
      .value_flag("device", "DEV", "cpu or cuda (the first GPU this process sees; default cpu)")
      .value_flag("dtype", "D",
                  "f32 or bf16: the activations, bf16 also holding the weights in bf16 (half the memory a "
                  "token reads, as a bf16 run samples; default f32)")
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
  const Device device = sampling_device(parser);
  const DType activations = sampling_dtype(parser);
  if (parser.has("ckpt")) return sample_checkpoint(parser, device, activations);
  if (parser.has("from")) return sample_pretrained(parser, device, activations);
  const std::filesystem::path dir(parser.get("run"));
  for (const char* f : {"config.json", "final.safetensors"}) {
    if (!std::filesystem::exists(dir / f)) throw_input_error("zerotrain sample: {} has no {}", dir.string(), f);
  }
  // The run's model on the chosen device: its config's device and precision keys aside, it is
  // sampled as `zerotrain sample` samples any weights (in --dtype's activations; with bf16 ones,
  // and so fp32 products on the CPU and bf16 ones on a GPU, as the run's own samples).
  const RunConfig cfg = load_run_config((dir / "config.json").string(), {});
  const data::TokenText text = token_text(parser, dir.string());
  const SamplingOptions options = sampling_options(parser, text);
  const Prompt prompt = encode_prompt(parser, text, cfg.train.seq_len);

  // The weights file holds whole tensors, so any unit layout reads it: the default one.
  ModelSpec spec = cfg.model_spec();
  spec.layout = {};
  SamplingSetup setup(device, cfg.train.num_threads, spec, cfg.param_dtype, activations);
  // The file's tensors come in its own order: every unit's host target first, then the store.
  load_model_weights((dir / "final.safetensors").string(), setup.table(), [&](int u) { return setup.host_target(u); });
  for (std::size_t u = 0; u < setup.table().units().size(); ++u) setup.store_unit(static_cast<int>(u));
  return setup.generate_and_print(text, options, prompt);
}

}  // namespace zt::cli
