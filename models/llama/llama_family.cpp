// The Llama family's answers to the model-family interface (see models/model_family.h): its keys
// (grouped-query heads, SwiGLU width, RoPE base, RMSNorm epsilon, tied head), what a Llama run
// cannot do yet, the model of models/llama and Hugging Face's LlamaForCausalLM config.
#include "models/llama/llama_family.h"

#include <fmt/format.h>

#include "engine/base/core/float_text.h"
#include "kernels/contracts/operand_checks.h"  // flash_attention_shape_supported
#include "kernels/ops.h"
#include "models/hf_config_reader.h"
#include "models/llama/llama_block.h"
#include "models/llama/llama_footprint.h"
#include "models/llama/llama_model.h"
#include "models/llama/llama_params.h"
#include "models/llama/llama_rope_scaling.h"

namespace zt::llama {

namespace {

// model.n_kv_head's and model.intermediate_size's ranges (0: Llama's rule), a config's and a manifest's.
constexpr int kMaxKvHeads = 1024, kMaxIntermediateSize = 1 << 24;

}  // namespace

LlamaConfig llama_config(const ModelConfig& model) {
  LlamaConfig c;
  copy_shared_keys(model, c);
  const nlohmann::json& k = model.family_keys;
  // Checked as read: a manifest's keys come here unchecked (read_keys checks a config's ranges).
  c.n_kv_head = json_int_key(k, "n_kv_head", 1, kMaxKvHeads);
  c.intermediate_size = json_int_key(k, "intermediate_size", 0, kMaxIntermediateSize);
  c.rope_theta = json_fp32_key(k, "rope_theta");
  if (k.contains("rope_scaling")) c.rope_scaling = rope_scaling_of(k.at("rope_scaling"));
  c.norm_eps = json_fp32_key(k, "norm_eps");
  c.tie_embeddings = k.at("tie_embeddings").get<bool>();
  return c;
}

namespace {

// model.norm_eps's range, the config's and a Hugging Face config's rms_norm_eps alike.
constexpr double kMinNormEps = 1e-12, kMaxNormEps = 1.0;

// The family keys as config.json and the manifest write them: the SwiGLU width as a number (not 0
// for Llama's rule), floats as their shortest decimals, rope_scaling only where there is one (so a
// manifest from before it existed reads as the same model).
nlohmann::json family_keys_of(const LlamaConfig& c) {
  nlohmann::json keys = {{"n_kv_head", c.n_kv_head},
                         {"intermediate_size", c.hidden()},
                         {"rope_theta", shortest_decimal(c.rope_theta)},
                         {"norm_eps", shortest_decimal(c.norm_eps)},
                         {"tie_embeddings", c.tie_embeddings}};
  if (c.rope_scaling.type != RopeScalingType::kNone) keys["rope_scaling"] = rope_scaling_json(c.rope_scaling);
  return keys;
}

class LlamaFamily final : public ModelFamily {
 public:
  std::string_view name() const override { return "llama"; }
  std::string_view display_name() const override { return "Llama"; }
  std::vector<std::string> own_keys() const override {
    return {"n_kv_head", "intermediate_size", "rope_theta", "rope_scaling", "norm_eps", "tie_embeddings"};
  }
  bool has_dropout() const override { return false; }
  bool has_gelu_mlp() const override { return false; }
  int mlp_width(const ModelConfig& model) const override { return llama_config(model).hidden(); }
  double matmul_weights_per_token(const ModelConfig& model) const override {
    const LlamaConfig l = llama_config(model);
    const double C = l.n_embd, kv = static_cast<double>(l.n_kv_head) * l.head_size();
    // A block: q and o C^2 each, k and v C x kv each, SwiGLU's gate, up and down C x hidden each.
    const double block = 2.0 * C * C + 2.0 * C * kv + 3.0 * C * l.hidden();
    return l.n_layer * block + static_cast<double>(l.padded_vocab_size()) * C;
  }

