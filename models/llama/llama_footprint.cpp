// Llama's side of the memory prediction: the formulas LlamaModel allocates by.
#include "models/llama/llama_footprint.h"

#include <algorithm>

#include "models/llama/llama_block.h"
#include "models/llama/llama_model.h"
#include "models/llama/llama_params.h"

namespace zt::llama {

ModelFootprint predict_footprint(const LlamaConfig& c, int micro_batch, int seq_len,
                                 const CheckpointPolicy& checkpointing) {
  constexpr std::int64_t kF32 = 4;
  const LayerDims d = layer_dims(c, micro_batch, seq_len);
  const std::int64_t BT = d.BT(), BTC = BT * d.C, Vp = c.padded_vocab_size();
  const std::int64_t layer = LayerActivations::bytes(d), head = kF32 * BT * (d.C + 2 + Vp);
  // LlamaModel's allocations in order: the forward's layers (a checkpointed one freed at once),
  // the head (freed as backward starts), then each checkpointed layer recomputed in backward.
  std::int64_t live = kF32 * 2 * BT + kF32 * (c.n_layer + 1) * BTC, peak = live;
  auto alloc = [&](std::int64_t n) {
    live += n;
    peak = std::max(peak, live);
  };
  for (int l = 0; l < c.n_layer; ++l) {
    alloc(layer);
    if (checkpointing.is_checkpointed(l)) live -= layer;
  }
  alloc(head);
  live -= head;
  for (int l = c.n_layer - 1; l >= 0; --l) {
    if (checkpointing.is_checkpointed(l)) alloc(layer);
    live -= layer;
  }
  ModelFootprint f;
  f.activation_bytes = peak;
  const std::int64_t scratch_width = std::max({d.C, d.qkv_width(), 2 * d.I});
  f.workspace_bytes = kF32 * build_param_table(c).max_unit_numel() + kF32 * BTC + 2 * kF32 * BT * scratch_width;
  return f;
}

StepSchedule step_schedule(const LlamaConfig& c) { return {forward_schedule(c), backward_schedule(c)}; }

}  // namespace zt::llama
