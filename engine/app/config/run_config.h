// The resolved configuration of a run, read from a JSON file plus --set overrides. Sections:
// model, data, train, optim, precision, zero, comm, log, checkpoint.
// Every key is documented in docs/config.md; unknown keys, wrong types, out-of-range values and
// batch terms that disagree are errors naming the key.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/core/config_reader.h"
#include "engine/base/core/dtype.h"
#include "engine/distributed/sharding/zero_options.h"
#include "kernels/contracts/adamw_params.h"
#include "models/model_config.h"
#include "models/model_family.h"

namespace zt {

struct DataConfig {
  std::string dataset = "embedded";  // "embedded", or a directory made by `zerotrain prepare`
  std::string train_file;            // explicit token files override the directory's
  std::string val_file;
  // Sharded splits: paths or glob patterns (llm.c's fineweb_train_*.bin), read lazily
  // (engine/app/data/token_corpus.h); override the directory's, exclusive with train_file.
  std::vector<std::string> train_files, val_files;
  std::string order = "random";  // random | sequential (llm.c's walk through the shards)
  std::string vocab_file;
  // A Hugging Face tokenizer.json for prompts, samples and exports (default: the dataset
  // folder's, or the one beside the first training shard, as tools/prepare_tokens.py leaves it).
  std::string tokenizer_file;
  std::string format = "auto";              // auto | llmc | nanogpt
  std::int64_t embedded_chars = 2'000'000;  // size of the generated default dataset
  // A multiple-choice eval file in llm.c's format (HellaSwag), scored at each evaluation.
  std::string choice_file;

  // Where the tokens come from when no token files are named (train_files, then train_file, take
  // precedence): the embedded generated text, or a prepared dataset's folder.
  bool reads_embedded_text() const { return train_files.empty() && train_file.empty() && dataset == "embedded"; }
  bool reads_prepared_dataset() const { return train_files.empty() && train_file.empty() && dataset != "embedded"; }
};

struct TrainConfig {
  // A pretrained checkpoint to start from (a Hugging Face folder or an llm.c model file): it sets
  // the model section (engine/app/config/init_from.h) and the first weights.
  std::string init_from;
  int micro_batch = 4;                   // sequences per forward/backward (B)
  int seq_len = 0;                       // tokens per sequence (T); defaults to model.block_size
  bool seq_len_given = false;            // the config gave it (else run_file_json leaves it out)
  int grad_accum = 1;                    // micro-batches per optimizer step
  std::int64_t global_batch_tokens = 0;  // micro_batch * seq_len * grad_accum * ranks
  bool global_batch_given = false;       // the config gave global_batch_tokens (grad_accum or micro_batch derived)
  // Derived from global_batch_tokens and a grad_accum given (run_file_json names it in "derived").
  bool micro_batch_derived = false;
  int max_steps = 100;
  std::uint64_t seed = 1337;
  int num_threads = 0;             // CPU threads for kernels and BLAS; 0 means every core
  bool num_threads_given = false;  // the config gave it (else the node's cores or OMP_NUM_THREADS did)
  CheckpointPolicy activation_checkpointing;
  // The LM head's logits in this many vocabulary chunks, never held whole (1: all at once); costs
  // the head's logits a second time per step (models/gpt/gpt_model.h, docs/memory.md).
  int head_chunks = 1;
  // Units per transformer block or Llama layer: 1, or 2 (its attention and MLP halves, gathered
  // and reduced apart: a smaller granule for ZeRO stage 3; models/unit_layout.h).
  int block_units = 1;
  UnitLayout unit_layout() const { return {head_chunks, block_units}; }
  int eval_every = 0;                   // steps between validation evaluations; 0 = only at the end
  int eval_batches = 8;                 // fixed validation micro-batches per evaluation
  std::string nonfinite = "stop";       // stop | skip: what a non-finite loss or gradient does
  int max_skipped_steps = 10;           // with skip: stop after this many consecutive skipped steps
  bool deterministic = false;           // fixed-order reductions: bitwise equal results at every ZeRO stage
  bool check_memory = true;             // refuse at start a run whose predicted peak exceeds the machine's offer
  double collective_timeout_s = 300.0;  // a collective not done by then ends the run with an error
};

struct OptimConfig {
  AdamWHyper adamw;     // lr is the peak learning rate
  float min_lr = 0.0f;  // floor reached at the end of the decay
  int warmup_steps = 0;
  std::string decay = "cosine";    // cosine | linear | constant | wsd
  int decay_steps = 0;             // step at which the floor is reached; defaults to train.max_steps
  double cooldown_fraction = 0.2;  // wsd: the share of decay_steps, at its end, that falls to min_lr
  // The config gave them (else derived, from optim.lr and train.max_steps: run_file_json leaves them
  // out, so that a run's config.json given again with another lr or max_steps derives them again).
  bool min_lr_given = false, decay_steps_given = false;
  float grad_clip = 1.0f;  // global-norm clipping; 0 disables
};

struct LogConfig {
  std::string run_dir;            // defaults to runs/<config file name without .json>
  int every_steps = 1;            // plain progress lines every N steps (a terminal gets a live line)
  std::string progress = "auto";  // auto | live | plain
  int sample_every = 0;           // steps between text samples; 0 = only at the end
  int sample_tokens = 200;        // 0 = no samples (the prompt is then not checked)
  float sample_temperature = 0.8f;
  int sample_top_k = 40;  // 0 = no top-k filter
  std::string sample_prompt = "\n";
  // Time every op of every step after the first and write op_profile.json (kernels/op_profiler.h).
  bool profile_ops = false;
  // Write final.safetensors at the end (off: benchmarks and sweeps that keep no weights, where the
  // gather and the file cost seconds a run: 5 GB for Llama 3.2 1B).
  bool final_weights = true;

