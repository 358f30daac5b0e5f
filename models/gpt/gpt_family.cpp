// GPT-2's answers to the model-family interface (see models/model_family.h): nanoGPT's keys, the
// learned-position, pre-LN model of models/gpt, and Hugging Face's GPT2LMHeadModel config.
#include "models/gpt/gpt_family.h"

#include <fmt/format.h>

#include <cstdint>

#include "models/gpt/activations.h"
#include "models/gpt/gpt_footprint.h"
#include "models/gpt/gpt_model.h"
#include "models/gpt/gpt_params.h"
#include "models/hf_config_reader.h"

namespace zt::gpt {

GptConfig gpt_config(const ModelConfig& model) {
  GptConfig c;
  copy_shared_keys(model, c);
  return c;
}

namespace {

class GptFamily final : public ModelFamily {
 public:
  std::string_view name() const override { return "gpt2"; }
  std::string_view display_name() const override { return "GPT-2"; }
  std::vector<std::string> own_keys() const override { return {}; }
  bool has_dropout() const override { return true; }
  bool has_gelu_mlp() const override { return true; }
  int mlp_width(const ModelConfig& model) const override { return 4 * model.n_embd; }
  double matmul_weights_per_token(const ModelConfig& m) const override {
    const double C = m.n_embd;  // a block: qkv 3 C^2, projection C^2, MLP 8 C^2
    return 12.0 * m.n_layer * C * C + static_cast<double>(m.padded_vocab_size()) * C;
  }
  void read_keys(ConfigReader& /*section*/, ModelConfig& /*model*/,
                 std::vector<std::string>& /*derived*/) const override {}
  std::string config_error(const ModelConfig& /*model*/) const override { return ""; }

  ParamTable param_table(const ModelSpec& spec) const override {
    return build_param_table(gpt_config(spec.model), spec.layout);
  }
  void init_unit_params(const ModelSpec& spec, const ParamTable& table, int unit, std::uint64_t seed, float* unit_data,
                        std::int64_t begin, std::int64_t end) const override {
    gpt::init_unit_params(table, gpt_config(spec.model), unit, seed, unit_data, begin, end);
  }
  std::unique_ptr<LanguageModel> make_model(const ModelSpec& spec, const ModelBuild& build, MemoryTracker& tracker,
                                            const ExecContext& ctx) const override {
    return std::make_unique<GptModel>(gpt_config(spec.model), build.batch, build.seq_len, build.checkpointing, tracker,
                                      ctx, build.dropout, build.seed, build.activations, spec.layout, build.backward);
  }
  ModelFootprint footprint(const ModelSpec& spec, const ModelBuild& build, DType param_dtype,
                           Device device) const override {
    return predict_footprint(gpt_config(spec.model), build.batch, build.seq_len, build.checkpointing, param_dtype,
                             device, build.activations, spec.layout, build.backward);
  }
  std::int64_t cuda_call_scratch_bytes(const ModelSpec& spec, const ModelBuild& build, DType param_dtype,
                                       const KernelChoices& choices) const override {
    return gpt::cuda_call_scratch_bytes(gpt_config(spec.model), build, spec.layout, param_dtype, choices);
  }
  StepSchedule step_schedule(const ModelSpec& spec, const CheckpointPolicy& checkpointing) const override {
    return gpt::step_schedule(gpt_config(spec.model), spec.layout, checkpointing);
  }
  std::int64_t kv_cache_row_width(const ModelSpec& spec) const override {
    return gpt_config(spec.model).qkv_width();  // GptModel::kv_cache_shape's row
  }

