// LayerNorm over the last dimension (eps 1e-5, as GPT-2), forward and backward, fp32.
#pragma once

#include "engine/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

constexpr float kLayerNormEps = 1e-5f;

// out[N, C] = (inp - mean) * rstd * weight + bias; mean[N] and rstd[N] are saved for backward.
void layernorm_forward(const ExecContext& ctx, TensorView out, TensorView mean, TensorView rstd, TensorView inp,
                       TensorView weight, TensorView bias);

// dinp += d/dinp (accumulates, so a residual gradient can already be in it), dweight += , dbias += .
// The parameter gradients are summed in a fixed order, so results do not depend on thread timing.
void layernorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                        TensorView inp, TensorView weight, TensorView mean, TensorView rstd);

}  // namespace zt::cpu
