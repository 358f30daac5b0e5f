// GPT-2's parameter table (Hugging Face GPT2LMHeadModel names and layouts, linear weights stored
// [in, out] as HF's Conv1D), the named views of one unit's flat buffer, and initialisation.
// Units: 0 = embeddings (wte [Vp, C], wpe [block_size, C]), 1..L = blocks h.0..h.{L-1},
// L+1 = final LayerNorm. The LM head is tied to wte and owns no parameters.
#pragma once

#include <cstdint>

#include "engine/core/param_table.h"
#include "models/gpt/gpt_config.h"

namespace zt::gpt {

ParamTable build_param_table(const GptConfig& config);

constexpr int embedding_unit() { return 0; }
inline int block_unit(int layer) { return 1 + layer; }
inline int final_unit(const GptConfig& c) { return c.n_layer + 1; }

struct EmbeddingParams {
  TensorView wte;  // [Vp, C], padded rows zero
  TensorView wpe;  // [block_size, C]
};

struct BlockParams {
  TensorView ln_1_w, ln_1_b;            // [C]
  TensorView c_attn_w, c_attn_b;        // [C, 3C], [3C]
  TensorView attn_proj_w, attn_proj_b;  // [C, C], [C]
  TensorView ln_2_w, ln_2_b;            // [C]
  TensorView c_fc_w, c_fc_b;            // [C, 4C], [4C]
  TensorView mlp_proj_w, mlp_proj_b;    // [4C, C], [C]
};

struct FinalParams {
  TensorView ln_f_w, ln_f_b;  // [C]
};

// Named views into a unit's flat buffer (any dtype: params, grads, fp32 copies alike).
EmbeddingParams embedding_views(const ParamTable& t, const TensorView& unit);
BlockParams block_views(const ParamTable& t, int layer, const TensorView& unit);
FinalParams final_views(const ParamTable& t, const GptConfig& c, const TensorView& unit);

// GPT-2 initialisation into an fp32 unit buffer: N(0, 0.02) weights, residual projections
// (attn.c_proj, mlp.c_proj) N(0, 0.02/sqrt(2 n_layer)), zero biases, unit LN gains, zero padded
// vocabulary rows. Each element is drawn from Philox at (seed, parameter index, element index),
// so a unit's values do not depend on which other units exist on this rank.
void init_unit_params(const ParamTable& t, const GptConfig& c, int unit, std::uint64_t seed, float* unit_data);

}  // namespace zt::gpt
