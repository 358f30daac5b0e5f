// CUDA twin of kernels/cpu/residual.h: the residual add and in-place accumulation.
// Contracts: OpsBackend::residual_forward, accumulate_into, scale (kernels/contracts/ops_backend.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cuda {

// out = a + b (out may alias a or b). out, a and b are all F32 or all BF16 (docs/precision.md): the
// sum is formed in fp32 and, for BF16, rounded once to nearest even.
void residual_forward(const ExecContext& ctx, TensorView out, TensorView a, TensorView b);

// dst += src. src is F32; dst is F32 or BF16 (sum formed in fp32, then rounded to nearest even).
void accumulate_into(const ExecContext& ctx, TensorView dst, TensorView src);

// x *= factor (F32).
void scale(const ExecContext& ctx, TensorView x, float factor);

}  // namespace zt::cuda