  void read_keys(ConfigReader& r, ModelConfig& model, std::vector<std::string>& derived) const override {
    LlamaConfig l;
    copy_shared_keys(model, l);
    l.n_kv_head = r.get_int("n_kv_head", model.n_head, 1, kMaxKvHeads);
    l.intermediate_size = r.get_int("intermediate_size", 0, 0, kMaxIntermediateSize);
    l.rope_theta = static_cast<float>(r.get_double("rope_theta", 10000.0, kMinRopeTheta, kMaxRopeTheta));
    l.norm_eps = static_cast<float>(r.get_double("norm_eps", 1e-5, kMinNormEps, kMaxNormEps));
    l.tie_embeddings = r.get_bool("tie_embeddings", false);
    l.rope_scaling = read_rope_scaling(r);
    const std::string error = llama_config_error(l, "model.");
    if (!error.empty()) {  // the file, and each --set of a key the checks read
      const std::string n_head = r.dotted("n_head"), n_kv_head = r.dotted("n_kv_head"), n_embd = r.dotted("n_embd");
      throw_input_error("config error in {}: {}", r.sources_of({n_head, n_kv_head, n_embd}), error);
    }
    model.derived_family_keys.clear();
    if (!r.has("n_kv_head")) {
      derived.push_back(
          fmt::format("model.n_kv_head = {} (model.n_head: every head its own keys and values)", l.n_kv_head));
      model.derived_family_keys.push_back("n_kv_head");
    }
    if (l.intermediate_size == 0) {  // left out, or 0 given for the rule
      derived.push_back(
          fmt::format("model.intermediate_size = {} (Llama's rule: 8/3 n_embd rounded up to 256)", l.hidden()));
      model.derived_family_keys.push_back("intermediate_size");
    }
    model.family_keys = family_keys_of(l);
  }
  std::string config_error(const ModelConfig& model) const override { return llama_config_error(llama_config(model)); }
  // Grouped-query heads on CUDA run on cuDNN or the flash kernels (the cuBLASLt attention is
  // multi-head), which must serve the shape where cuDNN does not.
  std::string refuse_run(const ModelConfig& model, const RunSettings& run) const override {
    const LlamaConfig l = llama_config(model);
    if (run.device == Device::kCUDA && l.n_kv_head != l.n_head &&
        !flash_attention_shape_supported(run.micro_batch, l.n_head, l.head_size())) {
      return fmt::format(
          "grouped-query heads (model.n_kv_head = {} < model.n_head = {}) on device = \"cuda\" run on the flash "
          "kernels, which need a head size of 8, 16, 32, 64 or 128 (here {}) and train.micro_batch x model.n_head <= "
          "65535 (here {} x {})",
          l.n_kv_head, l.n_head, l.head_size(), run.micro_batch, l.n_head);
    }
    return "";
  }

  ParamTable param_table(const ModelSpec& spec) const override {
    return build_param_table(llama_config(spec.model), spec.layout);
  }
  void init_unit_params(const ModelSpec& spec, const ParamTable& table, int unit, std::uint64_t seed, float* unit_data,
                        std::int64_t begin, std::int64_t end) const override {
    llama::init_unit_params(table, llama_config(spec.model), unit, seed, unit_data, begin, end);
  }
  std::unique_ptr<LanguageModel> make_model(const ModelSpec& spec, const ModelBuild& build, MemoryTracker& tracker,
                                            const ExecContext& ctx) const override {
    return std::make_unique<LlamaModel>(llama_config(spec.model), build.batch, build.seq_len, build.checkpointing,
                                        tracker, ctx, build.activations, spec.layout, build.backward);
  }
  ModelFootprint footprint(const ModelSpec& spec, const ModelBuild& build, DType param_dtype,
                           Device device) const override {
    return predict_footprint(llama_config(spec.model), build.batch, build.seq_len, build.checkpointing, param_dtype,
                             build.activations, device, spec.layout, build.backward);
  }
  std::int64_t cuda_call_scratch_bytes(const ModelSpec& spec, const ModelBuild& build, DType param_dtype,
                                       const KernelChoices& choices) const override {
    return llama::cuda_call_scratch_bytes(llama_config(spec.model), build, spec.layout, param_dtype, choices);
  }
  StepSchedule step_schedule(const ModelSpec& spec, const CheckpointPolicy& checkpointing) const override {
    return llama::step_schedule(llama_config(spec.model), spec.layout, checkpointing);
  }
  std::int64_t kv_cache_row_width(const ModelSpec& spec) const override {
    return llama_config(spec.model).qkv_width();  // LlamaModel::kv_cache_shape's row
  }

