// The model a run trains, whichever its family: `model.arch` = gpt2 (models/gpt) or llama
// (models/llama). This is the one place that picks a family's parameter table, initialisation,
// model class, memory footprint and step schedule; the engine (trainer, checkpoints, memory
// prediction, commands) reaches every model through it and through LanguageModel, and
// engine/distributed/sharding knows no model at all.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "engine/base/core/dtype.h"
#include "engine/base/core/param_table.h"
#include "engine/distributed/sharding/memory_model.h"
#include "engine/distributed/sharding/schedule_replay.h"
#include "kernels/exec_context.h"
#include "models/checkpoint_policy.h"
#include "models/gpt/gpt_config.h"
#include "models/gpt/gpt_params.h"
#include "models/language_model.h"
#include "models/llama/llama_config.h"

namespace zt {

enum class ModelArch { kGpt2, kLlama };

// "gpt2" or "llama": the config's and the checkpoint manifest's spelling.
std::string_view model_arch_name(ModelArch arch);

// A model's family and hyper-parameters, and how its parameters are cut into units.
struct ModelSpec {
  ModelArch arch = ModelArch::kGpt2;
  gpt::GptConfig gpt;        // arch gpt2
  UnitLayout layout;         // train.head_chunks and train.block_units (every arch)
  llama::LlamaConfig llama;  // arch llama

  int n_layer() const { return arch == ModelArch::kLlama ? llama.n_layer : gpt.n_layer; }
  int vocab_size() const { return arch == ModelArch::kLlama ? llama.vocab_size : gpt.vocab_size; }
  int block_size() const { return arch == ModelArch::kLlama ? llama.block_size : gpt.block_size; }
  int padded_vocab_size() const { return (vocab_size() + 63) / 64 * 64; }
};

// Copies the keys every family has (n_layer, n_head, n_embd, block_size, vocab_size), which a run
// config and a checkpoint manifest read once, into a Llama config.
void copy_shared_keys(const gpt::GptConfig& from, llama::LlamaConfig& to);

// How one model instance is built: its batch shape and what its run asks of it.
struct ModelBuild {
  int batch = 1;
  int seq_len = 1;
  CheckpointPolicy checkpointing;
  float dropout = 0.0f;    // GPT only (Llama has none)
  std::uint64_t seed = 0;  // keys the dropout masks
  DType activations = DType::kF32;
};

// A model for sampling: one sequence of seq_len tokens, nothing checkpointed, no dropout.
inline ModelBuild sampling_build(int seq_len) {
  ModelBuild b;
  b.seq_len = seq_len;
  return b;
}

ParamTable build_param_table(const ModelSpec& spec);

// The family's initialisation of `unit` (of build_param_table(spec)) into an fp32 buffer: the same
// values on every rank and at every rank count.
void init_unit_params(const ModelSpec& spec, const ParamTable& table, int unit, std::uint64_t seed, float* unit_data);

std::unique_ptr<LanguageModel> make_model(const ModelSpec& spec, const ModelBuild& build, MemoryTracker& tracker,
                                          const ExecContext& ctx);

// What make_model's model allocates itself (activations and workspace) with parameters of
// `param_dtype` on `device`, and its training step's store calls: the model's side of the memory
// prediction (engine/distributed/sharding/memory_model.h).
ModelFootprint predict_footprint(const ModelSpec& spec, const ModelBuild& build, DType param_dtype, Device device);
StepSchedule step_schedule(const ModelSpec& spec, const CheckpointPolicy& checkpointing);

// One line each for the run's printout: the model ("gpt2: 12 layers, 12 heads, 768 wide, ...") and
// the attention it will run with `build` on `device` under the config's `kernels` choice.
std::string describe_model(const ModelSpec& spec);
std::string describe_attention(const ModelSpec& spec, const ModelBuild& build, Device device, AttentionKernels kernels);

}  // namespace zt
