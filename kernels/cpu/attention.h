// Causal multi-head self-attention core (after the qkv projection, before the output projection),
// forward and backward, fp32. Softmax subtracts the row maximum before exp.
#pragma once

#include "engine/base/core/tensor.h"
#include "kernels/contracts/dropout_spec.h"
#include "kernels/contracts/operand_checks.h"
#include "kernels/exec_context.h"

namespace zt::cpu {

// qkv [B, T, 3C] holds q | k | v, head h in columns [h*hs, (h+1)*hs) of each (hs = C / n_head).
// Writes out [B, T, C] (heads concatenated) and att [B, n_head, T, T]: the softmax probabilities,
// scaled by 1/sqrt(hs), zero above the diagonal. att is what backward needs.
// With an active `dropout`, out = dropout(att) @ v, the mask drawn per [Note: dropout masks] over
// each sample's [n_head, T, T] probabilities (j = (h * T + t) * T + t2); att stays pre-dropout.
// Grouped-query attention with `n_kv_head` < n_head (n_head a multiple of it; 0: n_head): qkv
// [B, T, (n_head + 2 n_kv_head) hs] holds n_head q heads, then n_kv_head k and v heads, query head
// h reading kv head h / (n_head / n_kv_head) (AttentionDims).
void attention_forward(const ExecContext& ctx, TensorView out, TensorView att, TensorView qkv, int n_head,
                       const DropoutSpec& dropout = {}, int n_kv_head = 0);

// dqkv [B, T, 3C] (overwritten) from dout [B, T, C], the forward's qkv and att, and the same
// dropout spec as the forward (its mask is regenerated, not stored).
// With grouped-query heads each kv head's dk and dv sum its query heads' terms in head order.
void attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView qkv, TensorView att,
                        int n_head, const DropoutSpec& dropout = {}, int n_kv_head = 0);

}  // namespace zt::cpu