  std::string describe(const ModelSpec& spec, double params_millions) const override {
    const LlamaConfig c = llama_config(spec.model);
    const RopeScaling& s = c.rope_scaling;
    const std::string scaled = s.type == RopeScalingType::kNone     ? ""
                               : s.type == RopeScalingType::kLinear ? fmt::format(" (RoPE linear-scaled x{})", s.factor)
                                                                    : fmt::format(" (RoPE llama3-scaled x{} from {})",
                                                                                  s.factor, s.original_max_position);
    return fmt::format(
        "llama: {} layers, {} query heads over {} key/value heads, {} wide, SwiGLU {}, context {}{}, vocab {} "
        "(padded {}), {} head: {:.2f}M parameters",
        c.n_layer, c.n_head, c.n_kv_head, c.n_embd, c.hidden(), c.block_size, scaled, c.vocab_size,
        c.padded_vocab_size(), c.tie_embeddings ? "tied" : "untied", params_millions);
  }
  std::string describe_attention(const ModelSpec& spec, const ModelBuild& build, Device device,
                                 AttentionKernels kernels) const override {
    const LlamaConfig c = llama_config(spec.model);
    const std::string heads = fmt::format("{} query head(s) per key/value head", c.n_head / c.n_kv_head);
    if (!layer_dims(c, build.batch, build.seq_len, build.activations, device).flash_attention) {
      return fmt::format("materialised (T x T probabilities kept), {}", heads);
    }
    if (ops::cudnn_attention_refuses(device, kernels, build.activations, c.head_size(), false).empty()) {
      return "cuDNN fused attention (no T x T probabilities kept)";
    }
    return fmt::format(
        "flash kernels on {} (no T x T probabilities kept), {}",
        ops::flash_attention_on_tensor_cores(device, build.activations, c.head_size()) ? "tensor cores" : "CUDA cores",
        heads);
  }
  nlohmann::ordered_json hf_config(const ModelSpec& spec, double /*dropout*/, DType dtype) const override {
    const LlamaConfig c = llama_config(spec.model);
    return {{"architectures", {"LlamaForCausalLM"}},
            {"model_type", "llama"},
            {"vocab_size", c.vocab_size},
            {"hidden_size", c.n_embd},
            {"intermediate_size", c.hidden()},
            {"num_hidden_layers", c.n_layer},
            {"num_attention_heads", c.n_head},
            {"num_key_value_heads", c.n_kv_head},
            {"head_dim", c.head_size()},
            {"max_position_embeddings", c.block_size},
            {"hidden_act", "silu"},
            {"rms_norm_eps", shortest_decimal(c.norm_eps)},
            {"rope_theta", shortest_decimal(c.rope_theta)},
            {"rope_scaling", rope_scaling_hf_json(c.rope_scaling)},
            {"attention_bias", false},
            {"mlp_bias", false},
            {"attention_dropout", 0.0},
            {"initializer_range", 0.02},
            {"tie_word_embeddings", c.tie_embeddings},
            {"torch_dtype", dtype == DType::kBF16 ? "bfloat16" : "float32"},
            // transformers' LlamaConfig defaults them to 1 and 2, Llama 2's <s> and </s>: in any
            // other vocabulary arbitrary tokens, at which generation would stop. None, unless the
            // run's tokenizer (or train.init_from's config) names them (export_hf sets those after).
            {"bos_token_id", nullptr},
            {"eos_token_id", nullptr}};
  }
  std::string_view hf_model_type() const override { return "llama"; }
  bool same_model_key(const std::string& key, const nlohmann::json& given,
                      const nlohmann::json& pretrained) const override {
    // rope_scaling's type under transformers' older key "type" (the folder's own config.json, and
    // this family's export, write a linear one so), which transformers takes over "rope_type".
    if (key == "rope_scaling" && given.is_object() && given.contains("type")) {
      nlohmann::json renamed = given;
      renamed["rope_type"] = renamed["type"];
      renamed.erase("type");
      return ModelFamily::same_model_key(key, renamed, pretrained);
    }
    return ModelFamily::same_model_key(key, given, pretrained);
  }
  nlohmann::json model_keys_from_hf(const nlohmann::json& hf, const std::string& source) const override {
    const HfConfigReader r(hf, source);
    // Shape keys a config leaves out take LlamaConfig's defaults, as from_pretrained reads them.
    const int C = r.integer_or("hidden_size", 4096), heads = r.integer_or("num_attention_heads", 32);
    // What models/llama computes: SiLU-gated MLP, rotary angles unscaled or scaled as rope_scaling
    // says (linear, llama3), no biases, C / heads wide heads.
    // ("swish" is transformers' other name of SiLU.)
    const std::string act = r.string_or("hidden_act", "silu");
    if (act != "silu" && act != "swish") r.refuse("hidden_act", "zerotrain's Llama MLP is SwiGLU (silu)");
    // attention_dropout is its training's, as GPT-2's resid_pdrop (docs/config.md, train.init_from):
    // no forward that scores or samples applies it, and zerotrain's Llama trains without dropout.
    const int kv_heads = r.integer_or("num_key_value_heads", heads);
    if (kv_heads < 1 || heads % kv_heads != 0) {
      r.refuse("num_key_value_heads", "grouped-query attention needs num_attention_heads a multiple of it");
    }
    if (r.boolean_or("attention_bias", false)) r.refuse("attention_bias", "zerotrain's Llama has no attention biases");
    if (r.boolean_or("mlp_bias", false)) r.refuse("mlp_bias", "zerotrain's Llama has no MLP biases");
    // The key a width that heads do not divide is given by (head_dim refused where it is absent).
    if (C % heads != 0) r.refuse("hidden_size", "zerotrain's Llama needs num_attention_heads to divide it");
    if (r.integer_or("head_dim", C / heads) != C / heads) {
      r.refuse("head_dim", "zerotrain's Llama heads are hidden_size / num_attention_heads wide");
    }
    // transformers before 4.45 computes the products in pretraining_tp slices of width / tp, and
    // drops the columns past tp of them where tp does not divide a width; where it divides them
    // all, the model is the one computed whole.
    const int tp = r.integer_or("pretraining_tp", 1);
    const int hidden = r.integer_or("intermediate_size", 11008), vocab = r.integer_or("vocab_size", 32000);
    if (tp < 1 ||
        (tp > 1 && (C % tp != 0 || hidden % tp != 0 || vocab % tp != 0 || (kv_heads * (C / heads)) % tp != 0))) {
      r.refuse("pretraining_tp",
               "transformers before 4.45 slices the products into that many parts and drops what does not divide "
               "(hidden_size, intermediate_size, vocab_size, the key/value width); set it to 1");
    }
    const double eps = r.number_or("rms_norm_eps", 1e-6);
    if (!(eps >= kMinNormEps && eps <= kMaxNormEps)) {
      r.refuse("rms_norm_eps", fmt::format("must be in [{:g}, {:g}]", kMinNormEps, kMaxNormEps));
    }
    return {{"arch", "llama"},
            {"n_layer", r.integer_or("num_hidden_layers", 32)},
            {"n_head", heads},
            {"n_embd", C},
            {"block_size", r.integer_or("max_position_embeddings", 2048)},
            {"vocab_size", vocab},
            {"n_kv_head", kv_heads},
            {"intermediate_size", hidden},
            {"rope_theta", rope_theta_from_hf(hf, source)},
            {"rope_scaling", rope_scaling_from_hf(hf, source)},  // null: none (a config that sets one differs)
            {"norm_eps", eps},
            {"tie_embeddings", r.boolean_or("tie_word_embeddings", false)}};
  }
};

}  // namespace

std::unique_ptr<const ModelFamily> make_family() { return std::make_unique<LlamaFamily>(); }

}  // namespace zt::llama
