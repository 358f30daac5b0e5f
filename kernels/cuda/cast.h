// CUDA twin of kernels/cpu/cast.h: fp32 <-> bf16 conversions, bit-identical to the CPU's (RNE,
// NaN kept quiet with its sign, Inf kept).
// Contracts: OpsBackend::cast (kernels/contracts/ops_backend.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cuda {

// dst = src converted: F32->BF16, BF16->F32, or a plain device copy for equal dtypes. Same numel.
void cast(const ExecContext& ctx, TensorView dst, TensorView src);

}  // namespace zt::cuda
