// CUDA twin of kernels/cpu/dropout.h: the same counter-based mask ([Note: dropout masks]), so a
// sample's mask is bit for bit the CPU's, and a GPU run drops exactly the elements a CPU run
// drops. One thread per Philox block (4 elements).
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/contracts/dropout_spec.h"  // DropoutSpec
#include "kernels/exec_context.h"

namespace zt::cuda {

using zt::DropoutSpec;

// Contracts: OpsBackend::dropout_* (kernels/contracts/ops_backend.h).
void dropout_forward(const ExecContext& ctx, TensorView out, TensorView in, const DropoutSpec& spec);

void dropout_backward(const ExecContext& ctx, TensorView dinp, TensorView dout, const DropoutSpec& spec);

}  // namespace zt::cuda
