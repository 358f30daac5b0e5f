// CUDA twin of kernels/cpu/rope.h: rotary position embeddings in place on the first n_heads heads
// of each [B, T, W] row, F32 or BF16.
// Contracts: OpsBackend::rope_* (kernels/contracts/ops_backend.h).
#pragma once

#include <cstdint>

#include "engine/base/core/tensor.h"
#include "kernels/contracts/rope_angles.h"
#include "kernels/exec_context.h"

namespace zt::cuda {

void rope_forward(const ExecContext& ctx, TensorView x, int n_heads, int head_size, const RopeFrequencies& freq,
                  std::int64_t first_position = 0);
void rope_backward(const ExecContext& ctx, TensorView dx, int n_heads, int head_size, const RopeFrequencies& freq);

}  // namespace zt::cuda
