// AdamW on a flat fp32 buffer: decoupled weight decay and bias correction, as torch.optim.AdamW.
// The caller passes weight_decay = 0 for ranges that do not decay (biases, LayerNorm parameters).
#pragma once

#include <vector>

#include "engine/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

struct AdamWHyper {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

// One update of `param` (F32 master), m and v (F32, same length) from grad (F32 or BF16) times
// grad_scale (1 unless clipping). step is 1-based (bias corrections 1 - beta^step). The order of
// operations is torch's: param *= 1 - lr*wd; m, v updated; param -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps).
// If working_out is non-empty (F32 or BF16, same length), the updated parameter is also written
// there: the bf16 re-cast of the master weights in mixed precision.
void adamw_update(const ExecContext& ctx, TensorView param, TensorView grad, TensorView m, TensorView v,
                  TensorView working_out, const AdamWHyper& hyper, int step, float grad_scale = 1.0f);

// The operand checks both backends make (dtypes, equal lengths); throws with the mismatch named.
void check_adamw_operands(const TensorView& param, const TensorView& grad, const TensorView& m, const TensorView& v,
                          const TensorView& working_out);

// One range of a multi-tensor update: param, grad, m, v (and working, or empty) as for
// adamw_update; `decays` says whether hyper.weight_decay applies to it.
struct AdamWSlice {
  TensorView param, grad, m, v, working;
  bool decays = true;
};

// adamw_update of every slice, weight decay only where a slice decays. The result is the same as
// one adamw_update per slice (element-wise update); the CUDA twin does it in one launch per 48
// slices instead of one per slice (~110 per step for GPT-2).
void adamw_update_slices(const ExecContext& ctx, const std::vector<AdamWSlice>& slices, const AdamWHyper& hyper,
                         int step, float grad_scale = 1.0f);

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

}  // namespace zt::cpu
