// GPT's side of the memory prediction: the formulas GptModel allocates by.
#include "models/gpt/gpt_footprint.h"

#include <fmt/format.h>

#include "kernels/contracts/kernel_scratch.h"
#include "kernels/exec_context.h"  // kCublasWorkspaceBytes
#include "models/decoder_call_scratch.h"
#include "models/gpt/gpt_params.h"
#include "models/gpt/gpt_schedule.h"

namespace zt::gpt {

namespace {

constexpr std::int64_t kF32Bytes = 4;

}  // namespace

ModelFootprint predict_footprint(const GptConfig& model, int micro_batch, int seq_len,
                                 const CheckpointPolicy& checkpointing, DType param_dtype, Device device,
                                 DType activations, const UnitLayout& layout, bool backward) {
  const ActivationDims d =
      activation_dims(model, micro_batch, seq_len, device, activations, layout.head_chunks, checkpointing.selective());
  const std::int64_t max_unit = build_param_table(model, layout).max_unit_numel();
  ModelFootprint f;
  f.activation_bytes = predict_activation_peak_bytes(model, d, checkpointing);
  // GptModel's workspace: in the activation dtype BlockGradScratch (d_btc, d_branch: BTC each;
  // d_qkv 3 BTC; d_bt4c 4 BTC) and dresid_ (BTC); in fp32 grad_scratch_ (the largest unit), and
  // for bf16 parameters with fp32 activations the two fp32 unit copies those kernels read (both in
  // use once the head acquires ln_f and the embeddings). bf16 activations read bf16 parameters.
  // A model built without a backward (sampling) has none of these.
  if (backward) f.workspace_bytes = d.act_bytes() * (9 * d.BTC() + d.BTC()) + kF32Bytes * max_unit;
  if (param_dtype == DType::kBF16 && d.act == DType::kF32) {
    f.step_only_workspace_bytes = 2 * kF32Bytes * max_unit;  // made by the step's first acquire, not at set-up
    f.workspace_bytes += f.step_only_workspace_bytes;
  }
  f.workspace_bytes += RecomputeScratch::bytes(d);  // selective checkpointing's ln and GELU outputs
  // On CUDA the context's cuBLASLt workspace, held for the whole run. (The kernels' scratch, held
  // one call at a time, is the run's to add: cuda_call_scratch_bytes.)
  if (device == Device::kCUDA) f.workspace_bytes += kCublasWorkspaceBytes;
  return f;
}

std::int64_t cuda_call_scratch_bytes(const GptConfig& model, const ModelBuild& build, const UnitLayout& layout,
                                     DType param_dtype, const KernelChoices& choices) {
  using namespace kernel_scratch;
  const ActivationDims d = activation_dims(model, build.batch, build.seq_len, Device::kCUDA, build.activations,
                                           layout.head_chunks, build.checkpointing.selective());
  const std::int64_t BT = d.BT(), C = d.C;
  // fp32 activations read fp32 weights (bf16 parameters through the model's fp32 copies, laid out
  // as the unit). A bias is copied where its element offset in its unit (every block's alike) is
  // not a whole number of 16-byte groups.
  const DType weight = d.act == DType::kF32 ? DType::kF32 : param_dtype;
  const ParamTable table = build_param_table(model, layout);
  auto unaligned = [&](const char* bias) {
    const std::int64_t group = 16 / static_cast<std::int64_t>(dtype_size_bytes(weight));
    return table.param(table.index_of(fmt::format("transformer.h.0.{}", bias))).offset % group != 0;
  };
  auto product = [&](std::int64_t in, std::int64_t out, const char* bias, bool gelu) {
    return Product{.rows = BT,
                   .in = in,
                   .out = out,
                   .activations = d.act,
                   .weight = weight,
                   .bias = bias != nullptr,
                   .bias_unaligned = bias != nullptr && unaligned(bias),
                   .gelu = gelu,
                   .bf16_products = choices.matmuls == MatmulPrecision::kBf16};
  };
  // A block's c_attn (models/gpt/block.h), attention projection, c_fc (GELU in its epilogue as the backend fuses it)
  // and MLP projection; the head's product, a chunk of the vocabulary at a time.
  const bool gelu = choices.gelu_epilogue && 4 * C % 8 == 0;
  const Product products[] = {product(C, 3 * C, "attn.c_attn.bias", false), product(C, C, "attn.c_proj.bias", false),
                              product(C, 4 * C, "mlp.c_fc.bias", gelu), product(4 * C, C, "mlp.c_proj.bias", false),
                              product(C, d.Vc, nullptr, false)};
  const bool dropout = build.dropout > 0.0f;
  return largest_call_bytes(
      {.products = products,
       .backward = build.backward,
       .attention = cuda_attention_route(d.flash_attention, choices.attention, d.act, model.head_size(), dropout),
       .batch = d.B,
       .heads = d.NH,
       .seq_len = d.T,
       .activations = d.act,
       .dropout = dropout,
       .norm_backward_bytes = 4 * layernorm_backward_partial_floats(BT, C),
       .vocab = d.Vp});
}

StepSchedule step_schedule(const GptConfig& model, const UnitLayout& layout, const CheckpointPolicy& checkpointing) {
  return {forward_schedule(model, layout), backward_schedule(model, layout, checkpointing)};
}

}  // namespace zt::gpt