  // Whether the run samples text at all: the trainer's samples and the start check of the prompt.
  bool samples() const { return sample_tokens > 0; }
};

struct CheckpointConfig {
  std::string dir;             // checkpoint folder; "" means <run_dir>/checkpoints (see folder_for)
  int every_steps = 0;         // save after every N optimizer-loop steps; 0 = off
  int keep_last = 3;           // complete checkpoints kept (older ones deleted after a newer one is complete); 0 = all
  bool at_end = false;         // save after the last step
  bool save_on_signal = true;  // SIGTERM/SIGINT/SIGUSR1: save at the next step boundary and exit 0
  // Stage each save in host memory and write it in the background while training goes on
  // (engine/app/checkpoint/async_checkpoint.h); the staging holds one rank file for the whole run.
  bool async = false;

  // The folder checkpoints go to for a run writing into run_dir.
  std::string folder_for(const std::string& run_dir) const { return dir.empty() ? run_dir + "/checkpoints" : dir; }
};

// comm.backend: what carries the parameter store's collectives between ranks. kAuto is NCCL on
// CUDA and MPI on the CPU; kMpi on CUDA stages device memory through pinned host memory
// (StagedCommunicator: several ranks on one GPU, where NCCL refuses).
enum class CommBackend { kAuto, kNccl, kMpi };
constexpr std::string_view comm_backend_name(CommBackend b) {
  return b == CommBackend::kNccl ? "nccl" : b == CommBackend::kMpi ? "mpi" : "auto";
}

struct RunConfig {
  std::string source;  // the file it came from, for messages
  // The keys --set gave: checks made after reading name them (sources_of), not the file alone.
  std::shared_ptr<const OverrideSources> overrides;
  // "tiny.json and --set zero.shard_group_size=2": what a check across `dotted_keys` read.
  std::string sources_of(std::initializer_list<std::string_view> dotted_keys) const {
    return config_sources(source, overrides.get(), dotted_keys);
  }
  std::string sources_of(std::span<const std::string_view> dotted_keys) const {
    return config_sources(source, overrides.get(), dotted_keys);
  }
  Device device = Device::kCPU;
  // model.arch (a registered family), the keys every family has and the family's own, resolved.
  ModelConfig model;
  float dropout = 0.0f;  // model.dropout, for a family that has it (GPT-2: probabilities, residual branches)
  DataConfig data;
  TrainConfig train;
  OptimConfig optim;
  DType param_dtype = DType::kF32;                            // f32, or bf16 with fp32 master weights
  MatmulPrecision matmul_precision = MatmulPrecision::kFp32;  // precision.matmul: fp32 products on CUDA
  DType activation_dtype = DType::kF32;                       // precision.activations: F32 or BF16 (docs/precision.md)
  AttentionKernels attention_kernels = AttentionKernels::kAuto;  // precision.attention: cuDNN or flash on CUDA
  bool gelu_epilogue =
      false;  // precision.gelu_epilogue: GELU in the MLP matmuls' cuBLASLt epilogues (CUDA, bf16 default)
  ZeroOptions zero;
  CommBackend comm_backend = CommBackend::kAuto;  // comm.backend
  int world_size = 1;                             // ranks (set by the launcher, not the file)
  LogConfig log;
  CheckpointConfig checkpoint;
  std::vector<std::string> derived;   // "train.grad_accum = 4 (from ...)": printed at start
  std::vector<std::string> warnings;  // a choice that runs but runs badly: printed at start as "warning: ..."

