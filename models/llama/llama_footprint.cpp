// Llama's side of the memory prediction: the formulas LlamaModel allocates by.
#include "models/llama/llama_footprint.h"

#include <algorithm>

#include "kernels/contracts/kernel_scratch.h"
#include "kernels/exec_context.h"  // kCublasWorkspaceBytes
#include "models/decoder_call_scratch.h"

#include "models/head_chunks.h"
#include "models/llama/llama_block.h"
#include "models/llama/llama_model.h"
#include "models/llama/llama_params.h"

namespace zt::llama {

ModelFootprint predict_footprint(const LlamaConfig& c, int micro_batch, int seq_len,
                                 const CheckpointPolicy& checkpointing, DType param_dtype, DType activations,
                                 Device device, const UnitLayout& layout, bool backward) {
  constexpr std::int64_t kF32 = 4;
  const LayerDims d = layer_dims(c, micro_batch, seq_len, activations, device, checkpointing.selective());
  const std::int64_t a = static_cast<std::int64_t>(dtype_size_bytes(activations));
  const std::int64_t BT = d.BT(), BTC = BT * d.C, Vp = c.padded_vocab_size();
  const std::int64_t layer = LayerActivations::bytes(d),
                     head = head_bytes(d, Vp, head_chunk_columns(Vp, layout.head_chunks));
  // Resident: the token ids and the residual stream.
  ModelFootprint f;
  f.activation_bytes =
      checkpointed_peak_bytes(checkpointing, c.n_layer, kF32 * 2 * BT + a * (c.n_layer + 1) * BTC, layer, head);
  const std::int64_t scratch_width = std::max({d.C, d.qkv_width(), 2 * d.I});
  const std::int64_t max_unit = build_param_table(c, layout).max_unit_numel();
  // grad_scratch_, dresid_ and LayerGradScratch; a model built without a backward (sampling) has none.
  if (backward) f.workspace_bytes = kF32 * max_unit + a * BTC + 2 * a * BT * scratch_width;
  // bf16 parameters read by fp32-activation kernels: KernelParams' two fp32 unit copies.
  if (param_dtype == DType::kBF16 && activations == DType::kF32) {
    f.step_only_workspace_bytes = 2 * kF32 * max_unit;  // made by the step's first acquire, not at set-up
    f.workspace_bytes += f.step_only_workspace_bytes;
  }
  f.workspace_bytes += LayerRecomputeScratch::bytes(d);  // selective checkpointing's norm and SwiGLU outputs
  // On CUDA the context's cuBLASLt workspace, held for the whole run (as gpt_footprint counts it).
  if (device == Device::kCUDA) f.workspace_bytes += kCublasWorkspaceBytes;
  return f;
}

std::int64_t cuda_call_scratch_bytes(const LlamaConfig& c, const ModelBuild& build, const UnitLayout& layout,
                                     DType param_dtype, const KernelChoices& choices) {
  using namespace kernel_scratch;
  const LayerDims d =
      layer_dims(c, build.batch, build.seq_len, build.activations, Device::kCUDA, build.checkpointing.selective());
  const std::int64_t BT = d.BT(), C = d.C, Vp = c.padded_vocab_size();
  // fp32 activations read fp32 weights (bf16 parameters through the model's fp32 copies); no biases.
  const DType weight = d.act == DType::kF32 ? DType::kF32 : param_dtype;
  auto product = [&](std::int64_t in, std::int64_t out) {
    return Product{.rows = BT,
                   .in = in,
                   .out = out,
                   .activations = d.act,
                   .weight = weight,
                   .bf16_products = choices.matmuls == MatmulPrecision::kBf16};
  };
  // A layer's fused q/k/v, o, fused gate/up and down projections; the head's product, a chunk of
  // the vocabulary at a time.
  const Product products[] = {product(C, d.qkv_width()), product(d.NH * d.hs, C), product(C, 2 * d.I), product(d.I, C),
                              product(C, head_chunk_columns(Vp, layout.head_chunks))};
  return largest_call_bytes(
      {.products = products,
       .backward = build.backward,
       .attention = cuda_attention_route(d.flash_attention, choices.attention, d.act, d.hs, false),
       .batch = d.B,
       .heads = d.NH,
       .seq_len = d.T,
       .activations = d.act,
       .norm_backward_bytes = 4 * rmsnorm_backward_partial_floats(BT, C),
       .vocab = Vp});
}

StepSchedule step_schedule(const LlamaConfig& c, const UnitLayout& layout, const CheckpointPolicy& checkpointing) {
  return {forward_schedule(c, layout), backward_schedule(c, layout, checkpointing)};
}

}  // namespace zt::llama
