// A Llama decoder's parameter table under Hugging Face LlamaForCausalLM's names and shapes (linear
// weights stored [out, in] as nn.Linear does, read with WeightLayout::kOutIn), the named views of
// one unit's flat buffer, and initialisation. Units: 0 = embeddings (embed_tokens [Vp, C]),
// 1..L = layers (input_layernorm, q|k|v projections stacked so one matmul makes the fused q|k|v
// row, o_proj, post_attention_layernorm, gate|up stacked for the fused SwiGLU input, down_proj),
// L+1 = final (norm, and lm_head [Vp, C] unless the embeddings are tied).
#pragma once

#include <cstdint>

#include "engine/core/param_table.h"
#include "models/llama/llama_config.h"

namespace zt::llama {

ParamTable build_param_table(const LlamaConfig& config);

constexpr int embedding_unit() { return 0; }
inline int layer_unit(int layer) { return 1 + layer; }
inline int final_unit(const LlamaConfig& c) { return c.n_layer + 1; }

struct LayerParams {
  TensorView input_norm;    // [C]
  TensorView qkv_proj;      // [(n_head + 2 n_kv_head) hs, C]: q_proj | k_proj | v_proj
  TensorView o_proj;        // [C, n_head hs]
  TensorView post_norm;     // [C]
  TensorView gate_up_proj;  // [2 I, C]: gate_proj | up_proj
  TensorView down_proj;     // [C, I]
};

struct FinalParams {
  TensorView norm;     // [C]
  TensorView lm_head;  // [Vp, C]; empty when tied (the embeddings' table serves)
};

TensorView embedding_view(const ParamTable& t, const TensorView& unit);
LayerParams layer_views(const ParamTable& t, int layer, const TensorView& unit);
FinalParams final_views(const ParamTable& t, const LlamaConfig& c, const TensorView& unit);

// Hugging Face's LlamaPreTrainedModel initialisation into an fp32 unit buffer: N(0, 0.02) for
// every projection, the embeddings and the LM head, ones for the RMSNorm weights, zero padded
// vocabulary rows; each element drawn from Philox at (seed, parameter index, element index).
void init_unit_params(const ParamTable& t, const LlamaConfig& c, int unit, std::uint64_t seed, float* unit_data);

}  // namespace zt::llama
