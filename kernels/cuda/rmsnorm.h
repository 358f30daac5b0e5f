// CUDA twin of kernels/cpu/rmsnorm.h: RMSNorm over the last dimension, computed in fp32.
// Activations (out, inp; dinp, dout) all F32 or all BF16 per call; rstd F32; the weight F32, or
// BF16 with BF16 activations; dweight F32, or BF16 with BF16 activations (added in place).
// Contracts: OpsBackend::rmsnorm_* (kernels/contracts/ops_backend.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/cuda/norm_backward_rows.h"
#include "kernels/exec_context.h"

namespace zt::cuda {

void rmsnorm_forward(const ExecContext& ctx, TensorView out, TensorView rstd, TensorView inp, TensorView weight,
                     float eps);
// dweight's partials per fixed 32-row chunk, the chunks added in order: deterministic. `rows`: which
// chunk kernel (NormBackwardRows; the default unless a benchmark or test compares them).
void rmsnorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dout, TensorView inp,
                      TensorView weight, TensorView rstd, NormBackwardRows rows = NormBackwardRows::kBlock);

}  // namespace zt::cuda
