// LayerNorm over the last dimension (eps 1e-5, as GPT-2), forward and backward, fp32.
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/contracts/layernorm_eps.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// out[N, C] = (inp - mean) * rstd * weight + bias; mean[N] and rstd[N] are saved for backward.
void layernorm_forward(const ExecContext& ctx, TensorView out, TensorView mean, TensorView rstd, TensorView inp,
                       TensorView weight, TensorView bias);

// dinp += d/dinp (accumulates, so a residual gradient can already be in it), dweight += , dbias += .
// The parameter gradients are summed in a fixed order, so results do not depend on thread timing.
void layernorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                        TensorView inp, TensorView weight, TensorView mean, TensorView rstd);

// residual = a + b (residual_forward, so residual may alias a or b), then out = layernorm(residual)
// as layernorm_forward: the residual add of one sub-block with the LayerNorm that follows. Here
// the two calls in turn; the CUDA twin makes one pass over memory fewer.
void layernorm_residual_forward(const ExecContext& ctx, TensorView residual, TensorView out, TensorView mean,
                                TensorView rstd, TensorView a, TensorView b, TensorView weight, TensorView bias);

}  // namespace zt::cpu
