// The one description of a transformer block's (GPT-2) or decoder layer's (Llama) pass, for every
// model family: its ParamStore calls and, between them, the family's math and the life of its
// activations. UnitRunner (models/unit_runner.h) runs these steps; the pass schedules the store
// enforces and the memory model replays take their store calls from the same steps, so what runs
// and what is predicted cannot drift apart.
//
// A whole block is one unit: acquired, its attention then its MLP half computed, released. A split
// one (train.block_units = 2) is its attention unit then its MLP unit forward; backward the MLP
// unit's gradient first, then the attention unit's, a checkpointed block's recompute holding both
// (the attention unit acquired first).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/distributed/sharding/param_store.h"

namespace zt {

// A block's two halves, each reading its own parameters: attention (with its norm) and MLP.
enum class BlockPart : std::uint8_t { kAttention, kMlp };

enum class BlockOp : std::uint8_t {
  // ParamStore calls on `unit`.
  kAcquire,
  kRelease,
  kAccumulate,
  kGradsReady,
  // The family's math. Activations are steps of their own: when they are allocated and freed
  // against the acquires is part of the measured (and predicted) memory peak.
  kAllocate,   // the block's activations
  kForward,    // `part`'s forward
  kRecompute,  // a checkpointed block's whole forward again, from its kept input
  kBackward,   // `part`'s backward, its parameter gradient added into its unit's destination
  kFree,       // the block's activations dropped
};

// Which units hold a block's halves: `attn` its attention half (or the whole block), `mlp` its MLP
// half (< 0: the block is whole, in `attn`).
struct BlockUnitIds {
  int attn;
  int mlp = -1;
  bool whole() const { return mlp < 0; }
  // The unit holding `part`.
  int of(BlockPart part) const { return part == BlockPart::kAttention || whole() ? attn : mlp; }
};

struct BlockStep {
  BlockOp op;
  int unit;                                // store calls, kForward, kBackward: the unit concerned
  BlockPart part = BlockPart::kAttention;  // kForward, kBackward: the half
};
using BlockSteps = std::vector<BlockStep>;

// The steps of one block in `units`. `checkpointed`: the forward keeps no activations (freed at
// its end) and the backward recomputes them.
BlockSteps block_forward_steps(const BlockUnitIds& units, bool checkpointed);
BlockSteps block_backward_steps(const BlockUnitIds& units, bool checkpointed);

// The store calls of those steps, appended to a pass's schedule.
void add_block_forward(PassSchedule& s, const BlockUnitIds& units);
void add_block_backward(PassSchedule& s, const BlockUnitIds& units, bool checkpointed);

}  // namespace zt
