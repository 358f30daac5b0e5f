// CUDA twin of kernels/cpu/gelu.h: GELU, tanh approximation (GPT-2's "gelu_new"), computed in fp32.
// Each op's operands are all F32 or all BF16 (docs/precision.md: bf16 results rounded once).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cuda {

// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). out may alias inp.
void gelu_forward(const ExecContext& ctx, TensorView out, TensorView inp);

// dinp = dout * gelu'(inp) (overwritten; dinp may alias dout).
void gelu_backward(const ExecContext& ctx, TensorView dinp, TensorView inp, TensorView dout);

}  // namespace zt::cuda
