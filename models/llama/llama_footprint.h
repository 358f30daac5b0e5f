// What LlamaModel brings to the ZeRO memory prediction (engine/distributed/sharding/memory_model.h), as
// models/gpt/gpt_footprint.h does for GPT: the bytes it allocates itself and its step's store calls.
#pragma once

#include "engine/base/core/dtype.h"
#include "engine/distributed/sharding/memory_model.h"
#include "engine/distributed/sharding/schedule_replay.h"
#include "models/checkpoint_policy.h"
#include "models/llama/llama_config.h"
#include "models/model_family.h"  // ModelBuild, KernelChoices
#include "models/unit_layout.h"

namespace zt::llama {

// Activations (a bytes per element of the activation dtype): token ids 4 (2 BT) and the residual
// stream a (L + 1) BTC throughout, each kept layer's LayerActivations, the head (head_bytes) at the
// end of the forward, a checkpointed layer's recomputed ones in backward; the peak of that
// sequence. Workspace: the fp32 gradient scratch of the largest unit, dresid a BTC, the layers' two
// gradient scratches, for bf16 parameters with fp32 activations two fp32 unit copies, and on CUDA
// the cuBLASLt workspace. A layer's attention keeps [B, NH, T, T] probabilities, or on CUDA with the
// flash kernels an F32 log-sum-exp [B, NH, T] (layer_dims). `backward` false: a model built for
// forwards only (ModelBuild::backward), without the gradient scratch, dresid or the layers' scratches.
ModelFootprint predict_footprint(const LlamaConfig& c, int micro_batch, int seq_len,
                                 const CheckpointPolicy& checkpointing = {}, DType param_dtype = DType::kF32,
                                 DType activations = DType::kF32, Device device = Device::kCPU,
                                 const UnitLayout& layout = {}, bool backward = true);
// The most scratch one CUDA kernel call of LlamaModel's step holds (ModelFamily::cuda_call_scratch_bytes,
// as gpt_footprint.h's): its layers' and head's products, the attention's scratch, the RMSNorm
// backwards' partials and the embedding backward's sort.
std::int64_t cuda_call_scratch_bytes(const LlamaConfig& c, const ModelBuild& build, const UnitLayout& layout,
                                     DType param_dtype, const KernelChoices& choices);
StepSchedule step_schedule(const LlamaConfig& c, const UnitLayout& layout = {},
                           const CheckpointPolicy& checkpointing = {});

}  // namespace zt::llama
