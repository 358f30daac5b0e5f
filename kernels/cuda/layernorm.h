// CUDA twin of kernels/cpu/layernorm.h: LayerNorm over the last dimension (eps 1e-5), computed in
// fp32, plus the residual-fused forward the GPU block uses (one pass over memory fewer per block and
// layer). Activations (out, inp, residual, a, b; dinp, dout) are all F32 or all BF16 per call
// (docs/precision.md); mean, rstd, weight, bias and the parameter gradients are F32.
// Contracts: OpsBackend::layernorm_* (kernels/contracts/ops_backend.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/contracts/layernorm_eps.h"  // kLayerNormEps
#include "kernels/cuda/norm_backward_rows.h"
#include "kernels/exec_context.h"

namespace zt::cuda {

void layernorm_forward(const ExecContext& ctx, TensorView out, TensorView mean, TensorView rstd, TensorView inp,
                       TensorView weight, TensorView bias);

// The residual add of one sub-block fused with the next LayerNorm, equal to residual_forward then
// layernorm_forward.
void layernorm_residual_forward(const ExecContext& ctx, TensorView residual, TensorView out, TensorView mean,
                                TensorView rstd, TensorView a, TensorView b, TensorView weight, TensorView bias);

// A BF16 dinp is rounded once after the fp32 add. The parameter gradients are summed per fixed 32-row chunk and the
// chunks added in order: deterministic, no float atomics. `rows`: which chunk kernel (NormBackwardRows).
void layernorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                        TensorView inp, TensorView weight, TensorView mean, TensorView rstd,
                        NormBackwardRows rows = NormBackwardRows::kBlock);

}  // namespace zt::cuda