  nlohmann::json to_json() const;
  // What a run directory's config.json keeps: to_json, but a global batch the config gave kept as
  // given rather than the grad_accum it made at this rank count (which, run again on another,
  // would change the batch), and a "derived" list naming the defaults that follow other keys
  // (train.seq_len, optim.min_lr, optim.decay_steps), which the file given again derives again.
  nlohmann::json run_file_json() const;
  nlohmann::json model_json() const;  // to_json()'s "model" section
  // The model this config trains (its family, hyper-parameters and unit layout), and how the
  // trainer builds it (train.micro_batch x train.seq_len, checkpointing, dropout, activations).
  ModelSpec model_spec() const { return {model, train.unit_layout()}; }
  ModelBuild model_build() const {
    return {train.micro_batch, train.seq_len, train.activation_checkpointing, dropout, train.seed, activation_dtype};
  }
  // The kernels' routes (precision.*, train.deterministic) the compute backend opens with.
  KernelChoices kernel_choices() const {
    return {matmul_precision, attention_kernels, gelu_epilogue, train.deterministic};
  }
};

// For a config whose weights do not come from train.init_from (a resumed run's come from its
// checkpoint, a finished run's from its final weights): init_from then only fills the model keys
// the config leaves out, and where its path no longer exists (moved, cleaned up, another machine)
// this gives them instead, given the config with its device, log and checkpoint sections read.
// The config's own model keys stay. Unset: init_from's path must exist.
using SavedModelKeys = std::function<nlohmann::json(const RunConfig& c)>;

// The batch terms that do not resolve at the rank count (train.global_batch_tokens against
// micro_batch x seq_len x grad_accum x ranks): the error a config written for another rank count
// meets, which `memory` and `plan` read past with a batch term of their own (any other stands).
class BatchSplitError : public InputError {
 public:
  // The terms as the config gave them at `world_size` ranks, for a batch of the reader's own.
  BatchSplitError(const std::string& message, int micro_batch, int seq_len, int world_size,
                  std::int64_t global_batch_tokens)
      : InputError(message),
        micro_batch(micro_batch),
        seq_len(seq_len),
        world_size(world_size),
        global_batch_tokens(global_batch_tokens) {}
  int micro_batch, seq_len, world_size;
  std::int64_t global_batch_tokens;  // as given; 0 where the config derives it
};

// A run's config.json names, in "derived", the defaults it derived (RunConfig::run_file_json):
// those keys are taken out of `doc` (and "derived" with them), to be derived again from the keys
// they follow. InputError naming `source` for a "derived" that is not such a list.
void take_derived_out(nlohmann::json& doc, const std::string& source);

// Reads `path`, applies each "section.key=value" override in order, validates, resolves defaults.
// Throws InputError (BatchSplitError for the batch terms) with a one-line message naming the file
// and key on any problem. `world_size` is the number of ranks the run will use (batch terms depend
// on it).
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides, int world_size = 1,
                          const SavedModelKeys& saved_model_keys = {});

// load_run_config, and where the config's batch terms do not split over `world_size` (a config
// written for another rank count: BatchSplitError), again with the `fallback` assignments for that
// error appended to `overrides` (memory's: the config's micro-batch at grad_accum 1, its global
// batch following; plan's "train.micro_batch=1"), the first error's message in `refused`. Every
// other error stands, and the first where the second load fails too (its message says whether any
// micro-batch splits the global batch).
using BatchFallback = std::function<std::vector<std::string>(const BatchSplitError&)>;
RunConfig load_run_config_past_batch_split(const std::string& path, std::vector<std::string>& overrides, int world_size,
                                           const BatchFallback& fallback, std::string& refused);

// A refusal of a file the config names (it cannot be read, or holds what it must not), named by
// the config key that gave the file and where that key came from (a config with several paths left
// the user to guess which one failed): call in the handler of `e`. A refusal that already names its
// config source is rethrown as it is.
[[noreturn]] void rethrow_naming_key(const RunConfig& c, const std::string& key, const InputError& e);
// What `read` returns, its refusal named by `key` (rethrow_naming_key).
template <typename Read>
auto read_naming_key(const RunConfig& c, const std::string& key, Read&& read) {
  try {
    return read();
  } catch (const InputError& e) {
    rethrow_naming_key(c, key, e);
  }
}

// Same, from a document already in memory (tests; `source` names it in messages).
// `overrides`: the keys --set gave (load_run_config), whose errors then name the --set.
RunConfig parse_run_config(nlohmann::json doc, const std::string& source, int world_size = 1,
                           std::shared_ptr<const OverrideSources> overrides = nullptr,
                           const SavedModelKeys& saved_model_keys = {});

// The rules a training run applies beyond the config's own: a config that `zerotrain memory`
// predicts every stage of (it sets zero.stage per column) may still not train at its own stage
// (zero.gather_dtype = "int8" at stage 0, which has no gathers), nor one past what the memory
// prediction counts (check_memory_countable). InputError naming the keys; the trainer and
// `zerotrain plan` (which counts such a choice refused) ask it.
void check_trainable(const RunConfig& c);

}  // namespace zt
