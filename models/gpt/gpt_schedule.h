// The ParamStore calls GptModel makes in each pass, in order: the model's contract with the store.
// The store checks every call against it and prefetches from it; the memory model replays it to
// predict which gathered units and pending gradients are alive at once (docs/zero_memory.md).
#pragma once

#include "engine/sharding/param_store.h"
#include "models/gpt/gpt_config.h"

namespace zt::gpt {

// Forward: embeddings; each block; the head, which needs the final LayerNorm and the tied
// embeddings at once.
PassSchedule forward_schedule(const GptConfig& config);
// Backward: the head (tied wte gradient first, then ln_f), the blocks in reverse, and the
// embedding scatter-add, which reads no weights and completes the embeddings' gradient last.
// `head_chunked` (the head in vocabulary chunks): the embeddings' gradient is reduced in two
// rounds, the head's contribution as soon as it is complete and the embedding's at the end, so
// it does not wait through the blocks' backward (ParamStore::grads_ready).
PassSchedule backward_schedule(const GptConfig& config, bool head_chunked = false);

}  // namespace zt::gpt
