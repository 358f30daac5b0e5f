// A block's steps in each pass, and the store calls among them (see the header).
#include "models/block_schedule.h"

#include <initializer_list>

namespace zt {

namespace {

void add(BlockSteps& s, std::initializer_list<BlockStep> steps) {
  for (const BlockStep& e : steps) s.push_back(e);  // (vector::insert trips a GCC 12 false warning)
}

BlockStep store_call(BlockOp op, int unit) { return {op, unit}; }
BlockStep forward(int unit, BlockPart part) { return {BlockOp::kForward, unit, part}; }
BlockStep backward(int unit, BlockPart part) { return {BlockOp::kBackward, unit, part}; }
constexpr BlockStep kAllocate{BlockOp::kAllocate, -1};
constexpr BlockStep kRecompute{BlockOp::kRecompute, -1};
constexpr BlockStep kFree{BlockOp::kFree, -1};

// A unit's gradient handed over and final, then its parameters let go.
void add_unit_done(BlockSteps& s, int unit) {
  add(s, {store_call(BlockOp::kAccumulate, unit), store_call(BlockOp::kGradsReady, unit),
          store_call(BlockOp::kRelease, unit)});
}

void add_store_calls(PassSchedule& s, const BlockSteps& steps) {
  for (const BlockStep& e : steps) {
    switch (e.op) {
      case BlockOp::kAcquire: s.push_back({UnitOp::kAcquire, e.unit}); break;
      case BlockOp::kRelease: s.push_back({UnitOp::kRelease, e.unit}); break;
      case BlockOp::kAccumulate: s.push_back({UnitOp::kAccumulate, e.unit}); break;
      case BlockOp::kGradsReady: s.push_back({UnitOp::kGradsReady, e.unit}); break;
      default: break;  // the family's math: no store call
    }
  }
}

}  // namespace

BlockSteps block_forward_steps(const BlockUnitIds& units, bool checkpointed) {
  const int u = units.attn, m = units.mlp;
  BlockSteps s;
  if (units.whole()) {
    add(s, {store_call(BlockOp::kAcquire, u), kAllocate, forward(u, BlockPart::kAttention), forward(u, BlockPart::kMlp),
            store_call(BlockOp::kRelease, u)});
  } else {
    add(s, {kAllocate, store_call(BlockOp::kAcquire, u), forward(u, BlockPart::kAttention),
            store_call(BlockOp::kRelease, u), store_call(BlockOp::kAcquire, m), forward(m, BlockPart::kMlp),
            store_call(BlockOp::kRelease, m)});
  }
  // A checkpointed block keeps only its input (the residual stream's); backward recomputes the rest.
  if (checkpointed) add(s, {kFree});
  return s;
}

BlockSteps block_backward_steps(const BlockUnitIds& units, bool checkpointed) {
  const int u = units.attn, m = units.mlp;
  BlockSteps s;
  if (units.whole()) {
    add(s, {store_call(BlockOp::kAcquire, u)});
    if (checkpointed) add(s, {kAllocate, kRecompute});
    add(s, {backward(u, BlockPart::kMlp), backward(u, BlockPart::kAttention), kFree});
    add_unit_done(s, u);
    return s;
  }
  // The recompute reads both halves: the attention unit first.
  if (checkpointed) add(s, {store_call(BlockOp::kAcquire, u)});
  add(s, {store_call(BlockOp::kAcquire, m)});
  if (checkpointed) add(s, {kAllocate, kRecompute});
  add(s, {backward(m, BlockPart::kMlp)});
  add_unit_done(s, m);
  if (!checkpointed) add(s, {store_call(BlockOp::kAcquire, u)});
  add(s, {backward(u, BlockPart::kAttention), kFree});
  add_unit_done(s, u);
  return s;
}

void add_block_forward(PassSchedule& s, const BlockUnitIds& units) {
  add_store_calls(s, block_forward_steps(units, /*checkpointed=*/false));  // (the same store calls either way)
}

void add_block_backward(PassSchedule& s, const BlockUnitIds& units, bool checkpointed) {
  add_store_calls(s, block_backward_steps(units, checkpointed));
}

}  // namespace zt
