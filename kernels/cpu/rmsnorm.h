// RMSNorm over the last dimension (Llama's), forward and backward, computed in fp32. No mean is
// subtracted and there is no bias. Contracts: OpsBackend::rmsnorm_* (kernels/contracts/ops_backend.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// BF16 activations are staged through fp32 rows, each output rounded once.
void rmsnorm_forward(const ExecContext& ctx, TensorView out, TensorView rstd, TensorView inp, TensorView weight,
                     float eps);

// dweight sums fixed-size row chunks added in chunk order: the bits depend on the shapes only,
// never on the thread count.
void rmsnorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dout, TensorView inp,
                      TensorView weight, TensorView rstd);

}  // namespace zt::cpu
