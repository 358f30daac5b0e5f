// Rotary position embeddings (RoPE, Llama's rotate-half form), forward and backward, in place, in
// fp32. In each row (b, t) of x [B, T, W], the first n_heads heads of head_size columns (q and k
// in a fused q|k|v projection's output) are rotated: for i < head_size / 2 the pair
// (x_i, x_{i + head_size/2}) turns by the angle t * inv_freq_i, inv_freq_i = 1 / theta^(2i /
// head_size), computed in fp32 as Hugging Face's LlamaRotaryEmbedding does (rope_angles below).
// The backward turns the gradient by minus the angle (the rotation's transpose). Columns past the
// rotated heads (v) are left as they are.
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

void rope_forward(const ExecContext& ctx, TensorView x, int n_heads, int head_size, float theta);
void rope_backward(const ExecContext& ctx, TensorView dx, int n_heads, int head_size, float theta);

}  // namespace zt::cpu
