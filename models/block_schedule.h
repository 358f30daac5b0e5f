// The store calls of one transformer block (GPT-2) or layer (Llama) in each pass, for every model
// family: a whole block is one unit; a split one (train.block_units = 2) is its attention unit then
// its MLP unit forward, and backward the MLP unit's gradient first, then the attention unit's, a
// checkpointed block's recompute holding both (the attention unit acquired first).
#pragma once

#include "engine/distributed/sharding/param_store.h"

namespace zt {

// mlp_unit < 0: the block is whole, in attn_unit.
void add_block_forward(PassSchedule& s, int attn_unit, int mlp_unit);
void add_block_backward(PassSchedule& s, int attn_unit, int mlp_unit, bool recompute);

}  // namespace zt
