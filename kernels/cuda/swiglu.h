// CUDA twin of kernels/cpu/swiglu.h: SwiGLU on the fused gate and up projections' output
// gate_up [N, 2H] (gate in columns [0, H), up in [H, 2H)), computed in fp32; activations all F32
// or all BF16 per call.
// Contracts: OpsBackend::swiglu_* (kernels/contracts/ops_backend.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cuda {

void swiglu_forward(const ExecContext& ctx, TensorView out, TensorView gate_up);
void swiglu_backward(const ExecContext& ctx, TensorView dgate_up, TensorView gate_up, TensorView dout);

}  // namespace zt::cuda
