// Token + learned position embedding, forward and backward (scatter-add), computed in fp32.
#pragma once

#include "engine/core/tensor.h"
#include "kernels/contracts/operand_checks.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]. tokens [B, T] i32, wte [Vp, C], wpe [max_T, C].
// The tables are F32, or BF16 (both) with a BF16 out (check_param_dtype): the sum is taken in fp32.
// Throws InternalError if a token is outside [0, Vp).
void embedding_forward(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte, TensorView wpe);

// dwte[tokens[b, t], :] += dout[b, t, :], dwpe[t, :] += sum over b of dout[b, t, :]; dwte and dwpe F32.
// Deterministic: each output row is summed in (b, t) order whatever the thread count.
void embedding_backward(const ExecContext& ctx, TensorView dwte, TensorView dwpe, TensorView dout, TensorView tokens);

}  // namespace zt::cpu
