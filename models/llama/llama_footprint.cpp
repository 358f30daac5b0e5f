// Llama's side of the memory prediction: the formulas LlamaModel allocates by.
#include "models/llama/llama_footprint.h"

#include <algorithm>

#include "models/llama/llama_block.h"
#include "models/llama/llama_model.h"
#include "models/llama/llama_params.h"

namespace zt::llama {

ModelFootprint predict_footprint(const LlamaConfig& c, int micro_batch, int seq_len) {
  constexpr std::int64_t kF32 = 4;
  const LayerDims d = layer_dims(c, micro_batch, seq_len);
  const std::int64_t BT = d.BT(), BTC = BT * d.C, Vp = c.padded_vocab_size();
  ModelFootprint f;
  f.activation_bytes = kF32 * 2 * BT + kF32 * (c.n_layer + 1) * BTC + c.n_layer * LayerActivations::bytes(d) +
                       kF32 * BT * (d.C + 2 + Vp);
  const std::int64_t scratch_width = std::max({d.C, d.qkv_width(), 2 * d.I});
  f.workspace_bytes = kF32 * build_param_table(c).max_unit_numel() + kF32 * BTC + 2 * kF32 * BT * scratch_width;
  return f;
}

StepSchedule step_schedule(const LlamaConfig& c) { return {forward_schedule(c), backward_schedule(c)}; }

}  // namespace zt::llama
