// SwiGLU (Llama's MLP activation), forward and backward, computed in fp32, on the output of the
// fused gate and up projections (one matmul with the two weights stacked). Contracts:
// OpsBackend::swiglu_* (kernels/contracts/ops_backend.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

void swiglu_forward(const ExecContext& ctx, TensorView out, TensorView gate_up);

// silu'(g) = sigmoid(g) (1 + g (1 - sigmoid(g))).
void swiglu_backward(const ExecContext& ctx, TensorView dgate_up, TensorView gate_up, TensorView dout);

}  // namespace zt::cpu
