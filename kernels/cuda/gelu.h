// CUDA twin of kernels/cpu/gelu.h: GELU, tanh approximation (GPT-2's "gelu_new"), computed in fp32.
// Each op's operands are all F32 or all BF16 (docs/precision.md: bf16 results rounded once).
// Contracts: OpsBackend::gelu_* (kernels/contracts/ops_backend.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cuda {

void gelu_forward(const ExecContext& ctx, TensorView out, TensorView inp);

void gelu_backward(const ExecContext& ctx, TensorView dinp, TensorView inp, TensorView dout);

}  // namespace zt::cuda
