// Model families: `model.arch` names a registered ModelFamily (gpt2: models/gpt, llama:
// models/llama, or one a program registers itself), and everything the engine asks of a model goes
// through it: the family's config keys and refusals, its parameter table and initialisation, its
// model, memory footprint and step schedule, its Hugging Face config. Config, checkpoints, export,
// memory and the trainer hold a family-neutral ModelConfig and never branch on the architecture;
// engine/distributed/sharding knows no model at all.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/core/config_reader.h"
#include "engine/base/core/dtype.h"
#include "engine/base/core/param_table.h"
#include "engine/distributed/sharding/memory_model.h"
#include "engine/distributed/sharding/schedule_replay.h"
#include "kernels/compute_backend.h"  // KernelChoices
#include "kernels/exec_context.h"
#include "models/checkpoint_policy.h"
#include "models/language_model.h"
#include "models/model_config.h"
#include "models/unit_layout.h"

namespace zt {

class ModelFamily;

// A model's family and hyper-parameters, and how its parameters are cut into units.
struct ModelSpec {
  ModelConfig model;
  UnitLayout layout;  // train.head_chunks and train.block_units (every family)

  const ModelFamily& family() const;  // the registered family of model.arch
  int n_layer() const { return model.n_layer; }
  int vocab_size() const { return model.vocab_size; }
  int block_size() const { return model.block_size; }
  int padded_vocab_size() const { return model.padded_vocab_size(); }
};

// How one model instance is built: its batch shape and what its run asks of it.
struct ModelBuild {
  int batch = 1;
  int seq_len = 1;
  CheckpointPolicy checkpointing;
  float dropout = 0.0f;    // families with dropout only (ModelFamily::has_dropout)
  std::uint64_t seed = 0;  // keys the dropout masks
  DType activations = DType::kF32;
  // false: a model that only runs forwards (sampling), built without the backward's scratch (the
  // fp32 gradient scratch of the largest unit among it); its backward refuses.
  bool backward = true;
};

// A model for sampling: one sequence of seq_len tokens, no dropout, forwards only, its activations
// in `activations` (a training run's own: a bf16 run samples in bf16 and reads bf16 parameters as
// they are, where fp32 activations would copy each unit to fp32 first). Every block checkpointed:
// without a backward nothing recomputes, so each block's activations are freed after its forward,
// the same bits, and a sample no longer held every block's at once (configs/tiny.json sampling
// beside a micro-batch-1 step with activation_checkpointing = all: 2.45 MB against the step's 0.72).
inline ModelBuild sampling_build(int seq_len, DType activations = DType::kF32) {
  ModelBuild b;
  b.seq_len = seq_len;
  b.backward = false;
  b.activations = activations;
  b.checkpointing.kind = CheckpointPolicy::Kind::kAll;
  return b;
}

// A model scoring `rows` sequences at once (multiple-choice evaluation): sampling_build's, batched.
inline ModelBuild scoring_build(int rows, int seq_len, DType activations = DType::kF32) {
  ModelBuild b = sampling_build(seq_len, activations);
  b.batch = rows;
  return b;
}

// The run settings beyond the model section that a family may refuse (ModelFamily::refuse_run);
// precision.gelu_epilogue is checked against has_gelu_mlp for every family alike.
struct RunSettings {
  Device device = Device::kCPU;
  int micro_batch = 1;
};

class ModelFamily {
 public:
  virtual ~ModelFamily() = default;

  // ---- its name and its config keys ----
  virtual std::string_view name() const = 0;          // model.arch, the manifest's "type"
  virtual std::string_view display_name() const = 0;  // "GPT-2", "Llama": for messages
  // Keys of the model section only this family has: another family's config refuses them by name.
  virtual std::vector<std::string> own_keys() const = 0;
  // Whether model.dropout applies (else a config that sets it is refused).
  virtual bool has_dropout() const = 0;
  // Whether its MLP is a GELU one (precision.gelu_epilogue applies, on by default for CUDA bf16).
  virtual bool has_gelu_mlp() const = 0;
  // Its MLP's hidden width (GPT-2: 4 n_embd; Llama: the SwiGLU width), for the size check that
  // keeps the memory model's byte counts inside int64 (check_model_support).
  virtual int mlp_width(const ModelConfig& model) const = 0;
  // The weights a token meets in one forward's matrix products: every block's projections and the
  // head's padded vocabulary x n_embd (a tied head's too; not a lookup table). `zerotrain plan`
  // scales a profile's matrix products from one model to another by its ratio.
  virtual double matmul_weights_per_token(const ModelConfig& model) const = 0;
  // Reads the family's own keys from the model section (`model`'s shared keys already read) into
  // model.family_keys, with their defaults, checked; a default worth printing goes to `derived`.
  // Throws InputError naming the key.
  virtual void read_keys(ConfigReader& section, ModelConfig& model, std::vector<std::string>& derived) const = 0;
  // "" when `model`'s family keys (from a manifest) are a valid config of this family, else what is
  // wrong. May throw a JSON error on a missing or mistyped key.
  virtual std::string config_error(const ModelConfig& model) const = 0;
  // "" when a run with these settings can train this model, else a one-line reason naming the key.
  virtual std::string refuse_run(const ModelConfig& /*model*/, const RunSettings& /*run*/) const { return ""; }

