// What GptModel brings to the ZeRO memory prediction (engine/distributed/sharding/memory_model.h): the bytes it
// allocates itself, the same under every stage (sized by the batch, not the shard), and its step's
// store calls. The sharding arithmetic knows nothing of GPT; this is GPT's side of it.
#pragma once

#include "engine/base/core/dtype.h"
#include "engine/distributed/sharding/memory_model.h"
#include "engine/distributed/sharding/schedule_replay.h"
#include "models/gpt/activations.h"
#include "models/gpt/gpt_config.h"
#include "models/gpt/gpt_params.h"
#include "models/model_family.h"  // ModelBuild, KernelChoices

namespace zt::gpt {

// GptModel's footprint for micro-batches of B x T on `device` (which decides between flash and
// materialised attention, activation_dims): predict_activation_peak_bytes, and the workspace
// GptModel and BlockGradScratch allocate (docs/memory.md); `backward` false: a model built for
// forwards only (ModelBuild::backward), without the backward's workspace.
ModelFootprint predict_footprint(const GptConfig& model, int micro_batch, int seq_len,
                                 const CheckpointPolicy& checkpointing, DType param_dtype, Device device,
                                 DType activations = DType::kF32, const UnitLayout& layout = {}, bool backward = true);

// The most scratch one CUDA kernel call of GptModel's step holds (ModelFamily::cuda_call_scratch_bytes;
// [Note: the kernels' scratch, predicted] in kernels/contracts/kernel_scratch.h): the products of
// its blocks and head (bf16 operand copies, fp32 result chunks, bias partials), the attention's
// scratch, the norm backwards' partials and the embedding backward's sort.
std::int64_t cuda_call_scratch_bytes(const GptConfig& model, const ModelBuild& build, const UnitLayout& layout,
                                     DType param_dtype, const KernelChoices& choices);

// The forward and backward schedules of one training step (gpt_schedule.h) with the units of
// `layout` (a checkpointed split block acquires both halves to recompute).
StepSchedule step_schedule(const GptConfig& model, const UnitLayout& layout = {},
                           const CheckpointPolicy& checkpointing = {});

}  // namespace zt::gpt
