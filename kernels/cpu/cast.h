// Conversions between fp32 and bf16 buffers (round to nearest even, NaN/Inf kept; see bf16.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// dst = src converted: F32->BF16, BF16->F32, or a plain copy for equal dtypes. Same numel.
void cast(const ExecContext& ctx, TensorView dst, TensorView src);

}  // namespace zt::cpu
