// UnitRunner: a block's steps, walked in order (see the header).
#include "models/unit_runner.h"

#include <cstdio>
#include <cstdlib>

#include "engine/distributed/launch/rendezvous.h"

namespace zt {

namespace {

// The halves of `units` held in `unit`: both for a whole block.
void set_unit(BlockUnits& v, const BlockUnitIds& units, int unit, TensorView view) {
  if (unit == units.of(BlockPart::kAttention)) v.attn = view;
  if (unit == units.of(BlockPart::kMlp)) v.mlp = view;
}

TensorView unit_view(const BlockUnits& v, const BlockUnitIds& units, int unit) {
  return unit == units.attn ? v.attn : v.mlp;
}

}  // namespace

UnitRunner::UnitRunner(const std::vector<BlockUnitIds>& blocks, const CheckpointPolicy& policy, KernelParams& params,
                       BlockMath& math)
    : blocks_(blocks), params_(params), math_(math) {
  // ZT_TEST_SKIP_BLOCK=RANK:BLOCK (docs/config.md, "Testing hooks"): that rank's forward passes
  // skip the block, store calls and math, as a data-dependent branch would.
  if (const char* hook = std::getenv("ZT_TEST_SKIP_BLOCK")) {
    int rank = -1, block = -1;
    if (std::sscanf(hook, "%d:%d", &rank, &block) == 2 && rank == detect_launch().rank) skipped_block_ = block;
  }
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const bool checkpointed = policy.is_checkpointed(static_cast<int>(b));
    forward_steps_.push_back(block_forward_steps(blocks[b], checkpointed));
    backward_steps_.push_back(block_backward_steps(blocks[b], checkpointed));
  }
}

void UnitRunner::forward(ParamStore& store, int block) {
  if (block == skipped_block_) return;  // the test hook's departure from the schedule
  run(store, block, Pass::kForward, forward_steps_.at(static_cast<std::size_t>(block)));
}

void UnitRunner::backward(ParamStore& store, int block) {
  run(store, block, Pass::kBackward, backward_steps_.at(static_cast<std::size_t>(block)));
}

void UnitRunner::run(ParamStore& store, int block, Pass pass, const BlockSteps& steps) {
  const BlockUnitIds& units = blocks_[static_cast<std::size_t>(block)];
  BlockUnits held, grads;  // what the block's units hold now: parameters acquired, gradient destinations
  for (const BlockStep& step : steps) {
    switch (step.op) {
      case BlockOp::kAcquire: set_unit(held, units, step.unit, params_.acquire(store, step.unit, pass)); break;
      case BlockOp::kRelease:
        store.release_params(step.unit, pass);
        set_unit(held, units, step.unit, TensorView{});
        break;
      case BlockOp::kAccumulate:
        store.accumulate_grads(step.unit, unit_view(grads, units, step.unit));
        set_unit(grads, units, step.unit, TensorView{});  // handed over
        break;
      case BlockOp::kGradsReady: store.grads_ready(step.unit); break;
      case BlockOp::kAllocate: math_.allocate_block_activations(block); break;
      case BlockOp::kForward: math_.forward_part(block, step.part, held); break;
      case BlockOp::kRecompute: math_.recompute_block(block, held); break;
      case BlockOp::kBackward:
        // A unit's destination is taken just before its first backward part adds into it (a whole
        // block's two parts add into one).
        if (unit_view(grads, units, step.unit).data == nullptr) {
          set_unit(grads, units, step.unit, math_.grad_destination(store, step.unit));
        }
        math_.backward_part(block, step.part, held, grads);
        break;
      case BlockOp::kFree: math_.free_block_activations(block); break;
    }
  }
}

}  // namespace zt
