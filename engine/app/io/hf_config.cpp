// Hugging Face config.json for each family (see the header).
#include "engine/app/io/hf_config.h"

#include "engine/base/core/float_text.h"

namespace zt {

nlohmann::ordered_json hf_config_json(const ModelSpec& spec, double dropout, DType dtype) {
  const char* torch_dtype = dtype == DType::kBF16 ? "bfloat16" : "float32";
  if (spec.arch == ModelArch::kLlama) {
    const llama::LlamaConfig& c = spec.llama;
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
            {"rope_scaling", nullptr},
            {"attention_bias", false},
            {"mlp_bias", false},
            {"attention_dropout", 0.0},
            {"initializer_range", 0.02},
            {"tie_word_embeddings", c.tie_embeddings},
            {"torch_dtype", torch_dtype}};
  }
  const gpt::GptConfig& c = spec.gpt;
  return {{"architectures", {"GPT2LMHeadModel"}},
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
          {"torch_dtype", torch_dtype}};
}

}  // namespace zt
