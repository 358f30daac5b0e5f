// ParamStore: the model's only way to reach parameter and gradient memory, one unit at a time and
// in execution order. The model calls it explicitly (no hooks): acquire before a unit computes,
// release after, hand over each gradient contribution, say when a unit's gradient is final.
// ZeroParamStore keeps, gathers, frees and reduce-scatters behind these calls at every stage.
// A model also declares each pass's schedule up front (begin_pass): the sequence of calls it will
// make, which the store enforces and uses to prefetch. See docs/architecture.md.
#pragma once

#include <vector>

#include "engine/base/core/param_table.h"
#include "engine/base/core/tensor.h"

namespace zt {

enum class Pass { kForward, kBackward };

// One ParamStore call of a pass: the model's explicit execution order, known before it runs.
enum class UnitOp { kAcquire, kRelease, kAccumulate, kGradsReady };
struct UnitEvent {
  UnitOp op;
  int unit;
  bool operator==(const UnitEvent&) const = default;
};
using PassSchedule = std::vector<UnitEvent>;

// Index of the schedule's last acquire (0 when it has none): past it, a forward only releases.
inline std::size_t last_acquire_index(const PassSchedule& s) {
  std::size_t last = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i].op == UnitOp::kAcquire) last = i;
  }
  return last;
}

// Per unit of a table of `units`: whether `s` acquires it.
inline std::vector<bool> units_acquired(const PassSchedule& s, std::size_t units) {
  std::vector<bool> acquired(units, false);
  for (const UnitEvent& e : s) {
    if (e.op == UnitOp::kAcquire) acquired[static_cast<std::size_t>(e.unit)] = true;
  }
  return acquired;
}

// Per unit of a table of `units`: in how many rounds (grads_ready calls) this backward schedule
// reduces its gradient.
inline std::vector<int> grads_ready_rounds(const PassSchedule& backward, std::size_t units) {
  std::vector<int> rounds(units, 0);
  for (const UnitEvent& e : backward) {
    if (e.op == UnitOp::kGradsReady) ++rounds.at(static_cast<std::size_t>(e.unit));
  }
  return rounds;
}

// Per unit: does this backward schedule reduce its gradient in more than one round, as a tied
// unit whose contributions come far apart does?
inline std::vector<bool> units_reduced_in_rounds(const PassSchedule& backward, std::size_t units) {
  const std::vector<int> rounds = grads_ready_rounds(backward, units);
  std::vector<bool> several(units);
  for (std::size_t u = 0; u < units; ++u) several[u] = rounds[u] > 1;
  return several;
}

// Calls fn(unit) for the units of the next `count` acquires at or after index `from`: what a
// prefetch of depth `count` gathers ahead.
template <class Fn>
void for_next_acquires(const PassSchedule& s, std::size_t from, int count, Fn&& fn) {
  for (std::size_t i = from; i < s.size() && count > 0; ++i) {
    if (s[i].op != UnitOp::kAcquire) continue;
    --count;
    fn(s[i].unit);
  }
}

class ParamStore {
 public:
  virtual ~ParamStore() = default;

  virtual const ParamTable& table() const = 0;
  // dtype of the working parameters and of stored gradients (F32, or BF16 in mixed precision).
  virtual DType param_dtype() const = 0;

  // The full working parameters of `unit` (flat, unit length). Valid until release_params.
  virtual TensorView acquire_params(int unit, Pass pass) = 0;
  virtual void release_params(int unit, Pass pass) = 0;

  // Adds one fp32 gradient contribution (flat, unit length) into the unit's gradient storage.
  // A unit may receive several (the tied embedding gets the head's, then the embedding's). `grad`
  // may also be the view in_place_grads gave, which already holds the contribution.
  virtual void accumulate_grads(int unit, TensorView grad) = 0;
  // Where the unit's next contribution may go in place (flat, unit length; the dtype of
  // param_dtype): the unit's gradient storage while it holds zero, or, for a gradient that waits
  // in a buffer of its own for a reduction, that buffer, new and zero (a store may allocate it
  // here: ask right before the contribution's math). The model's kernels may add the contribution
  // into it (no fp32 scratch to zero and add in, docs/performance.md) and then pass this view to
  // accumulate_grads. Empty where the contribution must come as fp32: the storage or buffer
  // already holds one (a second contribution, a later micro-batch, a later round), or an earlier
  // round is still in its reduction. Adding into zero storage gives the bits the scratch would have.
  virtual TensorView in_place_grads(int /*unit*/) { return {}; }
  // The contributions to `unit` since its last grads_ready are complete: the store may reduce them
  // now. A unit may be reduced in several rounds in one backward (a tied unit: the head's
  // contribution at once, the embedding's at the end, so neither waits through the whole pass);
  // each round is then reduced on its own, on more than one rank at every stage, and added to
  // the stored gradient, so the stages' bits agree (docs/zero_memory.md).
  virtual void grads_ready(int unit) = 0;

  // A pass begins: the calls up to end_pass follow `schedule` exactly (a store may check it and
  // prefetch from it). `backward`: a training forward's backward, which comes next (so a store may
  // keep for it the units it reads); null for a forward without one, and for a backward.
  virtual void begin_pass(Pass pass, const PassSchedule& schedule, const PassSchedule* backward) = 0;
  virtual void end_pass(Pass pass) = 0;
};

}  // namespace zt
