// What LlamaModel brings to the ZeRO memory prediction (engine/sharding/memory_model.h), as
// models/gpt/gpt_footprint.h does for GPT: the bytes it allocates itself (fp32 activations on the
// CPU, the model's only mode so far) and its step's store calls.
#pragma once

#include "engine/sharding/memory_model.h"
#include "engine/sharding/schedule_replay.h"
#include "models/checkpoint_policy.h"
#include "models/llama/llama_config.h"

namespace zt::llama {

// Activations: token ids 4 (2 BT) and the residual stream 4 (L + 1) BTC throughout, each kept
// layer's LayerActivations, the head 4 BT (C + 2 + Vp) at the end of the forward, a checkpointed
// layer's recomputed ones in backward; the peak of that sequence. Workspace: the fp32 gradient
// scratch of the largest unit, dresid 4 BTC and the layers' two gradient scratches.
ModelFootprint predict_footprint(const LlamaConfig& c, int micro_batch, int seq_len,
                                 const CheckpointPolicy& checkpointing = {});
StepSchedule step_schedule(const LlamaConfig& c);

}  // namespace zt::llama
