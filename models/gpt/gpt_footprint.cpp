// GPT's side of the memory prediction: the formulas GptModel allocates by.
#include "models/gpt/gpt_footprint.h"

#include "kernels/exec_context.h"  // kCublasWorkspaceBytes
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
  // On CUDA the context's cuBLASLt workspace, held for the whole run. (The kernels' transient
  // scratch, partial sums and the embedding backward's sort, is not modelled: kilobytes to a
  // few MB at a time, device-dependent for CUB's sort.)
  if (device == Device::kCUDA) f.workspace_bytes += kCublasWorkspaceBytes;
  return f;
}

StepSchedule step_schedule(const GptConfig& model, const UnitLayout& layout, const CheckpointPolicy& checkpointing) {
  return {forward_schedule(model, layout), backward_schedule(model, layout, checkpointing)};
}

}  // namespace zt::gpt
