// The ParamStore calls GptModel makes in each pass, in order: the model's contract with the store.
// The store checks every call against it and prefetches from it; the memory model replays it to
// predict which gathered units and pending gradients are alive at once (docs/zero_memory.md).
#pragma once

#include <vector>

#include "engine/distributed/sharding/param_store.h"
#include "models/block_schedule.h"
#include "models/checkpoint_policy.h"
#include "models/gpt/gpt_config.h"
#include "models/gpt/gpt_params.h"

namespace zt::gpt {

// Each block's units (block_unit, and mlp_unit with split blocks): what the schedules below and
// the model's UnitRunner both walk.
std::vector<BlockUnitIds> block_unit_ids(const GptConfig& config, const UnitLayout& layout);

// Forward: embeddings; each block; the head, which needs the final LayerNorm and the tied
// embeddings at once.
// With split blocks each block is its attention unit, then its MLP unit.
PassSchedule forward_schedule(const GptConfig& config, const UnitLayout& layout = {});
// Backward: the head (tied wte gradient first, then ln_f), the blocks in reverse, and the
// embedding scatter-add, which reads no weights and completes the embeddings' gradient last.
// With the head in chunks, wte's chunk units take the embeddings' place: the embedding forward
// acquires each beside the embeddings (wpe and chunk 0), the head each in turn beside ln_f; the
// backward's head takes them from the last (still gathered after the forward), each reduced at
// once (its first round), and the scatter-add reduces each again (ParamStore::grads_ready).
// With split blocks each block's MLP unit comes before its attention unit; a checkpointed block
// (`policy`) acquires both first, to recompute its forward.
PassSchedule backward_schedule(const GptConfig& config, const UnitLayout& layout = {},
                               const CheckpointPolicy& policy = {});

}  // namespace zt::gpt
