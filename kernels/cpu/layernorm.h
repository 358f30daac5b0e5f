// LayerNorm over the last dimension (eps 1e-5, as GPT-2), forward and backward, fp32.
// Contracts: OpsBackend::layernorm_* (kernels/contracts/ops_backend.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/contracts/layernorm_eps.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

void layernorm_forward(const ExecContext& ctx, TensorView out, TensorView mean, TensorView rstd, TensorView inp,
                       TensorView weight, TensorView bias);

// The parameter gradients are summed in a fixed order, so results do not depend on thread timing.
void layernorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                        TensorView inp, TensorView weight, TensorView mean, TensorView rstd);

// Here residual_forward then layernorm_forward in turn; the CUDA twin makes one pass over memory
// fewer.
void layernorm_residual_forward(const ExecContext& ctx, TensorView residual, TensorView out, TensorView mean,
                                TensorView rstd, TensorView a, TensorView b, TensorView weight, TensorView bias);

}  // namespace zt::cpu
