// ParamStore: the model's only way to reach parameter and gradient memory, one unit at a time and
// in execution order. The model calls it explicitly (no hooks): acquire before a unit computes,
// release after, hand over each gradient contribution, say when a unit's gradient is final.
// ZeroParamStore keeps, gathers, frees and reduce-scatters behind these calls at every stage.
// A model also declares each pass's schedule up front (begin_pass): the sequence of calls it will
// make, which the store enforces and uses to prefetch. See docs/architecture.md.
#pragma once

#include <vector>

#include "engine/core/param_table.h"
#include "engine/core/tensor.h"

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
  // The unit's gradient storage (flat, unit length; the dtype of param_dtype) while it holds zero
  // and the store keeps the next contribution there: the model's kernels may add that contribution
  // into it in place (no fp32 scratch to zero and add in, docs/performance.md) and then pass this
  // view to accumulate_grads. Empty where the contribution must come as fp32: the storage already
  // holds one (a second contribution, a later micro-batch), or the gradient waits in a buffer of
  // its own for a reduction. Adding into zero storage gives the bits the scratch would have.
  virtual TensorView in_place_grads(int /*unit*/) { return {}; }
  // No more contributions for `unit` in this backward pass.
  virtual void grads_ready(int unit) = 0;

  // A pass begins: the calls up to end_pass follow `schedule` exactly (a store may check it and
  // prefetch from it). `backward_follows`: a training forward, whose backward comes next.
  virtual void begin_pass(Pass pass, const PassSchedule& schedule, bool backward_follows) = 0;
  virtual void end_pass(Pass pass) = 0;
};

}  // namespace zt
