// Parsing and validation of RunConfig: the schema lives here, next to its defaults, and to_json()
// writes the resolved config in the same schema (so a run directory's config.json reloads).
#include "engine/app/config/run_config.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>

#include "engine/app/config/init_from.h"
#include "engine/app/config/model_section.h"
#include "engine/app/config/zero_section.h"
#include "engine/app/io/input_file.h"
#include "engine/base/core/check.h"
#include "engine/base/core/config_reader.h"
#include "engine/base/core/float_text.h"
#include "engine/distributed/launch/rendezvous.h"

namespace zt {

namespace {

constexpr long long kMaxDim = 1 << 20;
constexpr long long kMaxGradAccum = 1 << 16;
constexpr long long kMaxSteps = 1'000'000'000;

void read_data(ConfigReader r, DataConfig& d) {
  d.dataset = r.get_path("dataset", d.dataset);
  d.train_file = r.get_path("train_file", "");
  d.val_file = r.get_path("val_file", "");
  d.vocab_file = r.get_path("vocab_file", "");
  d.tokenizer_file = r.get_path("tokenizer_file", "");
  d.choice_file = r.get_path("choice_file", "");
  d.train_files = r.get_path_list("train_files");
  d.val_files = r.get_path_list("val_files");
  // A script whose shard list came up empty must not train on the embedded text unasked: an empty
  // list stands only beside a data key that names the data (a run's saved config.json writes
  // data.dataset, and [] for no shards).
  const std::pair<const char*, const std::vector<std::string>*> lists[] = {{"train_files", &d.train_files},
                                                                           {"val_files", &d.val_files}};
  for (const auto& [key, list] : lists) {
    if (r.has(key) && list->empty() && !r.has("dataset") && d.train_file.empty()) {
      throw_input_error(
          "config error in {}: data.{} is an empty list: name at least one token file or pattern (data.dataset = "
          "\"embedded\" asks for the generated text)",
          r.source_of(key), key);
    }
  }
  d.order = r.get_enum("order", d.order, {"random", "sequential"});
  d.format = r.get_enum("format", d.format, {"auto", "llmc", "nanogpt"});
  d.embedded_chars = r.get_int("embedded_chars", static_cast<int>(d.embedded_chars), 10'000, 1 << 30);
  // Both forms first: a --set data.train_file over a config's shard lists lacks its val_file, but
  // the mix is what is wrong.
  const bool shard_lists = !d.train_files.empty() || !d.val_files.empty(),
             single_files = !d.train_file.empty() || !d.val_file.empty();
  if (shard_lists && single_files) {
    throw_input_error(
        "config error in {}: give data.train_files/val_files (shards) or data.train_file/val_file, "
        "not both",
        r.sources_of({"data.train_files", "data.val_files", "data.train_file", "data.val_file"}));
  }
  if (d.train_file.empty() != d.val_file.empty()) {
    throw_input_error("config error in {}: data.train_file and data.val_file must be given together",
                      r.sources_of({"data.train_file", "data.val_file"}));
  }
  if (d.train_files.empty() != d.val_files.empty()) {
    throw_input_error("config error in {}: data.train_files and data.val_files must be given together",
                      r.source_of(d.train_files.empty() ? "val_files" : "train_files"));
  }
  r.reject_unknown_keys();
}

// The batch terms must agree: global_batch_tokens = micro_batch * seq_len * grad_accum * ranks.
// A missing one is derived (and noted, so the run prints it).
void resolve_batch(ConfigReader& r, RunConfig& c, bool has_accum, bool has_global) {
  TrainConfig& t = c.train;
  const std::int64_t per_accum = static_cast<std::int64_t>(t.micro_batch) * t.seq_len * c.world_size;
  if (has_global && !has_accum) {
    if (t.global_batch_tokens % per_accum != 0) {
      throw_input_error(
          "config error in {}: train.global_batch_tokens = {} is not a multiple of train.micro_batch x train.seq_len "
          "x ranks = {} x {} x {}",
          r.sources_of({"train.global_batch_tokens", "train.micro_batch", "train.seq_len"}), t.global_batch_tokens,
          t.micro_batch, t.seq_len, c.world_size);
    }
    const std::int64_t accum = t.global_batch_tokens / per_accum;
    if (accum > kMaxGradAccum) {  // the range train.grad_accum itself is read in
      throw_input_error(
          "config error in {}: train.global_batch_tokens = {} over train.micro_batch x train.seq_len x ranks = {} x "
          "{} x {} makes train.grad_accum = {}, above its largest, {} (raise train.micro_batch)",
          r.sources_of({"train.global_batch_tokens", "train.micro_batch", "train.seq_len"}), t.global_batch_tokens,
          t.micro_batch, t.seq_len, c.world_size, accum, kMaxGradAccum);
    }
    t.grad_accum = static_cast<int>(accum);
    c.derived.push_back(fmt::format("train.grad_accum = {} (from train.global_batch_tokens = {})", t.grad_accum,
                                    t.global_batch_tokens));
    return;
  }
  const std::int64_t implied = per_accum * t.grad_accum;
  if (has_global && t.global_batch_tokens != implied) {
    throw_input_error(
        "config error in {}: train.global_batch_tokens = {} disagrees with train.micro_batch x train.seq_len x "
        "train.grad_accum x ranks = {} x {} x {} x {} = {}",
        r.sources_of({"train.global_batch_tokens", "train.micro_batch", "train.seq_len", "train.grad_accum"}),
        t.global_batch_tokens, t.micro_batch, t.seq_len, t.grad_accum, c.world_size, implied);
  }
  if (!has_global && implied > 2147483647) {  // the range a train.global_batch_tokens given is read in
    throw_input_error(
        "config error in {}: train.micro_batch x train.seq_len x train.grad_accum x ranks = {} x {} x {} x {} = {} "
        "tokens a step, past the 2147483647 train.global_batch_tokens takes",
        r.sources_of({"train.micro_batch", "train.seq_len", "train.grad_accum"}), t.micro_batch, t.seq_len,
        t.grad_accum, c.world_size, implied);
  }
  if (!has_global) {
    c.derived.push_back(
        fmt::format("train.global_batch_tokens = {} (micro_batch {} x seq_len {} x grad_accum {} x "
                    "ranks {})",
                    implied, t.micro_batch, t.seq_len, t.grad_accum, c.world_size));
  }
  t.global_batch_tokens = implied;
}

void read_train(ConfigReader r, RunConfig& c) {
  TrainConfig& t = c.train;
  const int block_size = c.model.block_size;
  t.init_from = r.get_path("init_from", "");
  t.micro_batch = r.get_int("micro_batch", t.micro_batch, 1, kMaxDim);
  if (!r.has("seq_len")) c.derived.push_back(fmt::format("train.seq_len = {} (model.block_size)", block_size));
  t.seq_len = r.get_int("seq_len", block_size, 1, kMaxDim);
  if (t.seq_len > block_size) {
    throw_input_error("config error in {}: train.seq_len = {} exceeds model.block_size = {}",
                      r.sources_of({"train.seq_len", "model.block_size"}), t.seq_len, block_size);
  }
  bool has_accum = r.has("grad_accum"), has_global = r.has("global_batch_tokens");
  t.grad_accum = r.get_int("grad_accum", 1, 1, kMaxGradAccum);
  t.global_batch_tokens = r.get_int("global_batch_tokens", 0, 1, 2147483647);
  // A batch term given with --set wins over the file's other one (which is then derived): the
  // way to take a config whose file fixes grad_accum to a global batch kept at any rank count.
  const bool accum_set = has_accum && r.source_of("grad_accum") != r.file(),
             global_set = has_global && r.source_of("global_batch_tokens") != r.file();
  if (has_accum && has_global && accum_set != global_set) {
    c.derived.push_back(fmt::format("the file's train.{} set aside for {}",
                                    accum_set ? "global_batch_tokens" : "grad_accum",
                                    r.source_of(accum_set ? "grad_accum" : "global_batch_tokens")));
    (accum_set ? has_global : has_accum) = false;
  }
  resolve_batch(r, c, has_accum, has_global);
  t.global_batch_given = has_global;
  t.max_steps = r.get_int("max_steps", t.max_steps, 0, kMaxSteps);
  t.seed = static_cast<std::uint64_t>(r.get_int("seed", static_cast<int>(t.seed), 0, 2147483647));
  t.deterministic = r.get_bool("deterministic", t.deterministic);
  t.num_threads = r.get_int("num_threads", 0, 0, 1024);
  if (t.num_threads == 0) {
    // The node's cores shared among its ranks: each rank taking every core oversubscribed the node
    // (2 ranks on 2 cores: 350 ms a step against 125 with one thread each). Deterministic runs too:
    // their products take the same bits at any thread count ([Note: products the same at any
    // thread count] in kernels/cpu/blas.cpp), so a rank count's threads do not move them.
    const int cores = omp_get_num_procs(), node_ranks = ranks_on_this_node();
    t.num_threads = std::max(1, cores / node_ranks);
    c.derived.push_back(node_ranks > 1 ? fmt::format("train.num_threads = {} (this node's {} cores shared by its {} "
                                                     "ranks)",
                                                     t.num_threads, cores, node_ranks)
                                       : fmt::format("train.num_threads = {} (this node's cores)", t.num_threads));
  }
  const std::string ac = r.get_string("activation_checkpointing", "none");
  if (!CheckpointPolicy::parse(ac, &t.activation_checkpointing)) {
    throw_input_error(
        "config error in {}: train.activation_checkpointing = \"{}\" is not none, selective, all or every:K (K >= 1)",
        r.source_of("activation_checkpointing"), ac);
  }
  // Said where it recomputes less than it reads: every:K past the model's blocks checkpoints block 0
  // alone (every:1 is all of them).
  if (const CheckpointPolicy& p = t.activation_checkpointing;
      p.kind == CheckpointPolicy::Kind::kEvery && p.every_k >= c.model.n_layer && c.model.n_layer > 1) {
    c.derived.push_back(
        fmt::format("train.activation_checkpointing = {}: of the model's {} blocks only block 0 recomputes its forward",
                    ac, c.model.n_layer));
  }
  t.head_chunks = r.get_int("head_chunks", 1, 1, c.model.padded_vocab_size() / 64);
  t.block_units = r.get_int("block_units", 1, 1, 2);
  t.eval_every = r.get_int("eval_every", t.eval_every, 0, kMaxSteps);
  t.eval_batches = r.get_int("eval_batches", t.eval_batches, 1, 100000);
  t.nonfinite = r.get_enum("nonfinite", t.nonfinite, {"stop", "skip"});
  t.max_skipped_steps = r.get_int("max_skipped_steps", t.max_skipped_steps, 1, 1000000);
  t.check_memory = r.get_bool("check_memory", t.check_memory);
  t.collective_timeout_s = r.get_double("collective_timeout_s", t.collective_timeout_s, 0.1, 86400.0);
  r.reject_unknown_keys();
}

void read_optim(ConfigReader r, OptimConfig& o, int max_steps, std::vector<std::string>& derived) {
  AdamWHyper& a = o.adamw;
  a.lr = static_cast<float>(r.get_double("lr", 1e-3, 0.0, 10.0));
  a.beta1 = static_cast<float>(r.get_double("beta1", 0.9, 0.0, 0.999999));
  a.beta2 = static_cast<float>(r.get_double("beta2", 0.95, 0.0, 0.999999));
  // Not 0: a parameter whose gradients are all 0 (a padded vocabulary row) would update by 0 / 0.
  a.eps = static_cast<float>(r.get_double("eps", 1e-8, 1e-30, 1.0));
  a.weight_decay = static_cast<float>(r.get_double("weight_decay", 0.1, 0.0, 10.0));
  o.min_lr = static_cast<float>(r.get_double("min_lr", a.lr / 10.0, 0.0, 10.0));
  // From the single-precision lr: 1e-3 gives 0.000100000005, not the float nearest 1e-4, so a run
  // that states 0.0001 is another schedule (a resume says which to write).
  if (!r.has("min_lr")) derived.push_back(fmt::format("optim.min_lr = {} (optim.lr / 10)", o.min_lr));
  o.warmup_steps = r.get_int("warmup_steps", 0, 0, kMaxSteps);
  o.decay = r.get_enum("decay", o.decay, {"cosine", "linear", "constant", "wsd"});
  if (r.has("cooldown_fraction") && o.decay != "wsd") {
    throw_input_error(
        "config error in {}: optim.cooldown_fraction is read only with optim.decay = \"wsd\" (decay is \"{}\")",
        r.source_of("cooldown_fraction"), o.decay);
  }
  o.cooldown_fraction = r.get_double("cooldown_fraction", o.cooldown_fraction, 0.0, 1.0);
  // By default the decay ends with the run (or with the warmup, for a run shorter than its warmup).
  o.decay_steps = r.get_int("decay_steps", std::max(max_steps, o.warmup_steps), 0, kMaxSteps);
  if (!r.has("decay_steps") && o.decay != "constant") {  // a resume that changes max_steps changes it too
    derived.push_back(fmt::format(
        "optim.decay_steps = {} ({})", o.decay_steps,
        max_steps >= o.warmup_steps ? "train.max_steps" : "optim.warmup_steps: the run is shorter than its warmup"));
  }
  o.grad_clip = static_cast<float>(r.get_double("grad_clip", 1.0, 0.0, 1e6));
  if (o.min_lr > a.lr) {
    throw_input_error("config error in {}: optim.min_lr = {} exceeds optim.lr = {}",
                      r.sources_of({"optim.min_lr", "optim.lr"}), o.min_lr, a.lr);
  }
  if (o.decay != "constant" && o.decay_steps < o.warmup_steps) {
    throw_input_error("config error in {}: optim.decay_steps = {} is before the end of optim.warmup_steps = {}",
                      r.sources_of({"optim.decay_steps", "optim.warmup_steps"}), o.decay_steps, o.warmup_steps);
  }
  r.reject_unknown_keys();
}

void read_log(ConfigReader r, LogConfig& l, const std::string& source) {
  // runs/<the config's name>; a name that is no folder's ("...json" has stem "..", which would make
  // runs/.. the working directory) is "run".
  std::string stem = std::filesystem::path(source).stem().string();
  if (stem.empty() || stem == "." || stem == "..") stem = "run";
  l.run_dir = r.get_path("run_dir", "runs/" + stem);
  l.every_steps = r.get_int("every_steps", l.every_steps, 1, kMaxSteps);
  l.progress = r.get_enum("progress", l.progress, {"auto", "live", "plain"});
  l.sample_every = r.get_int("sample_every", l.sample_every, 0, kMaxSteps);
  l.sample_tokens = r.get_int("sample_tokens", l.sample_tokens, 0, 100000);
  l.sample_temperature = static_cast<float>(r.get_double("sample_temperature", l.sample_temperature, 1e-3, 100.0));
  l.sample_top_k = r.get_int("sample_top_k", l.sample_top_k, 0, 65535);
  l.sample_prompt = r.get_string("sample_prompt", l.sample_prompt);
  l.profile_ops = r.get_bool("profile_ops", l.profile_ops);
  l.final_weights = r.get_bool("final_weights", l.final_weights);
  r.reject_unknown_keys();
}

void read_checkpoint(ConfigReader r, CheckpointConfig& k) {
  k.dir = r.get_path("dir", k.dir);
  k.every_steps = r.get_int("every_steps", k.every_steps, 0, kMaxSteps);
  k.keep_last = r.get_int("keep_last", k.keep_last, 0, 1000000);
  k.at_end = r.get_bool("at_end", k.at_end);
  k.save_on_signal = r.get_bool("save_on_signal", k.save_on_signal);
  k.async = r.get_bool("async", k.async);
  r.reject_unknown_keys();
}

void read_comm(ConfigReader& r, RunConfig& c) {
  const std::string backend = r.get_enum("backend", "auto", {"auto", "nccl", "mpi"});
  c.comm_backend = backend == "nccl" ? CommBackend::kNccl : backend == "mpi" ? CommBackend::kMpi : CommBackend::kAuto;
  if (c.comm_backend == CommBackend::kNccl && c.device != Device::kCUDA) {
    throw_input_error(
        "config error in {}: comm.backend = \"nccl\" needs device = \"cuda\" (CPU ranks talk through MPI)",
        r.sources_of({"comm.backend", "device"}));
  }
  // Hybrid sharding keeps deterministic mode's promise (the same bits at every stage) by summing
  // each hop in rank order, which MPI's reductions on CPU ranks do and NCCL's (rings, trees, NVLink
  // SHARP) do not; the staged MPI path on CUDA has no hybrid sharding.
  const bool nccl = c.device == Device::kCUDA && c.comm_backend != CommBackend::kMpi;
  if (nccl && c.train.deterministic && c.zero.hybrid(c.world_size)) {
    throw_input_error(
        "config error in {}: train.deterministic = true with hybrid sharding (zero.shard_group_size = {} of {} "
        "ranks) on NCCL: NCCL's reductions do not sum in rank order, so the stages' bits could differ; set "
        "train.deterministic = false or drop zero.shard_group_size",
        r.sources_of({"train.deterministic", "zero.shard_group_size", "device", "comm.backend"}),
        c.zero.shard_group_size, c.world_size);
  }
}

}  // namespace

namespace {

// Every key a config has, by name: a default config's, as to_json writes them (a section's keys,
// and the top level's own), for an unknown key's "did you mean" (ConfigReader::set_key_homes).
std::shared_ptr<const KeyHomes> config_key_homes() {
  static const std::shared_ptr<const KeyHomes> homes = [] {
    auto out = std::make_shared<KeyHomes>();
    const nlohmann::json defaults = RunConfig{}.to_json();
    for (const auto& [name, value] : defaults.items()) {
      if (!value.is_object()) {
        (*out)[name].push_back(name);
        continue;
      }
      for (const auto& [key, inner] : value.items()) (*out)[key].push_back(name + "." + key);
    }
    return out;
  }();
  return homes;
}

}  // namespace

RunConfig parse_run_config(nlohmann::json doc, const std::string& source, int world_size,
                           std::shared_ptr<const OverrideSources> overrides, const SavedModelKeys& saved_model_keys) {
  RunConfig c;
  c.source = source;
  // Shared by every reader below, and completed by apply_init_from's sources.
  auto sources = std::make_shared<OverrideSources>(overrides ? *overrides : OverrideSources{});
  c.overrides = sources;
  c.world_size = world_size;
  ConfigReader root(doc, source, "", sources);
  root.set_key_homes(config_key_homes());
  if (!root.has("model")) {
    throw_input_error(
        "config error in {}: missing required section 'model'{}", source,
        root.section("train").has("init_from") ? " (with train.init_from, \"model\": {} takes its keys)" : "");
  }
  c.device = root.get_enum("device", "cpu", {"cpu", "cuda"}) == "cuda" ? Device::kCUDA : Device::kCPU;
  read_log(root.section("log"), c.log, source);  // where a resumed run's checkpoint is (saved_model_keys)
  read_checkpoint(root.section("checkpoint"), c.checkpoint);
  // The pretrained checkpoint's model keys, before the model section is read.
  // The keys it sets are its source's: errors in them, and checks across them, name that file.
  const OverrideSources from_init =
      apply_init_from(doc, root, saved_model_keys ? std::function([&] { return saved_model_keys(c); }) : nullptr);
  sources->insert(from_init.begin(), from_init.end());
  read_model_section(root.section("model"), c);
  read_data(root.section("data"), c.data);
  read_train(root.section("train"), c);
  read_optim(root.section("optim"), c.optim, c.train.max_steps, c.derived);
  ConfigReader precision = root.section("precision");
  // "f32" was this key's name for fp32 before every other dtype key said "fp32": both are read.
  c.param_dtype =
      precision.get_enum("param_dtype", "f32", {"f32", "fp32", "bf16"}) == "bf16" ? DType::kBF16 : DType::kF32;
  const std::string matmul = precision.get_enum("matmul", "fp32", {"fp32", "tf32", "bf16"});
  for (MatmulPrecision p : {MatmulPrecision::kFp32, MatmulPrecision::kTf32, MatmulPrecision::kBf16}) {
    if (matmul_precision_name(p) == matmul) c.matmul_precision = p;  // get_enum admitted only these names
  }
  if (c.matmul_precision != MatmulPrecision::kFp32 && c.device != Device::kCUDA) {
    throw_input_error(
        "config error in {}: precision.matmul = \"{}\" needs device = \"cuda\" (the CPU multiplies in fp32)",
        root.sources_of({"precision.matmul", "device"}), matmul);
  }
  const bool matmul_given = precision.has("matmul");
  if (precision.get_enum("activations", "fp32", {"fp32", "bf16"}) == "bf16") {
    c.activation_dtype = DType::kBF16;
    // bf16 activations are multiplied as bf16 (weights rounded too) on either device.
    if (c.device == Device::kCUDA && matmul_given && c.matmul_precision != MatmulPrecision::kBf16) {
      throw_input_error(
          "config error in {}: precision.matmul = \"{}\" conflicts with precision.activations = \"bf16\" "
          "(bf16 activations are multiplied in bf16; drop precision.matmul or set it to \"bf16\")",
          root.sources_of({"precision.matmul", "precision.activations"}), matmul);
    }
    if (c.device == Device::kCUDA && !matmul_given) {
      c.matmul_precision = MatmulPrecision::kBf16;
      c.derived.push_back("precision.matmul = bf16 (from precision.activations = bf16)");
    }
  }
  const std::string attention = precision.get_enum("attention", "auto", {"auto", "cudnn", "flash"});
  for (AttentionKernels a : {AttentionKernels::kAuto, AttentionKernels::kCudnn, AttentionKernels::kFlash}) {
    if (attention_kernels_name(a) == attention) c.attention_kernels = a;  // get_enum admitted only these names
  }
  if (c.attention_kernels != AttentionKernels::kAuto && c.device != Device::kCUDA) {
    throw_input_error(
        "config error in {}: precision.attention = \"{}\" needs device = \"cuda\" (the CPU has one "
        "attention)",
        root.sources_of({"precision.attention", "device"}), attention);
  }
  if (c.attention_kernels == AttentionKernels::kCudnn && c.activation_dtype != DType::kBF16) {
    throw_input_error(
        "config error in {}: precision.attention = \"cudnn\" needs precision.activations = \"bf16\" "
        "(cuDNN's fused attention takes bf16)",
        root.sources_of({"precision.attention", "precision.activations"}));
  }
  if (c.attention_kernels == AttentionKernels::kCudnn && c.dropout > 0.0f) {
    throw_input_error(
        "config error in {}: precision.attention = \"cudnn\" conflicts with model.dropout = {} (cuDNN "
        "would draw its own dropout masks; \"auto\" trains on the flash kernels and evaluates on cuDNN)",
        root.sources_of({"precision.attention", "model.dropout"}), c.dropout);
  }
  // On by default where it was measured faster (bf16 activations on CUDA: docs/performance.md);
  // fp32 activations keep the separate kernels, which track the CPU to ~1e-5.
  // (Only a family with a GELU MLP: a Llama's SwiGLU has none. Not under selective checkpointing.)
  const bool gelu_default = c.device == Device::kCUDA && c.activation_dtype == DType::kBF16 &&
                            model_family(c.model.arch).has_gelu_mlp() && !c.train.activation_checkpointing.selective();
  c.gelu_epilogue = precision.get_bool("gelu_epilogue", gelu_default);
  if (gelu_default && !precision.has("gelu_epilogue")) {
    c.derived.push_back("precision.gelu_epilogue = true (from precision.activations = bf16 on cuda)");
  }
  if (c.gelu_epilogue && c.device != Device::kCUDA) {
    throw_input_error(
        "config error in {}: precision.gelu_epilogue = true needs device = \"cuda\" (the CPU runs the "
        "GELU as its own kernel)",
        root.sources_of({"precision.gelu_epilogue", "device"}));
  }
  precision.reject_unknown_keys();
  read_zero_section(root.section("zero"), c);
  ConfigReader comm = root.section("comm");
  read_comm(comm, c);
  comm.reject_unknown_keys();
  root.reject_unknown_keys();
  check_model_support(c);
  return c;
}

namespace {

// A config from a pipe (`--config <(jq ...)`, /dev/stdin fed by a writer) can be read once, and
// memory and plan load the config again (each stage, each choice): they take the text the first
// read got (the second read found the pipe drained and refused it). A regular file is read anew.
std::string read_config_text(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return read_whole_input(path, "config error: --config");
  static std::mutex mutex;
  static std::map<std::string, std::string> piped;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = piped.find(path); it != piped.end()) return it->second;
  std::string text = read_whole_input(path, "config error: --config");
  piped.emplace(path, text);
  return text;
}

}  // namespace

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides, int world_size,
                          const SavedModelKeys& saved_model_keys) {
  nlohmann::json doc = parse_config_json(read_config_text(path), path);
  if (!doc.is_object()) {
    throw_input_error("config error in {}: the top level must be a JSON object of sections, not {}", path,
                      doc.type_name());
  }
  auto sources = std::make_shared<OverrideSources>();
  for (const std::string& o : overrides) {
    for (const std::string& key : apply_override(doc, o)) {
      // A later --set of a key replaces what earlier ones set inside it (an object value whole).
      std::erase_if(*sources, [&](const auto& entry) { return entry.first.starts_with(key + "."); });
      (*sources)[key] = "--set " + o;
    }
  }
  return parse_run_config(std::move(doc), path, world_size, std::move(sources), saved_model_keys);
}

