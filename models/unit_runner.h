// The ZeRO choreography around a transformer block (GPT-2) or decoder layer (Llama), written once
// for every model family: acquire, recompute if checkpointed, compute, accumulate, grads_ready,
// release, for whole blocks and for blocks split into attention and MLP units alike. The runner
// walks the block's steps (models/block_schedule.h: the same steps the pass schedules are built
// from) and calls the family's math (BlockMath) between the store calls; a family keeps only its
// kernels and its views, and states no store call for its blocks.
#pragma once

#include <vector>

#include "engine/distributed/sharding/param_store.h"
#include "models/block_schedule.h"
#include "models/checkpoint_policy.h"
#include "models/kernel_params.h"

namespace zt {

// A block's parameters (or gradients) as the runner holds them, per half: a whole block's one unit
// in both; a split block's attention and MLP units, either empty while not held.
struct BlockUnits {
  TensorView attn, mlp;
};

// What a family computes for its blocks; UnitRunner says when. Each call names the block; the
// family keeps the block's activations (allocated, used and freed only through these calls) and
// builds its named views from the BlockUnits.
class BlockMath {
 public:
  // The block's activations: allocated for a forward or a recompute, freed when the block's
  // backward is done or, for a checkpointed block, at the end of its forward.
  virtual void allocate_block_activations(int block) = 0;
  virtual void free_block_activations(int block) = 0;
  // `part`'s forward, from the block's input to (after the MLP half) its output.
  virtual void forward_part(int block, BlockPart part, const BlockUnits& params) = 0;
  // A checkpointed block's whole forward again from its kept input, both halves' parameters held.
  virtual void recompute_block(int block, const BlockUnits& params) = 0;
  // `part`'s backward: the residual stream's gradient from the part's output to its input, its
  // parameter gradients added into `grads` (the MLP half first).
  virtual void backward_part(int block, BlockPart part, const BlockUnits& params, const BlockUnits& grads) = 0;
  // Where `unit`'s gradient is added before it goes to store.accumulate_grads: a zeroed fp32
  // scratch, or the store's own storage where it lends it (ParamStore::in_place_grads).
  virtual TensorView grad_destination(ParamStore& store, int unit) = 0;

 protected:
  ~BlockMath() = default;
};

class UnitRunner {
 public:
  // Block b's units are blocks[b]; `policy` says which blocks are checkpointed. `params` hands the
  // units to the kernels; `math` is the family's.
  UnitRunner(const std::vector<BlockUnitIds>& blocks, const CheckpointPolicy& policy, KernelParams& params,
             BlockMath& math);

  // Block `block`'s forward, or its backward (the residual stream's gradient in the family's
  // buffer), with every store call of its steps, inside a pass the caller began.
  void forward(ParamStore& store, int block);
  void backward(ParamStore& store, int block);

 private:
  void run(ParamStore& store, int block, Pass pass, const BlockSteps& steps);

  std::vector<BlockUnitIds> blocks_;
  std::vector<BlockSteps> forward_steps_, backward_steps_;  // per block, built once
  KernelParams& params_;
  BlockMath& math_;
  int skipped_block_ = -1;  // ZT_TEST_SKIP_BLOCK on this rank
};

}  // namespace zt
