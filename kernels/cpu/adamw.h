// AdamW on a flat fp32 buffer: decoupled weight decay and bias correction, as torch.optim.AdamW.
// The caller passes weight_decay = 0 for ranges that do not decay (biases, LayerNorm parameters).
// Contracts: OpsBackend::adamw_update* (kernels/contracts/ops_backend.h).
#pragma once

#include <vector>

#include "engine/base/core/tensor.h"
#include "kernels/contracts/adamw_params.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// The reference the CUDA twin matches bit for bit (compiled with -ffp-contract=off: no FMAs).
void adamw_update(const ExecContext& ctx, TensorView param, TensorView grad, TensorView m, TensorView v,
                  TensorView working_out, const AdamWHyper& hyper, int step, float grad_scale = 1.0f);

// The CUDA twin does it in one launch per 48 slices instead of one per slice (~110 per step for
// GPT-2).
void adamw_update_slices(const ExecContext& ctx, const std::vector<AdamWSlice>& slices, const AdamWHyper& hyper,
                         int step, float grad_scale = 1.0f);

}  // namespace zt::cpu
