// GELU, tanh approximation (GPT-2's "gelu_new"), forward and backward, fp32.
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). out may alias inp.
void gelu_forward(const ExecContext& ctx, TensorView out, TensorView inp);

// dinp = dout * gelu'(inp) (overwritten; dinp may alias dout).
void gelu_backward(const ExecContext& ctx, TensorView dinp, TensorView inp, TensorView dout);

}  // namespace zt::cpu
