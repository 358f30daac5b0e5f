// GPT-2's parameter table (Hugging Face GPT2LMHeadModel names and layouts, linear weights stored
// [in, out] as HF's Conv1D), the named views of one unit's flat buffer, and initialisation.
// Units: 0 = embeddings (wte [Vp, C], wpe [block_size, C]), 1..L = blocks h.0..h.{L-1},
// L+1 = final LayerNorm. The LM head is tied to wte and owns no parameters. With the head in
// vocabulary chunks (train.head_chunks > 1), wte is split by rows across units, one per chunk, so
// that ZeRO gathers, frees and reduces it a chunk at a time: unit 0 keeps chunk 0's rows (and
// wpe), units L+2.. ("wte.1", ...) hold the others. With blocks in two units
// (train.block_units = 2) unit 1 + l holds block l's attention half (ln_1, attn.c_attn,
// attn.c_proj) and its MLP half (ln_2, mlp.c_fc, mlp.c_proj) follows the chunk units ("h.l.mlp").
#pragma once

#include <cstdint>

#include "engine/base/core/param_table.h"
#include "models/gpt/gpt_config.h"
#include "models/unit_layout.h"

namespace zt::gpt {

ParamTable build_param_table(const GptConfig& config, const UnitLayout& layout = {});

constexpr int embedding_unit() { return 0; }
// Block `layer`'s unit (with split blocks: its attention half).
inline int block_unit(int layer) { return 1 + layer; }
inline int final_unit(const GptConfig& c) { return c.n_layer + 1; }
// The unit holding wte's rows of head chunk `chunk`: the embeddings for chunk 0.
inline int wte_unit(const GptConfig& c, int chunk) { return chunk == 0 ? embedding_unit() : c.n_layer + 1 + chunk; }
// With split blocks, the unit of block `layer`'s MLP half.
inline int mlp_unit(const GptConfig& c, const UnitLayout& layout, int layer) {
  return c.n_layer + 1 + head_chunk_count(c, layout.head_chunks) + layer;
}

struct EmbeddingParams {
  TensorView wte;  // [Vp, C], padded rows zero (with wte in chunk units: chunk 0's rows)
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
// A split block's views from its two units (either may be empty: its half's views stay empty).
BlockParams block_views(const ParamTable& t, const GptConfig& c, const UnitLayout& layout, int layer,
                        const TensorView& attn_unit, const TensorView& mlp_unit_view);
FinalParams final_views(const ParamTable& t, const GptConfig& c, const TensorView& unit);
// wte's rows in unit wte_unit(c, chunk) (given as `unit`): [rows of the chunk, C].
TensorView wte_chunk_view(const ParamTable& t, const GptConfig& c, int chunk, const TensorView& unit);

// GPT-2 initialisation into an fp32 unit buffer: N(0, 0.02) weights, residual projections
// (attn.c_proj, mlp.c_proj) N(0, 0.02/sqrt(2 n_layer)), zero biases, unit LN gains, zero padded
// vocabulary rows. Each element is drawn from Philox at (seed, parameter index, element index) of
// the unchunked table (a chunk of wte draws its rows' elements of the whole tensor), so a unit's
// values do not depend on which other units exist on this rank, and head_chunks changes none.
// With a range, only the unit's elements [begin, end) are written (end -1: to the unit's end); the
// draws run on the OpenMP threads, each element alone, so the values do not depend on the range or
// the threads either.
void init_unit_params(const ParamTable& t, const GptConfig& c, int unit, std::uint64_t seed, float* unit_data,
                      std::int64_t begin = 0, std::int64_t end = -1);

}  // namespace zt::gpt
