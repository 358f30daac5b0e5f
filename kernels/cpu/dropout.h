// Dropout with counter-based masks: whether element j of sample g is kept is a pure function of
// (seed, site, g, j) through Philox, so masks are never stored (backward regenerates them) and are
// the same at any number of ranks, any ZeRO stage and after a resume. See [Note: dropout masks]
// (kernels/contracts/dropout_spec.h). Contracts: OpsBackend::dropout_* (kernels/contracts/ops_backend.h).
#pragma once

#include <cstdint>

#include "engine/base/core/tensor.h"
#include "kernels/contracts/dropout_spec.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

void dropout_forward(const ExecContext& ctx, TensorView out, TensorView in, const DropoutSpec& spec);

void dropout_backward(const ExecContext& ctx, TensorView dinp, TensorView dout, const DropoutSpec& spec);

}  // namespace zt::cpu
