// A block's store calls in each pass (see the header).
#include "models/block_schedule.h"

#include <initializer_list>

namespace zt {

namespace {

void add(PassSchedule& s, std::initializer_list<UnitEvent> events) {
  for (const UnitEvent& e : events) s.push_back(e);  // (vector::insert trips a GCC 12 false warning)
}

}  // namespace

void add_block_forward(PassSchedule& s, int attn_unit, int mlp_unit) {
  add(s, {{UnitOp::kAcquire, attn_unit}, {UnitOp::kRelease, attn_unit}});
  if (mlp_unit >= 0) add(s, {{UnitOp::kAcquire, mlp_unit}, {UnitOp::kRelease, mlp_unit}});
}

void add_block_backward(PassSchedule& s, int attn_unit, int mlp_unit, bool recompute) {
  const int u = attn_unit, m = mlp_unit;
  if (m < 0) {
    add(s, {{UnitOp::kAcquire, u}, {UnitOp::kAccumulate, u}, {UnitOp::kGradsReady, u}, {UnitOp::kRelease, u}});
    return;
  }
  if (recompute) add(s, {{UnitOp::kAcquire, u}});
  add(s, {{UnitOp::kAcquire, m}, {UnitOp::kAccumulate, m}, {UnitOp::kGradsReady, m}, {UnitOp::kRelease, m}});
  if (!recompute) add(s, {{UnitOp::kAcquire, u}});
  add(s, {{UnitOp::kAccumulate, u}, {UnitOp::kGradsReady, u}, {UnitOp::kRelease, u}});
}

}  // namespace zt
