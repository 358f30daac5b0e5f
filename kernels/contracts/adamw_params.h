// The AdamW contract every backend keeps: the hyper-parameters, the ranges (slices) of a
// multi-tensor update, the operand checks, and the per-step scalars, formed once here so the CPU
// update and its CUDA twin are bitwise equal (kernels/cpu/adamw.h says the order of operations).
#pragma once

#include "engine/base/core/tensor.h"

namespace zt {

struct AdamWHyper {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

// The operand checks both backends make (dtypes, equal lengths); throws with the mismatch named.
void check_adamw_operands(const TensorView& param, const TensorView& grad, const TensorView& m, const TensorView& v,
                          const TensorView& working_out);

// One range of a multi-tensor update: param, grad, m, v (and working, or empty) as for
// adamw_update; `decays` says whether hyper.weight_decay applies to it.
struct AdamWSlice {
  TensorView param, grad, m, v, working;
  bool decays = true;
};

// The per-step scalars of the update, formed in fp64 as Python does for torch, then used in fp32.
// One definition for both backends: the CUDA update equals the CPU's bit for bit only if these do.
struct AdamWCoeffs {
  float decay;  // 1 - lr * weight_decay
  float one_minus_beta1;
  float beta2;
  float one_minus_beta2;
  float step_size;  // lr / (1 - beta1^step)
  float bc2_sqrt;   // sqrt(1 - beta2^step)
  float eps;
};
AdamWCoeffs adamw_coeffs(const AdamWHyper& hyper, int step);

}  // namespace zt
