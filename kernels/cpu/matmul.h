// Matrix product with bias, forward and backward, on fp32 through OpenBLAS sgemm.
// Contracts: OpsBackend::matmul_* (kernels/contracts/ops_backend.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/contracts/weight_layout.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

void matmul_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight, WeightLayout layout,
                    TensorView bias);

void matmul_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                     TensorView inp, TensorView weight, WeightLayout layout);

}  // namespace zt::cpu
