// CUDA twin of kernels/cpu/adamw.h: AdamW over flat fp32 ranges in one fused multi-tensor kernel.
#pragma once

#include <vector>

#include "engine/base/core/tensor.h"
#include "kernels/contracts/adamw_params.h"  // AdamWHyper: one definition of the hyper-parameters for both backends
#include "kernels/exec_context.h"

namespace zt::cuda {

using zt::AdamWHyper;
using zt::AdamWSlice;

// Contract: OpsBackend::adamw_update (kernels/contracts/ops_backend.h). The arithmetic is the CPU's, operation for
// operation with no fused multiply-adds, so the GPU update is bitwise equal to the CPU's.
void adamw_update(const ExecContext& ctx, TensorView param, TensorView grad, TensorView m, TensorView v,
                  TensorView working_out, const AdamWHyper& hyper, int step, float grad_scale = 1.0f);

// Contract: OpsBackend::adamw_update_slices; one launch per 48 slices; every slice must have the
// same gradient dtype and working-copy dtype (or none). Bitwise equal to the CPU's update.
void adamw_update_slices(const ExecContext& ctx, const std::vector<AdamWSlice>& slices, const AdamWHyper& hyper,
                         int step, float grad_scale = 1.0f);

}  // namespace zt::cuda
