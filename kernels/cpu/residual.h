// Element-wise adds: the residual connection's forward, and in-place accumulation of one buffer
// into another (gradient accumulation, residual gradients), with bf16 destinations rounded RNE;
// and the in-place scaling of an average.
// Contracts: OpsBackend::residual_forward, accumulate_into, scale (kernels/contracts/ops_backend.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

void residual_forward(const ExecContext& ctx, TensorView out, TensorView a, TensorView b);

void accumulate_into(const ExecContext& ctx, TensorView dst, TensorView src);

// x *= factor (F32), one rounding per element.
void scale(const ExecContext& ctx, TensorView x, float factor);

}  // namespace zt::cpu
