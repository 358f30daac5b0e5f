// GELU, tanh approximation (GPT-2's "gelu_new"), forward and backward, fp32.
// Contracts: OpsBackend::gelu_* (kernels/contracts/ops_backend.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

void gelu_forward(const ExecContext& ctx, TensorView out, TensorView inp);

void gelu_backward(const ExecContext& ctx, TensorView dinp, TensorView inp, TensorView dout);

}  // namespace zt::cpu
