// Token + learned position embedding, forward and backward (scatter-add), computed in fp32.
#pragma once

#include "engine/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]. tokens [B, T] i32, wte [Vp, C], wpe [max_T, C].
// The tables are F32, or BF16 (both) with a BF16 out (check_param_dtype): the sum is taken in fp32.
// Throws InternalError if a token is outside [0, Vp).
void embedding_forward(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte, TensorView wpe);

// dwte[tokens[b, t], :] += dout[b, t, :], dwpe[t, :] += sum over b of dout[b, t, :]; dwte and dwpe F32.
// Deterministic: each output row is summed in (b, t) order whatever the thread count.
void embedding_backward(const ExecContext& ctx, TensorView dwte, TensorView dwpe, TensorView dout, TensorView tokens);

// The operands every embedding kernel (CPU and CUDA) takes, checked: tokens I32 [B, T],
// wte [vocab, C], wpe [max_T, C] with T <= max_T, out/dout [B, T, C] F32 or BF16. The tables are the
// forward's parameters (F32, or both BF16 with a BF16 out: check_param_dtype, naming
// embedding_forward) or the backward's gradients (F32).
struct EmbeddingDims {
  std::int64_t B, T, C, vocab, max_T;
};
enum class EmbeddingTables { kParameters, kGradients };
EmbeddingDims embedding_dims(const TensorView& out_like, const TensorView& tokens, const TensorView& wte,
                             const TensorView& wpe, EmbeddingTables tables);

}  // namespace zt::cpu
