// Each family's side of a model, picked by ModelSpec::arch (see the header).
#include "models/model_family.h"

#include <fmt/format.h>

#include "engine/base/core/check.h"
#include "kernels/ops.h"
#include "models/gpt/activations.h"
#include "models/gpt/gpt_footprint.h"
#include "models/gpt/gpt_model.h"
#include "models/llama/llama_block.h"
#include "models/llama/llama_footprint.h"
#include "models/llama/llama_model.h"
#include "models/llama/llama_params.h"

namespace zt {

std::string_view model_arch_name(ModelArch arch) { return arch == ModelArch::kLlama ? "llama" : "gpt2"; }

void copy_shared_keys(const gpt::GptConfig& from, llama::LlamaConfig& to) {
  to.n_layer = from.n_layer;
  to.n_head = from.n_head;
  to.n_embd = from.n_embd;
  to.block_size = from.block_size;
  to.vocab_size = from.vocab_size;
}

ParamTable build_param_table(const ModelSpec& spec) {
  if (spec.arch == ModelArch::kLlama) return llama::build_param_table(spec.llama, spec.layout);
  return gpt::build_param_table(spec.gpt, spec.layout);
}

void init_unit_params(const ModelSpec& spec, const ParamTable& table, int unit, std::uint64_t seed, float* unit_data) {
  if (spec.arch == ModelArch::kLlama) {
    llama::init_unit_params(table, spec.llama, unit, seed, unit_data);
  } else {
    gpt::init_unit_params(table, spec.gpt, unit, seed, unit_data);
  }
}

std::unique_ptr<LanguageModel> make_model(const ModelSpec& spec, const ModelBuild& build, MemoryTracker& tracker,
                                          const ExecContext& ctx) {
  if (spec.arch == ModelArch::kLlama) {
    ZT_CHECK(build.dropout == 0.0f, "a Llama model has no dropout");
    return std::make_unique<llama::LlamaModel>(spec.llama, build.batch, build.seq_len, build.checkpointing, tracker,
                                               ctx, build.activations, spec.layout);
  }
  return std::make_unique<gpt::GptModel>(spec.gpt, build.batch, build.seq_len, build.checkpointing, tracker, ctx,
                                         build.dropout, build.seed, build.activations, spec.layout);
}

ModelFootprint predict_footprint(const ModelSpec& spec, const ModelBuild& build, DType param_dtype, Device device) {
  if (spec.arch == ModelArch::kLlama) {
    return llama::predict_footprint(spec.llama, build.batch, build.seq_len, build.checkpointing, param_dtype,
                                    build.activations, device, spec.layout);
  }
  return gpt::predict_footprint(spec.gpt, build.batch, build.seq_len, build.checkpointing, param_dtype, device,
                                build.activations, spec.layout);
}

StepSchedule step_schedule(const ModelSpec& spec, const CheckpointPolicy& checkpointing) {
  if (spec.arch == ModelArch::kLlama) return llama::step_schedule(spec.llama, spec.layout, checkpointing);
  return gpt::step_schedule(spec.gpt, spec.layout, checkpointing);
}

std::string describe_model(const ModelSpec& spec) {
  const double params = static_cast<double>(build_param_table(spec).total_numel()) / 1e6;
  if (spec.arch == ModelArch::kLlama) {
    const llama::LlamaConfig& c = spec.llama;
    return fmt::format(
        "llama: {} layers, {} query heads over {} key/value heads, {} wide, SwiGLU {}, context {}, vocab {} (padded "
        "{}), {} head: {:.2f}M parameters",
        c.n_layer, c.n_head, c.n_kv_head, c.n_embd, c.hidden(), c.block_size, c.vocab_size, c.padded_vocab_size(),
        c.tie_embeddings ? "tied" : "untied", params);
  }
  const gpt::GptConfig& c = spec.gpt;
  return fmt::format("gpt2: {} layers, {} heads, {} wide, context {}, vocab {} (padded {}): {:.2f}M parameters",
                     c.n_layer, c.n_head, c.n_embd, c.block_size, c.vocab_size, c.padded_vocab_size(), params);
}

std::string describe_attention(const ModelSpec& spec, const ModelBuild& build, Device device,
                               AttentionKernels kernels) {
  if (spec.arch == ModelArch::kLlama) {
    const llama::LlamaConfig& c = spec.llama;
    const std::string heads = fmt::format("{} query head(s) per key/value head", c.n_head / c.n_kv_head);
    if (llama::layer_dims(c, build.batch, build.seq_len, build.activations, device).flash_attention) {
      if (ops::cudnn_attention_refuses(device, kernels, build.activations, c.head_size(), false).empty()) {
        return "cuDNN fused attention (no T x T probabilities kept)";
      }
      return fmt::format("flash kernels on {} (no T x T probabilities kept), {}",
                         ops::flash_attention_on_tensor_cores(device, build.activations, c.head_size()) ? "tensor cores"
                                                                                                        : "CUDA cores",
                         heads);
    }
    return fmt::format("materialised (T x T probabilities kept), {}", heads);
  }
  const gpt::ActivationDims dims =
      gpt::activation_dims(spec.gpt, build.batch, build.seq_len, device, build.activations, spec.layout.head_chunks);
  return gpt::describe_attention(spec.gpt, dims, device, kernels, build.dropout > 0.0f);
}

}  // namespace zt
