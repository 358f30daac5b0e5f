// A Llama decoder's parameter table under Hugging Face LlamaForCausalLM's names and shapes (linear
// weights stored [out, in] as nn.Linear does, read with WeightLayout::kOutIn), the named views of
// one unit's flat buffer, and initialisation. Units: 0 = embeddings (embed_tokens [Vp, C]),
// 1..L = layers (input_layernorm, q|k|v projections stacked so one matmul makes the fused q|k|v
// row, o_proj, post_attention_layernorm, gate|up stacked for the fused SwiGLU input, down_proj),
// L+1 = final (norm, and lm_head [Vp, C] unless the embeddings are tied). With the head in
// vocabulary chunks (train.head_chunks > 1) the head's table is split by rows, one unit per chunk,
// as GPT-2's wte is (models/gpt/gpt_params.h): tied, embed_tokens' chunk 0 stays in unit 0 and
// chunks 1.. follow the final unit ("embed_tokens.1", ...); untied, the final unit keeps the norm
// only and every chunk of lm_head is a unit after it ("lm_head.0", ...). With layers in two units
// (train.block_units = 2) unit 1 + l holds layer l's attention half (input_layernorm, q|k|v,
// o_proj) and its MLP half (post_attention_layernorm, gate|up, down_proj) follows the chunk units
// ("layers.l.mlp"), as GPT-2's split blocks do.
#pragma once

#include <cstdint>

#include "engine/base/core/param_table.h"
#include "models/llama/llama_config.h"
#include "models/unit_layout.h"

namespace zt::llama {

ParamTable build_param_table(const LlamaConfig& config, const UnitLayout& layout = {});

constexpr int embedding_unit() { return 0; }
inline int layer_unit(int layer) { return 1 + layer; }
inline int final_unit(const LlamaConfig& c) { return c.n_layer + 1; }
// With the head in more than one chunk, the unit holding chunk `chunk` of the head's table.
inline int head_chunk_unit(const LlamaConfig& c, int chunk) {
  return c.tie_embeddings ? (chunk == 0 ? embedding_unit() : final_unit(c) + chunk) : final_unit(c) + 1 + chunk;
}
// With layers in two units, the unit of layer `layer`'s MLP half (after the last chunk unit).
int mlp_unit(const LlamaConfig& c, const UnitLayout& layout, int layer);

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
  TensorView lm_head;  // [Vp, C]; empty when tied (the embeddings' table serves) or in chunk units
};

TensorView embedding_view(const ParamTable& t, const TensorView& unit);
// A whole layer's views of its unit (train.block_units = 1).
LayerParams layer_views(const ParamTable& t, int layer, const TensorView& unit);
// A split layer's views: the attention half's from attn_unit, the MLP half's from mlp_unit_view;
// either may be empty (its views are then left empty).
LayerParams layer_views(const ParamTable& t, const LlamaConfig& c, const UnitLayout& layout, int layer,
                        const TensorView& attn_unit, const TensorView& mlp_unit_view);
FinalParams final_views(const ParamTable& t, const LlamaConfig& c, const TensorView& unit);
// The rows of the head's table (embed_tokens tied, lm_head untied) that unit head_chunk_unit(c,
// chunk), given as `unit`, holds: [rows of the chunk, C].
TensorView head_chunk_view(const ParamTable& t, const LlamaConfig& c, int chunk, const TensorView& unit);

// Hugging Face's LlamaPreTrainedModel initialisation into an fp32 unit buffer: N(0, 0.02) for
// every projection, the embeddings and the LM head, ones for the RMSNorm weights, zero padded
// vocabulary rows; each element drawn from Philox at (seed, parameter index, element index) of the
// unchunked table, so head_chunks changes no value.
// With a range, only the unit's elements [begin, end) are written (end -1: to the unit's end), the
// draws on the OpenMP threads, as GPT-2's (gpt_params.h).
void init_unit_params(const ParamTable& t, const LlamaConfig& c, int unit, std::uint64_t seed, float* unit_data,
                      std::int64_t begin = 0, std::int64_t end = -1);

}  // namespace zt::llama
