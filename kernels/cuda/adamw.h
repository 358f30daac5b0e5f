// CUDA twin of kernels/cpu/adamw.h: AdamW over a flat fp32 shard in one fused kernel.
#pragma once

#include "engine/core/tensor.h"
#include "kernels/cpu/adamw.h"  // AdamWHyper: one definition of the hyper-parameters for both backends
#include "kernels/exec_context.h"

namespace zt::cuda {

using cpu::AdamWHyper;

// Same contract as cpu::adamw_update: param, m, v F32; grad F32 or BF16; optional working_out
// (F32 or BF16) receives the updated parameter. The arithmetic is the CPU's, operation for
// operation with no fused multiply-adds, so the GPU update is bitwise equal to the CPU's.
void adamw_update(const ExecContext& ctx, TensorView param, TensorView grad, TensorView m, TensorView v,
                  TensorView working_out, const AdamWHyper& hyper, int step, float grad_scale = 1.0f);

}  // namespace zt::cuda
