// ParamStore: the model's only way to reach parameter and gradient memory, one unit at a time and
// in execution order. The model calls it explicitly (no hooks): acquire before a unit computes,
// release after, hand over each gradient contribution, say when a unit's gradient is final.
// The single-rank store keeps everything resident; the ZeRO stores (later) gather, free and
// reduce-scatter behind the same calls. See docs/architecture.md.
#pragma once

#include "engine/core/param_table.h"
#include "engine/core/tensor.h"

namespace zt {

enum class Pass { kForward, kBackward };

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
  // A unit may receive several (the tied embedding gets the head's, then the embedding's).
  virtual void accumulate_grads(int unit, TensorView grad_f32) = 0;
  // No more contributions for `unit` in this backward pass.
  virtual void grads_ready(int unit) = 0;
};

}  // namespace zt