  std::string describe(const ModelSpec& spec, double params_millions) const override {
    const GptConfig c = gpt_config(spec.model);
    return fmt::format("gpt2: {} layers, {} heads, {} wide, context {}, vocab {} (padded {}): {:.2f}M parameters",
                       c.n_layer, c.n_head, c.n_embd, c.block_size, c.vocab_size, c.padded_vocab_size(),
                       params_millions);
  }
  std::string describe_attention(const ModelSpec& spec, const ModelBuild& build, Device device,
                                 AttentionKernels kernels) const override {
    const GptConfig c = gpt_config(spec.model);
    const ActivationDims dims =
        activation_dims(c, build.batch, build.seq_len, device, build.activations, spec.layout.head_chunks);
    return gpt::describe_attention(c, dims, device, kernels, build.dropout > 0.0f);
  }
  nlohmann::ordered_json hf_config(const ModelSpec& spec, double dropout, DType dtype) const override {
    const GptConfig c = gpt_config(spec.model);
    nlohmann::ordered_json hf = {{"architectures", {"GPT2LMHeadModel"}},
                                 {"model_type", "gpt2"},
                                 {"vocab_size", c.vocab_size},
                                 {"n_positions", c.block_size},
                                 {"n_ctx", c.block_size},
                                 {"n_embd", c.n_embd},
                                 {"n_layer", c.n_layer},
                                 {"n_head", c.n_head},
                                 {"n_inner", nullptr},
                                 {"activation_function", "gelu_new"},
                                 {"resid_pdrop", dropout},
                                 {"embd_pdrop", dropout},
                                 {"attn_pdrop", dropout},
                                 {"layer_norm_epsilon", 1e-5},
                                 {"initializer_range", 0.02},
                                 {"scale_attn_weights", true},
                                 {"tie_word_embeddings", true},
                                 {"torch_dtype", dtype == DType::kBF16 ? "bfloat16" : "float32"}};
    // transformers' GPT2Config defaults both to GPT-2's <|endoftext|>, 50256: in any vocabulary but
    // GPT-2's own an arbitrary token (or none), at which generation would stop and pad. None
    // instead, unless the run's tokenizer names them (export_hf sets those after).
    if (c.vocab_size != 50257) hf["bos_token_id"] = hf["eos_token_id"] = nullptr;
    return hf;
  }
  bool llmc_format() const override { return true; }
  std::string_view hf_model_type() const override { return "gpt2"; }
  nlohmann::json model_keys_from_hf(const nlohmann::json& hf, const std::string& source) const override {
    const HfConfigReader r(hf, source);
    // Shape keys a config leaves out take GPT2Config's defaults, as from_pretrained reads them (GPT-2 small's).
    const int C = r.integer_or("n_embd", 768);
    // What models/gpt computes: GELU's tanh form, a 4C MLP, LayerNorm's 1e-5, the tied head.
    const std::string act = r.string_or("activation_function", "gelu_new");
    // transformers' four names of GELU's tanh form (its constants written out or computed).
    if (act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "gelu_fast" && act != "gelu_accurate")
      r.refuse("activation_function", "zerotrain's GPT-2 has tanh GELU");
    // In 64 bits: an n_embd past 2^29 (refused later, by the model's own range) overflowed 4 C.
    if (r.has("n_inner") && r.integer_or("n_inner", 0) != 4 * std::int64_t{C}) {
      r.refuse("n_inner", "zerotrain's GPT-2 MLP is 4 x n_embd wide");
    }
    // As a float: a config saved from an fp32 value writes 1e-5 as 9.999999747378752e-06.
    if (static_cast<float>(r.number_or("layer_norm_epsilon", 1e-5)) != 1e-5f)
      r.refuse("layer_norm_epsilon", "zerotrain's LayerNorm uses 1e-5");
    if (!r.boolean_or("tie_word_embeddings", true)) r.refuse("tie_word_embeddings", "zerotrain's GPT-2 ties its head");
    if (r.boolean_or("scale_attn_by_inverse_layer_idx", false)) {
      r.refuse("scale_attn_by_inverse_layer_idx", "not computed by zerotrain's GPT-2");
    }
    if (!r.boolean_or("scale_attn_weights", true)) {
      r.refuse("scale_attn_weights", "zerotrain's GPT-2 scales attention scores by 1 / sqrt(head size)");
    }
    return {{"arch", "gpt2"},
            {"n_layer", r.integer_or("n_layer", 12)},
            {"n_head", r.integer_or("n_head", 12)},
            {"n_embd", C},
            {"block_size", r.integer_or("n_positions", 1024)},
            {"vocab_size", r.integer_or("vocab_size", 50257)}};
  }
};

}  // namespace

std::unique_ptr<const ModelFamily> make_family() { return std::make_unique<GptFamily>(); }

}  // namespace zt::gpt
