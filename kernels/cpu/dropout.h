// Dropout with counter-based masks: whether element j of sample g is kept is a pure function of
// (seed, site, g, j) through Philox, so masks are never stored (backward regenerates them) and are
// the same at any number of ranks, any ZeRO stage and after a resume. See [Note: dropout masks]
// (kernels/contracts/dropout_spec.h).
#pragma once

#include <cstdint>

#include "engine/base/core/tensor.h"
#include "kernels/contracts/dropout_spec.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// out = in * mask / (1 - p), in and out [B, ...] with B = in.shape[0] samples (out may alias in).
void dropout_forward(const ExecContext& ctx, TensorView out, TensorView in, const DropoutSpec& spec);

// dinp = dout * mask / (1 - p), the same mask regenerated (dinp may alias dout).
void dropout_backward(const ExecContext& ctx, TensorView dinp, TensorView dout, const DropoutSpec& spec);

}  // namespace zt::cpu
