// Matrix product with bias, forward and backward, on fp32 through OpenBLAS sgemm.
// Rows are all leading dimensions flattened: inp [.., C] is read as [N, C].
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/contracts/weight_layout.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// out[N, OC] = inp[N, C] @ W + bias[OC]. bias may be an empty view (no bias).
void matmul_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight, WeightLayout layout,
                    TensorView bias);

// dinp[N, C] = dout @ W^T (overwritten; skipped when dinp is empty),
// dweight += inp^T @ dout in the weight's layout, dbias[OC] += column sums of dout (skipped when empty).
void matmul_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                     TensorView inp, TensorView weight, WeightLayout layout);

}  // namespace zt::cpu
