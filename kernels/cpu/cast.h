// Conversions between fp32 and bf16 buffers (round to nearest even, NaN/Inf kept; see bf16.h).
// Contract: OpsBackend::cast (kernels/contracts/ops_backend.h).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

void cast(const ExecContext& ctx, TensorView dst, TensorView src);

}  // namespace zt::cpu