  // ---- the model ----
  virtual ParamTable param_table(const ModelSpec& spec) const = 0;
  // The initialisation of `unit` of param_table(spec), its elements [begin, end) written into
  // unit_data[begin, end) (unit_data: the whole unit's fp32 buffer; the rest is left as it is): the
  // same values on every rank and at every rank count, whichever range is asked.
  virtual void init_unit_params(const ModelSpec& spec, const ParamTable& table, int unit, std::uint64_t seed,
                                float* unit_data, std::int64_t begin, std::int64_t end) const = 0;
  virtual std::unique_ptr<LanguageModel> make_model(const ModelSpec& spec, const ModelBuild& build,
                                                    MemoryTracker& tracker, const ExecContext& ctx) const = 0;
  // What make_model's model allocates itself (activations, workspace) with parameters of
  // `param_dtype` on `device`, and its step's store calls: the model's side of the memory
  // prediction (engine/distributed/sharding/memory_model.h).
  virtual ModelFootprint footprint(const ModelSpec& spec, const ModelBuild& build, DType param_dtype,
                                   Device device) const = 0;
  // The most scratch any one CUDA kernel call of make_model's model holds at once in a step (a
  // forward only where build.backward is false) with parameters of `param_dtype` and the kernels'
  // `choices`: kernel_scratch's bytes for its calls' shapes ([Note: the kernels' scratch,
  // predicted] in kernels/contracts/kernel_scratch.h). 0 for a family that never runs on CUDA.
  virtual std::int64_t cuda_call_scratch_bytes(const ModelSpec& /*spec*/, const ModelBuild& /*build*/,
                                               DType /*param_dtype*/, const KernelChoices& /*choices*/) const {
    return 0;
  }
  virtual StepSchedule step_schedule(const ModelSpec& spec, const CheckpointPolicy& checkpointing) const = 0;
  // Elements of one position's row in a key/value cache of this model, per layer
  // (LanguageModel::make_kv_cache), for the prediction of a sample's memory; 0 for a family that
  // keeps no cache. Every family says (no default), so a cache cannot be left out of the bound.
  virtual std::int64_t kv_cache_row_width(const ModelSpec& spec) const = 0;

  // ---- descriptions and formats ----
  // The run's model line, given its parameter count in millions.
  virtual std::string describe(const ModelSpec& spec, double params_millions) const = 0;
  virtual std::string describe_attention(const ModelSpec& spec, const ModelBuild& build, Device device,
                                         AttentionKernels kernels) const = 0;
  // Hugging Face's config.json for an export in `dtype`; `dropout` is the run's model.dropout.
  virtual nlohmann::ordered_json hf_config(const ModelSpec& spec, double dropout, DType dtype) const = 0;
  // Whether llm.c's model file can hold it (its GPT-2 tensor order and header).
  virtual bool llmc_format() const { return false; }
  // Hugging Face's config.json "model_type" this family reads ("gpt2", "llama"), "" for none.
  virtual std::string_view hf_model_type() const { return ""; }
  // The model section (shared and own keys, "arch" among them) that Hugging Face's config.json
  // `hf` describes: the inverse of hf_config. InputError naming `source` and the field when the
  // config asks for what this family does not compute (another activation, rotary scaling...).
  // Dropout is the run's choice, not the checkpoint's: never returned.
  virtual nlohmann::json model_keys_from_hf(const nlohmann::json& hf, const std::string& source) const;
  // Whether a config's model key `key` (`given`) says what train.init_from's model keys
  // (`pretrained`, as model_keys_from_hf writes them) do: equal JSON, numbers by value (4 and 4.0,
  // 1e-05 and 0.00001). A family whose keys have other spellings compares what they mean.
  virtual bool same_model_key(const std::string& key, const nlohmann::json& given,
                              const nlohmann::json& pretrained) const;
};

// Adds a family (its name must be new). gpt2 and llama are registered before any lookup; a program
// (a test) may register more before it reads a config.
void register_model_family(std::unique_ptr<const ModelFamily> family);
// The family of `name`; throws InputError naming the registered ones.
const ModelFamily& model_family(std::string_view name);
bool has_model_family(std::string_view name);
std::vector<std::string> model_family_names();  // in registration order
// The family that reads Hugging Face's model_type `type`; InputError naming `source` and the types
// known when none does.
const ModelFamily& model_family_for_hf(std::string_view type, const std::string& source);

// The spec's family's, for callers that hold a spec.
ParamTable build_param_table(const ModelSpec& spec);
// The whole unit, or (the second) its elements [begin, end) only.
void init_unit_params(const ModelSpec& spec, const ParamTable& table, int unit, std::uint64_t seed, float* unit_data);
void init_unit_params(const ModelSpec& spec, const ParamTable& table, int unit, std::uint64_t seed, float* unit_data,
                      std::int64_t begin, std::int64_t end);
std::unique_ptr<LanguageModel> make_model(const ModelSpec& spec, const ModelBuild& build, MemoryTracker& tracker,
                                          const ExecContext& ctx);
ModelFootprint predict_footprint(const ModelSpec& spec, const ModelBuild& build, DType param_dtype, Device device);
std::int64_t cuda_call_scratch_bytes(const ModelSpec& spec, const ModelBuild& build, DType param_dtype,
                                     const KernelChoices& choices);
StepSchedule step_schedule(const ModelSpec& spec, const CheckpointPolicy& checkpointing);
// One line each for the run's printout: the model ("gpt2: 12 layers, 12 heads, 768 wide, ...") and
// the attention it will run with `build` on `device` under the config's `kernels` choice.
std::string describe_model(const ModelSpec& spec);
std::string describe_attention(const ModelSpec& spec, const ModelBuild& build, Device device, AttentionKernels kernels);

}  // namespace zt
