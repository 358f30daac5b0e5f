// AdamW on a flat fp32 buffer: decoupled weight decay and bias correction, as torch.optim.AdamW.
// The caller passes weight_decay = 0 for ranges that do not decay (biases, LayerNorm parameters).
#pragma once

#include <vector>

#include "engine/base/core/tensor.h"
#include "kernels/contracts/adamw_params.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// One update of `param` (F32 master), m and v (F32, same length) from grad (F32 or BF16) times
// grad_scale (1 unless clipping). step is 1-based (bias corrections 1 - beta^step). The order of
// operations is torch's: param *= 1 - lr*wd; m, v updated; param -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps).
// If working_out is non-empty (F32 or BF16, same length), the updated parameter is also written
// there: the bf16 re-cast of the master weights in mixed precision.
void adamw_update(const ExecContext& ctx, TensorView param, TensorView grad, TensorView m, TensorView v,
                  TensorView working_out, const AdamWHyper& hyper, int step, float grad_scale = 1.0f);

// adamw_update of every slice, weight decay only where a slice decays. The result is the same as
// one adamw_update per slice (element-wise update); the CUDA twin does it in one launch per 48
// slices instead of one per slice (~110 per step for GPT-2).
void adamw_update_slices(const ExecContext& ctx, const std::vector<AdamWSlice>& slices, const AdamWHyper& hyper,
                         int step, float grad_scale = 1.0f);

}  // namespace zt::cpu
