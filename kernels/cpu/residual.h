// Element-wise adds: the residual connection's forward, and in-place accumulation of one buffer
// into another (gradient accumulation, residual gradients), with bf16 destinations rounded RNE.
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// out = a + b (fp32; out may alias a or b).
void residual_forward(const ExecContext& ctx, TensorView out, TensorView a, TensorView b);

// dst += src. src is F32; dst is F32 or BF16 (sum formed in fp32, then rounded to nearest even).
void accumulate_into(const ExecContext& ctx, TensorView dst, TensorView src);

}  // namespace zt::cpu