nlohmann::json RunConfig::model_json() const { return model_section_json(*this); }

nlohmann::json RunConfig::run_file_json() const {
  nlohmann::json j = to_json();
  if (train.global_batch_given) {
    j["train"].erase("grad_accum");
    j["train"]["global_batch_tokens"] = train.global_batch_tokens;
  }
  return j;
}

nlohmann::json RunConfig::to_json() const {
  const AdamWHyper& a = optim.adamw;
  nlohmann::json doc = {
      {"device", std::string(device_name(device))},
      {"model", model_json()},
      {"data",
       {{"dataset", data.dataset},
        {"train_file", data.train_file},
        {"val_file", data.val_file},
        {"train_files", data.train_files},
        {"val_files", data.val_files},
        {"order", data.order},
        {"vocab_file", data.vocab_file},
        {"tokenizer_file", data.tokenizer_file},
        {"choice_file", data.choice_file},
        {"format", data.format},
        {"embedded_chars", data.embedded_chars}}},
      {"train",
       // global_batch_tokens is left out: it is derived from the rank count, and a saved config
       // must reload on any number of ranks (sampling on one process, resuming elsewhere).
       {{"micro_batch", train.micro_batch},
        {"seq_len", train.seq_len},
        {"grad_accum", train.grad_accum},
        {"max_steps", train.max_steps},
        {"seed", train.seed},
        {"init_from", train.init_from},
        {"num_threads", train.num_threads},
        {"activation_checkpointing", train.activation_checkpointing.to_string()},
        {"head_chunks", train.head_chunks},
        {"block_units", train.block_units},
        {"eval_every", train.eval_every},
        {"eval_batches", train.eval_batches},
        {"nonfinite", train.nonfinite},
        {"max_skipped_steps", train.max_skipped_steps},
        {"deterministic", train.deterministic},
        {"check_memory", train.check_memory},
        {"collective_timeout_s", train.collective_timeout_s}}},
      {"optim",
       {{"lr", shortest_decimal(a.lr)},
        {"beta1", shortest_decimal(a.beta1)},
        {"beta2", shortest_decimal(a.beta2)},
        {"eps", shortest_decimal(a.eps)},
        {"weight_decay", shortest_decimal(a.weight_decay)},
        {"min_lr", shortest_decimal(optim.min_lr)},
        {"warmup_steps", optim.warmup_steps},
        {"decay", optim.decay},
        {"decay_steps", optim.decay_steps},
        {"grad_clip", shortest_decimal(optim.grad_clip)}}},
      {"precision",
       {{"param_dtype", param_dtype == DType::kBF16 ? "bf16" : "f32"},
        {"matmul", matmul_precision_name(matmul_precision)},
        {"activations", activation_dtype == DType::kBF16 ? "bf16" : "fp32"},
        {"attention", attention_kernels_name(attention_kernels)},
        {"gelu_epilogue", gelu_epilogue}}},
      {"zero", zero_section_json(zero)},
      {"comm", {{"backend", comm_backend_name(comm_backend)}}},
      {"log",
       {{"run_dir", log.run_dir},
        {"every_steps", log.every_steps},
        {"progress", log.progress},
        {"sample_every", log.sample_every},
        {"sample_tokens", log.sample_tokens},
        {"sample_temperature", shortest_decimal(log.sample_temperature)},
        {"sample_top_k", log.sample_top_k},
        {"sample_prompt", log.sample_prompt},
        {"profile_ops", log.profile_ops},
        {"final_weights", log.final_weights}}},
      {"checkpoint",
       {{"dir", checkpoint.dir},
        {"every_steps", checkpoint.every_steps},
        {"keep_last", checkpoint.keep_last},
        {"at_end", checkpoint.at_end},
        {"save_on_signal", checkpoint.save_on_signal},
        {"async", checkpoint.async}}},
  };
  // Only where it is read, so the configs saved before the key existed compare equal on resume.
  if (optim.decay == "wsd") doc["optim"]["cooldown_fraction"] = optim.cooldown_fraction;
  return doc;
}

void check_trainable(const RunConfig& c) {
  check_memory_countable(c);
  if (c.zero.gather_wire != WireDType::kExact && c.zero.stage == 0) {
    throw_input_error(
        "config error in {}: zero.gather_dtype = \"int8\" quantizes the parameter all-gathers of stages 1-3; stage "
        "0 has none",
        c.sources_of({"zero.gather_dtype", "zero.stage"}));
  }
}

}  // namespace zt
