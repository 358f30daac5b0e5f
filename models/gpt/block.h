// One pre-LN transformer block, forward and backward, as a sequence of kernel calls (kernels/ops.h):
//   resid2 = x + attn_proj(attention(c_attn(ln_1(x))));  out = resid2 + mlp_proj(gelu(c_fc(ln_2(resid2)))).
#pragma once

#include "engine/core/buffer.h"
#include "kernels/contracts/dropout_spec.h"
#include "kernels/exec_context.h"
#include "models/gpt/activations.h"
#include "models/gpt/gpt_params.h"

namespace zt::gpt {

// The block's three dropout sites for this micro-batch (inactive specs when dropout is off).
struct BlockDropout {
  DropoutSpec attn_probs, attn_residual, mlp_residual;
};

// Activation-gradient scratch shared by all blocks' backward (workspace category).
struct BlockGradScratch {
  Buffer d_btc;     // [B,T,C]: d(ln_2 out), then d(attention out), then d(ln_1 out)
  Buffer d_branch;  // [B,T,C]: d(projection output) through a residual dropout mask
  Buffer d_qkv;     // [B,T,3C]
  Buffer d_bt4c;    // [B,T,4C]: d(gelu out), then d(c_fc out) in place

  BlockGradScratch(MemoryTracker& tracker, const ActivationDims& d, const ExecContext& ctx);
};

// Fills `acts` from input x [B,T,C]. When `out` is non-empty it receives the block output; a
// recompute for activation checkpointing passes an empty `out`, since the output is already kept.
void block_forward(const ExecContext& ctx, const BlockParams& p, TensorView x, BlockActivations& acts, TensorView out,
                   int n_head, const BlockDropout& dropout);

// On entry dresid holds d(out); on exit d(x). Parameter gradients are added into `grads`.
// `dropout` must be the forward's (masks are regenerated, not stored).
void block_backward(const ExecContext& ctx, const BlockParams& p, const BlockParams& grads, TensorView x,
                    const BlockActivations& acts, TensorView dresid, BlockGradScratch& scratch, int n_head,
                    const BlockDropout& dropout);

}  // namespace zt::gpt
