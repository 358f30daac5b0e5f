// RMSNorm over the last dimension (Llama's), forward and backward, computed in fp32. No mean is
// subtracted and there is no bias: out = inp * rstd * weight, rstd = 1 / sqrt(mean(inp^2) + eps).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// out[N, C] = inp * rstd * weight; rstd[N] (F32) is saved for backward. Activations F32 or BF16
// (staged through fp32 rows, each output rounded once); weight F32, or BF16 with BF16 activations
// (check_param_dtype).
void rmsnorm_forward(const ExecContext& ctx, TensorView out, TensorView rstd, TensorView inp, TensorView weight,
                     float eps);

// With norm = inp * rstd and dnorm = dout * weight: dinp += rstd * (dnorm - norm * mean(dnorm * norm))
// (accumulates, so a residual gradient can already be in it), dweight (F32) += the sum over rows of
// dout * norm, in fixed-size row chunks added in chunk order: the bits depend on the shapes only,
// never on the thread count.
void rmsnorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dout, TensorView inp,
                      TensorView weight, TensorView rstd);

}  // namespace zt::cpu
